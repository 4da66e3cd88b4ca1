//===- DecomposeScan.cpp - cumsum, diagonal(_scatter), index_reduce, multilabel_margin_loss ===//
//
// Decompose rules (the table is in Decompose.cpp) for the composites of lib/IR/ops/Scan.cpp
// and multilabel_margin_loss. Each becomes masks, gathers and reductions that codegen fuses
// (an expand feeding a where feeding a sum is one reduction kernel, never a buffer), so the
// gradients are those of the primitives:
//  * cumsum(x, d)[.., i, ..] = sum_j where(j <= i, x[.., j, ..], 0): O(n^2) work along d, in
//    one fused reduction (torch accumulates in double on the CPU; aotc's f32 sum does too);
//  * diagonal: index.Tensor on the two dims (moved last) with aranges; diagonal_scatter:
//    index_put with the same indices;
//  * index_reduce: prod by scatter_reduce.two over the index expanded to the source; mean by scatter_add of values and counts; amax/amin as the extremum over
//    the candidates where(index[k] == n, source[k], -+inf) (and self, with include_self), so
//    ties share the gradient evenly, as torch's index_reduce_backward; the index goes through
//    an index_select of arange(N), which checks its range at run time;
//  * multilabel_margin_loss: torch's decomposition (torch/_decomp/decompositions.py).
//===----------------------------------------------------------------------===//
#include "Rules.h"

#include "aotc/OpRegistry.h"

#include <cmath>
#include <limits>

