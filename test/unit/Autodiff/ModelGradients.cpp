//===- ModelGradients.cpp - Joint graphs of the real models vs PyTorch --------===//
//
// capture(.pt2) -> decompose -> buildJoint, then the joint graph is evaluated by
// the float64 reference with the golden inputs and parameters and a unit loss
// tangent; its gradients must match the torch-eager gradients stored in
// golden.safetensors (grad.<FQN>, step 0): max|a - g| / max|g| <= 1e-4.
//===----------------------------------------------------------------------===//
#include "AutodiffTestUtil.h"
#include "aotc/safetensors.h"

#include <catch2/catch.hpp>

#include <cmath>

using namespace aotc;
using namespace aotc::test;

static RefTensor fromGolden(const rt::Tensor &t, const TensorType &want) {
  RefTensor r(want.dtype, want.shape);
  REQUIRE(t.numel() == r.numel());
  for (int64_t i = 0; i < t.numel(); ++i) r.data[i] = t.at(i);
  return r;
}

static void checkModel(const std::string &archive, const std::string &golden,
                       const std::vector<std::string> &extraGrad) {
  CaptureOptions co;
  co.requiresGrad = extraGrad;
  Program p = capture(archive, co);
  decompose(p);
  std::vector<Node *> primals = p.forward.placeholders();
  buildJoint(p, DerivativeRules::builtin());
  p.forward.verify();
  REQUIRE(p.stage == "joint");
  REQUIRE(p.numForwardOutputs == 1);

  rt::SafetensorsFile g = rt::readSafetensors(golden);
  std::vector<RefTensor> in;
  for (Node *ph : p.forward.placeholders()) {
    if (ph->role == InputRole::Tangent) {
      in.emplace_back(ph->type().dtype, ph->type().shape, 1.0);
      continue;
    }
    std::string key = ph->role == InputRole::Parameter ? "param." + ph->fqn : "input." + ph->name;
    INFO("golden tensor " << key);
    const rt::Tensor *t = g.find(key);
    REQUIRE(t);
    in.push_back(fromGolden(*t, ph->type()));
  }
  std::vector<RefTensor> out = evaluate(p.forward, in);
  REQUIRE(out.size() == 1 + p.gradOf.size());
  CHECK(std::fabs(out[0].data[0] - g.get("loss").at(0)) <= 1e-5 * std::fabs(g.get("loss").at(0)));
  size_t checked = 0;
  for (size_t j = 0; j < p.gradOf.size(); ++j) {
    Node *ph = p.forward.find(p.gradOf[j]);
    std::string key = "grad." + (ph->role == InputRole::Parameter ? ph->fqn : ph->name);
    const rt::Tensor *gt = g.find(key);
    INFO("gradient " << key);
    REQUIRE(gt);
    REQUIRE(gt->numel() == out[1 + j].numel());
    double maxDiff = 0, maxG = 0;
    for (int64_t i = 0; i < gt->numel(); ++i) {
      maxDiff = std::max(maxDiff, std::fabs(out[1 + j].data[i] - gt->at(i)));
      maxG = std::max(maxG, std::fabs(gt->at(i)));
    }
    INFO("max |a-g| = " << maxDiff << ", max |g| = " << maxG);
    CHECK(maxG > 0);
    CHECK(maxDiff / maxG <= 1e-4);
    ++checked;
  }
  CHECK(checked == p.gradOf.size());
  CHECK(checked >= primals.size() - 2);
}

TEST_CASE("MLP joint graph matches the PyTorch gradients", "[model]") {
  checkModel(AOTC_SRC_ROOT "/examples/mlp/mlp.pt2", AOTC_SRC_ROOT "/examples/mlp/golden.safetensors", {});
}

TEST_CASE("LN-GELU joint graph matches the PyTorch gradients, grad of x included", "[model]") {
  checkModel(AOTC_SRC_ROOT "/test/e2e/ln_gelu/ln_gelu.pt2", AOTC_SRC_ROOT "/test/e2e/ln_gelu/golden.safetensors",
             {"x"});
}
