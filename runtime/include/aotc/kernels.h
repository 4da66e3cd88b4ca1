/*===- kernels.h - aotc's run-time kernel library (libaotc_kernels) -*- C -*-===*
 *
 * Library calls an aotc object makes for kernels that are not generated loops or GEMMs:
 * today the three convolution primitives (include/aotc/Conv.h in the compiler). An object
 * whose header lists "libaotc_kernels" among its run-time libraries must be linked with
 * it (CMake: aotc_link_step; the Python package links it; docs/abi.md "Run-time libraries").
 *
 * Convolutions are regular (not transposed) and 2-D; a 1-D convolution has h = oh = kh = 1:
 *   x [n, c, h, w], w [k, c/groups, kh, kw], y [n, k, oh, ow], all dense row-major;
 *   y[n,k,p,q] = sum_{c in k's group, i, j} x[n, c, p*stride_h - pad_h + i*dil_h,
 *                                                 q*stride_w - pad_w + j*dil_w] * w[k, c', i, j]
 * (out-of-range positions are zero padding). Roles:
 *   AOTC_CONV_FORWARD     a = x,  b = w, c = y   (c is overwritten)
 *   AOTC_CONV_INPUT_GRAD  a = dy, b = w, c = dx  (dx = the adjoint of the forward in x)
 *   AOTC_CONV_WEIGHT_GRAD a = dy, b = x, c = dw  (dw = the adjoint in w)
 * Method: im2col (per batch entry and group) into `workspace` and single-threaded
 * cblas_[sd]gemm calls, parallel over batch entries (forward, input grad) or over blocks of
 * output channels (weight grad, summing the batch entries in a fixed order), so results do
 * not depend on the thread count. 1x1 convolutions with stride 1 and no padding use x
 * itself as the column matrix. Threads: the calling OpenMP runtime's (libomp).
 *===----------------------------------------------------------------------===*/
#ifndef AOTC_KERNELS_H
#define AOTC_KERNELS_H

#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

enum { AOTC_CONV_FORWARD = 0, AOTC_CONV_INPUT_GRAD = 1, AOTC_CONV_WEIGHT_GRAD = 2 };

typedef struct aotc_conv_desc {
  int32_t dtype;  /**< AOTC_F32 or AOTC_F64 (abi.h) */
  int32_t role;   /**< AOTC_CONV_* */
  int64_t n, c, k, groups;
  int64_t h, w, oh, ow, kh, kw;
  int64_t stride_h, stride_w, pad_h, pad_w, dil_h, dil_w;
} aotc_conv_desc;

/** Elements of workspace aotc_conv needs for `d` (0 when it needs none). */
int64_t aotc_conv_workspace_elems(const aotc_conv_desc *d);

/** Runs one convolution primitive (see above); `workspace` holds
 *  aotc_conv_workspace_elems(d) elements of d->dtype, 64-byte aligned. */
void aotc_conv(const aotc_conv_desc *d, const void *a, const void *b, void *c, void *workspace);

#ifdef __cplusplus
}
#endif

#endif
