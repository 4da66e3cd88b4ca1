//===- train_driver.cpp - End-to-end driver for an aotc-compiled model -------===//
//
// Built once per compiled model with -DAOTC_E2E_HEADER="<name>.h" and
// -DAOTC_E2E_PROGRAM=<name>_program. Inputs: the weights file aotc wrote and
// the PyTorch golden (input.<name>, param.<FQN>, grad.<FQN>, loss, param_final).
//
//   train_driver train WEIGHTS GOLDEN OUT [STEPS]
//     STEPS (default 20) plain SGD steps at the golden's "lr" metadata (0.1 without), same
//     batch, mutated buffers written back
//     after each step; writes loss f32[STEPS], grad.<name> of step 0 for every gradient
//     (parameters and inputs such as x), param_final.<FQN>, buffer_final.<FQN>;
//     tools/check_golden.py then compares OUT with GOLDEN.
//   train_driver two-contexts WEIGHTS GOLDEN
//     A = forward(theta0), B = forward(theta1 = theta0 - 0.1 * golden grad),
//     scratch NaN-filled between all calls, backward(B) then backward(A).
//     Checks loss(A) ~ golden loss[0], loss(B) ~ golden loss[1], grads(A) ~ golden
//     grads (1e-4 relative), and grads(B) bit-identical to a fresh, uninterleaved
//     forward+backward at theta1.
//   train_driver bench WEIGHTS GOLDEN [ITERS]
//     Times forward+backward (no update) ITERS times (default 50) after 3 warm-up
//     steps; prints the median and minimum per step in milliseconds. Threads:
//     OMP_NUM_THREADS (generated loops and GEMM blocks; BLAS is pinned to 1).
//   train_driver two-threads-fail WEIGHTS GOLDEN [ITERS]
//     Two threads, each with its own DifferentiableFunction (own scratch), run forwards
//     at once whose integer user input (e.g. a class target) holds an out-of-range value,
//     thread t its own (bound + t and -1 - t, alternating), ITERS times (default 200):
//     every failure must report its own thread's value (the error value is per call,
//     abi.h). Under TSan the object is instrumented, so a shared error slot is a race.
//   train_driver compare-run WEIGHTS GOLDEN RUN
//     RUN is `aotc run --inputs GOLDEN --out RUN`: its output_0 and grad_<name>
//     must equal this process's step-0 outputs and gradients within 1e-6 (relative
//     to max|value|).
// Exit 0 on success, 1 on a failed check (message on stderr).
//===----------------------------------------------------------------------===//
#include AOTC_E2E_HEADER

#include "aotc/runtime.h"
#include "aotc/safetensors.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <string>
#include <thread>
#include <vector>

using aotc::rt::SafetensorsFile;
using aotc::rt::Tensor;

namespace {

const aotc_program &kProg = AOTC_E2E_PROGRAM;

/// max|a - g| / max|g| (max|a - g| when g is all zeros); NaN is infinite.
double relErr(const Tensor &a, const Tensor &g) {
  if (a.shape() != g.shape())
    return INFINITY;
  double num = 0, den = 0;
  for (int64_t i = 0; i < g.numel(); ++i) {
    double d = std::fabs(a.at(i) - g.at(i));
    num = std::isnan(d) ? INFINITY : std::max(num, d);
    den = std::max(den, std::fabs(g.at(i)));
  }
  return den > 0 ? num / den : num;
}

struct Model {
  aotc::rt::DifferentiableFunction f{kProg};
  std::vector<Tensor> inputs;
  std::vector<int> paramGrads; ///< grads[j] of parameters (SGD updates these).

