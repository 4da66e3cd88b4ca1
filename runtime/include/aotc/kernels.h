/*===- kernels.h - aotc's run-time kernel library (libaotc_kernels) -*- C -*-===*
 *
 * Library calls an aotc object makes for kernels that are not generated loops or GEMMs:
 * the three convolution primitives (include/aotc/Conv.h in the compiler) and the discrete
 * Fourier transforms (below). An object
 * whose header lists "libaotc_kernels" among its run-time libraries must be linked with
 * it (CMake: aotc_link_step; the Python package links it; docs/abi.md "Run-time libraries").
 *
 * Convolutions are regular (not transposed) and 2-D; a 1-D convolution has h = oh = kh = 1:
 *   x [n, c, h, w], w [k, c/groups, kh, kw], y [n, k, oh, ow], all dense row-major;
 *   y[n,k,p,q] = sum_{c in k's group, i, j} x[n, c, p*stride_h - pad_h + i*dil_h,
 *                                                 q*stride_w - pad_w + j*dil_w] * w[k, c', i, j]
 * (out-of-range positions are zero padding; oh = (h + 2 pad_h - dil_h (kh - 1) - 1) / stride_h
 * + 1, floor, and likewise ow). Roles:
 *   AOTC_CONV_FORWARD     a = x,  b = w, c = y   (c is overwritten)
 *   AOTC_CONV_INPUT_GRAD  a = dy, b = w, c = dx  (dx = the adjoint of the forward in x)
 *   AOTC_CONV_WEIGHT_GRAD a = dy, b = x, c = dw  (dw = the adjoint in w)
 *
 * Methods:
 *  - f32: oneDNN 2.6 (libdnnl; ConvDnnl.c) with plain layouts (nchw, oihw / goihw), one
 *    primitive per descriptor, created at the first call with a state and kept in it, and a
 *    user-mode scratchpad owned by the state. oneDNN's own OpenMP loops; for a fixed number of
 *    threads the bits are the same from run to run, but they may change with the thread count
 *    (docs/abi.md "Threads and bit-identical results" gives the measurement).
 *  - f64 (oneDNN 2.6 has no f64 convolution; conformance and `aotc gradcheck` use f64):
 *    im2col (per batch entry and group) into `workspace` and single-threaded cblas_dgemm
 *    calls, parallel over batch entries (forward, input grad) or over blocks of output
 *    channels (weight grad, summing the batch entries in a fixed order), so results do not
 *    depend on the thread count. 1x1 convolutions with stride 1 and no padding use x itself
 *    as the column matrix. aotc_conv_im2col runs this path for f32 too (tests, benchmarks).
 * Threads: the process's one OpenMP runtime, LLVM's libomp. Debian's libdnnl is built with
 * GNU OpenMP and calls GOMP_*; libomp exports those entry points and is linked before libdnnl
 * (this library's DT_NEEDED and every link line aotc writes), so it serves them
 * (docs/building.md "One OpenMP runtime"; ctest kernels.one_openmp_runtime).
 *
 * Errors: aotc_conv returns 0 or an AOTC_KERNELS_ERROR_* code and never aborts on bad input;
 * with a state, aotc_kernels_state_error(s) then holds a message saying what failed.
 * State: one aotc_kernels_state serves one thread at a time (an ABI context owns one,
 * docs/abi.md); distinct states may be used from distinct threads at once.
 *===----------------------------------------------------------------------===*/
#ifndef AOTC_KERNELS_H
#define AOTC_KERNELS_H

#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

enum { AOTC_CONV_FORWARD = 0, AOTC_CONV_INPUT_GRAD = 1, AOTC_CONV_WEIGHT_GRAD = 2 };

/** Return codes of aotc_conv. */
enum {
  AOTC_KERNELS_OK = 0,
  AOTC_KERNELS_ERROR_INVALID = 1, /**< The descriptor is inconsistent (dtype, role, sizes, groups). */
  AOTC_KERNELS_ERROR_NO_MEMORY = 2, /**< Out of memory (the state's cache or scratchpad). */
  AOTC_KERNELS_ERROR_DNNL = 3,    /**< oneDNN returned an error status (the message names it). */
  AOTC_KERNELS_ERROR_NO_STATE = 4 /**< An f32 convolution was given no state. */
};

typedef struct aotc_conv_desc {
  int32_t dtype;  /**< AOTC_F32 or AOTC_F64 (abi.h) */
  int32_t role;   /**< AOTC_CONV_* */
  int64_t n, c, k, groups;
  int64_t h, w, oh, ow, kh, kw;
  int64_t stride_h, stride_w, pad_h, pad_w, dil_h, dil_w;
} aotc_conv_desc;

