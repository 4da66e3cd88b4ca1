//===- Linalg.cpp - The linalg ops: factorizations, solves, and their backward helpers ===//
//
// Dense linear algebra on batches of matrices [*, m, n] (docs/linalg.md). Three layers:
//  * the aotc::lapack_* primitives: one library call each (libaotc_kernels' aotc_linalg,
//    OpenBLAS's LAPACK; lib/Codegen/Fusion.cpp defineLinalg), whose several results are packed
//    in one tensor of the operand's dtype per matrix (kernels.h gives the layouts; pivots and
//    info are exact as floats);
//  * the aten ops torch.export leaves (none is Core ATen): the ones with a derivative rule of
//    their own (cholesky_ex, solve_triangular, lu_factor_ex, lu_solve, _linalg_solve_ex, det,
//    slogdet, eigh, svd, qr) are lowered after autodiff (lib/Decompose/LowerLinalg.cpp), the
//    others decomposed into them before it (triangular_solve, lu_unpack, linalg_lu, inv_ex,
//    cholesky_solve, cholesky_inverse);
//  * the aotc::*_backward helpers derivatives.yaml calls: their formulas are written once in
//    include/aotc/LinalgGrad.h, evaluated here on float64 and lowered to primitives there.
// Pivots and info are int32 as torch's (index-only values: OpDef::narrowResults).
// The float64 references are LinalgRef.cpp's textbook algorithms, not LAPACK.
//===----------------------------------------------------------------------===//
#include "LinalgRef.h"
#include "Ops.h"

#include "aotc/LinalgGrad.h"

#include <algorithm>
#include <cmath>
#include <optional>

