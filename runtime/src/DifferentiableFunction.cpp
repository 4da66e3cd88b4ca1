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
#include <cstdio>
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

void checkProgram(const aotc_program *pp) {
  if (!pp) throw RuntimeError("aotc runtime: the program is NULL", AOTC_RT_ERROR_ABI);
  const aotc_program &p = *pp;
  const std::string name = progName(p);
  if (aotc_abi_major(p.abi_version) != AOTC_ABI_MAJOR)
    throw RuntimeError("aotc runtime: program '" + name + "' has ABI version " + std::to_string(aotc_abi_major(p.abi_version)) +
                           "." + std::to_string(aotc_abi_minor(p.abi_version)) + ", this runtime runs major version " +
                           std::to_string(AOTC_ABI_MAJOR) + " (recompile it with the matching aotc; docs/abi.md \"Versions\")",
                       AOTC_RT_ERROR_ABI);
  auto bad = [&](const std::string &why) {
    throw RuntimeError("aotc runtime: program '" + name + "': invalid descriptor (" + why + ")", AOTC_RT_ERROR_ABI);
  };
  auto table = [&](int32_t n, const void *ptr, const char *what) {
    if (n < 0 || (n > 0 && !ptr)) bad(std::string(what) + ": count " + std::to_string(n) + ", null table");
  };
  table(p.num_inputs, p.inputs, "inputs");
  table(p.num_outputs, p.outputs, "outputs");
  table(p.num_grads, p.grads, "grads");
  table(p.num_grads, p.grad_input_index, "grad_input_index");
  table(p.num_errors, p.errors, "errors");
  table(p.num_kernels, p.kernels, "kernels");
  if (p.saved_bytes < 0 || p.scratch_bytes < 0) bad("negative saved_bytes or scratch_bytes");
  // -1: no value (no errors, or a CUDA object's: abi.h).
  if (p.error_value_offset < -1 || (p.error_value_offset >= 0 && p.error_value_offset + 8 > p.scratch_bytes))
    bad("error_value_offset " + std::to_string(p.error_value_offset) + " outside the scratch arena");
  for (int j = 0; j < p.num_grads; ++j)
    if (p.grad_input_index[j] < 0 || p.grad_input_index[j] >= p.num_inputs)
      bad("grad " + std::to_string(j) + " refers to input " + std::to_string(p.grad_input_index[j]));
  for (const auto &list : {std::make_pair(p.inputs, p.num_inputs), std::make_pair(p.outputs, p.num_outputs),
                           std::make_pair(p.grads, p.num_grads)})
    for (int i = 0; i < list.second; ++i) {
      const aotc_tensor_desc &d = list.first[i];
      if (!d.name || d.rank < 0 || (d.rank > 0 && !d.shape) || d.bytes < 0) bad("tensor descriptor " + std::to_string(i));
    }
  for (int i = 0; i < p.num_outputs; ++i)
    if (p.outputs[i].updates_input >= p.num_inputs) bad("output " + std::to_string(i) + " updates a missing input");
  if (!p.context_create || !p.context_destroy) bad("no context functions");
}

ProgramContext openProgram(const aotc_program &p, const char *owner) {
  checkProgram(&p);
  return ProgramContext(p, owner);
}

std::string inputWhat(const aotc_program &p, int i) {
  return std::string(roleWord(p.inputs[i].role)) + " '" + p.inputs[i].name + "' (input " + std::to_string(i) + ")";
}

void tensorDoesNotFit(const aotc_program &p, const aotc_tensor_desc &d, const aotc_rt_tensor &t,
                      const std::string &what) {
  auto typeOf = [](const aotc_rt_tensor &x) {
    std::string s;
    switch (x.dtype) {
    case AOTC_F32: case AOTC_F64: case AOTC_I64: case AOTC_BOOL: case AOTC_I32: case AOTC_U8:
      s = dtypeName((DType)x.dtype);
      break;
    default: s = "dtype " + std::to_string(x.dtype);
    }
    s += "[";
    for (int k = 0; k < x.rank && x.shape; ++k) s += (k ? ", " : "") + std::to_string(x.shape[k]);
    return s + "]";
  };
  if (!t.data && d.bytes != 0) throw RuntimeError(progName(p) + ": " + what + " is null");
  bool same = t.dtype == d.dtype && t.rank == d.rank && (t.rank == 0 || t.shape);
  for (int k = 0; same && k < d.rank; ++k) same = t.shape[k] == d.shape[k];
  if (!same)
    throw RuntimeError(progName(p) + ": " + what + " must be " + descTypeString(d) + ", got " +
                       (t.rank < 0 || (t.rank > 0 && !t.shape) ? std::string("a tensor of rank ") + std::to_string(t.rank) +
                                                                    " without a shape"
                                                              : typeOf(t) + fixedSizeNote(d, t.dtype, t.rank)));
  char low[8];
  std::snprintf(low, sizeof low, "%02x", (unsigned)(reinterpret_cast<uintptr_t>(t.data) & 0xFF));
  throw RuntimeError(progName(p) + ": " + what + " is not " + std::to_string(AOTC_ALIGNMENT) +
                     "-byte aligned (its address ends in 0x" + low + ")");
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
                         (inputs[k] ? inputs[k]->typeString() +
                                          fixedSizeNote(d, (int32_t)inputs[k]->dtype(), (int32_t)inputs[k]->shape().size())
                                    : std::string("null")));
    in[userInputs[k]] = const_cast<void *>(inputs[k]->data());
  }
}

