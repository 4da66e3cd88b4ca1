//===- LinalgGrad.h - The linalg derivative formulas, written once ---*- C++ -*-===//
//
// The backward formulas of the linalg ops (lib/IR/ops/Linalg.cpp; derivatives.yaml calls them
// through the aotc::*_backward helper ops), as templates over a matrix algebra `B`, so that
// one text serves both homes a helper op needs: its float64 reference (B = the RefTensor
// algebra of lib/IR/ops/Linalg.cpp) and its lowering to primitives (B = the Emitter algebra of
// lib/Decompose/LowerLinalg.cpp). Real matrices only (complex tensors never reach linalg ops).
//
// B provides a value type `T` (batched matrices [*, r, c], batch dims broadcasting in every
// binary operation) and: mm, mT (transpose of the last two dims), tril / triu (k), add, sub,
// mul, div (elementwise, broadcasting), scale (by a constant), unsq (unsqueeze), diagonal
// ([*, n, n] -> [*, n]), diagEmbed ([*, n] -> [*, n, n]), eye (m, n, a dtype donor), narrow,
// epsWhereZero (eps of the dtype where an element is exactly 0, else 0),
// cat, shape, solveTri(A, B, upper, left, unit) (A X = B, or X A = B when !left),
// luSolve(LU, pivots, B, left, adjoint) (A = P L U; adjoint: A^T), perm(pivots, LU) (P).
//
// Sources: torch/csrc/autograd/FunctionsManual.cpp (cholesky_backward, linalg_solve_backward,
// linalg_lu_backward, linalg_det_backward, slogdet_backward, linalg_eig_backward, svd_backward,
// linalg_qr_backward), each re-derived in docs/linalg.md for the real case.
//===----------------------------------------------------------------------===//
#pragma once

#include "aotc/Types.h"

#include <algorithm>
#include <cstdint>
#include <initializer_list>
#include <limits>
#include <utility>

