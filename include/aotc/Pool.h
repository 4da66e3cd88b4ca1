//===- Pool.h - Geometry of 2-D pooling (max_pool2d, avg_pool2d) -*- C++ -*-===//
//
// Shared by the registry (lib/IR/ops/Pool.cpp, Resample.cpp) and the lower rules (lib/Decompose/LowerPool.cpp,
// LowerResample.cpp).
// Output sizes as ATen's pooling_output_shape (aten/src/ATen/native/Pool.h):
//   O = floor_or_ceil((I + 2p - d (k - 1) - 1) / s) + 1, and with ceil_mode the last window must
//   start inside the input or its left padding ((O - 1) s < I + p, else O - 1).
//===----------------------------------------------------------------------===//
#pragma once

#include "aotc/Types.h"

#include <string>
#include <vector>

namespace aotc {

struct PoolGeometry {
  int64_t planes = 1; ///< N * C (or C for an unbatched input).
  int64_t H = 0, W = 0, OH = 0, OW = 0, KH = 1, KW = 1;
  int64_t strideH = 1, strideW = 1, padH = 0, padW = 0, dilH = 1, dilW = 1;
  bool ceilMode = false;
};

struct PoolShapeResult {
  PoolGeometry geom;
  std::string error; ///< Empty on success (ATen's message otherwise).
};

/// Checks max_pool2d's arguments for input shape `in` ([N, C, H, W] or [C, H, W]).
PoolShapeResult maxPool2dShape(const Shape &in, const std::vector<int64_t> &kernel, const std::vector<int64_t> &stride,
                               const std::vector<int64_t> &padding, const std::vector<int64_t> &dilation,
                               bool ceilMode);

/// Checks avg_pool2d's arguments (dilation 1; the same rules and messages, "avg_pool2d: ...").
PoolShapeResult avgPool2dShape(const Shape &in, const std::vector<int64_t> &kernel, const std::vector<int64_t> &stride,
                               const std::vector<int64_t> &padding, bool ceilMode);

} // namespace aotc
