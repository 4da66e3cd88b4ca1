//===- SpecialTest.cpp - libaotc_kernels' special functions (aotc_special_f32/_f64) --===//
//
// Edge values against eager PyTorch 2.15's CPU kernels (printed by torch.lgamma, torch.digamma,
// torch.polygamma, torch.special.* on [0, -0, -1, -2.5, inf, -inf, nan]): poles, signed zeros,
// domain errors, infinities; then interior values against independent closed forms
// (lgamma(n) = log((n-1)!), digamma(1) = -gamma, trigamma(1) = pi^2/6, erfc, erfinv(erf(x)),
// I0 / J0 series), f32 within 2 ulp of the rounded f64 value; an unknown function id is NaN.
//===----------------------------------------------------------------------===//
#include "aotc/kernels.h"

#include <catch2/catch.hpp>

#include <cmath>
#include <limits>

namespace {

const double inf = std::numeric_limits<double>::infinity();
bool same(double a, double b) { // NaN == NaN, and the sign of zeros and infinities
  if (std::isnan(b)) return std::isnan(a);
  return a == b && std::signbit(a) == std::signbit(b);
}
double f64(int fn, double x, double n = 0) { return aotc_special_f64(fn, x, n); }

} // namespace

TEST_CASE("special functions: eager's values at poles, zeros, infinities and NaN", "[special]") {
  struct Row {
    int fn;
    double n;
    double want[7]; // at 0, -0, -1, -2.5 (finite: checked below), inf, -inf, nan
  };
  const double N = NAN, F = 0.5; // F: finite, compared in the next test case
  const Row rows[] = {
      {AOTC_SPECIAL_LGAMMA, 0, {inf, inf, inf, F, inf, inf, N}},
      {AOTC_SPECIAL_DIGAMMA, 0, {-inf, inf, N, F, inf, N, N}},
      {AOTC_SPECIAL_POLYGAMMA, 1, {inf, inf, inf, F, 0.0, N, N}},
      {AOTC_SPECIAL_POLYGAMMA, 2, {-inf, -inf, -inf, F, N, -inf, N}},
      {AOTC_SPECIAL_ERFC, 0, {1.0, 1.0, F, F, 0.0, 2.0, N}},
      {AOTC_SPECIAL_ERFCX, 0, {1.0, 1.0, F, F, 0.0, inf, N}},
      {AOTC_SPECIAL_I0, 0, {1.0, 1.0, F, F, N, N, N}},
      {AOTC_SPECIAL_I0E, 0, {1.0, 1.0, F, F, 0.0, 0.0, N}},
      {AOTC_SPECIAL_I1, 0, {0.0, -0.0, F, F, N, N, N}},
      {AOTC_SPECIAL_I1E, 0, {0.0, -0.0, F, F, 0.0, -0.0, N}},
      {AOTC_SPECIAL_J0, 0, {1.0, 1.0, F, F, N, N, N}},
      {AOTC_SPECIAL_J1, 0, {0.0, -0.0, F, F, N, N, N}},
      {AOTC_SPECIAL_Y0, 0, {-inf, -inf, N, N, N, N, N}},
      {AOTC_SPECIAL_Y1, 0, {-inf, -inf, N, N, N, N, N}},
      {AOTC_SPECIAL_K0, 0, {inf, inf, N, N, 0.0, N, N}},
      {AOTC_SPECIAL_K1, 0, {inf, inf, N, N, 0.0, N, N}},
  };
  const double xs[7] = {0.0, -0.0, -1.0, -2.5, inf, -inf, NAN};
  for (const Row &r : rows)
    for (int k = 0; k < 7; ++k) {
      if (r.want[k] == F) continue;
      INFO("fn " << r.fn << " n " << r.n << " x " << xs[k]);
      CHECK(same(f64(r.fn, xs[k], r.n), r.want[k]));
      CHECK(same((double)aotc_special_f32(r.fn, (float)xs[k], (float)r.n), r.want[k]));
    }
  // erfinv and ndtri at the ends of their domains.
  CHECK(same(f64(AOTC_SPECIAL_ERFINV, 1.0), inf));
  CHECK(same(f64(AOTC_SPECIAL_ERFINV, -1.0), -inf));
  CHECK(std::isnan(f64(AOTC_SPECIAL_ERFINV, 1.5)));
  CHECK(same(f64(AOTC_SPECIAL_NDTRI, 0.0), -inf));
  CHECK(same(f64(AOTC_SPECIAL_NDTRI, 1.0), inf));
  CHECK(std::isnan(f64(AOTC_SPECIAL_NDTRI, -0.5)));
  CHECK(std::isnan(f64(AOTC_SPECIAL_COUNT, 1.0))); // not a function
  // polygamma's overflow near 0+ keeps its sign ((-1)^(n+1) n! / x^(n+1)), as eager's
  CHECK(same(f64(AOTC_SPECIAL_POLYGAMMA, 1e-110, 2), -inf));
  CHECK(same((double)aotc_special_f32(AOTC_SPECIAL_POLYGAMMA, 1e-38f, 8.0f), -inf));
  CHECK(same((double)aotc_special_f32(AOTC_SPECIAL_POLYGAMMA, 1e-38f, 7.0f), inf));
}

