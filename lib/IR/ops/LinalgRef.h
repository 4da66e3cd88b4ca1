//===- LinalgRef.h - Float64 references of the linalg factorizations -*- C++ -*-===//
//
// Internal to lib/IR. Textbook algorithms on one dense row-major matrix, independent of the
// LAPACK the generated code calls (runtime/kernels/Linalg.cpp): Cholesky by columns, LU with
// partial pivoting as getf2 (the first largest pivot; LAPACK's 1-based ipiv), substitution,
// cyclic Jacobi for the symmetric eigenproblem, one-sided Jacobi for the SVD, Householder QR
// with LAPACK's sign convention (dlarfg: beta = -sign(alpha) |x|). Eigenvectors and singular
// vectors are unique up to sign; tests compare them through sign-invariant quantities.
// RefAlgebra is include/aotc/LinalgGrad.h's algebra on RefTensor (batched, broadcasting).
//===----------------------------------------------------------------------===//
#pragma once

#include "aotc/RefEval.h"

#include <cstdint>
#include <vector>

namespace aotc::linalg_ref {

struct Mat {
  int64_t r = 0, c = 0;
  std::vector<double> v;
  Mat() = default;
  Mat(int64_t r, int64_t c, double fill = 0.0) : r(r), c(c), v((size_t)(r * c), fill) {}
  double &operator()(int64_t i, int64_t j) { return v[(size_t)(i * c + j)]; }
  double operator()(int64_t i, int64_t j) const { return v[(size_t)(i * c + j)]; }
  static Mat eye(int64_t r, int64_t c);
  Mat t() const;
};
Mat matmul(const Mat &a, const Mat &b);

/// A = L L^T reading the lower triangle (upper: A = U^T U reading the upper one); info > 0:
/// the leading minor of that order is not positive-definite (the factor is left partial).
Mat cholesky(const Mat &a, bool upper, int &info);
/// A X = B (left) or X A = B, A triangular (`upper`), `unit`: ones assumed on its diagonal.
Mat trisolve(const Mat &a, const Mat &b, bool upper, bool left, bool unit);
/// getrf: packed LU of [m, n], 1-based pivots (min(m, n)), info (the first zero pivot, 1-based).
Mat lu(const Mat &a, std::vector<int64_t> &piv, int &info);
/// P (A = P L U) of getrf's pivots, m x m.
Mat permutation(const std::vector<int64_t> &piv, int64_t m);
/// op(A) X = B (left) or X op(A) = B with A = P L U square; op(A) = A^T when `adjoint`.
Mat luSolve(const Mat &lu, const std::vector<int64_t> &piv, const Mat &b, bool left, bool adjoint);
/// Symmetric eigenproblem of the `upper` / lower triangle: ascending values, V's columns.
void eigh(const Mat &a, bool upper, std::vector<double> &w, Mat &V);
/// A = U diag(S) Vh, S descending; `full`: U [m, m], Vh [n, n], else [m, k], [k, n].
void svd(const Mat &a, bool full, Mat &U, std::vector<double> &S, Mat &Vh);
/// A = Q R; mode 0 reduced (Q [m, k], R [k, n]), 1 complete (Q [m, m], R [m, n]), 2 r (R [k, n]).
void qr(const Mat &a, int mode, Mat &Q, Mat &R);

/// Matrix e of a batched tensor [*, r, c], and writing one back.
Mat matAt(const RefTensor &t, int64_t e);
void setMat(RefTensor &t, int64_t e, const Mat &m);
/// Matrices in a tensor of rank >= 2.
int64_t batchCount(const Shape &s);
/// `t` [*b, r, c] broadcast to the batch dims `batch` (a copy).
RefTensor expandBatch(const RefTensor &t, const Shape &batch, int tail = 2);

/// include/aotc/LinalgGrad.h's algebra on float64 reference tensors.
struct RefAlgebra {
  using T = RefTensor;
  DType dt = DType::F64;
  T mm(const T &a, const T &b);
  T mT(const T &a);
  T tril(const T &a, int64_t k);
  T triu(const T &a, int64_t k);
  T add(const T &a, const T &b);
  T sub(const T &a, const T &b);
  T mul(const T &a, const T &b);
  T div(const T &a, const T &b);
  T scale(const T &a, double f);
  T unsq(const T &a, int64_t d);
  T diagonal(const T &a);
  T diagEmbed(const T &a);
  T eye(int64_t m, int64_t n, const T &like);
  T narrow(const T &a, int64_t d, int64_t start, int64_t len);
  T epsWhereZero(const T &a);
  T cat(const T &a, const T &b, int64_t d);
  Shape shape(const T &a) { return a.shape; }
  T solveTri(const T &A, const T &B, bool upper, bool left, bool unit);
  T luSolve(const T &LU, const T &piv, const T &B, bool left, bool adjoint);
  T perm(const T &piv, const T &LU);
};

} // namespace aotc::linalg_ref
