//===- DecomposeAttention.cpp - scaled_dot_product_attention to bmm/softmax ----===//
//
// The decompose rule of scaled_dot_product_attention (semantics and checks: lib/IR/ops/
// Attention.cpp; torch's _scaled_dot_product_attention_math with _safe_softmax):
//   q, k, v viewed as [N, L, E], [N, S, E], [N, S, Ev] (N = the leading dims; with enable_gqa
//   k and v are first expanded over the query heads: [.., Hk, 1, S, E] -> [.., Hk, G, S, E]);
//   attn = bmm(q * sqrt(scale), k^T * sqrt(scale));
//   causal: where(tril(ones(L, S)), attn, -inf); bool mask: where(mask, attn, -inf);
//   float mask: attn + mask;
//   p = aotc::safe_softmax(attn, -1) (0 for a fully masked row);  out = bmm(p, v).
// Everything before autodiff, so the backward is that of bmm, safe_softmax and where.
// _scaled_dot_product_flash_attention_for_cpu is the same math path (its key/value heads
// repeated over the query heads when fewer) plus logsumexp(attn, -1) in the accumulation
// dtype, detached (torch gives it no gradient).
//===----------------------------------------------------------------------===//
#include "Rules.h"

#include <cmath>
#include <optional>

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

/// The math path shared by both ops: `out` [..., Hq, L, Ev] and the masked, scaled scores
/// `attn` [..., Hq, L, S] (-inf where masked) that the flash op's logsumexp reads.
struct Attention {
  Node *out, *attn;
};

Attention attention(Emitter &e, Node *q, Node *k, Node *v, Node *mask, const Arg &dropoutArg, double dropoutP, bool causal,
                    std::optional<double> scaleArg, bool gqa, const Shape &outShape) {
  const Shape &qs = q->type().shape;
  int64_t r = (int64_t)qs.size();
  if (gqa && r >= 3) {
    int64_t groups = qs[r - 3] / k->type().shape[r - 3];
    k = repeatHeads(e, k, groups);
    v = repeatHeads(e, v, groups);
  }
  int64_t L = qs[r - 2], E = qs[r - 1], S = k->type().shape[r - 2], Ev = v->type().shape[r - 1];
  int64_t N = 1;
  for (int64_t d = 0; d < r - 2; ++d) N *= qs[d];
  double scale = scaleArg ? *scaleArg : 1.0 / std::sqrt((double)E);
  double root = std::sqrt(scale);
  DType dt = q->type().dtype;
  Node *q3 = e.view(e.mul(q, root), {N, L, E});
  Node *kt = e.permute(e.view(e.mul(k, root), {N, S, E}), {0, 2, 1});
  Shape scores(qs.begin(), qs.end() - 1);
  scores.push_back(S);
  Node *attn = e.view(e.call("aten.bmm.default", {q3, kt}), scores);
  Node *ninf = e.scalarTensor(-INFINITY, dt);
  if (causal) {
    Node *ones = e.call("aten.full.default", {Shape{L, S}, true}, {{"dtype", DTypeLit{DType::Bool}}});
    attn = e.call("aten.where.self", {e.call("aten.tril.default", {ones}), attn, ninf});
  }
  if (mask) {
    if (mask->type().dtype == DType::Bool) attn = e.call("aten.where.self", {mask, attn, ninf});
    else attn = e.add(attn, mask);
  }
  // A fully masked row gives probabilities 0 (torch's _safe_softmax), and a gradient 0: the
  // rule of aotc::safe_softmax reads only its result, which is also the second bmm's input,
  // so the partition saves one [.., L, S] tensor for both.
  Node *p = e.call("aotc.safe_softmax.default", {attn, int64_t(-1)});
  if (dropoutP > 0.0) // torch's math path: torch.dropout(attn, dropout_p, train=True)
    p = e.call("aten.dropout.default", {p, dropoutArg, true});
  Node *o = e.call("aten.bmm.default", {e.view(p, {N, L, S}), e.view(v, {N, S, Ev})});
  return {e.view(o, outShape), attn};
}

std::optional<double> optScale(const Node &n, int i) {
  return n.isNoneArg(i) ? std::nullopt : std::optional<double>(n.scalarArg(i));
}

} // namespace

Vals scaledDotProductAttention(Emitter &e, Node &n) {
  Node *mask = n.isNoneArg(3) ? nullptr : n.tensorArg(3);
  return {attention(e, n.tensorArg(0), n.tensorArg(1), n.tensorArg(2), mask, n.args[4], n.scalarArg(4), n.boolArg(5),
                    optScale(n, 6), n.boolArg(7), n.types[0].shape)
              .out};
}

/// _scaled_dot_product_flash_attention_for_cpu(q, k, v, dropout_p, is_causal, *, attn_mask,
/// scale) -> (output, logsumexp): the math path's output and logsumexp(attn, -1) of the
/// masked, scaled scores (0 for a fully masked row, as torch's kernel), detached: torch's
/// derivative gives logsumexp no gradient (output_differentiability [True, False]).
Vals flashAttentionForCpu(Emitter &e, Node &n) {
  Node *mask = n.isNoneArg(5) ? nullptr : n.tensorArg(5);
  Attention a = attention(e, n.tensorArg(0), n.tensorArg(1), n.tensorArg(2), mask, n.args[3], n.scalarArg(3), n.boolArg(4),
                          optScale(n, 6), /*gqa=*/true, n.types[0].shape);
  Node *attn = e.toDtype(a.attn, n.types[1].dtype);
  Node *lse = e.call("aten.logsumexp.default", {attn, std::vector<int64_t>{-1}, true});
  Node *allMasked = e.call("aten.all.dim", {e.call("aten.eq.Scalar", {attn, -INFINITY}), int64_t(-1), true});
  lse = e.call("aten.where.self", {allMasked, e.scalarTensor(0.0, n.types[1].dtype), lse});
  return {a.out, e.call("aten.detach.default", {e.view(lse, n.types[1].shape)})};
}

} // namespace aotc::rules
