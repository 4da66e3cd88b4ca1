//===- CudaRuntime.cpp - aotc_cuda_* over the CUDA runtime API and cuBLASLt ----===//
//
// Implements runtime/include/aotc/cuda.h and the two functions a --target=cuda
// object imports (abi.h): aotc_cuda_launch and aotc_cuda_matmul. Only the CUDA
// runtime API (cudart_static: it loads the driver itself, so nothing links
// libcuda), cuBLASLt for GEMMs and cuBLAS for SGD's axpy.
//
// GEMMs: a row-major C = op(A) op(B) (cblas semantics, abi.h aotc_cuda_gemm_desc)
// is the column-major C^T = op(B)^T op(A)^T, so cuBLASLt gets B as its first
// operand and A as its second, with m and n swapped and the leading dimensions
// unchanged. The plan (descriptors + the heuristic's first algorithm for the
// exec's workspace) is made once per (handle, shape, dtype, TF32) and cached.
//===----------------------------------------------------------------------===//
#include "aotc/cuda.h"

#include "CudaRuntimeInternal.h"

#include <cublasLt.h>
#include <cublas_v2.h>
#include <cuda_runtime_api.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <map>
#include <mutex>
#include <string>
#include <tuple>
#include <unordered_map>
#include <vector>

namespace {

thread_local std::string lastError;

int fail(const std::string &msg) {
  lastError = msg;
  return -1;
}

std::string cudaMsg(cudaError_t e) { return std::string(cudaGetErrorName(e)) + ": " + cudaGetErrorString(e); }

bool syncEachCall() {
  static const bool on = [] {
    const char *v = std::getenv("AOTC_CUDA_SYNC");
    return v && std::strcmp(v, "1") == 0;
  }();
  return on;
}

// ---- modules: loaded once per process -------------------------------------------------
struct ModuleState {
  cudaLibrary_t library = nullptr;
  std::vector<cudaKernel_t> kernels;
};

std::mutex registryMutex;
std::unordered_map<const aotc_cuda_module *, ModuleState *> loaded;
std::unordered_map<uint32_t, const aotc_cuda_module *> byProgramId;

/// The loaded state of `m`, loading it on first use. NULL (and lastError) on failure.
ModuleState *moduleState(const aotc_cuda_module *m) {
  std::lock_guard<std::mutex> lock(registryMutex);
  auto it = loaded.find(m);
  if (it != loaded.end()) return it->second;
  auto *s = new ModuleState;
  cudaError_t e = cudaLibraryLoadData(&s->library, m->fatbin, nullptr, nullptr, 0, nullptr, nullptr, 0);
  if (e != cudaSuccess) {
    delete s;
    fail(std::string("aotc_cuda: loading the kernels of '") + m->program + "' (cudaLibraryLoadData): " +
         cudaMsg(e) + " (is the GPU's architecture among the object's --cuda-arch, or newer?)");
    return nullptr;
  }
  s->kernels.resize(m->num_kernels);
  for (int i = 0; i < m->num_kernels; ++i) {
    e = cudaLibraryGetKernel(&s->kernels[i], s->library, m->kernel_names[i]);
    if (e != cudaSuccess) {
      fail(std::string("aotc_cuda: kernel ") + m->kernel_names[i] + " not in the fatbin: " + cudaMsg(e));
      cudaLibraryUnload(s->library);
      delete s;
      return nullptr;
    }
  }
  loaded[m] = s;
  byProgramId[m->program_id] = m;
  return s; // kept for the life of the process (as torch keeps its modules)
}

thread_local std::string described;

/// Synchronizes exec->stream and reads the error word: 0, the failing program's code k
/// (lastError = [`what`: ]<program>: <message> (value V); the word is cleared), or -1 when
/// the stream failed. `what` ("kernel <symbol>", ...; "" for aotc_cuda_check) names the work.
int syncAndReadErrorWord(const aotc_cuda_exec *exec, const std::string &what) {
  const std::string after = what.empty() ? "" : " after " + what;
  cudaError_t e = cudaStreamSynchronize((cudaStream_t)exec->stream);
  if (e != cudaSuccess) return fail("aotc_cuda: " + (what.empty() ? "the stream" : what) + " failed: " + cudaMsg(e));
  int64_t word[4] = {0, 0, 0, 0};
  if (exec->error_word) {
    e = cudaMemcpy(word, exec->error_word, sizeof word, cudaMemcpyDeviceToHost);
    if (e != cudaSuccess) return fail("aotc_cuda: reading the error word" + after + ": " + cudaMsg(e));
  }
  if (word[0] == 0) return 0;
  lastError = (what.empty() ? "" : what + ": ") + aotc_cuda_describe_error(word);
  // On the exec's stream (a plain cudaMemset would go to the legacy stream, which a
  // non-blocking stream does not wait for: a later kernel's error could be erased).
  cudaMemsetAsync(exec->error_word, 0, AOTC_CUDA_ERROR_WORD_BYTES, (cudaStream_t)exec->stream);
  return (int)word[0];
}

/// In AOTC_CUDA_SYNC=1 mode: waits for `what` and turns a fault or an error word into -1 / k.
int syncAfter(const aotc_cuda_exec *exec, const std::string &what) {
  cudaStreamCaptureStatus capturing = cudaStreamCaptureStatusNone;
  if (cudaStreamIsCapturing((cudaStream_t)exec->stream, &capturing) == cudaSuccess &&
      capturing != cudaStreamCaptureStatusNone)
    return 0; // synchronizing would invalidate a CUDA graph capture: AOTC_CUDA_SYNC is ignored there
  return syncAndReadErrorWord(exec, what);
}

// ---- GEMM plans -------------------------------------------------------------------------
struct GemmKey {
  void *handle;
  int32_t dtype, ta, tb, tf32;
  int64_t m, n, k, lda, ldb, ldc, batch, sa, sb, sc, workspace;
  uint32_t alignA, alignB, alignC; ///< bytes: the operands' pointer alignment, capped at 256
  auto tie() const {
    return std::tie(handle, dtype, ta, tb, tf32, m, n, k, lda, ldb, ldc, batch, sa, sb, sc, workspace, alignA,
                    alignB, alignC);
  }
  bool operator<(const GemmKey &o) const { return tie() < o.tie(); }
};

struct GemmPlan {
  cublasLtMatmulDesc_t op = nullptr;
  cublasLtMatrixLayout_t a = nullptr, b = nullptr, c = nullptr; // cuBLASLt's A (= our B), B (= our A), C
  cublasLtMatmulAlgo_t algo{};
  size_t workspace = 0;
};

std::mutex planMutex;
std::map<GemmKey, GemmPlan *> plans;

int ltFail(const char *what, cublasStatus_t st, const aotc_cuda_gemm_desc *g) {
  return fail(std::string("aotc_cuda: ") + what + " for GEMM " + g->name + " (m=" + std::to_string(g->m) +
              " n=" + std::to_string(g->n) + " k=" + std::to_string(g->k) + "): cuBLAS status " +
              std::to_string((int)st) + " (" + cublasGetStatusString(st) + ")");
}

cublasStatus_t layout(cublasLtMatrixLayout_t *l, cudaDataType t, int64_t rows, int64_t cols, int64_t ld,
                      int64_t batch, int64_t stride) {
  cublasStatus_t st = cublasLtMatrixLayoutCreate(l, t, (uint64_t)rows, (uint64_t)cols, ld);
  if (st != CUBLAS_STATUS_SUCCESS || batch <= 1) return st;
  int32_t count = (int32_t)batch;
  st = cublasLtMatrixLayoutSetAttribute(*l, CUBLASLT_MATRIX_LAYOUT_BATCH_COUNT, &count, sizeof count);
  if (st != CUBLAS_STATUS_SUCCESS) return st;
  return cublasLtMatrixLayoutSetAttribute(*l, CUBLASLT_MATRIX_LAYOUT_STRIDED_BATCH_OFFSET, &stride, sizeof stride);
}

/// The largest power of two (<= 256) dividing the address. Operands inside the saved and
/// scratch arenas are only 64-byte aligned (and sliced operands less), while cuBLASLt's
/// heuristic assumes 256 unless told (as PyTorch learned: pytorch/pytorch#92201, #98975).
uint32_t alignmentOf(const void *p) {
  uintptr_t a = (uintptr_t)p;
  uint32_t al = 256;
  while (al > 1 && a % al != 0) al /= 2;
  return al;
}

GemmPlan *gemmPlan(const aotc_cuda_exec *exec, const aotc_cuda_gemm_desc *g, const void *a, const void *b,
                   const void *c) {
  GemmKey key{exec->cublaslt, g->dtype, g->trans_a, g->trans_b, g->allow_tf32, g->m, g->n, g->k, g->lda, g->ldb,
              g->ldc, g->batch, g->stride_a, g->stride_b, g->stride_c, exec->workspace_bytes,
              alignmentOf(a), alignmentOf(b), alignmentOf(c)};
  std::lock_guard<std::mutex> lock(planMutex);
  auto it = plans.find(key);
  if (it != plans.end()) return it->second;
  const bool f64 = g->dtype == AOTC_F64;
  const cudaDataType t = f64 ? CUDA_R_64F : CUDA_R_32F;
  const cublasComputeType_t ct =
      f64 ? CUBLAS_COMPUTE_64F : (g->allow_tf32 ? CUBLAS_COMPUTE_32F_FAST_TF32 : CUBLAS_COMPUTE_32F);
  auto *p = new GemmPlan;
  cublasStatus_t st = cublasLtMatmulDescCreate(&p->op, ct, t);
  const aotc::cuda::LtGemm lt = aotc::cuda::columnMajor(*g); // cuBLASLt's A is our B, its B our A
  cublasOperation_t opA = lt.a.trans ? CUBLAS_OP_T : CUBLAS_OP_N;
  cublasOperation_t opB = lt.b.trans ? CUBLAS_OP_T : CUBLAS_OP_N;
  if (st == CUBLAS_STATUS_SUCCESS)
    st = cublasLtMatmulDescSetAttribute(p->op, CUBLASLT_MATMUL_DESC_TRANSA, &opA, sizeof opA);
  if (st == CUBLAS_STATUS_SUCCESS)
    st = cublasLtMatmulDescSetAttribute(p->op, CUBLASLT_MATMUL_DESC_TRANSB, &opB, sizeof opB);
  if (st == CUBLAS_STATUS_SUCCESS) st = layout(&p->a, t, lt.a.rows, lt.a.cols, lt.a.ld, g->batch, lt.a.batchStride);
  if (st == CUBLAS_STATUS_SUCCESS) st = layout(&p->b, t, lt.b.rows, lt.b.cols, lt.b.ld, g->batch, lt.b.batchStride);
  if (st == CUBLAS_STATUS_SUCCESS) st = layout(&p->c, t, lt.c.rows, lt.c.cols, lt.c.ld, g->batch, lt.c.batchStride);
  cublasLtMatmulPreference_t pref = nullptr;
  if (st == CUBLAS_STATUS_SUCCESS) st = cublasLtMatmulPreferenceCreate(&pref);
  uint64_t ws = (uint64_t)exec->workspace_bytes;
  if (st == CUBLAS_STATUS_SUCCESS)
    st = cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES, &ws, sizeof ws);
  // cuBLASLt's A is our B and its B our A; C and D are our C.
  const std::pair<cublasLtMatmulPreferenceAttributes_t, uint32_t> aligns[] = {
      {CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_A_BYTES, key.alignB},
      {CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_B_BYTES, key.alignA},
      {CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_C_BYTES, key.alignC},
      {CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_D_BYTES, key.alignC}};
  for (auto &[attr, bytes] : aligns)
    if (st == CUBLAS_STATUS_SUCCESS) st = cublasLtMatmulPreferenceSetAttribute(pref, attr, &bytes, sizeof bytes);
  cublasLtMatmulHeuristicResult_t result{};
  int found = 0;
  if (st == CUBLAS_STATUS_SUCCESS)
    st = cublasLtMatmulAlgoGetHeuristic((cublasLtHandle_t)exec->cublaslt, p->op, p->a, p->b, p->c, p->c, pref, 1,
                                        &result, &found);
  if (pref) cublasLtMatmulPreferenceDestroy(pref);
  if (st != CUBLAS_STATUS_SUCCESS || found == 0) {
    ltFail(found == 0 && st == CUBLAS_STATUS_SUCCESS ? "no cuBLASLt algorithm" : "planning", st, g);
    return nullptr; // the half-made plan leaks a few descriptors; the step fails anyway
  }
  p->algo = result.algo;
  p->workspace = result.workspaceSize;
  plans[key] = p;
  return p;
}

} // namespace