TEST_CASE("special functions: interior values against closed forms and series", "[special]") {
  const double egamma = 0.57721566490153286061;
  CHECK(f64(AOTC_SPECIAL_LGAMMA, 5.0) == Approx(std::log(24.0)).epsilon(1e-14));
  CHECK(f64(AOTC_SPECIAL_LGAMMA, -2.5) == Approx(std::log(std::sqrt(M_PI) * 8.0 / 15.0)).epsilon(1e-13));
  CHECK(f64(AOTC_SPECIAL_DIGAMMA, 1.0) == Approx(-egamma).epsilon(1e-14));
  CHECK(f64(AOTC_SPECIAL_DIGAMMA, 0.5) == Approx(-egamma - 2 * std::log(2.0)).epsilon(1e-14));
  // psi(1 - x) - psi(x) = pi cot(pi x) (reflection) at x = -2.5: psi(3.5) - psi(-2.5) = 0
  CHECK(f64(AOTC_SPECIAL_DIGAMMA, -2.5) == Approx(f64(AOTC_SPECIAL_DIGAMMA, 3.5)).epsilon(1e-13));
  CHECK(f64(AOTC_SPECIAL_POLYGAMMA, 1.0, 1) == Approx(M_PI * M_PI / 6).epsilon(1e-14));
  CHECK(f64(AOTC_SPECIAL_POLYGAMMA, 1.0, 3) == Approx(M_PI * M_PI * M_PI * M_PI / 15).epsilon(1e-13)); // 6 zeta(4)
  CHECK(f64(AOTC_SPECIAL_POLYGAMMA, 2.0, 0) == Approx(1 - egamma).epsilon(1e-14));
  CHECK(f64(AOTC_SPECIAL_ERFC, 0.7) == Approx(1 - std::erf(0.7)).epsilon(1e-14));
  CHECK(std::erf(f64(AOTC_SPECIAL_ERFINV, 0.3)) == Approx(0.3).epsilon(1e-14));
  CHECK(0.5 * std::erfc(-f64(AOTC_SPECIAL_NDTRI, 0.8) / std::sqrt(2.0)) == Approx(0.8).epsilon(1e-14));
  CHECK(f64(AOTC_SPECIAL_ERFCX, 30.0) == Approx(1 / (30 * std::sqrt(M_PI)) * (1 - 1 / 1800.0 + 3 / (4 * 810000.0))).epsilon(1e-8));
  double i0 = 0, j0 = 0, t = 1;
  for (int k = 0; k < 40; ++k) { // x = 1.5: sum (x^2/4)^k / (k!)^2, with alternating signs for J0
    i0 += t;
    j0 += k % 2 ? -t : t;
    t *= (1.5 * 1.5 / 4) / ((k + 1.0) * (k + 1.0));
  }
  CHECK(f64(AOTC_SPECIAL_I0, -1.5) == Approx(i0).epsilon(1e-14));
  CHECK(f64(AOTC_SPECIAL_I0E, 1.5) == Approx(i0 * std::exp(-1.5)).epsilon(1e-14));
  CHECK(f64(AOTC_SPECIAL_J0, -1.5) == Approx(j0).epsilon(1e-14));
  CHECK(f64(AOTC_SPECIAL_J1, -2.0) == Approx(-f64(AOTC_SPECIAL_J1, 2.0)).epsilon(1e-15)); // odd
  CHECK(f64(AOTC_SPECIAL_I1E, 800.0) == Approx(1 / std::sqrt(2 * M_PI * 800.0)).epsilon(1e-3)); // large-x path
  for (int fn = 0; fn < AOTC_SPECIAL_COUNT; ++fn) { // f32: the f64 value rounded once
    float x = fn == AOTC_SPECIAL_ERFINV || fn == AOTC_SPECIAL_NDTRI ? 0.3f : 1.7f;
    float a = aotc_special_f32(fn, x, 2.0f), b = (float)f64(fn, x, 2.0);
    INFO("fn " << fn);
    CHECK(a == b);
  }
}
