//===- DecomposeTest.cpp - decompose(): values preserved, composites gone ----===//
//
// Every rule of the decompose table is run on small graphs; the float64
// reference evaluator must give the same outputs before and after (relative
// 1e-12) on random inputs, and no op of the table may remain.
//===----------------------------------------------------------------------===//
#include "PassTestUtil.h"

#include "aotc/Decompositions.h"
#include "aotc/Stages.h"

using namespace aotc;
using namespace aotc::testutil;

namespace {

/// No node of `g` has a target of the decompose table.
void expectNoComposite(const Graph &g) {
  for (auto &[t, _] : decomposeTable()) {
    INFO(t);
    CHECK(countTarget(g, t) == 0);
  }
}

Program decomposed(const Program &p, const std::map<std::string, std::pair<double, double>> &ranges = {}) {
  Program q = checkPreserves(p, [](Program &x) { decompose(x); }, 3, ranges);
  expectNoComposite(q.forward);
  CHECK(q.stage == "decompose");
  return q;
}

} // namespace

TEST_CASE("decompose linear: 2-D with bias becomes permute + addmm, named after its op", "[decompose]") {
  Program p;
  Graph &g = p.forward;
  Node *x = input(g, "x", f32({4, 3})), *w = input(g, "w", f32({5, 3})), *b = input(g, "b", f32({5}));
  Node *l = op(g, "aten.linear.default", {x, w, b});
  g.setOutputs({l});
  Program q = decomposed(p);
  CHECK(countTarget(q.forward, "aten.addmm.default") == 1);
  CHECK(countTarget(q.forward, "aten.permute.default") == 1);
  Node *out = q.forward.outputs().at(0);
  CHECK(out->name == "addmm"); // another op: its own name, not the replaced node's (docs/cli.md)
  CHECK(out->target == "aten.addmm.default");
}

TEST_CASE("decompose linear: no bias, 3-D and 1-D inputs", "[decompose]") {
  Program p;
  Graph &g = p.forward;
  Node *x = input(g, "x", f32({2, 4, 3})), *v = input(g, "v", f32({3}));
  Node *w = input(g, "w", f32({5, 3})), *b = input(g, "b", f32({5})), *b2 = input(g, "b2", f32({4, 5}));
  Node *l1 = op(g, "aten.linear.default", {x, w});
  Node *l2 = op(g, "aten.linear.default", {x, w, b});
  Node *l3 = op(g, "aten.linear.default", {v, w, b});
  Node *l4 = op(g, "aten.linear.default", {x, w, b2}); // bias not [out]: separate add
  g.setOutputs({l1, l2, l3, l4});
  Program q = decomposed(p);
  CHECK(countTarget(q.forward, "aten.mm.default") == 2);
  CHECK(countTarget(q.forward, "aten.addmm.default") == 2);
}

TEST_CASE("decompose layer_norm -> native_layer_norm + getitem", "[decompose]") {
  Program p;
  Graph &g = p.forward;
  Node *x = input(g, "x", f32({3, 2, 4})), *w = input(g, "w", f32({2, 4})), *b = input(g, "b", f32({2, 4}));
  Node *ln = op(g, "aten.layer_norm.default", {x, std::vector<int64_t>{2, 4}, w, b, 1e-5});
  Node *ln2 = op(g, "aten.layer_norm.default", {x, std::vector<int64_t>{4}});
  g.setOutputs({ln, ln2});
  Program q = decomposed(p);
  CHECK(countTarget(q.forward, "aten.native_layer_norm.default") == 2);
  CHECK(q.forward.outputs().at(0)->name == "getitem");
  CHECK(q.forward.outputs().at(0)->isGetitem());
}

TEST_CASE("decompose softmax.int / log_softmax.int (negative dim, dtype)", "[decompose]") {
  Program p;
  Graph &g = p.forward;
  Node *x = input(g, "x", f32({3, 5}));
  Node *s = op(g, "aten.softmax.int", {x, int64_t(-1)});
  Node *l = op(g, "aten.log_softmax.int", {x, int64_t(0)}, {{"dtype", DTypeLit{DType::F64}}});
  g.setOutputs({s, l});
  Program q = decomposed(p);
  CHECK(countTarget(q.forward, "aten._softmax.default") == 1);
  CHECK(countTarget(q.forward, "aten._log_softmax.default") == 1);
  CHECK(countTarget(q.forward, "aten._to_copy.default") == 1);
}

