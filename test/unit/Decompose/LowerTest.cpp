//===- LowerTest.cpp - lower(): values preserved, only primitives left -------===//
#include "PassTestUtil.h"

#include "aotc/Decompositions.h"
#include "aotc/Stages.h"

#include <fstream>
#include <sstream>

using namespace aotc;
using namespace aotc::testutil;

namespace {

Program lowered(const Program &p, const std::map<std::string, std::pair<double, double>> &ranges = {}) {
  Program q = checkPreserves(p, [](Program &x) { lower(x); }, 3, ranges);
  for (auto &n : q.forward.nodes()) {
    if (!n->isCall()) continue;
    INFO(n->name << " = " << n->target);
    CHECK(isPrimitive(n->target));
  }
  CHECK(q.stage == "lower");
  return q;
}

} // namespace

TEST_CASE("primitive set: sorted, contains the contract's ops, excludes composites", "[lower]") {
  const auto &p = primitiveTargets();
  CHECK(std::is_sorted(p.begin(), p.end()));
  for (const char *t : {"aten.addmm.default", "aten.where.self", "aten.le.Scalar", "aten.sum.dim_IntList",
                        "aten.gather.default", "getitem", "aten.scalar_tensor.default"})
    CHECK(isPrimitive(t));
  for (const char *t : {"aten.gelu.default", "aten.mean.default", "aten._softmax.default", "aten.linear.default",
                        "aten.sum.default", "aten.native_layer_norm.default"})
    CHECK_FALSE(isPrimitive(t));
  // Every primitive is a registered op.
  for (const std::string &t : p)
    if (t != "getitem") CHECK(OpRegistry::get().lookup(t) != nullptr);
  // Every lower-table target is registered and is not a primitive (unless it is
  // only rewritten in some cases, like alpha != 1).
  for (auto &[t, _] : lowerTable()) {
    INFO(t);
    CHECK(OpRegistry::get().lookup(t) != nullptr);
  }
}

TEST_CASE("lower gelu (exact and tanh) and gelu_backward", "[lower]") {
  Program p;
  Graph &g = p.forward;
  Node *x = input(g, "x", f32({3, 4})), *gr = input(g, "g", f32({3, 4}));
  Node *a = op(g, "aten.gelu.default", {x});
  Node *b = op(g, "aten.gelu.default", {x}, {{"approximate", std::string("tanh")}});
  Node *c = op(g, "aten.gelu_backward.default", {gr, x});
  Node *d = op(g, "aten.gelu_backward.default", {gr, x}, {{"approximate", std::string("tanh")}});
  g.setOutputs({a, b, c, d});
  Program q = lowered(p, {{"x", {-3, 3}}});
  CHECK(countTarget(q.forward, "aten.erf.default") == 2);
  CHECK(countTarget(q.forward, "aten.tanh.default") == 2);
  CHECK(q.forward.outputs().at(0)->target == "aten.mul.Tensor");
  CHECK(q.forward.outputs().at(0)->name.rfind("mul", 0) == 0); // named after its op, not "gelu"
}

TEST_CASE("lower softmax family, forward and backward", "[lower]") {
  Program p;
  Graph &g = p.forward;
  Node *x = input(g, "x", f32({3, 5})), *gr = input(g, "g", f32({3, 5}));
  Node *s = op(g, "aten._softmax.default", {x, int64_t(-1), false});
  Node *l = op(g, "aten._log_softmax.default", {x, int64_t(0), false});
  Node *sb = op(g, "aten._softmax_backward_data.default", {gr, s, int64_t(1), DTypeLit{DType::F32}});
  Node *lb = op(g, "aten._log_softmax_backward_data.default", {gr, l, int64_t(0), DTypeLit{DType::F32}});
  g.setOutputs({s, l, sb, lb});
  Program q = lowered(p, {{"x", {-5, 5}}});
  CHECK(countTarget(q.forward, "aten.amax.default") == 2);
}

TEST_CASE("lower native_layer_norm: three results through getitem", "[lower]") {
  Program p;
  Graph &g = p.forward;
  Node *x = input(g, "x", f32({4, 2, 3})), *w = input(g, "w", f32({2, 3})), *b = input(g, "b", f32({2, 3}));
  Node *ln = op(g, "aten.native_layer_norm.default", {x, std::vector<int64_t>{2, 3}, w, b, 1e-5});
  Node *o = op(g, "getitem", {ln, int64_t(0)});
  Node *m = op(g, "getitem", {ln, int64_t(1)});
  Node *r = op(g, "getitem", {ln, int64_t(2)});
  Node *ln2 = op(g, "aten.native_layer_norm.default", {x, std::vector<int64_t>{3}, std::monostate{}, std::monostate{}, 1e-3});
  Node *o2 = op(g, "getitem", {ln2, int64_t(0)});
  g.setOutputs({o, m, r, o2});
  Program q = lowered(p);
  CHECK(q.forward.outputs().at(0)->name.rfind("add", 0) == 0); // named after its op
  CHECK(q.forward.outputs().at(2)->name.rfind("rsqrt", 0) == 0);
  CHECK(q.forward.outputs().at(2)->target == "aten.rsqrt.default");
}

