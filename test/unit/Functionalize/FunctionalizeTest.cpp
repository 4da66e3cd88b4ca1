//===- FunctionalizeTest.cpp - functionalize(): mutation semantics ----------===//
//
// Each case builds a graph with in-place ops, functionalizes it, and checks the
// outputs against values computed by hand from the inputs (loops below, not the
// pass's own rewriting), plus the structure: no mutating op left, mutated
// inputs as `mutated_<name>` outputs.
//===----------------------------------------------------------------------===//
#include "../Decompose/PassTestUtil.h"

#include "aotc/Stages.h"

using namespace aotc;
using namespace aotc::testutil;

namespace {

void expectFunctional(const Graph &g) {
  for (auto &n : g.nodes())
    if (n->isCall() && n->op) {
      INFO(n->name << " = " << n->target);
      CHECK_FALSE(n->op->schema.mutates);
    }
}

/// Functionalizes `p` and returns its outputs on `in`.
std::vector<RefTensor> run(Program &p, const std::vector<RefTensor> &in) {
  functionalize(p);
  p.forward.verify();
  expectFunctional(p.forward);
  CHECK(p.stage == "functionalize");
  return evaluate(p.forward, in);
}

RefTensor like(const RefTensor &t) { return RefTensor(t.dtype, t.shape); }

} // namespace

TEST_CASE("functionalize: in-place on an intermediate that is read later", "[functionalize]") {
  Program p;
  Graph &g = p.forward;
  Node *x = input(g, "x", f32({3, 4}));
  Node *a = op(g, "aten.mul.Tensor", {x, 2.0});
  Node *b = op(g, "aten.add_.Tensor", {a, 1.0});
  Node *c = op(g, "aten.mul.Tensor", {a, 3.0}); // reads a after the mutation
  Node *d = op(g, "aten.relu_.default", {b});   // mutates a again, through b
  Node *e = op(g, "aten.sum.default", {a});
  g.setOutputs({c, d, e});
  auto in = randomInputs(g, 1);
  auto out = run(p, in);
  RefTensor wc = like(in[0]), wd = like(in[0]);
  double we = 0;
  for (int64_t k = 0; k < in[0].numel(); ++k) {
    double v = 2 * in[0].data[k] + 1;
    wc.data[k] = 3 * v;
    wd.data[k] = std::max(v, 0.0);
    we += wd.data[k];
  }
  RefTensor wes(DType::F32, {});
  wes.data = {we};
  expectClose(out, {wc, wd, wes});
  CHECK(p.mutatedInputs.empty());
  CHECK(countTarget(p.forward, "aten.add.Tensor") == 1);
  CHECK(countTarget(p.forward, "aten.relu.default") == 1);
}

TEST_CASE("functionalize: in-place on an input becomes a mutated_<name> output", "[functionalize]") {
  Program p;
  Graph &g = p.forward;
  Node *x = input(g, "x", f32({2, 3})), *y = input(g, "y", f32({3}));
  Node *before = op(g, "aten.mul.Tensor", {x, x}); // reads the original x
  op(g, "aten.add_.Tensor", {x, y});
  Node *after = op(g, "aten.mul.Tensor", {x, 2.0}); // sees the new x
  g.setOutputs({before, after});
  auto in = randomInputs(g, 2);
  auto out = run(p, in);
  RefTensor wb = like(in[0]), wa = like(in[0]), wm = like(in[0]);
  for (int64_t k = 0; k < 6; ++k) {
    double x0 = in[0].data[k], nx = x0 + in[1].data[k % 3];
    wb.data[k] = x0 * x0;
    wa.data[k] = 2 * nx;
    wm.data[k] = nx;
  }
  expectClose(out, {wb, wa, wm});
  REQUIRE(p.mutatedInputs.size() == 1);
  CHECK(p.mutatedInputs[0] == std::pair<int, std::string>{2, "x"});
  CHECK(p.forward.outputs().at(2)->name == "mutated_x");
  // The placeholder keeps its role and requires_grad: the gradient is w.r.t. the original value.
  CHECK(p.forward.placeholders().at(0)->name == "x");
  CHECK(p.forward.placeholders().at(0)->requiresGrad);
}

