/*===- GemmDnnl.c - f32 GEMMs through oneDNN (aotc_onednn_sgemm) ----------===*
 *
 * aotc_onednn_sgemm (aotc/kernels.h): cblas_sgemm's interface over oneDNN 2.6's dnnl_sgemm,
 * which is row-major with 'N' / 'T' flags. A column-major C = op(A) op(B) is the row-major
 * C^T = op(B)^T op(A)^T: the operands and flags swap places.
 *
 * Threads: dnnl_sgemm runs on omp_get_max_threads() threads unless omp_in_parallel(); the
 * call runs with the calling thread's nthreads-var at 1, in libomp and in whichever runtime
 * serves libdnnl (torch's libgomp in a process that imported torch first: ConvInternal.h
 * aotc_dnnl_threads_set), restored after. So no call threads itself: its bits depend on its
 * arguments alone, and oneDNN's nested regions, which stall under libomp (docs/abi.md), never run.
 *===----------------------------------------------------------------------===*/
#include "ConvInternal.h"

#include <cblas.h>
#include <dnnl.h>

void aotc_onednn_sgemm(int order, int trans_a, int trans_b, int m, int n, int k, float alpha, const float *a,
                       int lda, const float *b, int ldb, float beta, float *c, int ldc) {
  const char ta = trans_a == CblasTrans ? 'T' : 'N', tb = trans_b == CblasTrans ? 'T' : 'N';
  aotc_dnnl_threads was = aotc_dnnl_threads_set(1);
  dnnl_status_t st = order == CblasColMajor
                         ? dnnl_sgemm(tb, ta, n, m, k, alpha, b, ldb, a, lda, beta, c, ldc)
                         : dnnl_sgemm(ta, tb, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc);
  aotc_dnnl_threads_restore(was);
  if (st != dnnl_success)
    cblas_sgemm((enum CBLAS_ORDER)order, (enum CBLAS_TRANSPOSE)trans_a, (enum CBLAS_TRANSPOSE)trans_b, m, n, k,
                alpha, a, lda, b, ldb, beta, c, ldc);
}
