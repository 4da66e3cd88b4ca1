/*===- Conv.c - The convolution primitives of libaotc_kernels (aotc/kernels.h) -===*
 *
 * The descriptor check, the dispatch (f32: oneDNN, ConvDnnl.c; f64: im2col here) and the
 * im2col + GEMM path. For batch entry n and group g, the column matrix is
 *   col[(cl*KH + i)*KW + j][p*OW + q] = x[n, g*Cg + cl, p*sH - pH + i*dH, q*sW - pW + j*dW]
 * (0 outside), so with W_g = w[g*Kg .. ][Cg*KH*KW] (row-major):
 *   forward      y_n,g  = W_g   @ col_n,g               [Kg, OH*OW]
 *   input grad   col    = W_g^T @ dy_n,g ; dx += col2im(col)
 *   weight grad  dW_g  += dy_n,g @ col_n,g^T            (n = 0, 1, ... in order)
 * Parallel loops split batch entries (forward, input grad: each writes its own n) or blocks
 * of output-channel rows (weight grad: each block sums over n in order): the bits do not
 * depend on the number of threads.
 *===----------------------------------------------------------------------===*/
#include "ConvInternal.h"

#include "aotc/abi.h"

#include <cblas.h>
#include <limits.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

void aotc_kernels_format(char *msg, int64_t size, const char *fmt, ...) {
  if (!msg || size <= 0) return;
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(msg, (size_t)size, fmt, ap);
  va_end(ap);
}

/* a * b into *r; 0 on overflow (all operands are >= 0 here). */
static int mul(int64_t a, int64_t b, int64_t *r) { return !__builtin_mul_overflow(a, b, r); }
static int mul4(int64_t a, int64_t b, int64_t c, int64_t d, int64_t *r) {
  int64_t x, y;
  return mul(a, b, &x) && mul(x, c, &y) && mul(y, d, r);
}

int aotc_conv_check(const aotc_conv_desc *d, char *msg, int64_t size) {
#define BAD(...)                                                                                   \
  do {                                                                                             \
    aotc_kernels_format(msg, size, __VA_ARGS__);                                                   \
    return AOTC_KERNELS_ERROR_INVALID;                                                             \
  } while (0)
  if (!d) BAD("no convolution descriptor");
  if (d->dtype != AOTC_F32 && d->dtype != AOTC_F64) BAD("dtype %d is neither f32 nor f64", (int)d->dtype);
  if (d->role < AOTC_CONV_FORWARD || d->role > AOTC_CONV_WEIGHT_GRAD) BAD("unknown role %d", (int)d->role);
  if (d->n < 0 || d->c < 1 || d->k < 1 || d->groups < 1 || d->h < 1 || d->w < 1 || d->kh < 1 || d->kw < 1)
    BAD("sizes must be positive (n >= 0): n=%lld c=%lld k=%lld groups=%lld h=%lld w=%lld kh=%lld kw=%lld",
        (long long)d->n, (long long)d->c, (long long)d->k, (long long)d->groups, (long long)d->h,
        (long long)d->w, (long long)d->kh, (long long)d->kw);
  if (d->c % d->groups || d->k % d->groups)
    BAD("groups=%lld does not divide c=%lld and k=%lld", (long long)d->groups, (long long)d->c,
        (long long)d->k);
  if (d->stride_h < 1 || d->stride_w < 1 || d->dil_h < 1 || d->dil_w < 1 || d->pad_h < 0 || d->pad_w < 0)
    BAD("stride and dilation must be >= 1, padding >= 0: stride=(%lld, %lld) dilation=(%lld, %lld) "
        "padding=(%lld, %lld)",
        (long long)d->stride_h, (long long)d->stride_w, (long long)d->dil_h, (long long)d->dil_w,
        (long long)d->pad_h, (long long)d->pad_w);
  /* Bounded so that the output-size arithmetic below cannot overflow. */
  const int64_t lim = (int64_t)1 << 40;
  if (d->h > lim || d->w > lim || d->kh > lim || d->kw > lim || d->pad_h > lim || d->pad_w > lim ||
      d->dil_h > lim || d->dil_w > lim || d->stride_h > lim || d->stride_w > lim)
    BAD("a size, stride, padding or dilation exceeds 2^40");
  int64_t eh = d->h + 2 * d->pad_h - d->dil_h * (d->kh - 1) - 1, ew = d->w + 2 * d->pad_w - d->dil_w * (d->kw - 1) - 1;
  if (eh < 0 || ew < 0) BAD("the dilated kernel (%lld x %lld) is larger than the padded input (%lld x %lld)",
                            (long long)(d->dil_h * (d->kh - 1) + 1), (long long)(d->dil_w * (d->kw - 1) + 1),
                            (long long)(d->h + 2 * d->pad_h), (long long)(d->w + 2 * d->pad_w));
  if (d->oh != eh / d->stride_h + 1 || d->ow != ew / d->stride_w + 1)
    BAD("output size %lld x %lld, expected %lld x %lld", (long long)d->oh, (long long)d->ow,
        (long long)(eh / d->stride_h + 1), (long long)(ew / d->stride_w + 1));
  int64_t t;
  if (!mul4(d->n, d->c, d->h, d->w, &t) || t > INT64_MAX / 8 || !mul4(d->n, d->k, d->oh, d->ow, &t) ||
      t > INT64_MAX / 8 || !mul4(d->k, d->c / d->groups, d->kh, d->kw, &t) || t > INT64_MAX / 8)
    BAD("the tensors are too large (elements overflow 64 bits)");
  return AOTC_KERNELS_OK;
#undef BAD
}