/** Library state (opaque): the oneDNN engine and stream (made at the first f32
 *  convolution), the primitives keyed by the whole aotc_conv_desc, the user-mode scratchpad
 *  (grown as needed) and the text of the last error. */
typedef struct aotc_kernels_state aotc_kernels_state;

/** A new, empty state (allocates only the state itself); NULL when out of memory. */
aotc_kernels_state *aotc_kernels_state_create(void);
/** Frees `s` and everything it holds (NULL is accepted, as free). */
void aotc_kernels_state_destroy(aotc_kernels_state *s);
/** The message of the last failed aotc_conv with `s`, or NULL when none failed (or s is NULL).
 *  Valid until the next aotc_conv with `s` or its destruction. */
const char *aotc_kernels_state_error(const aotc_kernels_state *s);

/** Counters of a state (tests and benchmarks). */
typedef struct aotc_kernels_stats {
  int64_t primitives;       /**< oneDNN primitives created (one per distinct f32 descriptor). */
  int64_t cache_hits;       /**< f32 calls that found their primitive in the state. */
  int64_t scratchpad_bytes; /**< Size of the user-mode scratchpad now. */
} aotc_kernels_stats;
/** Fills `*out` (zeros for a NULL state). */
void aotc_kernels_state_stats(const aotc_kernels_state *s, aotc_kernels_stats *out);

/** Elements of workspace aotc_conv needs for `d` (0 when it needs none: every f32
 *  convolution, whose scratch memory is the state's scratchpad; an f64 one whose column
 *  matrix is x itself). The compiler plans the same rule (lib/Codegen/Fusion.cpp defineConv). */
int64_t aotc_conv_workspace_elems(const aotc_conv_desc *d);

/** Runs one convolution primitive (see above): f32 through oneDNN with state `s` (required),
 *  f64 through im2col (`s` may be NULL). `workspace` holds aotc_conv_workspace_elems(d)
 *  elements of d->dtype, 64-byte aligned. Returns AOTC_KERNELS_OK or an error code (nothing
 *  is written on AOTC_KERNELS_ERROR_INVALID; c is unspecified after the other errors). */
int aotc_conv(aotc_kernels_state *s, const aotc_conv_desc *d, const void *a, const void *b, void *c,
              void *workspace);

/** Elements of workspace aotc_conv_im2col needs for `d` (f32 and f64 alike). */
int64_t aotc_conv_im2col_workspace_elems(const aotc_conv_desc *d);
/** The im2col + cblas path for either dtype (what aotc_conv does for f64); a reference for
 *  tests and benchmarks of the f32 path. Returns 0 or AOTC_KERNELS_ERROR_INVALID. */
int aotc_conv_im2col(const aotc_conv_desc *d, const void *a, const void *b, void *c, void *workspace);

/** 0 when `d` describes a valid convolution (see above), else AOTC_KERNELS_ERROR_INVALID;
 *  when `msg` is not NULL a message of at most `msg_size` bytes says why. */
int aotc_conv_check(const aotc_conv_desc *d, char *msg, int64_t msg_size);

/* ---- Discrete Fourier transforms (aten._fft_r2c / _fft_c2r / _fft_c2c) ------------------
 * A complex tensor is its view_as_real everywhere in aotc: interleaved (re, im) pairs of the
 * real dtype, a trailing dimension of 2 (docs/complex.md). One call transforms
 * a dense row-major tensor along `naxes` of its dimensions, through PocketFFT (BSD-3, the
 * header-only C++ library PyTorch and NumPy use; Debian ships it in python3-pythran) on the
 * calling thread, so results do not depend on the thread count. `shape` is the logical
 * shape, without the trailing 2:
 *   AOTC_FFT_C2C  in and out complex of `shape`; sign -1 when `forward`, else +1.
 *   AOTC_FFT_R2C  in real of `shape`, out complex of `shape` with the last axis n -> n/2 + 1
 *                 (forward: the onesided half; the other half is its conjugate mirror), or
 *                 of `shape` itself when not `onesided` (the mirror written too).
 *   AOTC_FFT_C2R  out real of `shape`, in complex of `shape` with the last axis n -> n/2 + 1
 *                 (backward, +1: the Hermitian signal those entries define; the imaginary
 *                 parts of the zero and Nyquist frequencies are ignored, as torch's).
 * Every output element is multiplied by `scale` (torch's normalization: 1, 1/sqrt(N), 1/N).
 * PocketFFT allocates its plans (cached, shared by threads) and work arrays on the heap. */
