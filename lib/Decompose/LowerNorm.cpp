//===- LowerNorm.cpp - Lower rules: softmax and layer-norm families ----------===//
//
// Rules of the lower table (Lower.cpp) for the normalizations, forward and
// backward, written with amax/sum.dim_IntList/pointwise ops only. Formulas are
// those of torch/_decomp/decompositions.py (_softmax, _log_softmax,
// _softmax_backward_data, _log_softmax_backward_data, native_layer_norm via
// _normalize, native_layer_norm_backward). All statistics keep their reduced
// dims (keepdim=True) so they broadcast against the input.
//===----------------------------------------------------------------------===//
#include "Rules.h"

#include <numeric>

namespace aotc::rules {

using namespace rewrite;

/// _softmax(x, dim, half_to_float): e = exp(x - amax(x, dim)); e / sum(e, dim).
Vals softmax(Emitter &e, Node &n) {
  Node *x = n.tensorArg(0);
  if (numelOf(x->type().shape) == 0) return {e.call("aten.clone.default", {x})}; // empty: nothing to normalize
  int64_t r = x->type().rank();
  std::vector<int64_t> dim = {r == 0 ? 0 : wrapDimAt(n, n.intArg(1), r)};
  if (r == 0) dim.clear();
  Node *m = e.call("aten.amax.default", {x, dim, true});
  Node *u = e.exp(e.sub(x, m));
  return {e.div(u, e.sum(u, dim, true))};
}

/// _log_softmax(x, dim, half_to_float): s = x - amax(x, dim); s - log(sum(exp(s), dim)).
Vals logSoftmax(Emitter &e, Node &n) {
  Node *x = n.tensorArg(0);
  if (numelOf(x->type().shape) == 0) return {e.call("aten.clone.default", {x})}; // empty: nothing to normalize
  int64_t r = x->type().rank();
  std::vector<int64_t> dim = {r == 0 ? 0 : wrapDimAt(n, n.intArg(1), r)};
  if (r == 0) dim.clear();
  Node *m = e.call("aten.amax.default", {x, dim, true});
  Node *s = e.sub(x, m);
  Node *lse = e.call("aten.log.default", {e.sum(e.exp(s), dim, true)});
  return {e.sub(s, lse)};
}

/// _softmax_backward_data(grad, out, dim, input_dtype):
///   g*y - y * sum(g*y, dim).
Vals softmaxBackward(Emitter &e, Node &n) {
  Node *g = n.tensorArg(0), *y = n.tensorArg(1);
  int64_t r = y->type().rank();
  std::vector<int64_t> dim;
  if (r > 0) dim = {wrapDimAt(n, n.intArg(2), r)};
  Node *gy = e.mul(g, y);
  Node *res = e.sub(gy, e.mul(y, e.sum(gy, dim, true)));
  return {e.toDtype(res, n.types[0].dtype)};
}

/// _log_softmax_backward_data(grad, out, dim, input_dtype):
///   g - exp(y) * sum(g, dim).
Vals logSoftmaxBackward(Emitter &e, Node &n) {
  Node *g = n.tensorArg(0), *y = n.tensorArg(1);
  int64_t r = y->type().rank();
  std::vector<int64_t> dim;
  if (r > 0) dim = {wrapDimAt(n, n.intArg(2), r)};
  Node *res = e.sub(g, e.mul(e.exp(y), e.sum(g, dim, true)));
  return {e.toDtype(res, n.types[0].dtype)};
}

namespace {
/// Axis split of a layer norm: the trailing `normalized.size()` dims are normalized.
struct LnDims {
  std::vector<int64_t> inner, outer;
  int64_t count = 1; ///< Elements per normalized group (N).
};
LnDims lnDims(const Node &n, const Shape &in, const std::vector<int64_t> &normalized) {
  int64_t rank = (int64_t)in.size(), k = (int64_t)normalized.size();
  // N is a constant of the rule: a run-time size among the normalized dims is refused.
  const TensorType &xt = n.tensorArg(n.target == "aten.native_layer_norm_backward.default" ? 1 : 0)->type();
  for (int64_t i = std::max<int64_t>(rank - k, 0); i < rank; ++i)
    if ((size_t)i < xt.sym.size() && !xt.sym[i].empty())
      nodeError(n, "layer norm over the run-time size " + xt.sym[i] +
                       " is not supported yet: compile at one size with --specialize SYMBOL=N (docs/dynamic-shapes.md)");
  if (k > rank || !std::equal(normalized.begin(), normalized.end(), in.end() - k))
    nodeError(n, "layer norm: normalized_shape " + shapeStr(normalized) +
                     " does not match the trailing dims of the input " + shapeStr(in));
  LnDims d;
  for (int64_t i = 0; i < rank; ++i) {
    if (i < rank - k) {
      d.outer.push_back(i);
    } else {
      d.inner.push_back(i);
      d.count *= in[i];
    }
  }
  return d;
}
} // namespace

/// native_layer_norm(x, normalized_shape, w, b, eps) -> (out, mean, rstd):
///   mean = sum(x)/N, var = sum((x-mean)^2)/N (biased), rstd = rsqrt(var + eps),
///   out = (x - mean) * rstd [* w] [+ b]; mean and rstd keep the normalized dims as 1.
Vals nativeLayerNorm(Emitter &e, Node &n) {
  Node *x = n.tensorArg(0);
  Node *w = n.isNoneArg(2) ? nullptr : n.tensorArg(2);
  Node *b = n.isNoneArg(3) ? nullptr : n.tensorArg(3);
  double eps = n.scalarArg(4);
  LnDims d = lnDims(n, x->type().shape, n.intListArg(1));
  double N = (double)d.count;
  Node *mean = e.div(e.sum(x, d.inner, true), N);
  Node *xc = e.sub(x, mean);
  Node *var = e.div(e.sum(e.mul(xc, xc), d.inner, true), N);
  Node *rstd = e.call("aten.rsqrt.default", {e.add(var, eps)});
  Node *out = e.mul(xc, rstd);
  if (w) out = e.mul(out, w);
  if (b) out = e.add(out, b);
  return {out, mean, rstd};
}

/// native_layer_norm_backward(g, x, normalized_shape, mean, rstd, w, b, output_mask):
///   x_hat = (x - mean) * rstd; gx = g [* w];
///   d_input  = rstd / N * (N*gx - sum(gx, inner) - x_hat * sum(gx * x_hat, inner));
///   d_weight = sum(g * x_hat, outer); d_bias = sum(g, outer).
Vals nativeLayerNormBackward(Emitter &e, Node &n) {
  Node *g = n.tensorArg(0), *x = n.tensorArg(1), *mean = n.tensorArg(3), *rstd = n.tensorArg(4);
  Node *w = n.isNoneArg(5) ? nullptr : n.tensorArg(5);
  Node *b = n.isNoneArg(6) ? nullptr : n.tensorArg(6);
  const auto &mask = std::get<std::vector<bool>>(n.args[7]);
  LnDims d = lnDims(n, x->type().shape, n.intListArg(2));
  double N = (double)d.count;
  Node *xhat = e.mul(e.sub(x, mean), rstd);
  Vals r(3, nullptr);
  if (mask.at(0)) {
    Node *gx = w ? e.mul(g, w) : g;
    Node *a = e.mul(gx, N);
    Node *bsum = e.sum(gx, d.inner, true);
    Node *c2 = e.sum(e.mul(gx, xhat), d.inner, true);
    Node *inner = e.sub(e.sub(a, bsum), e.mul(xhat, c2));
    r[0] = e.mul(e.div(rstd, N), inner);
  }
  if (mask.at(1) && w) {
    Node *gw = e.mul(g, xhat);
    r[1] = d.outer.empty() ? gw : e.sum(gw, d.outer, false);
  }
  if (mask.at(2) && b) r[2] = d.outer.empty() ? e.call("aten.clone.default", {g}) : e.sum(g, d.outer, false);
  return r;
}


//===-- batch norm -----------------------------------------------------------===//

namespace {

/// Every dim but the channel dim 1 (the reduced dims of batch norm's statistics).
std::vector<int64_t> bnDims(int64_t rank) {
  std::vector<int64_t> d = {0};
  for (int64_t i = 2; i < rank; ++i) d.push_back(i);
  return d;
}

/// M, the number of elements per channel: the product of the dims but 1 (over run-time sizes
/// an expression, docs/dynamic-shapes.md).
Size bnCount(const TensorType &t) {
  Size m = 1;
  for (int64_t d : bnDims(t.rank())) m = m * sizeOf(t, (size_t)d);
  return m;
}

/// t [C] as [1, C, 1, ...] to broadcast against a rank-`rank` input.
Node *perChannel(Emitter &e, Node *t, int64_t rank) {
  Shape s(rank, 1);
  s[1] = t->type().shape[0];
  return e.view(t, s);
}

/// out = (x - mean) * rstd [* w] [+ b] with per-channel [1, C, 1, ...] statistics.
Node *bnNormalize(Emitter &e, Node &n, Node *x, Node *mean, Node *rstd) {
  int64_t r = x->type().rank();
  Node *out = e.mul(e.sub(x, mean), rstd);
  if (!n.isNoneArg(1)) out = e.mul(out, perChannel(e, n.tensorArg(1), r));
  if (!n.isNoneArg(2)) out = e.add(out, perChannel(e, n.tensorArg(2), r));
  return out;
}

/// The eval-mode results: normalized by the running statistics, empty save_mean/save_rstd.
Vals bnEval(Emitter &e, Node &n, double eps) {
  Node *x = n.tensorArg(0), *rm = n.tensorArg(3), *rv = n.tensorArg(4);
  int64_t r = x->type().rank();
  DType dt = x->type().dtype;
  Node *rstd = e.call("aten.rsqrt.default", {e.add(perChannel(e, rv, r), eps)});
  Node *out = bnNormalize(e, n, x, perChannel(e, rm, r), rstd);
  auto empty = [&] { return e.call("aten.full.default", {Shape{0}, 0.0}, {{"dtype", DTypeLit{dt}}}); };
  return {out, empty(), empty()};
}

} // namespace

/// _native_batch_norm_legit_functional(x, w, b, running_mean, running_var, training, momentum,
/// eps): training: mean = sum(x, dims)/M, var = sum((x - mean)^2, dims)/M, rstd = rsqrt(var + eps);
/// new running stats (1 - momentum) r + momentum (mean | ss/(M-1)), ss = sum((x - mean)^2): the
/// unbiased variance as PyTorch's CPU kernel computes it (var_sum / (n - 1)), with M and M - 1
/// int size arguments, never a float of the sizes. Otherwise bnEval and the running statistics
/// unchanged (clones).
Vals batchNormFunctional(Emitter &e, Node &n) {
  Node *x = n.tensorArg(0), *rm = n.tensorArg(3), *rv = n.tensorArg(4);
  double momentum = n.scalarArg(6), eps = n.scalarArg(7);
  if (!n.boolArg(5)) {
    Vals v = bnEval(e, n, eps);
    v.push_back(e.call("aten.clone.default", {rm}));
    v.push_back(e.call("aten.clone.default", {rv}));
    return v;
  }
  int64_t r = x->type().rank(), C = x->type().shape[1];
  Size M = bnCount(x->type());
  std::vector<int64_t> dims = bnDims(r);
  Node *mean = e.divBy(e.sum(x, dims, true), M);
  Node *xc = e.sub(x, mean);
  Node *ss = e.sum(e.mul(xc, xc), dims, true);
  Node *var = e.divBy(ss, M);
  Node *rstd = e.call("aten.rsqrt.default", {e.add(var, eps)});
  Node *out = bnNormalize(e, n, x, mean, rstd);
  Node *meanC = e.view(mean, {C});
  Node *newMean = e.add(e.mul(rm, 1.0 - momentum), e.mul(meanC, momentum));
  Node *unbiased = e.divBy(e.view(ss, {C}), M - 1);
  Node *newVar = e.add(e.mul(rv, 1.0 - momentum), e.mul(unbiased, momentum));
  return {out, meanC, e.view(rstd, {C}), newMean, newVar};
}

/// _native_batch_norm_legit_no_training(x, w, b, running_mean, running_var, momentum, eps).
Vals batchNormNoTraining(Emitter &e, Node &n) { return bnEval(e, n, n.scalarArg(6)); }

} // namespace aotc::rules

