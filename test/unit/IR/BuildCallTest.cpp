//===- BuildCallTest.cpp - buildCall: defaults, kwargs, coercion, errors -----===//
#include "aotc/OpRegistry.h"

#include <catch2/catch.hpp>

using namespace aotc;

namespace {
TensorType T(DType d, Shape s) { return TensorType{d, std::move(s)}; }

/// Runs `f` and returns the aotc::Error message it throws ("" if none).
template <class F> std::string errorOf(F f, Error::Kind *kind = nullptr) {
  try {
    f();
  } catch (const Error &e) {
    if (kind) *kind = e.kind();
    return e.what();
  }
  return "";
}
} // namespace

TEST_CASE("buildCall fills defaults in schema order", "[buildCall]") {
  Graph g;
  Node *x = g.addPlaceholder("x", T(DType::F32, {2, 3}), InputRole::UserInput);
  Node *y = g.addPlaceholder("y", T(DType::F32, {3}), InputRole::UserInput);
  Node *a = buildCall(g, "add", "torch.ops.aten.add.Tensor", {x, y}, {});
  CHECK(a->target == "aten.add.Tensor");
  REQUIRE(a->args.size() == 3);
  CHECK(std::get<int64_t>(a->args[2]) == 1);
  CHECK(a->type() == T(DType::F32, {2, 3}));
  CHECK(a->op == OpRegistry::get().lookup("aten.add.Tensor"));

  Node *c = buildCall(g, "c", "aten._to_copy", {x}, {{"dtype", DTypeLit{DType::I64}}});
  REQUIRE(c->args.size() == 7);
  CHECK(std::get<DTypeLit>(c->args[1]).dtype == DType::I64);
  CHECK(std::holds_alternative<std::monostate>(c->args[2]));
  CHECK(std::get<bool>(c->args[5]) == false);
  CHECK(c->type() == T(DType::I64, {2, 3}));
}

TEST_CASE("buildCall broadcasts an int to int[1] and coerces int to float", "[buildCall]") {
  Graph g;
  Node *x = g.addPlaceholder("x", T(DType::F32, {2, 3, 4}), InputRole::UserInput);
  Node *s = buildCall(g, "s", "aten.sum.dim_IntList", {x, int64_t(-1)}, {});
  CHECK(std::get<std::vector<int64_t>>(s->args[1]) == std::vector<int64_t>{-1});
  CHECK(s->type() == T(DType::F32, {2, 3}));
  Node *ln = buildCall(g, "ln", "aten.layer_norm.default", {x, std::vector<int64_t>{4}},
                       {{"eps", int64_t(1)}});
  CHECK(std::get<double>(ln->args[4]) == 1.0);
  CHECK(std::get<bool>(ln->args[5]) == true);
}

TEST_CASE("buildCall: getitem of a tuple op", "[buildCall]") {
  Graph g;
  Node *x = g.addPlaceholder("x", T(DType::F32, {2, 3, 4}), InputRole::UserInput);
  Node *ln = buildCall(g, "ln", "aten.native_layer_norm.default",
                       {x, std::vector<int64_t>{3, 4}, std::monostate{}, std::monostate{}, 1e-5}, {});
  REQUIRE(ln->types.size() == 3);
  Node *m = buildCall(g, "m", "getitem", {ln, int64_t(1)}, {});
  CHECK(m->type() == T(DType::F32, {2, 1, 1}));
  CHECK(m->isGetitem());
  // A tuple node cannot be used as a tensor argument directly.
  Error::Kind k{};
  std::string e = errorOf([&] { buildCall(g, "bad", "aten.relu.default", {ln}, {}); }, &k);
  CHECK(e.find("getitem") != std::string::npos);
  CHECK(k == Error::Kind::User);
  e = errorOf([&] { buildCall(g, "bad2", "getitem", {ln, int64_t(3)}, {}); });
  CHECK(e.find("out of range") != std::string::npos);
}

TEST_CASE("buildCall errors are user errors naming the problem", "[buildCall]") {
  Graph g;
  Node *x = g.addPlaceholder("x", T(DType::F32, {2, 3}), InputRole::UserInput);
  SourceLoc loc{"m.py", 7, 3};
  Error::Kind k{};
  std::string e = errorOf([&] { buildCall(g, "f", "torch.ops.aten.frobnicate.default", {x}, {}, loc); }, &k);
  CHECK(k == Error::Kind::User);
  CHECK(e == "m.py:7:3: error: unknown op 'torch.ops.aten.frobnicate.default'");
  e = errorOf([&] { buildCall(g, "r", "aten.relu.default", {x, x}, {}, loc); }, &k);
  CHECK(k == Error::Kind::User);
  CHECK(e.find("m.py:7:3: error: node 'r' (aten.relu.default)") == 0);
  CHECK(e.find("expects at most 1 arguments, got 2") != std::string::npos);
  e = errorOf([&] { buildCall(g, "mm", "aten.mm.default", {x}, {}); });
  CHECK(e.find("missing argument 'mat2'") != std::string::npos);
  e = errorOf([&] { buildCall(g, "a", "aten.add.Tensor", {x, x}, {{"beta", int64_t(2)}}); });
  CHECK(e.find("unexpected keyword argument 'beta'") != std::string::npos);
  e = errorOf([&] { buildCall(g, "a", "aten.add.Tensor", {x, x}, {{"other", x}}); });
  CHECK(e.find("multiple values for argument 'other'") != std::string::npos);
  e = errorOf([&] { buildCall(g, "v", "aten.view.default", {x, std::string("no")}, {}); });
  CHECK(e.find("argument 'size' expects a list of ints") != std::string::npos);
  // Failed calls leave the graph unchanged.
  CHECK(g.nodes().size() == 1);
}

TEST_CASE("buildCall inserts before a given node and keeps the name verbatim", "[buildCall]") {
  Graph g;
  Node *x = g.addPlaceholder("x", T(DType::F32, {4}), InputRole::UserInput);
  Node *r = buildCall(g, "relu", "aten.relu", {x}, {});
  g.setOutputs({r});
  Node *e = buildCall(g, g.uniqueName("relu"), "aten.exp", {x}, {}, {}, r);
  CHECK(e->name == "relu_1");
  CHECK(g.nodes()[1].get() == e);
  CHECK(g.nodes()[2].get() == r);
  g.verify();
}

TEST_CASE("inferTypes re-runs inference of an existing node", "[buildCall]") {
  Graph g;
  Node *x = g.addPlaceholder("x", T(DType::I64, {5}), InputRole::UserInput);
  Node *d = buildCall(g, "d", "aten.div.Scalar", {x, int64_t(2)}, {});
  CHECK(inferTypes(*d) == std::vector<TensorType>{T(DType::F32, {5})});
}
