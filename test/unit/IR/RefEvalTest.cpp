//===- RefEvalTest.cpp - Reference values against hand-computed numbers -------===//
//
// Expected values are computed by hand (or with the closed forms noted next to
// them); backward ops are checked against central differences of their forward.
//===----------------------------------------------------------------------===//
#include "aotc/OpRegistry.h"
#include "aotc/RefEval.h"

#include <catch2/catch.hpp>

#include <cmath>
#include <functional>

using namespace aotc;
using Catch::Matchers::WithinAbs;

namespace {
TensorType T(DType d, Shape s) { return TensorType{d, std::move(s)}; }

RefTensor R(DType d, Shape s, std::vector<double> v) {
  RefTensor t(d, std::move(s));
  REQUIRE(v.size() == t.data.size());
  t.data = std::move(v);
  return t;
}

/// One-op graph over placeholders of the inputs' types; returns all results
/// (getitem for each result of a tuple op).
std::vector<RefTensor> run1(const std::string &target, const std::vector<RefTensor> &ins,
                            std::vector<Arg> extra, std::vector<std::pair<std::string, Arg>> kw = {}) {
  Graph g;
  std::vector<Arg> args;
  for (size_t i = 0; i < ins.size(); ++i)
    args.push_back(g.addPlaceholder("in" + std::to_string(i), T(ins[i].dtype, ins[i].shape), InputRole::UserInput));
  for (auto &e : extra) args.push_back(e);
  Node *n = buildCall(g, "op", target, args, kw);
  std::vector<Node *> outs;
  if (n->types.size() == 1) outs = {n};
  else
    for (size_t i = 0; i < n->types.size(); ++i)
      outs.push_back(buildCall(g, "r" + std::to_string(i), "getitem", {n, (int64_t)i}, {}));
  g.setOutputs(outs);
  return evaluate(g, ins);
}

void near(const RefTensor &t, const std::vector<double> &want, double tol = 1e-12) {
  REQUIRE(t.data.size() == want.size());
  for (size_t i = 0; i < want.size(); ++i) CHECK_THAT(t.data[i], WithinAbs(want[i], tol));
}
} // namespace

TEST_CASE("broadcastIndexMap", "[refeval]") {
  auto m = broadcastIndexMap({3, 1}, {2, 3, 2});
  CHECK(m == std::vector<int64_t>{0, 0, 1, 1, 2, 2, 0, 0, 1, 1, 2, 2});
  CHECK(broadcastIndexMap({}, {2}) == std::vector<int64_t>{0, 0});
  CHECK(broadcastIndexMap({2, 2}, {2, 2}) == std::vector<int64_t>{0, 1, 2, 3});
}

TEST_CASE("pointwise values", "[refeval]") {
  RefTensor x = R(DType::F64, {3}, {-1.0, 0.0, 1.0});
  near(run1("aten.gelu", {x}, {})[0], {-0.15865525393145707, 0.0, 0.8413447460685429});
  // tanh approximation: 0.5 * (1 + tanh(sqrt(2/pi) * 1.044715)).
  near(run1("aten.gelu", {x}, {}, {{"approximate", std::string("tanh")}})[0],
       {-0.15880800939172324, 0.0, 0.8411919906082768});
  near(run1("aten.sigmoid", {x}, {})[0], {0.2689414213699951, 0.5, 0.7310585786300049});
  near(run1("aten.silu", {x}, {})[0], {-0.2689414213699951, 0.0, 0.7310585786300049});
  near(run1("aten.add.Tensor", {x, x}, {}, {{"alpha", int64_t(3)}})[0], {-4, 0, 4});
  near(run1("aten.rsub.Scalar", {x}, {int64_t(2)})[0], {3, 2, 1});
  near(run1("aten.clamp", {x}, {-0.5, std::monostate{}})[0], {-0.5, 0, 1});
  near(run1("aten.leaky_relu", {x}, {})[0], {-0.01, 0, 1});
  near(run1("aten.pow.Tensor_Scalar", {x}, {int64_t(3)})[0], {-1, 0, 1});
  // Integer semantics: true division gives floats; casts truncate toward zero.
  RefTensor i = R(DType::I64, {2}, {7, -7});
  auto d = run1("aten.div.Scalar", {i}, {int64_t(2)})[0];
  CHECK(d.dtype == DType::F32);
  near(d, {3.5, -3.5});
  near(run1("aten._to_copy", {R(DType::F64, {2}, {-2.7, 2.7})}, {}, {{"dtype", DTypeLit{DType::I64}}})[0], {-2, 2});
  near(run1("aten._to_copy", {R(DType::F64, {2}, {0.0, -0.1})}, {}, {{"dtype", DTypeLit{DType::Bool}}})[0], {0, 1});
  near(run1("aten.ne.Scalar", {i}, {int64_t(7)})[0], {0, 1});
  near(run1("aten.add.Tensor", {R(DType::Bool, {2}, {1, 1}), R(DType::Bool, {2}, {1, 0})}, {})[0], {1, 1});
}

