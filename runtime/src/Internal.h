//===- Internal.h - Shared by the runtime's sources (not installed) -*- C++ -*-===//
#pragma once

#include "aotc/runtime.h"

#include <memory>
#include <span>
#include <string>
#include <vector>

namespace aotc::rt::detail {

/// The generated object parallelizes its GEMMs itself (fixed blocks, one BLAS call each,
/// docs/abi.md): a multi-threaded BLAS would change the bits with the thread count, so
/// OpenBLAS (when the process links it) is pinned to one thread.
void pinBlasToOneThread();

/// The message of a failed entry point call: `<name>_<entry> failed with code rc`, then the
/// program's error text, the offending value (from `scratch`) and the library's message.
std::string entryPointError(const aotc_program &p, const char *entry, int rc, const void *scratch,
                            int64_t scratchBytes, const aotc_context *ctx);

/// "parameter", "buffer", "input", ... (abi.h roles, for messages).
const char *roleWord(int32_t role);

/// The program's name for messages ("?" when the descriptor has none).
inline std::string progName(const aotc_program &p) { return p.name ? p.name : "?"; }

/// RuntimeError unless the program was compiled for this runtime's ABI and has context
/// functions; returns a new context of it.
std::unique_ptr<aotc_context, aotc_context_destroy_fn> openProgram(const aotc_program &p);

/// Checks `inputs` against the program's user inputs `userInputs` (indices into p.inputs, in
/// order; RuntimeError naming the first mismatch, `what` as in "a step takes 2 user inputs")
/// and points in[userInputs[k]] at inputs[k] (read only: user inputs are never written).
void bindUserInputs(const aotc_program &p, const std::vector<int> &userInputs, std::span<const Tensor *const> inputs,
                    std::vector<void *> &in, const char *what);

} // namespace aotc::rt::detail