TEST_CASE("decompose cross_entropy_loss, all reductions, weight, ignore_index", "[decompose]") {
  for (int64_t red : {0, 1, 2}) {
    INFO("reduction " << red);
    Program p;
    Graph &g = p.forward;
    Node *x = input(g, "x", f32({6, 4})), *t = input(g, "t", i64({6})), *w = input(g, "w", f32({4}));
    Node *a = op(g, "aten.cross_entropy_loss.default", {x, t, std::monostate{}, red});
    // ignore_index 2 hits about a quarter of the random targets in [0, 4).
    Node *b = op(g, "aten.cross_entropy_loss.default", {x, t, w, red, int64_t(2)});
    g.setOutputs({a, b});
    Program q = decomposed(p, {{"t", {0, 4}}, {"w", {0.5, 2}}});
    CHECK(countTarget(q.forward, "aten.gather.default") >= 2);
    CHECK(countTarget(q.forward, "aten._log_softmax.default") == 2);
  }
}

TEST_CASE("decompose cross_entropy_loss: probability targets, 1-D input", "[decompose]") {
  Program p;
  Graph &g = p.forward;
  Node *x = input(g, "x", f32({5, 3})), *t = input(g, "t", i64({5})), *pt = input(g, "pt", f32({5, 3}));
  Node *x1 = input(g, "x1", f32({3})), *t1 = input(g, "t1", i64({}));
  std::vector<Node *> outs;
  for (int64_t red : {0, 1, 2}) {
    outs.push_back(op(g, "aten.cross_entropy_loss.default", {x, t, std::monostate{}, red, int64_t(1)}));
    outs.push_back(op(g, "aten.cross_entropy_loss.default", {x, pt, std::monostate{}, red}));
  }
  outs.push_back(op(g, "aten.cross_entropy_loss.default", {x1, t1}));
  g.setOutputs(outs);
  decomposed(p, {{"t", {0, 3}}, {"t1", {0, 3}}, {"pt", {0, 1}}});
}

TEST_CASE("decompose nll_loss / nll_loss_forward keep both results", "[decompose]") {
  Program p;
  Graph &g = p.forward;
  Node *x = input(g, "x", f32({7, 5})), *t = input(g, "t", i64({7})), *w = input(g, "w", f32({5}));
  Node *f = op(g, "aten.nll_loss_forward.default", {x, t, w, int64_t(1), int64_t(3)});
  Node *o0 = op(g, "getitem", {f, int64_t(0)});
  Node *o1 = op(g, "getitem", {f, int64_t(1)});
  Node *n = op(g, "aten.nll_loss.default", {x, t, std::monostate{}, int64_t(0)});
  Node *f2 = op(g, "aten.nll_loss_forward.default", {x, t, std::monostate{}, int64_t(2), int64_t(-100)});
  Node *o2 = op(g, "getitem", {f2, int64_t(1)});
  g.setOutputs({o0, o1, n, o2});
  Program q = decomposed(p, {{"t", {0, 5}}, {"w", {0.5, 2}}});
  // The results are computed by other ops now, and named after them.
  CHECK(q.forward.outputs().at(0)->target == "aten.div.Tensor");
  CHECK(q.forward.outputs().at(0)->name == "div");
  CHECK(q.forward.outputs().at(1)->name.rfind("sum", 0) == 0);
}

TEST_CASE("decompose mse_loss -> sub, pow, mean/sum", "[decompose]") {
  Program p;
  Graph &g = p.forward;
  Node *a = input(g, "a", f32({4, 3})), *b = input(g, "b", f32({4, 3}));
  std::vector<Node *> outs;
  for (int64_t red : {0, 1, 2}) outs.push_back(op(g, "aten.mse_loss.default", {a, b, red}));
  g.setOutputs(outs);
  Program q = decomposed(p);
  CHECK(countTarget(q.forward, "aten.pow.Tensor_Scalar") == 3);
  CHECK(countTarget(q.forward, "aten.mean.default") == 1);
  CHECK(countTarget(q.forward, "aten.sum.default") == 1);
}

TEST_CASE("decompose silu, t, transpose, _unsafe_view, reshape", "[decompose]") {
  Program p;
  Graph &g = p.forward;
  Node *x = input(g, "x", f32({2, 3, 4})), *m = input(g, "m", f32({3, 5})), *v = input(g, "v", f32({4}));
  Node *s = op(g, "aten.silu.default", {x});
  Node *t = op(g, "aten.t.default", {m});
  Node *t1 = op(g, "aten.t.default", {v});
  Node *tr = op(g, "aten.transpose.int", {x, int64_t(-1), int64_t(0)});
  Node *uv = op(g, "aten._unsafe_view.default", {x, std::vector<int64_t>{6, 4}});
  Node *rs = op(g, "aten.reshape.default", {x, std::vector<int64_t>{-1, 2}});
  g.setOutputs({s, t, t1, tr, uv, rs});
  Program q = decomposed(p);
  CHECK(countTarget(q.forward, "aten.sigmoid.default") == 1);
  CHECK(countTarget(q.forward, "aten.permute.default") == 2);
  CHECK(countTarget(q.forward, "aten.view.default") == 3);
}

