//===- WidenIndices.cpp - i32/u8 index inputs become i64 ----------------------===//
//
// aotc computes on f32, f64, i64 and bool; i32 and u8 tensors are index-only
// (include/aotc/Types.h). A graph input of such a dtype may reach gather,
// scatter_add, index_select or embedding directly or through views (capture
// checks that, OpDef::indexArgs). This pass gives each such placeholder one
// `_to_copy(x, dtype=torch.int64)` right after the placeholders, points every
// use at it and re-infers the types of the nodes after it, so the views become
// i64 and everything downstream (autodiff rules, lowering, codegen) sees i64
// indices only. Index values are integers, so the widening is exact; PyTorch
// itself computes gather/scatter offsets in int64.
//===----------------------------------------------------------------------===//
#include "aotc/OpRegistry.h"
#include "aotc/Stages.h"

namespace aotc {

void widenIndexInputs(Graph &g) {
  std::vector<Node *> narrow;
  Node *firstCall = nullptr;
  for (auto &up : g.nodes()) {
    Node *n = up.get();
    if (n->isPlaceholder()) {
      if (isNarrowInt(n->type().dtype)) narrow.push_back(n);
    } else if (!firstCall) {
      firstCall = n;
    }
  }
  if (narrow.empty()) return;
  for (Node *ph : narrow) {
    Node *wide = buildCall(g, g.uniqueName(ph->name + "_i64"), "aten._to_copy.default", {ph},
                           {{"dtype", DTypeLit{DType::I64}}}, ph->loc, firstCall);
    // Calls read the wide copy; a graph output that returns the input itself keeps it.
    for (auto &up : g.nodes()) {
      Node *n = up.get();
      if (n == wide || !n->isCall()) continue;
      for (Arg &a : n->args) {
        if (auto *p = std::get_if<Node *>(&a); p && *p == ph) *p = wide;
        if (auto *l = std::get_if<std::vector<Node *>>(&a))
          for (Node *&e : *l)
            if (e == ph) e = wide;
      }
    }
  }
  bool after = false;
  for (auto &up : g.nodes()) {
    Node *n = up.get();
    if (n == firstCall) after = true;
    if (after && n->isCall()) n->types = inferTypes(*n);
  }
  g.verify();
}

} // namespace aotc
