//===- DecomposeDistance.cpp - _cdist_forward, _pdist_forward -----------------------===//
//
// Decompose rules (the table is in Decompose.cpp) for lib/IR/ops/Distance.cpp. The pairwise
// differences diff = x1[.., :, None, :] - x2[.., None, :, :] (cdist) or x[I] - x[J] for the
// pairs (I, J) of pdist feed one fused reduction over the coordinates:
//   p = 0: count of diff != 0;  p = 1: sum |diff|;  p = 2: sqrt(sum diff^2);
//   p = inf: the largest |diff|, as m + sum(where(|diff| == m, |diff| - detach(|diff|), 0)) with
//            m = detach(amax): the value is amax's, and every coordinate at the maximum gets the
//            whole gradient (torch's _cdist_backward), not a share of it;
//   other p: sum(|diff|^p)^(1/p).
// Where a difference or a distance is zero, torch's backward gives 0 (no 0 * inf): the powers
// and the root take where(v == 0, 1, v) and the result where(v == 0, 0, ...).
// pdist's pair k = (i, j), i < j in row-major order, has the closed form
//   i = N - 2 - floor(sqrt(-8k + 4N(N-1) - 7) / 2 - 1/2),  j = k + i + 1 - N(N-1)/2 + (N-i)(N-i-1)/2
// (computed in float64: exact for N well beyond any size a graph holds as pairs).
//===----------------------------------------------------------------------===//
#include "Rules.h"

#include "aotc/OpRegistry.h"

#include <cmath>

namespace aotc::rules {
namespace {

using rewrite::Emitter;

/// where(v == 0, 0, f(where(v == 0, 1, v))): f's gradient never sees 0.
template <class F> Node *awayFromZero(Emitter &e, Node *v, F f) {
  DType dt = v->type().dtype;
  Node *zero = e.call("aten.eq.Scalar", {v, int64_t(0)});
  Node *safe = e.call("aten.where.self", {zero, e.scalarTensor(1.0, dt), v});
  return e.call("aten.where.self", {zero, e.scalarTensor(0.0, dt), f(safe)});
}

/// The p-norm of `diff` over its last dim.
Node *pNorm(Emitter &e, Node *diff, double p) {
  DType dt = diff->type().dtype;
  std::vector<int64_t> last = {-1};
  if (diff->type().shape.back() == 0) { // no coordinates: every distance is 0
    Shape s = diff->type().shape;
    s.pop_back();
    return e.call("aten.full.default", {s, 0.0}, {{"dtype", DTypeLit{dt}}});
  }
  if (p == 0) return e.toDtype(e.call("aten.sum.dim_IntList", {e.call("aten.ne.Scalar", {diff, int64_t(0)}), last}), dt);
  Node *a = e.call("aten.abs.default", {diff});
  if (p == 1) return e.call("aten.sum.dim_IntList", {a, last});
  if (std::isinf(p)) {
    Node *m = e.call("aten.detach.default", {e.call("aten.amax.default", {a, last, true})});
    Node *gradPath = e.sub(a, e.call("aten.detach.default", {a}));
    Node *atMax = e.call("aten.where.self", {e.call("aten.eq.Tensor", {a, m}), gradPath, e.scalarTensor(0.0, dt)});
    return e.add(e.call("aten.squeeze.dims", {m, last}), e.call("aten.sum.dim_IntList", {atMax, last}));
  }
  Node *s;
  if (p == 2) {
    s = e.call("aten.sum.dim_IntList", {e.mul(diff, diff), last});
    return awayFromZero(e, s, [&](Node *v) { return e.call("aten.sqrt.default", {v}); });
  }
  Node *t = awayFromZero(e, a, [&](Node *v) { return e.call("aten.pow.Tensor_Scalar", {v, p}); });
  s = e.call("aten.sum.dim_IntList", {t, last});
  return awayFromZero(e, s, [&](Node *v) { return e.call("aten.pow.Tensor_Scalar", {v, 1.0 / p}); });
}

} // namespace

Vals cdistForward(Emitter &e, Node &n) {
  Node *a = n.tensorArg(0), *b = n.tensorArg(1);
  Node *diff = e.sub(e.call("aten.unsqueeze.default", {a, int64_t(-2)}), e.call("aten.unsqueeze.default", {b, int64_t(-3)}));
  return {pNorm(e, diff, n.scalarArg(2))};
}

Vals pdistForward(Emitter &e, Node &n) {
  Node *x = n.tensorArg(0);
  const Shape &s = x->type().shape;
  int64_t N = s[0], K = N * (N - 1) / 2;
  if (K == 0) return {e.call("aten.full.default", {std::vector<int64_t>{0}, 0.0}, {{"dtype", DTypeLit{x->type().dtype}}})};
  Node *k = e.call("aten.arange.start_step", {int64_t(0), K}, {{"dtype", DTypeLit{DType::F64}}});
  double nn = (double)N;
  // i = N - 2 - floor(sqrt(4N(N-1) - 7 - 8k) / 2 - 1/2)
  Node *root = e.call("aten.sqrt.default", {e.call("aten.rsub.Scalar", {e.mul(k, 8.0), 4 * nn * (nn - 1) - 7})});
  Node *fl = e.call("aten.floor.default", {e.sub(e.mul(root, 0.5), 0.5)});
  Node *i = e.call("aten.rsub.Scalar", {fl, nn - 2});
  // j = k + i + 1 - N(N-1)/2 + (N-i)(N-i-1)/2
  Node *ni = e.call("aten.rsub.Scalar", {i, nn});
  Node *j = e.add(e.add(k, i), e.mul(e.mul(ni, e.sub(ni, 1.0)), 0.5));
  j = e.add(j, 1.0 - nn * (nn - 1) / 2);
  Node *I = e.toDtype(i, DType::I64), *J = e.toDtype(j, DType::I64);
  Node *diff = e.sub(e.call("aten.index_select.default", {x, int64_t(0), I}),
                     e.call("aten.index_select.default", {x, int64_t(0), J}));
  return {pNorm(e, diff, n.scalarArg(1))};
}

} // namespace aotc::rules
