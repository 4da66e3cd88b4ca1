//===- LowerResample.cpp - Rules: upsampling, average pooling, constant padding ===//
//
// The ops of lib/IR/ops/Resample.cpp are separable: along W, then along H, every output
// position reads a few taps (an input position and a weight, both depending on the output
// position only). A tap is a pair of 1-D tensors over the output positions, computed at run
// time from arange with the arithmetic of ATen's kernels (so the float rounding of the indices
// is PyTorch's: nearest in float, bilinear in the input's dtype):
//   forward  y = sum_k index_select(x, dim, idx_k) * w_k       (w_k broadcast along dim)
//   adjoint  dx = scatter_add(... scatter_add(zeros, dim, idx_k expanded, g * w_k) ...)
// constant_pad_nd: slices for the negative pads, then per padded dim a full(value) with the
// input placed by slice_scatter. Decompose: the .vec upsample forms become the .default ones
// (output size and scales as ATen's compute_output_size), _reshape_alias a view (or an
// as_strided when its strides are not the contiguous ones).
//===----------------------------------------------------------------------===//
#include "Rules.h"

#include "aotc/Pool.h"

#include <cmath>
#include <optional>

namespace aotc::rules {

using namespace rewrite;

AdaptiveWindows adaptiveWindows(Emitter &e, int64_t in, int64_t out) {
  AdaptiveWindows w;
  for (int64_t o = 0; o < out; ++o) w.kmax = std::max(w.kmax, ((o + 1) * in + out - 1) / out - o * in / out);
  Node *oi = e.mul(e.iota(out), in);
  auto floorDiv = [&](Node *num) { // num >= 0: the quotient is exact enough in f64 to truncate
    return e.toDtype(e.div(e.toDtype(num, DType::F64), (double)out), DType::I64);
  };
  w.start = floorDiv(oi);
  w.len = e.sub(floorDiv(e.call("aten.add.Scalar", {oi, in + out - 1})), w.start);
  return w;
}

namespace {

struct Tap {
  Node *idx;         ///< i64 [O]: the input position read by each output position
  Node *w = nullptr; ///< [O] in the compute dtype, or nullptr for weight 1
};

Node *clampI(Emitter &e, Node *x, std::optional<int64_t> lo, std::optional<int64_t> hi) {
  return e.call("aten.clamp.default", {x, lo ? Arg{*lo} : Arg{}, hi ? Arg{*hi} : Arg{}});
}

std::optional<double> optScale(const Node &n, size_t i) {
  if (n.isNoneArg(i)) return std::nullopt;
  return n.scalarArg(i);
}

/// nearest_idx: min(floorf(o * s), I - 1) in float.
std::vector<Tap> nearestTaps(Emitter &e, int64_t in, int64_t out, std::optional<double> scale) {
  float s = scale && *scale > 0 ? (float)(1.0 / *scale) : (float)in / (float)out;
  Node *src = e.mul(e.iota(out, DType::F32), (double)s);
  return {{clampI(e, e.toDtype(src, DType::I64), std::nullopt, in - 1)}};
}

/// compute_indices_weights_linear in dtype dt.
std::vector<Tap> linearTaps(Emitter &e, int64_t in, int64_t out, bool align, std::optional<double> scale, DType dt) {
  double s = align ? (out > 1 ? (double)(in - 1) / (double)(out - 1) : 0.0)
                   : (scale && *scale > 0 ? 1.0 / *scale : (double)in / (double)out);
  Node *o = e.iota(out, dt);
  Node *src = align ? e.mul(o, s)
                    : e.call("aten.clamp.default", {e.call("aten.sub.Scalar", {e.mul(e.call("aten.add.Scalar", {o, 0.5}), s), 0.5}),
                                                    0.0, Arg{}});
  Node *i0 = clampI(e, e.toDtype(src, DType::I64), std::nullopt, in - 1);
  Node *l1 = e.call("aten.clamp.default", {e.sub(src, e.toDtype(i0, dt)), 0.0, 1.0});
  Node *i1 = e.add(i0, e.toDtype(e.call("aten.lt.Scalar", {i0, in - 1}), DType::I64));
  Node *l0 = e.call("aten.rsub.Scalar", {l1, int64_t(1)});
  return {{i0, l0}, {i1, l1}};
}

/// Adaptive windows [floor(o I/O), ceil((o + 1) I/O)), weights 1/len on the window.
std::vector<Tap> adaptiveTaps(Emitter &e, int64_t in, int64_t out, DType dt) {
  AdaptiveWindows w = adaptiveWindows(e, in, out);
  Node *lenF = e.toDtype(w.len, dt);
  std::vector<Tap> taps;
  for (int64_t k = 0; k < w.kmax; ++k)
    taps.push_back({clampI(e, e.call("aten.add.Scalar", {w.start, k}), std::nullopt, in - 1),
                    e.div(e.toDtype(e.call("aten.gt.Scalar", {w.len, k}), dt), lenF)});
  return taps;
}

/// One dim of avg_pool2d: window o s - p + [0, k); `divide`: weights valid / extent, else valid.
std::vector<Tap> avgTaps(Emitter &e, int64_t in, int64_t out, int64_t k, int64_t s, int64_t p, bool countPad,
                         bool divide, DType dt) {
  Node *a = e.call("aten.sub.Scalar", {e.mul(e.iota(out, DType::I64), s), p});
  Node *extent = nullptr;
  if (divide) {
    Node *b = clampI(e, e.call("aten.add.Scalar", {a, k}), std::nullopt, in + p);
    extent = e.toDtype(countPad ? e.sub(b, a) : e.sub(clampI(e, b, std::nullopt, in), clampI(e, a, 0, std::nullopt)), dt);
  }
  std::vector<Tap> taps;
  for (int64_t j = 0; j < k; ++j) {
    Node *pos = e.call("aten.add.Scalar", {a, j});
    Node *valid = e.mul(e.toDtype(e.call("aten.ge.Scalar", {pos, int64_t(0)}), dt),
                        e.toDtype(e.call("aten.lt.Scalar", {pos, in}), dt));
    taps.push_back({clampI(e, pos, 0, in - 1), divide ? e.div(valid, extent) : valid});
  }
  return taps;
}

Shape dimShape(int64_t rank, int64_t dim, int64_t n) {
  Shape s(rank, 1);
  s[dim] = n;
  return s;
}

Node *resample(Emitter &e, Node *x, int64_t dim, const std::vector<Tap> &taps) {
  int64_t R = x->type().rank();
  Node *y = nullptr;
  for (const Tap &t : taps) {
    Node *r = e.call("aten.index_select.default", {x, dim, t.idx});
    if (t.w) r = e.mul(r, e.view(t.w, dimShape(R, dim, t.w->type().numel())));
    y = y ? e.add(y, r) : r;
  }
  return y;
}

Node *resampleAdjoint(Emitter &e, Node *g, int64_t dim, int64_t inSize, const std::vector<Tap> &taps) {
  const TensorType &gt = g->type();
  int64_t R = gt.rank(), O = gt.shape[dim];
  std::vector<Size> s = sizesOf(gt); // a run-time batch stays one (the resampled dim is static)
  s[dim] = inSize;
  Node *acc = e.fullOf(s, 0.0, gt.dtype);
  for (const Tap &t : taps) {
    Node *src = t.w ? e.mul(g, e.view(t.w, dimShape(R, dim, O))) : g;
    Node *idx = e.call("aten.expand.default", {e.view(t.idx, dimShape(R, dim, O)), gt.shape}, {},
                       {symArg(1, sizesOf(gt))});
    acc = e.call("aten.scatter_add.default", {acc, dim, idx, src});
  }
  return acc;
}

/// y = resample along W then H (th, tw), or the adjoint (along H then W) onto `in`.
Node *separable(Emitter &e, Node *x, const std::vector<Tap> &th, const std::vector<Tap> &tw, bool adjoint,
                const Shape &in = {}) {
  int64_t R = x->type().rank();
  if (!adjoint) return resample(e, resample(e, x, R - 1, tw), R - 2, th);
  return resampleAdjoint(e, resampleAdjoint(e, x, R - 2, in[R - 2], th), R - 1, in[R - 1], tw);
}

/// Upsample taps; output_size at arg 1; `next` = the argument after output_size (and
/// input_size): align_corners (bilinear), then scales_h, scales_w.
std::pair<std::vector<Tap>, std::vector<Tap>> upsampleTaps(Emitter &e, Node &n, bool bilinear, int64_t H, int64_t W,
                                                           size_t next, DType dt) {
  const std::vector<int64_t> &o = n.intListArg(1);
  if (bilinear) {
    bool ac = n.boolArg(next);
    return {linearTaps(e, H, o[0], ac, optScale(n, next + 1), dt), linearTaps(e, W, o[1], ac, optScale(n, next + 2), dt)};
  }
  return {nearestTaps(e, H, o[0], optScale(n, next)), nearestTaps(e, W, o[1], optScale(n, next + 1))};
}

Vals upsample(Emitter &e, Node &n, bool bilinear) {
  Node *x = n.tensorArg(0);
  const Shape &s = x->type().shape;
  auto [th, tw] = upsampleTaps(e, n, bilinear, s[2], s[3], 2, x->type().dtype);
  return {separable(e, x, th, tw, false)};
}

Vals upsampleBackward(Emitter &e, Node &n, bool bilinear) {
  Node *g = n.tensorArg(0);
  const std::vector<int64_t> &in = n.intListArg(2);
  auto [th, tw] = upsampleTaps(e, n, bilinear, in[2], in[3], 3, g->type().dtype);
  return {separable(e, g, th, tw, true, in)};
}

/// avg_pool2d taps; kernel_size at arg ka, then stride, padding, ceil_mode, count_include_pad,
/// divisor_override.
std::pair<std::vector<Tap>, std::vector<Tap>> avgPoolTaps(Emitter &e, Node &n, const Shape &in, size_t ka, DType dt) {
  PoolShapeResult r = avgPool2dShape(in, n.intListArg(ka), n.intListArg(ka + 1), n.intListArg(ka + 2), n.boolArg(ka + 3));
  if (!r.error.empty()) nodeError(n, r.error);
  const PoolGeometry &g = r.geom;
  bool countPad = n.boolArg(ka + 4), over = !n.isNoneArg(ka + 5);
  std::vector<Tap> th = avgTaps(e, g.H, g.OH, g.KH, g.strideH, g.padH, countPad, !over, dt);
  std::vector<Tap> tw = avgTaps(e, g.W, g.OW, g.KW, g.strideW, g.padW, countPad, !over, dt);
  if (over)
    for (Tap &t : tw) t.w = e.div(t.w, (double)n.intArg(ka + 5));
  return {th, tw};
}

} // namespace

Vals upsampleNearest2d(Emitter &e, Node &n) { return upsample(e, n, false); }
Vals upsampleBilinear2d(Emitter &e, Node &n) { return upsample(e, n, true); }
Vals upsampleNearest2dBackward(Emitter &e, Node &n) { return upsampleBackward(e, n, false); }
Vals upsampleBilinear2dBackward(Emitter &e, Node &n) { return upsampleBackward(e, n, true); }

Vals upsampleVec(Emitter &e, Node &n) {
  bool bilinear = n.target == "aten.upsample_bilinear2d.vec";
  size_t sf = bilinear ? 3 : 2;
  Node *x = n.tensorArg(0);
  const Shape &os = n.types[0].shape;
  std::vector<int64_t> size{os[2], os[3]};
  Arg sh, sw;
  if (!n.isNoneArg(sf)) {
    const auto &v = std::get<std::vector<double>>(n.args[sf]);
    sh = v[0], sw = v[1];
  }
  if (bilinear) return {e.call("aten.upsample_bilinear2d.default", {x, size, n.boolArg(2), sh, sw})};
  return {e.call("aten.upsample_nearest2d.default", {x, size, sh, sw})};
}

Vals avgPool2d(Emitter &e, Node &n) {
  Node *x = n.tensorArg(0);
  auto [th, tw] = avgPoolTaps(e, n, x->type().shape, 1, x->type().dtype);
  return {separable(e, x, th, tw, false)};
}

Vals avgPool2dBackward(Emitter &e, Node &n) {
  Node *g = n.tensorArg(0), *x = n.tensorArg(1);
  auto [th, tw] = avgPoolTaps(e, n, x->type().shape, 2, x->type().dtype);
  return {separable(e, g, th, tw, true, x->type().shape)};
}

Vals adaptiveAvgPool2d(Emitter &e, Node &n) {
  Node *x = n.tensorArg(0);
  const Shape &s = x->type().shape, &os = n.types[0].shape;
  size_t R = s.size();
  DType dt = x->type().dtype;
  return {separable(e, x, adaptiveTaps(e, s[R - 2], os[R - 2], dt), adaptiveTaps(e, s[R - 1], os[R - 1], dt), false)};
}

Vals adaptiveAvgPool2dBackward(Emitter &e, Node &n) {
  Node *g = n.tensorArg(0), *x = n.tensorArg(1);
  const Shape &s = x->type().shape, &gs = g->type().shape;
  size_t R = s.size();
  DType dt = x->type().dtype;
  return {separable(e, g, adaptiveTaps(e, s[R - 2], gs[R - 2], dt), adaptiveTaps(e, s[R - 1], gs[R - 1], dt), true, s)};
}

Vals constantPadNd(Emitter &e, Node &n) {
  Node *x = n.tensorArg(0);
  const std::vector<int64_t> &pad = n.intListArg(1);
  DType dt = x->type().dtype;
  int64_t R = x->type().rank();
  Node *y = x;
  // Over run-time sizes the pads stay constants (a padded or cropped dim may be a run-time size:
  // its ends are expressions).
  for (size_t i = 0; i < pad.size() / 2; ++i) { // crops first
    int64_t dim = R - 1 - (int64_t)i, lo = std::max<int64_t>(-pad[2 * i], 0), hi = std::max<int64_t>(-pad[2 * i + 1], 0);
    if (!lo && !hi) continue;
    Size end = sizeOf(y->type(), (size_t)dim) - hi;
    y = e.call("aten.slice.Tensor", {y, dim, lo, end.v, int64_t(1)}, {}, {symArg(3, {end})});
  }
  for (size_t i = 0; i < pad.size() / 2; ++i) {
    int64_t dim = R - 1 - (int64_t)i, lo = std::max<int64_t>(pad[2 * i], 0), hi = std::max<int64_t>(pad[2 * i + 1], 0);
    if (!lo && !hi) continue;
    std::vector<Size> s = sizesOf(y->type());
    Size size = s[dim];
    s[dim] = size + (lo + hi);
    Node *full = e.fullOf(s, n.args[2], dt);
    Size end = size + lo;
    y = e.call("aten.slice_scatter.default", {full, y, dim, lo, end.v, int64_t(1)}, {}, {symArg(4, {end})});
  }
  if (y == x) y = e.call("aten.clone.default", {x});
  return {y};
}

Vals reshapeAlias(Emitter &e, Node &n) {
  Node *x = n.tensorArg(0);
  const std::vector<int64_t> &size = n.intListArg(1), &stride = n.intListArg(2);
  bool contiguous = true; // an empty tensor's strides do not matter
  std::vector<int64_t> cs = contiguousStrides(size);
  for (size_t i = 0; i < size.size() && numelOf(size) != 0; ++i) contiguous &= size[i] == 1 || stride[i] == cs[i];
  if (contiguous && numelOf(size) == x->type().numel()) return {e.view(x, size)};
  return {e.call("aten.as_strided.default", {x, size, stride, int64_t(0)})};
}

} // namespace aotc::rules
