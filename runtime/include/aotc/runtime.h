//===- runtime.h - Calling aotc-generated training steps from C++ -*- C++ -*-===//
//
// The C++ side of the ABI in aotc/abi.h. A user links the object emitted by
// `aotc IN -o OUT.o` with this library (aotc_runtime) and:
//
//   #include "OUT.h"              // declares extern const aotc_program <name>_program
//   #include "aotc/runtime.h"
//   aotc::rt::DifferentiableFunction f(mlp_program);
//   auto fwd = f.forward({&w1, &b1, &w2, &b2, &x, &target});   // fwd.outputs[0] = loss
//   auto grads = f.backward(fwd.state, {});                     // ones as the loss cotangent
//   aotc::rt::sgdStep({&w1, &b1, &w2, &b2}, grads, 0.1);
//   f.writeBack({&w1, ...}, fwd.outputs);   // mutated buffers (batch norm's statistics), if any
//
// Everything lives in namespace aotc::rt (the compiler's own aotc::DType and
// friends are a different, compiler-side type). This library never includes lib/.
//
// Errors: every misuse (wrong shape or dtype, wrong number of tensors, a saved state
// used twice) and every non-zero return code of an entry point throws
// aotc::rt::RuntimeError with a message naming the tensor, or the node and the
// offending value (from aotc_program::errors / error_value).
//===----------------------------------------------------------------------===//
#pragma once

#include "aotc/abi.h"
#include "aotc/capi.h"

#include <cstddef>
#include <cstdint>
#include <memory>
#include <span>
#include <stdexcept>
#include <string>
#include <vector>

namespace aotc::rt {

/// What the runtime throws. The message is complete (no prefix needs adding). kind() is the
/// C API's status (capi.h aotc_rt_status) the error maps to.
class RuntimeError : public std::runtime_error {
public:
  explicit RuntimeError(const std::string &message, aotc_rt_status kind = AOTC_RT_ERROR_ARGUMENT)
      : std::runtime_error(message), kind_(kind) {}
  aotc_rt_status kind() const { return kind_; }

private:
  aotc_rt_status kind_;
};

/// An entry point returned non-zero (kind AOTC_RT_ERROR_PROGRAM): abi.h's code, the offending
/// value of that call, the descriptor's message for the code and the library's text.
class EntryPointError : public RuntimeError {
public:
  EntryPointError(const std::string &message, std::string entry, int code, int64_t value, std::string nodeMessage,
                  std::string libraryMessage)
      : RuntimeError(message, AOTC_RT_ERROR_PROGRAM), entry(std::move(entry)), code(code), value(value),
        nodeMessage(std::move(nodeMessage)), libraryMessage(std::move(libraryMessage)) {}
  std::string entry; ///< "forward", "backward", "eval", "train_step"
  int code;
  int64_t value;
  std::string nodeMessage, libraryMessage;
};

/// Element types of the ABI, numerically equal to aotc_dtype.
enum class DType : int32_t {
  F32 = AOTC_F32,
  F64 = AOTC_F64,
  I64 = AOTC_I64,
  Bool = AOTC_BOOL,
  I32 = AOTC_I32,
  U8 = AOTC_U8
};

/// Bytes per element: 4, 8, 8, 1, 4, 1 (bool is one byte, as in PyTorch).
int64_t itemSize(DType dt);
/// FX spelling "f32", "f64", "i64", "b8", "i32", "u8" (used in messages).
const char *dtypeName(DType dt);
/// safetensors spelling "F32", "F64", "I64", "BOOL".
const char *safetensorsDTypeName(DType dt);
/// Converts an aotc_dtype value; throws RuntimeError for an unknown value.
DType dtypeFromAbi(int32_t abiDType);
/// "f32[64, 784]" (FX annotation spelling).
std::string typeString(DType dt, const std::vector<int64_t> &shape);

/// An owning, zero-initialized byte buffer aligned to AOTC_ALIGNMENT (64) bytes.
/// Move-only. A zero-byte buffer still has a valid, aligned, non-null pointer.
class AlignedBuffer {
public:
  AlignedBuffer() = default;
  /// Allocates `bytes` bytes (rounded up internally to a multiple of 64) filled with 0.
  explicit AlignedBuffer(int64_t bytes);
  AlignedBuffer(AlignedBuffer &&) noexcept = default;
  AlignedBuffer &operator=(AlignedBuffer &&) noexcept = default;