  Model(const SafetensorsFile &weights, const SafetensorsFile &golden) {
    for (int i = 0; i < kProg.num_inputs; ++i) {
      const aotc_tensor_desc &d = kProg.inputs[i];
      bool param = aotc_role_is_weight(d.role);
      inputs.push_back(param ? weights.get(d.name, "weights").clone()
                             : golden.get(std::string("input.") + d.name, "golden").clone());
    }
    for (int j = 0; j < kProg.num_grads; ++j)
      if (kProg.inputs[kProg.grad_input_index[j]].role == AOTC_ROLE_PARAMETER)
        paramGrads.push_back(j);
  }
  std::vector<const Tensor *> ptrs() const {
    std::vector<const Tensor *> p;
    for (const Tensor &t : inputs)
      p.push_back(&t);
    return p;
  }
  /// The mutated buffers' new values into `inputs` (after the backward).
  void writeBack(const std::vector<Tensor> &outputs) {
    std::vector<Tensor *> p;
    for (Tensor &t : inputs)
      p.push_back(&t);
    f.writeBack(p, outputs);
  }
  std::string gradName(int j) const { return kProg.inputs[kProg.grad_input_index[j]].name; }
  Tensor &gradInput(int j) { return inputs[kProg.grad_input_index[j]]; }
  /// p <- p - lr * g for the parameters, g = grads[j].
  void sgd(const std::vector<Tensor> &grads, double lr) {
    std::vector<Tensor *> ps;
    std::vector<const Tensor *> gs;
    for (int j : paramGrads) {
      ps.push_back(&gradInput(j));
      gs.push_back(&grads[j]);
    }
    aotc::rt::sgdStep(ps, gs, lr);
  }
};

int fail(const std::string &msg) {
  std::fprintf(stderr, "FAIL: %s\n", msg.c_str());
  return 1;
}

int twoThreadsFail(const SafetensorsFile &weights, const SafetensorsFile &golden, int iters) {
  int idx = -1;
  for (int i = 0; i < kProg.num_inputs; ++i)
    if (kProg.inputs[i].role == AOTC_ROLE_USER_INPUT && kProg.inputs[i].dtype == AOTC_I64 &&
        kProg.inputs[i].numel > 0)
      idx = i;
  if (idx < 0) return fail("no i64 user input to put an out-of-range value into");
  // Values far outside any bound (and negative ones), distinct per thread and call.
  std::string wrong[2];
  std::thread threads[2];
  for (int t = 0; t < 2; ++t)
    threads[t] = std::thread([&, t] {
      Model m(weights, golden);
      for (int k = 0; k < iters && wrong[t].empty(); ++k) {
        int64_t v = k % 2 ? 1000000 + 1000 * t + k : -1 - 1000 * t - k;
        m.inputs[idx].data<int64_t>()[t] = v;
        try {
          m.f.forward(m.ptrs());
          wrong[t] = "forward succeeded with value " + std::to_string(v);
        } catch (const aotc::rt::RuntimeError &e) {
          std::string want = "(value " + std::to_string(v) + ")";
          if (std::string(e.what()).find(want) == std::string::npos)
            wrong[t] = "thread " + std::to_string(t) + " expected " + want + ", got: " + e.what();
        }
      }
    });
  for (auto &th : threads) th.join();
  for (auto &w : wrong)
    if (!w.empty()) return fail(w);
  std::printf("%s: two threads, %d failing forwards each, every error value their own\n", kProg.name,
              iters);
  return 0;
}

int train(Model &m, const SafetensorsFile &golden, const std::string &out, int steps) {
  // The golden's learning rate (its "lr" metadata; the zoo models have their own), else 0.1.
  auto lrIt = golden.metadata.find("lr");
  const double lr = lrIt != golden.metadata.end() ? std::stod(lrIt->second) : 0.1;
  Tensor loss(aotc::rt::DType::F32, {steps});
  std::vector<Tensor> first;
  for (int k = 0; k < steps; ++k) {
    auto fwd = m.f.forward(m.ptrs());
    loss.data<float>()[k] = (float)fwd.outputs[0].at(0);
    std::vector<Tensor> grads = m.f.backward(fwd.state);
    m.sgd(grads, lr);
    m.writeBack(fwd.outputs);
    if (k == 0)
      first = std::move(grads);
  }
  std::vector<std::string> names;
  for (int j = 0; j < kProg.num_grads; ++j)
    names.push_back(m.gradName(j));
  std::vector<aotc::rt::NamedTensorRef> refs{{"loss", &loss}};
  for (int j = 0; j < kProg.num_grads; ++j)
    refs.push_back({"grad." + names[j], &first[j]});
  for (int j : m.paramGrads)
    refs.push_back({"param_final." + names[j], &m.gradInput(j)});
  for (int i = 0; i < kProg.num_inputs; ++i)
    if (kProg.inputs[i].role == AOTC_ROLE_BUFFER)
      refs.push_back({std::string("buffer_final.") + kProg.inputs[i].name, &m.inputs[i]});
  aotc::rt::writeSafetensors(out, refs);
  std::printf("%s: steps=%d loss_first=%.9g loss_last=%.9g\n", kProg.name, steps, loss.at(0),
              loss.at(steps - 1));
  return 0;
}

int twoContexts(Model &m, const SafetensorsFile &golden) {
  const Tensor &gLoss = golden.get("loss");
  std::vector<Tensor> theta0 = std::move(m.inputs);
  std::vector<Tensor> theta1;
  for (const Tensor &t : theta0)
    theta1.push_back(t.clone());
  m.inputs = std::move(theta1);
  std::vector<Tensor> goldenGrads;
  for (int j = 0; j < kProg.num_grads; ++j)
    goldenGrads.push_back(golden.get("grad." + m.gradName(j)).clone());
  m.sgd(goldenGrads, 0.1); // inputs now hold theta1
  theta1 = std::move(m.inputs);

  std::vector<const Tensor *> p0, p1;
  for (const Tensor &t : theta0)
    p0.push_back(&t);
  for (const Tensor &t : theta1)
    p1.push_back(&t);

  m.f.poisonScratch();
  auto a = m.f.forward(p0);
  m.f.poisonScratch();
  auto b = m.f.forward(p1);
  m.f.poisonScratch();
  std::vector<Tensor> gb = m.f.backward(b.state);
  m.f.poisonScratch();
  std::vector<Tensor> ga = m.f.backward(a.state);

  int bad = 0;
  auto lossErr = [](double a, double g) { return std::fabs(a - g) / std::fabs(g); };
  if (!(lossErr(a.outputs[0].at(0), gLoss.at(0)) <= 1e-4))
    bad += fail("loss(A) " + std::to_string(a.outputs[0].at(0)) + " vs golden loss[0] " +
                std::to_string(gLoss.at(0)));
  if (!(lossErr(b.outputs[0].at(0), gLoss.at(1)) <= 1e-4))
    bad += fail("loss(B) " + std::to_string(b.outputs[0].at(0)) + " vs golden loss[1] " +
                std::to_string(gLoss.at(1)));
  for (int j = 0; j < kProg.num_grads; ++j) {
    double e = relErr(ga[j], goldenGrads[j]);
    if (!(e <= 1e-4))
      bad += fail("grad(A) of " + m.gradName(j) + ": relative error " + std::to_string(e));
  }
  // B again, alone: must be bit-identical to the interleaved run.
  auto b2 = m.f.forward(p1);
  std::vector<Tensor> gb2 = m.f.backward(b2.state);
  for (int j = 0; j < kProg.num_grads; ++j)
    if (std::memcmp(gb[j].data(), gb2[j].data(), (size_t)gb[j].bytes()) != 0)
      bad += fail("grad(B) of " + m.gradName(j) + " differs from an uninterleaved run");
  if (bad)
    return 1;
  std::printf("%s: two contexts OK (%d gradients)\n", kProg.name, kProg.num_grads);
  return 0;
}

int compareRun(Model &m, const std::string &runPath) {
  SafetensorsFile run = aotc::rt::readSafetensors(runPath);
  auto fwd = m.f.forward(m.ptrs());
  std::vector<Tensor> grads = m.f.backward(fwd.state);
  int bad = 0;
  for (int i = 0; i < kProg.num_outputs; ++i) {
    double e = relErr(run.get("output_" + std::to_string(i), runPath), fwd.outputs[i]);
    if (!(e <= 1e-6))
      bad += fail("output_" + std::to_string(i) + ": relative error " + std::to_string(e));
  }
  for (int j = 0; j < kProg.num_grads; ++j) {
    double e = relErr(run.get("grad_" + m.gradName(j), runPath), grads[j]);
    if (!(e <= 1e-6))
      bad += fail("grad_" + m.gradName(j) + ": relative error " + std::to_string(e));
  }
  if (bad)
    return 1;
  std::printf("%s: aotc run matches the linked object (%d outputs, %d gradients)\n", kProg.name,
              kProg.num_outputs, kProg.num_grads);
  return 0;
}

int bench(Model &m, int iters) {
  std::vector<double> ms;
  for (int k = 0; k < iters + 3; ++k) {
    auto t0 = std::chrono::steady_clock::now();
    auto fwd = m.f.forward(m.ptrs());
    std::vector<Tensor> grads = m.f.backward(fwd.state);
    auto t1 = std::chrono::steady_clock::now();
    if (k >= 3)
      ms.push_back(std::chrono::duration<double, std::milli>(t1 - t0).count());
  }
  std::sort(ms.begin(), ms.end());
  std::printf("%s: forward+backward per step: median %.3f ms, min %.3f ms (%d steps)\n", kProg.name,
              ms[ms.size() / 2], ms.front(), iters);
  return 0;
}

} // namespace

