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

/// `lead` followed by the static sizes `rest`.
std::vector<Size> sizes(std::vector<Size> lead, std::initializer_list<int64_t> rest) {
  for (int64_t x : rest) lead.push_back(x);
  return lead;
}

/// src [..., A, B] placed at [padA, padB] of full([..., Ap, Bp], fill); `lead` may be run-time
/// sizes (the planes of a batch).
Node *pad2(Emitter &e, Node *src, const std::vector<Size> &lead, int64_t A, int64_t B, int64_t Ap, int64_t Bp,
           int64_t padA, int64_t padB, Arg fill, DType dt) {
  int64_t r = (int64_t)lead.size();
  Node *t1 = e.fullOf(sizes(lead, {A, Bp}), fill, dt);
  t1 = e.call("aten.slice_scatter.default", {t1, src, r + 1, padB, padB + B, int64_t(1)});
  Node *t2 = e.fullOf(sizes(lead, {Ap, Bp}), fill, dt);
  return e.call("aten.slice_scatter.default", {t2, t1, r, padA, padA + A, int64_t(1)});
}

/// The planes of a pooling input [.., H, W]: the product of its leading dims (a run-time
/// size over a run-time batch).
Size planesOf(const TensorType &t) {
  Size p = 1;
  for (size_t d = 0; d + 2 < t.shape.size(); ++d) p = p * sizeOf(t, d);
  return p;
}

} // namespace

Vals maxPool2dWithIndices(Emitter &e, Node &n) {
  Node *x = n.tensorArg(0);
  const Shape &xs = x->type().shape;
  DType dt = x->type().dtype;
  PoolGeometry g = geometryOf(n, xs);
  int64_t Hp = padded(g.H, g.OH, g.strideH, g.padH, g.dilH, g.KH);
  int64_t Wp = padded(g.W, g.OW, g.strideW, g.padW, g.dilW, g.KW);
  Size P = planesOf(x->type());
  int64_t KK = g.KH * g.KW;
  Node *xr = e.viewTo(x, sizes({P}, {g.H, g.W}));
  Node *xp = pad2(e, xr, {P}, g.H, g.W, Hp, Wp, g.padH, g.padW, -INFINITY, dt);
  std::vector<Size> winSize = sizes({P}, {g.OH, g.OW, g.KH, g.KW});
  Node *win = e.call("aten.as_strided.default",
                     {xp, values(winSize),
                      std::vector<int64_t>{Hp * Wp, g.strideH * Wp, g.strideW, g.dilH * Wp, g.dilW}, int64_t(0)},
                     {}, {symArg(1, winSize)});
  Node *flat = e.viewTo(win, sizes({P}, {g.OH, g.OW, KK}));
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
  std::vector<Size> flatSize = sizes({P}, {g.OH, g.OW, KK});
  Node *pflat = e.call("aten.expand.default", {e.view(pwin, {g.OH, g.OW, KK}), values(flatSize)}, {},
                       {symArg(1, flatSize)});
  Node *idx = e.call("aten.gather.default", {pflat, int64_t(3), k});
  const TensorType &os = n.types[0];
  return {e.view(out, os.shape, os.sym), e.view(idx, os.shape, os.sym)};
}

Vals maxPool2dWithIndicesBackward(Emitter &e, Node &n) {
  Node *g = n.tensorArg(0), *x = n.tensorArg(1), *ix = n.tensorArg(7);
  PoolGeometry geo = geometryOf(n, x->type().shape, 2);
  Size P = planesOf(x->type());
  Node *zeros = e.fullOf(sizes({P}, {geo.H * geo.W}), 0.0, x->type().dtype);
  std::vector<Size> outs = sizes({P}, {geo.OH * geo.OW});
  Node *acc = e.call("aten.scatter_add.default", {zeros, int64_t(1), e.viewTo(ix, outs), e.viewTo(g, outs)});
  return {e.view(acc, x->type().shape, x->type().sym)};
}

Vals asStrided(Emitter &e, Node &n) {
  Node *x = n.tensorArg(0);
  if (n.symArg(2) || n.symArg(3))
    nodeError(n, "lower of as_strided with a run-time stride or storage offset is not supported yet: compile at one "
                 "size with --specialize SYMBOL=N (docs/dynamic-shapes.md)");
  if (x->type().rank() == 1) return {};
  Node *flat = e.viewTo(x, {product(sizesOf(x->type()))});
  SymArgs sym; // the size argument's run-time sizes (a batch of planes); strides are static
  if (const std::vector<std::string> *size = n.symArg(1)) sym.push_back({1, *size});
  return {e.call("aten.as_strided.default", {flat, n.intListArg(1), n.intListArg(2),
                                             n.isNoneArg(3) ? Arg{int64_t(0)} : Arg{n.intArg(3)}}, {}, sym)};
}

} // namespace aotc::rules
