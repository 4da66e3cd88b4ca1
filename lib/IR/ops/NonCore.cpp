//===- NonCore.cpp - Ops torch's default decompositions leave outside Core ATen ----===//
//
// Composites an exported graph can hold after run_decompositions() although they are not
// Core ATen (torch has no default decomposition for them); each decomposes
// (lib/Decompose/DecomposeNonCore.cpp) before autodiff, so its gradient is that of the ops it
// becomes, which is torch's derivatives.yaml formula (noted per op there). Semantics from
// aten/src/ATen/native (cited per op); the float64 references below are direct loops.
//  * pointwise: copysign (INT_TO_FLOAT), fmax / fmin (NaN ignored when the other is a number),
//    hypot, ldexp (self * 2^other);
//  * the *_copy forms of views (view_copy, permute_copy, narrow_copy, unbind_copy,
//    as_strided_copy): the view's shape function and values, as a new tensor;
//    as_strided_scatter: self with the as_strided view of its dense layout replaced by src;
//  * matmul family: addmv, addbmm (beta * self + alpha * ..., self ignored when beta == 0);
//    _trilinear (nn.Bilinear: the three inputs unsqueezed at expand1/2/3, multiplied, summed
//    over sumdim);
//  * dist(self, other, p): the p-norm of self - other (0, inf, -inf included);
//  * put(self, index, source, accumulate): index_put into the flattened self;
//  * empty_permuted: zeros (aotc's empty* are deterministic zeros; the physical layout is
//    irrelevant in a dense row-major world).
//===----------------------------------------------------------------------===//
#include "Ops.h"

#include <cmath>
#include <functional>

