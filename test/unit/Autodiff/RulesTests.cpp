//===- RulesTests.cpp - The rule file format and the formula language ---------===//
#include "AutodiffTestUtil.h"

#include <catch2/catch.hpp>

#include <cstdio>
#include <fstream>
#include <unistd.h>

using namespace aotc;
using namespace aotc::test;

static std::string loadError(const std::string &yaml) {
  DerivativeRules r;
  try {
    r.loadString(yaml, "extra.yaml");
  } catch (const Error &e) {
    CHECK(e.kind() == Error::Kind::User);
    return e.what();
  }
  return "";
}

/// A temporary file that is removed at scope exit.
struct TempFile {
  std::string path;
  explicit TempFile(const std::string &text) {
    char buf[] = "/tmp/aotc-ad-XXXXXX.yaml";
    int fd = mkstemps(buf, 5);
    REQUIRE(fd >= 0);
    close(fd);
    path = buf;
    std::ofstream(path) << text;
  }
  ~TempFile() { std::remove(path.c_str()); }
};

TEST_CASE("formula parser", "[rules]") {
  SourceLoc at{"f.yaml", 3, 10};
  FormulaExpr e = parseFormula("mul(grad, aten.sum.dim_IntList(self, [-1, 0], True, dtype=self.dtype))", at);
  CHECK(e.str() == "mul(grad, aten.sum.dim_IntList(self, [-1, 0], True, dtype=self.dtype))");
  CHECK(e.kind == FormulaExpr::Kind::Call);
  CHECK(e.args[1].loc.col == 20); // "aten..." starts at offset 10
  FormulaExpr g = parseFormula(" grads[2] ", at);
  CHECK(g.kind == FormulaExpr::Kind::Index);
  CHECK(g.i == 2);
  FormulaExpr n = parseFormula("mul(x, -0.5e-1)", at);
  CHECK(n.args[1].kind == FormulaExpr::Kind::Float);
  CHECK(n.args[1].f == -0.05);
  FormulaExpr s = parseFormula("if_equal(approximate, 'tanh', a, b)", at);
  CHECK(s.args[1].kind == FormulaExpr::Kind::String);
  CHECK(s.args[1].name == "tanh");

  auto err = [&](const std::string &f) {
    try {
      parseFormula(f, at);
    } catch (const Error &e) {
      return std::string(e.what());
    }
    return std::string();
  };
  CHECK(err("mul(grad, other") == "f.yaml:3:25: error: malformed derivative formula: expected ')' before end of formula");
  CHECK(err("mul(grad,, other)") == "f.yaml:3:19: error: malformed derivative formula: unexpected ','");
  CHECK_THAT(err("mul(grad) x"), Catch::Contains("f.yaml:3:20: error") && Catch::Contains("after expression"));
  CHECK_THAT(err("mul(a=grad, other)"), Catch::Contains("positional argument after keyword"));
  CHECK_THAT(err("-grad"), Catch::Contains("use neg"));
  CHECK_THAT(err(""), Catch::Contains("empty formula"));
}

