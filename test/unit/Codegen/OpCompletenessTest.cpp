//===- OpCompletenessTest.cpp - Every registered op has a way through -------===//
//
// One home for an op (docs/op-anatomy.md): what the pipeline does with an op is read from its
// OpDef. This test fails when a registered op has no way through the pipeline: a primitive
// that codegen cannot lower, a composite with no decompose or lower rule, or a differentiable
// op that reaches autodiff without a derivative rule.
//===----------------------------------------------------------------------===//
#include "aotc/Autodiff.h"
#include "aotc/Decompositions.h"
#include "aotc/Kernels.h"
#include "aotc/OpRegistry.h"

#include <catch2/catch.hpp>

#include <algorithm>
#include <set>

using namespace aotc;

namespace {
std::set<std::string> targetsOf(const std::vector<std::pair<std::string, std::string>> &table) {
  std::set<std::string> s;
  for (auto &[t, summary] : table) s.insert(t);
  return s;
}
} // namespace

TEST_CASE("registry: every op is lowered by codegen, or rewritten by a rule, and differentiable ones have a rule",
          "[ops][table]") {
  const std::vector<std::string> cg = codegenTargets();
  const std::set<std::string> dec = targetsOf(decomposeTable()), low = targetsOf(lowerTable());
  const DerivativeRules &rules = DerivativeRules::builtin();
  int primitives = 0, composites = 0;
  for (const auto &[t, d] : OpRegistry::get().all()) {
    INFO(t);
    if (d.primitive) {
      ++primitives;
      CHECK(std::binary_search(cg.begin(), cg.end(), t));
      CHECK(d.category != OpCategory::Composite);
    } else {
      ++composites;
      // Rewritten by a rule, functionalized away (in-place), or a check the readers drop.
      CHECK((dec.count(t) || low.count(t) || d.schema.mutates || d.schema.numReturns == 0));
      CHECK_FALSE(d.scalar.has_value());
    }
    // What reaches the joint graph from a user's graph: what decompose keeps. The ops that
    // only derivative rules emit have no rule of their own (aotc has no double backward).
    static const std::set<std::string> backwardOnly = {
        "aotc.conv_input_grad.default", "aotc.conv_weight_grad.default",
        "aten.native_batch_norm_backward.default", "aten.native_group_norm_backward.default",
        "aotc.fft_r2c_backward.default", "aotc.fft_c2r_backward.default", "aotc.cholesky_backward.default",
        "aotc.solve_triangular_backward.default", "aotc.lu_solve_backward.default", "aotc.solve_backward.default",
        "aotc.lu_factor_backward.default", "aotc.lu_scaled_inverse.default", "aotc.eigh_backward.default",
        "aotc.svd_backward.default", "aotc.qr_backward.default", "aotc.pinv_backward.default",
        "aotc.cholesky_solve_backward.default", "aotc.cholesky_inverse_backward.default"};
    const bool reachesAutodiff = (d.primitive || low.count(t)) && !dec.count(t) && !backwardOnly.count(t);
    if (reachesAutodiff && !d.nonDifferentiable && !d.random) CHECK(rules.find(t) != nullptr);
  }
  CHECK(primitives > 80);
  CHECK(composites > 40);
}

TEST_CASE("registry: a primitive's scalar body reads arguments the op has", "[ops][table]") {
  for (const auto &[t, d] : OpRegistry::get().all()) {
    if (!d.scalar) continue;
    INFO(t);
    CHECK(d.category == OpCategory::Pointwise);
    CHECK_FALSE(d.scalar->args.empty());
    for (int i : d.scalar->args) CHECK((i >= 0 && i < (int)d.schema.args.size()));
  }
}
