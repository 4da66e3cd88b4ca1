//===- train_cuda.cpp - Drive a --target=cuda training step on a GPU ----------===//
//
// Built per model with -DAOTC_GPU_HEADER="<name>.h" -DAOTC_GPU_PROGRAM=<name>_program,
// linked with the object, aotc_cuda_runtime and aotc_runtime (safetensors I/O only).
// Inputs as for the CPU e2e driver (test/e2e/train_driver.cpp): the weights file aotc
// wrote and a golden with input.<name> (and, for `train`, the PyTorch reference).
//
//   train_cuda train WEIGHTS GOLDEN OUT [STEPS]
//       STEPS (20) SGD steps (lr 0.1, same batch) entirely on the device; writes loss,
//       grad.<name> of step 0 and param_final.<FQN> to OUT for tools/check_golden.py.
//   train_cuda one-step WEIGHTS GOLDEN      one forward+backward+SGD (compute-sanitizer)
//   train_cuda run INPUTS OUT
//       one forward and backward as `aotc run IN --inputs INPUTS --out OUT` on the CPU:
//       INPUTS holds every input by name (or input.<name> / param.<name>; rng_state
//       defaults to {0, 0}) and tangent_<i> (default: ones); OUT receives output_<i> and
//       grad_<name>, so the two files compare tensor by tensor (gpu-check's dropout phase).
//   train_cuda bad-index WEIGHTS GOLDEN
//       sets the first integer input's element 0 to 1000000, runs the forward and
//       expects aotc_cuda_check to name a gather node; exit 0 when it does.
//   train_cuda bench WEIGHTS GOLDEN [ITERS]    (WEIGHTS and GOLDEN "-": random inputs,
//       0.1 * aotc_gpu::uniform (gpu_common.h) for floating inputs, 0 for integer ones)
//       median CUDA-event time of a step (forward, backward, SGD) over ITERS (50) after
//       5 warm-up steps, then the same step captured in a CUDA graph and replayed;
//       prints one JSON line {"model", "aotc_ms", "aotc_graph_ms", "graph_nodes"}.
//
// Exit 77 when there is no CUDA device (ctest reports the test as skipped), 1 when a
// check fails, 2 on bad usage or a CUDA error.
//===----------------------------------------------------------------------===//
#include AOTC_GPU_HEADER

#include "device_model.h"

#include <cuda_runtime_api.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

using aotc::rt::SafetensorsFile;
using aotc::rt::Tensor;

