//===- FftTest.cpp - libaotc_kernels' FFTs (aotc_fft, aotc/kernels.h) -------------===//
//
// aotc_fft (PocketFFT) against a direct O(n^2) DFT written here in long double, f64 and f32:
// c2c forward and backward over one and several axes (not the last, repeated lengths, odd and
// prime), r2c onesided and full (the mirrored half), c2r odd and even lengths with the
// imaginary parts of the zero and Nyquist entries ignored, every scale. err = max|a - b| /
// max|b| below 1e-12 (f64) and 1e-5 (f32). Then bad descriptors (error codes and messages).
//===----------------------------------------------------------------------===//
#include "aotc/abi.h"
#include "aotc/kernels.h"

#include <catch2/catch.hpp>

#include <cmath>
#include <complex>
#include <cstdint>
#include <numbers>
#include <random>
#include <string>
#include <vector>

namespace {

using cl = std::complex<long double>;

int64_t numel(const std::vector<int64_t> &s) {
  int64_t n = 1;
  for (int64_t d : s) n *= d;
  return n;
}

/// Row-major multi-index of flat k.
std::vector<int64_t> unflatten(int64_t k, const std::vector<int64_t> &s) {
  std::vector<int64_t> idx(s.size());
  for (size_t d = s.size(); d-- > 0;) idx[d] = k % s[d], k /= s[d];
  return idx;
}

/// The full complex DFT of `a` (shape s) over `axes`, sign -1 or +1, times scale.
std::vector<cl> dft(const std::vector<cl> &a, const std::vector<int64_t> &s, const std::vector<int64_t> &axes,
                    int sign, long double scale) {
  std::vector<cl> out(a.size());
  for (int64_t k = 0; k < (int64_t)a.size(); ++k) {
    std::vector<int64_t> ki = unflatten(k, s);
    cl acc = 0;
    for (int64_t j = 0; j < (int64_t)a.size(); ++j) {
      std::vector<int64_t> ji = unflatten(j, s);
      bool same = true;
      long double phase = 0;
      for (size_t d = 0; d < s.size(); ++d) {
        bool t = false;
        for (int64_t ax : axes) t |= ax == (int64_t)d;
        if (!t) same &= ji[d] == ki[d];
        else phase += (long double)((ji[d] * ki[d]) % s[d]) / (long double)s[d];
      }
      if (same) acc += a[j] * std::polar(1.0L, sign * 2 * std::numbers::pi_v<long double> * phase);
    }
    out[k] = acc * scale;
  }
  return out;
}

template <typename T> double relErr(const std::vector<T> &got, const std::vector<long double> &want) {
  long double m = 0, e = 0;
  for (size_t i = 0; i < want.size(); ++i) {
    m = std::max(m, std::fabs(want[i]));
    e = std::max(e, std::fabs((long double)got[i] - want[i]));
  }
  return (double)(e / m);
}

aotc_fft_desc desc(int32_t dtype, int32_t kind, const std::vector<int64_t> &shape, const std::vector<int64_t> &axes,
                   double scale, int32_t forward = 1, int32_t onesided = 1) {
  aotc_fft_desc d{};
  d.dtype = dtype, d.kind = kind, d.forward = forward, d.onesided = onesided;
  d.rank = (int32_t)shape.size(), d.naxes = (int32_t)axes.size();
  for (size_t i = 0; i < shape.size(); ++i) d.shape[i] = shape[i];
  for (size_t i = 0; i < axes.size(); ++i) d.axes[i] = axes[i];
  d.scale = scale;
  return d;
}

/// Runs one transform in dtype T on `in` (long double values) and compares with `want`.
template <typename T> double run(const aotc_fft_desc &d, const std::vector<long double> &in,
                                 const std::vector<long double> &want) {
  std::vector<T> a(in.begin(), in.end()), out(want.size(), T(-7));
  REQUIRE(aotc_fft(&d, a.data(), out.data()) == AOTC_KERNELS_OK);
  return relErr(out, want);
}

struct Shape3 {
  std::vector<int64_t> shape, axes;
};

} // namespace