TEST_CASE("functionalize: mutation through a slice, then a read of the base", "[functionalize]") {
  Program p;
  Graph &g = p.forward;
  Node *x = input(g, "x", f32({4, 6}));
  Node *a = op(g, "aten.mul.Tensor", {x, 1.5});
  Node *s = op(g, "aten.slice.Tensor", {a, int64_t(1), int64_t(1), int64_t(6), int64_t(2)}); // cols 1,3,5
  op(g, "aten.mul_.Tensor", {s, 10.0});
  Node *r = op(g, "aten.add.Tensor", {a, 0.0});
  g.setOutputs({r, s});
  auto in = randomInputs(g, 3);
  auto out = run(p, in);
  RefTensor wr = like(in[0]), ws(DType::F32, {4, 3});
  for (int64_t i = 0; i < 4; ++i)
    for (int64_t j = 0; j < 6; ++j) {
      double v = 1.5 * in[0].data[i * 6 + j] * (j % 2 == 1 ? 10 : 1);
      wr.data[i * 6 + j] = v;
      if (j % 2 == 1) ws.data[i * 3 + j / 2] = v;
    }
  expectClose(out, {wr, ws});
  CHECK(countTarget(p.forward, "aten.slice_scatter.default") == 1);
}

TEST_CASE("functionalize: fill_ through select of a slice of an input", "[functionalize]") {
  Program p;
  Graph &g = p.forward;
  Node *x = input(g, "x", f32({3, 4}));
  Node *s = op(g, "aten.slice.Tensor", {x, int64_t(0), int64_t(1)}); // rows 1..2
  Node *r = op(g, "aten.select.int", {s, int64_t(1), int64_t(-1)}); // last column
  op(g, "aten.fill_.Scalar", {r, 5.0});
  Node *sum = op(g, "aten.sum.dim_IntList", {x, std::vector<int64_t>{1}});
  g.setOutputs({sum});
  auto in = randomInputs(g, 4);
  auto out = run(p, in);
  RefTensor nx = in[0], ws(DType::F32, {3});
  for (int64_t i = 1; i < 3; ++i) nx.data[i * 4 + 3] = 5.0;
  for (int64_t i = 0; i < 3; ++i)
    for (int64_t j = 0; j < 4; ++j) ws.data[i] += nx.data[i * 4 + j];
  expectClose(out, {ws, nx});
  CHECK(p.mutatedInputs.size() == 1);
  CHECK(countTarget(p.forward, "aten.select_scatter.default") == 1);
  CHECK(countTarget(p.forward, "aten.slice_scatter.default") == 1);
}

TEST_CASE("functionalize: mutation through view, unsqueeze and permute", "[functionalize]") {
  Program p;
  Graph &g = p.forward;
  Node *x = input(g, "x", f32({2, 3})), *y = input(g, "y", f32({1, 2, 3}));
  Node *a = op(g, "aten.clone.default", {x});
  Node *v = op(g, "aten.view.default", {a, std::vector<int64_t>{3, 2}});
  Node *u = op(g, "aten.unsqueeze.default", {v, int64_t(0)});
  Node *pm = op(g, "aten.permute.default", {u, std::vector<int64_t>{0, 2, 1}}); // [1, 2, 3]
  op(g, "aten.add_.Tensor", {pm, y});
  Node *t = op(g, "aten.t.default", {a});
  op(g, "aten.mul_.Tensor", {t, 2.0}); // a second write through another view
  g.setOutputs({a, v});
  auto in = randomInputs(g, 5);
  auto out = run(p, in);
  // pm[0][j][i] = v[i][j] = a_flat[2i + j].
  RefTensor wa = in[0];
  for (int64_t i = 0; i < 3; ++i)
    for (int64_t j = 0; j < 2; ++j) wa.data[2 * i + j] += in[1].data[j * 3 + i];
  for (double &d : wa.data) d *= 2;
  RefTensor wv = wa;
  wv.shape = {3, 2};
  expectClose(out, {wa, wv});
  CHECK(countTarget(p.forward, "aten.slice_scatter.default") == 0);
}

