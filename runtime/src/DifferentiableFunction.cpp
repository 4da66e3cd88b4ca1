//===- DifferentiableFunction.cpp - forward/backward over an aotc_program ---===//
//
// This file implements DifferentiableFunction (runtime.h): it checks the
// caller's tensors against the program's descriptors, allocates outputs, the
// per-call saved area and gradients, calls the generated entry points and turns
// their error codes into exceptions naming the node and the offending value.
// It also implements sgdStep.
//===----------------------------------------------------------------------===//
#include "aotc/runtime.h"

#include "Internal.h"

#include <cmath>
#include <cstddef>
#include <cstring>

// The CUDA entry points read these two fields at fixed offsets (lib/Codegen/CudaHost.cpp).
static_assert(offsetof(aotc_cuda_exec, error_word) == 40, "aotc_cuda_exec layout");
static_assert(offsetof(aotc_cuda_exec, host_error_value) == 56, "aotc_cuda_exec layout");

/// OpenBLAS's thread-count setter, when the process links OpenBLAS (weak: any
/// other CBLAS works too and the call is then skipped).
extern "C" void openblas_set_num_threads(int) __attribute__((weak));

namespace aotc::rt {

namespace detail {

const char *roleWord(int32_t role) {
  switch (role) {
  case AOTC_ROLE_PARAMETER: return "parameter";
  case AOTC_ROLE_BUFFER: return "buffer";
  case AOTC_ROLE_CONSTANT: return "constant";
  case AOTC_ROLE_RNG_STATE: return "rng state";
  case AOTC_ROLE_USER_INPUT: return "input";
  case AOTC_ROLE_OUTPUT: return "output";
  case AOTC_ROLE_GRAD: return "gradient";
  }
  return "tensor";
}

std::unique_ptr<aotc_context, aotc_context_destroy_fn> openProgram(const aotc_program &p) {
  const std::string name = progName(p);
  if (p.abi_version != AOTC_ABI_VERSION)
    throw RuntimeError("aotc runtime: program '" + name + "' has ABI version " + std::to_string(p.abi_version) +
                       ", this runtime expects " + std::to_string(AOTC_ABI_VERSION) +
                       " (recompile it with the matching aotc)");
  if (!p.context_create || !p.context_destroy)
    throw RuntimeError("aotc runtime: program '" + name + "' has no context functions");
  std::unique_ptr<aotc_context, aotc_context_destroy_fn> ctx{p.context_create(), p.context_destroy};
  if (!ctx) throw RuntimeError("aotc runtime: " + name + "_context_create failed (out of memory)");
  return ctx;
}

void pinBlasToOneThread() {
  if (openblas_set_num_threads)
    openblas_set_num_threads(1);
}

void bindUserInputs(const aotc_program &p, const std::vector<int> &userInputs, std::span<const Tensor *const> inputs,
                    std::vector<void *> &in, const char *what) {
  if (inputs.size() != userInputs.size())
    throw RuntimeError(progName(p) + ": " + what + " " + std::to_string(userInputs.size()) + " user inputs, got " +
                       std::to_string(inputs.size()));
  for (size_t k = 0; k < inputs.size(); ++k) {
    const aotc_tensor_desc &d = p.inputs[userInputs[k]];
    if (!inputs[k] || !inputs[k]->matches(d))
      throw RuntimeError(progName(p) + ": input '" + d.name + "' must be " + descTypeString(d) + ", got " +
                         (inputs[k] ? inputs[k]->typeString() : std::string("null")));
    in[userInputs[k]] = const_cast<void *>(inputs[k]->data());
  }
}

std::string entryPointError(const aotc_program &p, const char *entry, int rc, const void *scratch,
                            int64_t scratchBytes, const aotc_context *ctx) {
  std::string msg = std::string(p.name) + "_" + entry + " failed with code " + std::to_string(rc);
  if (rc == AOTC_ERROR_CONTEXT) {
    msg += " (AOTC_ERROR_CONTEXT: the context is not one of this program's)";
  } else if (rc == AOTC_ERROR_NO_ACCUMULATION) {
    msg += " (AOTC_ERROR_NO_ACCUMULATION: the object was compiled without --grad-accumulation)";
  } else if (rc > 0 && rc <= p.num_errors && p.errors) {
    msg += ": ";
    msg += p.errors[rc - 1];
    // The value of this call: in the caller's scratch arena (abi.h).
    if (p.error_value_offset >= 0 && p.error_value_offset + 8 <= scratchBytes) {
      int64_t v;
      std::memcpy(&v, static_cast<const uint8_t *>(scratch) + p.error_value_offset, sizeof v);
      msg += " (value " + std::to_string(v) + ")";
    }
    // A library call's failure (ABI 5): the library's own message, kept in the context.
    if (p.context_error)
      if (const char *why = p.context_error(ctx))
        msg += std::string(": ") + why;
  } else {
    msg += " (not a documented error code of this program)";
  }
  return msg;
}

} // namespace detail

namespace {

using detail::roleWord;

bool isFloatingAbi(int32_t dtype) { return dtype == AOTC_F32 || dtype == AOTC_F64; }

/// abi.h: an output has a tangent when it is floating and not a mutated input's new value.
bool isDifferentiableOutput(const aotc_tensor_desc &d) { return isFloatingAbi(d.dtype) && d.updates_input < 0; }

} // namespace

DifferentiableFunction::DifferentiableFunction(const aotc_program &program) : program_(&program) {
  if (!program.forward || !program.backward)
    throw RuntimeError("aotc runtime: program '" + detail::progName(program) + "' has no forward/backward entry point");
  context_ = detail::openProgram(program);
  scratch_ = AlignedBuffer(program.scratch_bytes);
  detail::pinBlasToOneThread();
}

int DifferentiableFunction::inputIndex(const std::string &name) const {
  for (int i = 0; i < program_->num_inputs; ++i)
    if (name == program_->inputs[i].name)
      return i;
  return -1;
}

int DifferentiableFunction::gradIndex(const std::string &name) const {
  int in = inputIndex(name);
  for (int j = 0; j < program_->num_grads; ++j)
    if (program_->grad_input_index[j] == in)
      return j;
  return -1;
}

void DifferentiableFunction::checkInputs(const std::vector<const Tensor *> &inputs) const {
  const aotc_program &p = *program_;
  if ((int64_t)inputs.size() != p.num_inputs)
    throw RuntimeError(std::string(p.name) + ": forward expects " + std::to_string(p.num_inputs) +
                       " inputs, got " + std::to_string(inputs.size()));
  for (int i = 0; i < p.num_inputs; ++i) {
    const aotc_tensor_desc &d = p.inputs[i];
    if (!inputs[i])
      throw RuntimeError(std::string(p.name) + ": " + roleWord(d.role) + " '" + d.name +
                         "' (input " + std::to_string(i) + ") is null");
    if (!inputs[i]->matches(d))
      throw RuntimeError(std::string(p.name) + ": " + roleWord(d.role) + " '" + d.name +
                         "' (input " + std::to_string(i) + ") must be " + descTypeString(d) +
                         ", got " + inputs[i]->typeString());
  }
}

void DifferentiableFunction::entryPointFailed(const char *entry, int rc) const {
  throw RuntimeError(detail::entryPointError(*program_, entry, rc, scratch_.data(), scratch_.size(), context_.get()));
}

DifferentiableFunction::ForwardResult
DifferentiableFunction::forward(const std::vector<const Tensor *> &inputs) {
  checkInputs(inputs);
  const aotc_program &p = *program_;
  ForwardResult r;
  r.outputs.reserve(p.num_outputs);
  std::vector<void *> outPtrs;
  for (int i = 0; i < p.num_outputs; ++i) {
    r.outputs.push_back(Tensor::like(p.outputs[i]));
    outPtrs.push_back(r.outputs.back().data());
  }
  r.state.program_ = &p;
  // One program, one saved_bytes: the spare (empty once moved out) always fits.
  r.state.saved_ = spareSaved_.data() ? std::move(spareSaved_) : AlignedBuffer(p.saved_bytes);
  for (const Tensor *t : inputs)
    r.state.inputs_.push_back(t->data());
  int rc = p.forward(context_.get(), r.state.inputs_.data(), outPtrs.data(), r.state.saved_.data(),
                     scratch_.data());
  if (rc != 0)
    entryPointFailed("forward", rc);
  return r;
}

std::vector<Tensor> DifferentiableFunction::backward(SavedState &state,
                                                     const std::vector<const Tensor *> &outputGrads) {
  const aotc_program &p = *program_;
  if (!state.valid())
    throw RuntimeError(std::string(p.name) +
                       ": backward needs a saved state from forward() that was not consumed yet");
  if (state.program_ != &p)
    throw RuntimeError(std::string(p.name) + ": the saved state comes from program '" +
                       state.program_->name + "'");
  if ((int64_t)outputGrads.size() > p.num_outputs)
    throw RuntimeError(std::string(p.name) + ": backward got " + std::to_string(outputGrads.size()) +
                       " output gradients for " + std::to_string(p.num_outputs) + " outputs");
  std::vector<Tensor> defaults;
  defaults.reserve(p.num_outputs);
  std::vector<const void *> tangents(p.num_outputs, nullptr);
  for (int i = 0; i < p.num_outputs; ++i) {
    const aotc_tensor_desc &d = p.outputs[i];
    const Tensor *g = i < (int)outputGrads.size() ? outputGrads[i] : nullptr;
    if (!isDifferentiableOutput(d)) {
      if (g)
        throw RuntimeError(std::string(p.name) + ": output '" + d.name + "' (output " +
                           std::to_string(i) + ") is " +
                           (d.updates_input >= 0 ? std::string("the new value of input '") +
                                                       p.inputs[d.updates_input].name + "'"
                                                 : descTypeString(d)) +
                           ", not differentiable; pass nullptr as its gradient");
      continue;
    }
    if (g) {
      if (!g->matches(d))
        throw RuntimeError(std::string(p.name) + ": gradient of output '" + d.name + "' (output " +
                           std::to_string(i) + ") must be " + descTypeString(d) + ", got " +
                           g->typeString());
      tangents[i] = g->data();
    } else {
      defaults.push_back(Tensor::full(dtypeFromAbi(d.dtype),
                                      std::vector<int64_t>(d.shape, d.shape + d.rank),
                                      d.rank == 0 ? 1.0 : 0.0));
      tangents[i] = defaults.back().data();
    }
  }
  std::vector<Tensor> grads;
  std::vector<void *> gradPtrs;
  grads.reserve(p.num_grads);
  for (int j = 0; j < p.num_grads; ++j) {
    grads.push_back(Tensor::like(p.grads[j]));
    gradPtrs.push_back(grads.back().data());
  }
  SavedState consumed = std::move(state);
  state = SavedState(); // moved-from states are explicitly invalid
  int rc = p.backward(context_.get(), consumed.inputs_.data(), consumed.saved_.data(), tangents.data(),
                      gradPtrs.data(), scratch_.data());
  if (rc != 0)
    entryPointFailed("backward", rc);
  spareSaved_ = std::move(consumed.saved_); // the next forward's saved area
  return grads;
}

int DifferentiableFunction::writeBack(const std::vector<Tensor *> &inputs,
                                      const std::vector<Tensor> &outputs) const {
  const aotc_program &p = *program_;
  if ((int64_t)inputs.size() != p.num_inputs || (int64_t)outputs.size() != p.num_outputs)
    throw RuntimeError(std::string(p.name) + ": writeBack needs " + std::to_string(p.num_inputs) +
                       " inputs and " + std::to_string(p.num_outputs) + " outputs, got " +
                       std::to_string(inputs.size()) + " and " + std::to_string(outputs.size()));
  int written = 0;
  for (int i = 0; i < p.num_outputs; ++i) {
    int k = p.outputs[i].updates_input;
    if (k < 0) continue;
    if (k >= p.num_inputs || !inputs[k])
      throw RuntimeError(std::string(p.name) + ": output " + std::to_string(i) + " updates input " +
                         std::to_string(k) + ", which is " + (k >= p.num_inputs ? "out of range" : "null"));
    const aotc_tensor_desc &d = p.inputs[k];
    if (!inputs[k]->matches(d) || !outputs[i].matches(d))
      throw RuntimeError(std::string(p.name) + ": writeBack of " + roleWord(d.role) + " '" + d.name +
                         "' needs " + descTypeString(d) + ", got input " + inputs[k]->typeString() +
                         " and output " + outputs[i].typeString());
    std::memcpy(inputs[k]->data(), outputs[i].data(), (size_t)d.bytes);
    ++written;
  }
  return written;
}

namespace {

// p[k] = fma(g[k], alpha, p[k]): exact (one rounding) on every machine. Built for the FMA
// instruction set too and picked at run time, because without it std::fma is a libm call
// per element (it was ~40 % of the MLP's training step); both paths give the same bits.
template <typename T> void axpyFmaGeneric(T *p, const T *g, T alpha, int64_t n) {
  for (int64_t k = 0; k < n; ++k)
    p[k] = std::fma(g[k], alpha, p[k]);
}

#if defined(__x86_64__) && (defined(__clang__) || defined(__GNUC__))
template <typename T> __attribute__((target("fma,avx2"))) void axpyFmaHw(T *__restrict p, const T *__restrict g, T alpha, int64_t n) {
  for (int64_t k = 0; k < n; ++k)
    p[k] = std::fma(g[k], alpha, p[k]);
}
#endif

template <typename T> void axpyFma(T *p, const T *g, T alpha, int64_t n) {
#if defined(__x86_64__) && (defined(__clang__) || defined(__GNUC__))
  static const bool hw = __builtin_cpu_supports("fma") && __builtin_cpu_supports("avx2");
  if (hw) return axpyFmaHw(p, g, alpha, n);
#endif
  axpyFmaGeneric(p, g, alpha, n);
}

} // namespace

Tensor rngState(uint64_t seed) {
  Tensor t(DType::I64, {2});
  t.data<int64_t>()[0] = (int64_t)seed;
  t.data<int64_t>()[1] = 0;
  return t;
}

int rngStateIndex(const aotc_program &program) {
  for (int i = 0; i < program.num_inputs; ++i)
    if (program.inputs[i].role == AOTC_ROLE_RNG_STATE) return i;
  return -1;
}

void sgdStep(const std::vector<Tensor *> &params, const std::vector<const Tensor *> &grads,
             double lr) {
  if (params.size() != grads.size())
    throw RuntimeError("sgdStep: " + std::to_string(params.size()) + " parameters but " +
                       std::to_string(grads.size()) + " gradients");
  for (size_t i = 0; i < params.size(); ++i) {
    Tensor *p = params[i];
    const Tensor *g = grads[i];
    if (!p || !g)
      throw RuntimeError("sgdStep: parameter/gradient " + std::to_string(i) + " is null");
    if (p->dtype() != g->dtype() || p->shape() != g->shape())
      throw RuntimeError("sgdStep: parameter " + std::to_string(i) + " is " + p->typeString() +
                         " but its gradient is " + g->typeString());
    if (p->dtype() == DType::F32) {
      float *pd = p->data<float>();
      const float *gd = g->data<float>();
      // torch.optim.SGD on CPU (foreach=False): param.add_(grad, alpha=-lr); ATen's
      // vectorized add kernel computes fmadd(grad, alpha, param) in float.
      axpyFma(pd, gd, (float)-lr, p->numel());
    } else if (p->dtype() == DType::F64) {
      double *pd = p->data<double>();
      const double *gd = g->data<double>();
      axpyFma(pd, gd, -lr, p->numel());
    } else {
      throw RuntimeError("sgdStep: parameter " + std::to_string(i) + " is " + p->typeString() +
                         ", not floating");
    }
  }
}

void sgdStep(const std::vector<Tensor *> &params, const std::vector<Tensor> &grads, double lr) {
  std::vector<const Tensor *> g;
  for (const Tensor &t : grads)
    g.push_back(&t);
  sgdStep(params, g, lr);
}

} // namespace aotc::rt
