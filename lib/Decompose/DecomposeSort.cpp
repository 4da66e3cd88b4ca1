//===- DecomposeSort.cpp - sort, topk (and randperm's ranks) by ranking ----------===//
//
// Decompose rules (the table is in Decompose.cpp) for lib/IR/ops/Sort.cpp. Each element's
// stable rank along dim d is the number of elements that go before it:
//   rank[i] = sum_j  before(x[j], x[i]) or (neither goes before the other and j < i)
// with before(a, b) = a < b, or b is NaN and a is not (ascending; mirrored for descending), over
// x viewed as [.., n (i), 1, ..] and [.., 1, n (j), ..]: one fused reduction, O(n^2) work
// along the dim and no n x n buffer. Ranks are a permutation, so
//   values  = scatter.src(zeros, d, rank, x),  indices = scatter.src(zeros, d, rank, arange);
// topk keeps ranks < k (the others are sent to a spare slot k, sliced off). The values'
// gradient is scatter's: the gather of grad at each element's rank, i.e. eager's
// value_selecting_reduction_backward. O(n^2) is the cost of a sort without a sort kernel:
// a library sort on the extern path is the follow-up (docs/ops.md).
//===----------------------------------------------------------------------===//
#include "Rules.h"

#include "aotc/OpRegistry.h"

