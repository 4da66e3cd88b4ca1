/*===- cuda.h - The CUDA runtime for --target=cuda objects -------*- C -*-===*
 *
 * Link an object from `aotc IN --target=cuda -o OUT.o` with aotc_cuda_runtime
 * (runtime/cuda; CUDA runtime API statically linked, cuBLASLt/cuBLAS shared; it
 * never links libcuda: the driver is loaded by cudart at run time). It implements
 * what the object imports (aotc_cuda_launch, aotc_cuda_matmul in abi.h) and:
 *
 *   aotc_context *ctx = mlp_context_create();          // the object's ABI context (abi.h)
 *   aotc_cuda_exec exec;
 *   aotc_cuda_exec_create(&exec, stream, 0);          // handles, workspace, error word
 *   rc = mlp_forward(ctx, in, out, saved, scratch, &exec);  // enqueues only (abi.h)
 *   rc = mlp_backward(ctx, in, saved, tangents, grads, scratch, &exec);
 *   aotc_cuda_sgd(&exec, AOTC_F32, w, dw, n, 0.1);     // w -= 0.1 * dw, on the device
 *   rc = aotc_cuda_check(&exec);                       // syncs; device-side errors
 *   aotc_cuda_exec_destroy(&exec);
 *   mlp_context_destroy(ctx);
 *
 * Kernels are loaded from the object's fatbin once per process and module
 * (cudaLibraryLoadData, cudaLibraryGetKernel) in the current device's primary
 * context, so they share PyTorch's. GEMMs use cuBLASLt with the heuristic's first
 * algorithm, chosen once per shape and cached; TF32 only in objects compiled with
 * --allow-tf32 (aotc_cuda_gemm_desc::allow_tf32).
 * AOTC_CUDA_SYNC=1 in the environment synchronizes after every launch and GEMM
 * and fails at the first kernel that faults or reports an error, naming it.
 *
 * Return values: 0 success; k > 0 a device-side error (aotc_cuda_check); -1 a CUDA
 * or cuBLAS failure. After any non-zero return, aotc_cuda_last_error() has the
 * message (per thread).
 *===----------------------------------------------------------------------===*/
#ifndef AOTC_CUDA_H
#define AOTC_CUDA_H

#include "aotc/abi.h"

#ifdef __cplusplus
extern "C" {
#endif

/** Default cuBLASLt workspace, bytes (32 MiB). */
#define AOTC_CUDA_DEFAULT_WORKSPACE_BYTES (32ll << 20)

/** Fills *exec for `stream` (a cudaStream_t; NULL: the legacy default stream):
 *  creates a cuBLAS and a cuBLASLt handle (cuBLAS bound to the stream, atomics not
 *  allowed), allocates `workspace_bytes` (0: the default) of workspace and the
 *  zeroed error word. The only entry that allocates. Returns 0 or -1. */
int aotc_cuda_exec_create(aotc_cuda_exec *exec, void *stream, int64_t workspace_bytes);
/** Frees what aotc_cuda_exec_create made (after synchronizing its stream). */
void aotc_cuda_exec_destroy(aotc_cuda_exec *exec);

/** Synchronizes exec->stream and reads the error word. 0 when no kernel failed;
 *  else the error code k of the program that failed (its message, naming the node,
 *  and the offending value are in aotc_cuda_last_error()) and the word is cleared;
 *  -1 when the stream itself failed. */
int aotc_cuda_check(const aotc_cuda_exec *exec);

/** The message of the last non-zero return on this thread ("" if none). */
const char *aotc_cuda_last_error(void);

/** param -= lr * grad over numel elements of dtype AOTC_F32 or AOTC_F64 (cuBLAS axpy
 *  on exec->stream; asynchronous). Returns 0 or -1. */
int aotc_cuda_sgd(const aotc_cuda_exec *exec, int32_t dtype, void *param, const void *grad, int64_t numel,
                  double lr);

/** Messages for an error word {code, value, program id, 0}: the registered module
 *  (one that launched at least once in this process) with that program id names the
 *  node. Exposed for tests; returns "" for code 0. */
const char *aotc_cuda_describe_error(const int64_t word[4]);

#ifdef __cplusplus
}
#endif

#endif /* AOTC_CUDA_H */
