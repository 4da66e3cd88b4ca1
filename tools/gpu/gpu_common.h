//===- gpu_common.h - What the GPU drivers share -----------------*- C++ -*-===//
//
// Header-only helpers of train_cuda.cpp and probe_cuda.cpp (tools/gpu).
//===----------------------------------------------------------------------===//
#pragma once

#include <cuda_runtime_api.h>

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <vector>

namespace aotc_gpu {

/// Exits 2 with "<tool>: <what>: <CUDA error>" on a CUDA failure (tool: the driver's name).
inline const char *tool = "aotc gpu driver";
inline void ck(cudaError_t e, const char *what) {
  if (e == cudaSuccess) return;
  std::fprintf(stderr, "%s: %s: %s\n", tool, what, cudaGetErrorString(e));
  std::exit(2);
}

/// Median CUDA-event time, in milliseconds, of f() on stream s over `iters` calls after
/// `warmup` untimed ones (each call timed alone: record, f, record, synchronize).
template <class F> float medianMs(cudaStream_t s, int warmup, int iters, F &&f) {
  cudaEvent_t a, b;
  ck(cudaEventCreate(&a), "event");
  ck(cudaEventCreate(&b), "event");
  for (int k = 0; k < warmup; ++k) f();
  std::vector<float> ms;
  for (int k = 0; k < iters; ++k) {
    ck(cudaEventRecord(a, s), "record");
    f();
    ck(cudaEventRecord(b, s), "record");
    ck(cudaEventSynchronize(b), "sync");
    float t = 0;
    ck(cudaEventElapsedTime(&t, a, b), "elapsed");
    ms.push_back(t);
  }
  cudaEventDestroy(a);
  cudaEventDestroy(b);
  std::sort(ms.begin(), ms.end());
  return ms[ms.size() / 2];
}

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
