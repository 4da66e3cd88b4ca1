// lib/Capture/Sizes.h: torch.export's size computations evaluated as Python evaluates them
// (operator, math and torch.sym_* on int / float / bool), the asserts and range checks.
#include "Sizes.h"

#include <catch2/catch.hpp>

using namespace aotc;
using namespace aotc::dynamic_sizes;

namespace {
Arg I(int64_t v) { return Value{v}; }
Arg F(double v) { return Value{v}; }
Arg B(bool v) { return Value{v}; }
Value ev(const std::string &t, std::vector<Arg> a) {
  std::optional<Value> r = evalSymbolic(t, a);
  REQUIRE(r);
  return *r;
}
std::string err(const std::string &t, std::vector<Arg> a) {
  try {
    evalSymbolic(t, a);
  } catch (const SymExprError &e) {
    return e.what();
  }
  return "no error";
}
} // namespace

TEST_CASE("size computations follow Python", "[sizes]") {
  CHECK(str(ev("_operator.floordiv", {I(-7), I(2)})) == "-4");
  CHECK(str(ev("_operator.mod", {I(-7), I(3)})) == "2");
  CHECK(str(ev("_operator.mod", {I(7), I(-3)})) == "-2");
  CHECK(str(ev("_operator.mod", {I(INT64_MIN), I(-1)})) == "0");
  CHECK(str(ev("_operator.truediv", {I(7), I(2)})) == "3.5");
  CHECK(str(ev("_operator.truediv", {I(6), I(2)})) == "3.0");
  CHECK(str(ev("_operator.floordiv", {F(7.5), I(2)})) == "3.0");
  CHECK(str(ev("_operator.pow", {I(3), I(4)})) == "81");
  CHECK(str(ev("_operator.pow", {I(2), I(-1)})) == "0.5");
  CHECK(str(ev("_operator.mul", {I(6), B(true)})) == "6");
  CHECK(str(ev("_operator.neg", {I(5)})) == "-5");
  CHECK(str(ev("_operator.and_", {I(3), I(4)})) == "0"); // bitwise on ints, as Python's &
  CHECK(str(ev("_operator.or_", {I(3), I(4)})) == "7");
  CHECK(str(ev("_operator.and_", {B(true), B(false)})) == "False");
  CHECK(str(ev("_operator.ge", {I(3), F(2.5)})) == "True");
  CHECK(str(ev("torch.sym_not", {B(false)})) == "True");
  CHECK(str(ev("torch.sym_max", {I(3), I(9)})) == "9");
  CHECK(str(ev("torch.sym_min", {F(3.5), I(9)})) == "3.5");
  CHECK(str(ev("torch.sym_ite", {B(false), I(1), I(2)})) == "2");
  CHECK(str(ev("torch.sym_float", {I(3)})) == "3.0");
  CHECK(str(ev("torch.sym_int", {F(-3.7)})) == "-3");
  CHECK(str(ev("math.ceil", {F(2.1)})) == "3");
  CHECK(str(ev("math.floor", {F(-2.1)})) == "-3");
  CHECK(str(ev("torch.ops.aten.sym_size.int", {Shape{3, 7, 16}, I(-2)})) == "7");
  CHECK(str(ev("torch.ops.aten.sym_numel.default", {Shape{3, 7, 16}})) == "336");
}

TEST_CASE("size computations: checks and errors", "[sizes]") {
  const std::string range = "torch.ops.aten.sym_constrain_range.default";
  const std::string forSize = "torch.ops.aten.sym_constrain_range_for_size.default";
  // (size, min, max), none for a default bound.
  CHECK_FALSE(evalSymbolic(range, {I(3), std::monostate{}, I(5)}));
  CHECK_THAT(err(range, {I(6), std::monostate{}, I(5)}), Catch::Contains("constrains this value to [-9223372036854775808, 5], got 6"));
  CHECK_THAT(err(forSize, {I(-1), std::monostate{}, std::monostate{}}), Catch::Contains("[0, 9223372036854775807], got -1"));
  CHECK_THAT(err(range, {I(1), I(2), I(5)}), Catch::Contains("[2, 5], got 1"));
  CHECK_FALSE(evalSymbolic("torch.ops.aten._assert_scalar.default", {B(true), std::string("m")}));
  CHECK_THAT(err("torch.ops.aten._assert_scalar.default", {B(false), std::string("Ne(s0, 13)")}),
             Catch::Contains("the export's runtime assertion fails: Ne(s0, 13)"));
  CHECK_THAT(err("torch.ops.aten.sym_size.int", {Shape{3, 7}, I(2)}), Catch::Contains("dim 2 out of range"));
  CHECK_THAT(err("_operator.floordiv", {I(1), I(0)}), Catch::Contains("division by zero"));
  CHECK_THAT(err("_operator.mul", {I(INT64_MAX), I(2)}), Catch::Contains("overflow"));
  CHECK_THAT(err("torch.sym_ite", {B(true), I(1)}), Catch::Contains("expected 3 arguments"));
  CHECK_THAT(err("_operator.add", {I(1)}), Catch::Contains("argument 1 is not a number"));
  CHECK(isSymbolicTarget("_operator.mul"));
  CHECK_FALSE(isSymbolicTarget("torch.sym_sqrt"));
}
