//===- device_model.h - One compiled program's buffers on a GPU --*- C++ -*-===//
//
// DeviceModel: the device buffers of one --target=cuda program (inputs, outputs, cotangents,
// gradients, saved, scratch), its ABI context and a CUDA stream; step() enqueues forward,
// backward and SGD. Shared by tools/gpu/train_cuda.cpp (one program, linked in) and
// tools/gpu/conformance_cuda.cpp (many programs in one binary). Errors exit 2 with
// "<aotc_gpu::tool>: <what>" (a driver, not a library).
//===----------------------------------------------------------------------===//
#pragma once

#include "aotc/cuda.h"
#include "aotc/runtime.h"
#include "aotc/safetensors.h"
#include "gpu_common.h"

#include <cuda_runtime_api.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

namespace aotc_gpu {

using aotc::rt::SafetensorsFile;
using aotc::rt::Tensor;

[[noreturn]] inline void die(const std::string &what) {
  std::fprintf(stderr, "%s: %s\n", tool, what.c_str());
  std::exit(2);
}

/// Exits 2 naming `what` and the error when an entry point or runtime call of program `base`
/// returned rc != 0.
inline void ckRc(const aotc_program &base, int rc, const char *what) {
  if (rc != 0) {
    const char *msg = rc > 0 && rc <= base.num_errors ? base.errors[rc - 1]
                      : rc == AOTC_ERROR_CONTEXT ? "AOTC_ERROR_CONTEXT: no context or another program's"
                                                 : aotc_cuda_last_error();
    die(std::string(what) + " returned " + std::to_string(rc) + ": " + msg);
  }
}


inline void *deviceAlloc(int64_t bytes) {
  void *p = nullptr;
  ck(cudaMalloc(&p, (size_t)std::max<int64_t>(256, (bytes + 255) / 256 * 256)), "cudaMalloc");
  ck(cudaMemset(p, 0, (size_t)std::max<int64_t>(256, bytes)), "cudaMemset");
  return p; // cudaMalloc returns 256-byte aligned pointers (AOTC_CUDA_ALIGNMENT)
}

struct DeviceModel {
  const aotc_cuda_program &prog;
  const aotc_program &base; ///< prog.base
  aotc_cuda_exec exec{};
  /// The object's ABI context (abi.h), made once per model.
  aotc_context *ctx = nullptr;
  cudaStream_t stream = nullptr;
  std::vector<void *> in, out, tangents, grads;
  void *saved = nullptr, *scratch = nullptr;
  std::vector<int> paramGrads; ///< grads[j] of parameters (SGD updates their inputs)

  /// weights/golden NULL: deterministic random floating inputs, zero integer inputs.
  /// runInputs (`run`): every input and tangent from that file, as `aotc run` reads them.
  DeviceModel(const aotc_cuda_program &program, const SafetensorsFile *weights, const SafetensorsFile *golden,
              const SafetensorsFile *runInputs = nullptr)
      : prog(program), base(program.base) {
    ctx = base.context_create();
    ck(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking), "cudaStreamCreate");
    if (!ctx) {
      std::fprintf(stderr, "%s: %s_context_create returned NULL (out of memory)\n", tool, base.name);
      std::exit(2);
    }
    ckRc(base, aotc_cuda_exec_create(&exec, stream, 0), "aotc_cuda_exec_create");
    for (int i = 0; i < base.num_inputs; ++i) {
      const aotc_tensor_desc &d = base.inputs[i];
      bool param = aotc_role_is_weight(d.role);
      Tensor random;
      if (runInputs) {
        const Tensor *f = nullptr;
        for (const char *prefix : {"", "input.", "param."})
          if (!f) f = runInputs->find(prefix + std::string(d.name));
        if (f) random = f->clone();
        else if (d.role == AOTC_ROLE_RNG_STATE) random = aotc::rt::rngState(0);
        else die(std::string("run: the inputs file has no '") + d.name + "'");
      } else if (!weights) {
        random = Tensor(aotc::rt::dtypeFromAbi(d.dtype), std::vector<int64_t>(d.shape, d.shape + d.rank));
        if (d.dtype == AOTC_F32)
          for (int64_t k = 0; k < d.numel; ++k) random.data<float>()[k] = 0.1f * aotc_gpu::uniform(k, i);
      }
      const Tensor &t = runInputs || !weights ? random
                        : param  ? weights->get(d.name, "weights")
                                 : golden->get(std::string("input.") + d.name, "golden");
      if (t.bytes() != d.bytes) die(std::string("input ") + d.name + ": size mismatch");
      in.push_back(deviceAlloc(d.bytes));
      ck(cudaMemcpy(in.back(), t.data(), (size_t)d.bytes, cudaMemcpyHostToDevice), "upload");
    }
    for (int i = 0; i < base.num_outputs; ++i) {
      const aotc_tensor_desc &d = base.outputs[i];
      out.push_back(deviceAlloc(d.bytes));
      // As the CPU runtime's DifferentiableFunction::backward: 1 for a scalar (the loss),
      // 0 for other differentiable outputs, NULL for integer ones and mutated inputs' new values.
      void *t = nullptr;
      if ((d.dtype == AOTC_F32 || d.dtype == AOTC_F64) && d.updates_input < 0) {
        t = deviceAlloc(d.bytes);
        if (runInputs) { // `aotc run`'s cotangents: tangent_<i>, default ones
          const Tensor *given = runInputs->find("tangent_" + std::to_string(i));
          Tensor ones = given ? given->clone()
                              : Tensor::full(aotc::rt::dtypeFromAbi(d.dtype),
                                             std::vector<int64_t>(d.shape, d.shape + d.rank), 1.0);
          if (ones.bytes() != d.bytes) die("tangent_" + std::to_string(i) + ": size mismatch");
          ck(cudaMemcpy(t, ones.data(), (size_t)d.bytes, cudaMemcpyHostToDevice), "upload tangent");
        } else if (d.numel == 1) {
          float f = 1.0f;
          double g = 1.0;
          ck(cudaMemcpy(t, d.dtype == AOTC_F32 ? (const void *)&f : (const void *)&g, (size_t)d.bytes,
                        cudaMemcpyHostToDevice),
             "upload tangent");
        }
      }
      tangents.push_back(t);
    }
    for (int j = 0; j < base.num_grads; ++j) {
      grads.push_back(deviceAlloc(base.grads[j].bytes));
      if (base.inputs[base.grad_input_index[j]].role == AOTC_ROLE_PARAMETER) paramGrads.push_back(j);
    }
    saved = deviceAlloc(base.saved_bytes);
    scratch = deviceAlloc(base.scratch_bytes);
    // The uploads and memsets above ran on the legacy stream and may still be in flight
    // (pageable copies return early); the work runs on a non-blocking stream.
    ck(cudaDeviceSynchronize(), "setup");
  }

