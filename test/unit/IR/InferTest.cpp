//===- InferTest.cpp - Shape/dtype functions: promotion, broadcasting, dims ---===//
//
// Expected dtypes are torch.result_type's answers (checked by hand against
// aten/src/ATen/native/TypeProperties.cpp's rules).
//===----------------------------------------------------------------------===//
#include "aotc/OpRegistry.h"

#include <catch2/catch.hpp>

using namespace aotc;

namespace {
TensorType T(DType d, Shape s) { return TensorType{d, std::move(s)}; }

struct G {
  Graph g;
  int n = 0;
  Node *in(DType d, Shape s) { return g.addPlaceholder("p" + std::to_string(n++), T(d, std::move(s)), InputRole::UserInput); }
  TensorType call(const std::string &t, std::vector<Arg> a,
                  std::vector<std::pair<std::string, Arg>> kw = {}) {
    return buildCall(g, "n" + std::to_string(n++), t, a, kw)->type();
  }
  std::string err(const std::string &t, std::vector<Arg> a, std::vector<std::pair<std::string, Arg>> kw = {}) {
    try {
      buildCall(g, "e" + std::to_string(n++), t, a, kw);
    } catch (const Error &e) {
      CHECK(e.kind() == Error::Kind::User);
      return e.what();
    }
    return "";
  }
};
} // namespace

TEST_CASE("promotion: wrapped scalars and 0-d tensors", "[infer][promotion]") {
  G g;
  Node *i3 = g.in(DType::I64, {3}), *f3 = g.in(DType::F32, {3}), *b3 = g.in(DType::Bool, {3});
  Node *f64s = g.in(DType::F64, {}), *f32s = g.in(DType::F32, {}), *i64s = g.in(DType::I64, {});
  Node *d3 = g.in(DType::F64, {3});
  // i64 tensor + 2.5 -> default float.
  CHECK(g.call("aten.mul.Scalar", {i3, 2.5}).dtype == DType::F32);
  CHECK(g.call("aten.add.Tensor", {i3, 2.5}).dtype == DType::F32);
  CHECK(g.call("aten.add.Scalar", {i3, int64_t(2)}).dtype == DType::I64);
  // A 0-d tensor of a higher category wins the category, with its own dtype.
  CHECK(g.call("aten.add.Tensor", {i3, f64s}) == T(DType::F64, {3}));
  // Same category: the dimensioned tensor decides.
  CHECK(g.call("aten.add.Tensor", {f3, f64s}).dtype == DType::F32);
  CHECK(g.call("aten.add.Tensor", {d3, f32s}).dtype == DType::F64);
  // Two 0-d tensors promote normally.
  CHECK(g.call("aten.add.Tensor", {f32s, f64s}) == T(DType::F64, {}));
  // bool tensors take any higher category.
  CHECK(g.call("aten.add.Tensor", {b3, int64_t(1)}).dtype == DType::I64);
  CHECK(g.call("aten.add.Tensor", {b3, i64s}).dtype == DType::I64);
  CHECK(g.call("aten.mul.Tensor", {b3, true}).dtype == DType::Bool);
  CHECK(g.call("aten.add.Tensor", {i3, true}).dtype == DType::I64);
  // INT_TO_FLOAT and ALWAYS_BOOL.
  CHECK(g.call("aten.div.Tensor", {i3, i3}).dtype == DType::F32);
  CHECK(g.call("aten.exp.default", {i3}).dtype == DType::F32);
  CHECK(g.call("aten.eq.Scalar", {f3, int64_t(0)}) == T(DType::Bool, {3}));
  CHECK(g.call("aten.lt.Tensor", {i3, f3}).dtype == DType::Bool);
  CHECK(g.call("aten.square.default", {b3}).dtype == DType::I64);
  CHECK(g.call("aten.where.ScalarOther", {b3, i3, 2.5}).dtype == DType::F32);
  CHECK(g.call("aten.where.self", {b3, f3, d3}).dtype == DType::F64);
  CHECK(g.call("aten.clamp.default", {i3, 0.5}).dtype == DType::F32);
  CHECK(g.call("aten.pow.Tensor_Scalar", {i3, int64_t(2)}).dtype == DType::I64);
  CHECK(g.call("aten.pow.Tensor_Scalar", {i3, 2.0}).dtype == DType::F32);
  CHECK(g.err("aten.sub.Tensor", {b3, b3}).find("bool") != std::string::npos);
  CHECK(g.err("aten.where.self", {f3, f3, f3}).find("boolean") != std::string::npos);
  CHECK(g.err("aten.add.Tensor", {i3, i3}, {{"alpha", 0.5}}).find("alpha") != std::string::npos);
}