TEST_CASE("functionalize: a view read after its base was mutated is regenerated", "[functionalize]") {
  Program p;
  Graph &g = p.forward;
  Node *x = input(g, "x", f32({2, 3}));
  Node *a = op(g, "aten.exp.default", {x});
  Node *v = op(g, "aten.select.int", {a, int64_t(0), int64_t(1)});
  Node *early = op(g, "aten.mul.Tensor", {v, 1.0});
  op(g, "aten.sub_.Tensor", {a, 1.0});
  Node *late = op(g, "aten.mul.Tensor", {v, 1.0});
  g.setOutputs({early, late});
  auto in = randomInputs(g, 6);
  auto out = run(p, in);
  RefTensor we(DType::F32, {3}), wl(DType::F32, {3});
  for (int64_t j = 0; j < 3; ++j) {
    we.data[j] = std::exp(in[0].data[3 + j]);
    wl.data[j] = we.data[j] - 1;
  }
  expectClose(out, {we, wl});
}

TEST_CASE("functionalize: copy_ into an input (broadcast and cast), zero_", "[functionalize]") {
  Program p;
  Graph &g = p.forward;
  Node *x = input(g, "x", f32({2, 3})), *y = input(g, "y", i64({3}));
  Node *z = input(g, "z", f32({2}));
  op(g, "aten.copy_.default", {x, y});
  Node *sq = op(g, "aten.mul.Tensor", {x, x});
  op(g, "aten.zero_.default", {z});
  g.setOutputs({sq});
  auto in = randomInputs(g, 7, {{"y", {-3, 4}}});
  auto out = run(p, in);
  RefTensor wsq = like(in[0]), wx = like(in[0]), wz(DType::F32, {2});
  for (int64_t k = 0; k < 6; ++k) {
    wx.data[k] = in[1].data[k % 3];
    wsq.data[k] = wx.data[k] * wx.data[k];
  }
  expectClose(out, {wsq, wx, wz});
  REQUIRE(p.mutatedInputs.size() == 2);
  CHECK(p.mutatedInputs[0].second == "x");
  CHECK(p.mutatedInputs[1].second == "z");
  CHECK(p.forward.find("mutated_x") != nullptr);
  CHECK(p.forward.find("mutated_z") != nullptr);
}

TEST_CASE("functionalize: a graph without mutation is unchanged", "[functionalize]") {
  Program p;
  Graph &g = p.forward;
  Node *x = input(g, "x", f32({2, 3}));
  Node *v = op(g, "aten.view.default", {x, std::vector<int64_t>{3, 2}});
  Node *r = op(g, "aten.relu.default", {v});
  g.setOutputs({r});
  std::vector<std::string> before;
  for (auto &n : g.nodes()) before.push_back(n->name + "=" + n->target);
  functionalize(p);
  std::vector<std::string> after;
  for (auto &n : p.forward.nodes()) after.push_back(n->name + "=" + n->target);
  CHECK(before == after);
  CHECK(p.mutatedInputs.empty());
}

TEST_CASE("functionalize: unsupported mutations are located user errors", "[functionalize]") {
  SECTION("write through expand") {
    Program p;
    Graph &g = p.forward;
    Node *x = input(g, "x", f32({1, 3}));
    Node *a = op(g, "aten.clone.default", {x});
    Node *e = op(g, "aten.expand.default", {a, std::vector<int64_t>{4, 3}});
    op(g, "aten.add_.Tensor", {e, 1.0});
    g.setOutputs({a});
    try {
      functionalize(p);
      FAIL("no error");
    } catch (const Error &err) {
      CHECK(err.kind() == Error::Kind::User);
      CHECK_THAT(err.what(), Catch::Contains("unsupported mutation") && Catch::Contains("add_") &&
                                 Catch::Contains("expand"));
    }
  }
  SECTION("write through a getitem of split") {
    Program p;
    Graph &g = p.forward;
    Node *x = input(g, "x", f32({4, 3}));
    Node *a = op(g, "aten.clone.default", {x});
    Node *sp = op(g, "aten.split.Tensor", {a, int64_t(2)});
    Node *h = op(g, "getitem", {sp, int64_t(1)});
    op(g, "aten.mul_.Tensor", {h, 2.0});
    g.setOutputs({a});
    CHECK_THROWS_WITH(functionalize(p), Catch::Contains("unsupported mutation") &&
                                             Catch::Contains("'split' view"));
  }
}

