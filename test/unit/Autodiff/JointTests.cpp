//===- JointTests.cpp - buildJoint: contract, accumulation, sum_to, pruning ---===//
#include "AutodiffTestUtil.h"

#include <catch2/catch.hpp>

#include <cmath>

using namespace aotc;
using namespace aotc::test;

static const DerivativeRules &rules() { return DerivativeRules::builtin(); }

static RefTensor tensor(DType dt, Shape s, std::vector<double> v) {
  RefTensor t(dt, std::move(s));
  REQUIRE(t.data.size() == v.size());
  t.data = std::move(v);
  return t;
}

TEST_CASE("joint graph follows the stage contract", "[joint]") {
  // loss = sum(relu(mm(x, w))) with an integer side output (argmax) that gets no tangent.
  ProgramBuilder b;
  Node *x = b.input("x", f32({4, 3}), false);
  Node *w = b.input("w", f32({3, 2}));
  w->role = InputRole::Parameter;
  w->fqn = "fc.weight";
  Node *mm = b.call("aten.mm.default", {x, w});
  Node *r = b.call("aten.relu.default", {mm});
  Node *loss = b.call("aten.sum.default", {r});
  Node *am = b.call("aten.argmax.default", {mm, int64_t(1)});
  Program p = b.done({loss, am, r});
  buildJoint(p, rules());

  CHECK(p.stage == "joint");
  CHECK(p.numForwardOutputs == 3);
  REQUIRE(p.gradOf == std::vector<std::string>{"w"});
  auto phs = p.forward.placeholders();
  REQUIRE(phs.size() == 4);
  CHECK(phs[0]->name == "x");
  CHECK(phs[1]->name == "w");
  CHECK(phs[1]->role == InputRole::Parameter);
  CHECK(phs[1]->fqn == "fc.weight");
  CHECK(phs[2]->name == "tangents_1");
  CHECK(phs[2]->role == InputRole::Tangent);
  CHECK(phs[2]->type() == f32({}));
  CHECK(phs[3]->name == "tangents_2"); // for r (argmax is integral: no tangent)
  CHECK(phs[3]->type() == f32({4, 2}));
  auto outs = p.forward.outputs();
  REQUIRE(outs.size() == 4);
  CHECK(outs[0] == loss);
  CHECK(outs[1] == am);
  CHECK(outs[2] == r);
  CHECK(outs[3]->type() == w->type());
  // Only one backward matmul (for w): x does not require grad.
  CHECK(countTarget(p.forward, "aten.mm.default") == 2);
  p.forward.verify();
}

TEST_CASE("a value used twice accumulates its gradient", "[joint]") {
  // y = x*x + exp(x): dy/dx = 2x + exp(x).
  ProgramBuilder b;
  Node *x = b.input("x", f64({3}));
  Node *sq = b.call("aten.mul.Tensor", {x, x});
  Node *e = b.call("aten.exp.default", {x});
  Program p = b.done({b.call("aten.add.Tensor", {sq, e})});
  Program q;
  q.forward = p.forward.clone();
  buildJoint(q, rules());
  RefTensor xv = tensor(DType::F64, {3}, {0.5, -1.0, 2.0});
  RefTensor t = tensor(DType::F64, {3}, {1.0, 2.0, -0.5});
  auto r = evaluate(q.forward, {xv, t});
  REQUIRE(r.size() == 2);
  for (int i = 0; i < 3; ++i) {
    double x0 = xv.data[i];
    CHECK(r[1].data[i] == Approx(t.data[i] * (2 * x0 + std::exp(x0))).epsilon(1e-12));
  }
  // Three contributions reach x (two from mul, one from exp): two adds combine them.
  int adds = countTarget(q.forward, "aten.add.Tensor") - 1; // minus the forward add
  CHECK(adds == 2);
  GradcheckResult g = gradcheck(p, rules());
  INFO(g.message);
  CHECK(g.ok);
}

TEST_CASE("broadcast inputs get sum_to", "[joint]") {
  // z = x[3,4] + y[4]: grad_y = column sums of the cotangent, via sum.dim_IntList + view.
  ProgramBuilder b;
  Node *x = b.input("x", f64({3, 4}));
  Node *y = b.input("y", f64({4}));
  Program p = b.done({b.call("aten.add.Tensor", {x, y})});
  Program q;
  q.forward = p.forward.clone();
  buildJoint(q, rules());
  bool found = false;
  for (auto &n : q.forward.nodes())
    if (n->target == "aten.sum.dim_IntList") {
      found = true;
      CHECK(n->intListArg(1) == std::vector<int64_t>{0});
    }
  CHECK(found);
  std::mt19937_64 rng(3);
  RefTensor xv = randomTensor(f64({3, 4}), rng), yv = randomTensor(f64({4}), rng);
  RefTensor t = randomTensor(f64({3, 4}), rng);
  auto r = evaluate(q.forward, {xv, yv, t});
  REQUIRE(r.size() == 3);
  CHECK(r[1].data == t.data);          // grad_x = t
  REQUIRE(r[2].shape == Shape{4});     // grad_y = sum over rows
  for (int j = 0; j < 4; ++j) {
    double s = 0;
    for (int i = 0; i < 3; ++i) s += t.data[i * 4 + j];
    CHECK(r[2].data[j] == Approx(s).epsilon(1e-12));
  }
}