TEST_CASE("decompose clamp, hardtanh, where with scalars, masked_fill, square", "[decompose]") {
  Program p;
  Graph &g = p.forward;
  Node *x = input(g, "x", f32({4, 5})), *c = input(g, "c", {DType::Bool, {4, 5}});
  Node *k = input(g, "k", i64({4, 5}));
  std::vector<Node *> outs = {
      op(g, "aten.clamp.default", {x, -0.5, 0.25}),
      op(g, "aten.clamp.default", {x, std::monostate{}, 0.25}),
      op(g, "aten.clamp.default", {k, int64_t(0), 0.5}), // int input, float bound: f32 result
      op(g, "aten.hardtanh.default", {x}),
      op(g, "aten.clamp_min.default", {x, 0.1}),
      op(g, "aten.where.ScalarOther", {c, x, 2.5}),
      op(g, "aten.where.ScalarSelf", {c, int64_t(3), x}),
      op(g, "aten.masked_fill.Scalar", {x, c, -1.0}),
      op(g, "aten.square.default", {x}),
  };
  g.setOutputs(outs);
  decomposed(p, {{"k", {-2, 3}}});
}

TEST_CASE("decompose leaves gelu, _softmax, _log_softmax, native_layer_norm whole", "[decompose]") {
  Program p;
  Graph &g = p.forward;
  Node *x = input(g, "x", f32({3, 4}));
  Node *a = op(g, "aten.gelu.default", {x});
  Node *b = op(g, "aten._softmax.default", {a, int64_t(1), false});
  Node *c = op(g, "aten._log_softmax.default", {b, int64_t(1), false});
  Node *ln = op(g, "aten.native_layer_norm.default", {c, std::vector<int64_t>{4}, std::monostate{}, std::monostate{}, 1e-5});
  Node *o = op(g, "getitem", {ln, int64_t(0)});
  g.setOutputs({o});
  size_t before = g.nodes().size();
  decompose(p);
  CHECK(p.forward.nodes().size() == before);
  CHECK(countTarget(p.forward, "aten.gelu.default") == 1);
  CHECK(countTarget(p.forward, "aten.native_layer_norm.default") == 1);
}

TEST_CASE("decompose keeps the loc and stack trace of the replaced node", "[decompose]") {
  Program p;
  Graph &g = p.forward;
  Node *x = input(g, "x", f32({4, 3})), *w = input(g, "w", f32({5, 3}));
  Node *l = op(g, "aten.linear.default", {x, w});
  l->loc = SourceLoc{"m.py", 12, 3};
  l->stackTrace = "File \"m.py\", line 12, in forward";
  g.setOutputs({l});
  decompose(p);
  for (auto &n : p.forward.nodes()) {
    if (!n->isCall()) continue;
    CHECK(n->loc.line == 12);
    CHECK(n->stackTrace == "File \"m.py\", line 12, in forward");
  }
}

