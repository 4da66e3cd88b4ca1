//===- OpLowering.cpp - The codegen op table (OpLowering.h) -----------------===//
//
// One entry per target. Pointwise rules follow ATen's CPU kernels
// (aten/src/ATen/native/cpu/*Kernel.cpp) and agree with the float64 reference of each op
// (lib/IR/ops/*.cpp); the conformance suite checks every entry against it.
//===----------------------------------------------------------------------===//
#include "OpLowering.h"

#include "aotc/Diagnostics.h"
#include "aotc/OpRegistry.h"

#include <algorithm>
#include <map>

namespace aotc::fusion {
namespace {

using S = ScalarOp;

//===-- Pointwise rules -----------------------------------------------------===//

ERef binary(const PointwiseArgs &a, ScalarOp op) { return mkOp(op, a.od, {a.x(0), a.x(1)}); }

/// other * alpha, when alpha (argument 2) is given and not 1.
ERef scaledByAlpha(const PointwiseArgs &a, ERef other) {
  const Node &n = a.n;
  if (n.args.size() > 2 && !n.isNoneArg(2) && n.scalarArg(2) != 1.0)
    return mkOp(S::Mul, a.od, {other, mkConstArg(a.od, n, 2)});
  return other;
}

ERef addRule(const PointwiseArgs &a) { return mkOp(S::Add, a.od, {a.x(0), scaledByAlpha(a, a.x(1))}); }
ERef subRule(const PointwiseArgs &a) { return mkOp(S::Sub, a.od, {a.x(0), scaledByAlpha(a, a.x(1))}); }
/// rsub(self, other, alpha) = other - alpha * self.
ERef rsubRule(const PointwiseArgs &a) { return mkOp(S::Sub, a.od, {a.x(1), scaledByAlpha(a, a.x(0))}); }

ERef divRule(const PointwiseArgs &a) {
  if (!isFloating(a.od)) nodeError(a.n, "codegen: integer division is not supported");
  return binary(a, S::Div);
}

/// aten/src/ATen/native/TriangularOps.cpp: tril keeps col - row <= diagonal, triu keeps
/// col - row >= diagonal (over the last two dims), zeros elsewhere.
ERef triangle(const PointwiseArgs &a, ScalarOp keepIf) {
  int r = (int)a.shape.size();
  if (r < 2) nodeError(a.n, "codegen: " + opBase(a.n.target) + " needs at least 2 dimensions");
  EAddr addr;
  addr.coef.assign(r, 0);
  addr.coef[r - 1] = 1;
  addr.coef[r - 2] = -1;
  ERef colMinusRow = mkIndex(std::move(addr));
  refuseRuntimeArg(a.n, 1);
  ERef diag = mkIntConst(DType::I64, a.n.intArg(1)); // exact: diagonal may be INT64_MAX
  ERef keep = mkOp(keepIf, DType::Bool, {colMinusRow, diag});
  return mkOp(S::Select, a.od, {keep, a.x(0), mkConst(a.od, 0.0)});
}

/// aten/src/ATen/native/RangeFactories.cpp (CPU arange): value i = start + i * step, computed
/// in the accumulate type (double for floating results, int64 otherwise).
/// `startArg` / `stepArg`: the argument indices (-1: 0 and 1), a run-time size taken as such.
ERef arange(const PointwiseArgs &a, int startArg, int stepArg) {
  EAddr addr;
  addr.coef = {1};
  ERef i = mkIndex(std::move(addr));
  DType acc = isFloating(a.od) ? DType::F64 : DType::I64;
  double start = startArg < 0 ? 0.0 : a.n.scalarArg(startArg), step = stepArg < 0 ? 1.0 : a.n.scalarArg(stepArg);
  if (acc == DType::I64 && (start != (double)(int64_t)start || step != (double)(int64_t)step))
    nodeError(a.n, "codegen: integer arange with non-integral start or step");
  ERef s0 = startArg < 0 ? mkConst(acc, 0.0) : mkConstArg(acc, a.n, startArg);
  ERef st = stepArg < 0 ? mkConst(acc, 1.0) : mkConstArg(acc, a.n, stepArg);
  return mkOp(S::Add, acc, {mkOp(S::Mul, acc, {mkCast(i, acc), st}), s0});
}

/// aotc::philox_uniform (include/aotc/Philox.h): word 0 of element i's Philox block gives an
/// f32 (24 bits); f64 takes 53 bits, w0 + (w1 & (2^21 - 1)) * 2^32, all exact in i64.
ERef philoxUniform(const PointwiseArgs &a) {
  EAddr addr;
  addr.coef = contiguousStrides(a.shape); // the row-major linear index
  ERef index = mkIndex(std::move(addr));
  ERef seed = a.x(0, DType::I64), offset = a.x(1, DType::I64);
  auto word = [&](int64_t w) { return mkPhilox(seed, offset, index, w); };
  if (a.od == DType::F32) {
    ERef bits = mkOp(S::And, DType::I64, {word(0), mkIntConst(DType::I64, 0xFFFFFF)});
    return mkOp(S::Mul, DType::F32, {mkCast(bits, DType::F32), mkConst(DType::F32, 0x1p-24)});
  }
  ERef high = mkOp(S::And, DType::I64, {word(1), mkIntConst(DType::I64, (1 << 21) - 1)});
  ERef bits = mkOp(S::Add, DType::I64, {word(0), mkOp(S::Mul, DType::I64, {high, mkIntConst(DType::I64, int64_t(1) << 32)})});
  return mkOp(S::Mul, DType::F64, {mkCast(bits, DType::F64), mkConst(DType::F64, 0x1p-53)});
}

ERef recip(const PointwiseArgs &a, ERef x) { return mkOp(S::Div, a.od, {mkConst(a.od, 1.0), x}); }

/// 1 / (1 + exp(-x)).
ERef sigmoidRule(const PointwiseArgs &a) {
  ERef one = mkConst(a.od, 1.0);
  return mkOp(S::Div, a.od, {one, mkOp(S::Add, a.od, {one, mkOp(S::Exp, a.od, {mkOp(S::Neg, a.od, {a.x(0)})})})});
}

/// x > 0 ? 1 : x < 0 ? -1 : 0. x == 0, -0.0 or NaN gives +0 (torch 2.15: sign(nan) = 0,
/// sign(-0.0) = 0.0; RefEval agrees).
ERef signRule(const PointwiseArgs &a) {
  ERef x = a.x(0);
  DType od = a.od;
  ERef gt = mkOp(S::Gt, DType::Bool, {x, mkConst(od, 0.0)});
  ERef lt = mkOp(S::Lt, DType::Bool, {x, mkConst(od, 0.0)});
  return mkOp(S::Select, od,
              {gt, mkConst(od, 1.0), mkOp(S::Select, od, {lt, mkConst(od, -1.0), mkConst(od, 0.0)})});
}

/// pow(x, p) for a scalar p: small integral and half-integral exponents as multiplications,
/// square roots and reciprocals (exact where ATen's pow_tensor_scalar_optimized_kernel is).
ERef powScalarRule(const PointwiseArgs &a) {
  refuseRuntimeArg(a.n, 1);
  double p = a.n.scalarArg(1);
  ERef x = a.x(0);
  DType od = a.od;
  if (p == 1.0) return x;
  if (p == 2.0) return mkOp(S::Mul, od, {x, x});
  if (p == 3.0) return mkOp(S::Mul, od, {mkOp(S::Mul, od, {x, x}), x});
  if (p == 0.0) return mkConst(od, 1.0);
  if (!isFloating(od)) nodeError(a.n, "codegen: integer pow supports exponents 0..3 only");
  if (p == 0.5) return mkOp(S::Sqrt, od, {x});
  if (p == -1.0) return recip(a, x);
  if (p == -0.5) return recip(a, mkOp(S::Sqrt, od, {x}));
  if (p == -2.0) return recip(a, mkOp(S::Mul, od, {x, x}));
  return mkOp(S::Pow, od, {x, mkConst(od, p)});
}

ERef powTensorRule(const PointwiseArgs &a) {
  if (!isFloating(a.od)) nodeError(a.n, "codegen: integer pow is not supported");
  return binary(a, S::Pow);
}

/// A primitive whose OpDef names its one scalar operation (OpDef::scalar): the operation of
/// its arguments, cast as the body says.
ERef scalarBody(const PointwiseArgs &a) {
  const OpDef::ScalarBody &b = *a.n.op->scalar;
  using O = OpDef::ScalarBody::Operands;
  std::vector<ERef> xs;
  if (b.operands == O::Compare) {
    DType ct = ops::resultType(a.n, std::vector<size_t>(b.args.begin(), b.args.end()));
    if (ct == DType::Bool) ct = DType::I64;
    for (int i : b.args) xs.push_back(a.x(i, ct));
    return mkOp(b.op, DType::Bool, xs);
  }
  if (b.operands == O::Floating && !isFloating(a.od))
    nodeError(a.n, "codegen: '" + opBase(a.n.target) + "' needs a floating result");
  for (int i : b.args) xs.push_back(a.x(i));
  if (b.op == ScalarOp::Special) // x, and polygamma's order (a constant argument) when the body reads one
    return mkSpecial(b.iconst, a.od, xs[0], xs.size() > 1 ? xs[1] : mkConst(a.od, 0.0));
  return mkOp(b.op, a.od, xs);
}

/// a ^ b: Ne for bools; (a | b) - (a & b) for integers.
ERef bitwiseXor(const PointwiseArgs &a) {
  if (a.od == DType::Bool)
    return mkOp(S::Ne, DType::Bool, {mkCast(a.x(0), DType::I64), mkCast(a.x(1), DType::I64)});
  return mkOp(S::Sub, a.od, {mkOp(S::Or, a.od, {a.x(0), a.x(1)}), mkOp(S::And, a.od, {a.x(0), a.x(1)})});
}

/// x < lo ? lo : x, then x > hi ? hi : x (NaN stays NaN: comparisons with NaN are false);
/// a None bound is skipped.
ERef clampBy(const PointwiseArgs &a, ERef e, size_t i, ScalarOp cmp) {
  if (i >= a.n.args.size() || a.n.isNoneArg(i)) return e;
  ERef m = a.x(i);
  return mkOp(S::Select, a.od, {mkOp(cmp, DType::Bool, {e, m}), m, e});
}

//===-- View rules ----------------------------------------------------------===//

/// New dim k = old dim perm[k]  =>  old var perm[k] = new var k.
IndexMap permutation(const std::vector<int> &perm, int newRank) {
  std::vector<int> pos(perm.size());
  for (size_t k = 0; k < perm.size(); ++k) pos[perm[k]] = (int)k;
  return IndexMap::select(pos, newRank);
}

std::vector<int> identityPerm(int r) {
  std::vector<int> perm(r);
  for (int i = 0; i < r; ++i) perm[i] = i;
  return perm;
}

IndexMap permuteRule(const Node &n, const Dims &in, const Dims &out) {
  int r = (int)in.size();
  std::vector<int> perm(r);
  auto &dims = n.intListArg(1);
  for (int i = 0; i < r; ++i) perm[i] = (int)wrapDimOrError(n, dims[i], r);
  return permutation(perm, (int)out.size());
}

/// t(): swaps dims 0 and 1 of a 2-d tensor; a 0-d or 1-d tensor is returned as is.
IndexMap tRule(const Node &, const Dims &in, const Dims &out) {
  int r = (int)in.size();
  std::vector<int> perm = identityPerm(r);
  if (r >= 2) std::swap(perm[0], perm[1]);
  return permutation(perm, (int)out.size());
}

IndexMap transposeRule(const Node &n, const Dims &in, const Dims &out) {
  int r = (int)in.size();
  std::vector<int> perm = identityPerm(r);
  int64_t a = wrapDimOrError(n, n.intArg(1), r), b = wrapDimOrError(n, n.intArg(2), r);
  if (r >= 2) std::swap(perm[a], perm[b]);
  return permutation(perm, (int)out.size());
}

IndexMap expandRule(const Node &, const Dims &in, const Dims &out) {
  return IndexMap::broadcast(refShape(in), refShape(out));
}

/// unsqueeze / squeeze: the non-size-1 dims match in order; size-1 old dims map to index 0.
IndexMap squeezeRule(const Node &, const Dims &in, const Dims &out) {
  int r = (int)in.size(), nr = (int)out.size();
  std::vector<int> pos(r, -1);
  int k = 0;
  for (int d = 0; d < r; ++d) {
    if (in[d] == 1) continue;
    while (k < nr && out[k] == 1) ++k;
    AOTC_ASSERT(k < nr && out[k] == in[d], "codegen: squeeze/unsqueeze shape mismatch");
    pos[d] = k++;
  }
  return IndexMap::select(pos, nr);
}

/// slice(self, dim, start, end, step): old var dim = start + step * new var dim.
IndexMap sliceRule(const Node &n, const Dims &in, const Dims &out) {
  int r = (int)in.size();
  int64_t dim = wrapDimOrError(n, n.intArg(1), r);
  const Dim &size = in[dim];
  int64_t step = n.isNoneArg(4) ? 1 : n.intArg(4);
  Dim start = 0;
  if (!n.symArgText(2).empty()) {
    start = dimArg(n, 2); // a run-time start is in range (the slice's shape function assumes so)
  } else if (!n.isNoneArg(2)) {
    int64_t s0 = n.intArg(2);
    if (!size.symbolic()) start = std::clamp<int64_t>(s0 < 0 ? s0 + size.ref() : s0, 0, size.ref());
    else if (s0 < 0) start = size + s0; // x[-k:] of a run-time size: the export guards k <= size
    else start = s0;
  }
  IndexMap m = IndexMap::select(identityPerm(r), (int)out.size());
  m.m[dim][dim] = step;
  m.c[dim] = start;
  return m;
}

/// as_strided(self [numel], size, stride, offset) (lower() makes self 1-D): the one input
/// var is offset + sum stride_j * out_j.
IndexMap asStridedRule(const Node &n, const Dims &in, const Dims &out) {
  if (in.size() != 1) internalError("codegen: as_strided '" + n.name + "' of a rank-" + std::to_string(in.size()) +
                                    " input (lower() views it as 1-D first)");
  refuseRuntimeArg(n, 2);
  refuseRuntimeArg(n, 3);
  const std::vector<int64_t> &stride = n.intListArg(2);
  IndexMap m;
  m.newRank = (int)out.size();
  m.m = {std::vector<int64_t>(stride.begin(), stride.end())};
  m.c = {Dim(n.isNoneArg(3) ? 0 : n.intArg(3))};
  return m;
}

/// select(self, dim, index): old var dim = index; the later dims move down by one.
IndexMap selectRule(const Node &n, const Dims &in, const Dims &out) {
  int r = (int)in.size();
  int64_t dim = wrapDimOrError(n, n.intArg(1), r);
  Dim idx = selectIndex(n, 2, in[dim], "select");
  std::vector<int> pos(r);
  for (int d = 0; d < r; ++d) pos[d] = d < dim ? d : (d == dim ? -1 : d - 1);
  IndexMap m = IndexMap::select(pos, (int)out.size());
  m.c[dim] = idx;
  return m;
}

//===-- The table -----------------------------------------------------------===//

OpLowering pw(PointwiseRule r) { return OpLowering{LoweringKind::Pointwise, r}; }
OpLowering view(ViewRule r) { return OpLowering{LoweringKind::View, nullptr, r}; }
OpLowering reduction(ReduceKind k, bool mean = false) {
  return OpLowering{LoweringKind::Reduction, nullptr, nullptr, k, mean};
}
OpLowering kind(LoweringKind k) { return OpLowering{k}; }
OpLowering matmul(bool bias, bool batched) {
  OpLowering l{LoweringKind::Matmul};
  l.bias = bias;
  l.batched = batched;
  return l;
}

OpLowering conv(ConvDesc::Role r) {
  OpLowering l{LoweringKind::Conv};
  l.conv = r;
  return l;
}

OpLowering linalg(LinalgDesc::Kind k) {
  OpLowering l{LoweringKind::Linalg};
  l.linalg = k;
  return l;
}

using A = const PointwiseArgs &;

} // namespace

const std::map<std::string, OpLowering> &loweringTable() {
  static const std::map<std::string, OpLowering> t = [] {
    using K = LoweringKind;
    return std::map<std::string, OpLowering>{
        // Arithmetic.
        {"aten.add.Tensor", pw(addRule)},
        {"aten.add.Scalar", pw(addRule)},
        {"aten.sub.Tensor", pw(subRule)},
        {"aten.sub.Scalar", pw(subRule)},
        {"aten.rsub.Scalar", pw(rsubRule)},
        {"aten.div.Tensor", pw(divRule)},
        {"aten.div.Scalar", pw(divRule)},
        {"aten.square.default", pw([](A a) { ERef x = a.x(0); return mkOp(S::Mul, a.od, {x, x}); })},
        {"aten.pow.Tensor_Scalar", pw(powScalarRule)},
        {"aten.pow.Tensor_Tensor", pw(powTensorRule)},
        {"aten.sign.default", pw(signRule)},
        // Transcendental functions.
        {"aten.rsqrt.default", pw([](A a) { return recip(a, mkOp(S::Sqrt, a.od, {a.x(0)})); })},
        {"aten.reciprocal.default", pw([](A a) { return recip(a, a.x(0)); })},
        {"aten.sigmoid.default", pw(sigmoidRule)},
        {"aten.relu.default", pw([](A a) { return mkOp(S::Max, a.od, {a.x(0), mkConst(a.od, 0.0)}); })},
        {"aotc.philox_uniform.default", pw(philoxUniform)},
        // Masks and selection.
        {"aten.tril.default", pw([](A a) { return triangle(a, S::Le); })},
        {"aten.triu.default", pw([](A a) { return triangle(a, S::Ge); })},
        {"aten.logical_not.default", pw([](A a) { return mkOp(S::Not, DType::Bool, {a.x(0, DType::Bool)}); })},
        {"aten.where.self", pw([](A a) { return mkOp(S::Select, a.od, {a.x(0, DType::Bool), a.x(1), a.x(2)}); })},
        {"aten.where.ScalarOther", pw([](A a) { return mkOp(S::Select, a.od, {a.x(0, DType::Bool), a.x(1), a.x(2)}); })},
        {"aten.where.ScalarSelf", pw([](A a) { return mkOp(S::Select, a.od, {a.x(0, DType::Bool), a.x(1), a.x(2)}); })},
        {"aten.masked_fill.Scalar", pw([](A a) { return mkOp(S::Select, a.od, {a.x(1, DType::Bool), a.x(2), a.x(0)}); })},
        {"aten.clamp.default", pw([](A a) { return clampBy(a, clampBy(a, a.x(0), 1, S::Lt), 2, S::Gt); })},
        {"aten.clamp_min.default", pw([](A a) { return clampBy(a, a.x(0), 1, S::Lt); })},
        {"aten.clamp_max.default", pw([](A a) { return clampBy(a, a.x(0), 1, S::Gt); })},
        {"aten.masked_fill.Tensor", pw([](A a) { return mkOp(S::Select, a.od, {a.x(1, DType::Bool), a.x(2), a.x(0)}); })},
        // Logical ops on the operands' truth values; bitwise ops in the promoted dtype
        // (and/or of i1 or i64; xor as (a | b) - (a & b), which holds for two's complement).
        {"aten.logical_and.default", pw([](A a) { return mkOp(S::And, DType::Bool, {a.x(0, DType::Bool), a.x(1, DType::Bool)}); })},
        {"aten.logical_or.default", pw([](A a) { return mkOp(S::Or, DType::Bool, {a.x(0, DType::Bool), a.x(1, DType::Bool)}); })},
        {"aten.logical_xor.default", pw([](A a) {
           return mkOp(S::Ne, DType::Bool, {mkCast(a.x(0, DType::Bool), DType::I64), mkCast(a.x(1, DType::Bool), DType::I64)});
         })},
        {"aten.bitwise_and.Tensor", pw([](A a) { return mkOp(S::And, a.od, {a.x(0), a.x(1)}); })},
        {"aten.bitwise_and.Scalar", pw([](A a) { return mkOp(S::And, a.od, {a.x(0), a.x(1)}); })},
        {"aten.bitwise_or.Tensor", pw([](A a) { return mkOp(S::Or, a.od, {a.x(0), a.x(1)}); })},
        {"aten.bitwise_or.Scalar", pw([](A a) { return mkOp(S::Or, a.od, {a.x(0), a.x(1)}); })},
        {"aten.bitwise_xor.Tensor", pw(bitwiseXor)},
        {"aten.bitwise_xor.Scalar", pw(bitwiseXor)},
        {"aten._to_copy.default", pw([](A a) { return a.x(0); })},
        // Comparisons, and the unary/binary ops that are one ScalarOp: their OpDef::scalar.
        // Factories.
        {"aten.full.default", pw([](A a) { return mkConstArg(a.od, a.n, 1); })},
        {"aten.full_like.default", pw([](A a) { return mkConstArg(a.od, a.n, 1); })},
        {"aten.scalar_tensor.default", pw([](A a) { return mkConstArg(a.od, a.n, 0); })},
        {"aten.zeros.default", pw([](A a) { return mkConst(a.od, 0.0); })},
        {"aten.zeros_like.default", pw([](A a) { return mkConst(a.od, 0.0); })},
        {"aten.ones.default", pw([](A a) { return mkConst(a.od, 1.0); })},
        {"aten.ones_like.default", pw([](A a) { return mkConst(a.od, 1.0); })},
        {"aten.arange.default", pw([](A a) { return arange(a, -1, -1); })},
        {"aten.arange.start_step", pw([](A a) { return arange(a, 0, 2); })},
        // Views.
        {"aten.permute.default", view(permuteRule)},
        {"aten.t.default", view(tRule)},
        {"aten.transpose.int", view(transposeRule)},
        {"aten.expand.default", view(expandRule)},
        {"aten.unsqueeze.default", view(squeezeRule)},
        {"aten.squeeze.dims", view(squeezeRule)},
        {"aten.squeeze.dim", view(squeezeRule)},
        {"aten.slice.Tensor", view(sliceRule)},
        {"aten.select.int", view(selectRule)},
        {"aten.as_strided.default", view(asStridedRule)},
        {"aten.view.default", kind(K::Reshape)},
        {"aten._unsafe_view.default", kind(K::Reshape)},
        {"aten.reshape.default", kind(K::Reshape)},
        {"aten.alias.default", kind(K::Alias)},
        {"aten.clone.default", kind(K::Clone)},
        // Reductions.
        {"aten.sum.dim_IntList", reduction(ReduceKind::Sum)},
        {"aten.sum.default", reduction(ReduceKind::Sum)},
        {"aten.mean.dim", reduction(ReduceKind::Sum, true)},
        {"aten.mean.default", reduction(ReduceKind::Sum, true)},
        {"aten.amax.default", reduction(ReduceKind::Max)},
        {"aten.amin.default", reduction(ReduceKind::Min)},
        {"aten.argmax.default", reduction(ReduceKind::ArgMax)},
        {"aten.prod.default", reduction(ReduceKind::Prod)},
        {"aten.prod.dim_int", reduction(ReduceKind::Prod)},
        // Matrix products and index ops (builders in Fusion.cpp).
        {"aten.mm.default", matmul(false, false)},
        {"aten.addmm.default", matmul(true, false)},
        {"aten.bmm.default", matmul(false, true)},
        // Convolutions after lower(): regular, no bias (lib/Decompose/LowerConv.cpp).
        {"aten.convolution.default", conv(ConvDesc::Role::Forward)},
        {"aotc.conv_input_grad.default", conv(ConvDesc::Role::InputGrad)},
        {"aotc.conv_weight_grad.default", conv(ConvDesc::Role::WeightGrad)},
        {"aten._fft_r2c.default", OpLowering{LoweringKind::Fft}},
        {"aten._fft_c2r.default", OpLowering{LoweringKind::Fft}},
        {"aten._fft_c2c.default", OpLowering{LoweringKind::Fft}},
        {"aotc.lapack_cholesky.default", linalg(LinalgDesc::Kind::Cholesky)},
        {"aotc.lapack_trisolve.default", linalg(LinalgDesc::Kind::TriSolve)},
        {"aotc.lapack_lu.default", linalg(LinalgDesc::Kind::Lu)},
        {"aotc.lapack_lu_solve.default", linalg(LinalgDesc::Kind::LuSolve)},
        {"aotc.lapack_eigh.default", linalg(LinalgDesc::Kind::Eigh)},
        {"aotc.lapack_svd.default", linalg(LinalgDesc::Kind::Svd)},
        {"aotc.lapack_qr.default", linalg(LinalgDesc::Kind::Qr)},
        {"aotc.lapack_perm.default", linalg(LinalgDesc::Kind::Perm)},
        {"aten.gather.default", kind(K::Gather)},
        {"aten.index_select.default", kind(K::IndexSelect)},
        {"aten.scatter_add.default", kind(K::Scatter)},
        {"aten.scatter.src", kind(K::Scatter)},
        {"aten.scatter.value", kind(K::Scatter)},
        {"aotc.scatter_combine.default", kind(K::Scatter)},
        {"aten.slice_scatter.default", kind(K::ViewScatter)},
        {"aten.select_scatter.default", kind(K::ViewScatter)},
    };
  }();
  return t;
}

const OpLowering *findLowering(const std::string &target) {
  auto it = loweringTable().find(target);
  if (it != loweringTable().end()) return &it->second;
  // A primitive that is one scalar operation says so in its OpDef (OpRegistry.h).
  static const OpLowering fromOpDef = pw(scalarBody);
  const OpDef *d = OpRegistry::get().lookup(target);
  return d && d->primitive && d->scalar ? &fromOpDef : nullptr;
}

std::string opBase(const std::string &target) {
  std::string t = target;
  if (t.rfind("aten.", 0) == 0 || t.rfind("aotc.", 0) == 0) t = t.substr(5);
  auto dot = t.find('.');
  return dot == std::string::npos ? t : t.substr(0, dot);
}

LinalgDesc linalgDescOf(const Node &n, const OpLowering &l) {
  using K = LinalgDesc::Kind;
  LinalgDesc d;
  d.kind = l.linalg;
  d.dtype = n.type().dtype;
  // The matrix operand: A (LuSolve: LU; Perm: LU, its second argument, for m and n).
  const Shape &ms = n.tensorArg(d.kind == K::Perm ? 1 : 0)->type().shape;
  d.m = ms[ms.size() - 2], d.n = ms.back();
  d.batch = 1;
  for (size_t i = 0; i + 2 < ms.size(); ++i) d.batch *= ms[i];
  auto rhs = [&](size_t arg) {
    const Shape &bs = n.tensorArg(arg)->type().shape;
    return d.left ? bs.back() : bs[bs.size() - 2];
  };
  switch (d.kind) {
  case K::Cholesky: d.upper = n.boolArg(1), d.check = n.boolArg(2); break;
  case K::TriSolve: d.upper = n.boolArg(2), d.left = n.boolArg(3), d.unit = n.boolArg(4), d.nrhs = rhs(1); break;
  case K::Lu: d.check = n.boolArg(1); break;
  case K::LuSolve: d.left = n.boolArg(3), d.adjoint = n.boolArg(4), d.nrhs = rhs(2); break;
  case K::Eigh: d.upper = n.boolArg(1), d.computeUV = n.boolArg(2); break;
  case K::Svd: d.full = n.boolArg(1) ? 1 : 0, d.computeUV = n.boolArg(2); break;
  case K::Qr: d.full = (int)n.intArg(1); break;
  case K::Perm: break;
  }
  return d;
}

const char *linalgErrorText(const LinalgDesc &d) {
  using K = LinalgDesc::Kind;
  if (d.kind == K::Eigh || d.kind == K::Svd)
    return "the eigenvalue / singular value iteration did not converge (the value is 1000 + LAPACK's info), or the "
           "call failed in libaotc_kernels (aotc_linalg's status, aotc/kernels.h)";
  if (d.check && d.kind == K::Cholesky)
    return "the input is not positive-definite (torch.linalg.cholesky raises here): the value is 1000 + the order of "
           "the first leading minor that is not, in the first failing matrix";
  if (d.check)
    return "the input is singular (torch.linalg.solve / inv / lu_factor raise here): the value is 1000 + the "
           "(1-based) index of U's first zero pivot, in the first failing matrix";
  return "the linalg call failed in libaotc_kernels (the value is aotc_linalg's status, aotc/kernels.h: 1 for pivots "
         "outside [1, n])";
}

} // namespace aotc::fusion

namespace aotc {
std::vector<std::string> codegenTargets() {
  std::vector<std::string> r;
  for (auto &[k, v] : fusion::loweringTable()) r.push_back(k);
  for (auto &[k, d] : OpRegistry::get().all())
    if (d.primitive && d.scalar && !fusion::loweringTable().count(k)) r.push_back(k);
  std::sort(r.begin(), r.end());
  return r;
}
} // namespace aotc
