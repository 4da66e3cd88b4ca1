//===- DecomposeGridSample.cpp - grid_sampler_2d as gathers with weights -------------===//
//
// Decompose rule (the table is in Decompose.cpp) for lib/IR/ops/GridSample.cpp. With x, y the
// grid's two channels [N, Ho, Wo]: source coordinates by the unnormalization, reflection
// (|v - lo| folded by fmod and the parity of floor(v / span)) and clipping of the padding mode;
// then per tap (the four neighbours floor(c) + {0, 1} for bilinear, nearbyint(c) for nearest)
//   value = gather(input viewed [N, C, H·W], 2, clamped flat index) · weight · in_bounds.
// The input's gradient is the gathers' (a scatter_add at the taps); the grid's flows through the
// bilinear weights (floor, the reflection's parity and the bounds are constants, and the clip's
// gradient is zero on and beyond the border), as torch's grid_sampler_2d_backward.
//===----------------------------------------------------------------------===//
#include "Rules.h"

#include "aotc/OpRegistry.h"

namespace aotc::rules {
namespace {

using rewrite::Emitter;

Node *call(Emitter &e, const char *t, std::vector<Arg> a) { return e.call(t, a); }

/// reflect_coordinates: v reflected about lo and hi (given doubled, as ATen).
Node *reflect(Emitter &e, Node *v, double twiceLow, double twiceHigh) {
  if (twiceLow == twiceHigh) return e.mul(v, 0.0);
  double mn = twiceLow / 2, span = (twiceHigh - twiceLow) / 2;
  Node *in = call(e, "aten.abs.default", {e.sub(v, mn)});
  Node *extra = call(e, "aten.fmod.Scalar", {in, span});
  Node *flips = call(e, "aten.floor.default", {e.div(in, span)});
  Node *even = call(e, "aten.eq.Scalar", {call(e, "aten.remainder.Scalar", {flips, 2.0}), int64_t(0)});
  return call(e, "aten.where.self", {even, e.add(extra, mn), e.add(call(e, "aten.rsub.Scalar", {extra, span}), mn)});
}

Node *source(Emitter &e, Node *v, int64_t size, int64_t pad, bool align) {
  double s = (double)size;
  Node *c = align ? e.mul(e.add(v, 1.0), (s - 1) / 2) : e.div(e.sub(e.mul(e.add(v, 1.0), s), 1.0), 2.0);
  if (pad == 2) c = align ? reflect(e, c, 0, 2 * (s - 1)) : reflect(e, c, -1, 2 * s - 1);
  if (pad >= 1) c = e.call("aten.clamp.default", {c, 0.0, s - 1});
  return c;
}

} // namespace

Vals gridSampler2d(Emitter &e, Node &n) {
  Node *x = n.tensorArg(0), *g = n.tensorArg(1);
  const Shape &xs = x->type().shape, &gs = g->type().shape;
  int64_t N = xs[0], C = xs[1], H = xs[2], W = xs[3], Ho = gs[1], Wo = gs[2];
  int64_t mode = n.intArg(2), pad = n.intArg(3);
  bool align = n.boolArg(4);
  DType dt = x->type().dtype;
  Node *ix = source(e, call(e, "aten.select.int", {g, int64_t(3), int64_t(0)}), W, pad, align);
  Node *iy = source(e, call(e, "aten.select.int", {g, int64_t(3), int64_t(1)}), H, pad, align);
  Node *flatIn = e.view(x, {N, C, H * W});
  // One tap: input at (ty, tx) (float pixel coordinates, integral) times w, 0 outside the image.
  auto tap = [&](Node *tx, Node *ty, Node *w) {
    // A NaN coordinate reads nothing (ATen's safe_downgrade_to_int_range maps it to -100).
    tx = e.call("aten.where.self", {call(e, "aten.isnan.default", {tx}), e.scalarTensor(-100.0, dt), tx});
    ty = e.call("aten.where.self", {call(e, "aten.isnan.default", {ty}), e.scalarTensor(-100.0, dt), ty});
    Node *inside = call(e, "aten.logical_and.default",
                        {call(e, "aten.logical_and.default", {call(e, "aten.ge.Scalar", {tx, 0.0}), call(e, "aten.le.Scalar", {tx, (double)(W - 1)})}),
                         call(e, "aten.logical_and.default", {call(e, "aten.ge.Scalar", {ty, 0.0}), call(e, "aten.le.Scalar", {ty, (double)(H - 1)})})});
    Node *cx = e.toDtype(e.call("aten.clamp.default", {tx, 0.0, (double)(W - 1)}), DType::I64);
    Node *cy = e.toDtype(e.call("aten.clamp.default", {ty, 0.0, (double)(H - 1)}), DType::I64);
    Node *flat = e.add(e.mul(cy, W), cx); // [N, Ho, Wo]
    Node *idx = e.call("aten.expand.default", {e.view(flat, {N, 1, Ho * Wo}), std::vector<int64_t>{N, C, Ho * Wo}});
    Node *v = e.view(call(e, "aten.gather.default", {flatIn, int64_t(2), idx}), {N, C, Ho, Wo});
    // The tap's value is 0 outside, its weight kept (a NaN weight makes the output NaN, as ATen's
    // vectorized kernel: masked value times weight).
    v = e.call("aten.where.self", {e.view(inside, {N, 1, Ho, Wo}), v, e.scalarTensor(0.0, dt)});
    return w ? e.mul(v, e.view(w, {N, 1, Ho, Wo})) : v;
  };
  if (mode == 1) return {tap(call(e, "aten.round.default", {ix}), call(e, "aten.round.default", {iy}), nullptr)};
  Node *x0 = call(e, "aten.floor.default", {ix}), *y0 = call(e, "aten.floor.default", {iy});
  Node *x1 = e.add(x0, 1.0), *y1 = e.add(y0, 1.0);
  Node *wx1 = e.sub(ix, x0), *wy1 = e.sub(iy, y0);
  Node *wx0 = call(e, "aten.rsub.Scalar", {wx1, 1.0}), *wy0 = call(e, "aten.rsub.Scalar", {wy1, 1.0});
  Node *y = tap(x0, y0, e.mul(wx0, wy0));
  y = e.add(y, tap(x1, y0, e.mul(wx1, wy0)));
  y = e.add(y, tap(x0, y1, e.mul(wx0, wy1)));
  return {e.add(y, tap(x1, y1, e.mul(wx1, wy1)))};
}

} // namespace aotc::rules
