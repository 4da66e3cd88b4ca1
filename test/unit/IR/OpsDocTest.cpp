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
#include <map>
#include <string>
#include <vector>
#include <sstream>

using namespace aotc;

namespace {

/// "<target>\t<text>" lines of a data file (comments '#' and blank lines skipped).
std::vector<std::pair<std::string, std::string>> tabFile(const std::string &rel) {
  std::ifstream in(std::string(AOTC_SRC_ROOT) + "/" + rel);
  REQUIRE(in.good());
  std::vector<std::pair<std::string, std::string>> rows;
  std::string line;
  while (std::getline(in, line)) {
    if (line.empty() || line[0] == '#') continue;
    size_t tab = line.find('\t');
    REQUIRE(tab != std::string::npos);
    rows.emplace_back(line.substr(0, tab), line.substr(tab + 1));
  }
  return rows;
}

/// The torch version named by test/fixtures/core_aten.txt's first line.
std::string coreAtenTorchVersion() {
  std::ifstream in(std::string(AOTC_SRC_ROOT) + "/test/fixtures/core_aten.txt");
  std::string first;
  std::getline(in, first);
  size_t a = first.find("torch "), b = first.find(" (");
  return a == std::string::npos || b == std::string::npos ? "?" : first.substr(a + 6, b - a - 6);
}

/// Argument names of a torch schema string "name(Tensor self, *, int? dim=None) -> Tensor".
std::vector<std::string> schemaArgNames(const std::string &schema) {
  size_t open = schema.find('('), depth = 0, start = open + 1;
  std::vector<std::string> names;
  auto take = [&](size_t end) {
    std::string a = schema.substr(start, end - start);
    a = a.substr(0, a.find('='));
    while (!a.empty() && a.back() == ' ') a.pop_back();
    while (!a.empty() && a.front() == ' ') a.erase(0, 1);
    size_t sp = a.rfind(' '); // "*" (keyword-only marker) has no type: skipped
    if (sp != std::string::npos) names.push_back(a.substr(sp + 1));
  };
  for (size_t i = open + 1; i < schema.size(); ++i) {
    char c = schema[i];
    if (c == '(' || c == '[') ++depth;
    else if ((c == ')' || c == ']') && depth > 0) --depth;
    else if (c == ')' && depth == 0) {
      if (i > start) take(i);
      break;
    } else if (c == ',' && depth == 0) {
      take(i);
      start = i + 1;
    }
  }
  return names;
}

} // namespace

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
       "functionalization must remove. How PyTorch's OpInfo database fares against aotc (every\n"
       "OpInfo exported and run; the refusals by op): [opinfo.md](opinfo.md).\n\n"
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
  auto core = tabFile("test/fixtures/core_aten.txt");
  std::map<std::string, std::string> coreSchema(core.begin(), core.end());
  std::vector<RefusedOp> coreMissing, others;
  for (const RefusedOp &r : refusedOps()) (coreSchema.count(r.target) ? coreMissing : others).push_back(r);
  o << "\n## Core ATen coverage\n\n"
    << core.size() - coreMissing.size() << " of the " << core.size() << " Core ATen overloads of torch "
    << coreAtenTorchVersion()
    << " (the ops tagged `torch.Tag.core`: test/fixtures/core_aten.txt, written by\n"
       "tools/export/gen_core_aten.py) are in the table above. The other "
    << coreMissing.size()
    << ", each with the reason (lib/IR/ops/Refused.cpp;\n"
       "unit_IR \"core ATen: ...\" keeps the three lists consistent):\n\n"
       "| target | not supported because |\n|---|---|\n";
  for (const RefusedOp &r : coreMissing) o << "| `" << r.target << "` | " << r.reason << " |\n";
  o << "\n## Refused outside Core ATen\n\n"
       "Ops torch's default decompositions leave in exported graphs although they are not Core ATen,\n"
       "which aotc refuses by name (capture says `unsupported op '...': <reason>`; lib/IR/ops/Refused.cpp).\n"
       "They are what PyTorch's OpInfo database reaches (docs/opinfo.md); an op in neither table is\n"
       "`unknown op`.\n\n"
       "| target | not supported because |\n|---|---|\n";
  for (const RefusedOp &r : others) o << "| `" << r.target << "` | " << r.reason << " |\n";
  return o.str();
}

TEST_CASE("core ATen: every overload is registered or listed with its reason, and the lists agree", "[core-aten]") {
  auto core = tabFile("test/fixtures/core_aten.txt");
  std::map<std::string, std::string> coreSchema(core.begin(), core.end()), why;
  for (const RefusedOp &r : refusedOps()) {
    INFO(r.target);
    CHECK(why.emplace(r.target, r.reason).second); // one row per op
    CHECK(r.reason.size() > 10);
    CHECK(OpRegistry::get().lookup(r.target) == nullptr); // refused but registered: delete its row
    CHECK(r.target.rfind("torch.ops.", 0) != 0); // namespace.name.overload
    CHECK(std::count(r.target.begin(), r.target.end(), '.') == 2);
    CHECK(refusalReason(r.target) != nullptr);
    CHECK(refusalReason("torch.ops." + r.target) != nullptr);
  }
  CHECK(core.size() == coreSchema.size());
  const OpRegistry &reg = OpRegistry::get();
  int supported = 0, refused = 0;
  for (auto &[t, schema] : core) {
    const OpDef *d = reg.lookup(t);
    INFO(t);
    if (d) {
      ++supported;
      // The registry's schema is native_functions.yaml's: the same argument names in order.
      std::vector<std::string> names;
      for (auto &a : d->schema.args) names.push_back(a.name);
      CHECK(names == schemaArgNames(schema));
    } else {
      ++refused;
      CHECK(why.count(t) == 1); // neither registered nor listed with a reason
    }
  }
  CHECK(supported + refused == (int)core.size());
  CHECK(refusalReason("aten.frobnicate.default") == nullptr);
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
