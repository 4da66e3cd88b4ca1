//===- PartitionImpl.h - Shared pieces of the partitioners ------*- C++ -*-===//
//
// Internal to lib/Partition. The two partitioners only differ in how they pick
// the saved set; classification of the joint graph (JointInfo) and the
// extraction of the forward and backward graphs from a saved set (extract) are
// shared, as in PyTorch (classify_nodes / _extract_fwd_bwd_modules in
// torch/_functorch/partitioners.py).
//===----------------------------------------------------------------------===//
#pragma once

#include "aotc/Graph.h"

#include <unordered_map>
#include <unordered_set>
#include <vector>

namespace aotc::part {

/// The joint graph, classified. All pointers point into `joint`.
struct JointInfo {
  const Graph *joint = nullptr;
  std::vector<Node *> primals;    ///< Non-tangent placeholders, in order.
  std::vector<Node *> tangents;   ///< Tangent placeholders, in order.
  std::vector<Node *> fwdOutputs; ///< The first numForwardOutputs outputs.
  std::vector<Node *> bwdOutputs; ///< The gradient outputs (one per gradOf entry).
  /// Call nodes computable from the primals that the forward outputs need
  /// (PyTorch's required_fw_nodes / the default partition's forward graph).
  std::unordered_set<const Node *> requiredFw;
  /// Tangents, everything that (transitively) uses them, and the bwd outputs.
  std::unordered_set<const Node *> requiredBw;
  std::unordered_map<const Node *, std::vector<Node *>> users; ///< Output node included.
  std::unordered_map<const Node *, size_t> order;              ///< Position in `joint`.

  bool isPrimal(const Node *n) const {
    return n->isPlaceholder() && n->role != InputRole::Tangent;
  }
  const std::vector<Node *> &usersOf(const Node *n) const;
};

/// Dead code elimination and common-subexpression elimination of the joint
/// graph (PyTorch runs DCE + fx_graph_cse before partitioning; Cse.cpp).
/// Duplicates are merged into their first occurrence; joint outputs keep
/// their identity.
void prepareJoint(Graph &joint);

/// Checks the joint-graph contract on `joint`/`p` and classifies the nodes.
/// Contract violations are internal errors (they are bugs of earlier stages).
JointInfo analyzeJoint(const Program &p, const Graph &joint);

/// What the backward needs for a candidate saved set.
struct BackwardPlan {
  /// The saved values the backward reads, in joint-graph order (candidates that
  /// are placeholders, duplicates, or unused by the backward are dropped).
  std::vector<Node *> saved;
  /// The call nodes the backward computes: every ancestor of a gradient that is
  /// not a primal, a tangent or a saved value.
  std::unordered_set<const Node *> needed;
};
/// Computes the BackwardPlan of `candidates` (internal error if a candidate
/// depends on a tangent or is tuple-valued).
BackwardPlan planBackward(const JointInfo &info, const std::vector<Node *> &candidates);
/// Sum of numel x itemsize over single-result nodes.
int64_t bytesOf(const std::vector<Node *> &nodes);

/// Builds p.forward, p.backward and p.saved from the joint graph and a
/// candidate saved set (any order; duplicates and primals ignored; candidates
/// the backward does not use are dropped). The backward computes every
/// ancestor of the gradients that is not a primal, a tangent or saved, in the
/// order of PyTorch's reordering_to_mimic_autograd_engine (see extract.cpp).
/// Sets p.stage = "partition".
void extract(Program &p, const JointInfo &info, const std::vector<Node *> &candidates);

/// Saved set of the default partitioner (every forward node; extract() keeps
/// those the backward uses).
std::vector<Node *> defaultSavedValues(const JointInfo &info);
/// Saved set of the min-cut network. `banned` (optional) receives the nodes
/// banned from recomputation. `fusionFactor` = PyTorch's weights (x2 for a
/// value every user fuses with); false weighs plain bytes x 1.1^dist.
std::vector<Node *> minCutSavedValues(const JointInfo &info,
                                      std::unordered_set<const Node *> *banned = nullptr,
                                      bool fusionFactor = true);

} // namespace aotc::part