TEST_CASE("reduction values", "[refeval]") {
  RefTensor x = R(DType::F64, {2, 3}, {1, 2, 3, 4, 5, 6});
  near(run1("aten.sum.dim_IntList", {x}, {std::vector<int64_t>{}})[0], {21});
  near(run1("aten.sum.dim_IntList", {x}, {std::vector<int64_t>{-1}, true})[0], {6, 15});
  near(run1("aten.mean.dim", {x}, {std::vector<int64_t>{0}})[0], {2.5, 3.5, 4.5});
  near(run1("aten.amax", {x}, {std::vector<int64_t>{1}})[0], {3, 6});
  near(run1("aten.argmax", {R(DType::F64, {2, 3}, {1, 9, 9, 7, 2, 3})}, {int64_t(1)})[0], {1, 0});
  near(run1("aten.argmax", {R(DType::F64, {2, 3}, {1, 9, 9, 7, 2, 3})}, {})[0], {1});
  // var with correction 1 of [1,2,3] = 1, of [4,5,6] = 1; correction 0 -> 2/3.
  near(run1("aten.var.correction", {x}, {std::vector<int64_t>{1}})[0], {1, 1});
  near(run1("aten.var.correction", {x}, {std::vector<int64_t>{1}}, {{"correction", int64_t(0)}})[0],
       {2.0 / 3, 2.0 / 3});
  near(run1("aten.logsumexp", {x}, {std::vector<int64_t>{1}})[0], {3.40760596444438, 6.40760596444438});
  auto s = run1("aten.sum.default", {R(DType::Bool, {4}, {1, 0, 1, 1})}, {})[0];
  CHECK(s.dtype == DType::I64);
  near(s, {3});
}

TEST_CASE("view and index values", "[refeval]") {
  RefTensor x = R(DType::F64, {2, 3}, {0, 1, 2, 3, 4, 5});
  near(run1("aten.permute", {x}, {std::vector<int64_t>{1, 0}})[0], {0, 3, 1, 4, 2, 5});
  near(run1("aten.slice.Tensor", {x}, {int64_t(1), int64_t(0), std::monostate{}, int64_t(2)})[0], {0, 2, 3, 5});
  near(run1("aten.select.int", {x}, {int64_t(0), int64_t(-1)})[0], {3, 4, 5});
  near(run1("aten.expand", {R(DType::F64, {2, 1}, {7, 8})}, {std::vector<int64_t>{2, 3}})[0], {7, 7, 7, 8, 8, 8});
  auto sp = run1("aten.split.Tensor", {x}, {int64_t(2), int64_t(1)});
  REQUIRE(sp.size() == 2);
  near(sp[0], {0, 1, 3, 4});
  near(sp[1], {2, 5});
  Graph g;
  Node *a = g.addPlaceholder("a", T(DType::F64, {2, 3}), InputRole::UserInput);
  Node *b = g.addPlaceholder("b", T(DType::F64, {1, 3}), InputRole::UserInput);
  g.setOutputs({buildCall(g, "c", "aten.cat", {std::vector<Node *>{a, b}}, {})});
  near(evaluate(g, {x, R(DType::F64, {1, 3}, {9, 9, 9})})[0], {0, 1, 2, 3, 4, 5, 9, 9, 9});
}

