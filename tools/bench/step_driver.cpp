//===- step_driver.cpp - Times aotc training steps through the C++ runtime ---===//
//
// The "aotc (C++)" system of scripts/bench.sh. It dlopens a shared library made
// from an aotc object (python/aotc build_library: lib<NAME>.so), reads
// <NAME>_program and drives it through aotc::rt::DifferentiableFunction, exactly
// as a C++ training loop linking the object would.
//
//   bench_step step LIB NAME WEIGHTS INPUTS WARMUP ITERS LR OUT.json
//     A step = forward + backward + sgdStep(lr) on the parameters (+ zero_grad, a
//     no-op here: backward returns fresh gradient tensors). Parameters come from
//     WEIGHTS (aotc's NAME.weights.safetensors), user inputs from INPUTS
//     (safetensors with `input.<name>` keys, e.g. a golden file). WARMUP untimed
//     steps, then ITERS timed ones (ms each, steady_clock).
//   bench_step train LIB NAME WEIGHTS INPUTS WARMUP ITERS OUT.json
//     A step = the compiled train step (<NAME>_train_step through aotc::rt::Trainer: forward,
//     backward and the optimizer graph of --optimizer, at the hyperparameters it was compiled
//     with). For objects compiled with --optimizer; WEIGHTS and INPUTS as for `step`.
//   bench_step probe LIB NAME WARMUP ITERS OUT.json
//     Forward only (the pointwise probe): inputs filled with 1.0, ms per call; the
//     JSON also carries the bytes the forward reads and writes (inputs + outputs).
//
// Peak RSS: after the warm-up, "5" is written to /proc/self/clear_refs (resets
// VmHWM to the current RSS); VmHWM (KiB) is read after the timed steps.
// Threads: OMP_NUM_THREADS (libomp); the runtime pins OpenBLAS to 1 thread.
// OUT.json: {"times_ms": [...], "first_step_ms", "rss_hwm_kib", "saved_bytes",
//            "scratch_bytes", "omp_threads", "openblas_threads", "bytes_moved"}.
// Exit 0, or 2 with a message on stderr.
//===----------------------------------------------------------------------===//
#include "aotc/abi.h"
#include "aotc/runtime.h"
#include "aotc/safetensors.h"
#include "aotc/trainer.h"

#include <nlohmann/json.hpp>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <dlfcn.h>
#include <fstream>
#include <functional>
#include <omp.h>
#include <memory>
#include <string>
#include <vector>

extern "C" int openblas_get_num_threads(void) __attribute__((weak));

using aotc::rt::Tensor;
using Clock = std::chrono::steady_clock;