TEST_CASE("lower native_layer_norm_backward with output masks", "[lower]") {
  for (bool affine : {true, false}) {
    Program p;
    Graph &g = p.forward;
    Node *x = input(g, "x", f32({4, 6})), *gy = input(g, "gy", f32({4, 6}));
    Node *w = input(g, "w", f32({6})), *b = input(g, "b", f32({6}));
    Node *ln = op(g, "aten.native_layer_norm.default", {x, std::vector<int64_t>{6}, w, b, 1e-5});
    Node *mean = op(g, "getitem", {ln, int64_t(1)});
    Node *rstd = op(g, "getitem", {ln, int64_t(2)});
    std::vector<Arg> args = {gy, x, std::vector<int64_t>{6}, mean, rstd};
    if (affine) {
      args.push_back(w);
      args.push_back(b);
      args.push_back(std::vector<bool>{true, true, true});
    } else {
      args.push_back(std::monostate{});
      args.push_back(std::monostate{});
      args.push_back(std::vector<bool>{true, false, false});
    }
    Node *bw = op(g, "aten.native_layer_norm_backward.default", args);
    std::vector<Node *> outs = {op(g, "getitem", {bw, int64_t(0)})};
    if (affine) {
      outs.push_back(op(g, "getitem", {bw, int64_t(1)}));
      outs.push_back(op(g, "getitem", {bw, int64_t(2)}));
    }
    g.setOutputs(outs);
    lowered(p);
  }
}

TEST_CASE("lower threshold_backward, sigmoid, reductions, alpha, rsub, squeeze", "[lower]") {
  Program p;
  Graph &g = p.forward;
  Node *x = input(g, "x", f32({2, 3, 4})), *y = input(g, "y", f32({2, 3, 4}));
  Node *s = input(g, "s", f32({2, 1, 4}));
  std::vector<Node *> outs = {
      op(g, "aten.threshold_backward.default", {y, x, 0.0}),
      op(g, "aten.mean.default", {x}),
      op(g, "aten.mean.dim", {x, std::vector<int64_t>{-1, 0}, true}),
      op(g, "aten.mean.dim", {x, std::vector<int64_t>{1}}),
      op(g, "aten.sum.default", {x}),
      op(g, "aten.rsub.Scalar", {x, 2.0}),
      op(g, "aten.rsub.Scalar", {x, int64_t(1), int64_t(3)}),
      op(g, "aten.add.Tensor", {x, y}, {{"alpha", 0.5}}),
      op(g, "aten.sub.Tensor", {x, y}, {{"alpha", int64_t(2)}}),
      op(g, "aten.sub.Tensor", {x, y}),
      op(g, "aten.squeeze.dim", {s, int64_t(1)}),
      op(g, "aten.t.default", {op(g, "aten.select.int", {x, int64_t(0), int64_t(1)})}),
      op(g, "aten.silu.default", {x}),
      op(g, "aten.amin.default", {x, std::vector<int64_t>{2}}),
      op(g, "aten.square.default", {x}),
      op(g, "aten.log1p.default", {op(g, "aten.abs.default", {x})}),
      op(g, "aten.expm1.default", {x}),
      op(g, "aten.leaky_relu.default", {x, 0.1}),
      op(g, "aten.alias.default", {x}),
      op(g, "aten.lift_fresh_copy.default", {x}),
      op(g, "aten.add.Scalar", {x, 2.0, int64_t(3)}),
      op(g, "aten.sub.Scalar", {x, int64_t(2), 0.5}),
      op(g, "aten.add.Tensor", {x, 1.5}, {{"alpha", int64_t(2)}}),
      op(g, "aten.transpose.int", {x, int64_t(0), int64_t(2)}),
      op(g, "aten.reshape.default", {x, std::vector<int64_t>{4, -1}}),
      op(g, "aten.clamp.default", {x, -0.2, 0.3}),
      op(g, "aten.where.ScalarOther", {op(g, "aten.gt.Scalar", {x, 0.0}), x, 1.0}),
  };
  g.setOutputs(outs);
  Program q = lowered(p);
  // sub.Tensor with alpha 1 is already primitive: it stays as it was.
  CHECK(q.forward.find("sub_1") != nullptr);
}

TEST_CASE("lower rejects nothing that is primitive and is idempotent", "[lower]") {
  Program p;
  Graph &g = p.forward;
  Node *x = input(g, "x", f32({3, 4}));
  Node *a = op(g, "aten._log_softmax.default", {op(g, "aten.gelu.default", {x}), int64_t(1), false});
  g.setOutputs({a});
  lower(p);
  size_t n1 = p.forward.nodes().size();
  lower(p);
  CHECK(p.forward.nodes().size() == n1);
}

TEST_CASE("docs list every decompose and lower rule", "[lower]") {
  auto read = [](const std::string &rel) {
    std::ifstream f(std::string(AOTC_SRC_ROOT) + "/" + rel);
    std::stringstream ss;
    ss << f.rdbuf();
    return ss.str();
  };
  std::string dec = read("docs/stage-decompose.md"), low = read("docs/stage-lower.md");
  for (auto &[t, _] : decomposeTable()) {
    INFO(t);
    CHECK(dec.find("`" + t + "`") != std::string::npos);
  }
  for (auto &[t, _] : lowerTable()) {
    // Families share a row: `aten.add/sub .Tensor/.Scalar`, `aten.clamp`, ...
    std::string name = t.substr(5, t.find('.', 5) - 5);
    INFO(t);
    CHECK(low.find(name) != std::string::npos);
  }
}
