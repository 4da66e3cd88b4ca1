//===- DecomposeRearrange.cpp - flip, repeat, padding; max/min.dim; the small composites ===//
//
// Decompose rules (the table is in Decompose.cpp) for lib/IR/ops/Rearrange.cpp,
// lib/IR/ops/Arith.cpp and the (values, indices) reductions:
//  * flip and the reflection / replication pads: index_select along each dim by an int64
//    index computed from arange (flip: L-1-i; reflection: (L-1) - |(L-1) - |i - pl||;
//    replication: clamp(i - pl, 0, L-1)); index_select's gradient sums the copies;
//  * repeat: view self as [1, s0, 1, s1, ...], expand to [r0, s0, r1, s1, ...], view to
//    [r0 s0, r1 s1, ...] (the gradient of expand sums the repeats, as repeat_backward);
//  * max.dim / min.dim: argmax (of x, or of the order reversed for min) and a gather of the
//    value at that index, so the gradient flows to that one element as eager's;
//  * pow.Scalar: pow.Tensor_Tensor with the base as a tensor of the result dtype;
//  * div with a rounding mode: trunc(a / b); torch's div_floor_floating for 'floor';
//  * fill.Scalar -> full_like; empty.memory_format / empty_strided -> zeros;
//    var.dim -> var.correction;
//  * embedding_dense_backward: scatter_add of the gradient rows (masked at padding_idx, divided
//    by the index counts under scale_grad_by_freq) into zeros [num_weights, D];
//  * _native_batch_norm_legit.no_stats: the functional form with scratch running statistics;
//  * im2col / col2im: the flat padded-image position of every (ki, kj, block) tap,
//    (bh sh + ki dh) Wp + (bw sw + kj dw), built from aranges; im2col gathers it from the
//    zero-padded image, col2im scatter_adds the columns to it and crops the padding (each is the
//    other's gradient, as torch's);
//  * masked_scatter: the inclusive count of true mask elements before each position (a
//    Hillis-Steele scan: log2(N) shifted adds of int64 counts, O(N log N)), minus one, indexes
//    the flattened source (index_select, range-checked at run time: too few source elements is
//    an error there); where(mask, that, self).
//===----------------------------------------------------------------------===//
#include "Rules.h"

#include "aotc/OpRegistry.h"