namespace aotc::linalg_grad {

// Shape facts the linalg ops' shape functions, references and lowerings share.

/// The batch dims of a [*, r, c] shape (`tail` = 1 for [*, n] vectors).
inline Shape batchOf(const Shape &s, int tail = 2) { return Shape(s.begin(), s.end() - tail); }
/// `s` with `tail` appended (a batch and a matrix's sizes).
inline Shape withTail(Shape s, std::initializer_list<int64_t> tail) {
  s.insert(s.end(), tail);
  return s;
}
/// torch's linalg_solve_is_vector_rhs: B [*, n] is a (batch of) vector(s) for A [*, n, n].
inline bool vectorRhs(const Shape &A, const Shape &B) {
  return B.size() == 1 || (B.size() + 1 == A.size() && B == Shape(A.begin(), A.end() - 1));
}
/// torch's _get_epsilon: the machine epsilon of a floating dtype (pinv's default rtol, det's
/// nudge of zero pivots).
inline double epsilonOf(DType dt) {
  return dt == DType::F32 ? (double)std::numeric_limits<float>::epsilon() : std::numeric_limits<double>::epsilon();
}

/// The last two sizes of a value.
template <class B> std::pair<int64_t, int64_t> matSize(B &b, const typename B::T &x) {
  auto s = b.shape(x);
  return {s[s.size() - 2], s[s.size() - 1]};
}

/// x with its diagonal multiplied by `f`.
template <class B> typename B::T scaleDiag(B &b, const typename B::T &x, double f) {
  return b.add(x, b.scale(b.diagEmbed(b.diagonal(x)), f - 1.0));
}

/// linalg_cholesky_ex: A = L L^T (U^T U when `upper`). gA = sym(L^-T Phi(L^T gL) L^-1), Phi =
/// the lower triangle with its diagonal halved.
template <class B> typename B::T choleskyBackward(B &b, typename B::T gL, typename B::T L, bool upper) {
  if (upper) gL = b.mT(gL), L = b.mT(L);
  auto phi = scaleDiag(b, b.tril(b.mm(b.mT(L), gL), 0), 0.5);
  auto y = b.solveTri(b.mT(L), phi, true, true, false); // L^-T phi
  auto gA = b.solveTri(L, y, false, false, false);     // y L^-1
  return b.scale(b.add(gA, b.mT(gA)), 0.5);
}

/// The gradient of A for X = op(A)^-1 B (left) or B op(A)^-1 (right), op(A) = A^T when
/// `adjoint`, given gB, the gradient of B (= op(A)^-T gX or gX op(A)^-T).
template <class B>
typename B::T solveGradA(B &b, const typename B::T &gB, const typename B::T &X, bool left, bool adjoint) {
  if (left) return b.scale(adjoint ? b.mm(X, b.mT(gB)) : b.mm(gB, b.mT(X)), -1.0);
  return b.scale(adjoint ? b.mm(b.mT(gB), X) : b.mm(b.mT(X), gB), -1.0);
}

/// linalg_solve_triangular: (gA, gB); gA keeps A's triangle (strictly, when unitriangular).
template <class B>
std::pair<typename B::T, typename B::T> solveTriangularBackward(B &b, const typename B::T &g, const typename B::T &A,
                                                                const typename B::T &X, bool upper, bool left,
                                                                bool unit) {
  auto gB = b.solveTri(b.mT(A), g, !upper, left, unit);
  auto gA = solveGradA(b, gB, X, left, false);
  gA = upper ? b.triu(gA, unit ? 1 : 0) : b.tril(gA, unit ? -1 : 0);
  return {gA, gB};
}

/// The unit lower factor L [*, m, k] and the upper factor U [*, k, n] of getrf's packed LU.
template <class B> std::pair<typename B::T, typename B::T> unpackLU(B &b, const typename B::T &LU) {
  auto [m, n] = matSize(b, LU);
  int64_t k = std::min(m, n);
  auto L = b.add(b.narrow(b.tril(LU, -1), -1, 0, k), b.eye(m, k, LU));
  auto U = b.narrow(b.triu(LU, 0), -2, 0, k);
  return {L, U};
}

/// A gradient gA of A = P L U (square) mapped to the packed LU it was factorized into:
/// tril(P^T gA U^T, -1) + triu(L^T P^T gA) (the adjoint of dLU -> dA = P (dL U + L dU)).
template <class B>
typename B::T gradToLU(B &b, const typename B::T &gA, const typename B::T &LU, const typename B::T &piv) {
  auto [L, U] = unpackLU(b, LU);
  auto PtgA = b.mm(b.mT(b.perm(piv, LU)), gA);
  return b.add(b.tril(b.mm(PtgA, b.mT(U)), -1), b.triu(b.mm(b.mT(L), PtgA), 0));
}

/// linalg_lu_solve: (gLU, gB) for X solving op(A) X = B (left) or X op(A) = B.
template <class B>
std::pair<typename B::T, typename B::T> luSolveBackward(B &b, const typename B::T &g, const typename B::T &LU,
                                                        const typename B::T &piv, const typename B::T &X, bool left,
                                                        bool adjoint) {
  auto gB = b.luSolve(LU, piv, g, left, !adjoint);
  return {gradToLU(b, solveGradA(b, gB, X, left, adjoint), LU, piv), gB};
}

/// linalg_lu_factor_ex (A [*, m, n] = P L U, any m, n): the gradient of A from that of the
/// packed LU. Square: P L^-T [tril(L^T gL, -1) + triu(gU U^T)] U^-T; wide and tall matrices
/// split U = [U1 U2] or L = [L1; L2] at k = min(m, n) (docs/linalg.md).
template <class B>
typename B::T luFactorBackward(B &b, const typename B::T &gLU, const typename B::T &LU, const typename B::T &piv) {
  auto [m, n] = matSize(b, LU);
  int64_t k = std::min(m, n);
  auto [L, U] = unpackLU(b, LU);
  auto gL = b.narrow(b.tril(gLU, -1), -1, 0, k), gU = b.narrow(b.triu(gLU, 0), -2, 0, k);
  auto P = b.perm(piv, LU);
  if (m <= n) {
    auto U1 = b.narrow(U, -1, 0, k), gU1 = b.narrow(gU, -1, 0, k);
    auto phi = b.tril(b.mm(b.mT(L), gL), -1);
    if (n > k) phi = b.sub(phi, b.tril(b.mm(b.narrow(gU, -1, k, n - k), b.mT(b.narrow(U, -1, k, n - k))), -1));
    phi = b.add(phi, b.triu(b.mm(gU1, b.mT(U1)), 0));
    auto gX = b.solveTri(b.mT(U1), phi, false, false, false); // phi U1^-T
    if (n > k) gX = b.cat(gX, b.narrow(gU, -1, k, n - k), -1);
    return b.mm(P, b.solveTri(b.mT(L), gX, true, true, true)); // P L^-T gX
  }
  auto L1 = b.narrow(L, -2, 0, k), gL1 = b.narrow(gL, -2, 0, k);
  auto L2 = b.narrow(L, -2, k, m - k), gL2 = b.narrow(gL, -2, k, m - k);
  auto phi = b.add(b.tril(b.mm(b.mT(L1), gL1), -1), b.triu(b.sub(b.mm(gU, b.mT(U)), b.mm(b.mT(L2), gL2)), 0));
  auto gY = b.cat(b.solveTri(b.mT(L1), phi, true, true, true), gL2, -2); // [L1^-T phi; gL2]
  return b.mm(P, b.solveTri(b.mT(U), gY, false, false, false));        // P gY U^-T
}

/// s (P L U)^-1 with s [*] a scale per matrix. det and slogdet factorize A^T (as torch does),
/// so this is A^-T s: the gradient of det (s = g det) and of logabsdet (s = g). `nudge`: U's
/// exact zero pivots become eps(dtype) first, as torch's linalg_det_backward does, so that the
/// gradient of det at a singular A is finite (0 times a finite inverse) instead of NaN.
template <class B>
typename B::T scaledInverse(B &b, const typename B::T &s, typename B::T LU, const typename B::T &piv, bool nudge) {
  auto n = matSize(b, LU).second;
  if (nudge) LU = b.add(LU, b.diagEmbed(b.epsWhereZero(b.diagonal(LU))));
  auto rhs = b.mul(b.eye(n, n, LU), b.unsq(b.unsq(s, -1), -1));
  return b.luSolve(LU, piv, rhs, true, false);
}

/// _linalg_eigh: gA = V (skew(V^T gV) / E + diag(gL)) V^T, E_ij = L_j - L_i (1 on the
/// diagonal), skew(W) = (W - W^T) / 2. `hasV`: a gradient flowed into the eigenvectors.
template <class B>
typename B::T eighBackward(B &b, const typename B::T &gL, const typename B::T &gV, const typename B::T &L,
                           const typename B::T &V, bool hasV) {
  auto inner = b.diagEmbed(gL);
  if (hasV) {
    auto W = b.mm(b.mT(V), gV);
    auto skew = b.scale(b.sub(W, b.mT(W)), 0.5);
    auto n = matSize(b, V).second;
    auto E = b.add(b.sub(b.unsq(L, -2), b.unsq(L, -1)), b.eye(n, n, L));
    inner = b.add(inner, b.div(skew, E));
  }
  return b.mm(V, b.mm(inner, b.mT(V)));
}

/// _linalg_svd (A [*, m, n], k = min(m, n)): torch's svd_backward for real matrices. With
/// J = U^T gU - gU^T U, K = V^T gV - gV^T V, E_ij = s_j^2 - s_i^2 (1 on the diagonal):
/// G = (J s_j + s_i K) / E + diag(gS), then gA = U G Vh, plus (I - U U^T) gU S^-1 Vh when
/// m > n, or U S^-1 gV^T (I - V V^T) when m < n. `full`: U, Vh (and gU, gVh) are narrowed to
/// their first k columns / rows.
template <class B>
typename B::T svdBackward(B &b, typename B::T gU, const typename B::T &gS, typename B::T gVh, typename B::T U,
                          const typename B::T &S, typename B::T Vh, bool hasUV, bool full) {
  auto [m, ucols] = matSize(b, U);
  auto n = matSize(b, Vh).second;
  int64_t k = std::min(m, n);
  (void)ucols;
  if (full) {
    U = b.narrow(U, -1, 0, k), Vh = b.narrow(Vh, -2, 0, k);
    if (hasUV) gU = b.narrow(gU, -1, 0, k), gVh = b.narrow(gVh, -2, 0, k);
  }
  if (!hasUV) return b.mm(U, b.mm(b.diagEmbed(gS), Vh));
  auto V = b.mT(Vh), gV = b.mT(gVh);
  auto UtgU = b.mm(b.mT(U), gU), VtgV = b.mm(b.mT(V), gV);
  auto J = b.sub(UtgU, b.mT(UtgU)), K = b.sub(VtgV, b.mT(VtgV));
  auto S2 = b.mul(S, S);
  auto E = b.add(b.sub(b.unsq(S2, -2), b.unsq(S2, -1)), b.eye(k, k, S));
  auto G = b.div(b.add(b.mul(J, b.unsq(S, -2)), b.mul(b.unsq(S, -1), K)), E);
  G = b.add(G, b.diagEmbed(gS));
  if (m > n) {
    auto gUSinv = b.div(gU, b.unsq(S, -2));
    auto left = b.add(b.mm(U, G), b.sub(gUSinv, b.mm(U, b.mm(b.mT(U), gUSinv))));
    return b.mm(left, Vh);
  }
  if (m < n) {
    auto gVSinv = b.div(gV, b.unsq(S, -2));
    auto right = b.add(b.mm(G, Vh), b.sub(b.mT(gVSinv), b.mm(b.mm(b.mT(gVSinv), V), Vh)));
    return b.mm(U, right);
  }
  return b.mm(U, b.mm(G, Vh));
}

/// linalg_qr, A = Q R with m >= n (reduced) or m == n: gA = [gQ + Q copyu(M)] R^-T, M = gR R^T -
/// Q^T gQ, copyu(M) = triu(M) + triu(M, 1)^T. Wide A = Q [U | V]: the square formula for the
/// first m columns with gQ + Y gV^T (Y = A's last n - m columns), and Q gV for the rest.
template <class B>
typename B::T qrBackward(B &b, const typename B::T &gQ, const typename B::T &gR, const typename B::T &Q,
                         const typename B::T &R, const typename B::T &A) {
  auto [m, qc] = matSize(b, Q);
  auto n = matSize(b, R).second;
  auto square = [&](const typename B::T &gq, const typename B::T &gr, const typename B::T &r) {
    auto M = b.sub(b.mm(gr, b.mT(r)), b.mm(b.mT(Q), gq));
    auto copyu = b.add(b.triu(M, 0), b.mT(b.triu(M, 1)));
    auto rhs = b.add(gq, b.mm(Q, copyu));
    return b.solveTri(b.mT(r), rhs, false, false, false); // rhs R^-T
  };
  if (m >= n) return square(gQ, gR, R);
  (void)qc;
  auto gU = b.narrow(gR, -1, 0, m), gV = b.narrow(gR, -1, m, n - m);
  auto Y = b.narrow(A, -1, m, n - m);
  auto gX = square(b.add(gQ, b.mm(Y, b.mT(gV))), gU, b.narrow(R, -1, 0, m));
  return b.cat(gX, b.mm(Q, gV), -1);
}

/// cholesky_solve, X = (L L^T)^-1 B (U^T U when `upper`): (gB, gF) as torch's
/// cholesky_solve_backward, which differentiates A = F F^T as a function of the whole factor F:
/// gB = A^-1 g, C = gB X^T + X gB^T, gF = -C L (lower) or -U C (upper). The LAPACK solve reads
/// one triangle only, so gF is eager's convention, not a derivative of what is computed, on
/// the other triangle.
template <class B>
std::pair<typename B::T, typename B::T> choleskySolveBackward(B &b, const typename B::T &g, const typename B::T &F,
                                                              const typename B::T &X, bool upper) {
  auto L = upper ? b.mT(F) : F;
  auto gB = b.solveTri(b.mT(L), b.solveTri(L, g, false, true, false), true, true, false);
  auto C = b.mm(gB, b.mT(X));
  C = b.add(C, b.mT(C));
  return {gB, b.scale(upper ? b.mm(F, C) : b.mm(C, F), -1.0)};
}

/// cholesky_inverse, Y = (F F^T)^-1: torch's cholesky_inverse_backward (the whole factor, as
/// cholesky_solve's): C = Y (g + g^T) Y, gF = -C L (lower) or -U C (upper).
template <class B>
typename B::T choleskyInverseBackward(B &b, const typename B::T &g, const typename B::T &F, const typename B::T &Y,
                                      bool upper) {
  auto C = b.mm(Y, b.mm(b.add(g, b.mT(g)), Y));
  return b.scale(upper ? b.mm(F, C) : b.mm(C, F), -1.0);
}

/// linalg_pinv, P = A^+ (A [*, m, n]): the adjoint of dP = -P dA P + P P^T dA^T (I - A P) +
/// (I - P A) dA^T P^T P (torch's pinv_backward): gA = -P^T G P^T + (I - A P) G^T P P^T +
/// P^T P G^T (I - P A). Exact where the rank is locally constant.
template <class B>
typename B::T pinvBackward(B &b, const typename B::T &G, const typename B::T &P, const typename B::T &A) {
  auto Pt = b.mT(P), Gt = b.mT(G);
  auto t1 = b.scale(b.mm(b.mm(Pt, G), Pt), -1.0);
  auto KPt = b.mm(b.mm(Gt, P), Pt);
  auto t2 = b.sub(KPt, b.mm(b.mm(A, P), KPt));
  auto S = b.mm(b.mm(Pt, P), Gt);
  auto t3 = b.sub(S, b.mm(S, b.mm(P, A)));
  return b.add(b.add(t1, t2), t3);
}

} // namespace aotc::linalg_grad