TEST_CASE("an input without requires_grad gets no gradient nodes", "[joint]") {
  // z = mul(x, y) with y frozen: only grad_x = t * y is built.
  ProgramBuilder b;
  Node *x = b.input("x", f64({2, 3}));
  Node *y = b.input("y", f64({2, 3}), false);
  Program p = b.done({b.call("aten.mul.Tensor", {x, y})});
  buildJoint(p, rules());
  CHECK(p.gradOf == std::vector<std::string>{"x"});
  REQUIRE(p.forward.outputs().size() == 2);
  // Backward: exactly one mul (tangent * y); nothing reads x in the backward.
  CHECK(countTarget(p.forward, "aten.mul.Tensor") == 2);
  Node *gx = p.forward.outputs()[1];
  CHECK(gx->target == "aten.mul.Tensor");
  CHECK(gx->tensorArg(0)->name == "tangents_1");
  CHECK(gx->tensorArg(1)->name == "y");
  auto users = p.forward.users();
  CHECK(users[p.forward.find("x")].size() == 1); // only the forward mul
}

TEST_CASE("nodes off the path to a requires-grad input get no gradient", "[joint]") {
  // a = exp(c) with c frozen feeds z = a * x: exp needs no backward.
  ProgramBuilder b;
  Node *x = b.input("x", f64({3}));
  Node *c = b.input("c", f64({3}), false);
  Node *a = b.call("aten.exp.default", {c});
  Program p = b.done({b.call("aten.mul.Tensor", {a, x})});
  buildJoint(p, rules());
  CHECK(countTarget(p.forward, "aten.exp.default") == 1);
  CHECK(countTarget(p.forward, "aten.mul.Tensor") == 2);
}

TEST_CASE("an input that does not reach an output gets a zero gradient", "[joint]") {
  ProgramBuilder b;
  Node *x = b.input("x", f64({3}));
  Node *u = b.input("unused", f32({2, 2}));
  (void)u;
  Program p = b.done({b.call("aten.exp.default", {x})});
  buildJoint(p, rules());
  REQUIRE(p.gradOf == std::vector<std::string>{"x", "unused"});
  Node *g = p.forward.outputs()[2];
  CHECK(g->target == "aten.full.default");
  CHECK(g->type() == f32({2, 2}));
  auto r = evaluate(p.forward, {RefTensor(DType::F64, {3}, 1.0), RefTensor(DType::F32, {2, 2}, 5.0),
                                RefTensor(DType::F64, {3}, 1.0)});
  CHECK(r[2].data == std::vector<double>(4, 0.0));
}

TEST_CASE("non-differentiable ops and integral values stop gradients", "[joint]") {
  // y = where(x > 0, x, 0) * sum(x > 0): the comparison and the integer sum get no gradient.
  ProgramBuilder b;
  Node *x = b.input("x", f64({4}));
  Node *pos = b.call("aten.gt.Scalar", {x, 0.0});
  Node *zero = b.call("aten.full.default", {std::vector<int64_t>{}, 0.0}, {{"dtype", DTypeLit{DType::F64}}});
  Node *w = b.call("aten.where.self", {pos, x, zero});
  Node *cnt = b.call("aten.sum.default", {pos});
  Program p = b.done({b.call("aten.mul.Tensor", {w, cnt})});
  GradcheckOptions o;
  o.inputs = {tensor(DType::F64, {4}, {0.5, -0.7, 1.2, -0.2})};
  GradcheckResult g = gradcheck(p, rules(), o);
  INFO(g.message);
  CHECK(g.ok);
  buildJoint(p, rules());
  CHECK(countTarget(p.forward, "aten.sum.default") == 1); // no backward for the integer sum
}

TEST_CASE("amax splits the gradient evenly among ties", "[joint]") {
  ProgramBuilder b;
  Node *x = b.input("x", f64({2, 3}));
  Program p = b.done({b.call("aten.amax.default", {x, std::vector<int64_t>{-1}})});
  buildJoint(p, rules());
  auto r = evaluate(p.forward, {tensor(DType::F64, {2, 3}, {1, 3, 3, 2, 2, 2}), tensor(DType::F64, {2}, {1, 6})});
  CHECK(r[1].data == std::vector<double>{0, 0.5, 0.5, 2, 2, 2});
}

