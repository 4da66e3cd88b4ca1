//===- Gradcheck.cpp - `aotc gradcheck`: compiled gradients vs central differences -===//
//
//   aotc gradcheck IN [--inputs F] [--samples N] [--eps E] [--atol A] [--rtol R]
//
// Compiles IN with every f32 turned into f64 (convertF32ToF64, right before
// codegen), links the object in-process (Jit.h) and checks each gradient the
// program produces against central differences of the same compiled forward:
//   L(x) = sum_i <out_i(x), c_i>     (c_i: fixed random cotangents, differentiable outputs)
//   numeric_e = (L(x + eps e) - L(x - eps e)) / (2 eps)
//   error_e   = |grad_e - numeric_e|, passing when error_e <= atol + rtol |numeric_e|
// Each line reports the worst error_e and the worst error_e / (atol + rtol |numeric_e|).
// For each input with a gradient, `--samples` elements (all when fewer) chosen
// by a seeded generator are checked. Inputs come from --inputs (converted to
// f64), parameters default to the archive's values, other floating inputs to
// seeded N(0, 1) values and integer/bool inputs to zeros.
// Output: one line per checked input; exit 1 when any element fails.
//===----------------------------------------------------------------------===//
#include "Jit.h"

#include "aotc/Diagnostics.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <iostream>
#include <optional>
#include <random>