//===-- group norm, native_batch_norm_backward ---------------------------------===//

namespace aotc::rules {

namespace {

/// x [N, C, *] as [N, group, C/group * HxW] (the statistics' groups: D = C/group * HxW per
/// sample, a constant even over a run-time batch).
Node *groups(Emitter &e, Node *x, const Size &N, int64_t G, int64_t D) { return e.viewTo(x, {N, G, D}); }

} // namespace

/// native_group_norm(x, w, b, N, C, HxW, group, eps): statistics over dim 2 of x viewed
/// [N, group, D]; out = xhat [w] [+ b] with w, b per channel ([1, C, 1] against [N, C, HxW]).
Vals nativeGroupNorm(Emitter &e, Node &n) {
  Node *x = n.tensorArg(0);
  const Size N = sizeArg(n, 3);
  int64_t C = n.intArg(4), S = n.intArg(5), G = n.intArg(6);
  double eps = n.scalarArg(7), D = (double)(C / G * S);
  Node *xg = groups(e, x, N, G, C / G * S);
  Node *mean = e.div(e.sum(xg, {2}, true), D);
  Node *xc = e.sub(xg, mean);
  Node *rstd = e.call("aten.rsqrt.default", {e.add(e.div(e.sum(e.mul(xc, xc), {2}, true), D), eps)});
  Node *out = e.viewTo(e.mul(xc, rstd), {N, C, S});
  if (!n.isNoneArg(1)) out = e.mul(out, e.view(n.tensorArg(1), {1, C, 1}));
  if (!n.isNoneArg(2)) out = e.add(out, e.view(n.tensorArg(2), {1, C, 1}));
  return {e.viewTo(out, sizesOf(x->type())), e.viewTo(mean, {N, G}), e.viewTo(rstd, {N, G})};
}

/// native_group_norm_backward(g, x, mean, rstd, w, N, C, HxW, group, output_mask).
Vals nativeGroupNormBackward(Emitter &e, Node &n) {
  Node *g = n.tensorArg(0), *x = n.tensorArg(1), *mean = n.tensorArg(2), *rstd = n.tensorArg(3);
  Node *w = n.isNoneArg(4) ? nullptr : n.tensorArg(4);
  const Size N = sizeArg(n, 5);
  int64_t C = n.intArg(6), S = n.intArg(7), G = n.intArg(8);
  const auto &mask = std::get<std::vector<bool>>(n.args[9]);
  double D = (double)(C / G * S);
  Node *rs = e.viewTo(rstd, {N, G, 1});
  Node *xhat = e.viewTo(e.mul(e.sub(groups(e, x, N, G, C / G * S), e.viewTo(mean, {N, G, 1})), rs), {N, C, S});
  Node *gc = e.viewTo(g, {N, C, S});
  Vals r(3, nullptr);
  if (mask.at(0)) {
    Node *d = groups(e, w ? e.mul(gc, e.view(w, {1, C, 1})) : gc, N, G, C / G * S);
    Node *xh = groups(e, xhat, N, G, C / G * S);
    Node *inner = e.sub(e.sub(d, e.div(e.sum(d, {2}, true), D)), e.mul(xh, e.div(e.sum(e.mul(d, xh), {2}, true), D)));
    r[0] = e.viewTo(e.mul(rs, inner), sizesOf(x->type()));
  }
  if (mask.at(1)) r[1] = e.sum(e.mul(gc, xhat), {0, 2}, false);
  if (mask.at(2)) r[2] = e.sum(gc, {0, 2}, false);
  return r;
}

/// native_batch_norm_backward(g, x, w, running_mean, running_var, save_mean, save_invstd, train,
/// eps, output_mask).
Vals nativeBatchNormBackward(Emitter &e, Node &n) {
  Node *g = n.tensorArg(0), *x = n.tensorArg(1);
  int64_t r = x->type().rank();
  bool train = n.boolArg(7);
  std::vector<int64_t> dims = bnDims(r);
  const auto &mask = std::get<std::vector<bool>>(n.args[9]);
  Node *mean = perChannel(e, n.tensorArg(train ? 5 : 3), r);
  Node *invstd = train ? perChannel(e, n.tensorArg(6), r)
                       : e.call("aten.rsqrt.default", {e.add(perChannel(e, n.tensorArg(4), r), n.scalarArg(8))});
  Node *xhat = e.mul(e.sub(x, mean), invstd);
  Vals out(3, nullptr);
  if (mask.at(0)) {
    Node *d = n.isNoneArg(2) ? g : e.mul(g, perChannel(e, n.tensorArg(2), r));
    if (train) {
      Size M = bnCount(x->type());
      Node *inner = e.sub(e.sub(d, e.divBy(e.sum(d, dims, true), M)), e.mul(xhat, e.divBy(e.sum(e.mul(d, xhat), dims, true), M)));
      out[0] = e.mul(invstd, inner);
    } else {
      out[0] = e.mul(d, invstd);
    }
  }
  if (mask.at(1)) out[1] = e.sum(e.mul(g, xhat), dims, false);
  if (mask.at(2)) out[2] = e.sum(g, dims, false);
  return out;
}

} // namespace aotc::rules
