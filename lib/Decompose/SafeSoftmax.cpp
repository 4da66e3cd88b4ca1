//===- SafeSoftmax.cpp - torch's decomposed _safe_softmax back into one op ----===//
//
// torch.export's run_decompositions() expands scaled_dot_product_attention's _safe_softmax
// (torch/_decomp/decompositions.py safe_softmax) into
//   s = _softmax(x, d, False);  m = all(eq(x, -inf), d, keepdim=True);
//   out = where(m, zeros_like(s), s)
// with `all` spelled logical_not(any(logical_not(.), d, True)). Differentiated as it stands,
// the backward reads both s (for _softmax's rule) and out (for the next bmm's), two
// [.., L, S] tensors the partition saves; and an all -inf row makes s NaN, which the
// softmax backward multiplies into the gradient. This pre-pass of decompose rewrites the
// pattern into aotc::safe_softmax(x, d), whose rule reads only its result (0 on such rows):
// the same forward values, one saved tensor, and eager's gradient (torch's own
// _safe_softmax derivative). s stays when something else reads it.
//===----------------------------------------------------------------------===//
#include "Rules.h"

#include <algorithm>
#include <cmath>
#include <set>

namespace aotc::rules {

namespace {

bool isCall(const Node *n, const char *target) { return n && n->isCall() && n->target == target; }

/// `z` is a zero of any shape: full_like(_, 0), zeros_like(_), or a 0-d scalar_tensor/full 0.
bool isZero(const Node *z) {
  if (isCall(z, "aten.zeros_like.default")) return true;
  if (isCall(z, "aten.full_like.default") || isCall(z, "aten.full.default"))
    return z->scalarArg(1) == 0.0;
  if (isCall(z, "aten.scalar_tensor.default")) return z->scalarArg(0) == 0.0;
  return false;
}

/// `c` is all(x == -inf, dim, keepdim=True), directly or as not(any(not(x == -inf))).
bool isAllMinusInf(const Node *c, const Node *x, int64_t dim) {
  auto isEqMinusInf = [&](const Node *e) {
    return isCall(e, "aten.eq.Scalar") && e->tensorArg(0) == x && e->scalarArg(1) == -INFINITY;
  };
  // Checked after the operand is known to be x == -inf, so the dims wrap against x's rank.
  auto reducesDim = [&](const Node *r) {
    int64_t rank = x->type().rank();
    auto a = wrapDim(r->intArg(1), rank), b = wrapDim(dim, rank);
    return rank > 0 && r->boolArg(2) && a && b && *a == *b;
  };
  if (isCall(c, "aten.all.dim")) return isEqMinusInf(c->tensorArg(0)) && reducesDim(c);
  if (!isCall(c, "aten.logical_not.default")) return false;
  const Node *any = c->tensorArg(0);
  if (!isCall(any, "aten.any.dim")) return false;
  const Node *inner = any->tensorArg(0);
  return isCall(inner, "aten.logical_not.default") && isEqMinusInf(inner->tensorArg(0)) && reducesDim(any);
}

} // namespace

int recomposeSafeSoftmax(Graph &g) {
  std::vector<Node *> where;
  for (auto &n : g.nodes())
    if (isCall(n.get(), "aten.where.self")) where.push_back(n.get());
  int rewritten = 0;
  for (Node *w : where) {
    Node *s = w->tensorArg(2);
    if (!isCall(s, "aten._softmax.default") || s->boolArg(2) || !isZero(w->tensorArg(1))) continue;
    Node *x = s->tensorArg(0);
    int64_t dim = s->intArg(1);
    if (!isAllMinusInf(w->tensorArg(0), x, dim) || w->types[0] != s->types[0]) continue;
    rewrite::Emitter e(g, w);
    Node *out = e.call("aotc.safe_softmax.default", {x, dim});
    out->inheritSource(*w);
    std::vector<Node *> pattern = w->inputs(); // the mask chain, the zero and _softmax
    g.replaceAllUses(w, out); // named after its op (safe_softmax), as every rewrite's result
    g.erase(w);
    // Only the pattern's own nodes that nothing else reads go (the rest of the graph is
    // left as it is: dead random ops still get their streams). The users map is built once
    // per match and kept current as nodes go.
    auto users = g.users();
    const std::vector<Node *> outs = g.outputs();
    std::set<const Node *> erased; // compared, never dereferenced
    while (!pattern.empty()) {
      Node *n = pattern.back();
      pattern.pop_back();
      if (erased.count(n) || !n->isCall() || n == x || !users[n].empty() ||
          std::count(outs.begin(), outs.end(), n))
        continue;
      for (Node *in : n->inputs()) {
        std::erase(users[in], n); // users are unique per node; an input read twice is listed once
        pattern.push_back(in);
      }
      erased.insert(n);
      g.erase(n);
    }
    ++rewritten;
  }
  return rewritten;
}

} // namespace aotc::rules
