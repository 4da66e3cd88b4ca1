//===- DecomposeEmbeddingBag.cpp - _embedding_bag as a segmented scatter -------------===//
//
// Decompose rule (the table is in Decompose.cpp) for lib/IR/ops/EmbeddingBag.cpp. Entry i's bag
// is (the number of bag offsets <= i) - 1, one fused [N, B] count; entries outside every bag or
// equal to padding_idx go to a spare bag B, sliced off. rows = index_select(weight, 0, indices):
//  * sum / mean: scatter_add of the rows (times per_sample_weights) into [B + 1, D]; mean divides
//    by max(count, 1), count = scatter_add of ones;
//  * max: the per-feature maximum by scatter_reduce amax, the first entry reaching it by an amin
//    scatter of positions, output = gather(weight, 0, max_indices) (0 for an empty bag), so the
//    gradient reaches only the selected row, as eager's.
// The auxiliary results reproduce torch's CPU kernel (see the op's comment).
//===----------------------------------------------------------------------===//
#include "Rules.h"

#include "aotc/OpRegistry.h"

#include <cmath>

namespace aotc::rules {

using rewrite::Emitter;

Vals embeddingBag(Emitter &e, Node &n) {
  Node *w = n.tensorArg(0), *ix = e.toDtype(n.tensorArg(1), DType::I64), *off = e.toDtype(n.tensorArg(2), DType::I64);
  const Shape &ws = w->type().shape;
  int64_t D = ws[1], N = ix->type().shape[0], mode = n.intArg(4), pad = n.intArg(8);
  bool lastOffset = n.boolArg(7);
  int64_t B = off->type().shape[0] - (lastOffset ? 1 : 0);
  DType dt = w->type().dtype;
  auto full = [&](Shape s, Arg v, DType t) { return e.call("aten.full.default", {s, v}, {{"dtype", DTypeLit{t}}}); };
  Node *pos = e.call("aten.arange.start_step", {int64_t(0), N}, {{"dtype", DTypeLit{DType::I64}}});
  Node *offB = e.call("aten.slice.Tensor", {off, int64_t(0), int64_t(0), B, int64_t(1)});
  // bag[i] = #{b < B : offsets[b] <= i} - 1
  Node *le = e.call("aten.le.Tensor", {e.view(offB, {1, B}), e.view(pos, {N, 1})});
  Node *bag = e.sub(e.call("aten.sum.dim_IntList", {e.toDtype(le, DType::I64), std::vector<int64_t>{1}}), int64_t(1));
  Node *keep = e.call("aten.ge.Scalar", {bag, int64_t(0)});
  if (lastOffset) {
    Node *end = e.call("aten.select.int", {off, int64_t(0), B});
    keep = e.call("aten.logical_and.default", {keep, e.call("aten.lt.Tensor", {pos, end})});
  }
  Node *inBag = keep;
  if (pad >= 0) keep = e.call("aten.logical_and.default", {keep, e.call("aten.ne.Scalar", {ix, pad})});
  Node *target = e.call("aten.where.self", {keep, bag, e.scalarTensor(B, DType::I64)});
  Node *tgt2 = e.call("aten.expand.default", {e.view(target, {N, 1}), std::vector<int64_t>{N, D}});
  Node *counts = e.call("aten.scatter_add.default", {full({B + 1}, int64_t(0), DType::I64), int64_t(0), target,
                                                     full({N}, int64_t(1), DType::I64)});
  counts = e.call("aten.slice.Tensor", {counts, int64_t(0), int64_t(0), B, int64_t(1)});
  Node *rows = e.call("aten.index_select.default", {w, int64_t(0), ix});
  Node *out, *maxIdx = nullptr;
  if (mode == 2) {
    // ATen keeps the first entry and replaces it by a strictly greater one: a NaN wins only as
    // a bag's first (kept) entry. So the maximum is taken with NaN as -inf, and a bag whose first
    // entry is NaN (per feature) picks that entry.
    Node *isNan = e.call("aten.isnan.default", {rows});
    Node *rowsNN = e.call("aten.where.self", {isNan, e.scalarTensor(-INFINITY, dt), rows});
    Node *firstKept = e.call("aten.scatter_reduce.two",
                             {full({B + 1}, N, DType::I64), int64_t(0), target,
                              e.call("aten.where.self", {keep, pos, e.scalarTensor(N, DType::I64)}), std::string("amin")});
    Node *isFirst = e.call("aten.logical_and.default",
                           {keep, e.call("aten.eq.Tensor", {pos, e.call("aten.index_select.default", {firstKept, int64_t(0), target})})});
    Node *nanFirst = e.call("aten.logical_and.default", {isNan, e.view(isFirst, {N, 1})});
    Node *bagNanFirst = e.call("aten.scatter_add.default", {full({B + 1, D}, int64_t(0), DType::I64), int64_t(0), tgt2,
                                                            e.toDtype(nanFirst, DType::I64)});
    Node *vals = e.call("aten.scatter_reduce.two", {full({B + 1, D}, 0.0, dt), int64_t(0), tgt2, rowsNN, std::string("amax")},
                        {{"include_self", false}});
    Node *regular = e.call("aten.logical_and.default",
                           {e.call("aten.eq.Tensor", {rowsNN, e.call("aten.index_select.default", {vals, int64_t(0), target})}),
                            e.call("aten.eq.Scalar", {e.call("aten.index_select.default", {bagNanFirst, int64_t(0), target}), int64_t(0)})});
    Node *hit = e.call("aten.logical_or.default",
                       {nanFirst, e.call("aten.logical_and.default", {regular, e.view(keep, {N, 1})})});
    Node *cand = e.call("aten.where.self", {hit, e.call("aten.expand.default", {e.view(pos, {N, 1}), std::vector<int64_t>{N, D}}),
                                            e.scalarTensor(N, DType::I64)});
    Node *first = e.call("aten.scatter_reduce.two", {full({B + 1, D}, N, DType::I64), int64_t(0), tgt2, cand, std::string("amin")});
    first = e.call("aten.slice.Tensor", {first, int64_t(0), int64_t(0), B, int64_t(1)});
    Node *ixPad = e.call("aten.constant_pad_nd.default", {ix, std::vector<int64_t>{0, 1}, int64_t(0)});
    maxIdx = e.view(e.call("aten.index_select.default", {ixPad, int64_t(0), e.view(first, {B * D})}), {B, D});
    Node *empty = e.call("aten.eq.Scalar", {first, N});
    out = e.call("aten.where.self", {empty, e.scalarTensor(0.0, dt), e.call("aten.gather.default", {w, int64_t(0), maxIdx})});
  } else {
    Node *contrib = rows;
    if (!n.isNoneArg(6)) contrib = e.mul(contrib, e.view(n.tensorArg(6), {N, 1}));
    Node *acc = e.call("aten.scatter_add.default", {full({B + 1, D}, 0.0, dt), int64_t(0), tgt2, contrib});
    out = e.call("aten.slice.Tensor", {acc, int64_t(0), int64_t(0), B, int64_t(1)});
    if (mode == 1)
      out = e.div(out, e.view(e.toDtype(e.call("aten.clamp_min.default", {counts, int64_t(1)}), dt), {B, 1}));
  }
  const std::vector<TensorType> &ts = n.types;
  Node *o2b = ts[1].shape[0] == 0 ? full({0}, int64_t(0), DType::I64)
                                  : e.call("aten.where.self", {inBag, bag, e.scalarTensor(int64_t(0), DType::I64)});
  Node *size = mode == 0 ? full({B}, int64_t(0), DType::I64) : counts;
  Node *mi = mode == 2 ? maxIdx : mode == 1 ? e.call("aten.clone.default", {counts}) : full({B}, int64_t(0), DType::I64);
  return {out, o2b, size, mi};
}

} // namespace aotc::rules