namespace {
/// Graph over placeholders for `ins`; `mk` builds the op's positional args from them.
std::vector<RefTensor> runWith(const std::string &target, const std::vector<RefTensor> &ins,
                               const std::function<std::vector<Arg>(const std::vector<Node *> &)> &mk,
                               std::vector<std::pair<std::string, Arg>> kw = {}) {
  Graph g;
  std::vector<Node *> ph;
  for (size_t i = 0; i < ins.size(); ++i)
    ph.push_back(g.addPlaceholder("in" + std::to_string(i), T(ins[i].dtype, ins[i].shape), InputRole::UserInput));
  Node *n = buildCall(g, "op", target, mk(ph), kw);
  std::vector<Node *> outs;
  for (size_t i = 0; i < n->types.size(); ++i)
    outs.push_back(n->types.size() == 1 ? n : buildCall(g, "r" + std::to_string(i), "getitem", {n, (int64_t)i}, {}));
  g.setOutputs(outs);
  return evaluate(g, ins);
}
} // namespace

TEST_CASE("where with a scalar self", "[refeval]") {
  RefTensor c = R(DType::Bool, {3}, {1, 0, 1}), x = R(DType::F64, {3}, {-1, 0, 1});
  near(runWith("aten.where.ScalarSelf", {c, x}, [](auto &p) { return std::vector<Arg>{p[0], 9.0, p[1]}; })[0],
       {9, 0, 9});
}

TEST_CASE("gather, scatter_add, index_select, embedding, matmul values", "[refeval]") {
  RefTensor x = R(DType::F64, {2, 3}, {0, 1, 2, 3, 4, 5});
  RefTensor ix = R(DType::I64, {2, 1}, {2, 0});
  near(runWith("aten.gather", {x, ix}, [](auto &p) { return std::vector<Arg>{p[0], int64_t(1), p[1]}; })[0], {2, 3});
  RefTensor z = R(DType::F64, {2, 3}, {0, 0, 0, 0, 0, 0});
  RefTensor src = R(DType::F64, {2, 1}, {10, 20});
  near(runWith("aten.scatter_add", {z, ix, src},
               [](auto &p) { return std::vector<Arg>{p[0], int64_t(1), p[1], p[2]}; })[0],
       {0, 0, 10, 20, 0, 0});
  RefTensor bad = R(DType::I64, {2, 1}, {3, 0});
  CHECK_THROWS_WITH(runWith("aten.gather", {x, bad}, [](auto &p) { return std::vector<Arg>{p[0], int64_t(1), p[1]}; }),
                    Catch::Contains("index 3 is out of bounds for dimension 1 with size 3"));
  RefTensor v = R(DType::I64, {3}, {1, 1, 0});
  near(runWith("aten.index_select", {x, v}, [](auto &p) { return std::vector<Arg>{p[0], int64_t(0), p[1]}; })[0],
       {3, 4, 5, 3, 4, 5, 0, 1, 2});
  near(runWith("aten.embedding", {x, v}, [](auto &p) { return std::vector<Arg>{p[0], p[1]}; })[0],
       {3, 4, 5, 3, 4, 5, 0, 1, 2});
  RefTensor w = R(DType::F64, {3, 2}, {1, 0, 0, 1, 1, 1});
  near(run1("aten.mm", {x, w}, {})[0], {2, 3, 8, 9});
  RefTensor bias = R(DType::F64, {2}, {100, 200});
  near(run1("aten.addmm", {bias, x, w}, {}, {{"beta", int64_t(2)}, {"alpha", 0.5}})[0], {201, 401.5, 204, 404.5});
  RefTensor bx = R(DType::F64, {2, 1, 2}, {1, 2, 3, 4});
  RefTensor by = R(DType::F64, {2, 2, 1}, {1, 1, 2, 0});
  near(run1("aten.bmm", {bx, by}, {})[0], {3, 6});
  RefTensor wl = R(DType::F64, {2, 3}, {1, 0, 1, 0, 1, 0});
  near(run1("aten.linear", {x, wl, bias}, {})[0], {102, 201, 108, 204});
}