TEST_CASE("broadcasting", "[infer]") {
  G g;
  Node *a = g.in(DType::F32, {4, 1}), *b = g.in(DType::F32, {3}), *c = g.in(DType::F32, {2, 3});
  Node *d = g.in(DType::F32, {4}), *m = g.in(DType::Bool, {2, 1, 3});
  CHECK(g.call("aten.add.Tensor", {a, b}) == T(DType::F32, {4, 3}));
  CHECK(g.call("aten.where.self", {m, a, b}) == T(DType::F32, {2, 4, 3}));
  std::string e = g.err("aten.mul.Tensor", {c, d});
  CHECK(e.find("shapes [2, 3] and [4] cannot be broadcast together") != std::string::npos);
  CHECK(g.err("aten.add_.Tensor", {b, c}).find("doesn't match the broadcast shape") != std::string::npos);
  Node *i = g.in(DType::I64, {3});
  CHECK(g.err("aten.add_.Tensor", {i, b}).find("can't be cast") != std::string::npos);
  CHECK(g.call("aten.add_.Tensor", {b, i}) == T(DType::F32, {3}));
}

TEST_CASE("reductions: dim=[] / None, negative dims, keepdim, dtypes", "[infer]") {
  G g;
  Node *x = g.in(DType::F32, {2, 3, 4}), *b = g.in(DType::Bool, {2, 3}), *i = g.in(DType::I64, {5});
  CHECK(g.call("aten.sum.dim_IntList", {x, std::vector<int64_t>{}}) == T(DType::F32, {}));
  CHECK(g.call("aten.sum.dim_IntList", {x, std::monostate{}}) == T(DType::F32, {}));
  CHECK(g.call("aten.sum.dim_IntList", {x, std::vector<int64_t>{-1}, true}) == T(DType::F32, {2, 3, 1}));
  CHECK(g.call("aten.sum.dim_IntList", {x, std::vector<int64_t>{0, -1}}) == T(DType::F32, {3}));
  CHECK(g.call("aten.sum.default", {b}) == T(DType::I64, {}));
  CHECK(g.call("aten.sum.dim_IntList", {b, std::vector<int64_t>{1}}) == T(DType::I64, {2}));
  CHECK(g.call("aten.sum.dim_IntList", {b, std::vector<int64_t>{1}}, {{"dtype", DTypeLit{DType::F32}}}) ==
        T(DType::F32, {2}));
  CHECK(g.call("aten.mean.dim", {x, std::vector<int64_t>{1}, true}) == T(DType::F32, {2, 1, 4}));
  CHECK(g.call("aten.amax.default", {x}) == T(DType::F32, {}));
  CHECK(g.call("aten.amax.default", {x, std::vector<int64_t>{-2}}) == T(DType::F32, {2, 4}));
  CHECK(g.call("aten.argmax.default", {x, int64_t(1), true}) == T(DType::I64, {2, 1, 4}));
  CHECK(g.call("aten.argmax.default", {x}) == T(DType::I64, {}));
  CHECK(g.call("aten.var.correction", {x, std::vector<int64_t>{2}}) == T(DType::F32, {2, 3}));
  CHECK(g.call("aten.logsumexp.default", {i, std::vector<int64_t>{0}}) == T(DType::F32, {}));
  CHECK(g.err("aten.mean.default", {i}).find("could not infer output dtype") != std::string::npos);
  CHECK(g.err("aten.sum.dim_IntList", {x, std::vector<int64_t>{1, -2}}).find("appears multiple times") !=
        std::string::npos);
  CHECK(g.err("aten.sum.dim_IntList", {x, std::vector<int64_t>{3}}).find("dimension out of range") !=
        std::string::npos);
}

