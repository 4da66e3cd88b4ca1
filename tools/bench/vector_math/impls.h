// The f32 implementations compared, each as an array kernel y[i] = f(x[i]), n % 16 == 0.
#pragma once
#include <immintrin.h>
#include <math.h>
#include <stddef.h>
#include <stdint.h>
#include <sleef.h>
#include "aotc_replica.h"

extern "C" {
// glibc 2.36 libmvec (x86_64 vector ABI: e = AVX-512 16 lanes, d = AVX2 8 lanes).
__m512 _ZGVeN16v_expf(__m512);
__m512 _ZGVeN16v_logf(__m512);
__m512 _ZGVeN16v_tanhf(__m512);
__m512 _ZGVeN16v_erff(__m512);
__m256 _ZGVdN8v_expf(__m256);
__m256 _ZGVdN8v_logf(__m256);
__m256 _ZGVdN8v_tanhf(__m256);
__m256 _ZGVdN8v_erff(__m256);
}

typedef void (*kern_t)(const float *, float *, size_t);

#define K512(NAME, F)                                                             \
  static void NAME(const float *x, float *y, size_t n) {                         \
    for (size_t i = 0; i < n; i += 16) _mm512_storeu_ps(y + i, F(_mm512_loadu_ps(x + i))); \
  }
#define K256(NAME, F)                                                             \
  static void NAME(const float *x, float *y, size_t n) {                         \
    for (size_t i = 0; i < n; i += 8) _mm256_storeu_ps(y + i, F(_mm256_loadu_ps(x + i))); \
  }
// sigmoid = 1 / (1 + exp(-x)) from a vector exp.
#define SIG512(NAME, F)                                                          \
  static void NAME(const float *x, float *y, size_t n) {                         \
    const __m512 one = _mm512_set1_ps(1.0f), z = _mm512_setzero_ps();            \
    for (size_t i = 0; i < n; i += 16)                                           \
      _mm512_storeu_ps(y + i, _mm512_div_ps(one, _mm512_add_ps(one, F(_mm512_sub_ps(z, _mm512_loadu_ps(x + i)))))); \
  }
#define SIG256(NAME, F)                                                          \
  static void NAME(const float *x, float *y, size_t n) {                         \
    const __m256 one = _mm256_set1_ps(1.0f), z = _mm256_setzero_ps();            \
    for (size_t i = 0; i < n; i += 8)                                            \
      _mm256_storeu_ps(y + i, _mm256_div_ps(one, _mm256_add_ps(one, F(_mm256_sub_ps(z, _mm256_loadu_ps(x + i)))))); \
  }
#define SCALAR(NAME, EXPR)                                                       \
  static void NAME(const float *x, float *y, size_t n) {                         \
    for (size_t i = 0; i < n; ++i) { float v = x[i]; y[i] = (EXPR); }           \
  }

K512(sleef512_exp_u10, Sleef_expf16_u10avx512f)
K256(sleef256_exp_u10, Sleef_expf8_u10avx2)
K512(sleef512_log_u10, Sleef_logf16_u10avx512f)
K256(sleef256_log_u10, Sleef_logf8_u10avx2)
K512(sleef512_log_u35, Sleef_logf16_u35avx512f)
K256(sleef256_log_u35, Sleef_logf8_u35avx2)
K512(sleef512_tanh_u10, Sleef_tanhf16_u10avx512f)
K256(sleef256_tanh_u10, Sleef_tanhf8_u10avx2)
K512(sleef512_tanh_u35, Sleef_tanhf16_u35avx512f)
K256(sleef256_tanh_u35, Sleef_tanhf8_u35avx2)
K512(sleef512_erf_u10, Sleef_erff16_u10avx512f)
K256(sleef256_erf_u10, Sleef_erff8_u10avx2)
SIG512(sleef512_sig_u10, Sleef_expf16_u10avx512f)
SIG256(sleef256_sig_u10, Sleef_expf8_u10avx2)

K512(mvec512_exp, _ZGVeN16v_expf)
K256(mvec256_exp, _ZGVdN8v_expf)
K512(mvec512_log, _ZGVeN16v_logf)
K256(mvec256_log, _ZGVdN8v_logf)
K512(mvec512_tanh, _ZGVeN16v_tanhf)
K256(mvec256_tanh, _ZGVdN8v_tanhf)
K512(mvec512_erf, _ZGVeN16v_erff)
K256(mvec256_erf, _ZGVdN8v_erff)
SIG512(mvec512_sig, _ZGVeN16v_expf)
SIG256(mvec256_sig, _ZGVdN8v_expf)

// aotc replica: plain loops, left to clang's loop vectorizer.
SCALAR(replica_exp, aotc_expf(v))
SCALAR(replica_log, aotc_logf(v))
SCALAR(replica_sig, aotc_sigmoidf(v))

// scalar glibc libm (f32 entry points), a loop of calls.
SCALAR(libm_exp, expf(v))
SCALAR(libm_log, logf(v))
SCALAR(libm_tanh, tanhf(v))
SCALAR(libm_erf, erff(v))
SCALAR(libm_sig, 1.0f / (1.0f + expf(-v)))