  uint8_t *data() { return ptr_.get(); }
  const uint8_t *data() const { return ptr_.get(); }
  int64_t size() const { return size_; }
  /// Fills every byte with `byte` (0xFF bytes read as NaN in f32 and f64).
  void fill(uint8_t byte);

private:
  struct Free {
    void operator()(uint8_t *p) const;
  };
  std::unique_ptr<uint8_t, Free> ptr_;
  int64_t size_ = 0;
};

/// A dense, row-major tensor owning 64-byte aligned storage.
class Tensor {
public:
  Tensor() = default;
  /// A zero-filled tensor. Throws RuntimeError for a negative dimension.
  Tensor(DType dtype, std::vector<int64_t> shape);
  /// A tensor with the given raw little-endian bytes; `bytes` must be numel*itemsize long.
  static Tensor fromBytes(DType dtype, std::vector<int64_t> shape, const void *bytes,
                          int64_t numBytes);
  /// A zero-filled tensor with the descriptor's dtype and shape.
  static Tensor like(const aotc_tensor_desc &desc);
  /// A tensor of the given dtype/shape filled with `value` (converted; bool: value != 0).
  static Tensor full(DType dtype, std::vector<int64_t> shape, double value);

  DType dtype() const { return dtype_; }
  const std::vector<int64_t> &shape() const { return shape_; }
  int64_t rank() const { return (int64_t)shape_.size(); }
  int64_t numel() const { return numel_; }
  int64_t bytes() const { return numel_ * itemSize(dtype_); }
  void *data() { return buf_.data(); }
  const void *data() const { return buf_.data(); }
  template <class T> T *data() { return reinterpret_cast<T *>(buf_.data()); }
  template <class T> const T *data() const { return reinterpret_cast<const T *>(buf_.data()); }
  /// Element i converted to double (any dtype).
  double at(int64_t i) const;
  /// "f32[64, 784]".
  std::string typeString() const { return rt::typeString(dtype_, shape_); }
  /// True when dtype and shape equal the descriptor's.
  bool matches(const aotc_tensor_desc &desc) const;
  /// A deep copy.
  Tensor clone() const;
  /// A non-owning view for the raw calls (capi.h aotc_rt_tensor); valid while *this lives.
  aotc_rt_tensor ref() const {
    return {const_cast<void *>(data()), (int32_t)dtype_, (int32_t)shape_.size(), shape_.data()};
  }

private:
  DType dtype_ = DType::F32;
  std::vector<int64_t> shape_;
  int64_t numel_ = 1;
  AlignedBuffer buf_;
};

/// The dtype/shape of a descriptor as "f32[64, 784]".
std::string descTypeString(const aotc_tensor_desc &desc);
/// " (a user input's sizes were fixed when the model was exported ...)": what a size mismatch
/// of a user input adds to its message (same dtype and rank as `desc`, other sizes); "" for
/// any other mismatch or role.
std::string fixedSizeNote(const aotc_tensor_desc &desc, int32_t dtype, int32_t rank);

namespace detail {
struct Profile;
}

/// The profile switch (docs/profiling.md). Read when a context is created; "" (the default)
/// means the environment's AOTC_PROFILE: unset, "" or "0" no profile; "1" a text report on
/// stderr; any other value a file that gets one JSON line per profiled context. A profiled
/// context's kernels are timed (abi.h aotc_profile_attach_fn) and the report is written when
/// the context is destroyed (its owner, a DifferentiableFunction, Trainer or Evaluator, is).
void setProfile(const std::string &spec);
/// Zeroes the counters of every live profiled context: call it after warm-up steps so that the
/// report leaves out the first calls (oneDNN's primitive creation, first-touch page faults).
/// Call it while no entry point runs on any thread: the objects add to the counters unlocked.
void resetProfiles();

/// An ABI context of one program (abi.h) and, when profiling is on, its counters and report.
class ProgramContext {
public:
  ProgramContext() noexcept;
  /// Creates the context (RuntimeError: out of memory); `owner` names the runtime class for
  /// the report ("Trainer", ...).
  ProgramContext(const aotc_program &program, const char *owner);
  ProgramContext(ProgramContext &&o) noexcept;
  ProgramContext &operator=(ProgramContext &&o) noexcept;
  ProgramContext(const ProgramContext &) = delete;
  ProgramContext &operator=(const ProgramContext &) = delete;
  ~ProgramContext(); ///< Writes the profile report (if any), then destroys the context.
  aotc_context *get() const { return ctx_; }
  explicit operator bool() const { return ctx_ != nullptr; }

private:
  void close() noexcept;
  const aotc_program *program_ = nullptr;
  aotc_context *ctx_ = nullptr;
  std::unique_ptr<detail::Profile> profile_;
};


/// What forward() hands to backward() (autograd's "ctx"): the saved area written by the
/// forward and the (non-owned) inputs it ran on. The inputs must stay alive and unchanged
/// until backward() (the backward receives them again, per the ABI). A saved state can be
/// consumed by backward() exactly once; it is move-only. Not to be confused with the ABI
/// context (aotc_context, abi.h), which a DifferentiableFunction owns: library state kept
/// across calls.
class SavedState {
public:
  SavedState() = default;
  SavedState(SavedState &&) noexcept = default;
  SavedState &operator=(SavedState &&) noexcept = default;
  /// False after backward() consumed it, or for a default-constructed state.
  bool valid() const { return program_ != nullptr; }
  /// The saved area (saved_bytes bytes).
  const AlignedBuffer &saved() const { return saved_; }

private:
  friend class DifferentiableFunction;
  const aotc_program *program_ = nullptr;
  AlignedBuffer saved_;
  std::vector<const void *> inputs_;
};

/// A compiled training step: forward + backward of one aotc_program.
/// Owns the program's ABI context (created once, in the constructor) and the scratch
/// arena (reused by every call), so one instance is not thread-safe; use one instance
/// per thread. Two ways to call it: on Tensors (outputs, saved area and gradients are
/// allocated and returned; the saved area is recycled, below), or on caller-owned buffers
/// (aotc_rt_tensor, capi.h; what the C API and Python call), which allocates nothing: the
/// pointer tables and the default cotangents are made in the constructor. Saved states are independent: any number of forwards may be outstanding
/// and their backwards may run in any order. The saved area of the last state backward()
/// consumed is kept and handed to the next forward(), not zeroed (the forward writes every
/// saved tensor before the backward reads it): a step-after-step loop allocates no saved
/// area after the first (nanoGPT large: 105 MB, whose fresh pages were 12 % of the step).
class DifferentiableFunction {
public:
  /// Throws RuntimeError when the program's ABI major version differs from AOTC_ABI_MAJOR
  /// (abi.h "Versions"), its descriptor is invalid, or its context cannot be created.
  explicit DifferentiableFunction(const aotc_program &program);

