//===- RealGraphsTest.cpp - decompose/lower on the fixture models' graphs ----===//
//
// decompose() on the MLP's TRAINING-dialect graph and lower() on the MLP and
// LN-GELU joint graphs (test/lit/lower/Inputs, printed by --emit=joint) keep
// every output equal in the float64 reference (relative 1e-12).
//===----------------------------------------------------------------------===//
#include "PassTestUtil.h"

#include "aotc/Decompositions.h"
#include "aotc/Stages.h"
#include "aotc/TextIR.h"

#include <fstream>
#include <sstream>

using namespace aotc;
using namespace aotc::testutil;

namespace {
Program load(const std::string &rel) {
  std::ifstream f(std::string(AOTC_SRC_ROOT) + "/" + rel);
  REQUIRE(f.good());
  std::stringstream ss;
  ss << f.rdbuf();
  return parseProgram(ss.str(), rel);
}
} // namespace

TEST_CASE("decompose preserves the MLP training-dialect graph", "[decompose]") {
  Program p = load("examples/mlp/mlp.training.fx.txt");
  Program q = checkPreserves(p, [](Program &x) { decompose(x); }, 2, {{"target", {0, 10}}});
  for (auto &n : q.forward.nodes()) {
    if (!n->isCall()) continue;
    INFO(n->target);
    CHECK((isPrimitive(n->target) || n->target == "aten._log_softmax.default"));
  }
}

TEST_CASE("lower preserves the MLP and LN-GELU joint graphs", "[lower]") {
  for (const char *f : {"test/lit/lower/Inputs/mlp.joint.txt", "test/lit/lower/Inputs/ln_gelu.joint.txt"}) {
    INFO(f);
    Program p = load(f);
    REQUIRE(p.stage == "joint");
    Program q = checkPreserves(p, [](Program &x) { lower(x); }, 2, {{"target", {0, 10}}});
    for (auto &n : q.forward.nodes())
      if (n->isCall()) CHECK(isPrimitive(n->target));
    CHECK(q.forward.outputs().size() == p.forward.outputs().size());
  }
}
