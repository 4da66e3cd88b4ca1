// OpDef::symInfer (lib/IR/SymShapes.cpp) on the dynamic exports of tools/export/gen_dynamic_cases.py:
// every node of the captured program with run-time sizes has a shape function over them, and it
// gives the export's own expressions (capture already checks agreement where a rule exists;
// this test also fails when a rule is missing). Then the rules at work on a hand-built graph.
#include "aotc/Capture.h"
#include "aotc/Diagnostics.h"
#include "aotc/OpRegistry.h"
#include "aotc/SymExpr.h"

#include <catch2/catch.hpp>

using namespace aotc;

namespace {
std::string canon(const std::string &e) { return e.empty() ? e : SymExpr::parse(e).canonical().str(); }
} // namespace

TEST_CASE("symbolic shape functions cover the dynamic fixtures", "[symshapes]") {
  for (const char *name : {"dyn_mlp.pt2", "dyn_lm.pt2", "dyn_ops.pt2", "dyn_cnn.pt2", "dyn_dec.pt2"}) {
    Program p = readPt2(std::string(AOTC_SRC_ROOT) + "/test/lit/capture/Inputs/" + name, nullptr);
    REQUIRE_FALSE(p.dynamicSymbols().empty());
    int symbolic = 0;
    for (const auto &up : p.forward.nodes()) {
      const Node &n = *up;
      if (!n.isCall()) continue;
      auto r = inferSymbolic(n, n.types);
      INFO(name << ": node " << n.name << " (" << n.target << ")");
      REQUIRE(r.has_value());
      REQUIRE(r->size() == n.types.size());
      for (size_t k = 0; k < n.types.size(); ++k) {
        const TensorType &t = n.types[k];
        if (!t.symbolic() && n.isGetitem()) continue;
        std::vector<std::string> mine = (*r)[k], theirs = t.sym;
        mine.resize(t.shape.size());
        theirs.resize(t.shape.size());
        for (size_t i = 0; i < t.shape.size(); ++i) CHECK(canon(mine[i]) == canon(theirs[i]));
        symbolic += t.symbolic();
      }
    }
    CHECK(symbolic > (std::string(name) == "dyn_dec.pt2" ? 10 : 20)); // the decoder block is small
  }
}

TEST_CASE("symbolic shape functions: views, reductions, broadcasting", "[symshapes]") {
  Graph g;
  Node *x = g.addPlaceholder("x", TensorType(DType::F32, {64, 12}, {"s0", ""}), InputRole::UserInput);
  Node *y = g.addPlaceholder("y", TensorType(DType::F32, {12}), InputRole::UserInput);
  auto sym = [](const Node *n) {
    auto r = inferSymbolic(*n, n->types);
    REQUIRE(r);
    std::vector<std::string> v = (*r)[0];
    v.resize(n->type().shape.size());
    std::string s;
    for (const std::string &e : v) s += (s.empty() ? "" : "|") + (e.empty() ? "." : e);
    return s;
  };
  CHECK(sym(buildCall(g, "a", "aten.add.Tensor", {x, y}, {})) == "s0|.");
  CHECK(sym(buildCall(g, "v", "aten.view.default", {x, std::vector<int64_t>{-1, 3, 4}}, {})) == "s0|.|.");
  CHECK(sym(buildCall(g, "t", "aten.permute.default", {x, std::vector<int64_t>{1, 0}}, {})) == ".|s0");
  CHECK(sym(buildCall(g, "s", "aten.sum.dim_IntList", {x, std::vector<int64_t>{1}, true}, {})) == "s0|.");
  CHECK(sym(buildCall(g, "s2", "aten.sum.dim_IntList", {x, std::vector<int64_t>{0}}, {})) == ".");
  CHECK(sym(buildCall(g, "c", "aten.cat.default", {std::vector<Node *>{x, x}}, {})) == "2*s0|.");
  CHECK(sym(buildCall(g, "u", "aten.unsqueeze.default", {x, (int64_t)1}, {})) == "s0|.|.");
  CHECK(sym(buildCall(g, "sl", "aten.slice.Tensor", {x, (int64_t)0, (int64_t)1, INT64_MAX}, {})) == "s0 - 1|.");
  CHECK(sym(buildCall(g, "m", "aten.mm.default", {x, g.addPlaceholder("w", TensorType(DType::F32, {12, 5}), InputRole::UserInput)}, {})) == "s0|.");
  // A view whose size argument is a run-time size: Node::symArgs.
  Node *v2 = buildCall(g, "v2", "aten.view.default", {x, std::vector<int64_t>{64, 3, 4}}, {});
  v2->symArgs = {{1, {"s0", "", ""}}};
  CHECK(sym(v2) == "s0|.|.");
  // No rule: an op without symInfer is nullopt, never a guess.
  Node *cs = buildCall(g, "cs", "aten.cumsum.default", {x, (int64_t)1}, {}, {}, nullptr, {}, SizeInference::Reference);
  CHECK_FALSE(inferSymbolic(*cs, cs->types).has_value());
}