void bindUserInputs(const aotc_program &p, const std::vector<int> &userInputs, std::span<const aotc_rt_tensor> inputs,
                    std::vector<void *> &in, const char *what) {
  if (inputs.size() != userInputs.size())
    throw RuntimeError(progName(p) + ": " + what + " " + std::to_string(userInputs.size()) + " user inputs, got " +
                       std::to_string(inputs.size()));
  for (size_t k = 0; k < inputs.size(); ++k) {
    checkTensor(p, p.inputs[userInputs[k]], inputs[k], [&] { return inputWhat(p, userInputs[k]); });
    in[userInputs[k]] = inputs[k].data;
  }
}

EntryPointError entryPointError(const aotc_program &p, const char *entry, int rc, const void *scratch,
                                int64_t scratchBytes, const aotc_context *ctx) {
  std::string msg = progName(p) + "_" + entry + " failed with code " + std::to_string(rc);
  std::string node, library;
  int64_t value = 0;
  if (rc == AOTC_ERROR_CONTEXT) {
    node = "AOTC_ERROR_CONTEXT: the context is not one of this program's";
    msg += " (" + node + ")";
  } else if (rc == AOTC_ERROR_NULL_ARGUMENT) {
    node = "AOTC_ERROR_NULL_ARGUMENT: an array or area the call needs is NULL";
    msg += " (" + node + ")";
  } else if (rc == AOTC_ERROR_NO_ACCUMULATION) {
    node = "AOTC_ERROR_NO_ACCUMULATION: the object was compiled without --grad-accumulation";
    msg += " (" + node + ")";
  } else if (rc == AOTC_ERROR_COMM) {
    node = "AOTC_ERROR_COMM: the communicator failed (data parallel)";
    msg += " (" + node + ")";
  } else if (rc == AOTC_ERROR_NO_COMM) {
    node = "AOTC_ERROR_NO_COMM: a ZeRO-1 object updates only with a communicator (--data-parallel=zero1)";
    msg += " (" + node + ")";
  } else if (rc > 0 && rc <= p.num_errors && p.errors) {
    node = p.errors[rc - 1] ? p.errors[rc - 1] : "";
    msg += ": " + node;
    // The value of this call: in the caller's scratch arena (abi.h).
    if (p.error_value_offset >= 0 && p.error_value_offset + 8 <= scratchBytes) {
      std::memcpy(&value, static_cast<const uint8_t *>(scratch) + p.error_value_offset, sizeof value);
      msg += " (value " + std::to_string(value) + ")";
    }
    // A library call's failure (ABI 5): the library's own message, kept in the context.
    if (p.context_error)
      if (const char *why = p.context_error(ctx)) {
        library = why;
        msg += ": " + library;
      }
  } else {
    node = "not a documented error code of this program";
    msg += " (" + node + ")";
  }
  return EntryPointError(msg, entry, rc, value, node, library);
}

void throwEntryPointError(const aotc_program &p, const char *entry, int rc, const void *scratch, int64_t scratchBytes,
                          const aotc_context *ctx) {
  throw entryPointError(p, entry, rc, scratch, scratchBytes, ctx);
}

} // namespace detail

namespace {

using detail::progName;
using detail::roleWord;

/// abi.h's aotc_output_takes_tangent.
bool isDifferentiableOutput(const aotc_tensor_desc &d) { return aotc_output_takes_tangent(&d) != 0; }

} // namespace

