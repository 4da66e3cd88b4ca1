//===- DecomposeNonCore.cpp - The non-core composites of lib/IR/ops/NonCore.cpp -----===//
//
// Decompose rules (the table is in Decompose.cpp). Each gradient is the one of the ops emitted,
// which is torch's derivatives.yaml formula:
//  * copysign(x, y) = where(y < 0 or 1/y < 0, -|x|, |x|) (the second test catches -0.0): x's
//    gradient is sign(x) * sign-of-result, 0 at x = 0 (copysign_tensor_self_backward), y gets none;
//  * fmax / fmin = where(isnan(b), a, where(isnan(a), b, maximum / minimum(a, b))): the number
//    wins over a NaN and ties split the gradient in halves, as torch's rule;
//  * hypot = m sqrt((a/m)^2 + (b/m)^2) with m = max(|a|, |b|) (no overflow or underflow of the
//    squares), ldexp = self * pow(2, other) (exact for integral other);
//  * *_copy = clone(view op); as_strided_scatter = index_put of src at the view's flat
//    positions, offset + sum_k i_k stride_k, into self viewed flat;
//  * addmv / addbmm = alpha * (mm / sum of bmm) + beta * self (self dropped when beta == 0);
//    _trilinear = sum over sumdim of the product of the inputs viewed with 1s at their
//    expand dims;
//  * dist = the p-norm of a - b: sqrt(sum d^2), sum |d|, amax / amin |d|, count of d != 0, or
//    (sum |d|^p)^(1/p), the root taken of where(sum == 0, 1, sum) and masked, so the gradient at
//    a == b is 0, as eager's norm_backward;
//  * put = index_put into self viewed flat (which wraps negative indices and checks the range);
//  * empty_permuted = full(size, 0);
//  * adaptive_max_pool2d / 3d (lib/IR/ops/AdaptiveMaxPool.cpp): the window taps gathered, the
//    last NaN or first maximum chosen, values = gather by the index (the gradient goes there).
//===----------------------------------------------------------------------===//
#include "Rules.h"

#include "aotc/OpRegistry.h"

#include <cmath>
#include <limits>

