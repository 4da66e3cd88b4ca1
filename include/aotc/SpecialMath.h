//===- SpecialMath.h - Special functions (gamma family, erf family, Bessel) -*- C++ -*-===//
//
// The one home of the special functions aotc computes: lgamma, digamma, polygamma, erfc,
// erfinv, erfcx, ndtri and the Bessel functions of orders 0 and 1 (torch's lgamma, digamma,
// polygamma, erfc, erfinv, special_erfcx, special_ndtri, i0, special_i0e / i1 / i1e,
// special_bessel_j0 / j1 / y0 / y1, special_modified_bessel_i0 / i1 / k0 / k1).
// Header-only and read by two sides: the compiler's float64 reference (lib/IR/ops/Special.cpp)
// and libaotc_kernels' aotc_special_f32 / _f64 (runtime/kernels/Special.cpp), which the
// generated CPU kernels call once per element (ScalarOp::Special). f32 values are computed in
// double and rounded once, so they are within 0.5 ulp of the double result.
//
// Method: Boost.Math (Debian libboost-dev, header-only; BSL-1.0), errors ignored (a NaN or
// an infinity instead of an exception), except where torch's edge conventions differ; those
// are handled here first (cited per function): torch's ATen/native/Math.h (Cephes-based).
//===----------------------------------------------------------------------===//
#pragma once

#include "aotc/kernels.h"

#include <boost/math/special_functions/bessel.hpp>
#include <boost/math/special_functions/digamma.hpp>
#include <boost/math/special_functions/erf.hpp>
#include <boost/math/special_functions/polygamma.hpp>

#include <cmath>
#include <cstdint>

