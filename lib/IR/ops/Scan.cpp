//===- Scan.cpp - cumsum, cumprod, cummax/min, logcumsumexp, diagonal(_scatter), index_reduce ===//
//
// Composites that decompose (lib/Decompose/DecomposeScan.cpp) before autodiff, so their
// gradients are those of the ops they become. Semantics (aten/src/ATen/native):
//  * cumsum(self, dim, dtype): ReduceOps.cpp; integral (and bool) inputs accumulate in int64
//    unless a dtype is given; a 0-d self is its own cumsum.
//  * diagonal(self, offset, dim1, dim2): TensorShape.cpp; the dims dim1 and dim2 are removed
//    and the diagonal (length max(0, min(n1, n2 - offset)) for offset >= 0, else
//    max(0, min(n1 + offset, n2))) is appended as the last dim.
//  * diagonal_scatter(self, src, ...): self with that diagonal replaced by src (cast to self's
//    dtype); src must have the diagonal's shape.
//  * index_reduce(self, dim, index, source, reduce, include_self): TensorAdvancedIndexing.cpp;
//    reduce is "prod", "mean", "amax" or "amin"; floating self and source only; index is 1-d with one entry per source
//    slice along dim, each in [0, self.size(dim)). Positions no index reaches keep self; with
//    include_self=False the others reduce the sources alone. mean divides by the count
//    (plus 1 with include_self).
//===----------------------------------------------------------------------===//
#include "Ops.h"

#include <cmath>