TEST_CASE("aotc_fft: c2c, r2c and c2r match a direct DFT in f64 and f32", "[fft]") {
  std::mt19937 rng(7);
  std::normal_distribution<double> nd;
  for (const Shape3 &c : std::vector<Shape3>{{{8}, {0}},
                                            {{3, 7}, {1}},
                                            {{5, 4}, {0}},
                                            {{2, 6, 5}, {0, 2}},
                                            {{3, 4, 6}, {2, 1}},
                                            {{4, 3, 5}, {1, 0, 2}},
                                            {{2, 1, 9}, {2}},
                                            {{2, 11}, {1}}}) {
    const std::vector<int64_t> &s = c.shape, &ax = c.axes;
    int64_t last = ax.back(), n = s[last];
    long double N = 1;
    for (int64_t a : ax) N *= s[a];
    INFO("shape rank " << s.size() << " last axis " << last << " n " << n);
    for (long double scale : {1.0L, 1.0L / std::sqrt(N), 1.0L / N}) {
      // c2c, both directions.
      std::vector<cl> z(numel(s));
      for (cl &v : z) v = {nd(rng), nd(rng)};
      for (int fwd : {1, 0}) {
        std::vector<cl> w = dft(z, s, ax, fwd ? -1 : +1, scale);
        std::vector<long double> in, want;
        for (cl v : z) in.push_back(v.real()), in.push_back(v.imag());
        for (cl v : w) want.push_back(v.real()), want.push_back(v.imag());
        aotc_fft_desc d = desc(AOTC_F64, AOTC_FFT_C2C, s, ax, (double)scale, fwd);
        CHECK(run<double>(d, in, want) < 1e-12);
        d.dtype = AOTC_F32;
        CHECK(run<float>(d, in, want) < 1e-5);
      }
      // r2c: the full spectrum of a real signal; onesided keeps entries 0 .. n/2 of the last axis.
      std::vector<cl> x(numel(s));
      std::vector<long double> xr;
      for (cl &v : x) v = nd(rng), xr.push_back(v.real());
      std::vector<cl> full = dft(x, s, ax, -1, scale);
      std::vector<int64_t> hs = s;
      hs[last] = n / 2 + 1;
      for (int one : {1, 0}) {
        std::vector<long double> want;
        for (int64_t k = 0; k < (int64_t)full.size(); ++k)
          if (!one || unflatten(k, s)[last] <= n / 2) want.push_back(full[k].real()), want.push_back(full[k].imag());
        aotc_fft_desc d = desc(AOTC_F64, AOTC_FFT_R2C, s, ax, (double)scale, 1, one);
        CHECK(run<double>(d, xr, want) < 1e-12);
        d.dtype = AOTC_F32;
        CHECK(run<float>(d, xr, want) < 1e-5);
      }
      // c2r: a half spectrum with arbitrary (also non-Hermitian) values; the result is the
      // inverse DFT of its Hermitian completion, the zero / Nyquist imaginary parts dropped.
      std::vector<cl> h(numel(hs));
      for (cl &v : h) v = {nd(rng), nd(rng)};
      std::vector<cl> herm(numel(s));
      for (int64_t k = 0; k < numel(s); ++k) {
        std::vector<int64_t> ki = unflatten(k, s);
        bool mirror = ki[last] > n / 2;
        std::vector<int64_t> src = ki;
        if (mirror)
          for (int64_t a : ax) src[a] = (s[a] - ki[a]) % s[a];
        int64_t f = 0;
        for (size_t dd = 0; dd < s.size(); ++dd) f = f * hs[dd] + src[dd];
        cl v = h[f];
        herm[k] = mirror ? std::conj(v) : v;
      }
      // The zero and Nyquist entries of the last axis count as real after the other axes'
      // inverse transforms: apply those first, drop the imaginary parts there, then the last.
      std::vector<int64_t> others(ax.begin(), ax.end() - 1);
      std::vector<cl> part = others.empty() ? herm : dft(herm, s, others, +1, 1.0L);
      for (int64_t k = 0; k < numel(s); ++k) {
        int64_t i = unflatten(k, s)[last];
        if (i == 0 || 2 * i == n) part[k] = part[k].real();
      }
      // Re-complete the Hermitian half along the last axis from the entries 0 .. n/2.
      for (int64_t k = 0; k < numel(s); ++k) {
        std::vector<int64_t> ki = unflatten(k, s);
        if (ki[last] <= n / 2) continue;
        std::vector<int64_t> src = ki;
        src[last] = n - ki[last];
        int64_t f = 0;
        for (size_t dd = 0; dd < s.size(); ++dd) f = f * s[dd] + src[dd];
        part[k] = std::conj(part[f]);
      }
      std::vector<cl> y = dft(part, s, {last}, +1, scale);
      std::vector<long double> in, want;
      for (cl v : h) in.push_back(v.real()), in.push_back(v.imag());
      for (cl v : y) want.push_back(v.real());
      aotc_fft_desc d = desc(AOTC_F64, AOTC_FFT_C2R, s, ax, (double)scale);
      CHECK(run<double>(d, in, want) < 1e-12);
      d.dtype = AOTC_F32;
      CHECK(run<float>(d, in, want) < 1e-5);
    }
  }
}