int main(int argc, char **argv) {
  if (argc < 4) {
    std::fprintf(stderr, "usage: %s train|two-contexts|bench|compare-run WEIGHTS GOLDEN [OUT|RUN|ITERS] [STEPS]\n",
                 argv[0]);
    return 2;
  }
  try {
    std::string mode = argv[1];
    SafetensorsFile weights = aotc::rt::readWeights(kProg, argv[2]);
    SafetensorsFile golden = aotc::rt::readSafetensors(argv[3]);
    Model m(weights, golden);
    if (mode == "train" && argc >= 5)
      return train(m, golden, argv[4], argc >= 6 ? std::atoi(argv[5]) : 20);
    if (mode == "two-contexts")
      return twoContexts(m, golden);
    if (mode == "two-threads-fail")
      return twoThreadsFail(weights, golden, argc >= 5 ? std::max(1, std::atoi(argv[4])) : 200);
    if (mode == "bench")
      return bench(m, argc >= 5 ? std::max(1, std::atoi(argv[4])) : 50);
    if (mode == "compare-run" && argc >= 5)
      return compareRun(m, argv[4]);
    std::fprintf(stderr, "bad arguments\n");
    return 2;
  } catch (const std::exception &e) {
    std::fprintf(stderr, "error: %s\n", e.what());
    return 2;
  }
}