enum { AOTC_FFT_C2C = 0, AOTC_FFT_R2C = 1, AOTC_FFT_C2R = 2 };
enum { AOTC_FFT_MAX_RANK = 16 };

typedef struct aotc_fft_desc {
  int32_t dtype;   /**< AOTC_F32 or AOTC_F64 (abi.h) */
  int32_t kind;    /**< AOTC_FFT_* */
  int32_t forward; /**< C2C only: 1 forward (sign -1), 0 backward (+1) */
  int32_t rank;    /**< dimensions of `shape`, 0..AOTC_FFT_MAX_RANK */
  int32_t naxes;   /**< transformed axes, 1..rank; the last is R2C's / C2R's halved axis */
  int32_t onesided; /**< R2C only: 1 the half spectrum (n/2 + 1), 0 the whole (n; the mirror filled in) */
  int64_t shape[AOTC_FFT_MAX_RANK];
  int64_t axes[AOTC_FFT_MAX_RANK]; /**< distinct, each in [0, rank) */
  double scale;
} aotc_fft_desc;

/** 0 when `d` is valid, else AOTC_KERNELS_ERROR_INVALID (with a message as aotc_conv_check). */
int aotc_fft_check(const aotc_fft_desc *d, char *msg, int64_t msg_size);
/** Runs one transform (see above). `in` and `out` do not overlap. Returns AOTC_KERNELS_OK,
 *  AOTC_KERNELS_ERROR_INVALID (nothing written) or AOTC_KERNELS_ERROR_NO_MEMORY. */
int aotc_fft(const aotc_fft_desc *d, const void *in, void *out);

/* ---- Dense linear algebra (the linalg ops: lib/IR/ops/Linalg.cpp) ------------------------
 * One call factorizes or solves `batch` independent matrices, each dense row-major, through
 * the LAPACK (and cblas) of the BLAS the library links (OpenBLAS): matrices are transposed
 * into column-major work arrays, which are allocated on the heap per call (an object with
 * linalg ops is not allocation-free). Every routine runs on the calling thread, so results do
 * not depend on the caller's thread count. Several results of one factorization are packed in
 * one output of the operands' dtype, per batch entry and in this order (k = min(m, n)):
 *   AOTC_LINALG_CHOLESKY  a: A [n, n] (only the `upper` / lower triangle is read)
 *                         out: L [n, n] (U when `upper`; the other triangle zero), info [1]
 *   AOTC_LINALG_TRISOLVE  a: A [n, n] triangular (`upper`, `unit`: unit diagonal),
 *                         b: B [n, nrhs] (`left`: A X = B) or [nrhs, n] (X A = B); out: X as B
 *   AOTC_LINALG_LU        a: A [m, n]; out: LU [m, n] (getrf's packed L, U), pivots [k]
 *                         (1-based rows, as LAPACK's ipiv), info [1]
 *   AOTC_LINALG_LU_SOLVE  a: LU [n, n], b: pivots int64 [n], c: B as TRISOLVE's (`left`);
 *                         `adjoint`: solves with A^T; out: X as B
 *   AOTC_LINALG_EIGH      a: A [n, n] symmetric (the `upper` / lower triangle is read);
 *                         out: eigenvalues [n] ascending, then (`compute_uv`) V [n, n] whose
 *                         columns are the eigenvectors
 *   AOTC_LINALG_SVD       a: A [m, n]; out: (`compute_uv`) U [m, full ? m : k], then S [k]
 *                         descending, then (`compute_uv`) Vh [full ? n : k, n]; gesdd
 *   AOTC_LINALG_QR        a: A [m, n]; mode (`full`) 0 reduced: Q [m, k], R [k, n];
 *                         1 complete: Q [m, m], R [m, n]; 2 r: R [k, n] only
 *   AOTC_LINALG_PERM      b: pivots int64 [k] (as LU's); out: P [m, m] with A = P L U
 * info (and the pivots) are stored as values of the dtype (exact below 2^24). A numerical
 * failure (a matrix that is not positive-definite, or singular) is reported in info; with
 * `check` set, a positive info is returned as the call's status instead
 * (AOTC_KERNELS_LINALG_INFO + info, the first failing entry's info). An eigen / singular value
 * iteration that does not converge always fails the call that way (its results NaN), as
 * torch's eigh / svd raise. LU_SOLVE's pivots must lie in [1, n] (else
 * AOTC_KERNELS_ERROR_INVALID: getrs would index out of bounds). */
