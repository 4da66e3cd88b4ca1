//===- GridSample.cpp - grid_sampler_2d --------------------------------------------===//
//
// grid_sampler_2d(input [N, C, H, W], grid [N, Ho, Wo, 2], interpolation_mode, padding_mode,
// align_corners) -> [N, C, Ho, Wo] (GridSampler.cpp / GridSampler.h): grid (x, y) in [-1, 1]
// unnormalized to pixels, ((v + 1) / 2)(size - 1) with align_corners, else ((v + 1) size - 1) / 2;
// padding 0 zeros (taps outside read 0), 1 border (coordinates clipped to [0, size - 1]),
// 2 reflection (reflected about the borders, at pixel centres with align_corners, else at the
// edges, then clipped); interpolation 0 bilinear (the four neighbours, weights from the
// fractional part), 1 nearest (nearbyint: ties to even). Bicubic (2) is refused: not implemented
// yet. A composite (lib/Decompose/DecomposeGridSample.cpp); the reference below is the same
// arithmetic in float64.
//===----------------------------------------------------------------------===//
#include "Ops.h"

namespace aotc {
namespace ops {
namespace {

using Types = std::vector<TensorType>;

double gridUnnormalize(double v, int64_t size, bool align) {
  return align ? (v + 1) / 2 * (double)(size - 1) : ((v + 1) * (double)size - 1) / 2;
}

double gridReflect(double in, double twiceLow, double twiceHigh) {
  if (twiceLow == twiceHigh) return 0;
  double mn = twiceLow / 2, span = (twiceHigh - twiceLow) / 2;
  in = std::fabs(in - mn);
  double extra = std::fmod(in, span);
  int64_t flips = (int64_t)std::floor(in / span);
  return flips % 2 == 0 ? extra + mn : span - extra + mn;
}

/// The source coordinate of grid value v along a dim of `size` for padding mode `pad`.
double gridSource(double v, int64_t size, int64_t pad, bool align) {
  double c = gridUnnormalize(v, size, align);
  if (pad == 2) c = align ? gridReflect(c, 0, 2 * (double)(size - 1)) : gridReflect(c, -1, 2 * (double)size - 1);
  if (pad >= 1) c = std::min((double)(size - 1), std::max(c, 0.0));
  return c;
}

} // namespace

void registerGridSampleOps(OpRegistry &r) {
  OpDef &d = r.add("grid_sampler_2d(Tensor input, Tensor grid, int interpolation_mode, int padding_mode, "
                   "bool align_corners) -> Tensor",
                   OpCategory::Composite);
  d.infer = [](const Node &n) -> Types {
    TensorType x = argType(n, 0), g = argType(n, 1);
    requireFloating(n, x.dtype, "grid_sampler_2d");
    if (g.dtype != x.dtype)
      nodeError(n, "grid_sampler(): expected input and grid to have same dtype, but input has " +
                       std::string(dtypeTorchName(x.dtype)) + " and grid has " + dtypeTorchName(g.dtype));
    if (x.rank() != 4 || g.rank() != 4)
      nodeError(n, "grid_sampler(): expected 4D input and grid with same number of dimensions, but got input with "
                   "sizes " + shapeStr(x.shape) + " and grid with sizes " + shapeStr(g.shape));
    if (x.shape[0] != g.shape[0])
      nodeError(n, "grid_sampler(): expected grid and input to have same batch size, but got input with sizes " +
                       shapeStr(x.shape) + " and grid with sizes " + shapeStr(g.shape));
    if (g.shape[3] != 2)
      nodeError(n, "grid_sampler(): expected grid to have size 2 in last dimension, but got grid with sizes " +
                       shapeStr(g.shape));
    if (x.shape[2] == 0 || x.shape[3] == 0)
      nodeError(n, "grid_sampler(): expected input to have non-empty spatial dimensions, but input has sizes " +
                       shapeStr(x.shape));
    int64_t mode = n.intArg(2), pad = n.intArg(3);
    if (mode == 2) nodeError(n, "grid_sampler_2d: bicubic interpolation is not supported yet (bilinear and nearest are)");
    if (mode < 0 || mode > 2) nodeError(n, "grid_sampler_2d: interpolation_mode must be 0, 1 or 2, got " + std::to_string(mode));
    if (pad < 0 || pad > 2) nodeError(n, "grid_sampler_2d: padding_mode must be 0, 1 or 2, got " + std::to_string(pad));
    return {{x.dtype, {x.shape[0], x.shape[1], g.shape[1], g.shape[2]}}};
  };
  setEval(d, [](const Node &n, const RefArgs &a) {
    const RefTensor &x = *a.at(0), &g = *a.at(1);
    int64_t N = x.shape[0], C = x.shape[1], H = x.shape[2], W = x.shape[3], Ho = g.shape[1], Wo = g.shape[2];
    int64_t mode = n.intArg(2), pad = n.intArg(3);
    bool align = n.boolArg(4);
    RefTensor out(n.types[0].dtype, n.types[0].shape, 0.0);
    auto toInt = [](double v) { return std::isfinite(v) ? (int64_t)v : int64_t(-100); }; // as ATen
    auto at = [&](int64_t b, int64_t c, int64_t y, int64_t xx) -> double {
      if (y < 0 || y >= H || xx < 0 || xx >= W) return 0.0;
      return x.data[((b * C + c) * H + y) * W + xx];
    };
    for (int64_t b = 0; b < N; ++b)
      for (int64_t i = 0; i < Ho; ++i)
        for (int64_t j = 0; j < Wo; ++j) {
          double ix = gridSource(g.data[((b * Ho + i) * Wo + j) * 2], W, pad, align);
          double iy = gridSource(g.data[((b * Ho + i) * Wo + j) * 2 + 1], H, pad, align);
          for (int64_t c = 0; c < C; ++c) {
            double v;
            if (mode == 1) {
              v = at(b, c, toInt(std::nearbyint(iy)), toInt(std::nearbyint(ix)));
            } else {
              // Values outside read 0, the weights are kept: NaN coordinates give NaN (ATen's CPU kernel).
              double x0 = std::floor(ix), y0 = std::floor(iy), wx = ix - x0, wy = iy - y0;
              int64_t xi = toInt(x0), yi = toInt(y0);
              v = at(b, c, yi, xi) * (1 - wx) * (1 - wy) + at(b, c, yi, xi + 1) * wx * (1 - wy) +
                  at(b, c, yi + 1, xi) * (1 - wx) * wy + at(b, c, yi + 1, xi + 1) * wx * wy;
            }
            out.data[((b * C + c) * Ho + i) * Wo + j] = v;
          }
        }
    return out;
  });
}

} // namespace ops
} // namespace aotc
