//===- WidenIndices.cpp - i32/u8 index arguments become i64 -------------------===//
//
// aotc computes on f32, f64, i64 and bool; i32 and u8 tensors are index-only
// (include/aotc/Types.h). A graph input of such a dtype may reach the index
// argument of gather, scatter_add, index_select or embedding directly or
// through views (capture checks that, OpDef::indexArgs). This pass puts one
// `_to_copy(v, dtype=torch.int64)` between every such narrow value v (the input
// or a view of it) and the index arguments that read it, shared by all of v's
// index uses. Views and graph outputs keep the narrow dtype (an output that is
// a view of the input stays i32, as in PyTorch); everything that computes with
// the index afterwards (autodiff rules, lowering) sees i64. Index values are
// integers, so the widening is exact; PyTorch computes gather/scatter offsets
// in int64 too. Idempotent: after it no index argument is narrow.
//===----------------------------------------------------------------------===//
#include "aotc/OpRegistry.h"
#include "aotc/Stages.h"

#include <map>

namespace aotc {

void widenIndexInputs(Graph &g) {
  std::map<Node *, Node *> wide; // narrow value -> its i64 copy
  std::vector<Node *> calls;
  for (auto &up : g.nodes())
    if (up->isCall()) calls.push_back(up.get());
  for (Node *n : calls) {
    const OpDef *op = n->op ? n->op : OpRegistry::get().lookup(n->target);
    if (!op || op->target() == "aten._to_copy.default") continue;
    for (int i : op->indexArgs) {
      if (i >= (int)n->args.size()) continue;
      auto *p = std::get_if<Node *>(&n->args[i]);
      if (!p || !*p || (*p)->types.size() != 1 || !isNarrowInt((*p)->type().dtype)) continue;
      Node *&w = wide[*p];
      if (!w) {
        // Right after the narrow value (before its first user); after all placeholders when
        // it is one (placeholders come first in a graph).
        Node *next = nullptr;
        for (size_t k = 0; k + 1 < g.nodes().size() && !next; ++k) {
          Node *cur = g.nodes()[k].get(), *nx = g.nodes()[k + 1].get();
          if ((*p)->isPlaceholder() ? !nx->isPlaceholder() : cur == *p) next = nx;
        }
        w = buildCall(g, g.uniqueName((*p)->name + "_i64"), "aten._to_copy.default", {*p},
                      {{"dtype", DTypeLit{DType::I64}}}, n->loc, next);
        w->inheritSource(*n);
      }
      *p = w;
    }
  }
  if (!wide.empty()) g.verify();
}

} // namespace aotc
