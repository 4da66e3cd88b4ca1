//===- GradcheckLinalg.cpp - Gradcheck cases of the linalg ops' rules -------------===//
//
// The inputs are kept well-conditioned inside each graph: a matrix is x + 3 I (x in [-1, 1]:
// diagonally dominant, so nonsingular with pivots far from ties), a symmetric positive-definite
// one x x^T + 3 I, a symmetric one x + x^T (eigh reads one triangle: its gradient is that of
// the symmetric input, as torch's gradcheck_wrapper_hermitian_input checks it). Square, tall and
// wide matrices, batches that broadcast, upper / lower, left / right.
//===----------------------------------------------------------------------===//
#include "AutodiffTestUtil.h"
#include "GradcheckCase.h"

namespace aotc::test {
namespace {

using B = ProgramBuilder;

Node *eye(B &b, int64_t n) {
  Node *i = b.call("aten.arange.start_step", {int64_t(0), n, int64_t(1)}, {{"dtype", DTypeLit{DType::I64}}});
  Node *r = b.call("aten.view.default", {i, Shape{n, 1}});
  Node *e = b.call("aten.eq.Tensor", {r, i});
  return b.call("aten._to_copy.default", {e}, {{"dtype", DTypeLit{DType::F64}}});
}
Node *mT(B &b, Node *x) { return b.call("aten.transpose.int", {x, int64_t(-2), int64_t(-1)}); }
/// x + 3 I.
Node *wellConditioned(B &b, Node *x) {
  int64_t n = x->type().shape.back();
  return b.call("aten.add.Tensor", {x, b.call("aten.mul.Tensor", {eye(b, n), 3.0})});
}
/// x x^T + 3 I (batched through bmm when x has a batch dim).
Node *spd(B &b, Node *x) {
  const Shape &s = x->type().shape;
  Node *g = s.size() == 2 ? b.call("aten.mm.default", {x, mT(b, x)}) : b.call("aten.bmm.default", {x, mT(b, x)});
  return wellConditioned(b, g);
}
Node *sym(B &b, Node *x) { return b.call("aten.add.Tensor", {x, mT(b, x)}); }
Node *item(B &b, Node *t, int64_t i) { return b.call("getitem", {t, i}); }

Case make(const std::string &target, const std::string &label, std::function<Program()> build) {
  Case c;
  c.target = target;
  c.label = target + " " + label;
  c.build = std::move(build);
  return c;
}

} // namespace

std::vector<Case> linalgCases() {
  std::vector<Case> v;
  for (bool upper : {false, true})
    for (Shape s : {Shape{3, 3}, Shape{2, 4, 4}})
      v.push_back(make("aten.linalg_cholesky_ex.default", shapeStr(s) + (upper ? " upper" : ""), [=] {
        B b;
        Node *c = b.call("aten.linalg_cholesky_ex.default", {spd(b, b.input("x", f64(s)))}, {{"upper", upper}});
        return b.done({item(b, c, 0)});
      }));
  struct Tri {
    Shape a, rhs;
    bool upper, left, unit;
  };
  for (const Tri &t : std::vector<Tri>{{{3, 3}, {3, 2}, false, true, false},
                                       {{2, 3, 3}, {3, 4}, true, true, false},
                                       {{4, 4}, {2, 4}, true, false, false},
                                       {{3, 3}, {2, 3, 2}, false, true, true}}) {
    v.push_back(make("aten.linalg_solve_triangular.default",
                     shapeStr(t.a) + " " + shapeStr(t.rhs) + (t.upper ? " upper" : "") + (t.left ? "" : " right") +
                         (t.unit ? " unit" : ""),
                     [=] {
                       B b;
                       Node *A = wellConditioned(b, b.input("a", f64(t.a))), *R = b.input("b", f64(t.rhs));
                       return b.done({b.call("aten.linalg_solve_triangular.default", {A, R},
                                             {{"upper", t.upper}, {"left", t.left}, {"unitriangular", t.unit}})});
                     }));
  }
  for (Shape s : {Shape{3, 3}, Shape{2, 4, 3}, Shape{3, 5}})
    v.push_back(make("aten.linalg_lu_factor_ex.default", shapeStr(s), [=] {
      B b;
      Node *x = b.input("x", f64(s));
      Node *A = s[s.size() - 1] == s[s.size() - 2] ? wellConditioned(b, x) : x;
      return b.done({item(b, b.call("aten.linalg_lu_factor_ex.default", {A}), 0)});
    }));
  for (bool left : {true, false})
    for (bool adjoint : {false, true})
      v.push_back(make("aten.linalg_lu_solve.default", std::string(left ? "left" : "right") + (adjoint ? " adjoint" : ""),
                       [=] {
                         B b;
                         Node *A = wellConditioned(b, b.input("a", f64({2, 3, 3})));
                         Node *R = b.input("b", f64(left ? Shape{3, 2} : Shape{2, 3}));
                         Node *f = b.call("aten.linalg_lu_factor_ex.default", {A});
                         return b.done({b.call("aten.linalg_lu_solve.default", {item(b, f, 0), item(b, f, 1), R},
                                               {{"left", left}, {"adjoint", adjoint}})});
                       }));
  struct Solve {
    Shape a, rhs;
    bool left;
  };
  for (const Solve &t : std::vector<Solve>{{{3, 3}, {3, 2}, true}, {{2, 3, 3}, {2, 3}, true}, {{3, 3}, {4, 3}, false}})
    v.push_back(make("aten._linalg_solve_ex.default", shapeStr(t.a) + " " + shapeStr(t.rhs) + (t.left ? "" : " right"),
                     [=] {
                       B b;
                       Node *A = wellConditioned(b, b.input("a", f64(t.a))), *R = b.input("b", f64(t.rhs));
                       Node *s = b.call("aten._linalg_solve_ex.default", {A, R}, {{"left", t.left}});
                       return b.done({item(b, s, 0)});
                     }));
  for (Shape s : {Shape{3, 3}, Shape{2, 4, 4}}) {
    v.push_back(make("aten._linalg_det.default", shapeStr(s), [=] {
      B b;
      Node *d = b.call("aten._linalg_det.default", {wellConditioned(b, b.input("x", f64(s)))});
      return b.done({item(b, d, 0)});
    }));
    v.push_back(make("aten._linalg_slogdet.default", shapeStr(s), [=] {
      B b;
      // A negative determinant too: the sign is piecewise constant, logabsdet smooth.
      Node *A = b.call("aten.neg.default", {wellConditioned(b, b.input("x", f64(s)))});
      Node *d = b.call("aten._linalg_slogdet.default", {A});
      return b.done({item(b, d, 1)});
    }));
  }
  for (const char *uplo : {"L", "U"})
    for (bool vecs : {true, false})
      v.push_back(make("aten._linalg_eigh.default", std::string(uplo) + (vecs ? "" : " values only"), [=] {
        B b;
        Node *e = b.call("aten._linalg_eigh.default", {sym(b, b.input("x", f64({2, 4, 4}))), std::string(uplo), vecs});
        return vecs ? b.done({item(b, e, 0), item(b, e, 1)}) : b.done({item(b, e, 0)});
      }));
  struct Svd {
    Shape s;
    bool full, uv;
  };
  for (const Svd &t : std::vector<Svd>{{{4, 3}, false, true},
                                       {{3, 5}, false, true},
                                       {{2, 3, 3}, false, true},
                                       {{4, 3}, true, true},
                                       {{3, 4}, false, false}})
    v.push_back(make("aten._linalg_svd.default",
                     shapeStr(t.s) + (t.full ? " full" : "") + (t.uv ? "" : " values only"), [=] {
                       B b;
                       Node *r = b.call("aten._linalg_svd.default", {b.input("x", f64(t.s)), t.full, t.uv});
                       // Sign-invariant uses of the vectors when full (their extra columns are
                       // not unique): U S Vh.
                       if (!t.uv) return b.done({item(b, r, 1)});
                       if (t.full) {
                         Node *us = b.call("aten.mul.Tensor",
                                           {b.call("aten.slice.Tensor", {item(b, r, 0), int64_t(-1), int64_t(0), int64_t(3)}),
                                            item(b, r, 1)});
                         Node *vh = b.call("aten.slice.Tensor", {item(b, r, 2), int64_t(-2), int64_t(0), int64_t(3)});
                         return b.done({b.call("aten.mm.default", {us, vh})});
                       }
                       return b.done({item(b, r, 0), item(b, r, 1), item(b, r, 2)});
                     }));
  for (auto [s, mode] : std::vector<std::pair<Shape, std::string>>{
           {{4, 3}, "reduced"}, {{2, 3, 3}, "complete"}, {{3, 5}, "reduced"}})
    v.push_back(make("aten.linalg_qr.default", shapeStr(s) + " " + mode, [=] {
      B b;
      Node *q = b.call("aten.linalg_qr.default", {b.input("x", f64(s)), mode});
      return b.done({item(b, q, 0), item(b, q, 1)});
    }));
  // cholesky_solve / cholesky_inverse differentiate the whole factor (torch's convention) while
  // reading one triangle: the factor is made triangular in the graph (tril / triu + 3 I), so
  // central differences see the same function.
  for (bool upper : {false, true}) {
    v.push_back(make("aten.cholesky_solve.default", std::string(upper ? "upper" : "lower"), [=] {
      B b;
      Node *x = b.input("x", f64({2, 3, 3})), *rhs = b.input("b", f64({3, 2}));
      Node *F = wellConditioned(b, b.call(upper ? "aten.triu.default" : "aten.tril.default", {x}));
      return b.done({b.call("aten.cholesky_solve.default", {rhs, F, upper})});
    }));
    v.push_back(make("aten.cholesky_inverse.default", std::string(upper ? "upper" : "lower"), [=] {
      B b;
      Node *x = b.input("x", f64({3, 3}));
      Node *F = wellConditioned(b, b.call(upper ? "aten.triu.default" : "aten.tril.default", {x}));
      return b.done({b.call("aten.cholesky_inverse.default", {F, upper})});
    }));
  }
  for (auto [s, herm] : std::vector<std::pair<Shape, bool>>{{{3, 4}, false}, {{2, 4, 3}, false}, {{3, 3}, true}})
    v.push_back(make("aten.linalg_pinv.atol_rtol_tensor", shapeStr(s) + (herm ? " hermitian" : ""), [=] {
      B b;
      Node *x = b.input("x", f64(s));
      Node *A = herm ? spd(b, x) : x;
      std::vector<std::pair<std::string, Arg>> kw = {{"hermitian", herm}};
      if (herm) kw.push_back({"atol", b.call("aten.scalar_tensor.default", {1e-3}, {{"dtype", DTypeLit{DType::F64}}})});
      return b.done({b.call("aten.linalg_pinv.atol_rtol_tensor", {A}, kw)});
    }));
  return v;
}

} // namespace aotc::test