namespace aotc::rules {
namespace {

using rewrite::Emitter;

Node *arange(Emitter &e, int64_t start, int64_t end) {
  return e.call("aten.arange.start_step", {start, end}, {{"dtype", DTypeLit{DType::I64}}});
}

Node *zeroOf(Emitter &e, DType dt) {
  return isFloating(dt) ? e.scalarTensor(0.0, dt) : e.scalarTensor(int64_t(0), dt);
}

/// Permutation moving dims d1, d2 last (others in order), and its inverse.
std::pair<std::vector<int64_t>, std::vector<int64_t>> diagonalPerm(int64_t rank, int64_t d1, int64_t d2) {
  std::vector<int64_t> perm, inv(rank);
  for (int64_t k = 0; k < rank; ++k)
    if (k != d1 && k != d2) perm.push_back(k);
  perm.push_back(d1);
  perm.push_back(d2);
  for (int64_t k = 0; k < rank; ++k) inv[perm[k]] = k;
  return {perm, inv};
}

std::vector<Node *> diagonalIndices(Emitter &e, const ops::DiagonalGeom &g, int64_t rank) {
  std::vector<Node *> ix(rank - 2, nullptr);
  ix.push_back(arange(e, g.row0, g.row0 + g.len));
  ix.push_back(arange(e, g.col0, g.col0 + g.len));
  return ix;
}

} // namespace

namespace {

/// x expanded to [pre, L (i), L (j), post] along dim d (xe[.., i, j, ..] = x[.., j, ..]), and
/// the mask j <= i broadcast to it: the running (cumulative) ops' O(L^2) form.
struct Triangle {
  Node *xe = nullptr, *keep = nullptr;
  int64_t L = 1;
};
Triangle triangle(Emitter &e, Node *x, int64_t d) {
  Shape s = x->type().shape;
  Triangle t;
  t.L = s[d];
  Shape big = s;
  big.insert(big.begin() + d, t.L);
  t.xe = e.call("aten.expand.default", {e.call("aten.unsqueeze.default", {x, d}), big});
  Node *ones = e.call("aten.full.default", {Shape{t.L, t.L}, true}, {{"dtype", DTypeLit{DType::Bool}}});
  Shape ms(big.size(), 1);
  ms[d] = ms[d + 1] = t.L;
  t.keep = e.view(e.call("aten.tril.default", {ones}), ms);
  return t;
}

} // namespace

Vals cumsum(Emitter &e, Node &n) {
  DType dt = n.types[0].dtype;
  Node *x = e.toDtype(n.tensorArg(0), dt);
  Shape s = x->type().shape;
  if (s.empty()) return {e.call("aten.clone.default", {x})};
  int64_t d = rewrite::wrapDimAt(n, n.intArg(1), (int64_t)s.size());
  Triangle t = triangle(e, x, d);
  return {e.sum(e.call("aten.where.self", {t.keep, t.xe, zeroOf(e, dt)}), {d + 1}, false)};
}

/// cumprod: prod over j of where(j <= i, x, 1) (prod's rule handles zeros, as cumprod_backward);
/// logcumsumexp: logsumexp over j of where(j <= i, x, -inf).
Vals cumprodLike(Emitter &e, Node &n) {
  bool lse = n.target == "aten.logcumsumexp.default";
  DType dt = n.types[0].dtype;
  Node *x = e.toDtype(n.tensorArg(0), dt);
  Shape s = x->type().shape;
  if (s.empty()) return {e.call("aten.clone.default", {x})};
  int64_t d = rewrite::wrapDimAt(n, n.intArg(1), (int64_t)s.size());
  if (s[d] == 0) return {e.call("aten.clone.default", {x})};
  Triangle t = triangle(e, x, d);
  Node *fill = lse ? e.scalarTensor(-INFINITY, dt) : isFloating(dt) ? e.scalarTensor(1.0, dt) : e.scalarTensor(int64_t(1), dt);
  Node *m = e.call("aten.where.self", {t.keep, t.xe, fill});
  if (lse) return {e.call("aten.logsumexp.default", {m, std::vector<int64_t>{d + 1}, false})};
  return {e.call("aten.prod.dim_int", {m, d + 1, false})};
}

/// cummax / cummin: the index is the last j <= i holding the running extremum (a NaN, once
/// seen, is the extremum: the last NaN so far), as torch's cummax_cummin_helper (`x >= out`
/// updates); the values are gather(x, d, index), so the gradient goes to that index, as
/// cummaxmin_backward.
Vals cummaxmin(Emitter &e, Node &n) {
  bool mx = n.target == "aten.cummax.default";
  Node *x = n.tensorArg(0);
  DType dt = x->type().dtype;
  Shape s = x->type().shape;
  if (s.empty() || s[rewrite::wrapDimAt(n, n.intArg(1), (int64_t)s.size())] == 0) {
    Node *i = e.call("aten.full.default", {std::vector<int64_t>(s), int64_t(0)}, {{"dtype", DTypeLit{DType::I64}}});
    return {e.call("aten.clone.default", {x}), i};
  }
  int64_t d = rewrite::wrapDimAt(n, n.intArg(1), (int64_t)s.size());
  Triangle t = triangle(e, x, d);
  Node *pad;
  if (isFloating(dt)) pad = e.scalarTensor(mx ? -INFINITY : INFINITY, dt);
  else if (dt == DType::Bool) pad = e.scalarTensor(!mx, dt);
  else pad = e.scalarTensor(mx ? std::numeric_limits<int64_t>::min() : std::numeric_limits<int64_t>::max(), dt);
  Node *masked = e.call("aten.where.self", {t.keep, t.xe, pad});
  Node *v = e.call(mx ? "aten.amax.default" : "aten.amin.default", {masked, std::vector<int64_t>{d + 1}, true});
  Node *hit = e.call("aten.eq.Tensor", {t.xe, v});
  if (isFloating(dt))
    hit = e.call("aten.logical_or.default",
                 {hit, e.call("aten.logical_and.default", {e.call("aten.isnan.default", {t.xe}), e.call("aten.isnan.default", {v})})});
  hit = e.call("aten.logical_and.default", {hit, t.keep});
  Shape js(t.xe->type().rank(), 1);
  js[d + 1] = t.L;
  Node *j = e.view(arange(e, 0, t.L), js);
  Node *idx = e.call("aten.amax.default", {e.call("aten.where.self", {hit, j, e.scalarTensor(int64_t(-1), DType::I64)}),
                                           std::vector<int64_t>{d + 1}, false});
  return {e.call("aten.gather.default", {x, d, idx}), idx};
}

Vals diagonal(Emitter &e, Node &n) {
  Node *x = n.tensorArg(0);
  const TensorType &t = x->type();
  ops::DiagonalGeom g = ops::diagonalGeom(n, t.shape, n.intArg(1), n.intArg(2), n.intArg(3));
  if (g.len == 0) return {e.call("aten.full.default", {g.shape, int64_t(0)}, {{"dtype", DTypeLit{t.dtype}}})};
  auto [perm, inv] = diagonalPerm(t.rank(), g.d1, g.d2);
  return {e.call("aten.index.Tensor", {e.permute(x, perm), diagonalIndices(e, g, t.rank())})};
}

Vals diagonalScatter(Emitter &e, Node &n) {
  Node *x = n.tensorArg(0), *src = n.tensorArg(1);
  const TensorType &t = x->type();
  ops::DiagonalGeom g = ops::diagonalGeom(n, t.shape, n.intArg(2), n.intArg(3), n.intArg(4));
  if (g.len == 0) return {e.call("aten.clone.default", {x})};
  auto [perm, inv] = diagonalPerm(t.rank(), g.d1, g.d2);
  Node *put = e.call("aten.index_put.default",
                     {e.permute(x, perm), diagonalIndices(e, g, t.rank()), e.toDtype(src, t.dtype), false});
  return {e.permute(put, inv)};
}

Vals indexReduce(Emitter &e, Node &n) {
  Node *self = n.tensorArg(0), *index = n.tensorArg(2), *src = n.tensorArg(3);
  const TensorType &t = self->type();
  DType dt = t.dtype;
  const std::string &red = std::get<std::string>(n.args.at(4));
  bool include = n.boolArg(5);
  Shape s = t.shape.empty() ? Shape{1} : t.shape;
  int64_t d = rewrite::wrapDimAt(n, n.intArg(1), (int64_t)s.size()), N = s[d];
  Shape ss = s;
  int64_t K = index->type().rank() ? index->type().shape[0] : 1;
  ss[d] = K;
  Node *x = e.view(self, s), *v = e.view(src, ss);
  // Values equal to the index, with its range checked when the program runs.
  Node *idx = e.call("aten.index_select.default", {arange(e, 0, N), int64_t(0), e.view(index, {K})});
  auto along = [&](Node *vec, int64_t len, int64_t at, size_t rank) { // [len] -> 1s but `at`
    Shape vs(rank, 1);
    vs[at] = len;
    return e.view(vec, vs);
  };
  Node *out;
  if (red == "prod") { // scatter_reduce's product (torch's scatter_reduce_backward for zeros)
    Node *idxE = e.call("aten.expand.default", {along(idx, K, d, s.size()), ss});
    out = e.call("aten.scatter_reduce.two", {x, d, idxE, v, std::string("prod")}, {{"include_self", include}});
  } else if (red == "mean") {
    Node *idxE = e.call("aten.expand.default", {along(idx, K, d, s.size()), ss});
    Node *sums = e.call("aten.scatter_add.default",
                        {e.call("aten.full.default", {s, 0.0}, {{"dtype", DTypeLit{dt}}}), d, idxE, v});
    Node *cnt = e.call("aten.scatter_add.default",
                       {e.call("aten.full.default", {Shape{N}, 0.0}, {{"dtype", DTypeLit{dt}}}), int64_t(0), idx,
                        e.call("aten.full.default", {Shape{K}, 1.0}, {{"dtype", DTypeLit{dt}}})});
    cnt = along(cnt, N, d, s.size());
    if (include) {
      sums = e.add(sums, x);
      cnt = e.add(cnt, 1.0);
    }
    Node *hit = e.call("aten.gt.Scalar", {cnt, 0.0});
    Node *safe = e.call("aten.where.self", {hit, cnt, e.scalarTensor(1.0, dt)}); // no 0/0 in the gradient
    out = e.call("aten.where.self", {hit, e.div(sums, safe), x});
  } else {
    bool mx = red == "amax";
    Shape big = s;
    big.insert(big.begin() + d + 1, K); // [pre, N, K, post]
    Shape ms(big.size(), 1);
    ms[d] = N;
    ms[d + 1] = K;
    Node *match = e.view(e.call("aten.eq.Tensor", {e.view(arange(e, 0, N), {N, 1}), e.view(idx, {1, K})}), ms);
    Node *cand = e.call("aten.where.self", {match, e.call("aten.unsqueeze.default", {v, d}),
                                            e.scalarTensor(mx ? -INFINITY : INFINITY, dt)});
    if (include) {
      cand = e.call("aten.expand.default", {cand, big});
      cand = e.call("aten.cat.default", {std::vector<Node *>{cand, e.call("aten.unsqueeze.default", {x, d + 1})}, d + 1});
    }
    out = e.call(mx ? "aten.amax.default" : "aten.amin.default", {cand, std::vector<int64_t>{d + 1}, false});
    if (!include) {
      Node *hit = e.call("aten.any.dim", {match, d + 1, false});
      out = e.call("aten.where.self", {hit, out, x});
    }
  }
  return {e.view(out, t.shape)};
}

Vals multilabelMarginLoss(Emitter &e, Node &n) {
  Node *x = n.tensorArg(0), *t = n.tensorArg(1);
  const TensorType &xt = x->type();
  int64_t C = xt.shape.empty() ? 1 : xt.shape.back(), N = xt.rank() == 2 ? xt.shape[0] : 1;
  x = e.view(x, {N, C});
  t = e.view(t, {N, C});
  Node *cls = arange(e, 0, C);
  // Targets count up to the first -1 (C when there is none).
  Node *stop = e.call("aten.amin.default",
                      {e.call("aten.where.self", {e.call("aten.eq.Scalar", {t, int64_t(-1)}), cls,
                                                  e.scalarTensor(C, DType::I64)}),
                       std::vector<int64_t>{-1}, true});
  Node *valid = e.call("aten.lt.Tensor", {cls, stop}); // [N, C (j)]
  Node *xy = e.call("aten.gather.default",
                    {x, int64_t(-1), e.call("aten.where.self", {valid, t, e.scalarTensor(int64_t(0), DType::I64)})});
  Node *tm = e.call("aten.unsqueeze.default",
                    {e.call("aten.where.self", {valid, t, e.scalarTensor(int64_t(-1), DType::I64)}), int64_t(-1)});
  Node *isTarget = e.call("aten.any.dim", {e.call("aten.eq.Tensor", {cls, tm}), int64_t(1), false}); // [N, C (i)]
  Node *z = e.add(e.call("aten.rsub.Scalar", {e.call("aten.unsqueeze.default", {xy, int64_t(-1)}), 1.0}),
                  e.call("aten.unsqueeze.default", {x, int64_t(1)})); // 1 - x[y_j] + x[i]: [N, j, i]
  z = e.div(e.call("aten.clamp.default", {z, 0.0}), C);
  Node *zero = e.scalarTensor(0.0, xt.dtype);
  z = e.call("aten.where.self", {e.call("aten.unsqueeze.default", {isTarget, int64_t(1)}), zero, z});
  z = e.call("aten.where.self", {e.call("aten.unsqueeze.default", {valid, int64_t(-1)}), z, zero});
  Node *perFrame = e.sum(z, {1, 2}, false); // [N]
  int64_t red = n.intArg(2);
  if (red == 0) return {e.view(perFrame, n.types[0].shape)};
  Node *total = e.sum(perFrame, {}, false);
  return {red == 1 ? e.div(total, N) : total};
}

} // namespace aotc::rules