TEST_CASE("decompose widens i32 index arguments to i64 casts, views and outputs keep i32", "[decompose][dtype]") {
  Program p;
  Graph &g = p.forward;
  Node *x = input(g, "x", f32({5, 3}));
  Node *idx = input(g, "idx", {DType::I32, {4}});
  Node *tok = input(g, "tok", {DType::I32, {2, 2}});
  // Through views, as exported models do: idx.unsqueeze(1).expand(4, 3).
  Node *e = op(g, "aten.expand.default", {op(g, "aten.unsqueeze.default", {idx, int64_t(1)}), std::vector<int64_t>{4, 3}});
  Node *ga = op(g, "aten.gather.default", {x, int64_t(0), e});
  Node *is = op(g, "aten.index_select.default", {x, int64_t(0), idx});
  Node *em = op(g, "aten.embedding.default", {x, tok});
  Node *view = op(g, "aten.unsqueeze.default", {idx, int64_t(0)}); // an output that is a view of idx
  g.setOutputs({ga, is, em, view});
  CHECK(e->type().dtype == DType::I32); // views carry the index dtype
  Program q = decomposed(p, {{"idx", {0, 5}}, {"tok", {0, 3}}});
  auto casts = [](const Graph &h) {
    int n = 0;
    for (auto &node : h.nodes()) n += node->target == "aten._to_copy.default";
    return n;
  };
  CHECK(casts(q.forward) == 3); // the expand view, idx itself, tok: one each
  int indexArgs = 0;
  for (auto &n : q.forward.nodes()) {
    const OpDef *d = n->isCall() ? OpRegistry::get().lookup(n->target) : nullptr;
    if (!d || n->target == "aten._to_copy.default") continue;
    for (int i : d->indexArgs) {
      INFO(n->name);
      CHECK(std::get<Node *>(n->args[i])->type().dtype == DType::I64);
      ++indexArgs;
    }
  }
  CHECK(indexArgs == 3);
  CHECK(q.forward.outputs().back()->type().dtype == DType::I32); // as in PyTorch
  CHECK(q.forward.find("idx")->type().dtype == DType::I32);
  widenIndexInputs(q.forward); // idempotent
  CHECK(casts(q.forward) == 3);
}

TEST_CASE("i32/u8 tensors are index-only: computing on them is a node error", "[decompose][dtype]") {
  Graph g;
  Node *idx = input(g, "idx", {DType::I32, {4}});
  CHECK_THROWS_WITH(op(g, "aten.add.Tensor", {idx, idx}),
                    Catch::Contains("argument 'self' ('idx') is i32[4]: i32 tensors are index-only"));
  Node *x = input(g, "x", f32({4}));
  // A cast to an index dtype is allowed (an index made in the graph; the linalg ops' int32 pivots);
  // computing on its result is not.
  Node *u = op(g, "aten._to_copy.default", {x}, {{"dtype", DTypeLit{DType::U8}}});
  CHECK_THROWS_WITH(op(g, "aten.mul.Tensor", {u, x}), Catch::Contains("is u8[4]: u8 tensors are index-only"));
  CHECK_THROWS_WITH(op(g, "aten.neg.default", {op(g, "aten._to_copy.default", {x}, {{"dtype", DTypeLit{DType::I32}}})}),
                    Catch::Contains("i32 tensors are index-only"));
  CHECK_THROWS_WITH(op(g, "aten.index_select.default", {x, int64_t(0), op(g, "aten.gt.Scalar", {x, 0.0})}),
                    Catch::Contains("expected an int64 or int32 index tensor, got torch.bool"));
}

TEST_CASE("decompose clamp with a NaN bound gives NaN everywhere, as torch.clamp", "[decompose]") {
  // le/ge against NaN are always false: the bound used to be ignored (x came back unchanged).
  Program p;
  Graph &g = p.forward;
  Node *x = input(g, "x", f32({4}));
  g.setOutputs({op(g, "aten.clamp.default", {x, std::nan(""), 0.25}),
                op(g, "aten.clamp.default", {x, std::monostate{}, std::nan("")}),
                op(g, "aten.clamp.default", {x, -0.5, 0.25})});
  decompose(p);
  expectNoComposite(p.forward);
  RefTensor in(DType::F32, {4});
  in.data = {-1.0, 0.0, 0.1, 2.0};
  auto out = evaluate(p.forward, {in});
  REQUIRE(out.size() == 3);
  for (int k = 0; k < 2; ++k)
    for (double v : out[k].data) CHECK(std::isnan(v));
  CHECK(out[2].data == std::vector<double>{-0.5, 0.0, 0.1, 0.25});
}

TEST_CASE("decompose unbind over a run-time batch: along a static dim, not along the run-time one", "[decompose]") {
  for (int64_t dim : {1, 0}) {
    Program p;
    Graph &g = p.forward;
    Node *x = g.addPlaceholder("x", TensorType(DType::F32, {4, 3}, {"s0", ""}), InputRole::UserInput);
    if (dim == 0) { // its shape function refuses it, and decompose's rule would too
      CHECK_THROWS_WITH(op(g, "aten.unbind.int", {x, dim}), Catch::Contains("no shape function over run-time sizes"));
      continue;
    }
    Node *u = op(g, "aten.unbind.int", {x, dim});
    g.setOutputs({op(g, "getitem", {u, int64_t(0)})});
    {
      decompose(p);
      Node *out = p.forward.outputs().at(0);
      CHECK(out->target == "aten.select.int");
      CHECK(out->type().sym == std::vector<std::string>{"s0"}); // select's result keeps the batch
    }
  }
}