namespace aotc::rules {
namespace {

using rewrite::Emitter;
using rewrite::wrapDimAt;

/// alpha * m + beta * self, with 1s and beta == 0 (self ignored, as torch) skipped.
Node *blend(Emitter &e, Node *m, Node *self, double alpha, double beta) {
  if (alpha != 1) m = e.mul(m, alpha);
  if (beta == 0) return m;
  Node *s = beta == 1 ? self : e.mul(self, beta);
  return e.add(s, m);
}

} // namespace

Vals copysign(Emitter &e, Node &n) {
  DType od = n.types[0].dtype;
  Node *x = e.toDtype(n.tensorArg(0), od);
  Node *mag = e.call("aten.abs.default", {x});
  Node *negMag = e.neg(mag);
  if (!std::holds_alternative<Node *>(n.args[1])) { // copysign.Scalar: the sign is known now
    double y = n.scalarArg(1);
    return {std::signbit(y) ? negMag : mag};
  }
  Node *y = e.toDtype(n.tensorArg(1), od);
  Node *neg = e.call("aten.logical_or.default", {e.call("aten.lt.Scalar", {y, 0.0}),
                                                 e.call("aten.lt.Scalar", {e.call("aten.reciprocal.default", {y}), 0.0})});
  return {e.call("aten.where.self", {neg, negMag, mag})};
}

Vals fmaxFmin(Emitter &e, Node &n) {
  DType od = n.types[0].dtype;
  Node *a = e.toDtype(n.tensorArg(0), od), *b = e.toDtype(n.tensorArg(1), od);
  Node *m = e.call(n.target == "aten.fmax.default" ? "aten.maximum.default" : "aten.minimum.default", {a, b});
  if (!isFloating(od)) return {m};
  Node *r = e.call("aten.where.self", {e.call("aten.isnan.default", {a}), b, m});
  return {e.call("aten.where.self", {e.call("aten.isnan.default", {b}), a, r})};
}

Vals hypot(Emitter &e, Node &n) {
  DType od = n.types[0].dtype;
  Node *a = e.toDtype(n.tensorArg(0), od), *b = e.toDtype(n.tensorArg(1), od);
  // m sqrt((a/m)^2 + (b/m)^2), m = max(|a|, |b|) (1 where both are 0): no overflow or underflow
  // of the squares; the gradient is a / hypot (the terms through m cancel).
  Node *m = e.call("aten.maximum.default", {e.call("aten.abs.default", {a}), e.call("aten.abs.default", {b})});
  m = e.call("aten.where.self", {e.call("aten.eq.Scalar", {m, 0.0}), e.scalarTensor(1.0, od), m});
  Node *x = e.div(a, m), *y = e.div(b, m);
  return {e.mul(m, e.call("aten.sqrt.default", {e.add(e.mul(x, x), e.mul(y, y))}))};
}

Vals ldexp(Emitter &e, Node &n) {
  DType od = n.types[0].dtype;
  Node *x = e.toDtype(n.tensorArg(0), od), *p = e.toDtype(n.tensorArg(1), od);
  return {e.mul(x, e.call("aten.pow.Scalar", {2.0, p}))};
}

namespace {

/// `target` called with n's arguments: its results (getitems of a multi-result op).
Vals sameCall(Emitter &e, Node &n, const std::string &target) {
  Node *c = e.call(target, std::vector<Arg>(n.args.begin(), n.args.end()));
  if (n.types.size() == 1) return {c};
  Vals out;
  for (size_t k = 0; k < n.types.size(); ++k) out.push_back(e.call("getitem", {c, (int64_t)k}));
  return out;
}

} // namespace

Vals copyForm(Emitter &e, Node &n) {
  static const std::map<std::string, std::string> view = {
      {"aten.view_copy.default", "aten.view.default"},
      {"aten.permute_copy.default", "aten.permute.default"},
      {"aten.unbind_copy.int", "aten.unbind.int"},
      {"aten.as_strided_copy.default", "aten.as_strided.default"}};
  Vals out;
  if (n.target == "aten.narrow_copy.default") {
    int64_t dim = wrapDimAt(n, n.intArg(1), n.tensorArg(0)->type().rank()), start = n.intArg(2);
    if (start < 0) start += n.tensorArg(0)->type().shape[dim];
    out = {e.call("aten.slice.Tensor", {n.args[0], dim, start, start + n.intArg(3), int64_t(1)})};
  } else {
    out = sameCall(e, n, view.at(n.target));
  }
  for (Node *&v : out) v = e.call("aten.clone.default", {v});
  return out;
}

Vals embeddingBagForwardOnly(Emitter &e, Node &n) { return sameCall(e, n, "aten._embedding_bag.default"); }

Vals asStridedScatter(Emitter &e, Node &n) {
  Node *self = n.tensorArg(0);
  const TensorType &t = self->type();
  const std::vector<int64_t> &size = n.intListArg(2), &stride = n.intListArg(3);
  int64_t off = n.isNoneArg(4) ? 0 : n.intArg(4), m = 1;
  for (int64_t s : size) m *= s;
  if (m == 0) return {e.call("aten.clone.default", {self})};
  // Flat positions off + sum_k i_k stride_k, as an i64 tensor of the view's shape.
  Node *pos = e.call("aten.full.default", {Shape(size.size(), 1), off}, {{"dtype", DTypeLit{DType::I64}}});
  for (size_t k = 0; k < size.size(); ++k) {
    Shape vs(size.size(), 1);
    vs[k] = size[k];
    pos = e.add(pos, e.view(e.call("aten.mul.Scalar", {e.iota(size[k]), stride[k]}), vs));
  }
  pos = e.view(e.call("aten.expand.default", {pos, size}), {m});
  Node *flat = e.view(self, {t.numel()});
  Node *src = e.view(e.toDtype(n.tensorArg(1), t.dtype), {m});
  Node *put = e.call("aten.index_put.default", {flat, std::vector<Node *>{pos}, src, false});
  return {e.view(put, t.shape)};
}

Vals addmv(Emitter &e, Node &n) {
  Node *mat = n.tensorArg(1), *vec = n.tensorArg(2);
  int64_t rows = mat->type().shape[0], k = vec->type().shape[0];
  Node *mv = e.view(e.call("aten.mm.default", {mat, e.view(vec, {k, 1})}), {rows});
  return {blend(e, mv, n.tensorArg(0), n.scalarArg(4), n.scalarArg(3))};
}

Vals addbmm(Emitter &e, Node &n) {
  Node *b = e.sum(e.call("aten.bmm.default", {n.args[1], n.args[2]}), {0}, false);
  return {blend(e, b, n.tensorArg(0), n.scalarArg(4), n.scalarArg(3))};
}

Vals trilinear(Emitter &e, Node &n) {
  int64_t total = n.tensorArg(0)->type().rank() + (int64_t)n.intListArg(3).size();
  Node *prod = nullptr;
  for (int k = 0; k < 3; ++k) {
    Node *x = n.tensorArg(k);
    std::vector<bool> isEx(total, false);
    for (int64_t d : n.intListArg(3 + k)) isEx[wrapDimAt(n, d, total)] = true;
    Shape us;
    size_t src = 0;
    for (int64_t q = 0; q < total; ++q) us.push_back(isEx[q] ? 1 : x->type().shape[src++]);
    x = e.view(x, us);
    prod = prod ? e.mul(prod, x) : x;
  }
  std::vector<int64_t> dims; // the product already has the broadcast sizes the result keeps
  for (int64_t d : n.intListArg(6)) dims.push_back(wrapDimAt(n, d, total));
  return {dims.empty() ? prod : e.sum(prod, dims, false)};
}

Vals dist(Emitter &e, Node &n) {
  DType od = n.types[0].dtype;
  Node *d = e.sub(e.toDtype(n.tensorArg(0), od), e.toDtype(n.tensorArg(1), od));
  double p = n.scalarArg(2);
  Node *a = e.call("aten.abs.default", {d});
  std::vector<int64_t> all;
  if (p == 1) return {e.sum(a, all, false)};
  if (p == 0) return {e.sum(e.toDtype(e.call("aten.ne.Scalar", {d, 0.0}), od), all, false)};
  if (std::isinf(p)) return {e.call(p > 0 ? "aten.amax.default" : "aten.amin.default", {a, all, false})};
  Node *s = p == 2 ? e.sum(e.mul(d, d), all, false) : e.sum(e.call("aten.pow.Tensor_Scalar", {a, p}), all, false);
  // The root of a zero sum is 0 with a zero gradient, as eager's norm_backward masks it: the
  // root of where(s == 0, 1, s), times (s != 0), keeps the infinite slope out of the graph.
  Node *zero = e.call("aten.eq.Scalar", {s, 0.0});
  Node *safe = e.call("aten.where.self", {zero, e.scalarTensor(1.0, od), s});
  Node *root = p == 2 ? e.call("aten.sqrt.default", {safe}) : e.call("aten.pow.Tensor_Scalar", {safe, 1.0 / p});
  return {e.mul(root, e.toDtype(e.call("aten.logical_not.default", {zero}), od))};
}

Vals put(Emitter &e, Node &n) {
  Node *self = n.tensorArg(0), *index = n.tensorArg(1), *src = n.tensorArg(2);
  const TensorType &t = self->type();
  int64_t N = t.numel(), M = index->type().numel();
  if (M == 0) return {e.call("aten.clone.default", {self})};
  Node *ix = e.view(e.toDtype(index, DType::I64), {M}); // index_put wraps [-N, 0) and checks the range
  Node *r = e.call("aten.index_put.default", {e.view(self, {N}), std::vector<Node *>{ix}, e.view(src, {M}), n.args[3]});
  return {e.view(r, t.shape)};
}

Vals emptyPermuted(Emitter &e, Node &n) {
  const TensorType &t = n.types[0];
  Arg zero = isFloating(t.dtype) ? Arg(0.0) : Arg(int64_t(0));
  return {e.call("aten.full.default", {std::vector<int64_t>(t.shape), zero}, {{"dtype", DTypeLit{t.dtype}}})};
}

/// adaptive_max_pool2d / 3d: for each tap t of the largest window (row-major), the flat input
/// position F_t[o] = sum_k clamp(start_k[o_k] + t_k) * stride_k and whether it is inside the
/// window (a few broadcast index ops, not one node per tap); the values of all taps gathered from the planes, -inf outside; t* = the last NaN tap
/// if any, else argmax (the first maximum); index = F_{t*}, values = gather(planes, index).
Vals adaptiveMaxPool(Emitter &e, Node &n) {
  const int dims = n.target == "aten.adaptive_max_pool2d.default" ? 2 : 3;
  Node *x = n.tensorArg(0);
  const Shape &xs = x->type().shape, &os = n.types[0].shape;
  DType dt = x->type().dtype;
  const int64_t r = (int64_t)xs.size();
  int64_t planes = 1, inPlane = 1, outPlane = 1;
  for (int64_t i = 0; i < r - dims; ++i) planes *= xs[i];
  std::vector<int64_t> in(xs.end() - dims, xs.end()), out(os.end() - dims, os.end()), stride(dims, 1);
  for (int k = dims - 1; k >= 0; --k) {
    inPlane *= in[k];
    outPlane *= out[k];
    if (k + 1 < dims) stride[k] = stride[k + 1] * in[k + 1];
  }
  if (outPlane == 0 || planes == 0) {
    Node *v = e.call("aten.full.default", {std::vector<int64_t>(os), 0.0}, {{"dtype", DTypeLit{dt}}});
    Node *i = e.call("aten.full.default", {std::vector<int64_t>(os), int64_t(0)}, {{"dtype", DTypeLit{DType::I64}}});
    return {v, i};
  }
  // Over [K_0, .., K_{d-1}, O_0, .., O_{d-1}] (taps, then output positions): per dim k the
  // window start and length (adaptiveWindows, as adaptive average pooling's) along O_k, the tap t
  // along K_k; the flat input position sum_k clamp(start + t) stride_k, inside while t < length.
  std::vector<AdaptiveWindows> w;
  Shape full;
  for (int k = 0; k < dims; ++k) {
    w.push_back(adaptiveWindows(e, in[k], out[k]));
    full.push_back(w.back().kmax);
  }
  const int64_t T = numelOf(full);
  full.insert(full.end(), out.begin(), out.end());
  Node *F = nullptr, *V = nullptr;
  for (int k = 0; k < dims; ++k) {
    Shape os1(2 * dims, 1), ts1(2 * dims, 1);
    os1[dims + k] = out[k];
    ts1[k] = w[k].kmax;
    Node *len = e.view(w[k].len, os1);
    Node *tk = e.view(e.iota(w[k].kmax), ts1);
    Node *pos = e.call("aten.clamp.default", {e.add(e.view(w[k].start, os1), tk), Arg{}, in[k] - 1});
    Node *term = stride[k] == 1 ? pos : e.call("aten.mul.Scalar", {pos, stride[k]});
    Node *ok = e.call("aten.gt.Tensor", {len, tk});
    F = F ? e.add(F, term) : term;
    V = V ? e.call("aten.logical_and.default", {V, ok}) : ok;
  }
  F = e.view(e.call("aten.expand.default", {F, full}), {T, outPlane});                                           // [T, Q]
  V = e.view(e.call("aten.expand.default", {V, full}), {1, T, outPlane});                                        // [1, T, Q]
  Node *xp = e.view(x, {planes, inPlane});
  Node *g = e.view(e.call("aten.index_select.default", {xp, int64_t(1), e.view(F, {T * outPlane})}), {planes, T, outPlane});
  Node *masked = e.call("aten.where.self", {V, g, e.scalarTensor(-INFINITY, dt)});
  Node *ts = e.view(e.iota(T), {1, T, 1});
  Node *lastNan = e.call("aten.amax.default",
                         {e.call("aten.where.self", {e.call("aten.logical_and.default", {e.call("aten.isnan.default", {masked}), V}), ts,
                                                     e.scalarTensor(int64_t(-1), DType::I64)}),
                          std::vector<int64_t>{1}, true});
  Node *tStar = e.call("aten.where.self", {e.call("aten.ge.Scalar", {lastNan, int64_t(0)}), lastNan,
                                           e.call("aten.argmax.default", {masked, int64_t(1), true})}); // [P, 1, Q]
  Node *Fe = e.call("aten.expand.default", {e.view(F, {1, T, outPlane}), std::vector<int64_t>{planes, T, outPlane}});
  Node *idx = e.view(e.call("aten.gather.default", {Fe, int64_t(1), tStar}), {planes, outPlane});
  Node *vals = e.call("aten.gather.default", {xp, int64_t(1), idx});
  return {e.view(vals, os), e.view(idx, os)};
}

} // namespace aotc::rules
