/*===- Conv.c - The convolution primitives of libaotc_kernels (aotc/kernels.h) -===*
 *
 * im2col + GEMM. For batch entry n and group g, the column matrix is
 *   col[(cl*KH + i)*KW + j][p*OW + q] = x[n, g*Cg + cl, p*sH - pH + i*dH, q*sW - pW + j*dW]
 * (0 outside), so with W_g = w[g*Kg .. ][Cg*KH*KW] (row-major):
 *   forward      y_n,g  = W_g   @ col_n,g               [Kg, OH*OW]
 *   input grad   col    = W_g^T @ dy_n,g ; dx += col2im(col)
 *   weight grad  dW_g  += dy_n,g @ col_n,g^T            (n = 0, 1, ... in order)
 * Parallel loops split batch entries (forward, input grad: each writes its own n) or blocks
 * of output-channel rows (weight grad: each block sums over n in order): the bits do not
 * depend on the number of threads.
 *===----------------------------------------------------------------------===*/
#include "aotc/abi.h"
#include "aotc/kernels.h"

#include <cblas.h>
#include <string.h>

static int direct(const aotc_conv_desc *d) {
  return d->kh == 1 && d->kw == 1 && d->stride_h == 1 && d->stride_w == 1 && d->pad_h == 0 && d->pad_w == 0;
}

int64_t aotc_conv_workspace_elems(const aotc_conv_desc *d) {
  if (direct(d)) return 0;
  int64_t cg = d->c / d->groups;
  return d->n * cg * d->kh * d->kw * d->oh * d->ow;
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

void aotc_conv(const aotc_conv_desc *d, const void *a, const void *b, void *c, void *workspace) {
  if (d->dtype == AOTC_F64)
    conv_f64(d, (const double *)a, (const double *)b, (double *)c, (double *)workspace);
  else
    conv_f32(d, (const float *)a, (const float *)b, (float *)c, (float *)workspace);
}
