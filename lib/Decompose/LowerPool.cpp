//===- LowerPool.cpp - Lower rules: max_pool2d_with_indices, as_strided ------===//
//
// max_pool2d_with_indices(x, ...) over P = N*C planes (include/aotc/Pool.h):
//   xp   = x padded with -inf to [P, Hp, Wp] (two slice_scatters into full(-inf)), Hp covering
//          every window position (ceil_mode windows may run past the right padding);
//   win  = as_strided(xp, [P, OH, OW, KH, KW], [Hp Wp, sH Wp, sW, dH Wp, dW]) viewed
//          [P, OH, OW, KH*KW];
//   out  = amax(win, -1);  k = argmax(win, -1) (the first maximum in window order), or, in a
//          window holding a NaN, the last NaN (ATen's `val > max || isnan(val)`):
//          KK - 1 - argmax(isnan(win) reversed, -1);
//   indices = gather(the same window of the flat positions h*W + w (-1 on padding), k).
// max_pool2d_with_indices_backward: scatter_add of grad_output into zeros [P, H*W] at indices.
// as_strided of a rank != 1 input: as_strided of its [numel] view (codegen's view rule maps
// the output index to one flat input position).
//===----------------------------------------------------------------------===//
#include "Rules.h"

#include "aotc/Pool.h"

#include <cmath>

namespace aotc::rules {

using namespace rewrite;

namespace {

/// The geometry of a pooling node whose kernel_size is argument `ka` (stride, padding, dilation,
/// ceil_mode follow).
PoolGeometry geometryOf(const Node &n, const Shape &in, size_t ka = 1) {
  PoolShapeResult r = maxPool2dShape(in, n.intListArg(ka), n.intListArg(ka + 1), n.intListArg(ka + 2),
                                     n.intListArg(ka + 3), n.boolArg(ka + 4));
  if (!r.error.empty()) nodeError(n, r.error);
  return r.geom;
}

/// Padded extents: the left padding plus whatever the last window reads.
int64_t padded(int64_t in, int64_t out, int64_t s, int64_t p, int64_t d, int64_t k) {
  return p + std::max(in, (out - 1) * s - p + (k - 1) * d + 1);
}

/// src [..., A, B] placed at [padA, padB] of full([..., Ap, Bp], fill).
Node *pad2(Emitter &e, Node *src, Shape lead, int64_t A, int64_t B, int64_t Ap, int64_t Bp, int64_t padA,
           int64_t padB, Arg fill, DType dt) {
  int64_t r = (int64_t)lead.size();
  Shape rows = lead, full = lead;
  rows.insert(rows.end(), {A, Bp});
  full.insert(full.end(), {Ap, Bp});
  Node *t1 = e.call("aten.full.default", {rows, fill}, {{"dtype", DTypeLit{dt}}});
  t1 = e.call("aten.slice_scatter.default", {t1, src, r + 1, padB, padB + B, int64_t(1)});
  Node *t2 = e.call("aten.full.default", {full, fill}, {{"dtype", DTypeLit{dt}}});
  return e.call("aten.slice_scatter.default", {t2, t1, r, padA, padA + A, int64_t(1)});
}

} // namespace

Vals maxPool2dWithIndices(Emitter &e, Node &n) {
  Node *x = n.tensorArg(0);
  const Shape &xs = x->type().shape;
  DType dt = x->type().dtype;
  PoolGeometry g = geometryOf(n, xs);
  int64_t Hp = padded(g.H, g.OH, g.strideH, g.padH, g.dilH, g.KH);
  int64_t Wp = padded(g.W, g.OW, g.strideW, g.padW, g.dilW, g.KW);
  int64_t P = g.planes, KK = g.KH * g.KW;
  Node *xr = e.view(x, {P, g.H, g.W});
  Node *xp = pad2(e, xr, {P}, g.H, g.W, Hp, Wp, g.padH, g.padW, -INFINITY, dt);
  Node *win = e.call("aten.as_strided.default",
                     {xp, Shape{P, g.OH, g.OW, g.KH, g.KW},
                      std::vector<int64_t>{Hp * Wp, g.strideH * Wp, g.strideW, g.dilH * Wp, g.dilW}, int64_t(0)});
  Node *flat = e.view(win, {P, g.OH, g.OW, KK});
  Node *out = e.call("aten.amax.default", {flat, std::vector<int64_t>{3}, false});
  Node *k = e.call("aten.argmax.default", {flat, int64_t(3), true});
  if (isFloating(dt)) { // a window with a NaN: the last one, as ATen's kernel
    Node *rev = e.call("aten.arange.start_step", {KK - 1, int64_t(-1), int64_t(-1)}, {{"dtype", DTypeLit{DType::I64}}});
    Node *nanRev = e.call("aten.index_select.default", {e.call("aten.isnan.default", {flat}), int64_t(3), rev});
    Node *lastNan = e.call("aten.rsub.Scalar", {e.call("aten.argmax.default", {nanRev, int64_t(3), true}), KK - 1});
    Node *hasNan = e.call("aten.isnan.default", {e.call("aten.unsqueeze.default", {out, int64_t(3)})});
    k = e.call("aten.where.self", {hasNan, lastNan, k});
  }
  // The flat input position of every padded position (-1 on the padding).
  Node *pos = e.view(e.call("aten.arange.default", {g.H * g.W}, {{"dtype", DTypeLit{DType::I64}}}), {g.H, g.W});
  Node *posP = pad2(e, pos, {}, g.H, g.W, Hp, Wp, g.padH, g.padW, int64_t(-1), DType::I64);
  Node *pwin = e.call("aten.as_strided.default",
                      {posP, Shape{g.OH, g.OW, g.KH, g.KW},
                       std::vector<int64_t>{g.strideH * Wp, g.strideW, g.dilH * Wp, g.dilW}, int64_t(0)});
  Node *pflat = e.call("aten.expand.default", {e.view(pwin, {g.OH, g.OW, KK}), Shape{P, g.OH, g.OW, KK}});
  Node *idx = e.call("aten.gather.default", {pflat, int64_t(3), k});
  Shape os = n.types[0].shape;
  return {e.view(out, os), e.view(idx, os)};
}

Vals maxPool2dWithIndicesBackward(Emitter &e, Node &n) {
  Node *g = n.tensorArg(0), *x = n.tensorArg(1), *ix = n.tensorArg(7);
  PoolGeometry geo = geometryOf(n, x->type().shape, 2);
  int64_t P = geo.planes;
  Node *zeros = e.call("aten.full.default", {Shape{P, geo.H * geo.W}, 0.0}, {{"dtype", DTypeLit{x->type().dtype}}});
  Node *acc = e.call("aten.scatter_add.default", {zeros, int64_t(1), e.view(ix, {P, geo.OH * geo.OW}),
                                                  e.view(g, {P, geo.OH * geo.OW})});
  return {e.view(acc, x->type().shape)};
}

Vals asStrided(Emitter &e, Node &n) {
  Node *x = n.tensorArg(0);
  if (x->type().rank() == 1) return {};
  Node *flat = e.view(x, {x->type().numel()});
  return {e.call("aten.as_strided.default", {flat, n.intListArg(1), n.intListArg(2),
                                             n.isNoneArg(3) ? Arg{int64_t(0)} : Arg{n.intArg(3)}})};
}

} // namespace aotc::rules
