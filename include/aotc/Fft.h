//===- Fft.h - The normalization of a discrete Fourier transform ---*- C++ -*-===//
//
// One home for torch's fft_norm_mode factor, shared by the registry's float64 references
// (lib/IR/ops/Fft.cpp) and the codegen's aotc_fft descriptors (lib/Codegen/Fusion.cpp).
//===----------------------------------------------------------------------===//
#pragma once

#include "aotc/Types.h"

#include <cstdint>
#include <vector>

namespace aotc {

/// torch's normalization factor of a transform over `dims` of a signal of shape `signal`
/// (c2r: the output's): mode 0 none, 1 1/sqrt(N), 2 1/N, N the product of the transformed sizes.
double fftScale(int64_t mode, const Shape &signal, const std::vector<int64_t> &dims);

} // namespace aotc