TEST_CASE("multi-result ops: gradients flow through getitem, mean and rstd included", "[joint]") {
  // out0 used twice (accumulates), rstd used too (group norm passes rstd's gradient, as eager).
  ProgramBuilder b;
  Node *x = b.input("x", f64({2, 4}));
  Node *gn = b.call("aten.native_group_norm.default",
                    {x, std::monostate{}, std::monostate{}, int64_t(2), int64_t(4), int64_t(1), int64_t(2), 1e-5});
  Node *o = b.call("getitem", {gn, int64_t(0)});
  Node *rs = b.call("getitem", {gn, int64_t(2)});
  Node *sq = b.call("aten.mul.Tensor", {o, o});
  Program p = b.done({b.call("aten.mul.Tensor", {b.call("aten.sum.default", {sq}), b.call("aten.sum.default", {rs})})});
  GradcheckResult g = gradcheck(p, rules());
  INFO(g.message);
  CHECK(g.ok);
}

TEST_CASE("native_layer_norm ignores the gradients of mean and rstd, as eager", "[joint]") {
  // Eager's rule reads only grads[0]: x's gradient is the same whatever flows into mean / rstd.
  auto gradOfX = [](bool useStats) {
    ProgramBuilder b;
    Node *x = b.input("x", f64({2, 5}));
    Node *ln = b.call("aten.native_layer_norm.default",
                      {x, std::vector<int64_t>{5}, std::monostate{}, std::monostate{}, 1e-5});
    Node *o = b.call("aten.sum.default", {b.call("aten.mul.Tensor", {b.call("getitem", {ln, int64_t(0)}), x})});
    if (useStats)
      o = b.call("aten.add.Tensor", {o, b.call("aten.sum.default", {b.call("getitem", {ln, int64_t(2)})})});
    Program p = b.done({o});
    buildJoint(p, rules());
    std::vector<double> xs = {0.3, -1.2, 2.0, 0.7, -0.1, 1.5, 1.1, -0.4, 0.0, 0.9};
    return evaluate(p.forward, {tensor(DType::F64, {2, 5}, xs), tensor(DType::F64, {}, {1.0})})[1].data;
  };
  std::vector<double> plain = gradOfX(false), withStats = gradOfX(true);
  REQUIRE(plain.size() == 10);
  CHECK(plain == withStats);
  CHECK(plain != std::vector<double>(10, 0.0)); // control: the gradient is not trivially zero
}

TEST_CASE("a missing rule on a needed path is an error naming op and node", "[joint][errors]") {
  ProgramBuilder b;
  Node *x = b.input("x", f64({3}));
  Program p = b.done({b.call("aten.exp.default", {x})});
  DerivativeRules only;
  only.loadString("- name: aten.mul.Tensor\n  self: mul(grad, other)\n  other: mul(grad, self)\n", "mini.yaml");
  try {
    buildJoint(p, only);
    FAIL("expected an error");
  } catch (const Error &e) {
    CHECK(e.kind() == Error::Kind::User);
    std::string m = e.what();
    CHECK_THAT(m, Catch::Contains("no derivative rule for aten.exp.default"));
    CHECK_THAT(m, Catch::Contains("node 'exp'"));
  }
  // Off the path: no error (exp of a frozen input).
  ProgramBuilder b2;
  Node *c = b2.input("c", f64({3}), false);
  Node *y = b2.input("y", f64({3}));
  Program p2 = b2.done({b2.call("aten.mul.Tensor", {b2.call("aten.exp.default", {c}), y})});
  CHECK_NOTHROW(buildJoint(p2, only));
}

TEST_CASE("the built-in rules reject composites that decompose must remove", "[joint][errors]") {
  ProgramBuilder b;
  Node *x = b.input("x", f32({4, 3}));
  Node *w = b.input("w", f32({2, 3}));
  Program p = b.done({b.call("aten.linear.default", {x, w})});
  CHECK_THROWS_WITH(buildJoint(p, rules()), Catch::Contains("no derivative rule for aten.linear.default"));
}

TEST_CASE("a requires-grad integer input is an error", "[joint][errors]") {
  ProgramBuilder b;
  Node *i = b.input("i", i64({3}));
  i->requiresGrad = true;
  Program p = b.done({i});
  CHECK_THROWS_WITH(buildJoint(p, rules()), Catch::Contains("only floating-point inputs can require gradients"));
}

TEST_CASE("buildJoint runs once", "[joint][errors]") {
  ProgramBuilder b;
  Node *x = b.input("x", f64({3}));
  Program p = b.done({b.call("aten.exp.default", {x})});
  buildJoint(p, rules());
  CHECK_THROWS_WITH(buildJoint(p, rules()), Catch::Contains("already at stage 'joint'"));
}