DifferentiableFunction::DifferentiableFunction(const aotc_program &program) : program_(&program) {
  context_ = detail::openProgram(program, "DifferentiableFunction");
  if (!program.forward || !program.backward)
    throw RuntimeError("aotc runtime: program '" + detail::progName(program) + "' has no forward/backward entry point",
                       AOTC_RT_ERROR_ABI);
  scratch_ = AlignedBuffer(program.scratch_bytes);
  in_.resize(program.num_inputs);
  spareIn_.reserve(program.num_inputs);
  out_.resize(program.num_outputs);
  tangents_.resize(program.num_outputs);
  grads_.resize(program.num_grads);
  defaultTangents_.resize(program.num_outputs);
  for (int i = 0; i < program.num_outputs; ++i) {
    const aotc_tensor_desc &d = program.outputs[i];
    if (isDifferentiableOutput(d))
      defaultTangents_[i] = Tensor::full(dtypeFromAbi(d.dtype), std::vector<int64_t>(d.shape, d.shape + d.rank),
                                         d.rank == 0 && d.updates_input < 0 ? 1.0 : 0.0);
  }
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
                         ", got " + inputs[i]->typeString() +
                         fixedSizeNote(d, (int32_t)inputs[i]->dtype(), (int32_t)inputs[i]->shape().size()));
  }
}

void DifferentiableFunction::entryPointFailed(const char *entry, int rc) const {
  detail::throwEntryPointError(*program_, entry, rc, scratch_.data(), scratch_.size(), context_.get());
}

DifferentiableFunction::ForwardResult
DifferentiableFunction::forward(const std::vector<const Tensor *> &inputs) {
  checkInputs(inputs);
  const aotc_program &p = *program_;
  ForwardResult r;
  r.outputs.reserve(p.num_outputs);
  for (int i = 0; i < p.num_outputs; ++i) {
    r.outputs.push_back(Tensor::like(p.outputs[i]));
    out_[i] = r.outputs.back().data();
  }
  r.state.program_ = &p;
  // One program, one saved_bytes: the spare (empty once moved out) always fits.
  r.state.saved_ = spareSaved_.data() ? std::move(spareSaved_) : AlignedBuffer(p.saved_bytes);
  r.state.inputs_ = std::move(spareIn_); // its capacity: no allocation after the first backward
  r.state.inputs_.clear();
  for (const Tensor *t : inputs)
    r.state.inputs_.push_back(t->data());
  int rc = p.forward(context_.get(), r.state.inputs_.data(), out_.data(), r.state.saved_.data(), scratch_.data());
  if (rc != 0)
    entryPointFailed("forward", rc);
  return r;
}

void DifferentiableFunction::bindTangents(const std::vector<const Tensor *> &outputGrads) {
  const aotc_program &p = *program_;
  if ((int64_t)outputGrads.size() > p.num_outputs)
    throw RuntimeError(std::string(p.name) + ": backward got " + std::to_string(outputGrads.size()) +
                       " output gradients for " + std::to_string(p.num_outputs) + " outputs");
  for (int i = 0; i < p.num_outputs; ++i) {
    const aotc_tensor_desc &d = p.outputs[i];
    const Tensor *g = i < (int)outputGrads.size() ? outputGrads[i] : nullptr;
    aotc_rt_tensor ref{};
    if (g) {
      if (!isDifferentiableOutput(d) || !g->matches(d)) ref = g->ref(); // checked (and refused) below
      else {
        tangents_[i] = g->data();
        continue;
      }
    }
    bindTangents(std::span<const aotc_rt_tensor>(&ref, 1).subspan(0, g ? 1 : 0), i);
  }
}

void DifferentiableFunction::bindTangents(std::span<const aotc_rt_tensor> tangents, int only) {
  const aotc_program &p = *program_;
  if ((int64_t)tangents.size() > p.num_outputs)
    throw RuntimeError(std::string(p.name) + ": backward got " + std::to_string(tangents.size()) +
                       " output gradients for " + std::to_string(p.num_outputs) + " outputs");
  const int lo = only < 0 ? 0 : only, hi = only < 0 ? p.num_outputs : only + 1;
  for (int i = lo; i < hi; ++i) {
    const aotc_tensor_desc &d = p.outputs[i];
    const size_t k = only < 0 ? (size_t)i : 0;
    const aotc_rt_tensor *g = k < tangents.size() && tangents[k].data ? &tangents[k] : nullptr;
    if (!isDifferentiableOutput(d)) {
      if (g)
        throw RuntimeError(std::string(p.name) + ": output '" + d.name + "' (output " + std::to_string(i) + ") is " +
                           (d.updates_input >= 0 ? std::string("the new value of input '") + p.inputs[d.updates_input].name + "'"
                                                 : descTypeString(d)) +
                           ", not differentiable: give it no gradient (nullptr; None in Python)");
      tangents_[i] = nullptr;
      continue;
    }
    if (g) {
      detail::checkTensor(p, d, *g, [&] {
        return "gradient of output '" + std::string(d.name) + "' (output " + std::to_string(i) + ")";
      });
      tangents_[i] = g->data;
    } else {
      tangents_[i] = defaultTangents_[i].data();
    }
  }
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
  bindTangents(outputGrads);
  std::vector<Tensor> grads;
  grads.reserve(p.num_grads);
  for (int j = 0; j < p.num_grads; ++j) {
    grads.push_back(Tensor::like(p.grads[j]));
    grads_[j] = grads.back().data();
  }
  SavedState consumed = std::move(state);
  state = SavedState(); // moved-from states are explicitly invalid
  int rc = p.backward(context_.get(), consumed.inputs_.data(), consumed.saved_.data(), tangents_.data(),
                      grads_.data(), scratch_.data());
  if (rc != 0)
    entryPointFailed("backward", rc);
  spareSaved_ = std::move(consumed.saved_); // the next forward's saved area
  spareIn_ = std::move(consumed.inputs_);
  return grads;
}