namespace aotc {
namespace ops {
namespace {

using Types = std::vector<TensorType>;

DType cumsumDType(const Node &n) {
  if (auto d = dtypeArg(n, 2)) return *d;
  DType t = argType(n, 0).dtype;
  return isIntegral(t) ? DType::I64 : t;
}

/// A running fold along dim (cumsum's layout rules): out[j] = f(out[j-1], x[j]), out[-1] = init,
/// in the result's dtype.
template <class F> RefTensor scanRef(const Node &n, const RefTensor &x, double init, F f) {
  DType dt = n.types[0].dtype;
  RefTensor out(dt, x.shape);
  Shape s = x.shape.empty() ? Shape{1} : x.shape;
  int64_t dim = wrapDimOrError(n, n.intArg(1), (int64_t)s.size());
  Along al(s, dim);
  for (int64_t o = 0; o < al.outer; ++o)
    for (int64_t i = 0; i < al.inner; ++i) {
      double acc = init;
      for (int64_t j = 0; j < al.len; ++j) {
        acc = castValue(dt, f(acc, castValue(dt, x.data[al.at(o, j, i)])));
        out.data[al.at(o, j, i)] = acc;
      }
    }
  return out;
}

} // namespace

DiagonalGeom diagonalGeom(const Node &n, const Shape &s, int64_t offset, int64_t dim1, int64_t dim2) {
  int64_t r = (int64_t)s.size();
  if (r < 2) nodeError(n, "diagonal: the input must have at least 2 dimensions, got " + shapeStr(s));
  DiagonalGeom g;
  g.d1 = wrapDimOrError(n, dim1, r);
  g.d2 = wrapDimOrError(n, dim2, r);
  if (g.d1 == g.d2)
    nodeError(n, "diagonal dimensions cannot be identical " + std::to_string(dim1) + ", " + std::to_string(dim2));
  int64_t n1 = s[g.d1], n2 = s[g.d2];
  g.len = offset >= 0 ? std::max<int64_t>(0, std::min(n1, n2 - offset)) : std::max<int64_t>(0, std::min(n1 + offset, n2));
  g.row0 = offset >= 0 ? 0 : -offset;
  g.col0 = offset >= 0 ? offset : 0;
  for (int64_t k = 0; k < r; ++k)
    if (k != g.d1 && k != g.d2) g.shape.push_back(s[k]);
  g.shape.push_back(g.len);
  return g;
}

/// Flat offsets into `s` of every element of diagonal's result, in its row-major order.
static std::vector<int64_t> diagonalOffsets(const DiagonalGeom &g, const Shape &s) {
  std::vector<int64_t> off;
  int64_t total = numelOf(g.shape);
  for (int64_t k = 0; k < total; ++k) {
    std::vector<int64_t> ri = unravel(k, g.shape), si(s.size());
    size_t p = 0;
    for (size_t d = 0; d < s.size(); ++d)
      if ((int64_t)d != g.d1 && (int64_t)d != g.d2) si[d] = ri[p++];
    si[g.d1] = g.row0 + ri.back();
    si[g.d2] = g.col0 + ri.back();
    off.push_back(ravel(si, s));
  }
  return off;
}

void registerScanOps(OpRegistry &r) {
  {
    OpDef &d = r.add("diagonal(Tensor(a) self, int offset=0, int dim1=0, int dim2=1) -> Tensor(a)", OpCategory::Composite);
    d.infer = [](const Node &n) -> Types {
      TensorType t = argType(n, 0);
      return {{t.dtype, diagonalGeom(n, t.shape, n.intArg(1), n.intArg(2), n.intArg(3)).shape}};
    };
    setEval(d, [](const Node &n, const RefArgs &a) {
      const RefTensor &x = *a.at(0);
      DiagonalGeom g = diagonalGeom(n, x.shape, n.intArg(1), n.intArg(2), n.intArg(3));
      RefTensor out(x.dtype, g.shape);
      std::vector<int64_t> off = diagonalOffsets(g, x.shape);
      for (size_t k = 0; k < off.size(); ++k) out.data[k] = x.data[off[k]];
      return out;
    });
  }
  {
    OpDef &d = r.add("diagonal_scatter(Tensor self, Tensor src, int offset=0, int dim1=0, int dim2=1) -> Tensor",
                     OpCategory::Composite);
    d.infer = [](const Node &n) -> Types {
      TensorType t = argType(n, 0), s = argType(n, 1);
      DiagonalGeom g = diagonalGeom(n, t.shape, n.intArg(2), n.intArg(3), n.intArg(4));
      if (s.shape != g.shape)
        nodeError(n, "diagonal_scatter: expected src to have a size equal to the slice of self. src size = " +
                         shapeStr(s.shape) + ", slice size = " + shapeStr(g.shape));
      return {t};
    };
    setEval(d, [](const Node &n, const RefArgs &a) {
      RefTensor out = *a.at(0);
      const RefTensor &src = *a.at(1);
      DiagonalGeom g = diagonalGeom(n, out.shape, n.intArg(2), n.intArg(3), n.intArg(4));
      std::vector<int64_t> off = diagonalOffsets(g, out.shape);
      for (size_t k = 0; k < off.size(); ++k) out.data[off[k]] = castValue(out.dtype, src.data[k]);
      return out;
    });
  }
  {
    OpDef &d = r.add("index_reduce(Tensor self, int dim, Tensor index, Tensor source, str reduce, *, "
                     "bool include_self=True) -> Tensor",
                     OpCategory::Composite);
    d.indexArgs = {2};
    d.infer = [](const Node &n) -> Types {
      TensorType t = argType(n, 0), ix = argType(n, 2), s = argType(n, 3);
      const std::string &red = std::get<std::string>(n.args.at(4));
      if (red != "prod" && red != "mean" && red != "amax" && red != "amin")
        nodeError(n, "index_reduce(): Expected reduce to be one of prod, mean, amax or amin but got " + red + ".");
      if (!isFloating(t.dtype) || s.dtype != t.dtype)
        nodeError(n, "index_reduce: self and source must have the same floating dtype, got " + t.str() + " and " +
                         s.str());
      if (isFloating(ix.dtype) || ix.dtype == DType::Bool || ix.rank() > 1)
        nodeError(n, "index_reduce_(): Expected index to be a 1-d integer tensor, got " + ix.str());
      int64_t r = std::max<int64_t>(t.rank(), 1), dim = wrapDimOrError(n, n.intArg(1), r);
      Shape want = t.shape.empty() ? Shape{1} : t.shape;
      int64_t k = ix.rank() ? ix.shape[0] : 1;
      want[dim] = k;
      Shape got = s.shape.empty() ? Shape{1} : s.shape;
      if (got != want)
        nodeError(n, "index_reduce: source " + shapeStr(s.shape) + " must have self's shape with " +
                         std::to_string(k) + " (the number of indices) in dim " + std::to_string(dim));
      return {t};
    };
    setEval(d, [](const Node &n, const RefArgs &a) {
      RefTensor out = *a.at(0);
      const RefTensor &ix = *a.at(2), &src = *a.at(3);
      const std::string &red = std::get<std::string>(n.args.at(4));
      bool self = n.boolArg(5);
      Shape s = out.shape.empty() ? Shape{1} : out.shape, ss = src.shape.empty() ? Shape{1} : src.shape;
      int64_t dim = wrapDimOrError(n, n.intArg(1), (int64_t)s.size());
      Along so(s, dim), sk(ss, dim);
      std::vector<double> acc(out.numel()), cnt(out.numel(), self ? 1 : 0);
      std::vector<bool> hit(out.numel(), false);
      double init = red == "amax" ? -INFINITY : red == "amin" ? INFINITY : red == "prod" ? 1.0 : 0.0;
      for (int64_t p = 0; p < out.numel(); ++p) acc[p] = self ? out.data[p] : init;
      for (int64_t k = 0; k < sk.len; ++k) {
        int64_t j = (int64_t)ix.data[k];
        if (j < 0 || j >= so.len)
          nodeError(n, "index_reduce: index " + std::to_string(j) + " is out of bounds for dimension " +
                           std::to_string(dim) + " with size " + std::to_string(so.len));
        for (int64_t o = 0; o < so.outer; ++o)
          for (int64_t i = 0; i < so.inner; ++i) {
            int64_t p = so.at(o, j, i);
            double v = src.data[sk.at(o, k, i)];
            hit[p] = true;
            cnt[p] += 1;
            if (red == "mean") acc[p] += v;
            else if (red == "prod") acc[p] *= v;
            else if (std::isnan(v) || std::isnan(acc[p])) acc[p] = NAN;
            else acc[p] = red == "amax" ? std::max(acc[p], v) : std::min(acc[p], v);
          }
      }
      for (int64_t p = 0; p < out.numel(); ++p)
        if (hit[p]) out.data[p] = red == "mean" ? acc[p] / cnt[p] : acc[p];
      return out;
    });
  }
  // cumsum and cumprod (ReduceOps.cpp): the running sum / product in the result dtype.
  for (bool sum : {true, false}) {
    OpDef &d = r.add(std::string(sum ? "cumsum" : "cumprod") + "(Tensor self, int dim, *, ScalarType? dtype=None) -> Tensor",
                     OpCategory::Composite);
    d.infer = [](const Node &n) -> Types {
      TensorType t = argType(n, 0);
      wrapDimOrError(n, n.intArg(1), std::max<int64_t>(t.rank(), 1));
      return {{cumsumDType(n), t.shape}};
    };
    setEval(d, [sum](const Node &n, const RefArgs &a) {
      if (sum) return scanRef(n, *a.at(0), 0.0, [](double acc, double v) { return acc + v; });
      return scanRef(n, *a.at(0), 1.0, [](double acc, double v) { return acc * v; });
    });
  }
  {
    // logcumsumexp (floating: log of the running sum of exp, computed stably here as
    // max + log sum exp(x - max)).
    OpDef &l = r.add("logcumsumexp(Tensor self, int dim) -> Tensor", OpCategory::Composite);
    l.infer = [](const Node &n) -> Types {
      TensorType t = argType(n, 0);
      wrapDimOrError(n, n.intArg(1), std::max<int64_t>(t.rank(), 1));
      if (!isFloating(t.dtype)) nodeError(n, "logcumsumexp: expected a floating tensor, got " + t.str());
      return {t};
    };
    setEval(l, [](const Node &n, const RefArgs &a) {
      return scanRef(n, *a.at(0), -INFINITY, [](double acc, double v) -> double {
        if (std::isnan(acc) || std::isnan(v)) return NAN;
        double m = std::max(acc, v);
        if (m == -INFINITY) return m;
        if (m == INFINITY) return acc == v || acc < v ? v : acc; // inf stays inf (never inf - inf)
        return m + std::log(std::exp(acc - m) + std::exp(v - m));
      });
    });
  }
  // cummax / cummin (ReduceOps.cpp cummax_cummin_helper): values and the index of the last
  // element equal to the running extremum (`x >= out` updates), a NaN once seen staying (the
  // index of the latest NaN).
  for (bool mx : {true, false}) {
    OpDef &d = r.add(std::string(mx ? "cummax" : "cummin") + "(Tensor self, int dim) -> (Tensor values, Tensor indices)",
                     OpCategory::Composite);
    d.infer = [](const Node &n) -> Types {
      TensorType t = argType(n, 0);
      wrapDimOrError(n, n.intArg(1), std::max<int64_t>(t.rank(), 1));
      return {t, {DType::I64, t.shape}};
    };
    d.eval = [mx](const Node &n, const RefArgs &a, const std::vector<std::vector<const RefTensor *>> &) {
      const RefTensor &x = *a.at(0);
      RefTensor vals(x.dtype, x.shape), idx(DType::I64, x.shape);
      Shape s = x.shape.empty() ? Shape{1} : x.shape;
      int64_t dim = wrapDimOrError(n, n.intArg(1), (int64_t)s.size());
      Along al(s, dim);
      for (int64_t o = 0; o < al.outer; ++o)
        for (int64_t i = 0; i < al.inner; ++i) {
          double out = 0;
          int64_t at = 0;
          for (int64_t j = 0; j < al.len; ++j) {
            double v = x.data[al.at(o, j, i)];
            if (j == 0 || std::isnan(v) || (!std::isnan(out) && (mx ? v >= out : v <= out))) {
              out = v;
              at = j;
            }
            vals.data[al.at(o, j, i)] = out;
            idx.data[al.at(o, j, i)] = (double)at;
          }
        }
      return std::vector<RefTensor>{vals, idx};
    };
  }
}

} // namespace ops
} // namespace aotc
