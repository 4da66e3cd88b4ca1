//===- CudaRuntimeInternal.h - Pure parts of the CUDA runtime ----*- C++ -*-===//
//
// What CudaRuntime.cpp computes without touching CUDA, kept here so that the unit tests
// (test/unit/Runtime/CudaRuntimeInternalTest.cpp) check it on machines without a GPU:
//  * the column-major cuBLASLt problem of a row-major aotc_cuda_gemm_desc;
//  * the message of a device error word.
//===----------------------------------------------------------------------===//
#pragma once

#include "aotc/abi.h"

#include <cstdint>
#include <string>

namespace aotc::cuda {

/// One column-major operand: op = transpose when `trans`; stored as rows x cols with leading
/// dimension ld (elements); batchStride elements between batch entries.
struct LtOperand {
  bool trans = false;
  int64_t rows = 0, cols = 0, ld = 0, batchStride = 0;
};

/// A column-major GEMM C (m x n) = op(A) (m x k) * op(B) (k x n), as cuBLASLt computes it.
struct LtGemm {
  int64_t m = 0, n = 0, k = 0;
  LtOperand a, b, c;
  bool swapped = true; ///< cuBLASLt's A is the descriptor's B, its B the descriptor's A.
};

/// The row-major C = op(A) op(B) of `g` (cblas semantics) is the column-major
/// C^T = op(B)^T op(A)^T: the same memory, so cuBLASLt's A is B (op = trans_b, stored
/// n x k or, transposed, k x n, ld = ldb), its B is A (op = trans_a, stored k x m or m x k,
/// ld = lda), and C is n x m with ld = ldc.
inline LtGemm columnMajor(const aotc_cuda_gemm_desc &g) {
  LtGemm r;
  r.m = g.n;
  r.n = g.m;
  r.k = g.k;
  r.a = {g.trans_b != 0, g.trans_b ? g.k : g.n, g.trans_b ? g.n : g.k, g.ldb, g.stride_b};
  r.b = {g.trans_a != 0, g.trans_a ? g.m : g.k, g.trans_a ? g.k : g.m, g.lda, g.stride_a};
  r.c = {false, g.n, g.m, g.ldc, g.stride_c};
  return r;
}

/// "<program>: <errors[code-1]> (value V)" for an error word {code, value, program id, 0}
/// of module `m` (NULL: not found); "" for code 0.
inline std::string describeDeviceError(const int64_t word[4], const aotc_cuda_module *m) {
  if (word[0] == 0) return "";
  if (m && word[0] >= 1 && word[0] <= m->num_errors)
    return std::string(m->program) + ": " + m->errors[word[0] - 1] + " (value " + std::to_string(word[1]) + ")";
  return "device error " + std::to_string(word[0]) + " (value " + std::to_string(word[1]) +
         ") of an unknown program (id " + std::to_string(word[2]) + ")";
}

} // namespace aotc::cuda