TEST_CASE("views: view -1, permute, expand, squeeze, slice, select, split, cat", "[infer]") {
  G g;
  Node *x = g.in(DType::F32, {2, 3, 4});
  CHECK(g.call("aten.view.default", {x, std::vector<int64_t>{-1, 4}}) == T(DType::F32, {6, 4}));
  CHECK(g.err("aten.view.default", {x, std::vector<int64_t>{5, -1}}).find("invalid for input of size 24") !=
        std::string::npos);
  CHECK(g.call("aten.permute.default", {x, std::vector<int64_t>{2, 0, 1}}) == T(DType::F32, {4, 2, 3}));
  Node *y = g.in(DType::F32, {3, 1});
  CHECK(g.call("aten.expand.default", {y, std::vector<int64_t>{2, -1, 5}}) == T(DType::F32, {2, 3, 5}));
  CHECK(g.err("aten.expand.default", {y, std::vector<int64_t>{4, 5}}).find("must match") != std::string::npos);
  CHECK(g.call("aten.unsqueeze.default", {x, int64_t(-1)}) == T(DType::F32, {2, 3, 4, 1}));
  CHECK(g.call("aten.squeeze.dims", {y, std::vector<int64_t>{0, 1}}) == T(DType::F32, {3}));
  CHECK(g.call("aten.squeeze.dim", {y, int64_t(0)}) == T(DType::F32, {3, 1}));
  CHECK(g.call("aten.t.default", {y}) == T(DType::F32, {1, 3}));
  CHECK(g.call("aten.transpose.int", {x, int64_t(0), int64_t(-1)}) == T(DType::F32, {4, 3, 2}));
  CHECK(g.call("aten.slice.Tensor", {x, int64_t(2), int64_t(1), int64_t(9223372036854775807), int64_t(2)}) ==
        T(DType::F32, {2, 3, 2}));
  CHECK(g.call("aten.slice.Tensor", {x, int64_t(1), int64_t(-2)}) == T(DType::F32, {2, 2, 4}));
  CHECK(g.call("aten.select.int", {x, int64_t(1), int64_t(-1)}) == T(DType::F32, {2, 4}));
  CHECK(g.err("aten.select.int", {x, int64_t(1), int64_t(3)}).find("out of range") != std::string::npos);
  Node *s = buildCall(g.g, "split", "aten.split.Tensor", {x, int64_t(3), int64_t(2)}, {});
  REQUIRE(s->types.size() == 2);
  CHECK(s->types[1] == T(DType::F32, {2, 3, 1}));
  Node *z = g.in(DType::I64, {2, 5, 4});
  CHECK(g.call("aten.cat.default", {std::vector<Node *>{x, z}, int64_t(1)}) == T(DType::F32, {2, 8, 4}));
}

