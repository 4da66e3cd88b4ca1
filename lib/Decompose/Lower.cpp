//===- Lower.cpp - Rule-bearing composites to primitives, after autodiff -----===//
//
// This file implements stage 5a, lower(Program&), on the joint graph. The ops
// that kept their own derivative rule through autodiff (gelu, _softmax,
// _log_softmax, native_layer_norm, mean, ...) and the backward helpers that
// derivative formulas emit (gelu_backward, threshold_backward,
// _softmax_backward_data, native_layer_norm_backward, ...) are rewritten into
// primitives, so that the partitioner can recompute any piece and codegen only
// ever sees the primitive set below.
//
// The table at the bottom is the whole stage; formulas follow
// torch/_decomp/decompositions.py (each rule names its source). The softmax and
// layer-norm families are in LowerNorm.cpp. After the table reaches its fixed
// point every node must be a primitive (internal error otherwise: a composite
// without a lower rule is a compiler bug, since capture accepted it).
//===----------------------------------------------------------------------===//
#include "Rules.h"

#include "aotc/Decompositions.h"
#include "aotc/Stages.h"

#include <algorithm>
#include <cmath>
#include <limits>

namespace aotc {
namespace {

using namespace rewrite;
using rules::Vals;

constexpr double kSqrt1_2 = 0.70710678118654752440;    // M_SQRT1_2
constexpr double k2_SqrtPi = 1.12837916709551257390;   // M_2_SQRTPI
constexpr double kSqrt2 = 1.41421356237309504880;      // M_SQRT2
constexpr double kGeluKappa = 0.044715;

/// 1 - x, as add(neg(x), 1).
Node *oneMinus(Emitter &e, Node *x) { return e.add(e.neg(x), int64_t(1)); }

bool isTanhGelu(const Node &n, size_t approxArg) {
  const std::string &a = std::get<std::string>(n.args.at(approxArg));
  if (a != "none" && a != "tanh") nodeError(n, "gelu: unknown approximate '" + a + "'");
  return a == "tanh";
}

/// gelu(x, approximate) (torch/_decomp/decompositions.py gelu):
///   'none': x * 0.5 * (1 + erf(x / sqrt(2)));
///   'tanh': 0.5 * x * (1 + tanh(sqrt(2/pi) * (x + 0.044715 x^3))).
Vals gelu(Emitter &e, Node &n) {
  Node *x = n.tensorArg(0);
  if (isTanhGelu(n, 1)) {
    const double kBeta = kSqrt2 * k2_SqrtPi * 0.5;
    Node *cube = e.mul(e.mul(x, x), x);
    Node *inner = e.mul(e.add(x, e.mul(cube, kGeluKappa)), kBeta);
    Node *t = e.call("aten.tanh.default", {inner});
    return {e.mul(e.mul(x, 0.5), e.add(t, int64_t(1)))};
  }
  Node *cdf = e.add(e.call("aten.erf.default", {e.mul(x, kSqrt1_2)}), int64_t(1));
  return {e.mul(e.mul(x, 0.5), cdf)};
}

/// gelu_backward(grad, x, approximate) (torch/_decomp/decompositions.py gelu_backward):
///   'none': grad * (cdf + x * pdf), cdf = 0.5 (1 + erf(x/sqrt2)),
///           pdf = exp(-x^2/2) / sqrt(2 pi);
///   'tanh': grad * (0.5 (1 + t) + 0.5 x (1 - t^2) * kBeta (1 + 3 kappa x^2)).
Vals geluBackward(Emitter &e, Node &n) {
  Node *g = n.tensorArg(0), *x = n.tensorArg(1);
  if (isTanhGelu(n, 2)) {
    const double kBeta = kSqrt2 * k2_SqrtPi * 0.5;
    Node *xsq = e.mul(x, x);
    Node *inner = e.mul(e.add(x, e.mul(e.mul(xsq, x), kGeluKappa)), kBeta);
    Node *t = e.call("aten.tanh.default", {inner});
    Node *left = e.mul(x, 0.5);
    Node *right = e.add(t, int64_t(1));
    Node *leftD = e.mul(right, 0.5);
    Node *rightD = oneMinus(e, e.mul(t, t));
    Node *innerD = e.mul(e.add(e.mul(xsq, 3.0 * kGeluKappa), int64_t(1)), kBeta);
    rightD = e.mul(e.mul(left, rightD), innerD);
    return {e.mul(g, e.add(leftD, rightD))};
  }
  const double kBeta = k2_SqrtPi * kSqrt1_2 * 0.5;
  Node *cdf = e.mul(e.add(e.call("aten.erf.default", {e.mul(x, kSqrt1_2)}), int64_t(1)), 0.5);
  Node *pdf = e.mul(e.exp(e.mul(e.mul(x, x), -0.5)), kBeta);
  return {e.mul(g, e.add(cdf, e.mul(x, pdf)))};
}

/// threshold_backward(grad, self, threshold) = where(self <= threshold, 0, grad).
/// The result has the promoted dtype of grad and self (ATen's TensorIterator), not grad's
/// (libFuzzer find: an i64 grad with a f32 self lowered to i64, an internal error).
Vals thresholdBackward(Emitter &e, Node &n) {
  Node *g = n.tensorArg(0);
  const DType out = n.types[0].dtype;
  Node *le = e.call("aten.le.Scalar", {n.args[1], n.args[2]});
  Node *gv = g->type().dtype == out
                 ? g
                 : e.call("aten._to_copy.default", {Arg(g)}, {{"dtype", Arg(DTypeLit{out})}});
  return {e.call("aten.where.self", {le, e.scalarTensor(int64_t(0), out), gv})};
}

/// sum(x, dtype) -> sum.dim_IntList(x, [], False, dtype=dtype).
Vals sumDefault(Emitter &e, Node &n) {
  return {e.call("aten.sum.dim_IntList", {n.args[0], std::vector<int64_t>{}, false}, {{"dtype", n.args[1]}})};
}

/// mean(x, dtype) / mean.dim(x, dim, keepdim, dtype) -> sum.dim_IntList / count (an int)
/// (torch/_refs mean: sum then true_divide by the number of reduced elements).
Vals mean(Emitter &e, Node &n) {
  Node *x = n.tensorArg(0);
  const Shape &s = x->type().shape;
  bool isDim = n.target == "aten.mean.dim";
  std::vector<int64_t> dims = isDim ? reducedDims(n, 1, (int64_t)s.size()) : std::vector<int64_t>{};
  if (!isDim)
    for (int64_t i = 0; i < (int64_t)s.size(); ++i) dims.push_back(i);
  Size count = 1; // over run-time sizes an expression: a size argument of the div
  for (int64_t d : dims) count = count * sizeOf(x->type(), (size_t)d);
  bool keepdim = isDim && n.boolArg(2);
  Arg dtype = n.args[isDim ? 3 : 1];
  Node *sum = e.call("aten.sum.dim_IntList", {x, dims, keepdim}, {{"dtype", dtype}});
  // An int divisor (true division all the same), as a run-time count must be: one text at a
  // size whether the count was run-time or not.
  return {e.divBy(sum, count)};
}

/// rsub.Scalar(x, other, alpha) = other - alpha * x.
/// clamp.Tensor(x, min?, max?) -> minimum(maximum(x, min), max) in the result dtype (both
/// propagate NaN; min > max gives max). Its derivative rule ran before (derivatives.yaml).
Vals clampTensor(Emitter &e, Node &n) {
  DType dt = n.types[0].dtype;
  Node *x = e.toDtype(n.tensorArg(0), dt);
  Node *y = x;
  if (!n.isNoneArg(1)) y = e.call("aten.maximum.default", {y, e.toDtype(n.tensorArg(1), dt)});
  if (!n.isNoneArg(2)) y = e.call("aten.minimum.default", {y, e.toDtype(n.tensorArg(2), dt)});
  if (y == n.tensorArg(0)) y = e.call("aten.clone.default", {y});
  return {y};
}

/// aotc::prod_others(x, dim) -> prod over j of where(j == i, 1, x[.., j, ..]) on x expanded to
/// [.., n (i), n (j), ..]: one fused reduction, O(n^2) along dim; a 0-d x gives 1.
Vals prodOthers(Emitter &e, Node &n) {
  Node *x = n.tensorArg(0);
  const Shape &s = x->type().shape;
  DType dt = x->type().dtype;
  if (s.empty()) return {e.call("aten.ones_like.default", {x})};
  int64_t d = wrapDimAt(n, n.intArg(1), (int64_t)s.size()), len = s[d];
  Shape ex = s;
  ex.insert(ex.begin() + d, len); // [.., n (i), n (j), ..]
  Node *xj = e.call("aten.expand.default", {e.call("aten.unsqueeze.default", {x, d}), ex});
  Node *ar = e.call("aten.arange.start_step", {int64_t(0), len}, {{"dtype", DTypeLit{DType::I64}}});
  Shape si(s.size() + 1, 1), sj(s.size() + 1, 1);
  si[d] = len;
  sj[d + 1] = len;
  Node *same = e.call("aten.eq.Tensor", {e.view(ar, si), e.view(ar, sj)});
  Node *one = isFloating(dt) ? e.scalarTensor(1.0, dt) : e.scalarTensor(int64_t(1), dt);
  Node *masked = e.call("aten.where.self", {same, one, xj});
  return {e.call("aten.prod.dim_int", {masked, d + 1})};
}

/// scatter_reduce.two(self, dim, index, src, reduce, include_self) -> the scatter primitives.
/// Without include_self the touched positions first take an identity (scatter.value: 0 for sum
/// and mean, 1 for prod) or one of their own source values (scatter.src: amax / amin, so no
/// +-inf or integer extreme is needed); then sum: scatter_add; prod / amax / amin:
/// aotc::scatter_combine; mean: the sum over max(count, 1), count = scatter_add of ones.
Vals scatterReduce(Emitter &e, Node &n) {
  Node *self = n.tensorArg(0), *ix = n.tensorArg(2), *src = n.tensorArg(3);
  Arg dim = n.args[1];
  const std::string &red = std::get<std::string>(n.args[4]);
  const bool includeSelf = n.boolArg(5);
  const bool fl = isFloating(n.types[0].dtype);
  Node *base = self;
  if (!includeSelf) {
    if (red == "amax" || red == "amin") base = e.call("aten.scatter.src", {self, dim, ix, src});
    else if (red == "prod") base = e.call("aten.scatter.value", {self, dim, ix, fl ? Arg(1.0) : Arg(int64_t(1))});
    else base = e.call("aten.scatter.value", {self, dim, ix, fl ? Arg(0.0) : Arg(int64_t(0))});
  }
  if (red == "sum") return {e.call("aten.scatter_add.default", {base, dim, ix, src})};
  if (red == "mean") {
    Node *sum = e.call("aten.scatter_add.default", {base, dim, ix, src});
    Node *cnt = e.call("aten.scatter_add.default", {e.call("aten.full_like.default", {self, includeSelf ? 1.0 : 0.0}), dim,
                                                    ix, e.call("aten.full_like.default", {src, 1.0})});
    Node *den = e.call("aten.where.self", {e.call("aten.eq.Scalar", {cnt, int64_t(0)}),
                                           e.scalarTensor(1.0, n.types[0].dtype), cnt});
    return {e.div(sum, den)};
  }
  return {e.call("aotc.scatter_combine.default", {base, dim, ix, src, red})};
}

Vals rsubScalar(Emitter &e, Node &n) {
  Node *x = n.tensorArg(0);
  double alpha = n.scalarArg(2);
  Node *ax = alpha == 1.0 ? e.neg(x) : e.mul(x, std::holds_alternative<int64_t>(n.args[2]) ? Arg(-n.intArg(2)) : Arg(-alpha));
  return {e.add(ax, n.args[1])};
}

/// add/sub .Tensor/.Scalar with alpha != 1 -> op(x, other * alpha); alpha == 1 stays.
Vals dropAlpha(Emitter &e, Node &n) {
  size_t ai = n.args.size() - 1;
  if (n.scalarArg(ai) == 1.0) return {};
  if (!n.symArgs.empty()) // other * alpha would fold a run-time size argument
    nodeError(n, "lower of " + n.target + " with alpha != 1 and a run-time size as an argument is not supported "
                 "yet: compile at one size with --specialize SYMBOL=N (docs/dynamic-shapes.md)");
  std::string base = n.target.substr(0, n.target.rfind('.'));
  if (n.types[0].dtype == DType::Bool && std::holds_alternative<Node *>(n.args[1])) {
    // Boolean result (torch computes in bool: x | (bool(alpha) & other)); other * alpha
    // would promote to i64 (libFuzzer find: add(b8, b8, alpha=2) lowered to i64).
    if (n.scalarArg(ai) != 0.0) return {e.call(n.target, {n.args[0], n.args[1]})};
    return {e.call(n.target, {n.args[0], e.mul(n.args[1], Arg(false))})};
  }
  Node *scaled = std::holds_alternative<Node *>(n.args[1])
                     ? e.mul(n.args[1], n.args[ai])
                     : nullptr;
  if (!scaled) {
    bool ints = !std::holds_alternative<double>(n.args[1]) && !std::holds_alternative<double>(n.args[ai]);
    if (ints) // integer scalars: wrapping int64 product, as ATen's (never through double)
      return {e.call(n.target, {n.args[0], Arg((int64_t)((uint64_t)n.intArg(1) * (uint64_t)n.intArg(ai)))})};
    return {e.call(n.target, {n.args[0], Arg(n.scalarArg(1) * n.scalarArg(ai))})};
  }
  return {e.call(base + ".Tensor", {n.args[0], scaled})};
}

/// squeeze.dim(x, d) -> squeeze.dims(x, [d]).
Vals squeeze(Emitter &e, Node &n) {
  return {e.call("aten.squeeze.dims", {n.args[0], std::vector<int64_t>{n.intArg(1)}})};
}

/// alias(x) -> view(x, shape); lift_fresh_copy(x) -> clone(x).
Vals aliasToView(Emitter &e, Node &n) {
  const TensorType &t = n.tensorArg(0)->type();
  return {e.view(n.tensorArg(0), t.shape, t.sym)};
}
Vals toClone(Emitter &e, Node &n) { return {e.call("aten.clone.default", {n.args[0]})}; }


/// var.correction(x, dim, correction, keepdim) (torch/_refs var):
///   mean = sum(x, dim, keepdim=True) / N; sum((x - mean)^2, dim, keepdim) / max(0, N - c),
/// N = number of reduced elements, c = correction (None: 1). N - c <= 0 gives inf/nan as torch.
Vals varCorrection(Emitter &e, Node &n) {
  Node *x = n.tensorArg(0);
  const Shape &s = x->type().shape;
  std::vector<int64_t> dims = reducedDims(n, 1, (int64_t)s.size());
  int64_t count = 1;
  for (int64_t d : dims) count *= s[d];
  double c = n.isNoneArg(2) ? 1.0 : n.scalarArg(2);
  bool keepdim = n.boolArg(3);
  Node *xf = e.toDtype(x, n.types[0].dtype);
  Node *mean = e.div(e.sum(xf, dims, true), (double)count);
  Node *d = e.sub(xf, mean);
  Node *sq = e.sum(e.mul(d, d), dims, keepdim);
  return {e.div(sq, std::max(0.0, (double)count - c))};
}

/// aotc::safe_softmax(x, dim): a = amax(x, dim), m = (a == -inf) (every value -inf; a NaN
/// makes a NaN, so the row is not masked and gives NaN, as torch);
/// u = exp(x - where(m, 0, a)); where(m, 0, u / sum(u)). A masked row's u is exp(-inf) = 0, so
/// its 0/0 is replaced by the final where. One max pass: this is torch's
/// where(m, 0, _softmax(where(m, 0, x))) with amax(where(m, 0, x)) = where(m, 0, a) (m is
/// constant along dim), which gives the same bits for every row.
Vals safeSoftmax(Emitter &e, Node &n) {
  Node *x = n.tensorArg(0);
  if (numelOf(x->type().shape) == 0) return {e.call("aten.clone.default", {x})}; // empty: nothing to normalize
  int64_t r = x->type().rank();
  std::vector<int64_t> dim = {r == 0 ? 0 : wrapDimAt(n, n.intArg(1), r)};
  if (r == 0) dim.clear();
  Node *a = e.call("aten.amax.default", {x, dim, true});
  Node *m = e.call("aten.eq.Scalar", {a, -INFINITY});
  Node *zero = e.scalarTensor(0.0, n.types[0].dtype);
  Node *u = e.exp(e.sub(x, e.call("aten.where.self", {m, zero, a})));
  return {e.call("aten.where.self", {m, zero, e.div(u, e.sum(u, dim, true))})};
}

/// logsumexp(x, dim, keepdim) (torch/_refs logsumexp):
///   m = amax(x, dim, keepdim=True), with infinite maxima replaced by 0;
///   log(sum(exp(x - m), dim, keepdim)) + m (m squeezed unless keepdim).
Vals logsumexp(Emitter &e, Node &n) {
  Node *x = e.toDtype(n.tensorArg(0), n.types[0].dtype);
  int64_t r = x->type().rank();
  std::vector<int64_t> dims = reducedDims(n, 1, r);
  bool keepdim = n.boolArg(2);
  Node *m = e.call("aten.amax.default", {x, dims, true});
  Node *inf = e.call("aten.eq.Scalar", {e.call("aten.abs.default", {m}), std::numeric_limits<double>::infinity()});
  m = e.call("aten.where.self", {inf, e.scalarTensor(int64_t(0), n.types[0].dtype), m});
  Node *s = e.sum(e.exp(e.sub(x, m)), dims, keepdim);
  Node *ms = keepdim || r == 0 ? m : e.view(m, n.types[0].shape, n.types[0].sym);
  return {e.add(e.call("aten.log.default", {s}), ms)};
}

/// elu(x, alpha, scale, input_scale) (aten/src/ATen/native/cpu/Activation.cpp elu_kernel):
///   x > 0 ? scale x : scale alpha expm1(x input_scale).
Vals elu(Emitter &e, Node &n) {
  Node *x = n.tensorArg(0);
  double alpha = n.scalarArg(1), scale = n.scalarArg(2), inScale = n.scalarArg(3);
  Node *gt = e.call("aten.gt.Scalar", {x, int64_t(0)});
  Node *pos = scale == 1.0 ? x : e.mul(x, scale);
  Node *xs = inScale == 1.0 ? x : e.mul(x, inScale);
  Node *neg = e.mul(e.call("aten.expm1.default", {xs}), alpha * scale);
  return {e.call("aten.where.self", {gt, pos, neg})};
}

/// softplus(x, beta, threshold) (aten/src/ATen/native/cpu/Activation.cpp softplus_kernel):
///   x beta > threshold ? x : log1p(exp(x beta)) / beta.
Vals softplus(Emitter &e, Node &n) {
  Node *x = n.tensorArg(0);
  double beta = n.scalarArg(1);
  Node *xb = beta == 1.0 ? x : e.mul(x, n.args[1]);
  Node *gt = e.call("aten.gt.Scalar", {xb, n.args[2]});
  Node *sp = e.call("aten.log1p.default", {e.exp(xb)});
  if (beta != 1.0) sp = e.div(sp, n.args[1]);
  return {e.call("aten.where.self", {gt, x, sp})};
}

/// embedding(weight, indices, ...) (aten/src/ATen/native/Embedding.cpp):
///   index_select(weight, 0, indices.reshape(-1)).view(indices.sizes + [D]).
/// padding_idx and scale_grad_by_freq only change the backward (derivatives.yaml).
Vals embedding(Emitter &e, Node &n) {
  Node *w = n.tensorArg(0), *idx = n.tensorArg(1);
  const Shape &is = idx->type().shape;
  Node *flat = is.size() == 1 ? idx : e.viewTo(idx, {product(sizesOf(idx->type()))});
  Node *rows = e.call("aten.index_select.default", {w, int64_t(0), flat});
  return {is.size() == 1 ? rows : e.view(rows, n.types[0].shape, n.types[0].sym)};
}

/// leaky_relu(x, slope) = where(x > 0, x, x * slope).
Vals leakyRelu(Emitter &e, Node &n) {
  Node *x = n.tensorArg(0);
  Node *gt = e.call("aten.gt.Scalar", {x, int64_t(0)});
  return {e.call("aten.where.self", {gt, x, e.mul(x, n.args[1])})};
}

/// any(x, dims, keepdim) = ne(sum(_to_copy(ne(x, 0), i64), dims, keepdim), 0) (NaN != 0);
/// all(x, dims, keepdim) = eq(sum(_to_copy(eq(x, 0), i64), dims, keepdim), 0). The `.default`
/// overloads reduce every dim.
Vals anyAll(Emitter &e, Node &n) {
  Node *x = n.tensorArg(0);
  bool isAll = n.target.rfind("aten.all.", 0) == 0;
  std::vector<int64_t> dims = n.args.size() > 1 ? reducedDims(n, 1, x->type().rank()) : std::vector<int64_t>{};
  bool keep = n.args.size() > 2 && n.boolArg(2);
  Node *hit = e.toDtype(e.call(isAll ? "aten.eq.Scalar" : "aten.ne.Scalar", {x, int64_t(0)}), DType::I64);
  return {e.call(isAll ? "aten.eq.Scalar" : "aten.ne.Scalar", {e.sum(hit, dims, keep), int64_t(0)})};
}

const std::vector<RuleEntry> &table() {
  using namespace rules;
  // clang-format off
  static const std::vector<RuleEntry> t = [] {
  std::vector<RuleEntry> t = {
    {"aten.gelu.default",                   gelu,               "x/2 (1 + erf(x/sqrt2)) or the tanh form", true},
    {"aten.gelu_backward.default",          geluBackward,       "grad (cdf + x pdf) or the tanh form", true},
    {"aten._softmax.default",               softmax,            "exp(x - amax) / sum", true},
    {"aotc.safe_softmax.default",           safeSoftmax,        "where(m, 0, u / sum(u)), u = exp(x - where(m, 0, a)), m = (a == -inf), a = amax", true},
    {"aten._log_softmax.default",           logSoftmax,         "(x - amax) - log(sum(exp(x - amax)))", true},
    {"aten._softmax_backward_data.default", softmaxBackward,    "g y - y sum(g y)", true},
    {"aten._log_softmax_backward_data.default", logSoftmaxBackward, "g - exp(y) sum(g)", true},
    {"aten.native_layer_norm.default",      nativeLayerNorm,    "mean, biased var, rsqrt; 3 results", true},
    {"aten.native_layer_norm_backward.default", nativeLayerNormBackward, "d_input, d_weight, d_bias per output_mask", true},
    {"aten._native_batch_norm_legit_functional.default", batchNormFunctional, "training: batch mean, biased var, rsqrt; running stats with momentum, var sum / (M - 1); else running stats", true},
    {"aten._native_batch_norm_legit_no_training.default", batchNormNoTraining, "(x - running_mean) rsqrt(running_var + eps) [w] [+b]; empty save_mean/save_rstd", true},
    {"aten.native_batch_norm_backward.default", nativeBatchNormBackward, "train: invstd (d - sum(d)/M - xhat sum(d xhat)/M); eval: d rsqrt(running_var + eps); sums per channel", true},
    {"aten.native_group_norm.default",      nativeGroupNorm,    "x as [N, group, D]: mean, biased var, rsqrt; w, b per channel", true, true},
    {"aten.native_group_norm_backward.default", nativeGroupNormBackward, "rstd (d - mean(d) - xhat mean(d xhat)) per group; sums per channel", true, true},
    {"aten.any.dim",                        anyAll,             "ne(sum(ne(x, 0) as i64, dim), 0)", true},
    {"aten.any.dims",                       anyAll,             "ne(sum(ne(x, 0) as i64, dims), 0)", true},
    {"aten.any.default",                    anyAll,             "ne(sum(ne(x, 0) as i64), 0)", true},
    {"aten.all.dim",                        anyAll,             "eq(sum(eq(x, 0) as i64, dim), 0)", true},
    {"aten.all.dims",                       anyAll,             "eq(sum(eq(x, 0) as i64, dims), 0)", true},
    {"aten.all.default",                    anyAll,             "eq(sum(eq(x, 0) as i64), 0)", true},
    {"aten.max_pool2d_with_indices.default", maxPool2dWithIndices, "-inf padding, as_strided windows, amax / argmax + gather of positions", true},
    {"aten.max_pool2d_with_indices_backward.default", maxPool2dWithIndicesBackward, "scatter_add of grad_output at indices", true},
    {"aten.as_strided.default",             asStrided,          "input rank != 1: as_strided of view(x, [numel])", true, true},
    {"aten.upsample_nearest2d.default",     upsampleNearest2d,  "index_select along W then H at min(floorf(o s), I-1)", true},
    {"aten.upsample_nearest2d_backward.default", upsampleNearest2dBackward, "scatter_add along H then W (adjoint)", true, true},
    {"aten.upsample_bilinear2d.default",    upsampleBilinear2d, "two weighted index_selects along W, then along H", true},
    {"aten.upsample_bilinear2d_backward.default", upsampleBilinear2dBackward, "weighted scatter_adds along H then W (adjoint)", true, true},
    {"aten.avg_pool2d.default",             avgPool2d,          "k weighted index_selects along W, then H (valid / extent or divisor)", true},
    {"aten.avg_pool2d_backward.default",    avgPool2dBackward,  "weighted scatter_adds along H then W (adjoint)", true},
    {"aten._adaptive_avg_pool2d.default",   adaptiveAvgPool2d,  "max-window weighted index_selects along W, then H (1/len on the window)", true},
    {"aten._adaptive_avg_pool2d_backward.default", adaptiveAvgPool2dBackward, "weighted scatter_adds along H then W (adjoint)", true},
    {"aten.constant_pad_nd.default",        constantPadNd,      "slice for negative pads; full(value) + slice_scatter per padded dim", true},
    {"aten.convolution.default",            convolution,        "bias: + b.view([K, 1, ...]); transposed: aotc.conv_input_grad", true},
    {"aten.convolution_backward.default",   convolutionBackward, "conv_input_grad, conv_weight_grad, sum per output_mask", true},
    {"aotc.fft_r2c_backward.default",       fftR2cBackward,     "real part of the inverse _fft_c2c of the gradient zero-padded to the input's size"},
    {"aotc.fft_c2r_backward.default",       fftC2rBackward,     "onesided _fft_r2c of the gradient, mirrored entries doubled"},
    {"aotc.prod_others.default",            prodOthers,         "prod over j of where(j == i, 1, x expanded to [.., n (i), n (j), ..])"},
    {"aten.scatter_reduce.two",             scatterReduce,      "scatter.value / scatter.src (no include_self), then scatter_add or aotc.scatter_combine; mean: / max(count, 1)"},
    {"aten.clamp.Tensor",                   clampTensor,        "minimum(maximum(x, min), max) in the result dtype", true},
    {"aten.threshold_backward.default",     thresholdBackward,  "where(self <= threshold, 0, grad)", true},
    {"aten.mean.default",                   mean,               "sum.dim_IntList / numel", true},
    {"aten.mean.dim",                       mean,               "sum.dim_IntList / count of reduced elements", true},
    {"aten.sum.default",                    sumDefault,         "sum.dim_IntList over []", true},
    {"aten.t.default",                      transposeT,         "permute [1, 0]", true},
    {"aten.transpose.int",                  transposeInt,       "permute with two dims swapped", true},
    {"aten.silu.default",                   silu,               "x * sigmoid(x)", true},
    {"aten.rsub.Scalar",                    rsubScalar,         "other - alpha x", true},
    {"aten.add.Tensor",                     dropAlpha,          "alpha != 1: add(x, other * alpha)", true, true},
    {"aten.sub.Tensor",                     dropAlpha,          "alpha != 1: sub(x, other * alpha)", true, true},
    {"aten.add.Scalar",                     dropAlpha,          "alpha != 1: add(x, other * alpha)", true, true},
    {"aten.sub.Scalar",                     dropAlpha,          "alpha != 1: sub(x, other * alpha)", true, true},
    {"aten.squeeze.dim",                    squeeze,            "squeeze.dims [dim]", true},
    {"aten.reshape.default",                toView,             "view", true, true},
    {"aten.alias.default",                  aliasToView,        "view to the same shape", true},
    {"aten.detach.default",                 aliasToView,        "view to the same shape (autodiff passed no gradient through it)", true},
    {"aten.lift_fresh_copy.default",        toClone,            "clone", true},
    {"aten.square.default",                 square,             "pow.Tensor_Scalar(x, 2)", true},
    {"aten.clamp.default",                  clampLike,          "where-based, as decompose", true},
    {"aten.clamp_min.default",              clampLike,          "where(x <= min, min, x)", true},
    {"aten.hardtanh.default",               clampLike,          "where-based, as decompose", true},
    {"aten.cat.default",                    cat,                "slice_scatter of each input into zeros, as decompose", true},
    {"aten.split.Tensor",                   split,              "one slice.Tensor per chunk, as decompose", true},
    {"aten.split_with_sizes.default",       split,              "one slice.Tensor per piece, as decompose", true},
    {"aten.unbind.int",                     unbind,             "one select.int per index, as decompose", true},
    {"aten.where.ScalarOther",              whereScalar,        "where.self with a 0-d tensor", true},
    {"aten.where.ScalarSelf",               whereScalar,        "where.self with a 0-d tensor", true},
    {"aten.masked_fill.Scalar",             whereScalar,        "where.self(mask, value, x)", true},
    {"aten.var.correction",                 varCorrection,      "sum((x - mean)^2) / max(0, N - correction)"},
    {"aten.logsumexp.default",              logsumexp,          "log(sum(exp(x - m))) + m, m = amax (0 where infinite)", true},
    {"aten.elu.default",                    elu,                "where(x > 0, scale x, scale alpha expm1(input_scale x))", true},
    {"aten.softplus.default",               softplus,           "where(beta x > threshold, x, log1p(exp(beta x)) / beta)", true},
    {"aten.embedding.default",              embedding,          "index_select(weight, 0, indices.view(-1)).view(...)", true},
    {"aten.leaky_relu.default",             leakyRelu,          "where(x > 0, x, x * slope)", true},
  };
  for (const RuleEntry &r : linalgLowerRules()) t.push_back(r); // LowerLinalg.cpp
  return t;
  }();
  // clang-format on
  return t;
}

} // namespace

std::vector<std::pair<std::string, std::string>> lowerTable() {
  std::vector<std::pair<std::string, std::string>> r;
  for (const RuleEntry &e : table()) r.push_back({e.target, e.summary});
  return r;
}

const std::vector<std::string> &primitiveTargets() {
  // The registry's primitives (OpDef::primitive), sorted, and getitem (tuple access, no op).
  static const std::vector<std::string> prims = [] {
    std::vector<std::string> v = {"getitem"};
    for (const auto &[target, def] : OpRegistry::get().all())
      if (def.primitive) v.push_back(target);
    std::sort(v.begin(), v.end());
    return v;
  }();
  return prims;
}

bool isPrimitive(const std::string &target) {
  const auto &p = primitiveTargets();
  return std::binary_search(p.begin(), p.end(), target);
}

void lower(Program &p) {
  rewrite::applyRules(p.forward, table(), "lower");
  for (auto &n : p.forward.nodes())
    if (n->isCall() && !isPrimitive(n->target))
      internalError("lower: node '" + n->name + "' (" + n->target +
                    ") is not a primitive and has no lower rule");
  p.stage = "lower";
}

} // namespace aotc
