//===- probe_cuda.cpp - Bandwidth probe: one forward-only CUDA program --------===//
//
// Built per probe with -DAOTC_GPU_HEADER / -DAOTC_GPU_PROGRAM (a program compiled
// with every input frozen: forward only). Inputs are aotc_gpu::uniform (gpu_common.h) per
// input (tools/gpu/torch_side.py rebuilds them on the device to check the output).
//
//   probe_cuda ITERS ROWS_OUT
//     median CUDA-event time of the forward over ITERS launches (after 3 warm-up)
//     and of a 1 GiB device-to-device cudaMemcpyAsync in the same process; bytes =
//     every input + every output once; writes output rows 0, 1, R/2 and R-1 (f32,
//     raw) to ROWS_OUT and prints one JSON line
//     {"probe", "ms", "bytes", "gbps", "copy_ms", "copy_gbps", "fraction_of_copy"}.
// Exit 77 without a CUDA device, 2 on errors.
//===----------------------------------------------------------------------===//
#include AOTC_GPU_HEADER

#include "aotc/cuda.h"
#include "gpu_common.h"

#include <cuda_runtime_api.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

namespace {

const aotc_cuda_program &kProg = AOTC_GPU_PROGRAM;
using aotc_gpu::ck;

} // namespace

int main(int argc, char **argv) {
  if (argc != 3) {
    std::fprintf(stderr, "usage: %s ITERS ROWS_OUT\n", argv[0]);
    return 2;
  }
  aotc_gpu::tool = "probe_cuda";
  if (aotc_gpu::noCudaDevice("probe_cuda")) return 77;
  const aotc_program &p = kProg.base;
  int iters = std::max(1, std::atoi(argv[1]));
  cudaStream_t s;
  ck(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking), "stream");
  aotc_cuda_exec exec;
  if (aotc_cuda_exec_create(&exec, s, 0) != 0) {
    std::fprintf(stderr, "probe_cuda: %s\n", aotc_cuda_last_error());
    return 2;
  }
  std::vector<void *> in, out;
  int64_t bytes = 0;
  for (int i = 0; i < p.num_inputs; ++i) {
    std::vector<float> h(p.inputs[i].numel);
    for (int64_t k = 0; k < (int64_t)h.size(); ++k) h[k] = aotc_gpu::uniform(k, i);
    void *d = nullptr;
    ck(cudaMalloc(&d, p.inputs[i].bytes), "cudaMalloc");
    ck(cudaMemcpy(d, h.data(), p.inputs[i].bytes, cudaMemcpyHostToDevice), "upload");
    in.push_back(d);
    bytes += p.inputs[i].bytes;
  }
  for (int i = 0; i < p.num_outputs; ++i) {
    void *d = nullptr;
    ck(cudaMalloc(&d, p.outputs[i].bytes), "cudaMalloc");
    out.push_back(d);
    bytes += p.outputs[i].bytes;
  }
  void *saved = nullptr, *scratch = nullptr;
  ck(cudaMalloc(&saved, std::max<int64_t>(256, p.saved_bytes)), "cudaMalloc");
  ck(cudaMalloc(&scratch, std::max<int64_t>(256, p.scratch_bytes)), "cudaMalloc");
  ck(cudaDeviceSynchronize(), "uploads"); // legacy-stream copies vs the non-blocking stream
  aotc_context *ctx = p.context_create();
  int rc = ctx ? 0 : -1;
  float ms = aotc_gpu::medianMs(s, 3, iters, [&] { rc |= kProg.forward(ctx, in.data(), out.data(), saved, scratch, &exec); });
  if (rc != 0 || aotc_cuda_check(&exec) != 0) {
    std::fprintf(stderr, "probe_cuda: forward failed: %s\n", aotc_cuda_last_error());
    return 2;
  }
  const size_t gib = size_t(1) << 30;
  void *src = nullptr, *dst = nullptr;
  ck(cudaMalloc(&src, gib), "cudaMalloc");
  ck(cudaMalloc(&dst, gib), "cudaMalloc");
  ck(cudaMemset(src, 1, gib), "memset");
  ck(cudaDeviceSynchronize(), "memset");
  float copyMs = aotc_gpu::medianMs(s, 3, iters, [&] { ck(cudaMemcpyAsync(dst, src, gib, cudaMemcpyDeviceToDevice, s), "copy"); });

  const aotc_tensor_desc &o = p.outputs[0];
  int64_t rows = o.rank >= 1 ? o.shape[0] : 1, cols = o.numel / std::max<int64_t>(rows, 1);
  std::vector<float> sample;
  for (int64_t r : {int64_t(0), int64_t(1), rows / 2, rows - 1}) {
    std::vector<float> row(cols);
    ck(cudaMemcpy(row.data(), (const float *)out[0] + r * cols, cols * 4, cudaMemcpyDeviceToHost), "download");
    sample.insert(sample.end(), row.begin(), row.end());
  }
  FILE *f = std::fopen(argv[2], "wb");
  if (!f || std::fwrite(sample.data(), 4, sample.size(), f) != sample.size()) {
    std::fprintf(stderr, "probe_cuda: cannot write %s\n", argv[2]);
    return 2;
  }
  std::fclose(f);
  double gbps = bytes / (ms * 1e-3) / 1e9, copyGbps = 2.0 * gib / (copyMs * 1e-3) / 1e9;
  std::printf("{\"probe\": \"%s\", \"ms\": %.4f, \"bytes\": %lld, \"gbps\": %.1f, \"copy_ms\": %.4f, "
              "\"copy_gbps\": %.1f, \"fraction_of_copy\": %.3f}\n",
              p.name, ms, (long long)bytes, gbps, copyMs, copyGbps, gbps / copyGbps);
  aotc_cuda_exec_destroy(&exec);
  p.context_destroy(ctx);
  return 0;
}
