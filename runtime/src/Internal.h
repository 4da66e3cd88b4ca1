//===- Internal.h - Shared by the runtime's sources (not installed) -*- C++ -*-===//
#pragma once

#include "aotc/runtime.h"

#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <vector>

namespace aotc::rt::detail {

/// The generated object parallelizes its GEMMs itself (fixed blocks, one BLAS call each,
/// docs/abi.md): a multi-threaded BLAS would change the bits with the thread count, so
/// OpenBLAS (when the process links it) is pinned to one thread.
void pinBlasToOneThread();

/// The EntryPointError of a failed entry point call: `<name>_<entry> failed with code rc`, then
/// the program's error text, the offending value (from `scratch`) and the library's message.
EntryPointError entryPointError(const aotc_program &p, const char *entry, int rc, const void *scratch,
                                int64_t scratchBytes, const aotc_context *ctx);
/// Throws entryPointError(...).
[[noreturn]] void throwEntryPointError(const aotc_program &p, const char *entry, int rc, const void *scratch,
                                       int64_t scratchBytes, const aotc_context *ctx);

/// RuntimeError (kind AOTC_RT_ERROR_ABI) for NULL, another ABI major version or an invalid
/// descriptor (negative counts, NULL tables, indices out of range, no context functions).
void checkProgram(const aotc_program *p);

/// "parameter 'fc1.weight' (input 0)".
std::string inputWhat(const aotc_program &p, int i);

/// True when t is of d's dtype and shape, 64-byte aligned, and non-NULL unless d holds no bytes
/// (torch's empty tensors have data_ptr() 0; entry points never touch a 0-byte buffer).
inline bool tensorFits(const aotc_tensor_desc &d, const aotc_rt_tensor &t) {
  if ((!t.data && d.bytes != 0) || t.dtype != d.dtype || t.rank != d.rank || (t.rank > 0 && !t.shape) ||
      reinterpret_cast<uintptr_t>(t.data) % AOTC_ALIGNMENT != 0)
    return false;
  for (int k = 0; k < d.rank; ++k)
    if (t.shape[k] != d.shape[k]) return false;
  return true;
}
/// The RuntimeError of a tensor that does not fit: "<program>: <what> is null / must be f32[4],
/// got f64[4] / is not 64-byte aligned (...)".
[[noreturn]] void tensorDoesNotFit(const aotc_program &p, const aotc_tensor_desc &d, const aotc_rt_tensor &t,
                                   const std::string &what);
/// RuntimeError naming what() unless t fits d; what() is only called (and its string only
/// built) on failure, so a call that passes allocates nothing.
template <class What>
void checkTensor(const aotc_program &p, const aotc_tensor_desc &d, const aotc_rt_tensor &t, What &&what) {
  if (!tensorFits(d, t)) tensorDoesNotFit(p, d, t, what());
}

/// "parameter", "buffer", "input", ... (abi.h roles, for messages).
const char *roleWord(int32_t role);

/// The program's name for messages ("?" when the descriptor has none).
inline std::string progName(const aotc_program &p) { return p.name ? p.name : "?"; }

/// RuntimeError unless the program was compiled for this runtime's ABI and has context
/// functions; returns a new context of it (profiled when setProfile / AOTC_PROFILE say so).
ProgramContext openProgram(const aotc_program &p, const char *owner);

/// Checks `inputs` against the program's user inputs `userInputs` (indices into p.inputs, in
/// order; RuntimeError naming the first mismatch, `what` as in "a step takes 2 user inputs")
/// and points in[userInputs[k]] at inputs[k] (read only: user inputs are never written).
void bindUserInputs(const aotc_program &p, const std::vector<int> &userInputs, std::span<const Tensor *const> inputs,
                    std::vector<void *> &in, const char *what);
/// The same for caller-owned buffers (checkTensor: also NULL and alignment).
void bindUserInputs(const aotc_program &p, const std::vector<int> &userInputs, std::span<const aotc_rt_tensor> inputs,
                    std::vector<void *> &in, const char *what);

} // namespace aotc::rt::detail