  const aotc_program &program() const { return *program_; }
  int numInputs() const { return program_->num_inputs; }
  int numOutputs() const { return program_->num_outputs; }
  int numGrads() const { return program_->num_grads; }
  /// Index of the input named `name` (FQN for parameters); -1 when absent.
  int inputIndex(const std::string &name) const;
  /// Index into grads of the gradient of input `name`; -1 when it has none.
  int gradIndex(const std::string &name) const;

  struct ForwardResult {
    std::vector<Tensor> outputs; ///< One per program output, in order.
    SavedState state;            ///< Pass to backward().
  };
  /// Runs <name>_forward. `inputs[i]` is the i-th program input; each must match
  /// its descriptor exactly (dtype and shape), else RuntimeError naming it.
  ForwardResult forward(const std::vector<const Tensor *> &inputs);

  /// Runs <name>_backward with the saved state of an earlier forward. `outputGrads[i]`
  /// is the cotangent of output i (same dtype/shape); it may be shorter than the
  /// number of outputs or hold nullptr: a missing cotangent of a floating output
  /// is ones for a 0-d output (a loss) and zeros otherwise; outputs that are not
  /// differentiable (non-floating, or a mutated input's new value) get NULL. Returns one gradient per program grad (grads[j] belongs to input
  /// grad_input_index[j]). Consumes `state` (RuntimeError if already consumed).
  std::vector<Tensor> backward(SavedState &state, const std::vector<const Tensor *> &outputGrads = {});

