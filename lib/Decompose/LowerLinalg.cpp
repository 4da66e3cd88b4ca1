//===- LowerLinalg.cpp - The linalg ops and their backward helpers, to primitives ---===//
//
// lib/IR/ops/Linalg.cpp defines the ops. Lower (after autodiff) turns the ones with a
// derivative rule of their own into the aotc::lapack_* library calls, which return their
// results packed per matrix (runtime/include/aotc/kernels.h), unpacked here with slice / view
// (pivots and info cast to torch's int32); the aotc::*_backward helpers become the formulas of
// include/aotc/LinalgGrad.h on the Emitter algebra below. Decompose (before autodiff) rewrites
// triangular_solve, lu_unpack, linalg_lu, linalg_inv_ex, cholesky_solve and cholesky_inverse
// into those ops, so their gradients come from the rules of the ops they use.
//===----------------------------------------------------------------------===//
#include "Rules.h"

#include "aotc/LinalgGrad.h"

#include <algorithm>

namespace aotc::rules {

using namespace rewrite;

namespace {

using linalg_grad::batchOf;
using linalg_grad::vectorRhs;
using linalg_grad::withTail;


/// include/aotc/LinalgGrad.h's algebra on graph values: each operation emits registry ops.
struct EmitAlgebra {
  using T = Node *;
  Emitter &e;

  Shape shape(T x) { return x->type().shape; }
  /// x [*b, tail] expanded to the batch dims `batch`.
  T expandTo(T x, const Shape &batch, int tail = 2) {
    Shape s = batch;
    const Shape &xs = x->type().shape;
    s.insert(s.end(), xs.end() - tail, xs.end());
    return s == xs ? x : e.call("aten.expand.default", {x, s});
  }
  Shape common(std::initializer_list<Shape> batches) {
    Shape r;
    for (const Shape &b : batches) {
      auto s = broadcastShapes(r, b);
      AOTC_ASSERT(s.has_value(), "linalg lowering: batch dims do not broadcast");
      r = *s;
    }
    return r;
  }
  T mm(T a, T b) {
    Shape batch = common({batchOf(shape(a)), batchOf(shape(b))});
    int64_t m = shape(a)[shape(a).size() - 2], k = shape(a).back(), n = shape(b).back();
    if (batch.empty()) return e.call("aten.mm.default", {a, b});
    int64_t nb = numelOf(batch);
    T a3 = e.view(expandTo(a, batch), {nb, m, k}), b3 = e.view(expandTo(b, batch), {nb, k, n});
    return e.view(e.call("aten.bmm.default", {a3, b3}), withTail(batch, {m, n}));
  }
  T mT(T a) { return e.call("aten.transpose.int", {a, int64_t(-2), int64_t(-1)}); }
  T tril(T a, int64_t k) { return e.call("aten.tril.default", {a, k}); }
  T triu(T a, int64_t k) { return e.call("aten.triu.default", {a, k}); }
  T add(T a, T b) { return e.add(a, b); }
  T sub(T a, T b) { return e.sub(a, b); }
  T mul(T a, T b) { return e.mul(a, b); }
  T div(T a, T b) { return e.div(a, b); }
  T scale(T a, double f) { return f == 1.0 ? a : e.mul(a, f); }
  T unsq(T a, int64_t d) { return e.call("aten.unsqueeze.default", {a, d}); }
  T eye(int64_t m, int64_t n, T like) {
    Node *r = e.view(e.iota(m), {m, 1}), *c = e.view(e.iota(n), {1, n});
    return e.toDtype(e.call("aten.eq.Tensor", {r, c}), like->type().dtype);
  }
  T diagonal(T a) { // square matrices
    int64_t n = shape(a).back();
    return e.sum(e.mul(a, eye(n, n, a)), {-1}, false);
  }
  T diagEmbed(T v) {
    int64_t n = shape(v).back();
    return e.mul(unsq(v, -1), eye(n, n, v));
  }
  T narrow(T a, int64_t d, int64_t start, int64_t len) {
    return e.call("aten.slice.Tensor", {a, d, start, start + len, int64_t(1)});
  }
  T cat(T a, T b, int64_t d) { return e.call("aten.cat.default", {std::vector<Node *>{a, b}, d}); }
  T solveTri(T A, T B, bool upper, bool left, bool unit) {
    Shape batch = common({batchOf(shape(A)), batchOf(shape(B))});
    return e.call("aotc.lapack_trisolve.default", {expandTo(A, batch), expandTo(B, batch), upper, left, unit});
  }
  T luSolve(T LU, T piv, T B, bool left, bool adjoint) {
    Shape batch = common({batchOf(shape(LU)), batchOf(shape(piv), 1), batchOf(shape(B))});
    T p = expandTo(e.toDtype(piv, DType::I64), batch, 1);
    return e.call("aotc.lapack_lu_solve.default", {expandTo(LU, batch), p, expandTo(B, batch), left, adjoint});
  }
  T epsWhereZero(T a) {
    DType dt = a->type().dtype;
    double eps = linalg_grad::epsilonOf(dt);
    return e.call("aten.where.self", {e.call("aten.eq.Scalar", {a, 0.0}), e.scalarTensor(eps, dt), e.scalarTensor(0.0, dt)});
  }
  T perm(T piv, T LU) { return e.call("aotc.lapack_perm.default", {e.toDtype(piv, DType::I64), LU}); }

