//===- DecomposeAttention.cpp - scaled_dot_product_attention to bmm/softmax ----===//
//
// The decompose rule of scaled_dot_product_attention (semantics and checks: lib/IR/ops/
// Attention.cpp; torch's _scaled_dot_product_attention_math with _safe_softmax):
//   q, k, v viewed as [N, L, E], [N, S, E], [N, S, Ev] (N = the leading dims; with enable_gqa
//   k and v are first expanded over the query heads: [.., Hk, 1, S, E] -> [.., Hk, G, S, E]);
//   attn = bmm(q * sqrt(scale), k^T * sqrt(scale));
//   causal: where(tril(ones(L, S)), attn, -inf); bool mask: where(mask, attn, -inf);
//   float mask: attn + mask;
//   p = where(all(attn == -inf, -1), 0, _softmax(attn, -1));  out = bmm(p, v).
// Everything before autodiff, so the backward is that of bmm, _softmax and where.
//===----------------------------------------------------------------------===//
#include "Rules.h"

#include <cmath>

namespace aotc::rules {

using namespace rewrite;

namespace {

/// k or v [..., Hk, S, X] repeated over G = Hq / Hk query heads: [..., Hk * G, S, X].
Node *repeatHeads(Emitter &e, Node *x, int64_t groups) {
  if (groups == 1) return x;
  Shape s = x->type().shape;
  int64_t r = (int64_t)s.size();
  Node *u = e.call("aten.unsqueeze.default", {x, r - 2});
  Shape ex = u->type().shape;
  ex[r - 2] = groups;
  Node *rep = e.call("aten.expand.default", {u, ex});
  s[r - 3] *= groups;
  return e.view(rep, s);
}

} // namespace

Vals scaledDotProductAttention(Emitter &e, Node &n) {
  Node *q = n.tensorArg(0), *k = n.tensorArg(1), *v = n.tensorArg(2);
  Node *mask = n.isNoneArg(3) ? nullptr : n.tensorArg(3);
  const Shape &qs = q->type().shape;
  int64_t r = (int64_t)qs.size();
  if (n.boolArg(7) && r >= 3) {
    int64_t groups = qs[r - 3] / k->type().shape[r - 3];
    k = repeatHeads(e, k, groups);
    v = repeatHeads(e, v, groups);
  }
  int64_t L = qs[r - 2], E = qs[r - 1], S = k->type().shape[r - 2], Ev = v->type().shape[r - 1];
  int64_t N = 1;
  for (int64_t d = 0; d < r - 2; ++d) N *= qs[d];
  double scale = n.isNoneArg(6) ? 1.0 / std::sqrt((double)E) : n.scalarArg(6);
  double root = std::sqrt(scale);
  DType dt = q->type().dtype;
  Node *q3 = e.view(e.mul(q, root), {N, L, E});
  Node *kt = e.permute(e.view(e.mul(k, root), {N, S, E}), {0, 2, 1});
  Shape scores(qs.begin(), qs.end() - 1);
  scores.push_back(S);
  Node *attn = e.view(e.call("aten.bmm.default", {q3, kt}), scores);
  Node *ninf = e.scalarTensor(-INFINITY, dt);
  if (n.boolArg(5)) {
    Node *ones = e.call("aten.full.default", {Shape{L, S}, true}, {{"dtype", DTypeLit{DType::Bool}}});
    attn = e.call("aten.where.self", {e.call("aten.tril.default", {ones}), attn, ninf});
  }
  if (mask) {
    if (mask->type().dtype == DType::Bool) attn = e.call("aten.where.self", {mask, attn, ninf});
    else attn = e.add(attn, mask);
  }
  Node *p = e.call("aten._softmax.default", {attn, int64_t(-1), false});
  Node *allMasked = e.call("aten.all.dim", {e.call("aten.eq.Scalar", {attn, -INFINITY}), int64_t(-1), true});
  p = e.call("aten.where.self", {allMasked, e.scalarTensor(0.0, dt), p});
  if (n.scalarArg(4) > 0.0) // torch's math path: torch.dropout(attn, dropout_p, train=True)
    p = e.call("aten.dropout.default", {p, n.args[4], true});
  Node *o = e.call("aten.bmm.default", {e.view(p, {N, L, S}), e.view(v, {N, S, Ev})});
  return {e.view(o, n.types[0].shape)};
}

} // namespace aotc::rules