namespace aotc::rules {
namespace {

using rewrite::Emitter;
using rewrite::wrapDimAt;

Node *call(Emitter &e, const char *t, std::vector<Arg> a) { return e.call(t, a); }

/// before(a, b) of the comment above, elementwise (broadcasting).
Node *goesBefore(Emitter &e, Node *a, Node *b, bool descending) {
  Node *strict = call(e, descending ? "aten.gt.Tensor" : "aten.lt.Tensor", {a, b});
  if (!isFloating(a->type().dtype)) return strict;
  Node *aNan = call(e, "aten.isnan.default", {a}), *bNan = call(e, "aten.isnan.default", {b});
  Node *nanOrder = descending ? call(e, "aten.logical_and.default", {aNan, call(e, "aten.logical_not.default", {bNan})})
                              : call(e, "aten.logical_and.default", {bNan, call(e, "aten.logical_not.default", {aNan})});
  return call(e, "aten.logical_or.default", {strict, nanOrder});
}

/// [1, .., n at `at`, .., 1] of rank `rank`.
Shape along(int64_t rank, int64_t at, int64_t n) {
  Shape s(rank, 1);
  s[at] = n;
  return s;
}

} // namespace

Node *stableRanks(Emitter &e, Node *x, int64_t d, bool descending) {
  const Shape &s = x->type().shape;
  int64_t rank = (int64_t)s.size(), n = s[d];
  Node *xi = call(e, "aten.unsqueeze.default", {x, d + 1}); // [.., n (i), 1, ..]
  Node *xj = call(e, "aten.unsqueeze.default", {x, d});     // [.., 1, n (j), ..]
  Node *ar = e.call("aten.arange.start_step", {int64_t(0), n}, {{"dtype", DTypeLit{DType::I64}}});
  Node *jBeforeI = call(e, "aten.lt.Tensor", {e.view(ar, along(rank + 1, d + 1, n)), e.view(ar, along(rank + 1, d, n))});
  Node *jFirst = goesBefore(e, xj, xi, descending), *iFirst = goesBefore(e, xi, xj, descending);
  Node *tie = call(e, "aten.logical_not.default", {call(e, "aten.logical_or.default", {jFirst, iFirst})});
  Node *counts = call(e, "aten.logical_or.default", {jFirst, call(e, "aten.logical_and.default", {tie, jBeforeI})});
  return e.call("aten.sum.dim_IntList", {e.toDtype(counts, DType::I64), std::vector<int64_t>{d + 1}, false});
}

/// (values, indices) of the first `k` ranks along d, into a result of size `k` along d.
static Vals firstRanks(Emitter &e, Node *x, int64_t d, int64_t k, bool descending) {
  const Shape &s = x->type().shape;
  int64_t rank = (int64_t)s.size(), n = s[d];
  Node *r = stableRanks(e, x, d, descending);
  const bool all = k == n;
  Shape out = s;
  out[d] = all ? n : k + 1; // topk: slot k takes every rank >= k
  if (!all) r = e.call("aten.where.self", {e.call("aten.lt.Scalar", {r, k}), r, e.scalarTensor(k, DType::I64)});
  Node *ar = e.call("aten.arange.start_step", {int64_t(0), n}, {{"dtype", DTypeLit{DType::I64}}});
  Node *pos = e.call("aten.expand.default", {e.view(ar, along(rank, d, n)), std::vector<int64_t>(s)});
  DType dt = x->type().dtype;
  Node *zv = e.call("aten.full.default", {std::vector<int64_t>(out), isFloating(dt) ? Arg(0.0) : Arg(int64_t(0))},
                    {{"dtype", DTypeLit{dt}}});
  Node *zi = e.call("aten.full.default", {std::vector<int64_t>(out), int64_t(0)}, {{"dtype", DTypeLit{DType::I64}}});
  Node *vals = e.call("aten.scatter.src", {zv, d, r, x});
  Node *idx = e.call("aten.scatter.src", {zi, d, r, pos});
  if (!all) {
    vals = e.call("aten.slice.Tensor", {vals, d, int64_t(0), k, int64_t(1)});
    idx = e.call("aten.slice.Tensor", {idx, d, int64_t(0), k, int64_t(1)});
  }
  return {vals, idx};
}

Vals sortOrTopk(Emitter &e, Node &n) {
  Node *x = n.tensorArg(0);
  const Shape &s = x->type().shape;
  const bool topk = n.target == "aten.topk.default", stable = n.target == "aten.sort.stable";
  const size_t dimArg = topk ? 2 : stable ? 2 : 1;
  const bool descending = topk ? n.boolArg(3) : n.boolArg(dimArg + 1);
  const TensorType &vt = n.types[0];
  int64_t d = s.empty() ? 0 : wrapDimAt(n, n.intArg(dimArg), (int64_t)s.size());
  if (s.empty() || s[d] <= 1) { // nothing to order: topk's k is 0 or 1 here (the shape function)
    Node *v = vt.shape == s ? e.call("aten.clone.default", {x})
                            : e.call("aten.slice.Tensor", {x, d, int64_t(0), vt.shape[d], int64_t(1)});
    Node *i = e.call("aten.full.default", {std::vector<int64_t>(vt.shape), int64_t(0)}, {{"dtype", DTypeLit{DType::I64}}});
    return {v, i};
  }
  return firstRanks(e, x, d, topk ? n.intArg(1) : s[d], descending);
}

/// kthvalue / median / nanmedian: the element of stable rank k along d (NaN ranks last), its
/// index = argmax(rank == k) (the one such element) and its value = gather(x, d, index), so the
/// gradient goes to that index (value_selecting_reduction_backward; median.default's eager
/// rule spreads it evenly over ties instead, which differs only at ties). median keeps
/// torch's NaN rule (a row with a NaN gives its first NaN); nanmedian takes the lower median of
/// the row's numbers, k = (count - 1) / 2 per row (a row of NaNs: rank 0, a NaN).
Vals orderStatistic(Emitter &e, Node &n) {
  const bool all = n.target == "aten.median.default" || n.target == "aten.nanmedian.default";
  const bool kth = n.target == "aten.kthvalue.default", nan = n.target.rfind("aten.nanmedian", 0) == 0;
  Node *x = n.tensorArg(0);
  if (all) x = e.view(x, {x->type().numel()});
  const Shape s = x->type().shape;
  const size_t dimArg = kth ? 2 : 1;
  const bool keepdim = all ? false : n.boolArg(dimArg + 1);
  int64_t d = s.empty() || all ? 0 : wrapDimAt(n, n.intArg(dimArg), (int64_t)s.size());
  if (s.empty() || s[d] == 1) { // one element: itself, index 0
    Node *v = e.call("aten.clone.default", {e.view(x, n.types[0].shape)});
    if (all) return {v};
    return {v, e.call("aten.full.default", {std::vector<int64_t>(n.types[1].shape), int64_t(0)},
                      {{"dtype", DTypeLit{DType::I64}}})};
  }
  const int64_t len = s[d];
  Node *r = stableRanks(e, x, d, false);
  Node *k; // the wanted rank, broadcast against r
  if (nan) {
    Node *cnt = e.call("aten.sum.dim_IntList", {e.toDtype(call(e, "aten.logical_not.default", {call(e, "aten.isnan.default", {x})}),
                                                           DType::I64),
                                                std::vector<int64_t>{d}, true});
    // (cnt - 1) // 2 for cnt >= 1, exactly in f64 (small integers); 0 for a row of NaNs
    Node *half = call(e, "aten.floor.default", {e.div(e.toDtype(call(e, "aten.sub.Scalar", {cnt, int64_t(1)}), DType::F64), 2.0)});
    k = e.toDtype(call(e, "aten.clamp_min.default", {half, 0.0}), DType::I64);
  } else {
    k = e.scalarTensor(kth ? n.intArg(1) - 1 : (len - 1) / 2, DType::I64);
  }
  Node *idx = call(e, "aten.argmax.default", {e.toDtype(call(e, "aten.eq.Tensor", {r, k}), DType::I64), d, true});
  if (!nan && !kth && isFloating(x->type().dtype)) { // median: a row with a NaN gives its first NaN
    Node *isn = e.toDtype(call(e, "aten.isnan.default", {x}), DType::I64);
    Node *any = call(e, "aten.gt.Scalar", {e.call("aten.amax.default", {isn, std::vector<int64_t>{d}, true}), int64_t(0)});
    idx = e.call("aten.where.self", {any, call(e, "aten.argmax.default", {isn, d, true}), idx});
  }
  Node *v = e.call("aten.gather.default", {x, d, idx});
  if (all) return {e.view(v, {})};
  if (!keepdim) {
    v = e.view(v, n.types[0].shape);
    idx = e.view(idx, n.types[1].shape);
  }
  return {v, idx};
}

} // namespace aotc::rules
