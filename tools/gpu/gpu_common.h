//===- gpu_common.h - What the GPU drivers share -----------------*- C++ -*-===//
//
// Header-only helpers of train_cuda.cpp and probe_cuda.cpp (tools/gpu).
//===----------------------------------------------------------------------===//
#pragma once

#include <cuda_runtime_api.h>

#include <cstdint>
#include <cstdio>

namespace aotc_gpu {

/// Deterministic input element k of input `input`, in [-1, 1): the high 24 bits of
/// k * 2654435761 + (input + 1) * 40503 (mod 2^32), scaled. tools/gpu/torch_side.py
/// computes the same values on the device.
inline float uniform(int64_t k, int input) {
  uint32_t h = (uint32_t)((uint64_t)k * 2654435761u + (uint64_t)(input + 1) * 40503u);
  return (float)((h >> 8) * (1.0 / 8388608.0) - 1.0);
}

/// True (after saying why on stdout) when no CUDA device can be used: the driver then
/// exits 77, which ctest and scripts/gpu-check.sh --rehearse report as "needs a GPU".
inline bool noCudaDevice(const char *prog) {
  int devices = 0;
  cudaError_t e = cudaGetDeviceCount(&devices);
  if (e == cudaSuccess && devices > 0) return false;
  std::printf("%s: no CUDA device (%s; skipped)\n", prog, e != cudaSuccess ? cudaGetErrorString(e) : "0 devices");
  return true;
}

} // namespace aotc_gpu
