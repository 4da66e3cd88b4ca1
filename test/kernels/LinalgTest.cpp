//===- LinalgTest.cpp - libaotc_kernels' linalg calls (aotc_linalg, aotc/kernels.h) ----===//
//
// aotc_linalg checked by the defining identities of each result, computed here in double and
// independent of LAPACK: L Lᵀ = A (L lower), A X = B, P L U = A with LAPACK's pivots, A V = V
// diag(w) with Vᵀ V = I and w ascending, U diag(S) Vh = A with orthonormal U / Vh and S
// descending, Q R = A with Qᵀ Q = I and R upper; f64 and f32, batches of 2, square, tall and
// wide. Then info, check (1000 + info) and bad descriptors.
//===----------------------------------------------------------------------===//
#include "aotc/abi.h"
#include "aotc/kernels.h"

#include <catch2/catch.hpp>

#include <algorithm>
#include <cmath>
#include <random>
#include <vector>

namespace {

using Mat = std::vector<double>; // row-major

Mat mm(const Mat &a, const Mat &b, int64_t m, int64_t k, int64_t n) {
  Mat c((size_t)(m * n), 0.0);
  for (int64_t i = 0; i < m; ++i)
    for (int64_t p = 0; p < k; ++p)
      for (int64_t j = 0; j < n; ++j) c[(size_t)(i * n + j)] += a[(size_t)(i * k + p)] * b[(size_t)(p * n + j)];
  return c;
}
Mat tr(const Mat &a, int64_t m, int64_t n) {
  Mat t((size_t)(m * n));
  for (int64_t i = 0; i < m; ++i)
    for (int64_t j = 0; j < n; ++j) t[(size_t)(j * m + i)] = a[(size_t)(i * n + j)];
  return t;
}
double maxDiff(const Mat &a, const Mat &b) {
  REQUIRE(a.size() == b.size());
  double d = 0;
  for (size_t i = 0; i < a.size(); ++i) d = std::max(d, std::fabs(a[i] - b[i]));
  return d;
}
Mat eye(int64_t n) {
  Mat e((size_t)(n * n), 0.0);
  for (int64_t i = 0; i < n; ++i) e[(size_t)(i * n + i)] = 1;
  return e;
}
Mat slice(const std::vector<double> &v, size_t at, size_t len) { return Mat(v.begin() + at, v.begin() + at + len); }

Mat randomMat(std::mt19937_64 &rng, int64_t m, int64_t n, double diag = 0) {
  std::uniform_real_distribution<double> u(-1, 1);
  Mat a((size_t)(m * n));
  for (double &x : a) x = u(rng);
  for (int64_t i = 0; i < std::min(m, n); ++i) a[(size_t)(i * n + i)] += diag;
  return a;
}

/// Runs one call of dtype dt on double data (converted both ways).
struct Call {
  aotc_linalg_desc d{};
  int rc = 0;
  std::vector<double> out;
  Call(int dt, int kind, int64_t batch, int64_t m, int64_t n) {
    d.dtype = dt, d.kind = kind, d.batch = batch, d.m = m, d.n = n, d.left = 1, d.compute_uv = 1;
  }
  void run(const std::vector<double> &a, const std::vector<double> &b, int64_t outElems,
           const std::vector<int64_t> &piv = {}) {
    out.assign((size_t)outElems, 0.0);
    if (d.dtype == AOTC_F64) {
      rc = aotc_linalg(&d, a.empty() ? nullptr : a.data(), piv.empty() ? (b.empty() ? nullptr : b.data()) : (const void *)piv.data(),
                       piv.empty() ? nullptr : (b.empty() ? nullptr : b.data()), out.data());
      return;
    }
    std::vector<float> af(a.begin(), a.end()), bf(b.begin(), b.end()), of((size_t)outElems);
    rc = aotc_linalg(&d, af.empty() ? nullptr : af.data(),
                     piv.empty() ? (bf.empty() ? nullptr : bf.data()) : (const void *)piv.data(),
                     piv.empty() ? nullptr : (bf.empty() ? nullptr : bf.data()), of.data());
    out.assign(of.begin(), of.end());
  }
};

double tolOf(int dt) { return dt == AOTC_F64 ? 1e-11 : 2e-5; }

} // namespace