  DeviceModel(const DeviceModel &) = delete;
  DeviceModel &operator=(const DeviceModel &) = delete;
  /// Frees every device buffer, the stream, the exec and the context (waits for the stream).
  ~DeviceModel() {
    cudaStreamSynchronize(stream);
    for (auto *v : {&in, &out, &tangents, &grads})
      for (void *p : *v) cudaFree(p);
    cudaFree(saved);
    cudaFree(scratch);
    aotc_cuda_exec_destroy(&exec);
    cudaStreamDestroy(stream);
    base.context_destroy(ctx);
  }

  /// Enqueues forward, backward (when the program has gradients, as `aotc run`) and (lr > 0)
  /// SGD on the parameters; no sync.
  void step(double lr) {
    ckRc(base, prog.forward(ctx, in.data(), out.data(), saved, scratch, &exec), "forward");
    if (base.num_grads > 0)
      ckRc(base, prog.backward(ctx, in.data(), saved, tangents.data(), grads.data(), scratch, &exec), "backward");
    if (lr > 0) sgd(lr);
  }
  /// Enqueues p -= lr * grad for every parameter.
  void sgd(double lr) {
    for (int j : paramGrads) {
      int i = base.grad_input_index[j];
      ckRc(base, aotc_cuda_sgd(&exec, base.inputs[i].dtype, in[i], grads[j], base.inputs[i].numel, lr), "sgd");
    }
  }

  Tensor download(const aotc_tensor_desc &d, const void *p) const {
    Tensor t(aotc::rt::dtypeFromAbi(d.dtype), std::vector<int64_t>(d.shape, d.shape + d.rank));
    ck(cudaMemcpy(t.data(), p, (size_t)d.bytes, cudaMemcpyDeviceToHost), "download");
    return t;
  }
  void check() {
    int rc = aotc_cuda_check(&exec);
    if (rc != 0) die(std::string("device error: ") + aotc_cuda_last_error());
  }
  std::string gradName(int j) const { return base.inputs[base.grad_input_index[j]].name; }
};

/// One forward and backward; writes output_<i> and grad_<name> as `aotc run --out` does.
inline int runOnce(DeviceModel &m, const std::string &outPath) {
  m.step(0.0);
  m.check();
  const aotc_program &base = m.base;
  std::vector<Tensor> outs, grads;
  for (int i = 0; i < base.num_outputs; ++i) outs.push_back(m.download(base.outputs[i], m.out[i]));
  for (int j = 0; j < base.num_grads; ++j) grads.push_back(m.download(base.grads[j], m.grads[j]));
  std::vector<aotc::rt::NamedTensorRef> refs;
  for (int i = 0; i < base.num_outputs; ++i) refs.push_back({"output_" + std::to_string(i), &outs[i]});
  for (int j = 0; j < base.num_grads; ++j) refs.push_back({"grad_" + m.gradName(j), &grads[j]});
  aotc::rt::writeSafetensors(outPath, refs);
  std::printf("%s (cuda): one forward + backward -> %s\n", base.name, outPath.c_str());
  return 0;
}

} // namespace aotc_gpu