namespace aotc::rules {
namespace {

using rewrite::Emitter;
using rewrite::wrapDimAt;

Node *arangeI64(Emitter &e, int64_t start, int64_t end) {
  return e.call("aten.arange.start_step", {start, end}, {{"dtype", DTypeLit{DType::I64}}});
}

/// index_select(x, dim, index) where index[o] is the source of output position o along dim.
Node *selectAlong(Emitter &e, Node *x, int64_t dim, Node *index) {
  return e.call("aten.index_select.default", {x, dim, index});
}

/// The argmax / argmin of x along dim as argmax of an order-preserving (max) or reversing (min)
/// map: neg for floating x (NaN stays NaN and wins), ~x for integers, logical_not for bool.
Node *argExtremum(Emitter &e, Node *x, int64_t dim, bool keepdim, bool isMax) {
  Node *key = x;
  DType dt = x->type().dtype;
  if (!isMax)
    key = isFloating(dt)      ? e.neg(x)
          : dt == DType::Bool ? e.call("aten.logical_not.default", {x})
                              : e.call("aten.sub.Scalar", {e.neg(x), int64_t(1)});
  else if (dt == DType::Bool)
    key = e.toDtype(x, DType::I64);
  return e.call("aten.argmax.default", {key, dim, keepdim});
}

} // namespace

Vals flip(Emitter &e, Node &n) {
  Node *x = n.tensorArg(0);
  const Shape &s = x->type().shape;
  Node *y = x;
  for (int64_t d : n.intListArg(1)) {
    if (s.empty()) break;
    int64_t w = wrapDimAt(n, d, (int64_t)s.size());
    // Over run-time sizes the flipped dims must be static (L-1-arange(L) is built from L).
    if ((size_t)w < x->type().sym.size() && !x->type().sym[w].empty())
      nodeError(n, "decompose of flip along a run-time dim (dim " + std::to_string(w) + " is " + x->type().sym[w] +
                       ") is not supported yet: compile at one size with --specialize SYMBOL=N (docs/dynamic-shapes.md)");
    if (s[w] <= 1) continue;
    y = selectAlong(e, y, w, e.call("aten.rsub.Scalar", {arangeI64(e, 0, s[w]), s[w] - 1}));
  }
  if (y == x) y = e.call("aten.clone.default", {x});
  return {y};
}

Vals repeat(Emitter &e, Node &n) {
  Node *x = n.tensorArg(0);
  const Shape &s = x->type().shape;
  const std::vector<int64_t> &rep = n.intListArg(1);
  size_t lead = rep.size() - s.size();
  Shape split, expanded;
  for (size_t d = 0; d < rep.size(); ++d) {
    int64_t sz = d < lead ? 1 : s[d - lead];
    split.insert(split.end(), {1, sz});
    expanded.insert(expanded.end(), {rep[d], sz});
  }
  Node *v = e.view(x, split);
  Node *ex = e.call("aten.expand.default", {v, expanded});
  return {e.view(ex, n.types[0].shape)};
}

Vals pad(Emitter &e, Node &n) {
  const bool reflect = n.target.rfind("aten.reflection_pad", 0) == 0;
  Node *x = n.tensorArg(0);
  const Shape &s = x->type().shape;
  const std::vector<int64_t> &pads = n.intListArg(1);
  int64_t rank = (int64_t)s.size();
  Node *y = x;
  for (size_t k = 0; 2 * k < pads.size(); ++k) {
    int64_t d = rank - 1 - (int64_t)k, lo = pads[2 * k], hi = pads[2 * k + 1], len = s[d];
    if (lo == 0 && hi == 0) continue;
    Node *i = arangeI64(e, -lo, len + hi); // the output positions, shifted by the left pad
    Node *src;
    if (reflect) {
      Node *inner = e.call("aten.rsub.Scalar", {e.call("aten.abs.default", {i}), len - 1});
      src = e.call("aten.rsub.Scalar", {e.call("aten.abs.default", {inner}), len - 1});
    } else {
      src = e.call("aten.clamp.default", {i, int64_t(0), len - 1});
    }
    y = selectAlong(e, y, d, src);
  }
  if (y == x) y = e.call("aten.clone.default", {x});
  return {y};
}

Vals maxMinDim(Emitter &e, Node &n) {
  const bool isMax = n.target == "aten.max.dim";
  Node *x = n.tensorArg(0);
  int64_t rank = x->type().rank();
  bool keep = n.boolArg(2);
  if (rank == 0) return {e.call("aten.clone.default", {x}), e.call("aten.zeros_like.default", {x}, {{"dtype", DTypeLit{DType::I64}}})};
  int64_t dim = wrapDimAt(n, n.intArg(1), rank);
  Node *idx = argExtremum(e, x, dim, true, isMax);
  Node *val = e.call("aten.gather.default", {x, dim, idx});
  if (!keep) {
    std::vector<int64_t> dims = {dim};
    val = e.call("aten.squeeze.dims", {val, dims});
    idx = e.call("aten.squeeze.dims", {idx, dims});
  }
  return {val, idx};
}

Vals powScalar(Emitter &e, Node &n) {
  DType dt = n.types[0].dtype;
  Node *ex = n.tensorArg(1);
  Node *base = e.call("aten.full_like.default", {ex, n.args[0]}, {{"dtype", DTypeLit{dt}}});
  return {e.call("aten.pow.Tensor_Tensor", {base, e.toDtype(ex, dt)})};
}

Vals divMode(Emitter &e, Node &n) {
  DType dt = n.types[0].dtype;
  Node *a = e.toDtype(n.tensorArg(0), dt);
  Arg b = n.args[1];
  if (std::holds_alternative<Node *>(b)) b = e.toDtype(std::get<Node *>(b), dt);
  Node *q = e.div(a, b);
  if (n.isNoneArg(2)) return {q};
  const std::string &mode = std::get<std::string>(n.args[2]);
  if (mode == "trunc") return {e.call("aten.detach.default", {e.call("aten.trunc.default", {q})})};
  // div_floor_floating: mod = fmod(a, b); d = (a - mod) / b, minus 1 where mod != 0 and its
  // sign differs from b's; the nearest integer at or below (floor, plus 1 past .5); a signed
  // zero (0 * (a / b)) where d is 0; a / b where b is 0.
  const char *fmod = std::holds_alternative<Node *>(b) ? "aten.fmod.Tensor" : "aten.fmod.Scalar";
  const char *eq = std::holds_alternative<Node *>(b) ? "aten.eq.Tensor" : "aten.eq.Scalar";
  const char *lt = std::holds_alternative<Node *>(b) ? "aten.lt.Tensor" : "aten.lt.Scalar";
  Node *mod = e.call(fmod, {a, b});
  Node *d = e.div(e.sub(a, mod), b);
  Node *modNeg = e.call("aten.lt.Scalar", {mod, int64_t(0)});
  Node *bNeg = std::holds_alternative<Node *>(b) ? e.call(lt, {std::get<Node *>(b), int64_t(0)})
                                                 : e.scalarTensor(n.scalarArg(1) < 0, DType::Bool);
  Node *fix = e.call("aten.logical_and.default",
                     {e.call("aten.ne.Scalar", {mod, int64_t(0)}), e.call("aten.ne.Tensor", {bNeg, modNeg})});
  d = e.call("aten.where.self", {fix, e.sub(d, int64_t(1)), d});
  Node *fl = e.call("aten.floor.default", {d});
  Node *up = e.call("aten.gt.Scalar", {e.sub(d, fl), 0.5});
  fl = e.call("aten.where.self", {up, e.add(fl, int64_t(1)), fl});
  Node *r = e.call("aten.where.self", {e.call("aten.eq.Scalar", {d, int64_t(0)}), e.mul(q, int64_t(0)), fl});
  Node *bZero = std::holds_alternative<Node *>(b) ? e.call(eq, {std::get<Node *>(b), int64_t(0)})
                                                  : e.scalarTensor(n.scalarArg(1) == 0, DType::Bool);
  // torch's gradient of a rounded division is zero: detach, so no 0 * inf reaches the inputs.
  return {e.call("aten.detach.default", {e.call("aten.where.self", {bZero, q, r})})};
}

Vals fillScalar(Emitter &e, Node &n) { return {e.call("aten.full_like.default", {n.args[0], n.args[1]})}; }

Vals emptyLike(Emitter &e, Node &n) {
  const TensorType &t = n.types[0];
  return {e.call("aten.zeros.default", {t.shape}, {{"dtype", DTypeLit{t.dtype}}})};
}

Vals varDim(Emitter &e, Node &n) {
  return {e.call("aten.var.correction", {n.args[0], n.args[1]},
                 {{"correction", int64_t(n.boolArg(2) ? 1 : 0)}, {"keepdim", n.args[3]}})};
}

Vals embeddingDenseBackward(Emitter &e, Node &n) {
  Node *g = n.tensorArg(0), *ix = n.tensorArg(1);
  const TensorType &gt = g->type();
  int64_t D = gt.shape.back(), N = numelOf(ix->type().shape), W = n.intArg(2), pad = n.intArg(3);
  DType dt = gt.dtype;
  Node *idx = e.view(e.toDtype(ix, DType::I64), {N});
  Node *rows = e.view(g, {N, D});
  if (n.boolArg(4)) {
    Node *ones = e.call("aten.full.default", {std::vector<int64_t>{N}, 1.0}, {{"dtype", DTypeLit{dt}}});
    Node *zeros = e.call("aten.full.default", {std::vector<int64_t>{W}, 0.0}, {{"dtype", DTypeLit{dt}}});
    Node *counts = e.call("aten.scatter_add.default", {zeros, int64_t(0), idx, ones});
    Node *scaled = e.div(rows, e.view(e.call("aten.index_select.default", {counts, int64_t(0), idx}), {N, 1}));
    // Eager's double backward (embedding_dense_double_backward) ignores the scale: the value is
    // scaled, the gradient to grad_output is not (rows + detach(scaled - rows)).
    rows = e.add(rows, e.call("aten.detach.default", {e.sub(scaled, rows)}));
  }
  Node *keep = e.view(e.call("aten.ne.Scalar", {idx, pad}), {N, 1});
  rows = e.call("aten.where.self", {keep, rows, e.scalarTensor(0.0, dt)});
  Node *zeros = e.call("aten.full.default", {std::vector<int64_t>{W, D}, 0.0}, {{"dtype", DTypeLit{dt}}});
  Node *at = e.call("aten.expand.default", {e.view(idx, {N, 1}), std::vector<int64_t>{N, D}});
  return {e.call("aten.scatter_add.default", {zeros, int64_t(0), at, rows})};
}

Vals batchNormNoStats(Emitter &e, Node &n) {
  const TensorType &x = n.tensorArg(0)->type();
  int64_t C = x.shape[1];
  Node *rm = e.call("aten.full.default", {std::vector<int64_t>{C}, 0.0}, {{"dtype", DTypeLit{x.dtype}}});
  Node *rv = e.call("aten.full.default", {std::vector<int64_t>{C}, 1.0}, {{"dtype", DTypeLit{x.dtype}}});
  Node *bn = e.call("aten._native_batch_norm_legit_functional.default",
                    {n.args[0], n.args[1], n.args[2], rm, rv, true, n.args[4], n.args[5]});
  return {e.call("getitem", {bn, int64_t(0)}), e.call("getitem", {bn, int64_t(1)}), e.call("getitem", {bn, int64_t(2)})};
}

Vals maskedScatter(Emitter &e, Node &n) {
  const TensorType &t = n.types[0];
  int64_t N = t.numel();
  Node *self = n.tensorArg(0), *mask = n.tensorArg(1), *src = n.tensorArg(2);
  if (self->type().shape != t.shape) self = e.call("aten.expand.default", {self, t.shape});
  if (mask->type().shape != t.shape) mask = e.call("aten.expand.default", {mask, t.shape});
  int64_t S = src->type().numel();
  if (N == 0 || S == 0) // nothing to take: every mask element must be false (torch errors otherwise)
    return {e.call("aten.clone.default", {self})};
  Node *m = e.view(mask, {N});
  Node *c = e.toDtype(m, DType::I64);
  for (int64_t s = 1; s < N; s *= 2) {
    Node *head = e.call("aten.slice.Tensor", {c, int64_t(0), int64_t(0), N - s, int64_t(1)});
    c = e.add(c, e.call("aten.constant_pad_nd.default", {head, std::vector<int64_t>{s, 0}, int64_t(0)}));
  }
  Node *idx = e.call("aten.where.self", {m, e.sub(c, int64_t(1)), e.scalarTensor(int64_t(0), DType::I64)});
  Node *vals = e.call("aten.index_select.default", {e.view(src, {S}), int64_t(0), idx});
  return {e.call("aten.where.self", {mask, e.view(vals, t.shape), self})};
}

/// The flat position in the padded image [Hp, Wp] of each tap (ki, kj, bh, bw), as an int64 [K]
/// with K = kh kw Lh Lw in that order, expanded to [N, C, K].
static Node *tapPositions(Emitter &e, const Node &n, size_t k, int64_t H, int64_t W, int64_t N, int64_t C,
                          int64_t &Hp, int64_t &Wp, int64_t &ph, int64_t &pw) {
  auto two = [&](size_t i) { return n.intListArg(i); };
  std::vector<int64_t> ks = two(k), di = two(k + 1), pa = two(k + 2), st = two(k + 3);
  ph = pa[0], pw = pa[1], Hp = H + 2 * ph, Wp = W + 2 * pw;
  int64_t Lh = (Hp - di[0] * (ks[0] - 1) - 1) / st[0] + 1, Lw = (Wp - di[1] * (ks[1] - 1) - 1) / st[1] + 1;
  auto axis = [&](int64_t len, int64_t step, int at) {
    Node *a = e.call("aten.arange.start_step", {int64_t(0), len * step, step}, {{"dtype", DTypeLit{DType::I64}}});
    Shape s(4, 1);
    s[at] = len;
    return e.view(a, s);
  };
  Node *h = e.add(axis(ks[0], di[0], 0), axis(Lh, st[0], 2));
  Node *w = e.add(axis(ks[1], di[1], 1), axis(Lw, st[1], 3));
  Node *pos = e.add(e.mul(h, Wp), w); // [kh, kw, Lh, Lw]
  int64_t K = ks[0] * ks[1] * Lh * Lw;
  return e.call("aten.expand.default", {e.view(pos, {1, 1, K}), std::vector<int64_t>{N, C, K}});
}

Vals im2col(Emitter &e, Node &n) {
  Node *x = n.tensorArg(0);
  const Shape s = x->type().shape;
  const bool batched = s.size() == 4;
  if (!batched) x = e.call("aten.unsqueeze.default", {x, int64_t(0)});
  const Shape xs = x->type().shape;
  int64_t N = xs[0], C = xs[1], Hp, Wp, ph, pw;
  Node *pos = tapPositions(e, n, 1, xs[2], xs[3], N, C, Hp, Wp, ph, pw);
  if (ph || pw) x = e.call("aten.constant_pad_nd.default", {x, std::vector<int64_t>{pw, pw, ph, ph}, 0.0});
  Node *cols = e.call("aten.gather.default", {e.view(x, {N, C, Hp * Wp}), int64_t(2), pos});
  Shape out = n.types[0].shape;
  if (!batched) out.insert(out.begin(), 1);
  Node *y = e.view(cols, out);
  return {batched ? y : e.view(y, n.types[0].shape)};
}

Vals col2im(Emitter &e, Node &n) {
  Node *x = n.tensorArg(0);
  const bool batched = x->type().rank() == 3;
  Shape out = n.types[0].shape;
  if (!batched) out.insert(out.begin(), 1);
  int64_t N = out[0], C = out[1], H = out[2], W = out[3], Hp, Wp, ph, pw;
  DType dt = x->type().dtype;
  if (N == 0) return {e.call("aten.full.default", {n.types[0].shape, 0.0}, {{"dtype", DTypeLit{dt}}})};
  Node *pos = tapPositions(e, n, 2, H, W, N, C, Hp, Wp, ph, pw);
  int64_t K = x->type().shape.back() * (x->type().shape[x->type().rank() - 2] / C); // kh kw L
  Node *zeros = e.call("aten.full.default", {std::vector<int64_t>{N, C, Hp * Wp}, 0.0}, {{"dtype", DTypeLit{dt}}});
  Node *img = e.view(e.call("aten.scatter_add.default", {zeros, int64_t(2), pos, e.view(x, {N, C, K})}), {N, C, Hp, Wp});
  if (ph) img = e.call("aten.slice.Tensor", {img, int64_t(2), ph, ph + H, int64_t(1)});
  if (pw) img = e.call("aten.slice.Tensor", {img, int64_t(3), pw, pw + W, int64_t(1)});
  if (!ph && !pw) img = e.call("aten.clone.default", {img});
  return {batched ? img : e.view(img, n.types[0].shape)};
}

} // namespace aotc::rules