TEST_CASE("aotc_linalg: each factorization satisfies its identities (f64, f32)", "[linalg]") {
  std::mt19937_64 rng(7);
  for (int dt : {AOTC_F64, AOTC_F32}) {
    const double tol = tolOf(dt);
    INFO((dt == AOTC_F64 ? "f64" : "f32"));
    const int64_t n = 5;
    DYNAMIC_SECTION("cholesky, lower and upper " << (dt == AOTC_F64 ? "f64" : "f32")) {
      for (int upper : {0, 1}) {
        Mat x = randomMat(rng, n, n), A = mm(x, tr(x, n, n), n, n, n);
        for (int64_t i = 0; i < n; ++i) A[(size_t)(i * n + i)] += n;
        Call c(dt, AOTC_LINALG_CHOLESKY, 1, n, n);
        c.d.upper = upper;
        c.run(A, {}, n * n + 1);
        REQUIRE(c.rc == AOTC_KERNELS_OK);
        Mat L = slice(c.out, 0, n * n);
        for (int64_t i = 0; i < n; ++i)
          for (int64_t j = 0; j < n; ++j)
            if (upper ? j < i : j > i) CHECK(L[(size_t)(i * n + j)] == 0);
        Mat LLt = upper ? mm(tr(L, n, n), L, n, n, n) : mm(L, tr(L, n, n), n, n, n);
        CHECK(maxDiff(LLt, A) < tol * 10);
        CHECK(c.out.back() == 0);
      }
    }
    DYNAMIC_SECTION("triangular solves: left / right, upper / lower, unit " << (dt == AOTC_F64 ? "f64" : "f32")) {
      for (int left : {1, 0})
        for (int upper : {0, 1})
          for (int unit : {0, 1}) {
            Mat A = randomMat(rng, n, n, 3.0);
            for (int64_t i = 0; i < n; ++i)
              for (int64_t j = 0; j < n; ++j)
                if (upper ? j < i : j > i) A[(size_t)(i * n + j)] = 0;
            Mat At = A;
            if (unit)
              for (int64_t i = 0; i < n; ++i) At[(size_t)(i * n + i)] = 1;
            const int64_t k = 3;
            Mat B = left ? randomMat(rng, n, k) : randomMat(rng, k, n);
            Call c(dt, AOTC_LINALG_TRISOLVE, 1, n, n);
            c.d.left = left, c.d.upper = upper, c.d.unit = unit, c.d.nrhs = k;
            c.run(A, B, n * k);
            REQUIRE(c.rc == AOTC_KERNELS_OK);
            Mat AX = left ? mm(At, c.out, n, n, k) : mm(c.out, At, k, n, n);
            CHECK(maxDiff(AX, B) < tol * 10);
          }
    }
    DYNAMIC_SECTION("lu: P L U = A with LAPACK's pivots; lu_solve and its adjoint; the permutation " << (dt == AOTC_F64 ? "f64" : "f32")) {
      for (auto [m, nn] : std::vector<std::pair<int64_t, int64_t>>{{5, 5}, {6, 4}, {3, 5}}) {
        const int64_t k = std::min(m, nn), batch = 2;
        Mat A = randomMat(rng, batch * m, nn);
        Call c(dt, AOTC_LINALG_LU, batch, m, nn);
        c.run(A, {}, batch * (m * nn + k + 1));
        REQUIRE(c.rc == AOTC_KERNELS_OK);
        for (int64_t e = 0; e < batch; ++e) {
          Mat packed = slice(c.out, (size_t)(e * (m * nn + k + 1)), (size_t)(m * nn + k + 1));
          Mat L((size_t)(m * k), 0.0), U((size_t)(k * nn), 0.0);
          for (int64_t i = 0; i < m; ++i)
            for (int64_t j = 0; j < nn; ++j) {
              double v = packed[(size_t)(i * nn + j)];
              if (j < i && j < k) L[(size_t)(i * k + j)] = v;
              if (j >= i && i < k) U[(size_t)(i * nn + j)] = v;
            }
          for (int64_t i = 0; i < k; ++i) L[(size_t)(i * k + i)] = 1;
          // The row exchanges applied to A, in order, give L U.
          Mat PA = slice(A, (size_t)(e * m * nn), (size_t)(m * nn));
          std::vector<int64_t> piv;
          for (int64_t i = 0; i < k; ++i) {
            int64_t p = (int64_t)packed[(size_t)(m * nn + i)] - 1;
            piv.push_back(p + 1);
            REQUIRE(p >= i);
            REQUIRE(p < m);
            for (int64_t j = 0; j < nn; ++j) std::swap(PA[(size_t)(i * nn + j)], PA[(size_t)(p * nn + j)]);
          }
          CHECK(maxDiff(mm(L, U, m, k, nn), PA) < tol * 10);
          CHECK(packed.back() == 0);
          // AOTC_LINALG_PERM: P with A = P L U, so Pᵀ A = L U.
          Call p(dt, AOTC_LINALG_PERM, 1, m, nn);
          p.run({}, {}, m * m, piv);
          REQUIRE(p.rc == AOTC_KERNELS_OK);
          CHECK(maxDiff(mm(tr(p.out, m, m), slice(A, (size_t)(e * m * nn), (size_t)(m * nn)), m, m, nn), PA) < tol * 10);
          if (m != nn) continue;
          for (int left : {1, 0})
            for (int adjoint : {0, 1}) {
              const int64_t r = 2;
              Mat B = left ? randomMat(rng, m, r) : randomMat(rng, r, m);
              Call s(dt, AOTC_LINALG_LU_SOLVE, 1, m, m);
              s.d.left = left, s.d.adjoint = adjoint, s.d.nrhs = r;
              s.run(slice(packed, 0, (size_t)(m * m)), B, m * r, piv);
              REQUIRE(s.rc == AOTC_KERNELS_OK);
              Mat Ae = slice(A, (size_t)(e * m * nn), (size_t)(m * nn)), opA = adjoint ? tr(Ae, m, m) : Ae;
              Mat AX = left ? mm(opA, s.out, m, m, r) : mm(s.out, opA, r, m, m);
              CHECK(maxDiff(AX, B) < tol * 100);
            }
        }
      }
    }
    DYNAMIC_SECTION("eigh: A V = V diag(w), V orthonormal, w ascending; values only " << (dt == AOTC_F64 ? "f64" : "f32")) {
      for (int upper : {0, 1}) {
        Mat x = randomMat(rng, n, n), A = x;
        for (int64_t i = 0; i < n; ++i)
          for (int64_t j = 0; j < n; ++j) A[(size_t)(i * n + j)] = x[(size_t)(i * n + j)] + x[(size_t)(j * n + i)];
        Mat half = A; // the other triangle is garbage: only one is read
        for (int64_t i = 0; i < n; ++i)
          for (int64_t j = 0; j < n; ++j)
            if (upper ? j < i : j > i) half[(size_t)(i * n + j)] = 99;
        Call c(dt, AOTC_LINALG_EIGH, 1, n, n);
        c.d.upper = upper;
        c.run(half, {}, n + n * n);
        REQUIRE(c.rc == AOTC_KERNELS_OK);
        Mat w = slice(c.out, 0, n), V = slice(c.out, n, n * n);
        CHECK(std::is_sorted(w.begin(), w.end()));
        Mat VD = V;
        for (int64_t i = 0; i < n; ++i)
          for (int64_t j = 0; j < n; ++j) VD[(size_t)(i * n + j)] *= w[(size_t)j];
        CHECK(maxDiff(mm(A, V, n, n, n), VD) < tol * 20);
        CHECK(maxDiff(mm(tr(V, n, n), V, n, n, n), eye(n)) < tol * 20);
        Call v(dt, AOTC_LINALG_EIGH, 1, n, n);
        v.d.upper = upper, v.d.compute_uv = 0;
        v.run(half, {}, n);
        CHECK(maxDiff(v.out, w) < tol * 20);
      }
    }
    DYNAMIC_SECTION("svd: U diag(S) Vh = A, orthonormal factors, S descending; full; values only " << (dt == AOTC_F64 ? "f64" : "f32")) {
      for (auto [m, nn] : std::vector<std::pair<int64_t, int64_t>>{{5, 3}, {3, 5}, {4, 4}})
        for (int full : {0, 1}) {
          const int64_t k = std::min(m, nn), uc = full ? m : k, vr = full ? nn : k;
          Mat A = randomMat(rng, m, nn);
          Call c(dt, AOTC_LINALG_SVD, 1, m, nn);
          c.d.full = full;
          c.run(A, {}, m * uc + k + vr * nn);
          REQUIRE(c.rc == AOTC_KERNELS_OK);
          Mat U = slice(c.out, 0, (size_t)(m * uc)), S = slice(c.out, (size_t)(m * uc), (size_t)k),
              Vh = slice(c.out, (size_t)(m * uc + k), (size_t)(vr * nn));
          CHECK(std::is_sorted(S.rbegin(), S.rend()));
          Mat US((size_t)(m * k));
          for (int64_t i = 0; i < m; ++i)
            for (int64_t j = 0; j < k; ++j) US[(size_t)(i * k + j)] = U[(size_t)(i * uc + j)] * S[(size_t)j];
          CHECK(maxDiff(mm(US, slice(Vh, 0, (size_t)(k * nn)), m, k, nn), A) < tol * 20);
          CHECK(maxDiff(mm(tr(U, m, uc), U, uc, m, uc), eye(uc)) < tol * 20);
          CHECK(maxDiff(mm(Vh, tr(Vh, vr, nn), vr, nn, vr), eye(vr)) < tol * 20);
          Call v(dt, AOTC_LINALG_SVD, 1, m, nn);
          v.d.compute_uv = 0;
          v.run(A, {}, k);
          CHECK(maxDiff(v.out, S) < tol * 20);
        }
    }
    DYNAMIC_SECTION("qr: Q R = A, Q orthonormal, R upper; reduced, complete, r " << (dt == AOTC_F64 ? "f64" : "f32")) {
      for (auto [m, nn] : std::vector<std::pair<int64_t, int64_t>>{{5, 3}, {3, 5}, {4, 4}})
        for (int mode : {0, 1, 2}) {
          const int64_t k = std::min(m, nn), qc = mode == 1 ? m : k, rr = mode == 1 ? m : k;
          Mat A = randomMat(rng, m, nn);
          Call c(dt, AOTC_LINALG_QR, 1, m, nn);
          c.d.full = mode;
          c.run(A, {}, (mode == 2 ? 0 : m * qc) + rr * nn);
          REQUIRE(c.rc == AOTC_KERNELS_OK);
          Mat R = slice(c.out, mode == 2 ? 0 : (size_t)(m * qc), (size_t)(rr * nn));
          for (int64_t i = 0; i < rr; ++i)
            for (int64_t j = 0; j < std::min(i, nn); ++j) CHECK(R[(size_t)(i * nn + j)] == 0);
          if (mode == 2) continue;
          Mat Q = slice(c.out, 0, (size_t)(m * qc));
          CHECK(maxDiff(mm(Q, R, m, qc, nn), A) < tol * 20);
          CHECK(maxDiff(mm(tr(Q, m, qc), Q, qc, m, qc), eye(qc)) < tol * 20);
        }
    }
  }
}

