//===- DefaultPartition.cpp - partition() and the default partitioner --------===//
//
// partition() is stage 5b's entry point (Stages.h): it checks the joint-graph
// contract, removes dead code and duplicates (prepareJoint, Cse.cpp) and
// hands the saved-set choice to the selected partitioner. The default partitioner follows PyTorch's default_partition
// (torch/_functorch/partitioners.py): every node of the forward-only graph is
// a candidate (a tuple-valued node through its getitem users), and extract()
// keeps those the backward reads. Primals are never saved: aotc's backward
// receives them again.
//===----------------------------------------------------------------------===//
#include "PartitionImpl.h"

#include "aotc/Diagnostics.h"
#include "aotc/Partition.h"
#include "aotc/Stages.h"

namespace aotc {
namespace part {

std::vector<Node *> defaultSavedValues(const JointInfo &ji) {
  std::vector<Node *> saved;
  for (auto &up : ji.joint->nodes()) {
    Node *n = up.get();
    if (!ji.requiredFw.count(n)) continue;
    if (n->types.size() != 1) {
      for (Node *u : ji.usersOf(n)) {
        AOTC_ASSERT(u->isGetitem(), "partition: tuple-valued node '" + n->name +
                                        "' is read by '" + u->name + "', not a getitem");
        saved.push_back(u);
      }
    } else {
      saved.push_back(n);
    }
  }
  return saved;
}

} // namespace part

static void checkJointProgram(const Program &p) {
  AOTC_ASSERT(p.backward.nodes().empty(), "partition: the program is already partitioned");
  AOTC_ASSERT(p.stage == "joint" || p.stage == "lower",
              "partition: expected a joint graph (stage joint or lower), got stage '" + p.stage + "'");
  p.forward.verify();
}

std::vector<std::string> minCutNetworkSaved(const Program &p) {
  checkJointProgram(p);
  Graph joint = p.forward.clone();
  part::prepareJoint(joint);
  part::JointInfo ji = part::analyzeJoint(p, joint);
  std::vector<std::string> r;
  if (ji.requiredBw.empty()) return r;
  for (Node *n : part::planBackward(ji, part::minCutSavedValues(ji)).saved) r.push_back(n->name);
  return r;
}

void partition(Program &p, PartitionerKind kind) {
  checkJointProgram(p);
  // The joint graph must outlive the extraction (JointInfo points into it).
  Graph joint = std::move(p.forward);
  p.forward = Graph();
  part::prepareJoint(joint);
  part::JointInfo ji = part::analyzeJoint(p, joint);

  part::BackwardPlan plan = part::planBackward(ji, part::defaultSavedValues(ji));
  // As in PyTorch, a graph whose backward needs nothing from the tangents or
  // gradients has nothing to cut; the default partition handles it.
  if (kind == PartitionerKind::MinCut && !ji.requiredBw.empty()) {
    // The network minimizes *weighted* bytes: PyTorch's distance bias and its
    // x2 for values that would otherwise stay fused are heuristics, and can
    // pick more real bytes than necessary. aotc therefore solves it with
    // PyTorch's weights and with plain bytes x 1.1^dist, and keeps the
    // candidate with the fewest saved bytes (ties: the earliest in this
    // order). The default set is the last candidate, so min-cut never saves
    // more bytes than default (issue 2; docs/stage-partition.md).
    std::vector<part::BackwardPlan> cands = {
        part::planBackward(ji, part::minCutSavedValues(ji, nullptr, /*fusionFactor=*/true)),
        part::planBackward(ji, part::minCutSavedValues(ji, nullptr, /*fusionFactor=*/false)),
        plan};
    size_t best = 0;
    for (size_t i = 1; i < cands.size(); ++i)
      if (part::bytesOf(cands[i].saved) < part::bytesOf(cands[best].saved)) best = i;
    plan = std::move(cands[best]);
  }
  std::vector<Node *> saved = plan.saved;
  part::extract(p, ji, saved);
}

} // namespace aotc