namespace aotc::special {

namespace bp = boost::math::policies;
/// Every Boost error becomes its IEEE value (domain: NaN, pole and overflow: +-inf), never a
/// throw; double stays double.
using Policy = bp::policy<bp::domain_error<bp::ignore_error>, bp::pole_error<bp::ignore_error>,
                          bp::overflow_error<bp::ignore_error>, bp::underflow_error<bp::ignore_error>,
                          bp::evaluation_error<bp::ignore_error>, bp::rounding_error<bp::ignore_error>,
                          bp::promote_double<false>>;

/// e^-x I_v(x) for x > 700 (I_v overflows a double near 713): Abramowitz & Stegun 9.7.1, three
/// terms of the asymptotic series (relative error below 1e-10 there).
inline double scaledBesselILarge(int v, double x) {
  double mu = 4.0 * v * v, z = 8.0 * x;
  return (1.0 - (mu - 1) / z + (mu - 1) * (mu - 9) / (2 * z * z) - (mu - 1) * (mu - 9) * (mu - 25) / (6 * z * z * z)) /
         std::sqrt(2 * M_PI * x);
}

/// e^-|x| I_v(|x|) (v = 0, 1), sign-less.
inline double scaledBesselI(int v, double ax) {
  if (std::isinf(ax)) return 0.0;
  if (ax > 700) return scaledBesselILarge(v, ax);
  return std::exp(-ax) * boost::math::cyl_bessel_i(v, ax, Policy());
}

/// exp(x^2) erfc(x): directly while exp(x^2) is finite, the asymptotic series beyond
/// (A&S 7.1.23, four terms: relative error below 1e-10 for x > 26).
inline double erfcx(double x) {
  if (std::isnan(x)) return x;
  if (x < 26) return std::exp(x * x) * std::erfc(x);
  double r = 1 / (x * x);
  return (1 - r / 2 + 3 * r * r / 4 - 15 * r * r * r / 8) / (x * std::sqrt(M_PI));
}

/// Special function `fn` (AOTC_SPECIAL_*, aotc/kernels.h) at x; `n` is polygamma's order (a
/// non-negative integer; ignored by the others).
inline double eval(int32_t fn, double x, double n) {
  using namespace boost::math;
  const double inf = INFINITY, nan = NAN;
  if (std::isnan(x)) return x;
  bool integral = x == std::trunc(x);
  switch (fn) {
  case AOTC_SPECIAL_LGAMMA: {
    int sign; // lgamma_r: glibc's lgamma without the global signgam (kernels run on threads)
    return ::lgamma_r(x, &sign);
  }
  case AOTC_SPECIAL_DIGAMMA: // Math.h calc_digamma: +-0 -> -+inf, negative integers -> NaN
    if (x == 0) return std::copysign(inf, -x);
    if (x < 0 && integral) return nan;
    return digamma(x, Policy());
  case AOTC_SPECIAL_POLYGAMMA: {
    int k = (int)n;
    if (k == 0) return eval(AOTC_SPECIAL_DIGAMMA, x, 0);
    // Math.h calc_polygamma: (-1)^(n+1) n! zeta(n + 1, x); Cephes' zeta is +inf at the
    // non-positive integers.
    if (std::isinf(x)) // as eager's kernels: trigamma's series gives 0 / NaN, Cephes' zeta NaN / +inf
      return k == 1 ? (x > 0 ? 0.0 : nan) : x > 0 ? nan : (k % 2 ? inf : -inf);
    if (x <= 0 && integral) return k % 2 ? inf : -inf;
    double v = polygamma(k, x, Policy());
    if (std::isinf(v) && x > 0) return k % 2 ? inf : -inf; // Boost's ignored overflow is +inf
    return v;
  }
  case AOTC_SPECIAL_ERFC: return std::erfc(x);
  case AOTC_SPECIAL_ERFINV: // calc_erfinv: +-1 -> +-inf, |x| > 1 -> NaN
    if (std::fabs(x) > 1) return nan;
    if (std::fabs(x) == 1) return std::copysign(inf, x);
    return erf_inv(x, Policy());
  case AOTC_SPECIAL_ERFCX: return erfcx(x);
  case AOTC_SPECIAL_NDTRI: // calc_ndtri: 0 -> -inf, 1 -> +inf, outside [0, 1] -> NaN
    if (x < 0 || x > 1) return nan;
    if (x == 0) return -inf;
    if (x == 1) return inf;
    return -M_SQRT2 * erfc_inv(2 * x, Policy());
  // At +-inf eager's Cephes kernels give NaN for i0, i1, j0, j1 (and y0, y1 at +inf) where the
  // limits are inf / 0; aotc gives eager's values (docs/special.md).
  case AOTC_SPECIAL_I0: return std::isinf(x) ? nan : cyl_bessel_i(0, std::fabs(x), Policy());
  case AOTC_SPECIAL_I0E: return scaledBesselI(0, std::fabs(x));
  case AOTC_SPECIAL_I1: // odd, and I1 >= 0 on [0, inf)
    return std::isinf(x) ? nan : std::copysign(cyl_bessel_i(1, std::fabs(x), Policy()), x);
  case AOTC_SPECIAL_I1E: return std::copysign(scaledBesselI(1, std::fabs(x)), x);
  case AOTC_SPECIAL_J0: return std::isinf(x) ? nan : cyl_bessel_j(0, std::fabs(x), Policy());
  case AOTC_SPECIAL_J1: { // odd; J1(|x|) changes sign, so negate rather than copysign
    if (std::isinf(x)) return nan;
    double v = cyl_bessel_j(1, std::fabs(x), Policy());
    return std::signbit(x) ? -v : v;
  }
  case AOTC_SPECIAL_Y0: case AOTC_SPECIAL_Y1: // bessel_y0/y1_forward: 0 -> -inf, x < 0 -> NaN
    if (x < 0) return nan;
    if (x == 0) return -inf;
    if (std::isinf(x)) return nan;
    return cyl_neumann(fn == AOTC_SPECIAL_Y0 ? 0 : 1, x, Policy());
  case AOTC_SPECIAL_K0: case AOTC_SPECIAL_K1: // modified_bessel_k0/k1_forward: 0 -> inf, x < 0 -> NaN
    if (x < 0) return nan;
    if (x == 0) return inf;
    if (std::isinf(x)) return 0.0;
    return cyl_bessel_k(fn == AOTC_SPECIAL_K0 ? 0 : 1, x, Policy());
  default: return nan;
  }
}

} // namespace aotc::special