static int direct(const aotc_conv_desc *d) {
  return d->kh == 1 && d->kw == 1 && d->stride_h == 1 && d->stride_w == 1 && d->pad_h == 0 && d->pad_w == 0;
}

int64_t aotc_conv_im2col_workspace_elems(const aotc_conv_desc *d) {
  if (aotc_conv_check(d, NULL, 0) != AOTC_KERNELS_OK || direct(d)) return 0;
  int64_t r;
  return mul4(d->n, d->c / d->groups * d->kh * d->kw, d->oh, d->ow, &r) ? r : 0;
}

int64_t aotc_conv_workspace_elems(const aotc_conv_desc *d) {
  return d && d->dtype == AOTC_F64 ? aotc_conv_im2col_workspace_elems(d) : 0;
}

#define DEFINE_CONV(T, GEMM, SUFFIX)                                                                  \
  static void im2col_##SUFFIX(const aotc_conv_desc *d, const T *x, T *col) {                        \
    int64_t cg = d->c / d->groups, ohw = d->oh * d->ow;                                             \
    for (int64_t cl = 0; cl < cg; ++cl)                                                             \
      for (int64_t i = 0; i < d->kh; ++i)                                                           \
        for (int64_t j = 0; j < d->kw; ++j) {                                                       \
          T *row = col + ((cl * d->kh + i) * d->kw + j) * ohw;                                       \
          const T *xc = x + cl * d->h * d->w;                                                       \
          for (int64_t p = 0; p < d->oh; ++p) {                                                     \
            int64_t hh = p * d->stride_h - d->pad_h + i * d->dil_h;                                 \
            T *r = row + p * d->ow;                                                                 \
            if (hh < 0 || hh >= d->h) {                                                             \
              memset(r, 0, sizeof(T) * (size_t)d->ow);                                              \
              continue;                                                                             \
            }                                                                                       \
            for (int64_t q = 0; q < d->ow; ++q) {                                                   \
              int64_t ww = q * d->stride_w - d->pad_w + j * d->dil_w;                               \
              r[q] = ww < 0 || ww >= d->w ? (T)0 : xc[hh * d->w + ww];                              \
            }                                                                                       \
          }                                                                                         \
        }                                                                                           \
  }                                                                                                 \
  /* dx (one batch entry and group, [Cg, H, W]) += col2im(col). */                                 \
  static void col2im_##SUFFIX(const aotc_conv_desc *d, const T *col, T *dx) {                       \
    int64_t cg = d->c / d->groups, ohw = d->oh * d->ow;                                             \
    for (int64_t cl = 0; cl < cg; ++cl)                                                             \
      for (int64_t i = 0; i < d->kh; ++i)                                                           \
        for (int64_t j = 0; j < d->kw; ++j) {                                                       \
          const T *row = col + ((cl * d->kh + i) * d->kw + j) * ohw;                                 \
          T *xc = dx + cl * d->h * d->w;                                                            \
          for (int64_t p = 0; p < d->oh; ++p) {                                                     \
            int64_t hh = p * d->stride_h - d->pad_h + i * d->dil_h;                                 \
            if (hh < 0 || hh >= d->h) continue;                                                     \
            for (int64_t q = 0; q < d->ow; ++q) {                                                   \
              int64_t ww = q * d->stride_w - d->pad_w + j * d->dil_w;                               \
              if (ww >= 0 && ww < d->w) xc[hh * d->w + ww] += row[p * d->ow + q];                   \
            }                                                                                       \
          }                                                                                         \
        }                                                                                           \
  }                                                                                                 \
  static void conv_##SUFFIX(const aotc_conv_desc *d, const T *a, const T *b, T *c, T *ws) {         \
    const int64_t G = d->groups, cg = d->c / G, kg = d->k / G, kk = d->kh * d->kw;                  \
    const int64_t ohw = d->oh * d->ow, hw = d->h * d->w, ck = cg * kk;                              \
    const int dir = direct(d);                                                                      \
    if (d->role == AOTC_CONV_FORWARD) { /* a = x, b = w, c = y */                                   \
      _Pragma("omp parallel for schedule(static)")                                                  \
      for (int64_t n = 0; n < d->n; ++n)                                                            \
        for (int64_t g = 0; g < G; ++g) {                                                           \
          const T *xg = a + (n * d->c + g * cg) * hw;                                               \
          const T *col = xg;                                                                        \
          if (!dir) {                                                                               \
            T *wcol = ws + n * ck * ohw;                                                            \
            im2col_##SUFFIX(d, xg, wcol);                                                           \
            col = wcol;                                                                             \
          }                                                                                         \
          GEMM(CblasRowMajor, CblasNoTrans, CblasNoTrans, (int)kg, (int)ohw, (int)ck, (T)1,          \
               b + g * kg * ck, (int)ck, col, (int)ohw, (T)0, c + (n * d->k + g * kg) * ohw, (int)ohw); \
        }                                                                                           \
    } else if (d->role == AOTC_CONV_INPUT_GRAD) { /* a = dy, b = w, c = dx */                       \
      _Pragma("omp parallel for schedule(static)")                                                  \
      for (int64_t n = 0; n < d->n; ++n)                                                            \
        for (int64_t g = 0; g < G; ++g) {                                                           \
          T *dxg = c + (n * d->c + g * cg) * hw;                                                    \
          const T *dyg = a + (n * d->k + g * kg) * ohw;                                             \
          if (dir) {                                                                                \
            GEMM(CblasRowMajor, CblasTrans, CblasNoTrans, (int)ck, (int)ohw, (int)kg, (T)1,          \
                 b + g * kg * ck, (int)ck, dyg, (int)ohw, (T)0, dxg, (int)ohw);                     \
            continue;                                                                               \
          }                                                                                         \
          T *col = ws + n * ck * ohw;                                                               \
          GEMM(CblasRowMajor, CblasTrans, CblasNoTrans, (int)ck, (int)ohw, (int)kg, (T)1,            \
               b + g * kg * ck, (int)ck, dyg, (int)ohw, (T)0, col, (int)ohw);                       \
          memset(dxg, 0, sizeof(T) * (size_t)(cg * hw));                                            \
          col2im_##SUFFIX(d, col, dxg);                                                             \
        }                                                                                           \
    } else { /* weight grad: a = dy, b = x, c = dw */                                               \
      for (int64_t g = 0; g < G; ++g) {                                                             \
        if (!dir) {                                                                                 \
          _Pragma("omp parallel for schedule(static)")                                              \
          for (int64_t n = 0; n < d->n; ++n)                                                        \
            im2col_##SUFFIX(d, b + (n * d->c + g * cg) * hw, ws + n * ck * ohw);                    \
        }                                                                                           \
        /* Blocks of 8 output-channel rows, each summing over n in order. */                       \
        const int64_t blk = 8, nblk = (kg + blk - 1) / blk;                                         \
        T *dwg = c + g * kg * ck;                                                                   \
        _Pragma("omp parallel for schedule(static)")                                                \
        for (int64_t r = 0; r < nblk; ++r) {                                                        \
          int64_t r0 = r * blk, rows = kg - r0 < blk ? kg - r0 : blk;                               \
          for (int64_t n = 0; n < d->n; ++n) {                                                      \
            const T *col = dir ? b + (n * d->c + g * cg) * hw : ws + n * ck * ohw;                   \
            GEMM(CblasRowMajor, CblasNoTrans, CblasTrans, (int)rows, (int)ck, (int)ohw, (T)1,        \
                 a + (n * d->k + g * kg + r0) * ohw, (int)ohw, col, (int)ohw, n ? (T)1 : (T)0,       \
                 dwg + r0 * ck, (int)ck);                                                           \
          }                                                                                         \
          if (d->n == 0) memset(dwg + r0 * ck, 0, sizeof(T) * (size_t)(rows * ck));                 \
        }                                                                                           \
      }                                                                                             \
    }                                                                                               \
  }