void DifferentiableFunction::bindRaw(std::span<const aotc_rt_tensor> in, std::span<const aotc_rt_tensor> out,
                                     const char *entry, bool withOutputs) {
  const aotc_program &p = *program_;
  if ((int64_t)in.size() != p.num_inputs)
    throw RuntimeError(progName(p) + ": " + entry + " expects " + std::to_string(p.num_inputs) + " inputs, got " +
                       std::to_string(in.size()));
  for (int i = 0; i < p.num_inputs; ++i) {
    detail::checkTensor(p, p.inputs[i], in[i], [&] { return detail::inputWhat(p, i); });
    in_[i] = in[i].data;
  }
  if (!withOutputs) return; // backward
  if ((int64_t)out.size() != p.num_outputs)
    throw RuntimeError(progName(p) + ": " + entry + " expects " + std::to_string(p.num_outputs) + " outputs, got " +
                       std::to_string(out.size()));
  for (int i = 0; i < p.num_outputs; ++i) {
    detail::checkTensor(p, p.outputs[i], out[i], [&] {
      return "output '" + std::string(p.outputs[i].name) + "' (output " + std::to_string(i) + ")";
    });
    out_[i] = out[i].data;
  }
}

namespace {

void checkSaved(const aotc_program &p, const void *saved, int64_t savedBytes) {
  if (savedBytes != p.saved_bytes)
    throw RuntimeError(progName(p) + ": the saved area must be " + std::to_string(p.saved_bytes) + " bytes, got " +
                       std::to_string(savedBytes));
  if (p.saved_bytes > 0 && !saved) throw RuntimeError(progName(p) + ": the saved area is null");
  if (reinterpret_cast<uintptr_t>(saved) % AOTC_ALIGNMENT != 0)
    throw RuntimeError(progName(p) + ": the saved area is not " + std::to_string(AOTC_ALIGNMENT) + "-byte aligned");
}

} // namespace

void DifferentiableFunction::forward(std::span<const aotc_rt_tensor> in, std::span<const aotc_rt_tensor> out,
                                     void *saved, int64_t savedBytes) {
  const aotc_program &p = *program_;
  bindRaw(in, out, "forward", true);
  checkSaved(p, saved, savedBytes);
  int rc = p.forward(context_.get(), in_.data(), out_.data(), saved, scratch_.data());
  if (rc != 0) entryPointFailed("forward", rc);
}

void DifferentiableFunction::backward(std::span<const aotc_rt_tensor> in, const void *saved, int64_t savedBytes,
                                      std::span<const aotc_rt_tensor> tangents, std::span<const aotc_rt_tensor> grads) {
  const aotc_program &p = *program_;
  bindRaw(in, {}, "backward", false);
  checkSaved(p, saved, savedBytes);
  bindTangents(tangents, -1);
  if ((int64_t)grads.size() != p.num_grads)
    throw RuntimeError(progName(p) + ": backward expects " + std::to_string(p.num_grads) + " gradients, got " +
                       std::to_string(grads.size()));
  for (int j = 0; j < p.num_grads; ++j) {
    detail::checkTensor(p, p.grads[j], grads[j], [&] {
      return "gradient '" + std::string(p.grads[j].name) + "' (grad " + std::to_string(j) + ")";
    });
    grads_[j] = grads[j].data;
  }
  int rc = p.backward(context_.get(), in_.data(), saved, tangents_.data(), grads_.data(), scratch_.data());
  if (rc != 0) entryPointFailed("backward", rc);
}

void DifferentiableFunction::eval(std::span<const aotc_rt_tensor> in, std::span<const aotc_rt_tensor> out) {
  const aotc_program &p = *program_;
  if (!p.eval)
    throw RuntimeError(progName(p) + ": the object has no eval entry point (a CUDA object's)", AOTC_RT_ERROR_ABI);
  bindRaw(in, out, "eval", true);
  int rc = p.eval(context_.get(), in_.data(), out_.data(), scratch_.data());
  if (rc != 0) entryPointFailed("eval", rc);
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
