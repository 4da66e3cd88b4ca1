//===- SchemaTest.cpp - parseSchema and the registry's table -----------------===//
#include "aotc/OpRegistry.h"

#include <catch2/catch.hpp>

using namespace aotc;

TEST_CASE("parseSchema: kwarg-only Scalar default", "[schema]") {
  OpSchema s = parseSchema("add.Tensor(Tensor self, Tensor other, *, Scalar alpha=1) -> Tensor");
  CHECK(s.name == "add");
  CHECK(s.overload == "Tensor");
  CHECK(s.target() == "aten.add.Tensor");
  REQUIRE(s.args.size() == 3);
  CHECK(s.args[0].type == "Tensor");
  CHECK_FALSE(s.args[1].kwargOnly);
  CHECK(s.args[2].kwargOnly);
  CHECK(s.args[2].hasDefault);
  CHECK(std::get<int64_t>(s.args[2].defaultValue) == 1);
  CHECK(s.numReturns == 1);
  CHECK_FALSE(s.mutates);
  CHECK_FALSE(s.returnsAlias);
}

TEST_CASE("parseSchema: optional sized int list, dtype", "[schema]") {
  OpSchema s = parseSchema(
      "sum.dim_IntList(Tensor self, int[1]? dim, bool keepdim=False, *, ScalarType? dtype=None) -> Tensor");
  REQUIRE(s.args.size() == 4);
  CHECK(s.args[1].type == "int[]");
  CHECK(s.args[1].optional);
  CHECK(s.args[1].listLen == 1);
  CHECK_FALSE(s.args[1].hasDefault);
  CHECK(std::get<bool>(s.args[2].defaultValue) == false);
  CHECK(s.args[3].type == "ScalarType");
  CHECK(s.args[3].optional);
  CHECK(std::holds_alternative<std::monostate>(s.args[3].defaultValue));
}

TEST_CASE("parseSchema: no overload, str/float/list defaults", "[schema]") {
  OpSchema g = parseSchema("gelu(Tensor self, *, str approximate='none') -> Tensor");
  CHECK(g.overload == "default");
  CHECK(std::get<std::string>(g.args[1].defaultValue) == "none");
  OpSchema a = parseSchema("amax(Tensor self, int[1] dim=[], bool keepdim=False) -> Tensor");
  CHECK(std::get<std::vector<int64_t>>(a.args[1].defaultValue).empty());
  OpSchema l = parseSchema("layer_norm(Tensor input, SymInt[] normalized_shape, Tensor? weight=None, "
                           "Tensor? bias=None, float eps=1e-05, bool cudnn_enable=True) -> Tensor");
  CHECK(std::get<double>(l.args[4].defaultValue) == 1e-05);
  CHECK(std::get<bool>(l.args[5].defaultValue) == true);
  CHECK(l.args[2].optional);
  OpSchema h = parseSchema("hardtanh(Tensor self, Scalar min_val=-1, Scalar max_val=1) -> Tensor");
  CHECK(std::get<int64_t>(h.args[1].defaultValue) == -1);
  OpSchema lr = parseSchema("leaky_relu(Tensor self, Scalar negative_slope=0.01) -> Tensor");
  CHECK(std::get<double>(lr.args[1].defaultValue) == 0.01);
  OpSchema ce = parseSchema("nll_loss(Tensor self, Tensor target, Tensor? weight=None, int reduction=Mean, "
                            "SymInt ignore_index=-100) -> Tensor");
  CHECK(std::get<int64_t>(ce.args[3].defaultValue) == 1);
  CHECK(std::get<int64_t>(ce.args[4].defaultValue) == -100);
}

TEST_CASE("parseSchema: alias and mutation annotations, tuple returns", "[schema]") {
  OpSchema v = parseSchema("view(Tensor(a) self, SymInt[] size) -> Tensor(a)");
  CHECK(v.returnsAlias);
  CHECK_FALSE(v.mutates);
  CHECK(v.args[1].type == "SymInt[]");
  OpSchema m = parseSchema("add_.Tensor(Tensor(a!) self, Tensor other, *, Scalar alpha=1) -> Tensor(a!)");
  CHECK(m.mutates);
  REQUIRE(m.mutatedArgs.size() == 1);
  CHECK(m.mutatedArgs[0] == 0);
  CHECK(m.name == "add_");
  OpSchema ln = parseSchema("native_layer_norm(Tensor input, SymInt[] normalized_shape, Tensor? weight, "
                            "Tensor? bias, float eps) -> (Tensor, Tensor, Tensor)");
  CHECK(ln.numReturns == 3);
  OpSchema nl = parseSchema("nll_loss_forward(Tensor self, Tensor target, Tensor? weight, int reduction, "
                            "SymInt ignore_index) -> (Tensor output, Tensor total_weight)");
  CHECK(nl.numReturns == 2);
  OpSchema sp = parseSchema("split.Tensor(Tensor(a -> *) self, SymInt split_size, int dim=0) -> Tensor(a)[]");
  CHECK(sp.numReturns == 1);
  CHECK(sp.args[0].name == "self");
  CHECK(sp.args[0].type == "Tensor");
  OpSchema ip = parseSchema("index.Tensor(Tensor self, Tensor?[] indices) -> Tensor");
  CHECK(ip.args[1].type == "Tensor?[]");
  CHECK(ip.args[1].isTensorList());
  OpSchema bm = parseSchema("native_layer_norm_backward(Tensor grad_out, Tensor input, SymInt[] normalized_shape, "
                            "Tensor mean, Tensor rstd, Tensor? weight, Tensor? bias, bool[3] output_mask) -> "
                            "(Tensor, Tensor, Tensor)");
  CHECK(bm.args[7].type == "bool[]");
  CHECK(bm.args[7].listLen == 3);
}

TEST_CASE("canonicalTarget spellings", "[schema]") {
  CHECK(canonicalTarget("torch.ops.aten.add.Tensor") == "aten.add.Tensor");
  CHECK(canonicalTarget("aten::relu") == "aten.relu.default");
  CHECK(canonicalTarget("aten.relu") == "aten.relu.default");
  CHECK(canonicalTarget("aten.relu.default") == "aten.relu.default");
  CHECK(canonicalTarget("_operator.getitem") == "getitem");
  REQUIRE(OpRegistry::get().lookup("torch.ops.aten.mm.default"));
  CHECK(OpRegistry::get().lookup("aten.mm")->category == OpCategory::Matmul);
  CHECK(OpRegistry::get().lookup("aten.nonexistent.default") == nullptr);
}

TEST_CASE("every registered schema round-trips its target", "[schema]") {
  for (auto &[t, d] : OpRegistry::get().all()) {
    CHECK(d.target() == t);
    CHECK(d.infer);
    CHECK(d.eval);
  }
  CHECK(OpRegistry::get().all().size() > 60);
}