DEFINE_CONV(float, cblas_sgemm, f32)
DEFINE_CONV(double, cblas_dgemm, f64)

/* The pointers a call needs (workspace only when the path uses one). */
static int checkPointers(const aotc_conv_desc *d, const void *a, const void *b, void *c, void *ws,
                         int64_t wsElems, char *msg, int64_t size) {
  if (!a || !b || !c) {
    aotc_kernels_format(msg, size, "a NULL operand (a=%p b=%p c=%p)", a, b, (void *)c);
    return AOTC_KERNELS_ERROR_INVALID;
  }
  if (wsElems > 0 && !ws) {
    aotc_kernels_format(msg, size, "no workspace (%lld elements needed)", (long long)wsElems);
    return AOTC_KERNELS_ERROR_INVALID;
  }
  (void)d;
  return AOTC_KERNELS_OK;
}

static int im2col(const aotc_conv_desc *d, const void *a, const void *b, void *c, void *ws, char *msg,
                  int64_t size) {
  int rc = aotc_conv_check(d, msg, size);
  if (rc) return rc;
  int64_t cg = d->c / d->groups, ck = cg * d->kh * d->kw, ohw = d->oh * d->ow;
  if (d->k / d->groups > INT_MAX || ck > INT_MAX || ohw > INT_MAX) {
    aotc_kernels_format(msg, size, "a GEMM dimension exceeds the 32-bit BLAS interface (k/groups=%lld, "
                        "c/groups*kh*kw=%lld, oh*ow=%lld)", (long long)(d->k / d->groups), (long long)ck,
                        (long long)ohw);
    return AOTC_KERNELS_ERROR_INVALID;
  }
  rc = checkPointers(d, a, b, c, ws, aotc_conv_im2col_workspace_elems(d), msg, size);
  if (rc) return rc;
  if (d->dtype == AOTC_F64)
    conv_f64(d, (const double *)a, (const double *)b, (double *)c, (double *)ws);
  else
    conv_f32(d, (const float *)a, (const float *)b, (float *)c, (float *)ws);
  return AOTC_KERNELS_OK;
}

int aotc_conv_im2col(const aotc_conv_desc *d, const void *a, const void *b, void *c, void *workspace) {
  return im2col(d, a, b, c, workspace, NULL, 0);
}

int aotc_conv(aotc_kernels_state *s, const aotc_conv_desc *d, const void *a, const void *b, void *c,
              void *workspace) {
  char *msg = aotc_kernels_state_message(s);
  int64_t size = msg ? AOTC_KERNELS_MESSAGE_BYTES : 0;
  int rc = aotc_conv_check(d, msg, size);
  if (rc == AOTC_KERNELS_OK && d->dtype == AOTC_F32) {
    rc = checkPointers(d, a, b, c, workspace, 0, msg, size);
    if (rc == AOTC_KERNELS_OK) rc = aotc_conv_dnnl(s, d, a, b, c);
  } else if (rc == AOTC_KERNELS_OK) {
    rc = im2col(d, a, b, c, workspace, msg, size);
  }
  aotc_kernels_state_failed(s, d, rc);
  return rc;
}