extern "C" {

int aotc_cuda_launch(const aotc_cuda_exec *exec, const aotc_cuda_module *module, int32_t kernel, uint32_t grid,
                     uint32_t block, void **args) {
  ModuleState *s = moduleState(module);
  if (!s) return -1;
  if (kernel < 0 || kernel >= module->num_kernels) return fail("aotc_cuda: bad kernel index");
  cudaError_t e = cudaLaunchKernel((const void *)s->kernels[kernel], dim3(grid), dim3(block), args, 0,
                                   (cudaStream_t)exec->stream);
  if (e != cudaSuccess)
    return fail(std::string("aotc_cuda: launching ") + module->kernel_names[kernel] + " (grid " +
                std::to_string(grid) + ", block " + std::to_string(block) + "): " + cudaMsg(e));
  return syncEachCall() ? syncAfter(exec, std::string("kernel ") + module->kernel_names[kernel]) : 0;
}

int aotc_cuda_matmul(const aotc_cuda_exec *exec, const aotc_cuda_gemm_desc *g, const void *a, const void *b,
                     void *c) {
  if (g->dtype != AOTC_F32 && g->dtype != AOTC_F64) return fail(std::string("aotc_cuda: GEMM ") + g->name + ": dtype");
  GemmPlan *p = gemmPlan(exec, g, a, b, c);
  if (!p) return -1;
  float af = (float)g->alpha, bf = (float)g->beta;
  const void *alpha = g->dtype == AOTC_F64 ? (const void *)&g->alpha : (const void *)&af;
  const void *beta = g->dtype == AOTC_F64 ? (const void *)&g->beta : (const void *)&bf;
  cublasStatus_t st = cublasLtMatmul((cublasLtHandle_t)exec->cublaslt, p->op, alpha, b, p->a, a, p->b, beta, c,
                                     p->c, c, p->c, &p->algo, exec->workspace, p->workspace,
                                     (cudaStream_t)exec->stream);
  if (st != CUBLAS_STATUS_SUCCESS) return ltFail("cublasLtMatmul", st, g);
  return syncEachCall() ? syncAfter(exec, std::string("GEMM ") + g->name) : 0;
}

int aotc_cuda_exec_create(aotc_cuda_exec *exec, void *stream, int64_t workspaceBytes) {
  std::memset(exec, 0, sizeof *exec);
  exec->stream = stream;
  exec->workspace_bytes = workspaceBytes > 0 ? workspaceBytes : AOTC_CUDA_DEFAULT_WORKSPACE_BYTES;
  cublasHandle_t h = nullptr;
  cublasStatus_t st = cublasCreate(&h);
  if (st != CUBLAS_STATUS_SUCCESS) return fail("aotc_cuda: cublasCreate: " + std::string(cublasGetStatusString(st)));
  exec->cublas = h;
  cublasSetStream(h, (cudaStream_t)stream);
  cublasSetAtomicsMode(h, CUBLAS_ATOMICS_NOT_ALLOWED);
  cublasSetMathMode(h, CUBLAS_PEDANTIC_MATH);
  cublasLtHandle_t lt = nullptr;
  st = cublasLtCreate(&lt);
  if (st != CUBLAS_STATUS_SUCCESS) {
    aotc_cuda_exec_destroy(exec);
    return fail("aotc_cuda: cublasLtCreate: " + std::string(cublasGetStatusString(st)));
  }
  exec->cublaslt = lt;
  exec->host_error_value = new int64_t(0);
  cudaError_t e = cudaMalloc(&exec->workspace, (size_t)exec->workspace_bytes);
  if (e == cudaSuccess) e = cudaMalloc((void **)&exec->error_word, AOTC_CUDA_ERROR_WORD_BYTES);
  if (e == cudaSuccess)
    e = cudaMemsetAsync(exec->error_word, 0, AOTC_CUDA_ERROR_WORD_BYTES, (cudaStream_t)stream);
  if (e == cudaSuccess) e = cudaStreamSynchronize((cudaStream_t)stream);
  if (e != cudaSuccess) {
    aotc_cuda_exec_destroy(exec);
    return fail("aotc_cuda: allocating the workspace and error word: " + cudaMsg(e));
  }
  return 0;
}

void aotc_cuda_exec_destroy(aotc_cuda_exec *exec) {
  if (exec->stream || exec->workspace) cudaStreamSynchronize((cudaStream_t)exec->stream);
  if (exec->workspace) cudaFree(exec->workspace);
  if (exec->error_word) cudaFree(exec->error_word);
  if (exec->cublaslt) cublasLtDestroy((cublasLtHandle_t)exec->cublaslt);
  if (exec->cublas) cublasDestroy((cublasHandle_t)exec->cublas);
  delete exec->host_error_value;
  std::memset(exec, 0, sizeof *exec);
}

int aotc_cuda_check(const aotc_cuda_exec *exec) { return syncAndReadErrorWord(exec, ""); }

const char *aotc_cuda_last_error(void) { return lastError.c_str(); }

int aotc_cuda_sgd(const aotc_cuda_exec *exec, int32_t dtype, void *param, const void *grad, int64_t numel,
                  double lr) {
  cublasHandle_t h = (cublasHandle_t)exec->cublas;
  cublasStatus_t st;
  if (dtype == AOTC_F32) {
    float a = (float)-lr;
    st = cublasSaxpy_64(h, numel, &a, (const float *)grad, 1, (float *)param, 1);
  } else if (dtype == AOTC_F64) {
    double a = -lr;
    st = cublasDaxpy_64(h, numel, &a, (const double *)grad, 1, (double *)param, 1);
  } else {
    return fail("aotc_cuda_sgd: dtype must be AOTC_F32 or AOTC_F64");
  }
  if (st != CUBLAS_STATUS_SUCCESS) return fail("aotc_cuda_sgd: cuBLAS axpy: " + std::string(cublasGetStatusString(st)));
  return syncEachCall() ? syncAfter(exec, "SGD step") : 0;
}

const char *aotc_cuda_describe_error(const int64_t word[4]) {
  if (word[0] == 0) return "";
  const aotc_cuda_module *m = nullptr;
  {
    std::lock_guard<std::mutex> lock(registryMutex);
    auto it = byProgramId.find((uint32_t)word[2]);
    if (it != byProgramId.end()) m = it->second;
  }
  described = aotc::cuda::describeDeviceError(word, m);
  return described.c_str();
}

} // extern "C"
