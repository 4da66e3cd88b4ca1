//===- OpsDocTest.cpp - docs/ops.md is generated from the registry ----------===//
//
// Fails when docs/ops.md does not match the registry. Regenerate with
//   AOTC_UPDATE_DOCS=1 ./unit_IR "[docs]"
//===----------------------------------------------------------------------===//
#include "aotc/OpRegistry.h"

#include <catch2/catch.hpp>

#include <algorithm>
#include <cstdlib>
#include <fstream>
#include <sstream>

using namespace aotc;

static std::string opsMarkdown() {
  std::ostringstream o;
  o << "# Op registry\n\n"
       "<!-- Generated from the registry by test/unit/IR/OpsDocTest.cpp; do not edit by hand.\n"
       "     Regenerate: AOTC_UPDATE_DOCS=1 ./unit_IR \"[docs]\" -->\n\n"
       "Every ATen overload aotc accepts (lib/IR/ops/*.cpp). Each has the exact schema of\n"
       "`native_functions.yaml` (defaults the exporter omits are filled from it), a category, a\n"
       "shape/dtype function following PyTorch's meta functions and type promotion, and a float64\n"
       "reference implementation (RefEval). *differentiable* = \"no\" means autodiff passes no\n"
       "gradient through the op and needs no rule; *mutates* marks in-place ops that\n"
       "functionalization must remove.\n\n"
       "Dtype conventions: comparisons and `logical_not` give bool; `sum` of bool/i64 gives i64;\n"
       "`div` and the transcendental functions promote integers to f32; Python numbers (wrapped\n"
       "scalars) and 0-d tensors only raise the result's category, never its width within a category\n"
       "(`i64[3] + 2.5` is f32, `f32[3] + f64[]` is f32, `i64[3] + f64[]` is f64). Reductions with\n"
       "`dim=None` or `dim=[]` reduce every dim.\n\n"
       "| target | category | differentiable | mutates | schema |\n"
       "|---|---|---|---|---|\n";
  for (auto &[t, d] : OpRegistry::get().all()) {
    const OpSchema &s = d.schema;
    std::string sig = s.name + (s.overload == "default" ? "" : "." + s.overload) + "(";
    for (size_t i = 0; i < s.args.size(); ++i) {
      if (i) sig += ", ";
      if (s.args[i].kwargOnly && (i == 0 || !s.args[i - 1].kwargOnly)) sig += "*, ";
      std::string ty = s.args[i].type;
      if (s.args[i].listLen > 0) ty = ty.substr(0, ty.size() - 2) + "[" + std::to_string(s.args[i].listLen) + "]";
      bool mutated = std::count(s.mutatedArgs.begin(), s.mutatedArgs.end(), (int)i) > 0;
      sig += ty + (mutated ? "(a!)" : "") + (s.args[i].optional ? "?" : "") + " " + s.args[i].name;
      if (s.args[i].hasDefault) sig += "=" + argStr(s.args[i].defaultValue);
    }
    sig += ") -> " + std::to_string(s.numReturns) + (s.numReturns == 1 ? " result" : " results");
    o << "| `" << t << "` | " << categoryName(d.category) << " | " << (d.nonDifferentiable ? "no" : "yes")
      << " | " << (s.mutates ? "yes" : "") << " | `" << sig << "` |\n";
  }
  return o.str();
}

TEST_CASE("docs/ops.md matches the registry", "[docs]") {
  std::string path = std::string(AOTC_SRC_ROOT) + "/docs/ops.md";
  std::string want = opsMarkdown();
  if (std::getenv("AOTC_UPDATE_DOCS")) {
    std::ofstream(path) << want;
  }
  std::ifstream in(path);
  std::stringstream have;
  have << in.rdbuf();
  INFO("docs/ops.md is stale; regenerate with AOTC_UPDATE_DOCS=1 ./unit_IR \"[docs]\"");
  CHECK(have.str() == want);
}
