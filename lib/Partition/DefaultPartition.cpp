//===- DefaultPartition.cpp - partition() and the default partitioner --------===//
//
// partition() is stage 5b's entry point (Stages.h): it checks the joint-graph
// contract, removes dead code and hands the saved-set choice to the selected
// partitioner. The default partitioner follows PyTorch's default_partition
// (torch/_functorch/partitioners.py): every node of the forward-only graph is
// a candidate (a tuple-valued node through its getitem users), and extract()
// keeps those the backward reads. Primals are never saved: aotc's backward
// receives them again.
//===----------------------------------------------------------------------===//
#include "PartitionImpl.h"

#include "aotc/Diagnostics.h"
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

void partition(Program &p, PartitionerKind kind) {
  AOTC_ASSERT(p.backward.nodes().empty(), "partition: the program is already partitioned");
  AOTC_ASSERT(p.stage == "joint" || p.stage == "lower",
              "partition: expected a joint graph (stage joint or lower), got stage '" + p.stage + "'");
  // The joint graph must outlive the extraction (JointInfo points into it).
  Graph joint = std::move(p.forward);
  p.forward = Graph();
  joint.verify();
  joint.eliminateDeadCode();
  part::JointInfo ji = part::analyzeJoint(p, joint);

  std::vector<Node *> saved;
  // As in PyTorch, a graph whose backward needs nothing from the tangents or
  // gradients has nothing to cut; the default partition handles it.
  if (kind == PartitionerKind::MinCut && !ji.requiredBw.empty())
    saved = part::minCutSavedValues(ji);
  else
    saved = part::defaultSavedValues(ji);
  part::extract(p, ji, saved);
}

} // namespace aotc
