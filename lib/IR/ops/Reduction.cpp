//===- Reduction.cpp - sum, mean, amax, amin, argmax, var, logsumexp ----------===//
//
// Dtype rules (aten/src/ATen/native/ReduceOps.cpp, torch/_refs reductions):
//  * sum: `dtype` if given, else integral/bool inputs accumulate in i64, floats keep theirs;
//  * mean/var: floating only (or an explicit floating `dtype` for mean);
//  * amax/amin keep the dtype; argmax gives i64; logsumexp promotes ints to f32.
// `dim=None` or `dim=[]` reduce every dim; negative dims wrap; keepdim keeps size-1 dims.
//===----------------------------------------------------------------------===//
#include "Ops.h"

#include <limits>

namespace aotc {
namespace ops {
namespace {

using Types = std::vector<TensorType>;
constexpr double kInf = std::numeric_limits<double>::infinity();

DType sumDType(const Node &n, DType in, size_t dtypeArgIdx) {
  if (auto dt = dtypeArg(n, dtypeArgIdx)) return *dt;
  return isIntegral(in) ? DType::I64 : in;
}

DType meanDType(const Node &n, DType in, size_t dtypeArgIdx) {
  DType dt = dtypeArg(n, dtypeArgIdx).value_or(in);
  if (!isFloating(dt))
    nodeError(n, std::string("mean(): could not infer output dtype. Input dtype must be either a floating point "
                             "or complex dtype. Got: ") + dtypeTorchName(dt));
  return dt;
}

double addAcc(double s, double x) { return s + x; }
double maxAcc(double s, double x) { return std::isnan(s) || std::isnan(x) ? NAN : std::max(s, x); }
double minAcc(double s, double x) { return std::isnan(s) || std::isnan(x) ? NAN : std::min(s, x); }

/// Registers a reduction whose dims are argument `dimIdx` (or all dims when dimIdx < 0)
/// and keepdim argument `keepIdx` (or false when keepIdx < 0).
struct RedSpec {
  int dimIdx, keepIdx;
};
std::vector<bool> maskOf(const Node &n, RedSpec s, int64_t rank) {
  return s.dimIdx < 0 ? std::vector<bool>(rank, true) : reductionMask(n, s.dimIdx, rank);
}
bool keepOf(const Node &n, RedSpec s) { return s.keepIdx >= 0 && n.boolArg(s.keepIdx); }

void sumOp(OpRegistry &r, const char *schema, RedSpec s, int dtypeIdx, bool mean) {
  OpDef &d = r.add(schema, OpCategory::Reduction);
  d.primitive = d.target() == "aten.sum.dim_IntList"; // sum() and the means decompose to it
  d.infer = [s, dtypeIdx, mean](const Node &n) -> Types {
    TensorType t = argType(n, 0);
    DType dt = mean ? meanDType(n, t.dtype, dtypeIdx) : sumDType(n, t.dtype, dtypeIdx);
    return {{dt, reducedShape(t.shape, maskOf(n, s, t.rank()), keepOf(n, s))}};
  };
  setEval(d, [s, mean](const Node &n, const RefArgs &a) {
    const RefTensor &x = *a.at(0);
    return reduceRef(x, maskOf(n, s, (int64_t)x.shape.size()), keepOf(n, s), n.types[0].dtype, 0.0, addAcc,
                     [mean](double v, int64_t c) { return mean ? v / (double)c : v; });
  });
}

void minMaxOp(OpRegistry &r, const char *schema, bool isMax) {
  OpDef &d = r.add(schema, OpCategory::Reduction);
  d.primitive = true;
  RedSpec s{1, 2};
  d.infer = [s](const Node &n) -> Types {
    TensorType t = argType(n, 0);
    std::vector<bool> mask = maskOf(n, s, t.rank());
    for (int64_t i = 0; i < t.rank(); ++i)
      if (mask[i] && t.shape[i] == 0) nodeError(n, "cannot reduce over a zero-size dimension");
    return {{t.dtype, reducedShape(t.shape, mask, keepOf(n, s))}};
  };
  setEval(d, [s, isMax](const Node &n, const RefArgs &a) {
    const RefTensor &x = *a.at(0);
    return reduceRef(x, maskOf(n, s, (int64_t)x.shape.size()), keepOf(n, s), n.types[0].dtype,
                     isMax ? -kInf : kInf, isMax ? maxAcc : minAcc, [](double v, int64_t) { return v; });
  });
}

/// var over the dims of argument 1: sum((x - mean)^2) / max(0, N - correction).
RefTensor varRef(const Node &n, const RefTensor &x, double corr, bool keepdim) {
  std::vector<bool> mask = reductionMask(n, 1, (int64_t)x.shape.size());
  RefTensor mean = reduceRef(x, mask, true, DType::F64, 0.0, addAcc, [](double v, int64_t c) { return v / c; });
  auto map = broadcastIndexMap(mean.shape, x.shape);
  RefTensor sq = x;
  for (int64_t k = 0; k < x.numel(); ++k) sq.data[k] = (x.data[k] - mean.data[map[k]]) * (x.data[k] - mean.data[map[k]]);
  return reduceRef(sq, mask, keepdim, n.types[0].dtype, 0.0, addAcc,
                   [corr](double v, int64_t c) { return v / std::max(0.0, (double)c - corr); });
}

} // namespace

void registerReductionOps(OpRegistry &r) {
  sumOp(r, "sum(Tensor self, *, ScalarType? dtype=None) -> Tensor", {-1, -1}, 1, false);
  sumOp(r, "sum.dim_IntList(Tensor self, int[1]? dim, bool keepdim=False, *, ScalarType? dtype=None) -> Tensor",
        {1, 2}, 3, false);
  sumOp(r, "mean(Tensor self, *, ScalarType? dtype=None) -> Tensor", {-1, -1}, 1, true);
  sumOp(r, "mean.dim(Tensor self, int[1]? dim, bool keepdim=False, *, ScalarType? dtype=None) -> Tensor", {1, 2},
        3, true);
  minMaxOp(r, "amax(Tensor self, int[1] dim=[], bool keepdim=False) -> Tensor", true);
  minMaxOp(r, "amin(Tensor self, int[1] dim=[], bool keepdim=False) -> Tensor", false);
  // max() / min() of every element (not Core ATen; run_decompositions keeps them): amax / amin
  // over every dim (decompose), the same value, NaN and tie conventions (torch's
  // evenly_distribute_backward is amax's gradient rule).
  for (bool isMax : {true, false}) {
    OpDef &d = r.add(isMax ? "max(Tensor self) -> Tensor" : "min(Tensor self) -> Tensor", OpCategory::Composite);
    d.infer = [isMax](const Node &n) -> Types {
      TensorType t = argType(n, 0);
      if (t.numel() == 0)
        nodeError(n, std::string(isMax ? "max" : "min") + "(): Expected reduction dim to be specified for "
                     "input.numel() == 0. Specify the reduction dim with the 'dim' argument.");
      return {{t.dtype, {}}};
    };
    setEval(d, [isMax](const Node &n, const RefArgs &a) {
      const RefTensor &x = *a.at(0);
      return reduceRef(x, std::vector<bool>(x.shape.size(), true), false, n.types[0].dtype, isMax ? -kInf : kInf,
                       isMax ? maxAcc : minAcc, [](double v, int64_t) { return v; });
    });
  }
  // argmax / argmin: dim=None flattens (result 0-d, or all-ones shape with keepdim). The first
  // extremum wins; NaN is both the maximum and the minimum (torch). argmax is a primitive;
  // argmin is argmax of the order reversed (decompose).
  for (bool isMax : {true, false}) {
    const char *name = isMax ? "argmax" : "argmin";
    OpDef &d = r.add(std::string(name) + "(Tensor self, int? dim=None, bool keepdim=False) -> Tensor",
                     isMax ? OpCategory::Reduction : OpCategory::Composite);
    d.primitive = isMax;
    d.nonDifferentiable = true;
    d.infer = [name, isMax](const Node &n) -> Types {
      TensorType t = argType(n, 0);
      if (!isMax && t.dtype == DType::Bool) nodeError(n, "argmin(): does not support bool input (as torch)");
      std::vector<bool> mask = reductionMask(n, 1, t.rank());
      for (int64_t i = 0; i < t.rank(); ++i)
        if (mask[i] && t.shape[i] == 0) nodeError(n, std::string(name) + "(): expected a non-empty reduction dimension");
      return {{DType::I64, reducedShape(t.shape, mask, n.boolArg(2))}};
    };
    setEval(d, [isMax](const Node &n, const RefArgs &a) {
      const RefTensor &x = *a.at(0);
      int64_t rank = (int64_t)x.shape.size();
      std::vector<bool> mask = reductionMask(n, 1, rank);
      Shape kept = reducedShape(x.shape, mask, true);
      RefTensor out(DType::I64, n.types[0].shape);
      std::vector<double> best(out.numel(), isMax ? -kInf : kInf);
      std::vector<bool> seen(out.numel(), false);
      for (int64_t k = 0; k < x.numel(); ++k) {
        std::vector<int64_t> idx = unravel(k, x.shape);
        // Position along the reduced dims (row-major over those dims only).
        int64_t pos = 0;
        for (int64_t dd = 0; dd < rank; ++dd)
          if (mask[dd]) pos = pos * x.shape[dd] + idx[dd], idx[dd] = 0;
        int64_t o = ravel(idx, kept);
        double v = x.data[k];
        bool better = !seen[o] || (!std::isnan(best[o]) && (std::isnan(v) || (isMax ? v > best[o] : v < best[o])));
        if (better) best[o] = v, out.data[o] = (double)pos, seen[o] = true;
      }
      return out;
    });
  }
  // any / all (ReduceOps.cpp): bool, true where some / every element over the reduced dims is
  // nonzero (NaN counts as nonzero, as torch); `.default` reduces every dim. nn.MultiheadAttention's
  // exported graph checks masks with any.dim.
  for (const char *schema : {"any.dim(Tensor self, int dim, bool keepdim=False) -> Tensor",
                             "any.dims(Tensor self, int[]? dim=None, bool keepdim=False) -> Tensor",
                             "any(Tensor self) -> Tensor",
                             "all.dim(Tensor self, int dim, bool keepdim=False) -> Tensor",
                             "all.dims(Tensor self, int[]? dim=None, bool keepdim=False) -> Tensor",
                             "all(Tensor self) -> Tensor"}) {
    OpDef &d = r.add(schema, OpCategory::Reduction);
    const bool isAll = std::string(schema).rfind("all", 0) == 0;
    d.nonDifferentiable = true;
    d.infer = [](const Node &n) -> Types {
      TensorType t = argType(n, 0);
      if (n.args.size() == 1) return {{DType::Bool, {}}};
      return {{DType::Bool, reducedShape(t.shape, reductionMask(n, 1, t.rank()), n.boolArg(2))}};
    };
    setEval(d, [isAll](const Node &n, const RefArgs &a) {
      const RefTensor &x = *a.at(0);
      int64_t rank = (int64_t)x.shape.size();
      std::vector<bool> mask = n.args.size() == 1 ? std::vector<bool>(rank, true) : reductionMask(n, 1, rank);
      bool keep = n.args.size() > 2 && n.boolArg(2);
      if (isAll)
        return reduceRef(x, mask, keep, DType::Bool, 1.0,
                         [](double s, double v) { return s != 0.0 && v != 0.0 ? 1.0 : 0.0; },
                         [](double v, int64_t) { return v; });
      return reduceRef(x, mask, keep, DType::Bool, 0.0,
                       [](double s, double v) { return s != 0.0 || v != 0.0 ? 1.0 : 0.0; },
                       [](double v, int64_t) { return v; });
    });
  }
  {
    // var(x, dim, correction) = sum((x - mean)^2) / max(0, N - correction); correction None -> 1.
    OpDef &d = r.add("var.correction(Tensor self, int[1]? dim=None, *, Scalar? correction=None, bool keepdim=False) -> Tensor",
                     OpCategory::Reduction);
    d.infer = [](const Node &n) -> Types {
      TensorType t = argType(n, 0);
      requireFloating(n, t.dtype, "var");
      return {{t.dtype, reducedShape(t.shape, reductionMask(n, 1, t.rank()), n.boolArg(3))}};
    };
    setEval(d, [](const Node &n, const RefArgs &a) {
      return varRef(n, *a.at(0), n.isNoneArg(2) ? 1.0 : n.scalarArg(2), n.boolArg(3));
    });
  }
  {
    // var.dim(self, dim, unbiased, keepdim): var.correction with correction = unbiased (a composite).
    OpDef &d = r.add("var.dim(Tensor self, int[1]? dim, bool unbiased=True, bool keepdim=False) -> Tensor",
                     OpCategory::Composite);
    d.infer = [](const Node &n) -> Types {
      TensorType t = argType(n, 0);
      requireFloating(n, t.dtype, "var");
      return {{t.dtype, reducedShape(t.shape, reductionMask(n, 1, t.rank()), n.boolArg(3))}};
    };
    setEval(d, [](const Node &n, const RefArgs &a) { return varRef(n, *a.at(0), n.boolArg(2) ? 1.0 : 0.0, n.boolArg(3)); });
  }
  {
    // var_mean.correction (non-core; std_mean's base): (var.correction, mean.dim) over the same
    // dims, one composite (decompose: the two ops, whose rules give torch's gradient).
    OpDef &d = r.add("var_mean.correction(Tensor self, int[1]? dim=None, *, Scalar? correction=None, "
                     "bool keepdim=False) -> (Tensor, Tensor)",
                     OpCategory::Composite);
    d.infer = [](const Node &n) -> Types {
      TensorType t = argType(n, 0);
      requireFloating(n, t.dtype, "var_mean");
      TensorType r{t.dtype, reducedShape(t.shape, reductionMask(n, 1, t.rank()), n.boolArg(3))};
      return {r, r};
    };
    d.eval = [](const Node &n, const RefArgs &a, const std::vector<std::vector<const RefTensor *>> &) {
      const RefTensor &x = *a.at(0);
      RefTensor mean = reduceRef(x, reductionMask(n, 1, (int64_t)x.shape.size()), n.boolArg(3), n.types[1].dtype, 0.0,
                                 addAcc, [](double v, int64_t c) { return v / (double)c; });
      return std::vector<RefTensor>{varRef(n, x, n.isNoneArg(2) ? 1.0 : n.scalarArg(2), n.boolArg(3)), mean};
    };
  }
  // max.dim / min.dim (values, indices): the first extremum along dim, NaN winning (its value
  // and index, as eager); the gradient goes to that one index (value_selecting_reduction_backward),
  // not shared among ties as amax's. A composite: argmax + gather.
  for (bool isMax : {true, false}) {
    const std::string name = isMax ? "max" : "min";
    OpDef &d = r.add(name + ".dim(Tensor self, int dim, bool keepdim=False) -> (Tensor values, Tensor indices)",
                     OpCategory::Composite);
    d.infer = [name](const Node &n) -> Types {
      TensorType t = argType(n, 0);
      int64_t dim = wrapDimOrError(n, n.intArg(1), t.rank());
      if (t.rank() > 0 && t.shape[dim] == 0)
        nodeError(n, name + "(): Expected reduction dim " + std::to_string(dim) + " to have non-zero size.");
      Shape s = reducedShape(t.shape, reductionMask(n, 1, t.rank()), n.boolArg(2));
      return {{t.dtype, s}, {DType::I64, s}};
    };
    d.eval = [isMax](const Node &n, const RefArgs &a, const std::vector<std::vector<const RefTensor *>> &) {
      const RefTensor &x = *a.at(0);
      int64_t rank = (int64_t)x.shape.size();
      Along al(x.shape, rank == 0 ? 0 : *wrapDim(n.intArg(1), rank));
      RefTensor vals(n.types[0].dtype, n.types[0].shape), idx(DType::I64, n.types[1].shape);
      for (int64_t o = 0; o < al.outer; ++o)
        for (int64_t i = 0; i < al.inner; ++i) {
          int64_t best = 0;
          for (int64_t j = 1; j < al.len; ++j) {
            double b = x.data[al.at(o, best, i)], v = x.data[al.at(o, j, i)];
            if (std::isnan(b)) break;
            if (std::isnan(v) || (isMax ? v > b : v < b)) best = j;
          }
          vals.data[o * al.inner + i] = x.data[al.at(o, best, i)];
          idx.data[o * al.inner + i] = (double)best;
        }
      return std::vector<RefTensor>{vals, idx};
    };
  }
  // prod (ReduceOps.cpp): dtype as sum's (integral and bool accumulate in i64); NaN propagates.
  // A primitive reduction; its gradient is torch's prod_backward (derivatives.yaml).
  for (auto [schema, spec, dtIdx] :
       {std::make_tuple("prod(Tensor self, *, ScalarType? dtype=None) -> Tensor", RedSpec{-1, -1}, 1),
        std::make_tuple("prod.dim_int(Tensor self, int dim, bool keepdim=False, *, ScalarType? dtype=None) -> Tensor",
                        RedSpec{1, 2}, 3)}) {
    OpDef &d = r.add(schema, OpCategory::Reduction);
    d.primitive = true;
    d.infer = [s = spec, i = dtIdx](const Node &n) -> Types {
      TensorType t = argType(n, 0);
      return {{sumDType(n, t.dtype, i), reducedShape(t.shape, maskOf(n, s, t.rank()), keepOf(n, s))}};
    };
    setEval(d, [s = spec](const Node &n, const RefArgs &a) {
      const RefTensor &x = *a.at(0);
      return reduceRef(x, maskOf(n, s, (int64_t)x.shape.size()), keepOf(n, s), n.types[0].dtype, 1.0,
                       [](double p, double v) { return p * v; }, [](double v, int64_t) { return v; });
    });
  }
  {
    // aotc::prod_others(self, dim): at each position, the product of the other elements of its
    // slice along dim (prod_backward's exclusive products: exact with zeros and NaNs, as torch's
    // prod_safe_zeros_backward). Emitted by prod's derivative rule; lowered to one fused
    // reduction over an expanded copy of the dim, O(n^2) along it.
    OpDef &d = r.add("aotc::prod_others(Tensor self, int dim) -> Tensor", OpCategory::Reduction);
    d.nonDifferentiable = true; // a backward helper (no double backward for prod)
    d.infer = [](const Node &n) -> Types {
      TensorType t = argType(n, 0);
      wrapDimOrError(n, n.intArg(1), t.rank());
      return {t};
    };
    setEval(d, [](const Node &n, const RefArgs &a) {
      const RefTensor &x = *a.at(0);
      RefTensor out = x;
      if (x.shape.empty()) {
        for (auto &v : out.data) v = 1.0;
        return out;
      }
      Along al(x.shape, *wrapDim(n.intArg(1), (int64_t)x.shape.size()));
      for (int64_t o = 0; o < al.outer; ++o)
        for (int64_t i = 0; i < al.inner; ++i)
          for (int64_t j = 0; j < al.len; ++j) {
            double p = 1.0;
            for (int64_t k = 0; k < al.len; ++k)
              if (k != j) p *= x.data[al.at(o, k, i)];
            out.data[al.at(o, j, i)] = castValue(out.dtype, p);
          }
      return out;
    });
  }
  {
    // logsumexp = m + log(sum(exp(x - m))), m = amax (0 where m is infinite), as ReduceOps.cpp.
    OpDef &d = r.add("logsumexp(Tensor self, int[1] dim, bool keepdim=False) -> Tensor", OpCategory::Reduction);
    d.infer = [](const Node &n) -> Types {
      TensorType t = argType(n, 0);
      return {{intToFloat(t.dtype), reducedShape(t.shape, reductionMask(n, 1, t.rank()), n.boolArg(2))}};
    };
    setEval(d, [](const Node &n, const RefArgs &a) {
      const RefTensor &x = *a.at(0);
      std::vector<bool> mask = reductionMask(n, 1, (int64_t)x.shape.size());
      RefTensor m = reduceRef(x, mask, true, DType::F64, -kInf, maxAcc, [](double v, int64_t) {
        return std::isinf(v) ? 0.0 : v;
      });
      auto map = broadcastIndexMap(m.shape, x.shape);
      RefTensor e = x;
      for (int64_t k = 0; k < x.numel(); ++k) e.data[k] = std::exp(x.data[k] - m.data[map[k]]);
      RefTensor s = reduceRef(e, mask, true, DType::F64, 0.0, addAcc, [](double v, int64_t) { return v; });
      RefTensor out(n.types[0].dtype, n.types[0].shape);
      for (int64_t k = 0; k < out.numel(); ++k) out.data[k] = std::log(s.data[k]) + m.data[k];
      return out;
    });
  }
}

} // namespace ops
} // namespace aotc