namespace aotc {
namespace ops {
namespace {

using Types = std::vector<TensorType>;
using linalg_ref::Mat;
using linalg_ref::RefAlgebra;
using Lists = std::vector<std::vector<const RefTensor *>>;
using linalg_grad::batchOf;
using linalg_grad::vectorRhs;
using linalg_grad::withTail;


/// A floating [*, m, n] argument (torch's checkFloatingOrComplex + checkIsMatrix).
TensorType matrixArg(const Node &n, size_t i, const std::string &op, bool square) {
  TensorType t = argType(n, i);
  if (!isFloating(t.dtype))
    nodeError(n, op + ": Expected a floating point or complex tensor as input. Got " + dtypeAbbr(t.dtype));
  if (t.rank() < 2)
    nodeError(n, op + ": The input tensor " + (i == 0 ? "A" : "B") + " must have at least 2 dimensions.");
  if (square && t.shape[t.rank() - 1] != t.shape[t.rank() - 2])
    nodeError(n, op + ": A must be batches of square matrices, but they are " + std::to_string(t.shape[t.rank() - 2]) +
                     " by " + std::to_string(t.shape.back()) + " matrices");
  return t;
}

Shape broadcastBatches(const Node &n, const Shape &a, const Shape &b, const std::string &op) {
  auto s = broadcastShapes(a, b);
  if (!s) nodeError(n, op + ": the batch dimensions " + shapeStr(a) + " and " + shapeStr(b) + " do not broadcast");
  return *s;
}

/// The shape of a solution of A X = B (left) or X A = B, A [*a, n, n], B [*b, r, c]: torch's
/// linalg_solve_triangular / lu_solve checks, the batch dims broadcast.
Shape solveShape(const Node &n, const Shape &A, const Shape &B, bool left, const std::string &op) {
  int64_t nn = A.back(), r = B[B.size() - 2], c = B.back();
  if ((left ? r : c) != nn)
    nodeError(n, op + ": Incompatible shapes of A and B for the equation " + (left ? "AX = B" : "XA = B") + " (" +
                     std::to_string(nn) + "x" + std::to_string(nn) + " and " + std::to_string(r) + "x" +
                     std::to_string(c) + ")");
  return withTail(broadcastBatches(n, batchOf(A), batchOf(B), op), {r, c});
}


// ---- float64 references of the aten ops ----------------------------------------------------

RefTensor packedOut(const Node &n) { return RefTensor(n.types[0].dtype, n.types[0].shape); }

void setRow(RefTensor &t, int64_t e, const std::vector<double> &v) {
  std::copy(v.begin(), v.end(), t.data.begin() + e * (int64_t)v.size());
}

/// (LU, pivots, info) of each matrix of `a`.
struct LuRef {
  RefTensor LU, piv, info;
};
LuRef luRef(const RefTensor &a, DType dt) {
  int64_t m = a.shape[a.shape.size() - 2], nn = a.shape.back(), k = std::min(m, nn);
  LuRef r{RefTensor(dt, a.shape), RefTensor(DType::I32, withTail(batchOf(a.shape), {k})),
          RefTensor(DType::I32, batchOf(a.shape))};
  for (int64_t e = 0; e < linalg_ref::batchCount(a.shape); ++e) {
    std::vector<int64_t> p;
    int info = 0;
    linalg_ref::setMat(r.LU, e, linalg_ref::lu(linalg_ref::matAt(a, e), p, info));
    for (int64_t i = 0; i < k; ++i) r.piv.data[(size_t)(e * k + i)] = (double)p[(size_t)i];
    r.info.data[(size_t)e] = info;
  }
  return r;
}

/// (sign, log|det|) of each matrix from its LU.
void detParts(const RefTensor &LU, const RefTensor &piv, std::vector<double> &sign, std::vector<double> &logabs) {
  int64_t nn = LU.shape.back();
  for (int64_t e = 0; e < linalg_ref::batchCount(LU.shape); ++e) {
    Mat m = linalg_ref::matAt(LU, e);
    double s = 1, l = 0;
    for (int64_t i = 0; i < nn; ++i) {
      if ((int64_t)piv.data[(size_t)(e * nn + i)] != i + 1) s = -s;
      double d = m(i, i);
      s *= d > 0 ? 1 : d < 0 ? -1 : 0;
      l += std::log(std::fabs(d));
    }
    sign.push_back(s), logabs.push_back(l);
  }
}

bool isUpperUplo(const Node &n, size_t i, const std::string &op) {
  const std::string &u = std::get<std::string>(n.args.at(i));
  if (u != "L" && u != "U" && u != "l" && u != "u")
    nodeError(n, op + ": Expected UPLO argument to be 'L' or 'U', but got " + u);
  return u == "U" || u == "u";
}

int qrMode(const Node &n, size_t i) {
  const std::string &m = std::get<std::string>(n.args.at(i));
  if (m == "reduced") return 0;
  if (m == "complete") return 1;
  if (m == "r") return 2;
  nodeError(n, "qr received unrecognized mode '" + m + "' but expected one of 'reduced' (default), 'r', or 'complete'");
}

/// Evaluates a LinalgGrad formula on the node's tensor arguments.
template <class F> void setGradEval(OpDef &d, F f) {
  d.eval = [f](const Node &n, const RefArgs &a, const Lists &) -> std::vector<RefTensor> {
    RefAlgebra alg;
    std::vector<RefTensor> out = f(alg, n, a);
    for (size_t i = 0; i < out.size(); ++i) out[i].dtype = n.types[i].dtype;
    return out;
  };
}

void registerPrimitives(OpRegistry &r) {
  {
    OpDef &d = r.add("aotc::lapack_cholesky(Tensor A, bool upper, bool check) -> Tensor", OpCategory::Other);
    d.primitive = true, d.nonDifferentiable = true;
    d.infer = [](const Node &n) -> Types {
      TensorType a = matrixArg(n, 0, "lapack_cholesky", true);
      return {{a.dtype, withTail(batchOf(a.shape), {a.shape.back() * a.shape.back() + 1})}};
    };
    setEval(d, [](const Node &n, const RefArgs &a) {
      RefTensor out = packedOut(n);
      for (int64_t e = 0; e < linalg_ref::batchCount(a[0]->shape); ++e) {
        int info = 0;
        Mat L = linalg_ref::cholesky(linalg_ref::matAt(*a[0], e), n.boolArg(1), info);
        L.v.push_back(info);
        setRow(out, e, L.v);
      }
      return out;
    });
  }
  {
    OpDef &d = r.add("aotc::lapack_trisolve(Tensor A, Tensor B, bool upper, bool left, bool unitriangular) -> Tensor",
                     OpCategory::Other);
    d.primitive = true, d.nonDifferentiable = true;
    d.infer = [](const Node &n) -> Types {
      TensorType a = matrixArg(n, 0, "lapack_trisolve", true), b = matrixArg(n, 1, "lapack_trisolve", false);
      if (batchOf(a.shape) != batchOf(b.shape) || a.dtype != b.dtype)
        nodeError(n, "lapack_trisolve: A and B must have the same batch dims and dtype");
      return {{b.dtype, solveShape(n, a.shape, b.shape, n.boolArg(3), "lapack_trisolve")}};
    };
    setEval(d, [](const Node &n, const RefArgs &a) {
      RefAlgebra alg;
      return alg.solveTri(*a[0], *a[1], n.boolArg(2), n.boolArg(3), n.boolArg(4));
    });
  }
  {
    OpDef &d = r.add("aotc::lapack_lu(Tensor A, bool check) -> Tensor", OpCategory::Other);
    d.primitive = true, d.nonDifferentiable = true;
    d.infer = [](const Node &n) -> Types {
      TensorType a = matrixArg(n, 0, "lapack_lu", false);
      int64_t m = a.shape[a.rank() - 2], nn = a.shape.back();
      if (a.dtype == DType::F32 && m > (int64_t(1) << 24))
        nodeError(n, "linalg.lu_factor: float32 matrices of more than 2^24 rows are not supported (aotc carries the "
                     "pivots as float32 values, exact up to 2^24)");
      return {{a.dtype, withTail(batchOf(a.shape), {m * nn + std::min(m, nn) + 1})}};
    };
    setEval(d, [](const Node &n, const RefArgs &a) {
      RefTensor out = packedOut(n);
      for (int64_t e = 0; e < linalg_ref::batchCount(a[0]->shape); ++e) {
        std::vector<int64_t> p;
        int info = 0;
        Mat LU = linalg_ref::lu(linalg_ref::matAt(*a[0], e), p, info);
        for (int64_t x : p) LU.v.push_back((double)x);
        LU.v.push_back(info);
        setRow(out, e, LU.v);
      }
      return out;
    });
  }
  {
    OpDef &d = r.add("aotc::lapack_lu_solve(Tensor LU, Tensor pivots, Tensor B, bool left, bool adjoint) -> Tensor",
                     OpCategory::Other);
    d.primitive = true, d.nonDifferentiable = true;
    d.infer = [](const Node &n) -> Types {
      TensorType lu = matrixArg(n, 0, "lapack_lu_solve", true), b = matrixArg(n, 2, "lapack_lu_solve", false);
      TensorType p = argType(n, 1);
      if (batchOf(lu.shape) != batchOf(b.shape) || batchOf(lu.shape, 1) != batchOf(p.shape, 0) ||
          p.dtype != DType::I64 || lu.dtype != b.dtype)
        nodeError(n, "lapack_lu_solve: LU, pivots (int64) and B must have the same batch dims");
      return {{b.dtype, solveShape(n, lu.shape, b.shape, n.boolArg(3), "lapack_lu_solve")}};
    };
    setEval(d, [](const Node &n, const RefArgs &a) {
      RefAlgebra alg;
      return alg.luSolve(*a[0], *a[1], *a[2], n.boolArg(3), n.boolArg(4));
    });
  }
  {
    OpDef &d = r.add("aotc::lapack_eigh(Tensor A, bool upper, bool compute_v) -> Tensor", OpCategory::Other);
    d.primitive = true, d.nonDifferentiable = true;
    d.infer = [](const Node &n) -> Types {
      TensorType a = matrixArg(n, 0, "lapack_eigh", true);
      int64_t nn = a.shape.back();
      return {{a.dtype, withTail(batchOf(a.shape), {nn + (n.boolArg(2) ? nn * nn : 0)})}};
    };
    setEval(d, [](const Node &n, const RefArgs &a) {
      RefTensor out = packedOut(n);
      for (int64_t e = 0; e < linalg_ref::batchCount(a[0]->shape); ++e) {
        std::vector<double> w;
        Mat V;
        linalg_ref::eigh(linalg_ref::matAt(*a[0], e), n.boolArg(1), w, V);
        if (n.boolArg(2)) w.insert(w.end(), V.v.begin(), V.v.end());
        setRow(out, e, w);
      }
      return out;
    });
  }
  {
    OpDef &d = r.add("aotc::lapack_svd(Tensor A, bool full_matrices, bool compute_uv) -> Tensor", OpCategory::Other);
    d.primitive = true, d.nonDifferentiable = true;
    d.infer = [](const Node &n) -> Types {
      TensorType a = matrixArg(n, 0, "lapack_svd", false);
      int64_t m = a.shape[a.rank() - 2], nn = a.shape.back(), k = std::min(m, nn);
      bool full = n.boolArg(1);
      int64_t len = k + (n.boolArg(2) ? m * (full ? m : k) + (full ? nn : k) * nn : 0);
      return {{a.dtype, withTail(batchOf(a.shape), {len})}};
    };
    setEval(d, [](const Node &n, const RefArgs &a) {
      RefTensor out = packedOut(n);
      for (int64_t e = 0; e < linalg_ref::batchCount(a[0]->shape); ++e) {
        Mat U, Vh;
        std::vector<double> S, row;
        linalg_ref::svd(linalg_ref::matAt(*a[0], e), n.boolArg(1), U, S, Vh);
        if (n.boolArg(2)) row.insert(row.end(), U.v.begin(), U.v.end());
        row.insert(row.end(), S.begin(), S.end());
        if (n.boolArg(2)) row.insert(row.end(), Vh.v.begin(), Vh.v.end());
        setRow(out, e, row);
      }
      return out;
    });
  }
  {
    OpDef &d = r.add("aotc::lapack_qr(Tensor A, int mode) -> Tensor", OpCategory::Other);
    d.primitive = true, d.nonDifferentiable = true;
    d.infer = [](const Node &n) -> Types {
      TensorType a = matrixArg(n, 0, "lapack_qr", false);
      int64_t m = a.shape[a.rank() - 2], nn = a.shape.back(), k = std::min(m, nn), mode = n.intArg(1);
      if (mode < 0 || mode > 2) nodeError(n, "lapack_qr: mode must be 0, 1 or 2");
      int64_t len = (mode == 2 ? 0 : m * (mode == 1 ? m : k)) + (mode == 1 ? m : k) * nn;
      return {{a.dtype, withTail(batchOf(a.shape), {len})}};
    };
    setEval(d, [](const Node &n, const RefArgs &a) {
      RefTensor out = packedOut(n);
      for (int64_t e = 0; e < linalg_ref::batchCount(a[0]->shape); ++e) {
        Mat Q, R;
        linalg_ref::qr(linalg_ref::matAt(*a[0], e), (int)n.intArg(1), Q, R);
        std::vector<double> row = Q.v;
        row.insert(row.end(), R.v.begin(), R.v.end());
        setRow(out, e, row);
      }
      return out;
    });
  }
  {
    OpDef &d = r.add("aotc::lapack_perm(Tensor pivots, Tensor LU) -> Tensor", OpCategory::Other);
    d.primitive = true, d.nonDifferentiable = true;
    d.infer = [](const Node &n) -> Types {
      TensorType p = argType(n, 0), lu = matrixArg(n, 1, "lapack_perm", false);
      int64_t m = lu.shape[lu.rank() - 2];
      if (p.dtype != DType::I64 || batchOf(p.shape, 1) != batchOf(lu.shape) ||
          p.shape.back() != std::min(m, lu.shape.back()))
        nodeError(n, "lapack_perm: pivots must be int64 [*, min(m, n)] of LU's batch");
      return {{lu.dtype, withTail(batchOf(lu.shape), {m, m})}};
    };
    setEval(d, [](const Node &n, const RefArgs &a) {
      RefAlgebra alg;
      return alg.perm(*a[0], *a[1]);
    });
  }
}

std::vector<RefTensor> linalgLuRef(const RefTensor &a, DType dt) {
  LuRef l = luRef(a, dt);
  return {l.LU, l.piv, l.info};
}

/// Each matrix of `a` through f(Mat) -> Mat, into a result of `t`.
template <class F> RefTensor perMatrix(const RefTensor &a, const TensorType &t, F f) {
  RefTensor out(t.dtype, t.shape);
  for (int64_t e = 0; e < linalg_ref::batchCount(a.shape); ++e) linalg_ref::setMat(out, e, f(linalg_ref::matAt(a, e)));
  return out;
}

TensorType i32(const Shape &s) { return {DType::I32, s}; }

void registerFactorizations(OpRegistry &r) {
  {
    OpDef &d = r.add("linalg_cholesky_ex(Tensor self, *, bool upper=False, bool check_errors=False) -> (Tensor L, "
                     "Tensor info)",
                     OpCategory::Composite);
    d.narrowResults = true;
    d.infer = [](const Node &n) -> Types {
      TensorType a = matrixArg(n, 0, "linalg.cholesky", true);
      return {a, i32(batchOf(a.shape))};
    };
    d.eval = [](const Node &n, const RefArgs &a, const Lists &) -> std::vector<RefTensor> {
      RefTensor L(n.types[0].dtype, n.types[0].shape), info(DType::I32, n.types[1].shape);
      for (int64_t e = 0; e < linalg_ref::batchCount(a[0]->shape); ++e) {
        int inf = 0;
        linalg_ref::setMat(L, e, linalg_ref::cholesky(linalg_ref::matAt(*a[0], e), n.boolArg(1), inf));
        info.data[(size_t)e] = inf;
      }
      return {L, info};
    };
  }
  {
    OpDef &d = r.add("linalg_lu_factor_ex(Tensor A, *, bool pivot=True, bool check_errors=False) -> (Tensor LU, Tensor "
                     "pivots, Tensor info)",
                     OpCategory::Composite);
    d.narrowResults = true;
    d.infer = [](const Node &n) -> Types {
      TensorType a = matrixArg(n, 0, "linalg.lu_factor", false);
      if (!n.boolArg(1)) nodeError(n, "linalg.lu_factor: LU without pivoting is not implemented on the CPU");
      int64_t k = std::min(a.shape[a.rank() - 2], a.shape.back());
      return {a, i32(withTail(batchOf(a.shape), {k})), i32(batchOf(a.shape))};
    };
    d.eval = [](const Node &n, const RefArgs &a, const Lists &) { return linalgLuRef(*a[0], n.types[0].dtype); };
  }
  {
    OpDef &d = r.add("lu_unpack(Tensor LU_data, Tensor LU_pivots, bool unpack_data=True, bool unpack_pivots=True) -> "
                     "(Tensor P, Tensor L, Tensor U)",
                     OpCategory::Composite);
    d.indexArgs = {1};
    d.infer = [](const Node &n) -> Types {
      TensorType lu = matrixArg(n, 0, "lu_unpack", false), p = argType(n, 1);
      int64_t m = lu.shape[lu.rank() - 2], nn = lu.shape.back(), k = std::min(m, nn);
      if (p.dtype != DType::I32 && p.dtype != DType::I64)
        nodeError(n, "lu_unpack: LU_pivots is expected to be a contiguous tensor of torch.int32 dtype.");
      if (p.rank() < 1 || batchOf(p.shape, 1) != batchOf(lu.shape) || p.shape.back() != k)
        nodeError(n, "lu_unpack: the shapes of LU_pivots " + shapeStr(p.shape) + " and LU_data " + shapeStr(lu.shape) +
                         " do not match (expected [*, min(m, n)])");
      Shape b = batchOf(lu.shape);
      bool data = n.boolArg(2), piv = n.boolArg(3);
      return {{lu.dtype, piv ? withTail(b, {m, m}) : Shape{0}},
              {lu.dtype, data ? withTail(b, {m, k}) : Shape{0}},
              {lu.dtype, data ? withTail(b, {k, nn}) : Shape{0}}};
    };
    d.eval = [](const Node &n, const RefArgs &a, const Lists &) -> std::vector<RefTensor> {
      RefAlgebra alg;
      std::vector<RefTensor> out = {RefTensor(n.types[0].dtype, n.types[0].shape),
                                    RefTensor(n.types[1].dtype, n.types[1].shape),
                                    RefTensor(n.types[2].dtype, n.types[2].shape)};
      if (n.boolArg(3)) out[0] = alg.perm(*a[1], *a[0]);
      if (n.boolArg(2)) std::tie(out[1], out[2]) = linalg_grad::unpackLU(alg, *a[0]);
      return out;
    };
  }
  {
    OpDef &d = r.add("linalg_lu(Tensor A, *, bool pivot=True) -> (Tensor P, Tensor L, Tensor U)", OpCategory::Composite);
    d.infer = [](const Node &n) -> Types {
      TensorType a = matrixArg(n, 0, "linalg.lu", false);
      if (!n.boolArg(1)) nodeError(n, "linalg.lu: LU without pivoting is not implemented on the CPU");
      int64_t m = a.shape[a.rank() - 2], nn = a.shape.back(), k = std::min(m, nn);
      Shape b = batchOf(a.shape);
      return {{a.dtype, withTail(b, {m, m})}, {a.dtype, withTail(b, {m, k})}, {a.dtype, withTail(b, {k, nn})}};
    };
    d.eval = [](const Node &n, const RefArgs &a, const Lists &) -> std::vector<RefTensor> {
      RefAlgebra alg;
      std::vector<RefTensor> l = linalgLuRef(*a[0], n.types[0].dtype);
      auto [L, U] = linalg_grad::unpackLU(alg, l[0]);
      return {alg.perm(l[1], l[0]), L, U};
    };
  }
  {
    OpDef &d = r.add("_linalg_eigh(Tensor A, str UPLO='L', bool compute_v=True) -> (Tensor eigenvalues, Tensor "
                     "eigenvectors)",
                     OpCategory::Composite);
    d.infer = [](const Node &n) -> Types {
      TensorType a = matrixArg(n, 0, "linalg.eigh", true);
      isUpperUplo(n, 1, "linalg.eigh");
      return {{a.dtype, batchOf(a.shape, 1)}, {a.dtype, n.boolArg(2) ? a.shape : Shape{0}}};
    };
    d.eval = [](const Node &n, const RefArgs &a, const Lists &) -> std::vector<RefTensor> {
      RefTensor w(n.types[0].dtype, n.types[0].shape), V(n.types[1].dtype, n.types[1].shape);
      int64_t nn = a[0]->shape.back();
      for (int64_t e = 0; e < linalg_ref::batchCount(a[0]->shape); ++e) {
        std::vector<double> ev;
        Mat vm;
        linalg_ref::eigh(linalg_ref::matAt(*a[0], e), isUpperUplo(n, 1, "linalg.eigh"), ev, vm);
        std::copy(ev.begin(), ev.end(), w.data.begin() + e * nn);
        if (n.boolArg(2)) linalg_ref::setMat(V, e, vm);
      }
      return {w, V};
    };
  }
  {
    OpDef &d = r.add("_linalg_svd(Tensor A, bool full_matrices=False, bool compute_uv=True, *, str? driver=None) -> "
                     "(Tensor U, Tensor S, Tensor Vh)",
                     OpCategory::Composite);
    d.infer = [](const Node &n) -> Types {
      TensorType a = matrixArg(n, 0, "linalg.svd", false);
      if (!n.isNoneArg(3))
        nodeError(n, "torch.linalg.svd: keyword argument `driver=` is only supported on CUDA inputs with cuSOLVER "
                     "backend.");
      int64_t m = a.shape[a.rank() - 2], nn = a.shape.back(), k = std::min(m, nn);
      bool full = n.boolArg(1), uv = n.boolArg(2);
      Shape b = batchOf(a.shape);
      return {{a.dtype, uv ? withTail(b, {m, full ? m : k}) : Shape{0}},
              {a.dtype, withTail(b, {k})},
              {a.dtype, uv ? withTail(b, {full ? nn : k, nn}) : Shape{0}}};
    };
    d.eval = [](const Node &n, const RefArgs &a, const Lists &) -> std::vector<RefTensor> {
      std::vector<RefTensor> out;
      for (const TensorType &t : n.types) out.emplace_back(t.dtype, t.shape);
      int64_t k = n.types[1].shape.back();
      for (int64_t e = 0; e < linalg_ref::batchCount(a[0]->shape); ++e) {
        Mat U, Vh;
        std::vector<double> S;
        linalg_ref::svd(linalg_ref::matAt(*a[0], e), n.boolArg(1), U, S, Vh);
        std::copy(S.begin(), S.end(), out[1].data.begin() + e * k);
        if (n.boolArg(2)) linalg_ref::setMat(out[0], e, U), linalg_ref::setMat(out[2], e, Vh);
      }
      return out;
    };
  }
  {
    OpDef &d = r.add("linalg_qr(Tensor A, str mode='reduced') -> (Tensor Q, Tensor R)", OpCategory::Composite);
    d.infer = [](const Node &n) -> Types {
      TensorType a = matrixArg(n, 0, "linalg.qr", false);
      int mode = qrMode(n, 1);
      int64_t m = a.shape[a.rank() - 2], nn = a.shape.back(), k = std::min(m, nn);
      Shape b = batchOf(a.shape);
      return {{a.dtype, mode == 2 ? Shape{0} : withTail(b, {m, mode == 1 ? m : k})},
              {a.dtype, withTail(b, {mode == 1 ? m : k, nn})}};
    };
    d.eval = [](const Node &n, const RefArgs &a, const Lists &) -> std::vector<RefTensor> {
      RefTensor Q(n.types[0].dtype, n.types[0].shape), R(n.types[1].dtype, n.types[1].shape);
      int mode = qrMode(n, 1);
      for (int64_t e = 0; e < linalg_ref::batchCount(a[0]->shape); ++e) {
        Mat q, rr;
        linalg_ref::qr(linalg_ref::matAt(*a[0], e), mode, q, rr);
        if (mode != 2) linalg_ref::setMat(Q, e, q);
        linalg_ref::setMat(R, e, rr);
      }
      return {Q, R};
    };
  }
}

void registerSolves(OpRegistry &r) {
  {
    OpDef &d = r.add("linalg_solve_triangular(Tensor self, Tensor B, *, bool upper, bool left=True, bool "
                     "unitriangular=False) -> Tensor",
                     OpCategory::Composite);
    d.infer = [](const Node &n) -> Types {
      TensorType a = matrixArg(n, 0, "linalg.solve_triangular", true), b = matrixArg(n, 1, "linalg.solve_triangular", false);
      if (a.dtype != b.dtype)
        nodeError(n, std::string("linalg.solve_triangular: Expected A and B to have the same dtype, but found A of type ") +
                         dtypeAbbr(a.dtype) + " and B of type " + dtypeAbbr(b.dtype) + " instead");
      return {{a.dtype, solveShape(n, a.shape, b.shape, n.boolArg(3), "linalg.solve_triangular")}};
    };
    setEval(d, [](const Node &n, const RefArgs &a) {
      RefAlgebra alg;
      return alg.solveTri(*a[0], *a[1], n.boolArg(2), n.boolArg(3), n.boolArg(4));
    });
  }
  {
    OpDef &d = r.add("triangular_solve(Tensor self, Tensor A, bool upper=True, bool transpose=False, bool "
                     "unitriangular=False) -> (Tensor solution, Tensor cloned_coefficient)",
                     OpCategory::Composite);
    d.infer = [](const Node &n) -> Types {
      TensorType b = matrixArg(n, 0, "triangular_solve", false), a = matrixArg(n, 1, "triangular_solve", true);
      if (a.dtype != b.dtype) nodeError(n, "triangular_solve: Expected b and A to have the same dtype");
      Shape sol = solveShape(n, a.shape, b.shape, true, "triangular_solve");
      return {{b.dtype, sol}, {a.dtype, withTail(batchOf(sol), {a.shape.back(), a.shape.back()})}};
    };
    d.eval = [](const Node &n, const RefArgs &a, const Lists &) -> std::vector<RefTensor> {
      RefAlgebra alg;
      bool t = n.boolArg(3);
      RefTensor A = t ? alg.mT(*a[1]) : *a[1];
      RefTensor X = alg.solveTri(A, *a[0], n.boolArg(2) != t, true, n.boolArg(4));
      return {X, linalg_ref::expandBatch(*a[1], batchOf(n.types[1].shape))};
    };
  }
  {
    OpDef &d = r.add("linalg_lu_solve(Tensor LU, Tensor pivots, Tensor B, *, bool left=True, bool adjoint=False) -> "
                     "Tensor",
                     OpCategory::Composite);
    d.indexArgs = {1};
    d.infer = [](const Node &n) -> Types {
      TensorType lu = matrixArg(n, 0, "linalg.lu_solve", true), b = matrixArg(n, 2, "linalg.lu_solve", false);
      TensorType p = argType(n, 1);
      if (p.dtype != DType::I32 && p.dtype != DType::I64) // i64 once WidenIndices has run
        nodeError(n, "linalg.lu_solve: pivots should be a Tensor of scalar type torch.int32");
      if (p.rank() + 1 != lu.rank() || batchOf(p.shape, 1) != batchOf(lu.shape) || p.shape.back() != lu.shape.back())
        nodeError(n, "linalg.lu_solve: Expected LU.shape[:-1] and pivots.shape to be the same, but got pivots with "
                     "shape " + shapeStr(p.shape) + " instead");
      if (lu.dtype != b.dtype) nodeError(n, "linalg.lu_solve: Expected LU and B to have the same dtype");
      return {{b.dtype, solveShape(n, lu.shape, b.shape, n.boolArg(3), "linalg.lu_solve")}};
    };
    setEval(d, [](const Node &n, const RefArgs &a) {
      RefAlgebra alg;
      return alg.luSolve(*a[0], *a[1], *a[2], n.boolArg(3), n.boolArg(4));
    });
  }
  {
    OpDef &d = r.add("_linalg_solve_ex(Tensor A, Tensor B, *, bool left=True, bool check_errors=False) -> (Tensor "
                     "result, Tensor LU, Tensor pivots, Tensor info)",
                     OpCategory::Composite);
    d.narrowResults = true;
    d.infer = [](const Node &n) -> Types {
      TensorType a = matrixArg(n, 0, "linalg.solve", true), b = argType(n, 1);
      if (a.dtype != b.dtype)
        nodeError(n, std::string("linalg.solve: Expected A and B to have the same dtype, but found A of type ") +
                         dtypeAbbr(a.dtype) + " and B of type " + dtypeAbbr(b.dtype) + " instead");
      bool vec = vectorRhs(a.shape, b.shape), left = n.boolArg(2);
      if (!vec && b.rank() < 2) nodeError(n, "linalg.solve: The input tensor B must have at least 2 dimensions.");
      if (vec && !left)
        nodeError(n, "linalg.solve: Vector broadcasting of the left hand side is not supported for left=False. In this "
                     "case linalg.solve is equivalent to B / A.squeeze(-1)");
      Shape b2 = b.shape;
      if (vec) b2.push_back(1);
      Shape res = solveShape(n, a.shape, b2, left, "linalg.solve");
      if (vec) res.pop_back();
      return {{b.dtype, res}, a, i32(batchOf(a.shape, 1)), i32(batchOf(a.shape))};
    };
    d.eval = [](const Node &n, const RefArgs &a, const Lists &) -> std::vector<RefTensor> {
      RefAlgebra alg;
      // torch factorizes A^T (contiguous A) and solves with adjoint = True.
      std::vector<RefTensor> l = linalgLuRef(alg.mT(*a[0]), n.types[1].dtype);
      bool vec = vectorRhs(a[0]->shape, a[1]->shape);
      RefTensor B = vec ? alg.unsq(*a[1], -1) : *a[1];
      RefTensor X = alg.luSolve(l[0], l[1], B, n.boolArg(2), true);
      X.shape = n.types[0].shape;
      return {X, l[0], l[1], l[2]};
    };
  }
  {
    OpDef &d = r.add("linalg_inv_ex(Tensor A, *, bool check_errors=False) -> (Tensor inverse, Tensor info)",
                     OpCategory::Composite);
    d.narrowResults = true;
    d.infer = [](const Node &n) -> Types {
      TensorType a = matrixArg(n, 0, "linalg.inv", true);
      return {a, i32(batchOf(a.shape))};
    };
    d.eval = [](const Node &n, const RefArgs &a, const Lists &) -> std::vector<RefTensor> {
      RefAlgebra alg;
      std::vector<RefTensor> l = linalgLuRef(*a[0], n.types[0].dtype);
      int64_t nn = a[0]->shape.back();
      return {alg.luSolve(l[0], l[1], alg.eye(nn, nn, *a[0]), true, false), l[2]};
    };
  }
  for (bool slog : {false, true}) {
    OpDef &d = slog ? r.add("_linalg_slogdet(Tensor A) -> (Tensor sign, Tensor logabsdet, Tensor LU, Tensor pivots)",
                            OpCategory::Composite)
                    : r.add("_linalg_det(Tensor A) -> (Tensor result, Tensor LU, Tensor pivots)", OpCategory::Composite);
    d.narrowResults = true;
    d.infer = [slog](const Node &n) -> Types {
      TensorType a = matrixArg(n, 0, slog ? "linalg.slogdet" : "linalg.det", true);
      TensorType det = {a.dtype, batchOf(a.shape)};
      if (slog) return {det, det, a, i32(batchOf(a.shape, 1))};
      return {det, a, i32(batchOf(a.shape, 1))};
    };
    d.eval = [slog](const Node &n, const RefArgs &a, const Lists &) -> std::vector<RefTensor> {
      RefAlgebra alg;
      DType dt = n.types[0].dtype;
      std::vector<RefTensor> l = linalgLuRef(alg.mT(*a[0]), dt); // torch factorizes A^T
      std::vector<double> sign, logabs;
      detParts(l[0], l[1], sign, logabs);
      RefTensor s(dt, n.types[0].shape), la(dt, n.types[0].shape);
      for (size_t e = 0; e < sign.size(); ++e) {
        s.data[e] = sign[e], la.data[e] = logabs[e];
        if (!slog) s.data[e] = sign[e] * std::exp(logabs[e]);
      }
      if (slog) return {s, la, l[0], l[1]};
      return {s, l[0], l[1]};
    };
  }
  {
    OpDef &d = r.add("cholesky_solve(Tensor self, Tensor input2, bool upper=False) -> Tensor", OpCategory::Composite);
    d.infer = [](const Node &n) -> Types {
      TensorType b = matrixArg(n, 0, "cholesky_solve", false), l = matrixArg(n, 1, "cholesky_solve", true);
      if (l.dtype != b.dtype) nodeError(n, "cholesky_solve: Expected b and A to have the same dtype");
      return {{b.dtype, solveShape(n, l.shape, b.shape, true, "cholesky_solve")}};
    };
    setEval(d, [](const Node &n, const RefArgs &a) {
      RefAlgebra alg;
      bool up = n.boolArg(2);
      // A = L L^T (U^T U): X = L^-T L^-1 B.
      RefTensor y = alg.solveTri(up ? alg.mT(*a[1]) : *a[1], *a[0], false, true, false);
      return alg.solveTri(up ? *a[1] : alg.mT(*a[1]), y, true, true, false);
    });
  }
  {
    OpDef &d = r.add("cholesky_inverse(Tensor self, bool upper=False) -> Tensor", OpCategory::Composite);
    d.infer = [](const Node &n) -> Types { return {matrixArg(n, 0, "cholesky_inverse", true)}; };
    setEval(d, [](const Node &n, const RefArgs &a) {
      return perMatrix(*a[0], n.types[0], [&](const Mat &f) {
        Mat L = n.boolArg(1) ? f.t() : f;
        Mat y = linalg_ref::trisolve(L, Mat::eye(L.r, L.r), false, true, false);
        return linalg_ref::trisolve(L.t(), y, true, true, false);
      });
    });
  }
}

/// The gradients' types: a [*, n, n] matrix over the batch of `like` (rank >= 2), and `x`.
TensorType squareOver(const TensorType &like, int64_t n) { return {like.dtype, withTail(batchOf(like.shape), {n, n})}; }

/// torch's get_atol_rtol and pinv tolerance: max(atol, rtol * the largest singular value), atol
/// 0 by default, rtol eps(dtype) max(m, n) by default (0 when a positive atol is given).
double pinvTol(const Node &n, const RefArgs &a, int64_t e, const Shape &batch, double smax, int64_t m, int64_t nn) {
  auto at = [&](size_t i) -> std::optional<double> {
    if (!a[i]) return std::nullopt;
    RefTensor t = linalg_ref::expandBatch(*a[i], batch, 0);
    return t.data[(size_t)e];
  };
  double eps = linalg_grad::epsilonOf(n.types[0].dtype);
  std::optional<double> atol = at(1), rtol = at(2);
  double rt = rtol ? *rtol : (atol && *atol > 0 ? 0.0 : eps * (double)std::max(m, nn));
  return std::max(atol.value_or(0.0), rt * smax);
}

void registerPinv(OpRegistry &r) {
  OpDef &d = r.add("linalg_pinv.atol_rtol_tensor(Tensor self, *, Tensor? atol=None, Tensor? rtol=None, bool "
                   "hermitian=False) -> Tensor",
                   OpCategory::Composite);
  d.infer = [](const Node &n) -> Types {
    TensorType a = matrixArg(n, 0, "linalg.pinv", n.boolArg(3));
    Shape b = batchOf(a.shape);
    for (size_t i : {1, 2})
      if (const Node *t = optTensor(n, i)) {
        if (isFloating(t->type().dtype) == false)
          nodeError(n, std::string("linalg.pinv: ") + (i == 1 ? "atol" : "rtol") + " must be a floating tensor");
        if (broadcastBatches(n, b, t->type().shape, "linalg.pinv") != b)
          nodeError(n, std::string("linalg.pinv: ") + (i == 1 ? "atol" : "rtol") + " of shape " +
                           shapeStr(t->type().shape) + " has batch dims A's " + shapeStr(b) +
                           " does not have: not supported (expand A first)");
      }
    return {{a.dtype, withTail(b, {a.shape.back(), a.shape[a.rank() - 2]})}};
  };
  d.eval = [](const Node &n, const RefArgs &a, const Lists &) -> std::vector<RefTensor> {
    const RefTensor &A = *a[0];
    int64_t m = A.shape[A.shape.size() - 2], nn = A.shape.back();
    Shape batch = batchOf(A.shape);
    RefTensor out(n.types[0].dtype, n.types[0].shape);
    for (int64_t e = 0; e < linalg_ref::batchCount(A.shape); ++e) {
      Mat am = linalg_ref::matAt(A, e), P(nn, m);
      if (n.boolArg(3)) {
        std::vector<double> w;
        Mat V;
        linalg_ref::eigh(am, false, w, V);
        double smax = 0;
        for (double x : w) smax = std::max(smax, std::fabs(x));
        double tol = pinvTol(n, a, e, batch, smax, m, nn);
        for (int64_t i = 0; i < nn; ++i)
          for (int64_t j = 0; j < nn; ++j)
            for (int64_t k = 0; k < nn; ++k)
              if (std::fabs(w[(size_t)k]) > tol) P(i, j) += V(i, k) * V(j, k) / w[(size_t)k];
      } else {
        Mat U, Vh;
        std::vector<double> S;
        linalg_ref::svd(am, false, U, S, Vh);
        double tol = pinvTol(n, a, e, batch, S.empty() ? 0.0 : S[0], m, nn);
        for (int64_t i = 0; i < nn; ++i)
          for (int64_t j = 0; j < m; ++j)
            for (size_t k = 0; k < S.size(); ++k)
              if (S[k] > tol) P(i, j) += Vh((int64_t)k, i) * U(j, (int64_t)k) / S[k];
      }
      linalg_ref::setMat(out, e, P);
    }
    return {out};
  };
}

void registerBackwardHelpers(OpRegistry &r) {
  auto helper = [&](const char *schema) -> OpDef & { return r.add(schema, OpCategory::Composite); };
  {
    OpDef &d = helper("aotc::cholesky_backward(Tensor grad, Tensor L, bool upper) -> Tensor");
    d.infer = [](const Node &n) -> Types { return {argType(n, 1)}; };
    setGradEval(d, [](RefAlgebra &b, const Node &n, const RefArgs &a) -> std::vector<RefTensor> {
      return {linalg_grad::choleskyBackward(b, *a[0], *a[1], n.boolArg(2))};
    });
  }
  {
    OpDef &d = helper("aotc::solve_triangular_backward(Tensor grad, Tensor A, Tensor X, bool upper, bool left, bool "
                      "unitriangular) -> (Tensor, Tensor)");
    d.infer = [](const Node &n) -> Types {
      TensorType x = argType(n, 2);
      return {squareOver(x, argType(n, 1).shape.back()), x};
    };
    setGradEval(d, [](RefAlgebra &b, const Node &n, const RefArgs &a) -> std::vector<RefTensor> {
      auto [gA, gB] = linalg_grad::solveTriangularBackward(b, *a[0], *a[1], *a[2], n.boolArg(3), n.boolArg(4),
                                                           n.boolArg(5));
      return {gA, gB};
    });
  }
  {
    OpDef &d = helper("aotc::lu_solve_backward(Tensor grad, Tensor LU, Tensor pivots, Tensor X, bool left, bool "
                      "adjoint) -> (Tensor, Tensor)");
    d.indexArgs = {2};
    d.infer = [](const Node &n) -> Types {
      TensorType x = argType(n, 3);
      return {squareOver(x, argType(n, 1).shape.back()), x};
    };
    setGradEval(d, [](RefAlgebra &b, const Node &n, const RefArgs &a) -> std::vector<RefTensor> {
      auto [gLU, gB] = linalg_grad::luSolveBackward(b, *a[0], *a[1], *a[2], *a[3], n.boolArg(4), n.boolArg(5));
      return {gLU, gB};
    });
  }
  {
    // _linalg_solve_ex: LU factorizes A^T (as torch's), B may be a (batch of) vector(s).
    OpDef &d = helper("aotc::solve_backward(Tensor grad, Tensor X, Tensor LU, Tensor pivots, bool left) -> (Tensor, "
                      "Tensor)");
    d.indexArgs = {3};
    d.infer = [](const Node &n) -> Types {
      TensorType x = argType(n, 1), lu = argType(n, 2);
      Shape xs = x.shape;
      if (vectorRhs(lu.shape, xs)) xs.push_back(1);
      return {squareOver({x.dtype, xs}, lu.shape.back()), x};
    };
    setGradEval(d, [](RefAlgebra &b, const Node &n, const RefArgs &a) -> std::vector<RefTensor> {
      bool vec = vectorRhs(a[2]->shape, a[1]->shape), left = n.boolArg(4);
      RefTensor g = vec ? b.unsq(*a[0], -1) : *a[0], X = vec ? b.unsq(*a[1], -1) : *a[1];
      RefTensor gB = b.luSolve(*a[2], *a[3], g, left, false);
      RefTensor gA = linalg_grad::solveGradA(b, gB, X, left, false);
      gB.shape = a[1]->shape;
      return {gA, gB};
    });
  }
  {
    OpDef &d = helper("aotc::lu_factor_backward(Tensor grad, Tensor LU, Tensor pivots) -> Tensor");
    d.indexArgs = {2};
    d.infer = [](const Node &n) -> Types { return {argType(n, 1)}; };
    setGradEval(d, [](RefAlgebra &b, const Node &, const RefArgs &a) -> std::vector<RefTensor> {
      return {linalg_grad::luFactorBackward(b, *a[0], *a[1], *a[2])};
    });
  }
  {
    OpDef &d = helper("aotc::lu_scaled_inverse(Tensor s, Tensor LU, Tensor pivots, bool nudge_zero_pivots) -> Tensor");
    d.indexArgs = {2};
    d.infer = [](const Node &n) -> Types { return {argType(n, 1)}; };
    setGradEval(d, [](RefAlgebra &b, const Node &n, const RefArgs &a) -> std::vector<RefTensor> {
      return {linalg_grad::scaledInverse(b, *a[0], *a[1], *a[2], n.boolArg(3))};
    });
  }
  {
    OpDef &d = helper("aotc::eigh_backward(Tensor gL, Tensor gV, Tensor L, Tensor V, bool has_v) -> Tensor");
    d.infer = [](const Node &n) -> Types { return {argType(n, 3)}; };
    setGradEval(d, [](RefAlgebra &b, const Node &n, const RefArgs &a) -> std::vector<RefTensor> {
      return {linalg_grad::eighBackward(b, *a[0], *a[1], *a[2], *a[3], n.boolArg(4))};
    });
  }
  {
    OpDef &d = helper("aotc::svd_backward(Tensor gU, Tensor gS, Tensor gVh, Tensor U, Tensor S, Tensor Vh, bool has_uv, "
                      "bool full_matrices) -> Tensor");
    d.infer = [](const Node &n) -> Types {
      TensorType u = argType(n, 3), vh = argType(n, 5);
      return {{u.dtype, withTail(batchOf(u.shape), {u.shape[u.rank() - 2], vh.shape.back()})}};
    };
    setGradEval(d, [](RefAlgebra &b, const Node &n, const RefArgs &a) -> std::vector<RefTensor> {
      return {linalg_grad::svdBackward(b, *a[0], *a[1], *a[2], *a[3], *a[4], *a[5], n.boolArg(6), n.boolArg(7))};
    });
  }
  {
    OpDef &d = helper("aotc::cholesky_solve_backward(Tensor grad, Tensor input2, Tensor result, bool upper) -> (Tensor, "
                      "Tensor)");
    d.infer = [](const Node &n) -> Types {
      TensorType x = argType(n, 2);
      return {x, squareOver(x, argType(n, 1).shape.back())};
    };
    setGradEval(d, [](RefAlgebra &b, const Node &n, const RefArgs &a) -> std::vector<RefTensor> {
      auto [gB, gF] = linalg_grad::choleskySolveBackward(b, *a[0], *a[1], *a[2], n.boolArg(3));
      return {gB, gF};
    });
  }
  {
    OpDef &d = helper("aotc::cholesky_inverse_backward(Tensor grad, Tensor L, Tensor result, bool upper) -> Tensor");
    d.infer = [](const Node &n) -> Types { return {argType(n, 1)}; };
    setGradEval(d, [](RefAlgebra &b, const Node &n, const RefArgs &a) -> std::vector<RefTensor> {
      return {linalg_grad::choleskyInverseBackward(b, *a[0], *a[1], *a[2], n.boolArg(3))};
    });
  }
  {
    OpDef &d = helper("aotc::pinv_backward(Tensor grad, Tensor P, Tensor A) -> Tensor");
    d.infer = [](const Node &n) -> Types { return {argType(n, 2)}; };
    setGradEval(d, [](RefAlgebra &b, const Node &, const RefArgs &a) -> std::vector<RefTensor> {
      return {linalg_grad::pinvBackward(b, *a[0], *a[1], *a[2])};
    });
  }
  {
    OpDef &d = helper("aotc::qr_backward(Tensor gQ, Tensor gR, Tensor Q, Tensor R, Tensor A) -> Tensor");
    d.infer = [](const Node &n) -> Types {
      TensorType q = argType(n, 2), r = argType(n, 3);
      if (q.rank() < 2)
        nodeError(n, "linalg_qr_backward: The derivative of linalg.qr depends on Q, which is not computed when "
                     "mode='r'. Please use linalg.qr(A, mode='reduced') if you are going to differentiate through "
                     "linalg.qr.");
      int64_t m = q.shape[q.rank() - 2], k = q.shape.back(), nn = r.shape.back();
      if (k > std::min(m, nn))
        nodeError(n, "linalg_qr_backward: The QR decomposition is not differentiable when mode='complete' and nrows > "
                     "ncols.");
      return {argType(n, 4)};
    };
    setGradEval(d, [](RefAlgebra &b, const Node &, const RefArgs &a) -> std::vector<RefTensor> {
      return {linalg_grad::qrBackward(b, *a[0], *a[1], *a[2], *a[3], *a[4])};
    });
  }
}

} // namespace

void registerLinalgOps(OpRegistry &r) {
  registerPrimitives(r);
  registerFactorizations(r);
  registerSolves(r);
  registerPinv(r);
  registerBackwardHelpers(r);
}

} // namespace ops

bool checkLinalgErrors(Node *info) {
  Node *op = info && info->target == "getitem" ? info->tensorArg(0) : nullptr;
  // info is the last result of each op that has check_errors.
  if (!op || !op->op || info->intArg(1) != (int64_t)op->types.size() - 1) return false;
  const auto &sargs = op->op->schema.args;
  for (size_t i = 0; i < sargs.size() && i < op->args.size(); ++i)
    if (sargs[i].name == "check_errors") {
      op->args[i] = true;
      return true;
    }
  return false;
}

} // namespace aotc