TEST_CASE("buildCall carries run-time sizes into the nodes passes build", "[symshapes]") {
  Graph g;
  Node *x = g.addPlaceholder("x", TensorType(DType::F32, {64, 12}, {"s0", ""}), InputRole::UserInput);
  // The results' sizes come from the arguments' (TensorType::sym) and from symArgs.
  Node *r = buildCall(g, "r", "aten.relu.default", {x}, {});
  CHECK(r->type().str() == "f32[s0, 12]");
  Node *v = buildCall(g, "v", "aten.view.default", {x, std::vector<int64_t>{64, 3, 4}}, {}, {}, nullptr,
                      {{1, {"s0", "", ""}}});
  CHECK(v->type().str() == "f32[s0, 3, 4]");
  REQUIRE(v->symArg(1));
  CHECK(*v->symArg(1) == std::vector<std::string>{"s0", "", ""});
  Node *f = buildCall(g, "f", "aten.full.default", {std::vector<int64_t>{128, 2}, (int64_t)0}, {}, {}, nullptr,
                      {{0, {"2*s0", ""}}});
  CHECK(f->type().str() == "i64[2*s0, 2]"); // an int fill value, as torch.full
  // Constant expressions leave no symArgs and no sym.
  Node *c = buildCall(g, "c", "aten.full.default", {std::vector<int64_t>{3}, (int64_t)0}, {}, {}, nullptr, {{0, {""}}});
  CHECK(c->symArgs.empty());
  CHECK_FALSE(c->type().symbolic());
  // Negative control: a size argument without its expression gives the reference value, a static
  // type (what the two checks of docs/dynamic-shapes.md catch in a pass).
  CHECK(buildCall(g, "v0", "aten.view.default", {x, std::vector<int64_t>{64, 3, 4}}, {})->type().str() == "f32[64, 3, 4]");
  // An op without a shape function over run-time sizes is a user error naming it, not a guess.
  try {
    buildCall(g, "cs", "aten.cumsum.default", {x, (int64_t)1}, {});
    FAIL("no error");
  } catch (const Error &e) {
    CHECK(e.kind() == Error::Kind::User);
    CHECK_THAT(e.what(), Catch::Contains("node 'cs' (aten.cumsum.default): aotc has no shape function over run-time "
                                         "sizes for this op yet (argument 'self' is f32[s0, 12])"));
  }
  CHECK_FALSE(g.find("cs"));
  // Static arguments: nothing to infer, every op builds.
  Node *y = g.addPlaceholder("y", TensorType(DType::F32, {4, 12}), InputRole::UserInput);
  CHECK(buildCall(g, "cs2", "aten.cumsum.default", {y, (int64_t)1}, {})->type().str() == "f32[4, 12]");
}

TEST_CASE("convolution and pooling over a run-time batch only", "[symshapes]") {
  Graph g;
  Node *x = g.addPlaceholder("x", TensorType(DType::F32, {16, 3, 12, 12}, {"s0", "", "", ""}), InputRole::UserInput);
  Node *w = g.addPlaceholder("w", TensorType(DType::F32, {8, 3, 3, 3}), InputRole::Parameter);
  std::vector<int64_t> one{1, 1};
  Node *c = buildCall(g, "c", "aten.convolution.default",
                      {x, w, std::monostate{}, std::vector<int64_t>{2, 2}, one, one, false, std::vector<int64_t>{0, 0}, (int64_t)1}, {});
  CHECK(c->type().str() == "f32[s0, 8, 6, 6]");
  Node *m = buildCall(g, "m", "aten.max_pool2d_with_indices.default", {c, std::vector<int64_t>{2, 2}}, {});
  CHECK(m->types.at(0).str() == "f32[s0, 8, 3, 3]");
  CHECK(m->types.at(1).str() == "i64[s0, 8, 3, 3]");
  Node *wg = buildCall(g, "wg", "aotc.conv_weight_grad.default",
                       {c, x, std::vector<int64_t>{8, 3, 3, 3}, std::vector<int64_t>{2, 2}, one, one, (int64_t)1}, {});
  CHECK(wg->type().str() == "f32[8, 3, 3, 3]"); // a weight's gradient: static
  // A run-time size in a weight's dim 0 (its output channels) is not the batch: refused.
  Node *wd = g.addPlaceholder("wd", TensorType(DType::F32, {8, 3, 3, 3}, {"s2", "", "", ""}), InputRole::UserInput);
  CHECK_THROWS_WITH(buildCall(g, "cw", "aten.convolution.default",
                              {x, wd, std::monostate{}, one, one, one, false, std::vector<int64_t>{0, 0}, (int64_t)1}, {}),
                    Catch::Contains("aotc has no shape function over run-time sizes for this op yet"));
  // A run-time height has no shape function yet: a user error, not a guess.
  Node *h = g.addPlaceholder("h", TensorType(DType::F32, {16, 3, 12, 12}, {"", "", "s1", ""}), InputRole::UserInput);
  try {
    buildCall(g, "ch", "aten.convolution.default",
              {h, w, std::monostate{}, one, one, one, false, std::vector<int64_t>{0, 0}, (int64_t)1}, {});
    FAIL("no error");
  } catch (const Error &e) {
    CHECK(e.kind() == Error::Kind::User);
    CHECK_THAT(e.what(), Catch::Contains("aotc has no shape function over run-time sizes for this op yet"));
  }
}
