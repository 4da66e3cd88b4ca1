//===- Ops.h - Internal helpers shared by the op definitions ----*- C++ -*-===//
//
// Internal to lib/IR. Each lib/IR/ops/<Category>.cpp defines one
// register<Category>Ops function, called explicitly by OpRegistry::get() (no
// static constructors: a static-library link may drop unreferenced objects).
//
// Shape/dtype helpers follow PyTorch:
//  * resultType: torch.result_type (c10/core/ScalarType.h + aten/src/ATen/native/
//    TypeProperties.cpp ResultTypeState): dimensioned tensors > 0-d tensors > wrapped
//    Python scalars, where a lower priority class only matters when its category
//    (bool < integral < floating) is higher; a wrapped float counts as the default
//    dtype f32;
//  * reductions: `dim=None` or `dim=[]` reduce every dim, dims may be negative,
//    duplicates are an error (aten/src/ATen/WrapDimUtilsMulti.h).
// Eval helpers compute in float64 and round integer/bool results exactly
// (i64: truncation toward zero as a C cast; bool: != 0).
//===----------------------------------------------------------------------===//
#pragma once

#include "aotc/OpRegistry.h"
#include "aotc/RefEval.h"

#include <cmath>
#include <functional>
#include <optional>
#include <vector>

namespace aotc {
namespace ops {

/// Registers a unary elementwise primitive with INT_TO_FLOAT promotion (exp, log, lgamma, ...)
/// and its float64 reference `f`; `op`: the scalar operation it is, when it is one
/// (OpDef::scalar, Operands::Floating over argument 0), else codegen has a rule for it.
/// Pointwise.cpp.
OpDef &unaryFloat(OpRegistry &r, const char *schema, std::function<double(double)> f,
                  std::optional<ScalarOp> op = std::nullopt);

void registerPointwiseOps(OpRegistry &r);
void registerArithOps(OpRegistry &r);     // Arith.cpp: pow.Scalar, div.*_mode, clamp.Tensor
void registerRearrangeOps(OpRegistry &r); // Rearrange.cpp: flip, repeat, reflection / replication pads
void registerSortOps(OpRegistry &r);      // Sort.cpp: sort, sort.stable, topk
void registerDistanceOps(OpRegistry &r);  // Distance.cpp: _cdist_forward, _pdist_forward
void registerGridSampleOps(OpRegistry &r); // GridSample.cpp: grid_sampler_2d
void registerAdaptiveMaxPoolOps(OpRegistry &r); // AdaptiveMaxPool.cpp: adaptive_max_pool2d / 3d
void registerNonCoreOps(OpRegistry &r);   // NonCore.cpp: copysign, fmax, *_copy, addmv, _trilinear, dist, put, ...
void registerSpecialOps(OpRegistry &r);   // Special.cpp: lgamma, digamma, polygamma, erfc, erfinv, Bessel
void registerFftOps(OpRegistry &r);       // Fft.cpp: _fft_r2c, _fft_c2r, _fft_c2c, aotc::fft_*_backward
void registerLinalgOps(OpRegistry &r);    // Linalg.cpp: aotc::lapack_*, the linalg ops, aotc::*_backward helpers
void registerEmbeddingBagOps(OpRegistry &r); // EmbeddingBag.cpp: _embedding_bag
void registerPool3dOps(OpRegistry &r);    // Pool3d.cpp: avg_pool3d, _adaptive_avg_pool3d, max_pool3d_with_indices
void registerReductionOps(OpRegistry &r);
void registerViewOps(OpRegistry &r);
void registerSymbolicShapes(OpRegistry &r); // SymShapes.cpp: OpDef::symInfer (after every op is registered)
void registerMatmulOps(OpRegistry &r);
void registerIndexOps(OpRegistry &r);
void registerFactoryOps(OpRegistry &r);
void registerCompositeOps(OpRegistry &r);
void registerInPlaceOps(OpRegistry &r);
void registerScatterOps(OpRegistry &r); // Scatter.cpp: slice_scatter, select_scatter
void registerConvOps(OpRegistry &r);       // Conv.cpp: convolution, convolution_backward, aotc::conv_*_grad
void registerBatchNormOps(OpRegistry &r);  // BatchNorm.cpp: _native_batch_norm_legit_*
void registerPoolOps(OpRegistry &r);      // Pool.cpp: max_pool2d_with_indices (+ backward)
void registerResampleOps(OpRegistry &r);
void registerAttentionOps(OpRegistry &r); // Attention.cpp: scaled_dot_product_attention
void registerRandomOps(OpRegistry &r);
void registerScanOps(OpRegistry &r);      // Scan.cpp: cumsum, diagonal, diagonal_scatter, index_reduce    // Random.cpp: rand, rand_like, bernoulli, dropout, aotc::philox_uniform
void registerGroupNormOps(OpRegistry &r); // GroupNorm.cpp: native_group_norm (+ backward), native_batch_norm_backward  // Resample.cpp: upsample_*2d, avg_pool2d, _adaptive_avg_pool2d, constant_pad_nd

/// torch's default floating dtype (torch.get_default_dtype()).
constexpr DType kDefaultFloat = DType::F32;

//===-- Shape/dtype inference ----------------------------------------------===//

/// True when node.args[i] is a Python number (int, float or bool).
bool isNumberArg(const Node &n, size_t i);
/// Dtype of a Python number: int -> i64, float -> f64, bool -> bool.
DType numberDType(const Arg &a);
/// The type of tensor argument i (a number argument yields a 0-d tensor of its dtype).
TensorType argType(const Node &n, size_t i);
/// Optional tensor argument i (`Tensor?`): the node, or nullptr for None.
inline const Node *optTensor(const Node &n, size_t i) { return n.isNoneArg(i) ? nullptr : n.tensorArg(i); }
// resultType (torch.result_type) is declared in include/aotc/OpRegistry.h (codegen uses it).
/// Broadcast shape of the arguments at `idx` (numbers are 0-d); nodeError when incompatible.
Shape broadcastArgs(const Node &n, const std::vector<size_t> &idx);
/// maybe_wrap_dim with a nodeError "dimension out of range".
int64_t wrapDimOrError(const Node &n, int64_t dim, int64_t rank);
/// Reduced-dims mask for argument `dimArg` (None, [] -> all; int or int list; negative ok).
std::vector<bool> reductionMask(const Node &n, size_t dimArg, int64_t rank);
/// Shape after reducing the masked dims.
Shape reducedShape(const Shape &s, const std::vector<bool> &mask, bool keepdim);
/// Optional ScalarType argument.
std::optional<DType> dtypeArg(const Node &n, size_t i);
/// Integral (and bool) dtypes become the default float dtype (INT_TO_FLOAT promotion).
inline DType intToFloat(DType d) { return isFloating(d) ? d : kDefaultFloat; }
/// nodeError unless `d` is floating.
void requireFloating(const Node &n, DType d, const std::string &what);
/// Checks that a result of dtype `from` can be cast to `to` (torch.can_cast).
bool canCast(DType from, DType to);

//===-- Reference evaluation -----------------------------------------------===//

/// Rounds a float64 value to what dtype `dt` can hold exactly in the reference:
/// i64 truncates toward zero, bool is (v != 0), floats are unchanged (float64 semantics).
inline double castValue(DType dt, double v) {
  if (dt == DType::I64) return std::trunc(v);
  if (dt == DType::Bool) return v != 0.0 ? 1.0 : 0.0;
  if (dt == DType::I32) return (double)(int32_t)(uint32_t)(int64_t)std::trunc(v); // wraps, as a C cast
  if (dt == DType::U8) return (double)(uint8_t)(int64_t)std::trunc(v);
  return v;
}

/// A tensor or Python-number operand.
struct Val {
  const RefTensor *t = nullptr;
  double s = 0.0;
  std::vector<int64_t> map; ///< Broadcast index map into the output (tensors only).
  double at(int64_t k) const { return t ? t->data[map[k]] : s; }
};
/// Operand i of `n`, broadcast to `out`.
Val valArg(const Node &n, const RefArgs &a, size_t i, const Shape &out);

/// Elementwise map over the operands at `idx` into result 0 of `n` (cast to its dtype).
template <class F>
RefTensor mapArgs(const Node &n, const RefArgs &a, const std::vector<size_t> &idx, F f) {
  const TensorType &ot = n.types.at(0);
  RefTensor out(ot.dtype, ot.shape);
  std::vector<Val> vs;
  for (size_t i : idx) vs.push_back(valArg(n, a, i, ot.shape));
  std::vector<double> x(vs.size());
  for (int64_t k = 0; k < out.numel(); ++k) {
    for (size_t j = 0; j < vs.size(); ++j) x[j] = vs[j].at(k);
    out.data[k] = castValue(ot.dtype, f(x.data()));
  }
  return out;
}

/// Sets a single-result evaluator.
template <class F> void setEval(OpDef &d, F f) {
  d.eval = [f](const Node &n, const RefArgs &a,
               const std::vector<std::vector<const RefTensor *>> &) -> std::vector<RefTensor> {
    return {f(n, a)};
  };
}

/// (outer, len, inner) decomposition of a row-major shape around `dim`; at(o, j, i) is the
/// flat offset of outer index o, index j along dim, inner index i.
struct Along {
  int64_t outer = 1, len = 1, inner = 1;
  Along(const Shape &s, int64_t dim) {
    for (int64_t d = 0; d < (int64_t)s.size(); ++d) {
      if (d < dim) outer *= s[d];
      else if (d == dim) len = s[d];
      else inner *= s[d];
    }
  }
  int64_t at(int64_t o, int64_t j, int64_t i) const { return (o * len + j) * inner + i; }
};

/// A `SymInt[] size` argument; nodeError on a negative dimension (Factory.cpp).
Shape sizeArg(const Node &n, size_t i);

/// Multi-index of a flat offset in a row-major shape.
std::vector<int64_t> unravel(int64_t flat, const Shape &s);
/// Flat offset of a multi-index.
int64_t ravel(const std::vector<int64_t> &idx, const Shape &s);

/// Generic reduction of `x` over the masked dims: `init`, `acc(state, value)`,
/// `fin(state, count)`. Result shape follows keepdim; dtype `dt`.
template <class Acc, class Fin>
RefTensor reduceRef(const RefTensor &x, const std::vector<bool> &mask, bool keepdim, DType dt,
                    double init, Acc acc, Fin fin) {
  Shape outShape = reducedShape(x.shape, mask, keepdim);
  Shape keptShape = reducedShape(x.shape, mask, true);
  RefTensor out(dt, outShape);
  std::vector<double> state(out.numel(), init);
  std::vector<int64_t> count(out.numel(), 0);
  for (int64_t k = 0; k < x.numel(); ++k) {
    std::vector<int64_t> idx = unravel(k, x.shape);
    for (size_t d = 0; d < idx.size(); ++d)
      if (mask[d]) idx[d] = 0;
    int64_t o = ravel(idx, keptShape);
    state[o] = acc(state[o], x.data[k]);
    ++count[o];
  }
  for (int64_t o = 0; o < out.numel(); ++o) out.data[o] = castValue(dt, fin(state[o], count[o]));
  return out;
}

} // namespace ops
} // namespace aotc