namespace {

[[noreturn]] void die(const std::string &msg) {
  std::fprintf(stderr, "bench_step: %s\n", msg.c_str());
  std::exit(2);
}

const aotc_program &loadProgram(const std::string &lib, const std::string &name) {
  void *h = dlopen(lib.c_str(), RTLD_NOW | RTLD_LOCAL);
  if (!h)
    die(std::string("cannot load ") + lib + ": " + dlerror());
  void *sym = dlsym(h, (name + "_program").c_str());
  if (!sym)
    die(lib + ": no symbol " + name + "_program");
  return *static_cast<const aotc_program *>(sym);
}

void resetPeakRss() {
  std::ofstream f("/proc/self/clear_refs");
  f << "5";
}

long peakRssKiB() {
  std::ifstream f("/proc/self/status");
  std::string line;
  while (std::getline(f, line))
    if (line.rfind("VmHWM:", 0) == 0)
      return std::atol(line.c_str() + 6);
  return -1;
}

double msSince(Clock::time_point t0) {
  return std::chrono::duration<double, std::milli>(Clock::now() - t0).count();
}

nlohmann::json common(const aotc_program &p) {
  nlohmann::json j;
  j["saved_bytes"] = p.saved_bytes;
  j["scratch_bytes"] = p.scratch_bytes;
  j["omp_threads"] = omp_get_max_threads();
  j["openblas_threads"] = openblas_get_num_threads ? openblas_get_num_threads() : -1;
  return j;
}

/// common(p) plus the timing of warmup + iters calls of `body`: first_step_ms (call 0),
/// times_ms (the calls after the warm-up, ms each) and rss_hwm_kib (peak RSS since the
/// warm-up ended). Under AOTC_PROFILE the profile counts the timed calls only.
nlohmann::json timed(const aotc_program &p, int warmup, int iters, const std::function<void()> &body) {
  nlohmann::json j = common(p);
  std::vector<double> ms;
  for (int k = 0; k < warmup + iters; ++k) {
    if (k == warmup) {
      resetPeakRss();
      aotc::rt::resetProfiles(); // AOTC_PROFILE (docs/profiling.md) reports the timed calls only
    }
    auto t0 = Clock::now();
    body();
    double t = msSince(t0);
    if (k == 0)
      j["first_step_ms"] = t;
    if (k >= warmup)
      ms.push_back(t);
  }
  j["rss_hwm_kib"] = peakRssKiB();
  j["times_ms"] = ms;
  return j;
}

void write(const std::string &path, const nlohmann::json &j) {
  std::ofstream f(path);
  if (!f)
    die("cannot write " + path);
  f << j.dump(1) << "\n";
}

int step(const aotc_program &p, const std::string &weightsPath, const std::string &inputsPath,
         int warmup, int iters, double lr, const std::string &out) {
  aotc::rt::DifferentiableFunction f(p);
  aotc::rt::SafetensorsFile weights = aotc::rt::readSafetensors(weightsPath);
  aotc::rt::SafetensorsFile data = aotc::rt::readSafetensors(inputsPath);
  std::vector<Tensor> in;
  for (int i = 0; i < p.num_inputs; ++i) {
    const aotc_tensor_desc &d = p.inputs[i];
    bool param = aotc_role_is_weight(d.role);
    in.push_back(param ? weights.get(d.name, weightsPath).clone()
                       : data.get(std::string("input.") + d.name, inputsPath).clone());
  }
  std::vector<const Tensor *> ptrs;
  for (const Tensor &t : in)
    ptrs.push_back(&t);
  std::vector<int> paramGrads;
  for (int j = 0; j < p.num_grads; ++j)
    if (p.inputs[p.grad_input_index[j]].role == AOTC_ROLE_PARAMETER)
      paramGrads.push_back(j);

  std::vector<Tensor *> inPtrsMut;
  for (Tensor &t : in)
    inPtrsMut.push_back(&t);
  auto oneStep = [&] {
    auto fwd = f.forward(ptrs);
    f.writeBack(inPtrsMut, fwd.outputs); // batch norm's running statistics, as torch updates them
    std::vector<Tensor> grads = f.backward(fwd.state);
    std::vector<Tensor *> ps;
    std::vector<const Tensor *> gs;
    for (int j : paramGrads) {
      ps.push_back(&in[p.grad_input_index[j]]);
      gs.push_back(&grads[j]);
    }
    aotc::rt::sgdStep(ps, gs, lr);
  }; // grads freed here: the next step allocates fresh ones (= zero_grad(set_to_none))

  write(out, timed(p, warmup, iters, oneStep));
  return 0;
}

int train(const aotc_program &p, const std::string &weightsPath, const std::string &inputsPath, int warmup,
          int iters, const std::string &out) {
  aotc::rt::SafetensorsFile weights = aotc::rt::readSafetensors(weightsPath);
  aotc::rt::SafetensorsFile data = aotc::rt::readSafetensors(inputsPath);
  aotc::rt::Trainer t(p, weights);
  std::vector<Tensor> in;
  for (int i : t.userInputs()) in.push_back(data.get(std::string("input.") + p.inputs[i].name, inputsPath).clone());
  std::vector<const Tensor *> ptrs;
  for (const Tensor &x : in) ptrs.push_back(&x);
  write(out, timed(p, warmup, iters, [&] { t.step(ptrs); }));
  return 0;
}

int probe(const aotc_program &p, int warmup, int iters, const std::string &out) {
  // The raw entry point on preallocated buffers: the fused kernel's own bandwidth
  // (DifferentiableFunction::forward would allocate and first-touch the outputs).
  std::vector<Tensor> in, outs;
  std::vector<const void *> inPtrs;
  std::vector<void *> outPtrs;
  int64_t bytes = 0;
  for (int i = 0; i < p.num_inputs; ++i) {
    if (p.inputs[i].dtype != AOTC_F32)
      die("the probe takes f32 inputs only");
    in.push_back(Tensor::full(aotc::rt::DType::F32, std::vector<int64_t>(p.inputs[i].shape,
                              p.inputs[i].shape + p.inputs[i].rank), 1.0));
    inPtrs.push_back(in.back().data());
    bytes += p.inputs[i].bytes;
  }
  for (int i = 0; i < p.num_outputs; ++i) {
    outs.push_back(Tensor::like(p.outputs[i]));
    outPtrs.push_back(outs.back().data());
    bytes += p.outputs[i].bytes;
  }
  aotc::rt::AlignedBuffer saved(std::max<int64_t>(p.saved_bytes, 64));
  aotc::rt::AlignedBuffer scratch(std::max<int64_t>(p.scratch_bytes, 64));
  std::unique_ptr<aotc_context, aotc_context_destroy_fn> ctx(p.context_create(), p.context_destroy);
  if (!ctx)
    die(std::string(p.name) + "_context_create failed");
  nlohmann::json j = timed(p, warmup, iters, [&] {
    int rc = p.forward(ctx.get(), inPtrs.data(), outPtrs.data(), saved.data(), scratch.data());
    if (rc != 0)
      die(std::string(p.name) + "_forward failed with code " + std::to_string(rc));
  });
  j["bytes_moved"] = bytes;
  write(out, j);
  return 0;
}

} // namespace

int main(int argc, char **argv) {
  std::vector<std::string> a(argv + 1, argv + argc);
  try {
    if (a.size() == 9 && a[0] == "step")
      return step(loadProgram(a[1], a[2]), a[3], a[4], std::atoi(a[5].c_str()),
                  std::atoi(a[6].c_str()), std::atof(a[7].c_str()), a[8]);
    if (a.size() == 8 && a[0] == "train")
      return train(loadProgram(a[1], a[2]), a[3], a[4], std::atoi(a[5].c_str()), std::atoi(a[6].c_str()), a[7]);
    if (a.size() == 6 && a[0] == "probe")
      return probe(loadProgram(a[1], a[2]), std::atoi(a[3].c_str()), std::atoi(a[4].c_str()), a[5]);
  } catch (const std::exception &e) {
    die(e.what());
  }
  std::fprintf(stderr,
               "usage: bench_step step LIB NAME WEIGHTS INPUTS WARMUP ITERS LR OUT.json\n"
               "       bench_step train LIB NAME WEIGHTS INPUTS WARMUP ITERS OUT.json\n"
               "       bench_step probe LIB NAME WARMUP ITERS OUT.json\n");
  return 2;
}