TEST_CASE("rule file errors are located", "[rules][errors]") {
  CHECK(loadError("- name: aten.frobnicate.default\n  self: grad\n") ==
        "extra.yaml:1:9: error: derivative rule for unknown op 'aten.frobnicate.default'");
  CHECK(loadError("- name: aten.mul.Tensor\n  self: mul(grad, othr)\n") ==
        "extra.yaml:2:19: error: unknown name 'othr' in formula for aten.mul.Tensor (inputs: self, "
        "other; also grad/grads[i], result/resultK)");
  CHECK(loadError("- name: aten.mul.Tensor\n  self: mul(grad other)\n") ==
        "extra.yaml:2:18: error: malformed derivative formula: expected ')', got 'o'");
  CHECK_THAT(loadError("- name: aten.mul.Tensor\n  selff: grad\n"),
             Catch::StartsWith("extra.yaml:2:3: error: aten.mul.Tensor has no input 'selff'"));
  CHECK_THAT(loadError("- name: aten.mul.Tensor\n  self: frob(grad)\n"),
             Catch::StartsWith("extra.yaml:2:9: error: unknown function 'frob'"));
  CHECK_THAT(loadError("- name: aten.native_layer_norm.default\n  input: grad\n"),
             Catch::StartsWith("extra.yaml:2:10: error: 'grad' is ambiguous"));
  CHECK_THAT(loadError("- name: aten.mul.Tensor\n  self: grads[1]\n"),
             Catch::StartsWith("extra.yaml:2:14: error: grads[1] out of range"));
  CHECK_THAT(loadError("- name: aten.mul.Tensor\n  self: [grad\n"), Catch::StartsWith("extra.yaml:") &&
                                                                        Catch::Contains("invalid YAML"));
  CHECK_THAT(loadError("name: aten.mul.Tensor\n"), Catch::Contains("a YAML list of entries"));
  CHECK_THAT(loadError("- self: grad\n"), Catch::StartsWith("extra.yaml:1:3: error: derivatives entry without 'name'"));
  CHECK_THAT(loadError("- name: aten.add.Tensor\n  alpha: grad\n"), Catch::Contains("only tensor inputs"));
  // Multi-line (folded) formulas are located on their own line.
  CHECK(loadError("- name: aten.mul.Tensor\n  self: >-\n    mul(grad,\n        bogus)\n") ==
        "extra.yaml:4:9: error: unknown name 'bogus' in formula for aten.mul.Tensor (inputs: self, "
        "other; also grad/grads[i], result/resultK)");
  CHECK_THAT(loadError("- name: aten.mul.Tensor\n  let:\n    a: mul(grad, b)\n    b: grad\n  self: a\n"),
             Catch::StartsWith("extra.yaml:3:18: error: unknown name 'b'"));
  CHECK_THAT(loadError("- name: aten.mul.Tensor\n  self: grad\n- name: mul.Tensor\n  self: grad\n"),
             Catch::Contains("second derivative rule for aten.mul.Tensor"));
}

TEST_CASE("the built-in file loads and documents its path", "[rules]") {
  std::string path = builtinDerivativesPath();
  CHECK(path.size() > 0);
  const DerivativeRules &r = DerivativeRules::builtin();
  CHECK(r.all().size() >= 60);
  const DerivativeRule *where = r.find("aten.where.self");
  REQUIRE(where);
  CHECK(where->nonDifferentiable.count("condition") == 1);
  CHECK(where->formulas.count("self") == 1);
}

TEST_CASE("a user rule overrides the built-in one, a wrong rule fails the gradcheck", "[rules][gradcheck]") {
  ProgramBuilder b;
  Node *x = b.input("x", f64({3, 4}));
  Node *y = b.call("aten.relu.default", {x});
  Program p = b.done({b.call("aten.mul.Tensor", {y, 3.0})});
  GradcheckOptions o;
  std::mt19937_64 rng(5);
  RefTensor xv = randomTensor(f64({3, 4}), rng);
  for (double &v : xv.data)
    if (std::fabs(v) < 0.05) v += 0.2;
  o.inputs = {xv};

  GradcheckResult good = gradcheck(p, DerivativeRules::builtin(), o);
  INFO(good.message);
  CHECK(good.ok);

  // relu' = 1 everywhere: wrong where x < 0.
  TempFile wrong("- name: aten.relu.default\n  self: grad\n");
  JointOptions jo;
  jo.extraDerivatives = {wrong.path};
  DerivativeRules withWrong = loadDerivativeRules(jo);
  CHECK(withWrong.find("aten.relu.default")->formulas.at("self").str() == "grad");
  GradcheckResult bad = gradcheck(p, withWrong, o);
  INFO(bad.message);
  CHECK_FALSE(bad.ok);
  REQUIRE(bad.inputs.size() == 1);
  CHECK(bad.inputs[0].maxViolation > 1.0);
  CHECK_THAT(bad.message, Catch::Contains("FAIL"));

  // The same rule written correctly by a user passes.
  TempFile right("- name: relu.default\n  self: mul(grad, _to_copy(gt(self, 0), dtype=grad.dtype))\n");
  jo.extraDerivatives = {right.path};
  GradcheckResult ok = gradcheck(p, loadDerivativeRules(jo), o);
  INFO(ok.message);
  CHECK(ok.ok);
}