namespace aotc {
namespace ops {
namespace {

using Types = std::vector<TensorType>;
using Fn2 = std::function<double(double, double)>;

/// A binary elementwise composite over args 0 and 1: DEFAULT promotion, or INT_TO_FLOAT.
OpDef &binaryComposite(OpRegistry &r, const char *schema, bool toFloat, bool floatingOnly, Fn2 f) {
  OpDef &d = r.add(schema, OpCategory::Composite);
  d.infer = [toFloat, floatingOnly](const Node &n) -> Types {
    Shape s = broadcastArgs(n, {0, 1});
    DType dt = resultType(n, {0, 1});
    if (floatingOnly && !isFloating(dt)) nodeError(n, n.target + " is only supported for floating tensors here, got " + std::string(dtypeTorchName(dt)));
    if (dt == DType::Bool && !toFloat) nodeError(n, n.target + " is not supported for bool tensors");
    return {{toFloat ? intToFloat(dt) : dt, s}};
  };
  setEval(d, [f](const Node &n, const RefArgs &a) {
    return mapArgs(n, a, {0, 1}, [&](const double *x) { return f(x[0], x[1]); });
  });
  return d;
}

/// An op with `view`'s schema (a name_copy form, or _embedding_bag_forward_only): its shape
/// function, values and index arguments.
void sameAs(OpRegistry &r, const char *schema, const char *view) {
  const OpDef *v = r.lookup(view);
  AOTC_ASSERT(v, std::string("registerNonCoreOps: ") + view + " is registered first");
  OpDef &d = r.add(schema, OpCategory::Composite);
  d.infer = v->infer;
  d.eval = v->eval;
  d.indexArgs = v->indexArgs;
  d.nonDifferentiable = v->nonDifferentiable;
}

} // namespace

void registerNonCoreOps(OpRegistry &r) {
  // copysign (BinaryOps.cpp copysign_kernel: std::copysign; INT_TO_FLOAT).
  binaryComposite(r, "copysign.Tensor(Tensor self, Tensor other) -> Tensor", true, false,
                  [](double x, double y) { return std::copysign(x, y); });
  binaryComposite(r, "copysign.Scalar(Tensor self, Scalar other) -> Tensor", true, false,
                  [](double x, double y) { return std::copysign(x, y); });
  // fmax / fmin (BinaryOps.cpp: std::fmax / std::fmin for floating, max / min for integers).
  binaryComposite(r, "fmax(Tensor self, Tensor other) -> Tensor", false, false,
                  [](double x, double y) { return std::fmax(x, y); });
  binaryComposite(r, "fmin(Tensor self, Tensor other) -> Tensor", false, false,
                  [](double x, double y) { return std::fmin(x, y); });
  binaryComposite(r, "hypot(Tensor self, Tensor other) -> Tensor", false, true,
                  [](double x, double y) { return std::hypot(x, y); });
  // ldexp (BinaryOps.cpp ldexp: self * pow(2, other), INT_TO_FLOAT of the pair).
  binaryComposite(r, "ldexp.Tensor(Tensor self, Tensor other) -> Tensor", true, false,
                  [](double x, double y) { return x * std::exp2(y); })
      .indexArgs = {1}; // exponents may be int32 (decompose casts them to the result dtype)

  // _embedding_bag_forward_only: _embedding_bag's schema, results and shape function (torch
  // picks it when no input requires grad; aotc differentiates it as _embedding_bag).
  sameAs(r, "_embedding_bag_forward_only(Tensor weight, Tensor indices, Tensor offsets, bool scale_grad_by_freq=False, "
              "int mode=0, bool sparse=False, Tensor? per_sample_weights=None, bool include_last_offset=False, "
              "int padding_idx=-1) -> (Tensor, Tensor, Tensor, Tensor)",
           "aten._embedding_bag.default");
  sameAs(r, "view_copy(Tensor self, SymInt[] size) -> Tensor", "aten.view.default");
  sameAs(r, "permute_copy(Tensor self, int[] dims) -> Tensor", "aten.permute.default");
  sameAs(r, "unbind_copy.int(Tensor self, int dim=0) -> Tensor[]", "aten.unbind.int");
  sameAs(r, "as_strided_copy(Tensor self, SymInt[] size, SymInt[] stride, SymInt? storage_offset=None) -> Tensor",
           "aten.as_strided.default");
  {
    // narrow_copy(self, dim, start, length): TensorShape.cpp narrow_copy_symint (start may be
    // negative: + size; start + length must stay inside the dim).
    OpDef &d = r.add("narrow_copy(Tensor self, int dim, SymInt start, SymInt length) -> Tensor", OpCategory::Composite);
    d.infer = [](const Node &n) -> Types {
      TensorType t = argType(n, 0);
      if (t.rank() == 0) nodeError(n, "narrow() cannot be applied to a 0-dim tensor.");
      int64_t dim = wrapDimOrError(n, n.intArg(1), t.rank()), size = t.shape[dim];
      int64_t start = n.intArg(2), len = n.intArg(3);
      if (start < -size || start > size)
        nodeError(n, "start out of range (expected to be in range of [" + std::to_string(-size) + ", " +
                         std::to_string(size) + "], but got " + std::to_string(start) + ")");
      if (start < 0) start += size;
      if (len < 0 || start > size - len)
        nodeError(n, "start (" + std::to_string(start) + ") + length (" + std::to_string(len) +
                         ") exceeds dimension size (" + std::to_string(size) + ").");
      t.shape[dim] = len;
      return {t};
    };
    setEval(d, [](const Node &n, const RefArgs &a) {
      const RefTensor &x = *a.at(0);
      int64_t dim = wrapDimOrError(n, n.intArg(1), (int64_t)x.shape.size()), start = n.intArg(2);
      if (start < 0) start += x.shape[dim];
      RefTensor out(x.dtype, n.types[0].shape);
      for (int64_t k = 0; k < out.numel(); ++k) {
        std::vector<int64_t> idx = unravel(k, out.shape);
        idx[dim] += start;
        out.data[k] = x.data[ravel(idx, x.shape)];
      }
      return out;
    });
  }
  {
    // as_strided_scatter(self, src, size, stride, storage_offset): src written where
    // as_strided(self, size, stride, offset) reads self's dense layout (overlapping views:
    // the last write in row-major order of src wins).
    OpDef &d = r.add("as_strided_scatter(Tensor self, Tensor src, SymInt[] size, SymInt[] stride, "
                     "SymInt? storage_offset=None) -> Tensor",
                     OpCategory::Composite);
    d.infer = [](const Node &n) -> Types {
      TensorType t = argType(n, 0), s = argType(n, 1);
      const std::vector<int64_t> &size = n.intListArg(2), &stride = n.intListArg(3);
      int64_t off = n.isNoneArg(4) ? 0 : n.intArg(4);
      if (size.size() != stride.size())
        nodeError(n, "mismatch in length of strides and shape (" + std::to_string(size.size()) + " vs " +
                         std::to_string(stride.size()) + ")");
      if (s.shape != Shape(size.begin(), size.end()))
        nodeError(n, "expected src to have a size equal to the slice of self. src size = " + shapeStr(s.shape) +
                         ", slice size = " + shapeStr(size));
      int64_t last = off;
      bool empty = false;
      for (size_t i = 0; i < size.size(); ++i) {
        if (stride[i] < 0) nodeError(n, "as_strided_scatter: negative strides are not supported");
        empty |= size[i] == 0;
        if (size[i] > 0) last += (size[i] - 1) * stride[i];
      }
      if (off < 0 || (!empty && last >= t.numel()))
        nodeError(n, "as_strided_scatter: the view (sizes " + shapeStr(size) + ", strides " + shapeStr(stride) +
                         ", offset " + std::to_string(off) + ") reaches outside self's " + std::to_string(t.numel()) +
                         " elements");
      if (!canCast(s.dtype, t.dtype)) nodeError(n, "as_strided_scatter: cannot cast src " + s.str() + " to " + t.str());
      return {t};
    };
    setEval(d, [](const Node &n, const RefArgs &a) {
      RefTensor out = *a.at(0);
      const RefTensor &src = *a.at(1);
      const std::vector<int64_t> &stride = n.intListArg(3);
      int64_t off = n.isNoneArg(4) ? 0 : n.intArg(4);
      for (int64_t k = 0; k < src.numel(); ++k) {
        std::vector<int64_t> idx = unravel(k, src.shape);
        int64_t p = off;
        for (size_t i = 0; i < idx.size(); ++i) p += idx[i] * stride[i];
        out.data[p] = castValue(out.dtype, src.data[k]);
      }
      return out;
    });
  }
  {
    // addmv(self, mat, vec, beta, alpha) = beta * self + alpha * mat @ vec (Blas.cpp; self
    // broadcasts to [n]; beta == 0 ignores self, NaN included).
    OpDef &d = r.add("addmv(Tensor self, Tensor mat, Tensor vec, *, Scalar beta=1, Scalar alpha=1) -> Tensor",
                     OpCategory::Composite);
    d.infer = [](const Node &n) -> Types {
      TensorType s = argType(n, 0), m = argType(n, 1), v = argType(n, 2);
      if (m.rank() != 2 || v.rank() != 1 || m.shape[1] != v.shape[0])
        nodeError(n, "vector + matrix @ vector expected, got " + std::to_string(s.rank()) + ", " +
                         std::to_string(m.rank()) + ", " + std::to_string(v.rank()) + " (sizes " + shapeStr(m.shape) +
                         " and " + shapeStr(v.shape) + ")");
      if (m.dtype != v.dtype || s.dtype != m.dtype || !isFloating(m.dtype))
        nodeError(n, "addmv: expected self, mat and vec of one floating dtype, got " + s.str() + ", " + m.str() +
                         ", " + v.str());
      Shape out = {m.shape[0]};
      auto bs = broadcastShapes(s.shape, out);
      if (!bs || *bs != out) nodeError(n, "self of shape " + shapeStr(s.shape) + " cannot be broadcast to " + shapeStr(out));
      return {{m.dtype, out}};
    };
    setEval(d, [](const Node &n, const RefArgs &a) {
      const RefTensor &S = *a[0], &M = *a[1], &V = *a[2];
      double beta = n.scalarArg(3), alpha = n.scalarArg(4);
      RefTensor out(n.types[0].dtype, n.types[0].shape);
      auto map = broadcastIndexMap(S.shape, out.shape);
      int64_t K = V.shape[0];
      for (int64_t i = 0; i < out.numel(); ++i) {
        double acc = 0;
        for (int64_t k = 0; k < K; ++k) acc += M.data[i * K + k] * V.data[k];
        out.data[i] = castValue(out.dtype, alpha * acc + (beta == 0 ? 0.0 : beta * S.data[map[i]]));
      }
      return out;
    });
  }
  {
    // addbmm(self, batch1, batch2, beta, alpha) = beta * self + alpha * sum_b batch1[b] @ batch2[b].
    OpDef &d = r.add("addbmm(Tensor self, Tensor batch1, Tensor batch2, *, Scalar beta=1, Scalar alpha=1) -> Tensor",
                     OpCategory::Composite);
    d.infer = [](const Node &n) -> Types {
      TensorType s = argType(n, 0), b1 = argType(n, 1), b2 = argType(n, 2);
      if (b1.rank() != 3 || b2.rank() != 3) nodeError(n, "batch1 must be a 3D tensor, batch2 must be a 3D tensor");
      if (b1.shape[0] != b2.shape[0] || b1.shape[2] != b2.shape[1])
        nodeError(n, "addbmm: incompatible batches " + shapeStr(b1.shape) + " and " + shapeStr(b2.shape));
      if (b1.dtype != b2.dtype || s.dtype != b1.dtype || !isFloating(b1.dtype))
        nodeError(n, "addbmm: expected self, batch1 and batch2 of one floating dtype");
      Shape out = {b1.shape[1], b2.shape[2]};
      auto bs = broadcastShapes(s.shape, out);
      if (!bs || *bs != out) nodeError(n, "self of shape " + shapeStr(s.shape) + " cannot be broadcast to " + shapeStr(out));
      return {{b1.dtype, out}};
    };
    setEval(d, [](const Node &n, const RefArgs &a) {
      const RefTensor &S = *a[0], &A = *a[1], &B = *a[2];
      double beta = n.scalarArg(3), alpha = n.scalarArg(4);
      int64_t nb = A.shape[0], M = A.shape[1], K = A.shape[2], N = B.shape[2];
      RefTensor out(n.types[0].dtype, n.types[0].shape);
      auto map = broadcastIndexMap(S.shape, out.shape);
      for (int64_t i = 0; i < M; ++i)
        for (int64_t j = 0; j < N; ++j) {
          double acc = 0;
          for (int64_t b = 0; b < nb; ++b)
            for (int64_t k = 0; k < K; ++k) acc += A.data[(b * M + i) * K + k] * B.data[(b * K + k) * N + j];
          out.data[i * N + j] = castValue(out.dtype, alpha * acc + (beta == 0 ? 0.0 : beta * S.data[map[i * N + j]]));
        }
      return out;
    });
  }
  {
    // dist(self, other, p): ||self - other||_p over every element (0: the count of non-zeros,
    // +-inf: the largest / smallest |difference|); floating only.
    OpDef &d = r.add("dist(Tensor self, Tensor other, Scalar p=2) -> Tensor", OpCategory::Composite);
    d.infer = [](const Node &n) -> Types {
      broadcastArgs(n, {0, 1});
      DType dt = resultType(n, {0, 1});
      if (!isFloating(dt)) nodeError(n, "dist only supports floating-point dtypes, got " + std::string(dtypeTorchName(dt)));
      return {{dt, {}}};
    };
    setEval(d, [](const Node &n, const RefArgs &a) {
      Shape s = *broadcastShapes(a[0]->shape, a[1]->shape);
      Val x = valArg(n, a, 0, s), y = valArg(n, a, 1, s);
      double p = n.scalarArg(2), acc = std::isinf(p) ? (p > 0 ? 0.0 : INFINITY) : 0.0;
      int64_t total = numelOf(s);
      for (int64_t k = 0; k < total; ++k) {
        double v = std::fabs(x.at(k) - y.at(k));
        if (std::isnan(v)) acc = NAN;
        else if (std::isnan(acc)) continue;
        else if (p == 0) acc += v != 0;
        else if (std::isinf(p)) acc = p > 0 ? std::max(acc, v) : std::min(acc, v);
        else acc += std::pow(v, p);
      }
      if (p != 0 && !std::isinf(p) && total > 0) acc = std::pow(acc, 1 / p);
      if (total == 0) acc = std::isinf(p) && p > 0 ? 0.0 : acc; // torch: an empty norm is 0
      RefTensor out(n.types[0].dtype, {});
      out.data[0] = castValue(out.dtype, acc);
      return out;
    });
  }
  {
    // put(self, index, source, accumulate): self.flatten()[index] = source.flatten() (or +=),
    // negative indices count from the end, each in range (TensorAdvancedIndexing.cpp put_).
    OpDef &d = r.add("put(Tensor self, Tensor index, Tensor source, bool accumulate=False) -> Tensor",
                     OpCategory::Composite);
    d.indexArgs = {1};
    d.infer = [](const Node &n) -> Types {
      TensorType t = argType(n, 0), ix = argType(n, 1), s = argType(n, 2);
      if (isFloating(ix.dtype) || ix.dtype == DType::Bool)
        nodeError(n, "put_(): Expected a long tensor for index, but got " + ix.str());
      if (s.dtype != t.dtype)
        nodeError(n, "put_(): self and source expected to have the same dtype, but got " + t.str() + " and " + s.str());
      if (ix.numel() != s.numel())
        nodeError(n, "put_(): Expected source and index to have the same number of elements, but got source.numel() = " +
                         std::to_string(s.numel()) + ", index.numel() = " + std::to_string(ix.numel()));
      if (t.numel() == 0 && ix.numel() > 0) nodeError(n, "put_(): Tried to put elements into an empty tensor");
      return {t};
    };
    setEval(d, [](const Node &n, const RefArgs &a) {
      RefTensor out = *a.at(0);
      const RefTensor &ix = *a.at(1), &src = *a.at(2);
      bool acc = n.boolArg(3);
      int64_t N = out.numel();
      for (int64_t k = 0; k < ix.numel(); ++k) {
        int64_t j = (int64_t)ix.data[k];
        if (j < -N || j >= N)
          nodeError(n, "put_(): index " + std::to_string(j) + " out of range for tensor of size " +
                           shapeStr(out.shape));
        if (j < 0) j += N;
        out.data[j] = castValue(out.dtype, acc ? out.data[j] + src.data[k] : src.data[k]);
      }
      return out;
    });
  }
  {
    // _trilinear(i1, i2, i3, expand1, expand2, expand3, sumdim, unroll_dim) (Linear.cpp):
    // each input unsqueezed at its expand dims to a common rank, the three multiplied with
    // broadcasting, summed over sumdim (removed). unroll_dim only picks torch's loop order.
    OpDef &d = r.add("_trilinear(Tensor i1, Tensor i2, Tensor i3, int[] expand1, int[] expand2, int[] expand3, "
                     "int[] sumdim, int unroll_dim=1) -> Tensor",
                     OpCategory::Composite);
    d.infer = [](const Node &n) -> Types {
      TensorType t1 = argType(n, 0), t2 = argType(n, 1), t3 = argType(n, 2);
      int64_t total = t1.rank() + (int64_t)n.intListArg(3).size();
      Shape full(total, 1);
      for (int k = 0; k < 3; ++k) {
        TensorType t = argType(n, k);
        const std::vector<int64_t> &ex = n.intListArg(3 + k);
        if (t.rank() + (int64_t)ex.size() != total)
          nodeError(n, "_trilinear: input " + std::to_string(k + 1) + " " + t.str() + " with " +
                         std::to_string(ex.size()) + " expanded dims does not have rank " + std::to_string(total));
        std::vector<bool> isEx(total, false);
        for (int64_t e : ex) isEx[wrapDimOrError(n, e, total)] = true;
        size_t src = 0;
        for (int64_t q = 0; q < total; ++q) {
          if (isEx[q]) continue;
          int64_t sz = t.shape.at(src++);
          if (full[q] != 1 && sz != 1 && sz != full[q]) nodeError(n, "_trilinear: the inputs' sizes do not broadcast");
          if (sz != 1) full[q] = sz;
        }
      }
      if (t1.dtype != t2.dtype || t1.dtype != t3.dtype || !isFloating(t1.dtype))
        nodeError(n, "_trilinear: expected three tensors of one floating dtype");
      std::vector<bool> summed(total, false);
      for (int64_t s : n.intListArg(6)) summed[wrapDimOrError(n, s, total)] = true;
      Shape out;
      for (int64_t q = 0; q < total; ++q)
        if (!summed[q]) out.push_back(full[q]);
      return {{t1.dtype, out}};
    };
    setEval(d, [](const Node &n, const RefArgs &a) {
      int64_t total = (int64_t)a[0]->shape.size() + (int64_t)n.intListArg(3).size();
      Shape full(total, 1);
      std::vector<Shape> ushape(3);
      for (int k = 0; k < 3; ++k) {
        std::vector<bool> isEx(total, false);
        for (int64_t e : n.intListArg(3 + k)) isEx[*wrapDim(e, total)] = true;
        size_t src = 0;
        for (int64_t q = 0; q < total; ++q) {
          ushape[k].push_back(isEx[q] ? 1 : a[k]->shape[src++]);
          full[q] = std::max(full[q], ushape[k][q]);
        }
      }
      std::vector<bool> summed(total, false);
      for (int64_t s : n.intListArg(6)) summed[*wrapDim(s, total)] = true;
      RefTensor out(n.types[0].dtype, n.types[0].shape);
      std::vector<std::vector<int64_t>> maps;
      for (int k = 0; k < 3; ++k) maps.push_back(broadcastIndexMap(ushape[k], full));
      for (int64_t f = 0; f < numelOf(full); ++f) {
        std::vector<int64_t> idx = unravel(f, full), oi;
        for (int64_t q = 0; q < total; ++q)
          if (!summed[q]) oi.push_back(idx[q]);
        out.data[ravel(oi, out.shape)] += a[0]->data[maps[0][f]] * a[1]->data[maps[1][f]] * a[2]->data[maps[2][f]];
      }
      for (double &v : out.data) v = castValue(out.dtype, v);
      return out;
    });
  }
  {
    // empty_permuted(size, physical_layout, ...): zeros of `size` (as empty.memory_format).
    OpDef &d = r.add("empty_permuted(SymInt[] size, int[] physical_layout, *, ScalarType? dtype=None, "
                     "Layout? layout=None, Device? device=None, bool? pin_memory=None) -> Tensor",
                     OpCategory::Composite);
    d.nonDifferentiable = true;
    d.infer = [](const Node &n) -> Types {
      const std::vector<int64_t> &size = n.intListArg(0), &perm = n.intListArg(1);
      if (perm.size() != size.size())
        nodeError(n, "Number of dimensions in size does not match the length of the physical_layout; i.e. len(size) = " +
                         std::to_string(size.size()) + " is not equal to len(physical_layout) = " +
                         std::to_string(perm.size()));
      for (int64_t s : size)
        if (s < 0) nodeError(n, "Trying to create tensor with negative dimension " + std::to_string(s));
      return {{dtypeArg(n, 2).value_or(kDefaultFloat), Shape(size.begin(), size.end())}};
    };
    setEval(d, [](const Node &n, const RefArgs &) { return RefTensor(n.types[0].dtype, n.types[0].shape); });
  }
}

} // namespace ops
} // namespace aotc