TEST_CASE("factory values", "[refeval]") {
  near(run1("aten.arange.start_step", {}, {int64_t(1), int64_t(8), int64_t(3)})[0], {1, 4, 7});
  near(run1("aten.arange.default", {}, {1.5})[0], {0, 1});
  near(run1("aten.full", {}, {std::vector<int64_t>{2}, 2.5})[0], {2.5, 2.5});
  RefTensor x = R(DType::F64, {2, 2}, {1, 2, 3, 4});
  near(run1("aten.tril", {x}, {})[0], {1, 0, 3, 4});
  near(run1("aten.triu", {x}, {int64_t(1)})[0], {0, 2, 0, 0});
}

TEST_CASE("softmax family and losses", "[refeval]") {
  RefTensor row = R(DType::F64, {1, 3}, {1, 2, 3});
  // logsumexp([1,2,3]) = 3.40760596444438.
  near(run1("aten._log_softmax", {row}, {int64_t(-1), false})[0],
       {-2.40760596444438, -1.40760596444438, -0.40760596444438}, 1e-13);
  near(run1("aten.softmax.int", {row}, {int64_t(1)})[0],
       {0.09003057317038046, 0.24472847105479764, 0.6652409557748219}, 1e-15);
  RefTensor tgt = R(DType::I64, {1}, {2});
  near(run1("aten.cross_entropy_loss", {row, tgt}, {})[0], {0.40760596444438}, 1e-13);
  // Two rows, weights, an ignored row: mean = sum(-w[t] * x[t]) / sum(w[t]).
  RefTensor lp = R(DType::F64, {3, 2}, {-1, -2, -3, -4, -5, -6});
  RefTensor t3 = R(DType::I64, {3}, {1, 0, -100});
  RefTensor wt = R(DType::F64, {2}, {0.5, 2});
  auto nl = run1("aten.nll_loss_forward", {lp, t3, wt}, {int64_t(1), int64_t(-100)});
  near(nl[0], {(2 * 2 + 0.5 * 3) / 2.5});
  near(nl[1], {2.5});
  near(run1("aten.nll_loss", {lp, t3}, {std::monostate{}, int64_t(0)})[0], {2, 3, 0});
  RefTensor a = R(DType::F64, {2}, {1, 2}), b = R(DType::F64, {2}, {3, 5});
  near(run1("aten.mse_loss", {a, b}, {})[0], {(4 + 9) / 2.0});
  near(run1("aten.mse_loss", {a, b}, {int64_t(2)})[0], {13});
}

TEST_CASE("layer norm values", "[refeval]") {
  RefTensor x = R(DType::F64, {1, 3}, {1, 2, 3});
  // mean 2, biased var 2/3, rstd = 1 / sqrt(2/3 + 1e-5).
  double rs = 1.0 / std::sqrt(2.0 / 3.0 + 1e-5);
  near(run1("aten.layer_norm", {x}, {std::vector<int64_t>{3}})[0], {-rs, 0, rs});
  RefTensor w = R(DType::F64, {3}, {1, 2, 3}), b = R(DType::F64, {3}, {0, 1, 0});
  auto r = runWith("aten.native_layer_norm", {x, w, b}, [](auto &p) {
    return std::vector<Arg>{p[0], std::vector<int64_t>{3}, p[1], p[2], 1e-5};
  });
  REQUIRE(r.size() == 3);
  near(r[0], {-rs, 1, 3 * rs});
  CHECK(r[1].shape == Shape{1, 1});
  near(r[1], {2});
  near(r[2], {rs});
}