  /// The mutated inputs' new values: copies each output i with outputs[i].updates_input = k
  /// (abi.h; batch norm's running_mean, running_var, num_batches_tracked) into *inputs[k], as
  /// PyTorch's in-place update of the buffer would. Call it after backward(): the backward
  /// reads the values the forward ran on. `inputs` are the forward's inputs (the same list, now
  /// mutable), `outputs` its ForwardResult::outputs. Returns how many inputs were written.
  int writeBack(const std::vector<Tensor *> &inputs, const std::vector<Tensor> &outputs) const;

  /// The raw calls on caller-owned buffers (capi.h aotc_rt_forward / _backward / _eval, whose
  /// comments give the rules): every tensor is checked (count, NULL, dtype, shape, 64-byte
  /// alignment; RuntimeError naming it) before anything runs. They allocate nothing.
  void forward(std::span<const aotc_rt_tensor> in, std::span<const aotc_rt_tensor> out, void *saved,
               int64_t savedBytes);
  void backward(std::span<const aotc_rt_tensor> in, const void *saved, int64_t savedBytes,
                std::span<const aotc_rt_tensor> tangents, std::span<const aotc_rt_tensor> grads);
  void eval(std::span<const aotc_rt_tensor> in, std::span<const aotc_rt_tensor> out);

  /// Fills the scratch arena, and the kept saved area the next forward reuses, with 0xFF
  /// bytes (NaN for f32/f64). Test hook: the ABI promises scratch need not survive between
  /// calls, and that a forward writes every saved tensor before the backward reads it.
  void poisonScratch() {
    scratch_.fill(0xFF);
    if (spareSaved_.data()) spareSaved_.fill(0xFF);
  }

private:
  void checkInputs(const std::vector<const Tensor *> &inputs) const;
  void bindRaw(std::span<const aotc_rt_tensor> in, std::span<const aotc_rt_tensor> out, const char *entry,
               bool withOutputs);
  void bindTangents(std::span<const aotc_rt_tensor> tangents, int only);
  void bindTangents(const std::vector<const Tensor *> &outputGrads);
  [[noreturn]] void entryPointFailed(const char *entry, int rc) const;

  const aotc_program *program_;
  ProgramContext context_;
  AlignedBuffer scratch_;
  AlignedBuffer spareSaved_;          ///< The last consumed state's saved area (empty: none).
  std::vector<const void *> spareIn_; ///< Its input table (capacity num_inputs).
  std::vector<const void *> in_, tangents_;
  std::vector<void *> out_, grads_;
  std::vector<Tensor> defaultTangents_; ///< Per output: 1 (0-d) or zeros; empty if not differentiable.
};

/// The RNG state input (AOTC_ROLE_RNG_STATE) of a program that draws random numbers: an
/// int64[2] tensor {seed, 0}. Each step returns the advanced state as an output whose
/// updates_input is this input; writeBack() copies it in, so the next step draws new bits.
/// The same seed gives the same bits on every target and thread count (docs/randomness.md).
Tensor rngState(uint64_t seed);
/// Index of the program's RNG state input, or -1 when the program draws no random numbers.
int rngStateIndex(const aotc_program &program);

/// Plain SGD: p <- p - lr * g for every pair (f32 or f64; computed in the
/// tensor's own precision, as torch.optim.SGD without momentum/weight decay).
/// Throws RuntimeError when the lists differ in length or a pair differs in
/// dtype/shape, or a parameter is not floating.
void sgdStep(const std::vector<Tensor *> &params, const std::vector<const Tensor *> &grads,
             double lr);
/// Convenience overload for the vector backward() returns.
void sgdStep(const std::vector<Tensor *> &params, const std::vector<Tensor> &grads, double lr);

} // namespace aotc::rt
