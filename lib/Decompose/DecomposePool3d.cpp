//===- DecomposePool3d.cpp - 3-D pooling as two 2-D poolings --------------------------===//
//
// Decompose rules (the table is in Decompose.cpp) for lib/IR/ops/Pool3d.cpp. A 3-D window is a
// box, so x [N, C, D, H, W] (a missing batch dim is added and removed) pools over (H, W) as
// [N, C·D, H, W], then over D with a (k, 1) window as [N, C, D, OH·OW]:
//  * avg_pool3d: two avg_pool2d with the same ceil_mode / count_include_pad (each dim's divisor
//    share multiplies to the 3-D one); with divisor_override both sum (override 1) and the
//    result is divided once;
//  * _adaptive_avg_pool3d: two _adaptive_avg_pool2d (the second keeps OH·OW);
//  * max_pool3d_with_indices: two max_pool2d_with_indices; the first maximum in (h, w) of the
//    first depth reaching the maximum is the first in (d, h, w) order (NaN: the last, both
//    ways); the index d·H·W + (h·W + w), with d = (i2 - j) / (OH·OW) (exact in float64) and
//    h·W + w gathered from the first pass at d.
// Gradients are the 2-D ops' (adjoint resampling, scatter at the indices).
//===----------------------------------------------------------------------===//
#include "Rules.h"

#include "aotc/OpRegistry.h"

namespace aotc::rules {
namespace {

using rewrite::Emitter;

std::vector<int64_t> triple(const Node &n, size_t i, std::vector<int64_t> dflt) {
  std::vector<int64_t> v = n.intListArg(i);
  if (v.empty()) return dflt;
  if (v.size() == 1) return {v[0], v[0], v[0]};
  return v;
}

/// x as [N, C, D, H, W] (a batch of 1 added to an unbatched input).
Node *batched5(Emitter &e, Node *x) {
  return x->type().rank() == 5 ? x : e.call("aten.unsqueeze.default", {x, int64_t(0)});
}

} // namespace

Vals pool3d(Emitter &e, Node &n) {
  const bool isMax = n.target == "aten.max_pool3d_with_indices.default";
  const bool adaptive = n.target == "aten._adaptive_avg_pool3d.default";
  Node *x = batched5(e, n.tensorArg(0));
  const Shape &s = x->type().shape;
  int64_t N = s[0], C = s[1], D = s[2], H = s[3], W = s[4];
  Shape out = n.types[0].shape;
  int64_t OD = out[out.size() - 3], OH = out[out.size() - 2], OW = out.back();
  Node *x4 = e.view(x, {N, C * D, H, W});
  if (adaptive) {
    Node *y1 = e.call("aten._adaptive_avg_pool2d.default", {x4, std::vector<int64_t>{OH, OW}});
    Node *y2 = e.call("aten._adaptive_avg_pool2d.default", {e.view(y1, {N, C, D, OH * OW}), std::vector<int64_t>{OD, OH * OW}});
    return {e.view(y2, out)};
  }
  std::vector<int64_t> k = triple(n, 1, {}), st = triple(n, 2, k), p = triple(n, 3, {0, 0, 0});
  if (!isMax) {
    bool ceil = n.boolArg(4), countPad = n.boolArg(5), over = !n.isNoneArg(6);
    Arg div = over ? Arg(int64_t(1)) : Arg(std::monostate{});
    Node *y1 = e.call("aten.avg_pool2d.default", {x4, std::vector<int64_t>{k[1], k[2]}, std::vector<int64_t>{st[1], st[2]},
                                                  std::vector<int64_t>{p[1], p[2]}, ceil, countPad, div});
    Node *y2 = e.call("aten.avg_pool2d.default", {e.view(y1, {N, C, D, OH * OW}), std::vector<int64_t>{k[0], 1},
                                                  std::vector<int64_t>{st[0], 1}, std::vector<int64_t>{p[0], 0}, ceil,
                                                  countPad, div});
    if (over) y2 = e.div(y2, (double)n.intArg(6));
    return {e.view(y2, out)};
  }
  std::vector<int64_t> dil = triple(n, 4, {1, 1, 1});
  bool ceil = n.boolArg(5);
  Node *m1 = e.call("aten.max_pool2d_with_indices.default",
                    {x4, std::vector<int64_t>{k[1], k[2]}, std::vector<int64_t>{st[1], st[2]},
                     std::vector<int64_t>{p[1], p[2]}, std::vector<int64_t>{dil[1], dil[2]}, ceil});
  Node *v1 = e.call("getitem", {m1, int64_t(0)}), *i1 = e.call("getitem", {m1, int64_t(1)});
  int64_t J = OH * OW;
  Node *m2 = e.call("aten.max_pool2d_with_indices.default",
                    {e.view(v1, {N, C, D, J}), std::vector<int64_t>{k[0], 1}, std::vector<int64_t>{st[0], 1},
                     std::vector<int64_t>{p[0], 0}, std::vector<int64_t>{dil[0], 1}, ceil});
  Node *v2 = e.call("getitem", {m2, int64_t(0)}), *i2 = e.call("getitem", {m2, int64_t(1)});
  Node *j = e.view(e.call("aten.arange.start_step", {int64_t(0), J}, {{"dtype", DTypeLit{DType::I64}}}), {1, 1, 1, J});
  Node *depth = e.toDtype(e.div(e.toDtype(e.sub(i2, j), DType::F64), (double)J), DType::I64); // exact: i2 - j = d J
  Node *hw = e.call("aten.gather.default", {e.view(i1, {N, C, D, J}), int64_t(2), depth});
  Node *idx = e.add(e.mul(depth, H * W), hw);
  return {e.view(v2, out), e.view(idx, out)};
}

} // namespace aotc::rules
