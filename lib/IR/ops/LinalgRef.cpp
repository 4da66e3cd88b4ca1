//===- LinalgRef.cpp - Float64 references of the linalg factorizations -----------===//
//
// See LinalgRef.h.
//===----------------------------------------------------------------------===//
#include "LinalgRef.h"

#include "Ops.h"

#include "aotc/LinalgGrad.h"

#include <algorithm>
#include <cmath>
#include <numeric>

namespace aotc::linalg_ref {

using linalg_grad::batchOf;

Mat Mat::eye(int64_t r, int64_t c) {
  Mat m(r, c);
  for (int64_t i = 0; i < std::min(r, c); ++i) m(i, i) = 1;
  return m;
}

Mat Mat::t() const {
  Mat m(c, r);
  for (int64_t i = 0; i < r; ++i)
    for (int64_t j = 0; j < c; ++j) m(j, i) = (*this)(i, j);
  return m;
}

Mat matmul(const Mat &a, const Mat &b) {
  Mat m(a.r, b.c);
  for (int64_t i = 0; i < a.r; ++i)
    for (int64_t k = 0; k < a.c; ++k)
      for (int64_t j = 0; j < b.c; ++j) m(i, j) += a(i, k) * b(k, j);
  return m;
}

Mat cholesky(const Mat &aIn, bool upper, int &info) {
  const Mat a = upper ? aIn.t() : aIn; // the triangle read is then the lower one
  const int64_t n = a.r;
  Mat L(n, n);
  info = 0;
  for (int64_t j = 0; j < n && !info; ++j) {
    double d = a(j, j);
    for (int64_t k = 0; k < j; ++k) d -= L(j, k) * L(j, k);
    if (!(d > 0)) {
      info = (int)j + 1;
      break;
    }
    L(j, j) = std::sqrt(d);
    for (int64_t i = j + 1; i < n; ++i) {
      double s = a(i, j);
      for (int64_t k = 0; k < j; ++k) s -= L(i, k) * L(j, k);
      L(i, j) = s / L(j, j);
    }
  }
  return upper ? L.t() : L;
}

Mat trisolve(const Mat &a, const Mat &b, bool upper, bool left, bool unit) {
  if (!left) // X A = B <=> A^T X^T = B^T
    return trisolve(a.t(), b.t(), !upper, true, unit).t();
  const int64_t n = a.r, k = b.c;
  Mat x = b;
  for (int64_t c = 0; c < k; ++c)
    for (int64_t s = 0; s < n; ++s) {
      int64_t i = upper ? n - 1 - s : s;
      double v = x(i, c);
      if (upper)
        for (int64_t j = i + 1; j < n; ++j) v -= a(i, j) * x(j, c);
      else
        for (int64_t j = 0; j < i; ++j) v -= a(i, j) * x(j, c);
      x(i, c) = unit ? v : v / a(i, i);
    }
  return x;
}

Mat lu(const Mat &aIn, std::vector<int64_t> &piv, int &info) {
  Mat a = aIn;
  const int64_t m = a.r, n = a.c, k = std::min(m, n);
  piv.assign((size_t)k, 0);
  info = 0;
  for (int64_t j = 0; j < k; ++j) {
    int64_t p = j;
    for (int64_t i = j + 1; i < m; ++i)
      if (std::fabs(a(i, j)) > std::fabs(a(p, j))) p = i;
    piv[(size_t)j] = p + 1;
    if (a(p, j) != 0) {
      if (p != j)
        for (int64_t c = 0; c < n; ++c) std::swap(a(j, c), a(p, c));
      for (int64_t i = j + 1; i < m; ++i) a(i, j) /= a(j, j);
    } else if (!info) {
      info = (int)j + 1;
    }
    for (int64_t i = j + 1; i < m; ++i)
      for (int64_t c = j + 1; c < n; ++c) a(i, c) -= a(i, j) * a(j, c);
  }
  return a;
}

Mat permutation(const std::vector<int64_t> &piv, int64_t m) {
  std::vector<int64_t> p((size_t)m);
  std::iota(p.begin(), p.end(), 0);
  for (size_t i = 0; i < piv.size(); ++i) {
    int64_t j = piv[i] - 1;
    if (j >= 0 && j < m) std::swap(p[i], p[(size_t)j]);
  }
  Mat P(m, m);
  for (int64_t j = 0; j < m; ++j) P(p[(size_t)j], j) = 1;
  return P;
}

Mat luSolve(const Mat &lu, const std::vector<int64_t> &piv, const Mat &b, bool left, bool adjoint) {
  const int64_t n = lu.r;
  Mat P = permutation(piv, n);
  if (!left) // X op(A) = B <=> op(A)^T X^T = B^T
    return luSolve(lu, piv, b.t(), true, !adjoint).t();
  if (!adjoint) { // P L U X = B
    Mat y = trisolve(lu, matmul(P.t(), b), false, true, true);
    return trisolve(lu, y, true, true, false);
  }
  // U^T L^T P^T X = B
  Mat y = trisolve(lu.t(), b, false, true, false);
  y = trisolve(lu.t(), y, true, true, true);
  return matmul(P, y);
}

void eigh(const Mat &aIn, bool upper, std::vector<double> &w, Mat &V) {
  const int64_t n = aIn.r;
  Mat a(n, n);
  for (int64_t i = 0; i < n; ++i)
    for (int64_t j = 0; j < n; ++j) a(i, j) = (upper ? i <= j : i >= j) ? aIn(i, j) : aIn(j, i);
  Mat v = Mat::eye(n, n);
  for (int sweep = 0; sweep < 100; ++sweep) {
    double off = 0, all = 0;
    for (int64_t i = 0; i < n; ++i)
      for (int64_t j = 0; j < n; ++j) (i == j ? all : off) += a(i, j) * a(i, j);
    if (off <= 1e-30 * (all + off) || off == 0) break;
    for (int64_t p = 0; p < n; ++p)
      for (int64_t q = p + 1; q < n; ++q) {
        if (a(p, q) == 0) continue;
        double theta = (a(q, q) - a(p, p)) / (2 * a(p, q));
        double t = (theta >= 0 ? 1.0 : -1.0) / (std::fabs(theta) + std::sqrt(theta * theta + 1));
        double c = 1 / std::sqrt(t * t + 1), s = t * c;
        for (int64_t k = 0; k < n; ++k) { // columns p, q
          double akp = a(k, p), akq = a(k, q);
          a(k, p) = c * akp - s * akq, a(k, q) = s * akp + c * akq;
        }
        for (int64_t k = 0; k < n; ++k) { // rows p, q
          double apk = a(p, k), aqk = a(q, k);
          a(p, k) = c * apk - s * aqk, a(q, k) = s * apk + c * aqk;
        }
        for (int64_t k = 0; k < n; ++k) {
          double vkp = v(k, p), vkq = v(k, q);
          v(k, p) = c * vkp - s * vkq, v(k, q) = s * vkp + c * vkq;
        }
      }
  }
  std::vector<int64_t> order((size_t)n);
  std::iota(order.begin(), order.end(), 0);
  std::stable_sort(order.begin(), order.end(), [&](int64_t x, int64_t y) { return a(x, x) < a(y, y); });
  w.resize((size_t)n);
  V = Mat(n, n);
  for (int64_t j = 0; j < n; ++j) {
    w[(size_t)j] = a(order[(size_t)j], order[(size_t)j]);
    for (int64_t i = 0; i < n; ++i) V(i, j) = v(i, order[(size_t)j]);
  }
}

namespace {

/// Columns [from, cols) of `q` (m rows, columns [0, from) orthonormal or zero) replaced by an
/// orthonormal completion: Gram-Schmidt (twice) of the unit vectors against the columns so far.
void completeColumns(Mat &q, int64_t from) {
  const int64_t m = q.r;
  int64_t unit = 0;
  for (int64_t j = from; j < q.c; ++j) {
    for (; unit < m; ++unit) {
      std::vector<double> x((size_t)m, 0.0);
      x[(size_t)unit] = 1;
      for (int pass = 0; pass < 2; ++pass)
        for (int64_t c = 0; c < j; ++c) {
          double d = 0;
          for (int64_t i = 0; i < m; ++i) d += q(i, c) * x[(size_t)i];
          for (int64_t i = 0; i < m; ++i) x[(size_t)i] -= d * q(i, c);
        }
      double nn = 0;
      for (double e : x) nn += e * e;
      if (nn > 1e-12) {
        for (int64_t i = 0; i < m; ++i) q(i, j) = x[(size_t)i] / std::sqrt(nn);
        ++unit;
        break;
      }
    }
  }
}

} // namespace

void svd(const Mat &aIn, bool full, Mat &U, std::vector<double> &S, Mat &Vh) {
  if (aIn.r < aIn.c) { // A^T = V S U^T
    Mat u2, vh2;
    svd(aIn.t(), full, u2, S, vh2);
    U = vh2.t(), Vh = u2.t();
    return;
  }
  const int64_t m = aIn.r, n = aIn.c;
  Mat u = aIn, v = Mat::eye(n, n);
  for (int sweep = 0; sweep < 100; ++sweep) {
    bool rotated = false;
    for (int64_t p = 0; p < n; ++p)
      for (int64_t q = p + 1; q < n; ++q) {
        double al = 0, be = 0, ga = 0;
        for (int64_t i = 0; i < m; ++i) al += u(i, p) * u(i, p), be += u(i, q) * u(i, q), ga += u(i, p) * u(i, q);
        if (ga == 0 || std::fabs(ga) <= 1e-15 * std::sqrt(al * be)) continue;
        rotated = true;
        double zeta = (be - al) / (2 * ga);
        double t = (zeta >= 0 ? 1.0 : -1.0) / (std::fabs(zeta) + std::sqrt(1 + zeta * zeta));
        double c = 1 / std::sqrt(1 + t * t), s = c * t;
        for (int64_t i = 0; i < m; ++i) {
          double up = u(i, p), uq = u(i, q);
          u(i, p) = c * up - s * uq, u(i, q) = s * up + c * uq;
        }
        for (int64_t i = 0; i < n; ++i) {
          double vp = v(i, p), vq = v(i, q);
          v(i, p) = c * vp - s * vq, v(i, q) = s * vp + c * vq;
        }
      }
    if (!rotated) break;
  }
  std::vector<double> norms((size_t)n);
  for (int64_t j = 0; j < n; ++j) {
    double s = 0;
    for (int64_t i = 0; i < m; ++i) s += u(i, j) * u(i, j);
    norms[(size_t)j] = std::sqrt(s);
  }
  std::vector<int64_t> order((size_t)n);
  std::iota(order.begin(), order.end(), 0);
  std::stable_sort(order.begin(), order.end(), [&](int64_t x, int64_t y) { return norms[(size_t)x] > norms[(size_t)y]; });
  const int64_t uc = full ? m : n;
  U = Mat(m, uc);
  S.assign((size_t)n, 0.0);
  Vh = Mat(n, n);
  int64_t good = 0;
  for (int64_t j = 0; j < n; ++j) {
    int64_t o = order[(size_t)j];
    S[(size_t)j] = norms[(size_t)o];
    for (int64_t i = 0; i < n; ++i) Vh(j, i) = v(i, o);
    if (S[(size_t)j] > 1e-300 && good == j) {
      for (int64_t i = 0; i < m; ++i) U(i, j) = u(i, o) / S[(size_t)j];
      ++good;
    }
  }
  completeColumns(U, good);
}

void qr(const Mat &aIn, int mode, Mat &Q, Mat &R) {
  Mat a = aIn;
  const int64_t m = a.r, n = a.c, k = std::min(m, n);
  std::vector<double> tau((size_t)k, 0.0);
  std::vector<std::vector<double>> vs((size_t)k);
  for (int64_t j = 0; j < k; ++j) {
    double alpha = a(j, j), xn = 0;
    for (int64_t i = j + 1; i < m; ++i) xn += a(i, j) * a(i, j);
    xn = std::sqrt(xn);
    std::vector<double> v((size_t)(m - j), 0.0);
    v[0] = 1;
    if (xn == 0) {
      vs[(size_t)j] = v;
      continue; // H = I
    }
    double beta = -std::copysign(std::hypot(alpha, xn), alpha);
    tau[(size_t)j] = (beta - alpha) / beta;
    for (int64_t i = j + 1; i < m; ++i) v[(size_t)(i - j)] = a(i, j) / (alpha - beta);
    a(j, j) = beta;
    for (int64_t i = j + 1; i < m; ++i) a(i, j) = 0;
    for (int64_t c = j + 1; c < n; ++c) {
      double d = 0;
      for (int64_t i = j; i < m; ++i) d += v[(size_t)(i - j)] * a(i, c);
      for (int64_t i = j; i < m; ++i) a(i, c) -= tau[(size_t)j] * v[(size_t)(i - j)] * d;
    }
    vs[(size_t)j] = v;
  }
  const int64_t rr = mode == 1 ? m : k, qc = mode == 1 ? m : k;
  R = Mat(rr, n);
  for (int64_t i = 0; i < std::min(rr, m); ++i)
    for (int64_t j = i; j < n; ++j) R(i, j) = a(i, j);
  if (mode == 2) {
    Q = Mat(0, 0);
    return;
  }
  Q = Mat::eye(m, qc);
  for (int64_t j = k - 1; j >= 0; --j) {
    const std::vector<double> &v = vs[(size_t)j];
    for (int64_t c = 0; c < qc; ++c) {
      double d = 0;
      for (int64_t i = j; i < m; ++i) d += v[(size_t)(i - j)] * Q(i, c);
      for (int64_t i = j; i < m; ++i) Q(i, c) -= tau[(size_t)j] * v[(size_t)(i - j)] * d;
    }
  }
}

//===-- Batched tensors ----------------------------------------------------===//

int64_t batchCount(const Shape &s) {
  int64_t b = 1;
  for (size_t i = 0; i + 2 < s.size(); ++i) b *= s[i];
  return b;
}

Mat matAt(const RefTensor &t, int64_t e) {
  const int64_t r = t.shape[t.shape.size() - 2], c = t.shape.back();
  Mat m(r, c);
  std::copy(t.data.begin() + e * r * c, t.data.begin() + (e + 1) * r * c, m.v.begin());
  return m;
}

void setMat(RefTensor &t, int64_t e, const Mat &m) {
  std::copy(m.v.begin(), m.v.end(), t.data.begin() + e * m.r * m.c);
}

RefTensor expandBatch(const RefTensor &t, const Shape &batch, int tail) {
  Shape tailShape(t.shape.end() - tail, t.shape.end()), out = batch;
  out.insert(out.end(), tailShape.begin(), tailShape.end());
  RefTensor r(t.dtype, out);
  Shape tb(t.shape.begin(), t.shape.end() - tail);
  int64_t inner = numelOf(tailShape);
  int64_t nb = numelOf(batch);
  for (int64_t e = 0; e < nb; ++e) {
    std::vector<int64_t> idx = ops::unravel(e, batch), src(tb.size());
    for (size_t d = 0; d < tb.size(); ++d) src[d] = tb[d] == 1 ? 0 : idx[idx.size() - tb.size() + d];
    int64_t se = tb.empty() ? 0 : ops::ravel(src, tb);
    std::copy(t.data.begin() + se * inner, t.data.begin() + (se + 1) * inner, r.data.begin() + e * inner);
  }
  return r;
}

namespace {

Shape broadcastBatch(const Shape &a, const Shape &b) {
  auto s = broadcastShapes(a, b);
  AOTC_ASSERT(s.has_value(), "linalg reference: batch dims do not broadcast");
  return *s;
}

/// Elementwise f over broadcast operands.
template <class F> RefTensor zipWith(const RefTensor &a, const RefTensor &b, F f) {
  auto s = broadcastShapes(a.shape, b.shape);
  AOTC_ASSERT(s.has_value(), "linalg reference: shapes do not broadcast");
  RefTensor r(a.dtype, *s);
  for (int64_t k = 0; k < r.numel(); ++k) {
    std::vector<int64_t> idx = ops::unravel(k, *s);
    auto at = [&](const RefTensor &t) {
      std::vector<int64_t> j(t.shape.size());
      for (size_t d = 0; d < j.size(); ++d) j[d] = t.shape[d] == 1 ? 0 : idx[idx.size() - j.size() + d];
      return t.data[(size_t)(j.empty() ? 0 : ops::ravel(j, t.shape))];
    };
    r.data[(size_t)k] = f(at(a), at(b));
  }
  return r;
}

/// Per-matrix map over two batch-broadcast operands.
template <class F> RefTensor perMatrix2(const RefTensor &a, const RefTensor &b, F f) {
  Shape batch = broadcastBatch(batchOf(a.shape), batchOf(b.shape));
  RefTensor ea = expandBatch(a, batch), eb = expandBatch(b, batch);
  int64_t nb = numelOf(batch);
  RefTensor out;
  for (int64_t e = 0; e < nb; ++e) {
    Mat m = f(matAt(ea, e), matAt(eb, e));
    if (e == 0) {
      Shape s = batch;
      s.push_back(m.r), s.push_back(m.c);
      out = RefTensor(a.dtype, s);
    }
    setMat(out, e, m);
  }
  if (nb == 0) { // no matrix: the result's sizes from f on zero matrices of the operands' sizes
    auto dims = [](const Shape &s) { return std::make_pair(s[s.size() - 2], s.back()); };
    auto [ar, ac] = dims(a.shape);
    auto [br, bc] = dims(b.shape);
    Mat m = f(Mat(ar, ac), Mat(br, bc));
    Shape s = batch;
    s.push_back(m.r), s.push_back(m.c);
    out = RefTensor(a.dtype, s);
  }
  return out;
}

} // namespace

RefTensor RefAlgebra::mm(const T &a, const T &b) {
  return perMatrix2(a, b, [](const Mat &x, const Mat &y) { return matmul(x, y); });
}

RefTensor RefAlgebra::mT(const T &a) {
  RefTensor r(a.dtype, a.shape);
  std::swap(r.shape[r.shape.size() - 1], r.shape[r.shape.size() - 2]);
  for (int64_t e = 0; e < batchCount(a.shape); ++e) setMat(r, e, matAt(a, e).t());
  return r;
}

namespace {
/// `a` with the elements of each matrix outside the band zeroed: below diagonal k (`lower`:
/// above it).
RefTensor triangle(const RefTensor &a, int64_t k, bool lower) {
  RefTensor r = a;
  int64_t rows = a.shape[a.shape.size() - 2], cols = a.shape.back();
  for (int64_t i = 0; i < r.numel(); ++i) {
    int64_t d = i % cols - (i / cols) % rows;
    if (lower ? d > k : d < k) r.data[(size_t)i] = 0;
  }
  return r;
}
} // namespace

RefTensor RefAlgebra::tril(const T &a, int64_t k) { return triangle(a, k, true); }
RefTensor RefAlgebra::triu(const T &a, int64_t k) { return triangle(a, k, false); }

RefTensor RefAlgebra::add(const T &a, const T &b) { return zipWith(a, b, [](double x, double y) { return x + y; }); }
RefTensor RefAlgebra::sub(const T &a, const T &b) { return zipWith(a, b, [](double x, double y) { return x - y; }); }
RefTensor RefAlgebra::mul(const T &a, const T &b) { return zipWith(a, b, [](double x, double y) { return x * y; }); }
RefTensor RefAlgebra::div(const T &a, const T &b) { return zipWith(a, b, [](double x, double y) { return x / y; }); }

RefTensor RefAlgebra::scale(const T &a, double f) {
  RefTensor r = a;
  for (double &x : r.data) x *= f;
  return r;
}

RefTensor RefAlgebra::unsq(const T &a, int64_t d) {
  RefTensor r = a;
  int64_t rank = (int64_t)a.shape.size() + 1;
  r.shape.insert(r.shape.begin() + (d < 0 ? d + rank : d), 1);
  return r;
}

RefTensor RefAlgebra::diagonal(const T &a) {
  int64_t n = std::min(a.shape[a.shape.size() - 2], a.shape.back());
  Shape s = batchOf(a.shape);
  s.push_back(n);
  RefTensor r(a.dtype, s);
  for (int64_t e = 0; e < batchCount(a.shape); ++e) {
    Mat m = matAt(a, e);
    for (int64_t i = 0; i < n; ++i) r.data[(size_t)(e * n + i)] = m(i, i);
  }
  return r;
}

RefTensor RefAlgebra::diagEmbed(const T &a) {
  int64_t n = a.shape.back();
  Shape s = a.shape;
  s.push_back(n);
  RefTensor r(a.dtype, s);
  for (int64_t e = 0; e < numelOf(batchOf(a.shape, 1)); ++e)
    for (int64_t i = 0; i < n; ++i) r.data[(size_t)(e * n * n + i * n + i)] = a.data[(size_t)(e * n + i)];
  return r;
}

RefTensor RefAlgebra::eye(int64_t m, int64_t n, const T &like) {
  RefTensor r(like.dtype, {m, n});
  for (int64_t i = 0; i < std::min(m, n); ++i) r.data[(size_t)(i * n + i)] = 1;
  return r;
}

RefTensor RefAlgebra::narrow(const T &a, int64_t d, int64_t start, int64_t len) {
  int64_t rank = (int64_t)a.shape.size(), dim = d < 0 ? d + rank : d;
  ops::Along src(a.shape, dim);
  Shape s = a.shape;
  s[dim] = len;
  ops::Along dst(s, dim);
  RefTensor r(a.dtype, s);
  for (int64_t o = 0; o < src.outer; ++o)
    for (int64_t j = 0; j < len; ++j)
      for (int64_t i = 0; i < src.inner; ++i) r.data[(size_t)dst.at(o, j, i)] = a.data[(size_t)src.at(o, start + j, i)];
  return r;
}

RefTensor RefAlgebra::epsWhereZero(const T &a) {
  RefTensor r = a;
  double eps = linalg_grad::epsilonOf(a.dtype);
  for (double &x : r.data) x = x == 0 ? eps : 0.0;
  return r;
}

RefTensor RefAlgebra::cat(const T &a, const T &b, int64_t d) {
  int64_t rank = (int64_t)a.shape.size(), dim = d < 0 ? d + rank : d;
  Shape s = a.shape;
  s[dim] += b.shape[dim];
  RefTensor r(a.dtype, s);
  ops::Along sa(a.shape, dim), sb(b.shape, dim), dst(s, dim);
  for (int64_t o = 0; o < dst.outer; ++o)
    for (int64_t i = 0; i < dst.inner; ++i) {
      for (int64_t j = 0; j < sa.len; ++j) r.data[(size_t)dst.at(o, j, i)] = a.data[(size_t)sa.at(o, j, i)];
      for (int64_t j = 0; j < sb.len; ++j) r.data[(size_t)dst.at(o, sa.len + j, i)] = b.data[(size_t)sb.at(o, j, i)];
    }
  return r;
}

RefTensor RefAlgebra::solveTri(const T &A, const T &B, bool upper, bool left, bool unit) {
  return perMatrix2(A, B, [&](const Mat &a, const Mat &b) { return trisolve(a, b, upper, left, unit); });
}

RefTensor RefAlgebra::luSolve(const T &LU, const T &piv, const T &B, bool left, bool adjoint) {
  // Pivots [*, n] ride along with LU: solve per matrix of the broadcast batch.
  Shape batch = broadcastBatch(broadcastBatch(batchOf(LU.shape), batchOf(piv.shape, 1)), batchOf(B.shape));
  RefTensor el = expandBatch(LU, batch), ep = expandBatch(piv, batch, 1), eb = expandBatch(B, batch);
  Shape s = batch;
  s.push_back(B.shape[B.shape.size() - 2]), s.push_back(B.shape.back());
  RefTensor out(B.dtype, s);
  int64_t n = piv.shape.back();
  for (int64_t e = 0; e < numelOf(batch); ++e) {
    std::vector<int64_t> p(ep.data.begin() + e * n, ep.data.begin() + (e + 1) * n);
    setMat(out, e, linalg_ref::luSolve(matAt(el, e), p, matAt(eb, e), left, adjoint));
  }
  return out;
}

RefTensor RefAlgebra::perm(const T &piv, const T &LU) {
  int64_t m = LU.shape[LU.shape.size() - 2];
  Shape s = batchOf(LU.shape);
  s.push_back(m), s.push_back(m);
  RefTensor out(LU.dtype, s);
  int64_t k = piv.shape.back();
  for (int64_t e = 0; e < batchCount(LU.shape); ++e) {
    std::vector<int64_t> p(piv.data.begin() + e * k, piv.data.begin() + (e + 1) * k);
    setMat(out, e, permutation(p, m));
  }
  return out;
}

} // namespace aotc::linalg_ref
