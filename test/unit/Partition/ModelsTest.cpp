//===- ModelsTest.cpp - Both partitioners on the MLP and LN-GELU fixtures ----===//
//
// Runs capture -> functionalize -> decompose -> joint -> lower on the real
// .pt2 fixtures, then both partitioners; checks the partition contract, that
// forward + backward reproduce the joint graph's outputs and gradients in the
// float64 reference evaluator (exactly: the same ops run in the same order per
// value), and the saved-bytes claims of issue 2: min-cut never saves more
// than default, and strictly less on LN-GELU.
//===----------------------------------------------------------------------===//
#include "aotc/Partition.h"
#include "aotc/RefEval.h"
#include "aotc/Stages.h"
#include "aotc/TextIR.h"

#include <catch2/catch.hpp>

#include <cmath>
#include <random>

using namespace aotc;

namespace {

Program lowered(const std::string &path, bool doLower) {
  Program p = capture(path, CaptureOptions{});
  functionalize(p);
  decompose(p);
  buildJoint(p, JointOptions{});
  if (doLower) lower(p);
  return p;
}


struct Result {
  std::vector<RefTensor> fwdOut, grads;
};

/// Runs a partitioned program: forward on the primals, then the backward on
/// primals + saved + tangents.
Result runPartitioned(const Program &p, const std::vector<RefTensor> &primals,
                      const std::vector<RefTensor> &tangents) {
  std::vector<RefTensor> f = evaluate(p.forward, primals);
  Result r;
  r.fwdOut.assign(f.begin(), f.begin() + p.numForwardOutputs);
  std::vector<RefTensor> bin = primals;
  bin.insert(bin.end(), f.begin() + p.numForwardOutputs, f.end());
  bin.insert(bin.end(), tangents.begin(), tangents.end());
  r.grads = evaluate(p.backward, bin);
  return r;
}

double maxAbsDiff(const RefTensor &a, const RefTensor &b) {
  REQUIRE(a.shape == b.shape);
  double m = 0;
  for (size_t i = 0; i < a.data.size(); ++i) m = std::max(m, std::fabs(a.data[i] - b.data[i]));
  return m;
}

/// Whether partition(MinCut) keeps the saved set of PyTorch's network
/// (minCutNetworkSaved) or another candidate with fewer bytes
/// (docs/stage-partition.md): pinned per model so a change is visible.
enum class Guard { Fires, Silent, Unchecked };

void checkModel(const std::string &path, bool strictlyFewer, bool doLower = true,
                Guard guard = Guard::Unchecked) {
  Program joint = lowered(path, doLower);
  REQUIRE((joint.stage == "lower" || joint.stage == "joint"));
  Program d = joint.clone(), m = joint.clone();
  partition(d, PartitionerKind::Default);
  partition(m, PartitionerKind::MinCut);
  INFO(partitionSummary(d) << partitionSummary(m));

  CHECK(savedBytes(m) <= savedBytes(d));
  if (strictlyFewer) CHECK(savedBytes(m) < savedBytes(d));
  std::vector<std::string> network = minCutNetworkSaved(joint);
  if (guard == Guard::Fires) {
    CHECK(network != m.saved);
  } else if (guard == Guard::Silent) {
    CHECK(network == m.saved);
  }

  // Random primals (class indices in [0, 10) for integer inputs), ones-like
  // random tangents.
  std::mt19937_64 rng(7);
  std::vector<RefTensor> primals, tangents;
  for (Node *n : joint.forward.placeholders()) {
    bool integral = isIntegral(n->type().dtype);
    RefTensor v = randomTensor(n->type(), rng, integral ? 0.0 : -1.0, integral ? 10.0 : 1.0);
    (n->role == InputRole::Tangent ? tangents : primals).push_back(v);
  }
  std::vector<RefTensor> all = primals;
  all.insert(all.end(), tangents.begin(), tangents.end());
  std::vector<RefTensor> j = evaluate(joint.forward, all);

  for (const Program *p : {&d, &m}) {
    Result r = runPartitioned(*p, primals, tangents);
    REQUIRE(r.fwdOut.size() + r.grads.size() == j.size());
    for (size_t i = 0; i < r.fwdOut.size(); ++i) CHECK(maxAbsDiff(r.fwdOut[i], j[i]) == 0.0);
    for (size_t i = 0; i < r.grads.size(); ++i)
      CHECK(maxAbsDiff(r.grads[i], j[r.fwdOut.size() + i]) == 0.0);
  }
  // The textual IR carries the partition: the summary of a re-parsed program
  // (--start-from=partition) is the same.
  for (const Program *p : {&d, &m}) {
    Program q = parseProgram(printProgram(*p), "partition.txt");
    CHECK(q.saved == p->saved);
    CHECK(partitionSummary(q) == partitionSummary(*p));
  }
  // Default vs min-cut gradients (issue 2: within 1e-6).
  Result rd = runPartitioned(d, primals, tangents), rm = runPartitioned(m, primals, tangents);
  for (size_t i = 0; i < rd.grads.size(); ++i) CHECK(maxAbsDiff(rd.grads[i], rm.grads[i]) <= 1e-6);
}

} // namespace

TEST_CASE("Partition: MLP fixture, default vs min-cut", "[partition][models]") {
  // PyTorch's weights save {addmm_1, amax, log} (3072 B) for the log-softmax
  // backward; the plain-bytes network keeps the log-softmax (sub_2 after lowering) (2560 B) and
  // recomputes ne(target) from the target (a primal: free to save), which
  // default saves: min-cut saves 64 bytes fewer than default.
  checkModel(std::string(AOTC_SRC_ROOT) + "/examples/mlp/mlp.pt2", /*strictlyFewer=*/true,
             /*doLower=*/true, Guard::Fires);
}

TEST_CASE("Partition: LN-GELU fixture, min-cut saves strictly fewer bytes", "[partition][models]") {
  // The plain-bytes network's set {rstd, the normalized x, gelu, out - y}
  // (49280 B) has fewer bytes than the set PyTorch's weights pick.
  checkModel(std::string(AOTC_SRC_ROOT) + "/test/e2e/ln_gelu/ln_gelu.pt2", /*strictlyFewer=*/true,
             /*doLower=*/true, Guard::Fires);
}

TEST_CASE("Partition: LN-GELU joint graph before lower (tuple-valued layer norm)",
          "[partition][models]") {
  // native_layer_norm returns 3 tensors read through getitems: its network
  // edge weighs INF and it is saved through its getitems. Whole layer norm and
  // gelu leave little to recompute: the strict saving needs lower's pieces.
  checkModel(std::string(AOTC_SRC_ROOT) + "/test/e2e/ln_gelu/ln_gelu.pt2", /*strictlyFewer=*/false,
             /*doLower=*/false);
}