  /// Elements [start, start + len) of the packed last dim of `p`, viewed as `tail` after the batch.
  T unpack(T p, int64_t start, const Shape &tail) {
    Shape s = batchOf(shape(p), 1);
    s.insert(s.end(), tail.begin(), tail.end());
    return e.view(narrow(p, -1, start, numelOf(tail)), s);
  }
  /// Element `at` of the packed last dim as int32 (pivots, info).
  T unpackIndex(T p, int64_t start, int64_t len) {
    T x = len < 0 ? e.call("aten.select.int", {p, int64_t(-1), start}) : narrow(p, -1, start, len);
    return e.toDtype(x, DType::I32);
  }
  T empty(DType dt) { return e.call("aten.full.default", {Shape{0}, 0.0}, {{"dtype", DTypeLit{dt}}}); }
};

/// getrf of A (its packed result): LU [*, m, n], pivots (int32) [*, k], info (int32) [*].
Vals luParts(EmitAlgebra &b, Node *A, bool check) {
  Shape s = A->type().shape;
  int64_t m = s[s.size() - 2], n = s.back(), k = std::min(m, n);
  Node *p = b.e.call("aotc.lapack_lu.default", {A, check});
  return {b.unpack(p, 0, {m, n}), b.unpackIndex(p, m * n, k), b.unpackIndex(p, m * n + k, -1)};
}

Vals choleskyEx(Emitter &e, Node &n) {
  EmitAlgebra b{e};
  Node *A = n.tensorArg(0);
  int64_t sz = A->type().shape.back();
  Node *p = e.call("aotc.lapack_cholesky.default", {A, n.boolArg(1), n.boolArg(2)});
  return {b.unpack(p, 0, {sz, sz}), b.unpackIndex(p, sz * sz, -1)};
}

Vals solveTriangular(Emitter &e, Node &n) {
  EmitAlgebra b{e};
  return {b.solveTri(n.tensorArg(0), n.tensorArg(1), n.boolArg(2), n.boolArg(3), n.boolArg(4))};
}

Vals luFactorEx(Emitter &e, Node &n) {
  EmitAlgebra b{e};
  return luParts(b, n.tensorArg(0), n.boolArg(2));
}

Vals luSolve(Emitter &e, Node &n) {
  EmitAlgebra b{e};
  return {b.luSolve(n.tensorArg(0), n.tensorArg(1), n.tensorArg(2), n.boolArg(3), n.boolArg(4))};
}

/// _linalg_solve_ex as torch computes it for a contiguous A: LU of A^T, solved with adjoint.
Vals solveEx(Emitter &e, Node &n) {
  EmitAlgebra b{e};
  Node *A = n.tensorArg(0), *B = n.tensorArg(1);
  bool vec = vectorRhs(A->type().shape, B->type().shape);
  Vals lu = luParts(b, b.mT(A), n.boolArg(3));
  Node *X = b.luSolve(lu[0], lu[1], vec ? b.unsq(B, -1) : B, n.boolArg(2), true);
  return {e.view(X, n.types[0].shape), lu[0], lu[1], lu[2]};
}

/// _linalg_det / _linalg_slogdet from the LU of A^T (as torch): the product of U's diagonal,
/// its sign flipped for every row exchange (pivot i != i + 1).
Vals detLike(Emitter &e, Node &n, bool slog) {
  EmitAlgebra b{e};
  Node *A = n.tensorArg(0);
  int64_t sz = A->type().shape.back();
  Vals lu = luParts(b, b.mT(A), false);
  Node *diag = b.diagonal(lu[0]);
  Node *swaps = e.sum(e.call("aten.ne.Tensor", {e.toDtype(lu[1], DType::I64), e.add(e.iota(sz), int64_t(1))}), {-1},
                      false);
  DType dt = A->type().dtype;
  Node *odd = e.call("aten.eq.Scalar", {e.call("aten.remainder.Scalar", {swaps, int64_t(2)}), int64_t(1)});
  Node *parity = e.call("aten.where.self", {odd, e.scalarTensor(-1.0, dt), e.scalarTensor(1.0, dt)});
  if (!slog) return {e.mul(e.call("aten.prod.dim_int", {diag, int64_t(-1)}), parity), lu[0], lu[1]};
  Node *sign = e.mul(e.call("aten.prod.dim_int", {e.call("aten.sign.default", {diag}), int64_t(-1)}), parity);
  Node *logabs = e.sum(e.call("aten.log.default", {e.call("aten.abs.default", {diag})}), {-1}, false);
  return {sign, logabs, lu[0], lu[1]};
}
Vals det(Emitter &e, Node &n) { return detLike(e, n, false); }
Vals slogdet(Emitter &e, Node &n) { return detLike(e, n, true); }

Vals eigh(Emitter &e, Node &n) {
  EmitAlgebra b{e};
  Node *A = n.tensorArg(0);
  int64_t sz = A->type().shape.back();
  const std::string &uplo = std::get<std::string>(n.args[1]);
  bool upper = uplo == "U" || uplo == "u", v = n.boolArg(2);
  Node *p = e.call("aotc.lapack_eigh.default", {A, upper, v});
  return {b.unpack(p, 0, {sz}), v ? b.unpack(p, sz, {sz, sz}) : b.empty(A->type().dtype)};
}

Vals svd(Emitter &e, Node &n) {
  EmitAlgebra b{e};
  Node *A = n.tensorArg(0);
  const Shape &s = A->type().shape;
  int64_t m = s[s.size() - 2], nn = s.back(), k = std::min(m, nn);
  bool full = n.boolArg(1), uv = n.boolArg(2);
  Node *p = e.call("aotc.lapack_svd.default", {A, full, uv});
  if (!uv) return {b.empty(A->type().dtype), b.unpack(p, 0, {k}), b.empty(A->type().dtype)};
  int64_t uc = full ? m : k, vr = full ? nn : k;
  return {b.unpack(p, 0, {m, uc}), b.unpack(p, m * uc, {k}), b.unpack(p, m * uc + k, {vr, nn})};
}

Vals qr(Emitter &e, Node &n) {
  EmitAlgebra b{e};
  Node *A = n.tensorArg(0);
  const Shape &s = A->type().shape;
  int64_t m = s[s.size() - 2], nn = s.back(), k = std::min(m, nn);
  const std::string &ms = std::get<std::string>(n.args[1]);
  int64_t mode = ms == "complete" ? 1 : ms == "r" ? 2 : 0; // checked by the op's shape function
  Node *p = e.call("aotc.lapack_qr.default", {A, mode});
  int64_t qc = mode == 1 ? m : k, rr = mode == 1 ? m : k;
  if (mode == 2) return {b.empty(A->type().dtype), b.unpack(p, 0, {rr, nn})};
  return {b.unpack(p, 0, {m, qc}), b.unpack(p, m * qc, {rr, nn})};
}

/// linalg_pinv as torch's: SVD (eigh when hermitian), singular values above
/// max(atol, rtol * the largest) inverted, the rest 0; P = V diag(1/s) U^T.
Vals pinv(Emitter &e, Node &n) {
  EmitAlgebra b{e};
  Node *A = n.tensorArg(0);
  const Shape &s = A->type().shape;
  DType dt = A->type().dtype;
  int64_t m = s[s.size() - 2], nn = s.back();
  if (numelOf(s) == 0) return {e.call("aten.full.default", {n.types[0].shape, 0.0}, {{"dtype", DTypeLit{dt}}})};
  bool herm = n.boolArg(3);
  Node *atol = n.isNoneArg(1) ? nullptr : n.tensorArg(1), *rtol = n.isNoneArg(2) ? nullptr : n.tensorArg(2);
  double eps = linalg_grad::epsilonOf(dt);
  Node *defRtol = e.scalarTensor(eps * (double)std::max(m, nn), DType::F64);
  if (!rtol)
    rtol = atol ? e.call("aten.where.self", {e.call("aten.gt.Scalar", {atol, 0.0}), e.scalarTensor(0.0, DType::F64), defRtol})
                : defRtol;
  if (!atol) atol = e.scalarTensor(0.0, DType::F64);
  Node *S, *left, *right; // P = left diag(1/S) right
  if (herm) {
    Node *h = e.call("aten._linalg_eigh.default", {A, std::string("L"), true});
    S = e.call("getitem", {h, int64_t(0)});
    left = e.call("getitem", {h, int64_t(1)});
    right = b.mT(left);
  } else {
    Node *sv = e.call("aten._linalg_svd.default", {A, false, true});
    S = e.call("getitem", {sv, int64_t(1)});
    left = b.mT(e.call("getitem", {sv, int64_t(2)}));
    right = b.mT(e.call("getitem", {sv, int64_t(0)}));
  }
  Node *absS = herm ? e.call("aten.abs.default", {S}) : S;
  Node *smax = e.call("aten.amax.default", {absS, std::vector<int64_t>{-1}, true});
  Node *tol = e.call("aten.maximum.default", {b.unsq(atol, -1), e.mul(b.unsq(rtol, -1), smax)});
  Node *inv = e.call("aten.where.self", {e.call("aten.gt.Tensor", {absS, tol}),
                                         e.call("aten.reciprocal.default", {S}), e.scalarTensor(0.0, dt)});
  return {b.mm(e.mul(left, b.unsq(e.toDtype(inv, dt), -2)), right)};
}

// ---- Backward helpers ------------------------------------------------------------------------

Vals choleskyBackward(Emitter &e, Node &n) {
  EmitAlgebra b{e};
  return {linalg_grad::choleskyBackward(b, n.tensorArg(0), n.tensorArg(1), n.boolArg(2))};
}
Vals solveTriangularBackward(Emitter &e, Node &n) {
  EmitAlgebra b{e};
  auto [gA, gB] = linalg_grad::solveTriangularBackward(b, n.tensorArg(0), n.tensorArg(1), n.tensorArg(2), n.boolArg(3),
                                                       n.boolArg(4), n.boolArg(5));
  return {gA, gB};
}
Vals luSolveBackward(Emitter &e, Node &n) {
  EmitAlgebra b{e};
  auto [gLU, gB] = linalg_grad::luSolveBackward(b, n.tensorArg(0), n.tensorArg(1), n.tensorArg(2), n.tensorArg(3),
                                                n.boolArg(4), n.boolArg(5));
  return {gLU, gB};
}
Vals solveBackward(Emitter &e, Node &n) {
  EmitAlgebra b{e};
  Node *g = n.tensorArg(0), *X = n.tensorArg(1), *LU = n.tensorArg(2);
  bool vec = vectorRhs(LU->type().shape, X->type().shape), left = n.boolArg(4);
  Node *gB = b.luSolve(LU, n.tensorArg(3), vec ? b.unsq(g, -1) : g, left, false);
  Node *gA = linalg_grad::solveGradA(b, gB, vec ? b.unsq(X, -1) : X, left, false);
  return {gA, e.view(gB, X->type().shape)};
}
Vals luFactorBackward(Emitter &e, Node &n) {
  EmitAlgebra b{e};
  return {linalg_grad::luFactorBackward(b, n.tensorArg(0), n.tensorArg(1), n.tensorArg(2))};
}
Vals luScaledInverse(Emitter &e, Node &n) {
  EmitAlgebra b{e};
  return {linalg_grad::scaledInverse(b, n.tensorArg(0), n.tensorArg(1), n.tensorArg(2), n.boolArg(3))};
}
Vals eighBackward(Emitter &e, Node &n) {
  EmitAlgebra b{e};
  return {linalg_grad::eighBackward(b, n.tensorArg(0), n.tensorArg(1), n.tensorArg(2), n.tensorArg(3), n.boolArg(4))};
}
Vals svdBackward(Emitter &e, Node &n) {
  EmitAlgebra b{e};
  return {linalg_grad::svdBackward(b, n.tensorArg(0), n.tensorArg(1), n.tensorArg(2), n.tensorArg(3), n.tensorArg(4),
                                   n.tensorArg(5), n.boolArg(6), n.boolArg(7))};
}
Vals pinvBackward(Emitter &e, Node &n) {
  EmitAlgebra b{e};
  return {linalg_grad::pinvBackward(b, n.tensorArg(0), n.tensorArg(1), n.tensorArg(2))};
}
Vals choleskySolveBackward(Emitter &e, Node &n) {
  EmitAlgebra b{e};
  auto [gB, gF] = linalg_grad::choleskySolveBackward(b, n.tensorArg(0), n.tensorArg(1), n.tensorArg(2), n.boolArg(3));
  return {gB, gF};
}
Vals choleskyInverseBackward(Emitter &e, Node &n) {
  EmitAlgebra b{e};
  return {linalg_grad::choleskyInverseBackward(b, n.tensorArg(0), n.tensorArg(1), n.tensorArg(2), n.boolArg(3))};
}
Vals qrBackward(Emitter &e, Node &n) {
  EmitAlgebra b{e};
  return {linalg_grad::qrBackward(b, n.tensorArg(0), n.tensorArg(1), n.tensorArg(2), n.tensorArg(3), n.tensorArg(4))};
}

} // namespace

// ---- Decompositions (before autodiff) --------------------------------------------------------

Vals triangularSolve(Emitter &e, Node &n) {
  EmitAlgebra b{e};
  Node *B = n.tensorArg(0), *A = n.tensorArg(1);
  bool t = n.boolArg(3);
  Node *X = e.call("aten.linalg_solve_triangular.default", {t ? b.mT(A) : A, B},
                   {{"upper", n.boolArg(2) != t}, {"left", true}, {"unitriangular", n.boolArg(4)}});
  return {X, e.call("aten.clone.default", {b.expandTo(A, batchOf(n.types[1].shape))})};
}

Vals luUnpack(Emitter &e, Node &n) {
  EmitAlgebra b{e};
  Node *LU = n.tensorArg(0);
  DType dt = LU->type().dtype;
  Node *P = n.boolArg(3) ? b.perm(n.tensorArg(1), LU) : b.empty(dt);
  if (!n.boolArg(2)) return {P, b.empty(dt), b.empty(dt)};
  auto [L, U] = linalg_grad::unpackLU(b, LU);
  return {P, L, U};
}

Vals linalgLu(Emitter &e, Node &n) {
  Node *f = e.call("aten.linalg_lu_factor_ex.default", {n.tensorArg(0)}, {{"pivot", n.boolArg(1)}});
  Node *u = e.call("aten.lu_unpack.default", {e.call("getitem", {f, int64_t(0)}), e.call("getitem", {f, int64_t(1)})});
  return {e.call("getitem", {u, int64_t(0)}), e.call("getitem", {u, int64_t(1)}), e.call("getitem", {u, int64_t(2)})};
}

Vals invEx(Emitter &e, Node &n) {
  EmitAlgebra b{e};
  Node *A = n.tensorArg(0);
  int64_t sz = A->type().shape.back();
  // The identity at A's full shape: never read as a batch of vectors.
  Node *I = e.call("aten.expand.default", {b.eye(sz, sz, A), A->type().shape});
  Node *s = e.call("aten._linalg_solve_ex.default", {A, I}, {{"check_errors", n.boolArg(1)}});
  return {e.call("getitem", {s, int64_t(0)}), e.call("getitem", {s, int64_t(3)})};
}

namespace {

using linalg_grad::batchOf;
using linalg_grad::vectorRhs;
using linalg_grad::withTail;

Vals choleskySolve(Emitter &e, Node &n) {
  EmitAlgebra b{e};
  Node *B = n.tensorArg(0), *F = n.tensorArg(1);
  bool up = n.boolArg(2);
  Node *L = up ? b.mT(F) : F; // A = L L^T
  auto tri = [&](Node *A, Node *rhs, bool upper) {
    return e.call("aten.linalg_solve_triangular.default", {A, rhs}, {{"upper", upper}});
  };
  return {tri(b.mT(L), tri(L, B, false), true)};
}

Vals choleskyInverse(Emitter &e, Node &n) {
  EmitAlgebra b{e};
  Node *F = n.tensorArg(0);
  int64_t sz = F->type().shape.back();
  Node *I = e.call("aten.expand.default", {b.eye(sz, sz, F), F->type().shape});
  return {e.call("aten.cholesky_solve.default", {I, F, n.boolArg(1)})};
}

} // namespace


const std::vector<RuleEntry> &linalgLowerRules() {
  // clang-format off
  static const std::vector<RuleEntry> t = {
    {"aten.linalg_cholesky_ex.default",      choleskyEx,       "aotc.lapack_cholesky (potrf), unpacked: L, info"},
    {"aten.linalg_solve_triangular.default", solveTriangular,  "aotc.lapack_trisolve (trsm) on batch-broadcast operands"},
    {"aten.linalg_lu_factor_ex.default",     luFactorEx,       "aotc.lapack_lu (getrf), unpacked: LU, pivots, info"},
    {"aten.linalg_lu_solve.default",         luSolve,          "aotc.lapack_lu_solve (getrs) on batch-broadcast operands"},
    {"aten._linalg_solve_ex.default",        solveEx,          "getrf of A^T, getrs with adjoint (torch's order)"},
    {"aten._linalg_det.default",             det,              "getrf of A^T; prod(diag(U)), negated per row exchange"},
    {"aten._linalg_slogdet.default",         slogdet,          "getrf of A^T; sign and sum(log|diag(U)|)"},
    {"aten._linalg_eigh.default",            eigh,             "aotc.lapack_eigh (syevd), unpacked"},
    {"aten._linalg_svd.default",             svd,              "aotc.lapack_svd (gesdd), unpacked"},
    {"aten.linalg_qr.default",               qr,               "aotc.lapack_qr (geqrf + orgqr), unpacked"},
    {"aten.linalg_pinv.atol_rtol_tensor",    pinv,             "_linalg_svd (hermitian: _linalg_eigh); values above max(atol, rtol s_max) inverted"},
    {"aotc.pinv_backward.default",           pinvBackward,     "-P^T G P^T + (I - A P) G^T P P^T + P^T P G^T (I - P A)"},
    {"aten.cholesky_solve.default",          choleskySolve,    "two linalg_solve_triangular: X = L^-T (L^-1 B), L = U^T when upper"},
    {"aten.cholesky_inverse.default",        choleskyInverse,  "cholesky_solve(I, L)"},
    {"aotc.cholesky_solve_backward.default", choleskySolveBackward, "torch's: gB = A^-1 g; gF = -(gB X^T + X gB^T) L (the whole factor)"},
    {"aotc.cholesky_inverse_backward.default", choleskyInverseBackward, "torch's: -Y (g + g^T) Y L (the whole factor)"},
    {"aotc.cholesky_backward.default",       choleskyBackward, "sym(L^-T Phi(L^T gL) L^-1) (LinalgGrad.h)"},
    {"aotc.solve_triangular_backward.default", solveTriangularBackward, "gB = A^-T g; gA = -gB X^T, A's triangle"},
    {"aotc.lu_solve_backward.default",       luSolveBackward,  "gB by getrs; gA mapped onto the packed LU"},
    {"aotc.solve_backward.default",          solveBackward,    "gB by getrs; gA = -gB X^T"},
    {"aotc.lu_factor_backward.default",      luFactorBackward, "P L^-T [tril(L^T gL, -1) + triu(gU U^T)] U^-T (wide / tall split)"},
    {"aotc.lu_scaled_inverse.default",       luScaledInverse,  "getrs of s I"},
    {"aotc.eigh_backward.default",           eighBackward,     "V (skew(V^T gV) / E + diag(gL)) V^T"},
    {"aotc.svd_backward.default",            svdBackward,      "torch's svd_backward, real case"},
    {"aotc.qr_backward.default",             qrBackward,       "[gQ + Q copyu(gR R^T - Q^T gQ)] R^-T (wide: split)"},
  };
  // clang-format on
  return t;
}

} // namespace aotc::rules