namespace {

const aotc_cuda_program &kProg = AOTC_GPU_PROGRAM;
const aotc_program &kBase = kProg.base;

using aotc_gpu::ck;
using aotc_gpu::DeviceModel;
using aotc_gpu::die;

void ckRc(int rc, const char *what) { aotc_gpu::ckRc(kBase, rc, what); }

int train(DeviceModel &m, const std::string &outPath, int steps) {
  Tensor loss(aotc::rt::DType::F32, {steps});
  std::vector<Tensor> first;
  for (int k = 0; k < steps; ++k) {
    m.step(0.0);
    m.check();
    loss.data<float>()[k] = (float)m.download(kBase.outputs[0], m.out[0]).at(0);
    if (k == 0)
      for (int j = 0; j < kBase.num_grads; ++j) first.push_back(m.download(kBase.grads[j], m.grads[j]));
    m.sgd(0.1);
  }
  m.check();
  std::vector<Tensor> finals;
  for (int j : m.paramGrads) finals.push_back(m.download(kBase.inputs[kBase.grad_input_index[j]], m.in[kBase.grad_input_index[j]]));
  std::vector<aotc::rt::NamedTensorRef> refs{{"loss", &loss}};
  std::vector<std::string> names;
  for (int j = 0; j < kBase.num_grads; ++j) names.push_back(m.gradName(j));
  for (int j = 0; j < kBase.num_grads; ++j) refs.push_back({"grad." + names[j], &first[j]});
  for (size_t p = 0; p < m.paramGrads.size(); ++p) refs.push_back({"param_final." + names[m.paramGrads[p]], &finals[p]});
  aotc::rt::writeSafetensors(outPath, refs);
  std::printf("%s (cuda): steps=%d loss_first=%.9g loss_last=%.9g\n", kBase.name, steps, loss.at(0),
              loss.at(steps - 1));
  return 0;
}

int badIndex(DeviceModel &m) {
  for (int i = 0; i < kBase.num_inputs; ++i) {
    const aotc_tensor_desc &d = kBase.inputs[i];
    if (d.dtype != AOTC_I64 && d.dtype != AOTC_I32) continue;
    int64_t big = 1000000;
    ck(cudaMemcpy(m.in[i], &big, d.dtype == AOTC_I64 ? 8 : 4, cudaMemcpyHostToDevice), "upload bad index");
    ck(cudaDeviceSynchronize(), "upload bad index");
    ckRc(kProg.forward(m.ctx, m.in.data(), m.out.data(), m.saved, m.scratch, &m.exec), "forward");
    int rc = aotc_cuda_check(&m.exec);
    std::string msg = aotc_cuda_last_error();
    std::printf("%s (cuda): out-of-range %s[0]=1000000 -> rc=%d: %s\n", kBase.name, d.name, rc, msg.c_str());
    bool ok = rc > 0 && msg.find("gather") != std::string::npos && msg.find("1000000") != std::string::npos;
    return ok ? 0 : 1;
  }
  std::printf("%s (cuda): no integer input\n", kBase.name);
  return 1;
}

int bench(DeviceModel &m, int iters) {
  for (int k = 0; k < 5; ++k) m.step(1e-6); // loads the kernels, plans the GEMMs
  m.check();
  float plain = aotc_gpu::medianMs(m.stream, 0, iters, [&] { m.step(1e-6); });
  cudaGraph_t g;
  cudaGraphExec_t ge;
  ck(cudaStreamBeginCapture(m.stream, cudaStreamCaptureModeThreadLocal), "begin capture");
  m.step(1e-6);
  ck(cudaStreamEndCapture(m.stream, &g), "end capture");
  ck(cudaGraphInstantiate(&ge, g, 0), "instantiate");
  size_t nodes = 0;
  ck(cudaGraphGetNodes(g, nullptr, &nodes), "graph nodes");
  float graph = aotc_gpu::medianMs(m.stream, 3, iters, [&] { ck(cudaGraphLaunch(ge, m.stream), "graph launch"); });
  m.check();
  std::printf("{\"model\": \"%s\", \"aotc_ms\": %.4f, \"aotc_graph_ms\": %.4f, \"graph_nodes\": %zu, \"iters\": %d}\n",
              kBase.name, plain, graph, nodes, iters);
  return 0;
}

} // namespace

int main(int argc, char **argv) {
  if (argc < 4) {
    std::fprintf(stderr, "usage: %s train|one-step|bad-index|bench WEIGHTS GOLDEN [OUT|ITERS] [STEPS] | run INPUTS OUT\n", argv[0]);
    return 2;
  }
  aotc_gpu::tool = "train_cuda";
  if (aotc_gpu::noCudaDevice("train_cuda")) return 77;
  try {
    std::string mode = argv[1];
    if (mode == "run") {
      SafetensorsFile inputs = aotc::rt::readSafetensors(argv[2]);
      DeviceModel m(kProg, nullptr, nullptr, &inputs);
      return aotc_gpu::runOnce(m, argv[3]);
    }
    bool random = std::string(argv[2]) == "-";
    if (random && mode != "bench") die("random inputs (\"-\") are for bench only");
    SafetensorsFile weights, golden;
    if (!random) {
      weights = aotc::rt::readSafetensors(argv[2]);
      golden = aotc::rt::readSafetensors(argv[3]);
    }
    DeviceModel m(kProg, random ? nullptr : &weights, random ? nullptr : &golden);
    if (mode == "train" && argc >= 5) return train(m, argv[4], argc >= 6 ? std::atoi(argv[5]) : 20);
    if (mode == "one-step") {
      m.step(0.1);
      m.check();
      std::printf("%s (cuda): one step OK\n", kBase.name);
      return 0;
    }
    if (mode == "bad-index") return badIndex(m);
    if (mode == "bench") return bench(m, argc >= 5 ? std::max(1, std::atoi(argv[4])) : 50);
    std::fprintf(stderr, "bad arguments\n");
    return 2;
  } catch (const std::exception &e) {
    std::fprintf(stderr, "error: %s\n", e.what());
    return 2;
  }
}