TEST_CASE("aotc_linalg: info, check and bad descriptors", "[linalg]") {
  // Not positive-definite at order 2: info 2; with check, the call fails with 1000 + 2.
  Mat A = {1, 2, 0, 2, 1, 0, 0, 0, 1};
  Call c(AOTC_F64, AOTC_LINALG_CHOLESKY, 1, 3, 3);
  c.run(A, {}, 10);
  CHECK(c.rc == AOTC_KERNELS_OK);
  CHECK(c.out.back() == 2);
  c.d.check = 1;
  c.run(A, {}, 10);
  CHECK(c.rc == AOTC_KERNELS_LINALG_INFO + 2);
  // Singular for LU: the first zero pivot (1-based).
  Mat S = {1, 2, 2, 4};
  Call l(AOTC_F64, AOTC_LINALG_LU, 1, 2, 2);
  l.run(S, {}, 4 + 2 + 1);
  CHECK(l.rc == AOTC_KERNELS_OK);
  CHECK(l.out.back() == 2);
  // lu_solve's pivots must lie in [1, n]: getrs would index out of bounds.
  Call ls(AOTC_F64, AOTC_LINALG_LU_SOLVE, 1, 2, 2);
  ls.d.nrhs = 1;
  ls.run({2, 1, 0.5, 1}, {1, 1}, 2, {1, 3});
  CHECK(ls.rc == AOTC_KERNELS_ERROR_INVALID);
  ls.run({2, 1, 0.5, 1}, {1, 1}, 2, {1, 2});
  CHECK(ls.rc == AOTC_KERNELS_OK);
  // Bad descriptors: nothing written, AOTC_KERNELS_ERROR_INVALID.
  aotc_linalg_desc d{};
  d.dtype = AOTC_F64, d.kind = 42, d.batch = 1, d.m = 2, d.n = 2;
  double out[8] = {};
  CHECK(aotc_linalg(&d, S.data(), nullptr, nullptr, out) == AOTC_KERNELS_ERROR_INVALID);
  d.kind = AOTC_LINALG_CHOLESKY, d.n = 3; // not square
  CHECK(aotc_linalg(&d, S.data(), nullptr, nullptr, out) == AOTC_KERNELS_ERROR_INVALID);
  d.n = 2, d.dtype = 7;
  CHECK(aotc_linalg(&d, S.data(), nullptr, nullptr, out) == AOTC_KERNELS_ERROR_INVALID);
  CHECK(aotc_linalg(nullptr, S.data(), nullptr, nullptr, out) == AOTC_KERNELS_ERROR_INVALID);
  // An empty batch computes nothing.
  d.dtype = AOTC_F64, d.batch = 0;
  CHECK(aotc_linalg(&d, nullptr, nullptr, nullptr, nullptr) == AOTC_KERNELS_OK);
}
