//===- FunctionalizeGradients.cpp - Mutating graphs' joint graphs vs PyTorch ---===//
//
// The torch fixtures of test/fixtures/functionalize (mutation of an intermediate,
// of an input, through unsqueeze/permute/slice/select views, copy_ into an input):
// capture -> functionalize -> decompose -> buildJoint, evaluated by the float64
// reference with the golden inputs. Torch differentiates only output.0, so the
// loss tangent is 1 and every `mutated_<name>` output gets a zero cotangent. The
// output, the mutated inputs and the gradients (w.r.t. the values before the
// mutation) must match torch eager: max|a - g| / max|g| <= 1e-5 (absolute when
// g == 0). Independent of codegen; the compiled path is test/lit/functionalize/run_*.test.
//===----------------------------------------------------------------------===//
#include "AutodiffTestUtil.h"
#include "aotc/Stages.h"
#include "aotc/safetensors.h"

#include <catch2/catch.hpp>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <set>

using namespace aotc;
using namespace aotc::test;

namespace {

double relErr(const RefTensor &a, const rt::Tensor &g) {
  REQUIRE(a.numel() == g.numel());
  double num = 0, den = 0;
  for (int64_t i = 0; i < g.numel(); ++i) {
    double d = std::fabs(a.data[i] - g.at(i));
    if (std::isnan(d)) return INFINITY;
    num = std::max(num, d);
    den = std::max(den, std::fabs(g.at(i)));
  }
  return den > 0 ? num / den : num;
}

struct FixtureResult {
  double worst = 0;              ///< Max error over output.0, mutated.*, grad.*.
  std::string report;            ///< One line per compared tensor.
  std::vector<std::string> mutated; ///< aotc's mutated inputs, in output order.
};

/// Runs one fixture through capture .. buildJoint and the reference evaluator.
FixtureResult checkFixture(const std::string &fn, const DerivativeRules &rules) {
  FixtureResult res;
  std::vector<std::string> &mutated = res.mutated;
  const std::string dir = AOTC_SRC_ROOT "/test/fixtures/functionalize/";
  Program p = capture(dir + fn + ".fx.txt", CaptureOptions{});
  functionalize(p);
  decompose(p);
  buildJoint(p, rules);
  p.forward.verify();
  rt::SafetensorsFile g = rt::readSafetensors(dir + fn + ".golden.safetensors");

  // Mutated outputs follow output 0, in placeholder order.
  mutated.clear();
  for (size_t k = 0; k < p.mutatedInputs.size(); ++k) {
    CHECK(p.mutatedInputs[k].first == int(1 + k));
    mutated.push_back(p.mutatedInputs[k].second);
  }
  REQUIRE(p.numForwardOutputs == 1 + (int)mutated.size());

  std::vector<RefTensor> in;
  int tangent = 0;
  for (Node *ph : p.forward.placeholders()) {
    if (ph->role == InputRole::Tangent) {
      in.emplace_back(ph->type().dtype, ph->type().shape, tangent++ == 0 ? 1.0 : 0.0);
      continue;
    }
    const rt::Tensor &t = g.get("input." + ph->name);
    RefTensor r(ph->type().dtype, ph->type().shape);
    REQUIRE(t.numel() == r.numel());
    for (int64_t i = 0; i < t.numel(); ++i) r.data[i] = t.at(i);
    in.push_back(std::move(r));
  }
  // Output 0 gets a tangent (1), and so does the new value of each mutated input that requires
  // grad (Program::outputHasTangent; 0 here: the golden's caller does not use the input after
  // the call, test/lit/capture/mutated_input.test covers a use); a mutated buffer's gets none.
  int withGrad = 0;
  for (const std::string &m : mutated)
    if (const Node *ph = p.forward.find(m); ph && ph->requiresGrad && isFloating(ph->type().dtype)) ++withGrad;
  CHECK(tangent == 1 + withGrad);
  std::vector<RefTensor> out = evaluate(p.forward, in);
  REQUIRE(out.size() == p.numForwardOutputs + p.gradOf.size());

  auto compare = [&](const RefTensor &a, const std::string &key) {
    double e = relErr(a, g.get(key));
    char buf[32];
    std::snprintf(buf, sizeof buf, "%.3g", e);
    res.report += fn + " " + key + " err " + buf + "\n";
    res.worst = std::max(res.worst, e);
  };
  compare(out[0], "output.0");
  for (size_t k = 0; k < mutated.size(); ++k) compare(out[1 + k], "mutated." + mutated[k]);
  std::set<std::string> graded;
  for (size_t j = 0; j < p.gradOf.size(); ++j) {
    compare(out[p.numForwardOutputs + j], "grad." + p.gradOf[j]);
    graded.insert(p.gradOf[j]);
  }
  // Every gradient and mutated input the golden has was computed.
  for (auto &[key, t] : g.tensors) {
    INFO(fn << ": golden " << key);
    if (key.rfind("grad.", 0) == 0) CHECK(graded.count(key.substr(5)) == 1);
    if (key.rfind("mutated.", 0) == 0)
      CHECK(std::find(mutated.begin(), mutated.end(), key.substr(8)) != mutated.end());
  }
  return res;
}

} // namespace

TEST_CASE("functionalized torch mutation fixtures: joint graphs match PyTorch", "[functionalize]") {
  const DerivativeRules &rules = DerivativeRules::builtin();
  SECTION("mutation of an intermediate") {
    FixtureResult r = checkFixture("mut_intermediate", rules);
    INFO(r.report);
    CHECK(r.worst <= 1e-5);
    CHECK(r.mutated.empty());
  }
  SECTION("in-place on an input") {
    FixtureResult r = checkFixture("mut_input", rules);
    INFO(r.report);
    CHECK(r.worst <= 1e-5);
    CHECK(r.mutated == std::vector<std::string>{"x_1"});
  }
  SECTION("writes through unsqueeze, permute, slice and select (slice_scatter, select_scatter)") {
    FixtureResult r = checkFixture("mut_view", rules);
    INFO(r.report);
    CHECK(r.worst <= 1e-5);
    CHECK(r.mutated.empty());
  }
  SECTION("copy_ into an input") {
    FixtureResult r = checkFixture("mut_copy", rules);
    INFO(r.report);
    CHECK(r.worst <= 1e-5);
    CHECK(r.mutated == std::vector<std::string>{"out_1"});
  }
}

TEST_CASE("a wrong slice_scatter or select_scatter rule fails the mut_view comparison", "[functionalize]") {
  for (const char *wrong : {"- name: aten.slice_scatter.default\n  self: grad\n  src: slice(grad, dim, start, end, step)\n",
                            "- name: aten.select_scatter.default\n  self: select_scatter(grad, zeros(src), dim, index)\n"
                            "  src: mul(select(grad, dim, index), 1.01)\n"}) {
    DerivativeRules rules = DerivativeRules::builtin();
    rules.loadString(wrong, "wrong.yaml");
    FixtureResult r = checkFixture("mut_view", rules);
    INFO(wrong << r.report);
    CHECK(r.worst > 1e-3);
  }
}