TEST_CASE("a rule that misbehaves while building is reported at the rule", "[rules][errors]") {
  // The formula's result cannot be summed to the input's shape.
  DerivativeRules r = DerivativeRules::builtin();
  r.loadString("- name: aten.exp.default\n  self: sum(grad)\n", "bad.yaml");
  ProgramBuilder b;
  Node *x = b.input("x", f64({3}));
  Program p = b.done({b.call("aten.exp.default", {x})});
  // sum(grad) is f64[]: smaller than the input, as PyTorch's validate_outputs, an error.
  CHECK_THROWS_WITH(buildJoint(p, r), Catch::Contains("the formula produces f64[], which cannot be summed to "
                                                      "the input's f64[3]"));

  r.loadString("- name: aten.exp.default\n  self: view(grad, [3, 1])\n", "bad.yaml");
  ProgramBuilder b2;
  Node *x2 = b2.input("x", f64({3}));
  Program p2 = b2.done({b2.call("aten.exp.default", {x2})});
  CHECK_THROWS_WITH(buildJoint(p2, r),
                    Catch::StartsWith("bad.yaml:2:9: error: in the derivative of 'self' for node 'exp' "
                                      "(aten.exp.default): the formula produces f64[3, 1]"));

  r.loadString("- name: aten.exp.default\n  self: mm(grad, grad)\n", "bad.yaml");
  ProgramBuilder b3;
  Node *x3 = b3.input("x", f64({3}));
  Program p3 = b3.done({b3.call("aten.exp.default", {x3})});
  CHECK_THROWS_WITH(buildJoint(p3, r), Catch::StartsWith("bad.yaml:2:9: error: in the derivative of 'self'"));
}

// Regression (issue 9): loadString bound `const YAML::Node &` to the `second` of the
// temporary proxy that yaml-cpp's iterator returns, so every formula was read through a
// dead stack object (ASan: stack-use-after-scope in DerivativeRules::loadString). Under
// scripts/test.sh --sanitize=address this case fails without the fix; in every build it
// checks that each key's formula, non_differentiable mark and location survive loading.
TEST_CASE("formulas of every key survive loading (yaml-cpp iterator proxies)", "[rules]") {
  DerivativeRules r;
  r.loadString("- name: aten.mul.Tensor\n"
               "  self: mul(grad, other)\n"
               "  other: mul(grad, self)\n"
               "- name: aten.where.self\n"
               "  condition: non_differentiable\n"
               "  let:\n"
               "    z: zeros_like(grad)\n"
               "  self: where(condition, grad, z)\n"
               "  other: where(condition, z, grad)\n",
               "proxy.yaml");
  const DerivativeRule *mul = r.find("aten.mul.Tensor");
  REQUIRE(mul);
  REQUIRE(mul->formulas.size() == 2);
  CHECK(mul->formulas.count("self") == 1);
  CHECK(mul->formulas.count("other") == 1);
  const DerivativeRule *where = r.find("aten.where.self");
  REQUIRE(where);
  CHECK(where->nonDifferentiable.count("condition") == 1);
  CHECK(where->formulas.size() == 2);
  REQUIRE(where->lets.size() == 1);
  CHECK(where->lets[0].first == "z");
  // A bad formula of the last key is located at its own line, read from the live node.
  CHECK(loadError("- name: aten.mul.Tensor\n  self: mul(grad, other)\n  other: nosuchfn(grad)\n")
            .find("extra.yaml:3:") != std::string::npos);
}
