// C replica of aotc's f32 exp and log (lib/Codegen/VectorMath.cpp):
// branch-free f64 evaluation rounded once to f32. The steps VectorMath marks contractible
// (mulAdd: x - k ln2 and the Horner steps) are explicit fma(); every other op is plain and
// fp-contract is off inside, as MLIR emits those fmul/fadd without the contract flag.
#pragma once
#include <math.h>
#include <stdint.h>
#include <string.h>

static inline double rp_d(int64_t b) { double d; memcpy(&d, &b, 8); return d; }
static inline int64_t rp_b(double d) { int64_t b; memcpy(&b, &d, 8); return b; }

static inline float aotc_expf(float x) {
#pragma clang fp contract(off)
  const double kMagic = 6755399441055744.0;
  // Taylor 1/n!, n = 0..9, computed as VectorMath does (fact *= n; 1.0 / fact).
  static const double T[10] = {1.0, 1.0, 1.0 / 2.0, 1.0 / 6.0, 1.0 / 24.0, 1.0 / 120.0,
                               1.0 / 720.0, 1.0 / 5040.0, 1.0 / 40320.0, 1.0 / 362880.0};
  double xd = x;
  double xc = xd > -200.0 ? xd : (xd != xd ? xd : -200.0); // arith.maximumf(xd, -200): NaN propagates
  xc = xc < 200.0 ? xc : (xc != xc ? xc : 200.0);           // arith.minimumf(.., 200)
  double k = __builtin_roundeven(xc * 1.4426950408889634074);
  double r = fma(k, -0.69314718055994530942, xc);
  double p = T[9];
  for (int n = 8; n >= 0; --n) p = fma(p, r, T[n]);
  int64_t kbits = rp_b(k + kMagic);
  double scale = rp_d((kbits + 1023) << 52);
  float y = (float)(p * scale);
  return x != x ? x : y;
}

static inline float aotc_logf(float x) {
#pragma clang fp contract(off)
  const double kMagic = 6755399441055744.0;
  const int64_t kMagicBits = 0x4338000000000000;
  static const double A[8] = {2.0 / 1, 2.0 / 3, 2.0 / 5, 2.0 / 7, 2.0 / 9, 2.0 / 11, 2.0 / 13, 2.0 / 15};
  double xd = x;
  int64_t bits = rp_b(xd);
  int64_t e = (int64_t)((uint64_t)bits >> 52) - 1023;
  double m = rp_d((bits & ((int64_t(1) << 52) - 1)) | (int64_t(1023) << 52));
  int big = m > 1.4142135623730950488;
  m = big ? m * 0.5 : m;
  e = big ? e + 1 : e;
  double s = (m - 1.0) / (m + 1.0);
  double s2 = s * s;
  double h = A[7];
  for (int n = 6; n >= 0; --n) h = fma(h, s2, A[n]);
  double logm = s * h;
  double ed = rp_d(e + kMagicBits) - kMagic;
  float y = (float)(ed * 0.69314718055994530942 + logm);
  y = x == INFINITY ? x : y;
  y = x < 0.0f ? NAN : y;
  y = x == 0.0f ? -INFINITY : y;
  return x != x ? x : y;
}

// aotc's sigmoid rule (OpLowering.cpp sigmoidRule): 1 / (1 + exp(-x)) in f32 with the exp above.
static inline float aotc_sigmoidf(float x) { return 1.0f / (1.0f + aotc_expf(-x)); }