namespace aotc::driver {

void convertF32ToF64(Program &p) {
  auto convert = [](Graph &g) {
    for (const auto &n : g.nodes()) {
      for (TensorType &t : n->types)
        if (t.dtype == DType::F32)
          t.dtype = DType::F64;
      for (Arg &a : n->args)
        if (auto *d = std::get_if<DTypeLit>(&a); d && d->dtype == DType::F32)
          d->dtype = DType::F64;
    }
  };
  convert(p.forward);
  convert(p.backward);
}

namespace {

rt::Tensor toF64(const rt::Tensor &t) {
  if (t.dtype() != rt::DType::F32)
    return t.clone();
  rt::Tensor r(rt::DType::F64, t.shape());
  for (int64_t i = 0; i < t.numel(); ++i)
    r.data<double>()[i] = t.data<float>()[i];
  return r;
}

rt::Tensor randomInput(const aotc_tensor_desc &d, uint64_t seed) {
  rt::Tensor t = rt::Tensor::like(d);
  if (d.dtype == AOTC_F64 || d.dtype == AOTC_F32) {
    std::mt19937_64 gen(seed * 0x9E3779B97F4A7C15ull + 1);
    std::normal_distribution<double> normal(0.0, 1.0);
    for (int64_t i = 0; i < t.numel(); ++i) {
      double v = normal(gen);
      if (d.dtype == AOTC_F64)
        t.data<double>()[i] = v;
      else
        t.data<float>()[i] = (float)v;
    }
  }
  return t; // integer and bool inputs: zeros (valid indices and masks)
}

double objective(const std::vector<rt::Tensor> &outs,
                 const std::vector<std::unique_ptr<rt::Tensor>> &cot) {
  double l = 0;
  for (size_t i = 0; i < outs.size(); ++i)
    if (cot[i])
      for (int64_t e = 0; e < outs[i].numel(); ++e)
        l += outs[i].at(e) * cot[i]->at(e);
  return l;
}

} // namespace

int gradcheckCommand(const GradcheckOptions &o) {
  requireSanitizerRuntime(o.compile.sanitize, "aotc gradcheck");
  CompileResult compiled = runPipeline(o.compile);
  AOTC_ASSERT(!compiled.stopped, "gradcheck never stops early");
  if (o.eps <= 0)
    userError("--eps must be positive");

  // The program is f64 now: bring the archive's weights and --inputs along.
  for (Weight &w : compiled.weights) {
    if (w.type.dtype != DType::F32)
      continue;
    std::vector<uint8_t> bytes(w.bytes.size() * 2);
    for (size_t i = 0; i < w.bytes.size() / 4; ++i) {
      float f;
      std::memcpy(&f, w.bytes.data() + 4 * i, 4);
      double v = f;
      std::memcpy(bytes.data() + 8 * i, &v, 8);
    }
    w.bytes = std::move(bytes);
    w.type.dtype = DType::F64;
  }
  std::optional<rt::SafetensorsFile> file;
  if (!o.inputs.empty()) {
    try {
      file = rt::readSafetensors(o.inputs);
    } catch (const rt::RuntimeError &e) {
      userError(e.what());
    }
    for (auto &[name, t] : file->tensors)
      t = toF64(t);
  }

  LoadedObject obj(compiled.object, compiled.program.name);
  const aotc_program &prog = obj.program();
  std::vector<rt::Tensor> inputs = bindInputs(prog, compiled.weights, file ? &*file : nullptr,
                                              o.inputs, &randomInput, o.seed);
  // Random cotangents in [-1, 1] for every differentiable output (abi.h's
  // aotc_output_takes_tangent: a mutated buffer's new value is not differentiated).
  std::vector<std::unique_ptr<rt::Tensor>> cot;
  std::mt19937_64 gen(o.seed + 12345);
  std::uniform_real_distribution<double> uni(-1.0, 1.0);
  for (int i = 0; i < prog.num_outputs; ++i) {
    const aotc_tensor_desc &d = prog.outputs[i];
    if (d.dtype != AOTC_F64 || !aotc_output_takes_tangent(&d)) {
      cot.push_back(nullptr);
      continue;
    }
    auto t = std::make_unique<rt::Tensor>(rt::Tensor::like(d));
    for (int64_t e = 0; e < t->numel(); ++e)
      t->data<double>()[e] = uni(gen);
    cot.push_back(std::move(t));
  }

  rt::DifferentiableFunction f(prog);
  std::vector<const rt::Tensor *> inPtrs, cotPtrs;
  for (const rt::Tensor &t : inputs)
    inPtrs.push_back(&t);
  for (const auto &t : cot)
    cotPtrs.push_back(t.get());
  auto loss = [&]() {
    try {
      return objective(f.forward(inPtrs).outputs, cot);
    } catch (const rt::RuntimeError &e) {
      userError(e.what());
    }
  };

  std::vector<rt::Tensor> grads;
  try {
    auto fwd = f.forward(inPtrs);
    grads = f.backward(fwd.state, cotPtrs);
  } catch (const rt::RuntimeError &e) {
    userError(e.what());
  }

  bool ok = true;
  for (int j = 0; j < prog.num_grads; ++j) {
    int k = prog.grad_input_index[j];
    rt::Tensor &x = inputs[k];
    const int64_t n = x.numel();
    std::vector<int64_t> idx(n);
    for (int64_t e = 0; e < n; ++e)
      idx[e] = e;
    if (n > o.samples) {
      std::mt19937_64 pick(o.seed * 31 + (uint64_t)k);
      std::shuffle(idx.begin(), idx.end(), pick);
      idx.resize(o.samples);
      std::sort(idx.begin(), idx.end());
    }
    double maxAbs = 0, maxRatio = 0;
    int64_t worst = -1, failed = 0;
    for (int64_t e : idx) {
      double &xe = x.data<double>()[e];
      const double saved = xe;
      xe = saved + o.eps;
      double lp = loss();
      xe = saved - o.eps;
      double lm = loss();
      xe = saved;
      double numeric = (lp - lm) / (2 * o.eps);
      double analytic = grads[j].at(e);
      double err = std::fabs(analytic - numeric);
      double ratio = err / (o.atol + o.rtol * std::fabs(numeric));
      if (!(ratio <= 1.0))
        ++failed;
      maxAbs = std::max(maxAbs, err);
      if (!(ratio <= maxRatio) || worst < 0) {
        maxRatio = std::isnan(ratio) ? INFINITY : ratio;
        worst = e;
      }
    }
    ok = ok && failed == 0;
    // err_over_tol = max_e error_e / (atol + rtol |numeric_e|): <= 1 passes.
    std::printf("gradcheck %s: grad of '%s' %s: %zu of %lld elements, max_abs_err=%.3g "
                "max_err_over_tol=%.3g worst_element=%lld %s\n",
                prog.name, prog.inputs[k].name, rt::descTypeString(prog.inputs[k]).c_str(),
                idx.size(), (long long)n, maxAbs, maxRatio, (long long)worst,
                failed ? "FAIL" : "ok");
  }
  if (prog.num_grads == 0)
    std::printf("gradcheck %s: no input requires grad\n", prog.name);
  std::fflush(stdout);
  return ok ? 0 : 1;
}

} // namespace aotc::driver
