//===- Conv.h - Geometry of a convolution (aten.convolution) ---*- C++ -*-===//
//
// One description of a convolution for everything that handles one: the registry's shape
// functions and float64 references (lib/IR/ops/Conv.cpp), the lower rules that turn
// transposed convolutions and convolution_backward into the three regular primitives
// (lib/Decompose/LowerConv.cpp), and codegen's library calls (aotc_conv_desc, aotc/kernels.h).
//
// A *regular* convolution, 1-D or 2-D (a 1-D one is 2-D with H = KH = OH = 1):
//   x [N, C, H, W], w [K, C/groups, KH, KW], y [N, K, OH, OW],
//   y[n, k, oh, ow] = sum_{c in k's group, i, j} x[n, c, oh*sH - pH + i*dH, ow*sW - pW + j*dW]
//                                                * w[k, c - group offset, i, j]
//   OH = (H + 2 pH - dH (KH - 1) - 1) / sH + 1   (floor; >= 1 required).
// A transposed convolution with weight [Cin, Cout/groups, ...] from x [N, Cin, ...] to
// y [N, Cout, ...] is the input gradient of the regular convolution from y's shape to x's
// shape with the same weight (K = Cin, C = Cout); output_padding only makes y larger.
// The three primitives: forward (y from x, w), input gradient (x-shaped from y-shaped, w)
// and weight gradient (w-shaped from y-shaped and x).
//===----------------------------------------------------------------------===//
#pragma once

#include "aotc/Types.h"

#include <array>
#include <cstdint>
#include <string>
#include <vector>

namespace aotc {

/// Geometry of a regular 2-D convolution (see the file comment). All sizes are elements.
struct ConvGeometry {
  int64_t N = 0, C = 0, K = 0, groups = 1;
  int64_t H = 1, W = 1, OH = 1, OW = 1, KH = 1, KW = 1;
  int64_t strideH = 1, strideW = 1, padH = 0, padW = 0, dilH = 1, dilW = 1;
  int spatialRank = 2; ///< 1 or 2: the rank of the tensors' spatial part (shapes below).

  Shape inputShape() const;  ///< [N, C, H, W] (or [N, C, W])
  Shape weightShape() const; ///< [K, C/groups, KH, KW] (or [K, C/groups, KW])
  Shape outputShape() const; ///< [N, K, OH, OW] (or [N, K, OW])
};

/// The attributes of aten.convolution (and convolution_backward) after the checks.
struct ConvParams {
  std::vector<int64_t> stride, padding, dilation, outputPadding; ///< spatialRank entries each
  bool transposed = false;
  int64_t groups = 1;
};

/// Checks input/weight ranks, channel counts, groups and the int lists against PyTorch's rules
/// (aten/src/ATen/native/Convolution.cpp: check_shape_forward, conv_output_size,
/// conv_input_size) and returns the output shape of aten.convolution, or an error message
/// (empty `error` on success). Lists of one element are expanded to the spatial rank, as
/// torch's expand_param_if_needed.
struct ConvShapeResult {
  Shape output;
  ConvParams params;
  std::string error;
};
ConvShapeResult convolutionShape(const Shape &input, const Shape &weight, const std::vector<int64_t> &stride,
                                 const std::vector<int64_t> &padding, const std::vector<int64_t> &dilation,
                                 bool transposed, const std::vector<int64_t> &outputPadding, int64_t groups);

/// The regular convolution that aten.convolution(input, weight, params) is (transposed: the one
/// whose input gradient it is; `output` is the transposed op's output shape).
ConvGeometry regularGeometry(const Shape &input, const Shape &weight, const Shape &output, const ConvParams &p);

} // namespace aotc