TEST_CASE("functionalize: an out= overload writes the op's value into out, through its view", "[functionalize]") {
  // atan2(y, x, out=o[1]) where o is an input: o's row 1 is overwritten (a mutated input), the
  // node's value is the row, and a later read of o sees the write.
  Program p;
  Graph &g = p.forward;
  Node *y = input(g, "y", f32({3})), *x = input(g, "x", f32({3})), *o = input(g, "o", f64({2, 3}));
  Node *row = op(g, "aten.select.int", {o, int64_t(0), int64_t(1)});
  Node *r = op(g, "aten.atan2.out", {y, x}, {{"out", row}});
  Node *after = op(g, "aten.mul.Tensor", {o, 2.0});
  g.setOutputs({r, after});
  auto in = randomInputs(g, 3);
  auto out = run(p, in);
  RefTensor wr(DType::F64, {3}), wa = like(in[2]), wm = like(in[2]);
  for (int64_t j = 0; j < 3; ++j) {
    // f32 atan2 cast to f64 (the reference evaluates in f64: the cast is exact either way).
    wr.data[j] = std::atan2(in[0].data[j], in[1].data[j]);
    for (int64_t i = 0; i < 2; ++i) {
      double v = i == 1 ? wr.data[j] : in[2].data[i * 3 + j];
      wm.data[i * 3 + j] = v;
      wa.data[i * 3 + j] = 2 * v;
    }
  }
  expectClose(out, {wr, wa, wm});
  REQUIRE(p.mutatedInputs.size() == 1);
  CHECK(p.mutatedInputs[0].second == "o");
  CHECK(countTarget(p.forward, "aten.atan2.default") == 1);
  CHECK(countTarget(p.forward, "aten.select_scatter.default") == 1);
}

TEST_CASE("functionalize: the in-place batch norm updates the running statistics it was given", "[functionalize]") {
  // _native_batch_norm_legit(x, w, b, rm(a!), rv(b!), training=True, 0.1, 1e-5): the outputs are
  // the functional form's first three results; rm and rv become mutated inputs holding its
  // results 3 and 4, compared with the statistics computed here.
  Program p;
  Graph &g = p.forward;
  Node *x = input(g, "x", f32({4, 2})), *w = input(g, "w", f32({2})), *b = input(g, "b", f32({2}));
  Node *rm = g.addPlaceholder("rm", f32({2}), InputRole::Buffer);
  Node *rv = g.addPlaceholder("rv", f32({2}), InputRole::Buffer);
  Node *bn = op(g, "aten._native_batch_norm_legit.default", {x, w, b, rm, rv, true, 0.1, 1e-5});
  Node *y = op(g, "getitem", {bn, int64_t(0)});
  Node *mean = op(g, "getitem", {bn, int64_t(1)});
  g.setOutputs({y, mean});
  auto in = randomInputs(g, 4, {{"rv", {0.5, 1.5}}});
  auto out = run(p, in);
  REQUIRE(out.size() == 4);
  REQUIRE(p.mutatedInputs.size() == 2);
  CHECK(p.mutatedInputs[0].second == "rm");
  CHECK(p.mutatedInputs[1].second == "rv");
  CHECK(countTarget(p.forward, "aten._native_batch_norm_legit_functional.default") == 1);
  for (int64_t c = 0; c < 2; ++c) {
    double m = 0, v = 0;
    for (int64_t n = 0; n < 4; ++n) m += in[0].data[n * 2 + c] / 4;
    for (int64_t n = 0; n < 4; ++n) v += (in[0].data[n * 2 + c] - m) * (in[0].data[n * 2 + c] - m);
    CHECK(out[1].data[c] == Approx(m).epsilon(1e-9));
    CHECK(out[2].data[c] == Approx(0.9 * in[3].data[c] + 0.1 * m).epsilon(1e-9));
    CHECK(out[3].data[c] == Approx(0.9 * in[4].data[c] + 0.1 * v / 3).epsilon(1e-9)); // unbiased
    for (int64_t n = 0; n < 4; ++n)
      CHECK(out[0].data[n * 2 + c] ==
            Approx((in[0].data[n * 2 + c] - m) / std::sqrt(v / 4 + 1e-5) * in[1].data[c] + in[2].data[c]).epsilon(1e-6));
  }
}
