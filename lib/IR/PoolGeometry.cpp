//===- PoolGeometry.cpp - max_pool2d / avg_pool2d shapes (include/aotc/Pool.h) ===//
//
// The checks of max_pool2d_with_indices and avg_pool2d (aten/src/ATen/native/DilatedMaxPool2d.cpp,
// AveragePool2d.cpp and pool2d_shape_check in Pool.h), with ATen's messages.
//===----------------------------------------------------------------------===//
#include "aotc/Pool.h"

namespace aotc {

namespace {

bool pair(const char *op, const char *what, const std::vector<int64_t> &v, int64_t dflt, bool allowEmpty, int64_t &a, int64_t &b,
          std::string &err) {
  if (v.empty() && allowEmpty) {
    a = b = dflt;
    return true;
  }
  if (v.size() == 1) {
    a = b = v[0];
    return true;
  }
  if (v.size() == 2) {
    a = v[0], b = v[1];
    return true;
  }
  err = std::string(op) + ": " + what + " must either be a single int, or a tuple of two ints";
  return false;
}

int64_t outputSize(int64_t in, int64_t k, int64_t p, int64_t s, int64_t d, bool ceil) {
  int64_t num = in + 2 * p - d * (k - 1) - 1 + (ceil ? s - 1 : 0);
  int64_t o = (num >= 0 ? num / s : -((-num + s - 1) / s)) + 1;
  if (ceil && (o - 1) * s >= in + p) --o;
  return o;
}

} // namespace

static PoolShapeResult pool2dShape(const char *op, const Shape &in, const std::vector<int64_t> &kernel,
                                   const std::vector<int64_t> &stride, const std::vector<int64_t> &padding,
                                   const std::vector<int64_t> &dilation, bool ceilMode) {
  PoolShapeResult r;
  PoolGeometry &g = r.geom;
  std::string &err = r.error;
  if (in.size() != 3 && in.size() != 4) {
    err = "non-empty 3D or 4D (batch mode) tensor expected for input, got " + shapeStr(in);
    return r;
  }
  if (!pair(op, "kernel_size", kernel, 0, false, g.KH, g.KW, err)) return r;
  if (!pair(op, "stride", stride, 0, true, g.strideH, g.strideW, err)) return r;
  if (stride.empty()) g.strideH = g.KH, g.strideW = g.KW;
  if (!pair(op, "padding", padding, 0, false, g.padH, g.padW, err)) return r;
  if (!pair(op, "dilation", dilation, 1, false, g.dilH, g.dilW, err)) return r;
  g.ceilMode = ceilMode;
  if (g.KH <= 0 || g.KW <= 0) {
    err = "kernel size should be greater than zero, but got kH: " + std::to_string(g.KH) + " kW: " + std::to_string(g.KW);
    return r;
  }
  if (g.strideH <= 0 || g.strideW <= 0) {
    err = "stride should be greater than zero, but got dH: " + std::to_string(g.strideH) + " dW: " +
          std::to_string(g.strideW);
    return r;
  }
  if (g.dilH <= 0 || g.dilW <= 0) {
    err = "dilation should be greater than zero, but got dilationH: " + std::to_string(g.dilH) +
          " dilationW: " + std::to_string(g.dilW);
    return r;
  }
  if (g.padH < 0 || g.padW < 0 || g.padH > g.KH / 2 || g.padW > g.KW / 2) {
    err = "pad should be at most half of effective kernel size, but got pad=" + std::to_string(g.padH) +
          ", kernel_size=" + std::to_string(g.KH) + " and dilation=" + std::to_string(g.dilH);
    return r;
  }
  size_t rk = in.size();
  g.H = in[rk - 2];
  g.W = in[rk - 1];
  g.planes = 1;
  for (size_t i = 0; i + 2 < rk; ++i) g.planes *= in[i];
  if (in[rk - 3] == 0 || g.H == 0 || g.W == 0) {
    err = "Expected input's non-batch dimensions to have positive length, but input has a shape of " + shapeStr(in);
    return r;
  }
  g.OH = outputSize(g.H, g.KH, g.padH, g.strideH, g.dilH, ceilMode);
  g.OW = outputSize(g.W, g.KW, g.padW, g.strideW, g.dilW, ceilMode);
  if (g.OH < 1 || g.OW < 1) {
    err = "Given input size: (" + std::to_string(in[rk - 3]) + "x" + std::to_string(g.H) + "x" + std::to_string(g.W) +
          "). Calculated output size: (" + std::to_string(in[rk - 3]) + "x" + std::to_string(g.OH) + "x" +
          std::to_string(g.OW) + "). Output size is too small";
    return r;
  }
  return r;
}

PoolShapeResult maxPool2dShape(const Shape &in, const std::vector<int64_t> &kernel, const std::vector<int64_t> &stride,
                               const std::vector<int64_t> &padding, const std::vector<int64_t> &dilation,
                               bool ceilMode) {
  return pool2dShape("max_pool2d", in, kernel, stride, padding, dilation, ceilMode);
}

PoolShapeResult avgPool2dShape(const Shape &in, const std::vector<int64_t> &kernel, const std::vector<int64_t> &stride,
                               const std::vector<int64_t> &padding, bool ceilMode) {
  return pool2dShape("avg_pool2d", in, kernel, stride, padding, {1}, ceilMode);
}

} // namespace aotc