TEST_CASE("aotc_fft: a wrong reference is caught (negative control)", "[fft]") {
  // The check above on a transform with the wrong sign: it must fail by far.
  std::vector<int64_t> s{6};
  std::vector<cl> z(6);
  for (int i = 0; i < 6; ++i) z[i] = {std::sin(i + 1.0L), std::cos(2.0L * i)};
  std::vector<cl> w = dft(z, s, {0}, +1, 1.0L);
  std::vector<long double> in, want;
  for (cl v : z) in.push_back(v.real()), in.push_back(v.imag());
  for (cl v : w) want.push_back(v.real()), want.push_back(v.imag());
  CHECK(run<double>(desc(AOTC_F64, AOTC_FFT_C2C, s, {0}, 1.0, 1), in, want) > 0.1);
  CHECK(run<double>(desc(AOTC_F64, AOTC_FFT_C2C, s, {0}, 1.0, 0), in, want) < 1e-12);
}

TEST_CASE("aotc_fft: bad descriptors are refused with a message, nothing written", "[fft]") {
  char msg[128];
  double in[16] = {0}, out[16];
  for (double &v : out) v = 5;
  auto check = [&](aotc_fft_desc d, const char *needle) {
    INFO(needle);
    CHECK(aotc_fft_check(&d, msg, sizeof msg) == AOTC_KERNELS_ERROR_INVALID);
    CHECK(std::string(msg).find(needle) != std::string::npos);
    CHECK(aotc_fft(&d, in, out) == AOTC_KERNELS_ERROR_INVALID);
  };
  aotc_fft_desc ok = desc(AOTC_F64, AOTC_FFT_C2C, {4, 2}, {0}, 1.0);
  CHECK(aotc_fft_check(&ok, msg, sizeof msg) == AOTC_KERNELS_OK);
  aotc_fft_desc d = ok;
  d.dtype = AOTC_I64;
  check(d, "dtype");
  d = ok, d.kind = 9;
  check(d, "kind");
  d = ok, d.rank = 0;
  check(d, "rank");
  d = ok, d.naxes = 3;
  check(d, "naxes");
  d = ok, d.axes[0] = 2;
  check(d, "axis out of range");
  d = ok, d.naxes = 2, d.axes[1] = 0;
  check(d, "repeated");
  d = ok, d.shape[0] = 0;
  check(d, "empty");
  d = ok, d.shape[1] = -1;
  check(d, "negative");
  CHECK(aotc_fft_check(nullptr, msg, sizeof msg) == AOTC_KERNELS_ERROR_INVALID);
  for (double v : out) CHECK(v == 5);
}
