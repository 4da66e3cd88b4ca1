//===- Partition.h - Forward/backward partitioning (stage 5b) ---*- C++ -*-===//
//
// The entry point `partition(Program&, PartitionerKind)` is declared in
// Stages.h. It turns the joint graph (Program contract "Joint graph", see
// docs/stage-partition.md) into p.forward + p.backward + p.saved:
//  * PartitionerKind::Default -- PyTorch's default_partition: every forward
//    node the backward uses is saved; nothing is recomputed.
//  * PartitionerKind::MinCut -- PyTorch's min_cut_rematerialization_partition
//    (torch/_functorch/partitioners.py): a flow network with split nodes,
//    weights bytes x 1.1^clamp(dist_from_bw, 1, 100) (x2 when not otherwise
//    materialized; primals 0: the backward gets them again), after DCE + CSE
//    of the joint graph, solved by MaxFlow.h. aotc solves it with PyTorch's
//    weights and with plain bytes x 1.1^dist and keeps, among those two cuts
//    and the default set, the one with the fewest saved bytes (issue 2:
//    min-cut never saves more bytes than default).
// This header adds what the CLI and the tests need beyond Stages.h.
//===----------------------------------------------------------------------===//
#pragma once

#include "aotc/Graph.h"
#include "aotc/Stages.h"

#include <cstdint>
#include <string>
#include <vector>

namespace aotc {

/// The saved set the min-cut network with PyTorch's weights picks for a
/// joint-graph Program (stage joint or lower; not modified), before aotc's
/// choice among candidates (partition(MinCut) keeps the plain-bytes cut or
/// the default set instead when it has fewer bytes). Names in graph order,
/// unused and primal values dropped. For tests and diagnostics.
std::vector<std::string> minCutNetworkSaved(const Program &joint);

/// Total bytes of p.saved (numel x itemsize of each saved forward node; bool
/// is 1 byte). Requires a partitioned Program (stage "partition"); a saved
/// name missing from p.forward is an internal error.
int64_t savedBytes(const Program &p);

/// The saved area an object reserves for p.saved (the header's <name>_SAVED_BYTES without
/// --sanitize): each tensor starts on a kSavedTensorAlignment boundary, so it takes
/// savedSlotBytes(its bytes); codegen's plan (Plan.cpp) lays it out with the same function.
constexpr int64_t kSavedTensorAlignment = 64; // AOTC_ALIGNMENT of abi.h
int64_t savedSlotBytes(int64_t bytes);
int64_t savedAreaBytes(const Program &p);

/// Recomputed ops: backward call nodes that the forward graph also computes
/// (same node name; partition keeps the joint graph's names), as PyTorch's
/// partitioner debug output counts them (fw call nodes & bw call nodes).
/// Backward-only work that needs no tangent (e.g. a permute of a weight) is
/// not counted. In backward order.
std::vector<const Node *> recomputedNodes(const Program &p);

/// The `--emit=partition` summary printed after the two graphs. Every line
/// starts with "# " so the whole text stays valid FX/aotc text. Format:
///   # partition summary
///   # saved: <N> tensors, <B> bytes[ (the header's saved area: <A> bytes, ...)]
///   #   <name>: <type> (<bytes> bytes)          (one line per p.saved entry)
///   # recomputed: <K> ops
///   #   <name> = <target>                        (one line per recomputed node)
std::string partitionSummary(const Program &p);

/// `--emit=dot`: a Graphviz (DOT) picture of the joint graph of `joint`
/// (stage joint or lower; not modified) with the split partition(kind) picks
/// on a copy. Forward-only nodes and primals go into `cluster_forward`,
/// backward-only nodes and tangents into `cluster_backward`; nodes both graphs
/// compute (recomputed) stay in the forward cluster with class="recomputed".
/// Each p.saved tensor has class="saved" (red, bold) and red edges into the
/// backward; joint outputs get peripheries=2. Leading `//` comments list the
/// saved tensors (with bytes, as savedBytes) and the recomputed nodes. Nodes
/// and edges are in joint-graph order (deterministic). A program of another
/// stage is a user error (it has no joint graph to draw).
std::string partitionDot(const Program &joint, PartitionerKind kind);

} // namespace aotc
