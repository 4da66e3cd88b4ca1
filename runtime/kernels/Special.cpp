//===- Special.cpp - aotc_special_f32 / _f64: special functions per element --------===//
//
// aotc/kernels.h describes the calls; the functions themselves (Boost.Math, with torch's edge
// conventions) are in the compiler's include/aotc/SpecialMath.h, which the compiler's float64
// reference evaluation reads too: one implementation for both.
//===----------------------------------------------------------------------===//
#include "aotc/SpecialMath.h"

extern "C" float aotc_special_f32(int32_t fn, float x, float n) {
  return (float)aotc::special::eval(fn, (double)x, (double)n);
}

extern "C" double aotc_special_f64(int32_t fn, double x, double n) { return aotc::special::eval(fn, x, n); }