namespace {
/// Central-difference vector-Jacobian product of `f` at `x` with cotangent `dy`.
std::vector<double> numericVjp(const std::function<RefTensor(const RefTensor &)> &f, RefTensor x,
                               const RefTensor &dy) {
  const double eps = 1e-6;
  std::vector<double> g(x.numel());
  for (int64_t i = 0; i < x.numel(); ++i) {
    double v = x.data[i];
    x.data[i] = v + eps;
    RefTensor p = f(x);
    x.data[i] = v - eps;
    RefTensor m = f(x);
    x.data[i] = v;
    double s = 0;
    for (int64_t k = 0; k < p.numel(); ++k) s += dy.data[k] * (p.data[k] - m.data[k]) / (2 * eps);
    g[i] = s;
  }
  return g;
}
} // namespace

TEST_CASE("backward ops match central differences of their forward", "[refeval]") {
  std::mt19937_64 rng(42);
  RefTensor x = randomTensor(T(DType::F64, {3, 4}), rng);
  RefTensor dy = randomTensor(T(DType::F64, {3, 4}), rng);
  SECTION("_softmax_backward_data / _log_softmax_backward_data") {
    for (bool log : {false, true}) {
      std::string fwd = log ? "aten._log_softmax" : "aten._softmax";
      auto f = [&](const RefTensor &in) { return run1(fwd, {in}, {int64_t(0), false})[0]; };
      RefTensor y = f(x);
      auto dx = runWith(log ? "aten._log_softmax_backward_data" : "aten._softmax_backward_data", {dy, y},
                        [](auto &p) { return std::vector<Arg>{p[0], p[1], int64_t(0), DTypeLit{DType::F64}}; })[0];
      near(dx, numericVjp(f, x, dy), 1e-8);
    }
  }
  SECTION("gelu_backward") {
    for (std::string ap : {"none", "tanh"}) {
      auto f = [&](const RefTensor &in) { return run1("aten.gelu", {in}, {}, {{"approximate", ap}})[0]; };
      auto dx = run1("aten.gelu_backward", {dy, x}, {}, {{"approximate", ap}})[0];
      near(dx, numericVjp(f, x, dy), 1e-8);
    }
  }
  SECTION("native_layer_norm_backward") {
    RefTensor w = randomTensor(T(DType::F64, {4}), rng), b = randomTensor(T(DType::F64, {4}), rng);
    auto lnArgs = [](auto &p) { return std::vector<Arg>{p[0], std::vector<int64_t>{4}, p[1], p[2], 1e-5}; };
    auto fwd = runWith("aten.native_layer_norm", {x, w, b}, lnArgs);
    auto grads = runWith("aten.native_layer_norm_backward", {dy, x, fwd[1], fwd[2], w, b}, [](auto &p) {
      return std::vector<Arg>{p[0], p[1], std::vector<int64_t>{4}, p[2], p[3], p[4], p[5],
                              std::vector<bool>{true, true, true}};
    });
    REQUIRE(grads.size() == 3);
    near(grads[0], numericVjp([&](const RefTensor &in) { return runWith("aten.native_layer_norm", {in, w, b}, lnArgs)[0]; },
                              x, dy), 1e-7);
    near(grads[1], numericVjp([&](const RefTensor &in) { return runWith("aten.native_layer_norm", {x, in, b}, lnArgs)[0]; },
                              w, dy), 1e-7);
    near(grads[2], numericVjp([&](const RefTensor &in) { return runWith("aten.native_layer_norm", {x, w, in}, lnArgs)[0]; },
                              b, dy), 1e-7);
  }
}

TEST_CASE("evaluate checks inputs and in-place ops give the functional value", "[refeval]") {
  Graph g;
  Node *x = g.addPlaceholder("x", T(DType::F32, {2}), InputRole::UserInput);
  Node *a = buildCall(g, "a", "aten.add_.Scalar", {x, int64_t(1)}, {});
  Node *z = buildCall(g, "z", "aten.zero_", {a}, {});
  g.setOutputs({a, z});
  auto out = evaluate(g, {R(DType::F32, {2}, {1.5, -1})});
  near(out[0], {2.5, 0});
  near(out[1], {0, 0});
  CHECK_THROWS_AS(evaluate(g, {R(DType::F64, {2}, {1, 2})}), Error);
  std::mt19937_64 rng(1);
  RefTensor ri = randomTensor(T(DType::I64, {100}), rng, -3, 3);
  for (double v : ri.data) {
    CHECK(v == std::floor(v));
    CHECK(v >= -3);
    CHECK(v < 3);
  }
}