TEST_CASE("matmul, index, factory and composite shapes", "[infer]") {
  G g;
  Node *a = g.in(DType::F32, {4, 3}), *b = g.in(DType::F32, {3, 5}), *bias = g.in(DType::F32, {5});
  CHECK(g.call("aten.mm.default", {a, b}) == T(DType::F32, {4, 5}));
  CHECK(g.call("aten.addmm.default", {bias, a, b}) == T(DType::F32, {4, 5}));
  CHECK(g.err("aten.mm.default", {a, a}).find("cannot be multiplied (4x3 and 4x3)") != std::string::npos);
  Node *w = g.in(DType::F32, {5, 3});
  CHECK(g.call("aten.linear.default", {a, w, bias}) == T(DType::F32, {4, 5}));
  Node *ix = g.in(DType::I64, {4, 1});
  CHECK(g.call("aten.gather.default", {a, int64_t(1), ix}) == T(DType::F32, {4, 1}));
  Node *v = g.in(DType::I64, {2});
  CHECK(g.call("aten.index_select.default", {a, int64_t(0), v}) == T(DType::F32, {2, 3}));
  CHECK(g.call("aten.embedding.default", {a, ix}) == T(DType::F32, {4, 1, 3}));
  CHECK(g.call("aten.full.default", {std::vector<int64_t>{2}, int64_t(7)}) == T(DType::I64, {2}));
  CHECK(g.call("aten.full.default", {std::vector<int64_t>{2}, 0.5}) == T(DType::F32, {2}));
  CHECK(g.call("aten.scalar_tensor.default", {int64_t(1)}) == T(DType::F32, {}));
  CHECK(g.call("aten.arange.start_step", {int64_t(0), int64_t(10), int64_t(3)}) == T(DType::I64, {4}));
  CHECK(g.call("aten.arange.default", {2.5}) == T(DType::F32, {3}));
  CHECK(g.call("aten.zeros_like.default", {ix}) == T(DType::I64, {4, 1}));
  // native_layer_norm: mean and rstd keep leading dims, 1 for each normalized dim.
  Node *x = g.in(DType::F32, {2, 3, 4});
  Node *ln = buildCall(g.g, "ln", "aten.native_layer_norm", {x, std::vector<int64_t>{3, 4}, std::monostate{},
                                                            std::monostate{}, 1e-5}, {});
  CHECK(ln->types == std::vector<TensorType>{T(DType::F32, {2, 3, 4}), T(DType::F32, {2, 1, 1}),
                                             T(DType::F32, {2, 1, 1})});
  CHECK(g.err("aten.layer_norm.default", {x, std::vector<int64_t>{3}}).find("normalized_shape=[3]") !=
        std::string::npos);
  Node *logits = g.in(DType::F32, {4, 10}), *tgt = g.in(DType::I64, {4});
  CHECK(g.call("aten.cross_entropy_loss.default", {logits, tgt}) == T(DType::F32, {}));
  CHECK(g.call("aten.cross_entropy_loss.default", {logits, tgt, std::monostate{}, int64_t(0)}) ==
        T(DType::F32, {4}));
  Node *nl = buildCall(g.g, "nl", "aten.nll_loss_forward", {logits, tgt, std::monostate{}, int64_t(1), int64_t(-100)}, {});
  CHECK(nl->types == std::vector<TensorType>{T(DType::F32, {}), T(DType::F32, {})});
  CHECK(g.call("aten._log_softmax.default", {logits, int64_t(-1), false}) == T(DType::F32, {4, 10}));
  CHECK(g.err("aten._softmax.default", {tgt, int64_t(0), false}).find("floating") != std::string::npos);
}

TEST_CASE("schema flags: mutation, views, non-differentiable", "[infer]") {
  auto &r = OpRegistry::get();
  CHECK(r.lookup("aten.add_.Tensor")->schema.mutates);
  CHECK(r.lookup("aten.copy_.default")->schema.mutatedArgs == std::vector<int>{0});
  CHECK(r.lookup("aten.view.default")->schema.returnsAlias);
  CHECK(r.lookup("aten.view.default")->category == OpCategory::View);
  CHECK_FALSE(r.lookup("aten._unsafe_view.default")->schema.returnsAlias);
  for (const char *t : {"aten.eq.Scalar", "aten.ne.Tensor", "aten.argmax.default", "aten.full.default",
                        "aten.arange.start_step", "aten.zeros_like.default", "aten.scalar_tensor.default",
                        "aten.logical_not.default", "aten.sign.default"})
    CHECK(r.lookup(t)->nonDifferentiable);
  for (const char *t : {"aten.add.Tensor", "aten.gelu.default", "aten.native_layer_norm.default", "aten.gather.default"})
    CHECK_FALSE(r.lookup(t)->nonDifferentiable);
  CHECK(std::string(categoryName(r.lookup("aten.sum.dim_IntList")->category)) == "reduction");
}