enum {
  AOTC_LINALG_CHOLESKY = 0, AOTC_LINALG_TRISOLVE = 1, AOTC_LINALG_LU = 2, AOTC_LINALG_LU_SOLVE = 3,
  AOTC_LINALG_EIGH = 4, AOTC_LINALG_SVD = 5, AOTC_LINALG_QR = 6, AOTC_LINALG_PERM = 7
};
enum { AOTC_KERNELS_LINALG_INFO = 1000 };

typedef struct aotc_linalg_desc {
  int32_t dtype;      /**< AOTC_F32 or AOTC_F64 (abi.h) */
  int32_t kind;       /**< AOTC_LINALG_* */
  int32_t upper;      /**< CHOLESKY, TRISOLVE, EIGH */
  int32_t left;       /**< TRISOLVE, LU_SOLVE */
  int32_t unit;       /**< TRISOLVE */
  int32_t adjoint;    /**< LU_SOLVE */
  int32_t full;       /**< SVD: full_matrices; QR: the mode (0 reduced, 1 complete, 2 r) */
  int32_t compute_uv; /**< SVD, EIGH: the vectors too */
  int32_t check;      /**< CHOLESKY, LU: a positive info fails the call */
  int32_t pad;
  int64_t batch, m, n; /**< matrices, and their rows / columns (square kinds: m = n) */
  int64_t nrhs;        /**< TRISOLVE, LU_SOLVE: right-hand sides */
} aotc_linalg_desc;

/** Runs one call (see above): operands a, b, c (NULL when the kind has none), packed result
 *  `out`, not overlapping the operands. Returns AOTC_KERNELS_OK, AOTC_KERNELS_ERROR_INVALID
 *  (a bad descriptor; nothing written), AOTC_KERNELS_ERROR_NO_MEMORY, or
 *  AOTC_KERNELS_LINALG_INFO + info (`check`). */
int aotc_linalg(const aotc_linalg_desc *d, const void *a, const void *b, const void *c, void *out);

/* ---- Special functions (ScalarOp::Special of the generated CPU kernels) ------------------
 * The value of special function `fn` at x (f32: computed in double, rounded once); `n` is
 * polygamma's order, a non-negative integer (ignored by the others). Pure functions of their
 * arguments, safe on any thread. Methods and torch's edge conventions: the compiler's
 * include/aotc/SpecialMath.h (Boost.Math). */
enum {
  AOTC_SPECIAL_LGAMMA = 0, AOTC_SPECIAL_DIGAMMA = 1, AOTC_SPECIAL_POLYGAMMA = 2, AOTC_SPECIAL_ERFC = 3,
  AOTC_SPECIAL_ERFINV = 4, AOTC_SPECIAL_ERFCX = 5, AOTC_SPECIAL_NDTRI = 6,
  AOTC_SPECIAL_I0 = 7, AOTC_SPECIAL_I0E = 8, AOTC_SPECIAL_I1 = 9, AOTC_SPECIAL_I1E = 10, /* modified Bessel, first kind */
  AOTC_SPECIAL_J0 = 11, AOTC_SPECIAL_J1 = 12, AOTC_SPECIAL_Y0 = 13, AOTC_SPECIAL_Y1 = 14, /* Bessel, both kinds */
  AOTC_SPECIAL_K0 = 15, AOTC_SPECIAL_K1 = 16, /* modified Bessel, second kind */
  AOTC_SPECIAL_COUNT = 17
};
float aotc_special_f32(int32_t fn, float x, float n);
double aotc_special_f64(int32_t fn, double x, double n);

/* ---- f32 GEMMs through oneDNN -------------------------------------------------------------
 * C = alpha op(A) op(B) + beta C with oneDNN's dnnl_sgemm (GemmDnnl.c), in cblas_sgemm's
 * argument order and enum values: order 101 (row-major) or 102 (column-major), trans 111 (no)
 * or 112 (yes); m, n, k >= 0 and leading dimensions as cblas. The GEMMs the compiler gives
 * oneDNN call this (--cpu-gemm; docs/stage-codegen.md "GEMM libraries"); `aotc --emit=kernels`
 * prints them `lib=onednn`. Always single-threaded: inside an OpenMP parallel region oneDNN
 * sees it and runs inline; outside one, the calling thread's nthreads-var is 1 for the call.
 * So a call's bits depend on its arguments alone, never on the thread count. Arguments oneDNN
 * refuses (which the compiler never emits) fall back to cblas_sgemm. */
void aotc_onednn_sgemm(int order, int trans_a, int trans_b, int m, int n, int k, float alpha, const float *a,
                       int lda, const float *b, int ldb, float beta, float *c, int ldc);

#ifdef __cplusplus
}
#endif

#endif