TEST_CASE("the exported MLP loss graph equals cross_entropy_loss", "[refeval]") {
  // The op sequence of examples/mlp/mlp.pt2 after the two addmm (see its ops.txt):
  // F.cross_entropy as torch.export decomposes it, with ignore_index -100.
  Graph g;
  Node *z = g.addPlaceholder("logits", T(DType::F32, {4, 5}), InputRole::UserInput);
  Node *t = g.addPlaceholder("target", T(DType::I64, {4}), InputRole::UserInput);
  auto B = [&](const char *name, const char *target, std::vector<Arg> a,
               std::vector<std::pair<std::string, Arg>> kw = {}) { return buildCall(g, name, target, a, kw); };
  EnumLit cpu{"device(type='cpu')"};
  Node *ls = B("_log_softmax", "aten._log_softmax.default", {z, int64_t(1), false});
  Node *ne = B("ne", "aten.ne.Scalar", {t, int64_t(-100)});
  Node *st = B("scalar_tensor", "aten.scalar_tensor.default", {int64_t(0)},
               {{"dtype", DTypeLit{DType::I64}}, {"layout", EnumLit{"torch.strided"}}, {"device", cpu}});
  Node *wh = B("where", "aten.where.self", {ne, t, st});
  Node *un = B("unsqueeze", "aten.unsqueeze.default", {wh, int64_t(1)});
  Node *ga = B("gather", "aten.gather.default", {ls, int64_t(1), un});
  Node *sq = B("squeeze", "aten.squeeze.dims", {ga, std::vector<int64_t>{1}});
  Node *ng = B("neg", "aten.neg.default", {sq});
  Node *ne1 = B("ne_1", "aten.ne.Scalar", {t, int64_t(-100)});
  Node *st1 = B("scalar_tensor_1", "aten.scalar_tensor.default", {int64_t(0)}, {{"dtype", DTypeLit{DType::F32}}});
  Node *wh1 = B("where_1", "aten.where.self", {ne1, ng, st1});
  Node *ne2 = B("ne_2", "aten.ne.Scalar", {t, int64_t(-100)});
  Node *s1 = B("sum_1", "aten.sum.dim_IntList", {ne2, std::vector<int64_t>{}});
  CHECK(s1->type() == T(DType::I64, {}));
  Node *tc = B("_to_copy", "aten._to_copy.default", {s1}, {{"dtype", DTypeLit{DType::F32}}, {"device", cpu}});
  Node *s2 = B("sum_2", "aten.sum.dim_IntList", {wh1, std::vector<int64_t>{}});
  Node *dv = B("div", "aten.div.Tensor", {s2, tc});
  CHECK(dv->type() == T(DType::F32, {}));
  Node *ce = B("ce", "aten.cross_entropy_loss.default", {z, t});
  g.setOutputs({dv, ce});
  std::mt19937_64 rng(7);
  RefTensor logits = randomTensor(T(DType::F32, {4, 5}), rng, -3, 3);
  RefTensor target = R(DType::I64, {4}, {0, 4, -100, 2});
  auto out = evaluate(g, {logits, target});
  // By hand: mean over the 3 non-ignored rows of logsumexp(row) - row[target].
  double want = 0;
  for (int r : {0, 1, 3}) {
    double lse = 0;
    for (int c = 0; c < 5; ++c) lse += std::exp(logits.data[r * 5 + c]);
    want += std::log(lse) - logits.data[r * 5 + (int)target.data[r]];
  }
  want /= 3;
  near(out[0], {want}, 1e-12);
  near(out[1], {want}, 1e-12);
}
