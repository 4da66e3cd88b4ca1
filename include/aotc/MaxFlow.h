//===- MaxFlow.h - Maximum flow / minimum s-t cut (Dinic's) -----*- C++ -*-===//
//
// The solver behind the min-cut partitioner (lib/Partition/MinCut.cpp). It is
// Dinic's algorithm (E. A. Dinitz, "Algorithm for solution of a problem of
// maximum flow in a network with power estimation", 1970): BFS level graph,
// then blocking flows found with current-arc pointers; O(V^2 E) in the worst
// case. The path search is iterative, so deep graphs cannot overflow the stack.
// PyTorch uses NetworkX's preflow-push here, and newer versions a flat-array
// Dinic's (torch/_functorch/_activation_checkpointing/min_cut.py).
//
// Capacities are int64. Infinity is the finite sentinel MaxFlow::kInf = 2^62.
// Overflow is excluded by construction and checked explicitly:
//  * finite capacities (< kInf) must sum to less than kInf (checked with
//    __builtin_add_overflow in addEdge; violation: internalError);
//  * solve() first checks that no s->t path consists of kInf edges only
//    (that would make the flow unbounded; PyTorch issue #101984 hit exactly
//    this in NetworkX): internalError. Without such a path the s-side of the
//    kInf-reachability cut only has finite edges leaving it, so the max flow is
//    below the finite sum, below kInf; every per-edge flow and residual then
//    stays in [0, 2*kInf) and never overflows int64.
//
// Determinism: edges are scanned in insertion order, so the flow found, and
// therefore everything derived from it, depends only on the order of calls.
// The reported minimum cut is the canonical one: sourceSide() = the nodes
// reachable from s in the residual graph (the smallest source side among all
// minimum cuts; unique, independent of which maximum flow was found).
//===----------------------------------------------------------------------===//
#pragma once

#include <cstdint>
#include <vector>

namespace aotc {

class MaxFlow {
public:
  /// The capacity that means "infinite". 2^62 ~= 4.6e18.
  static constexpr int64_t kInf = int64_t(1) << 62;

  explicit MaxFlow(int numNodes = 0);

  /// Adds a node; returns its id (0, 1, 2, ...).
  int addNode();
  int numNodes() const { return (int)adj_.size(); }

  /// Adds a directed edge u -> v with capacity `cap` in [0, kInf] (kInf =
  /// infinite); returns the edge id (0, 1, 2, ... in insertion order).
  /// Parallel edges and self-loops are allowed (a self-loop never carries flow).
  /// Errors (internalError): unknown node, negative capacity, capacity above
  /// kInf, or the sum of finite capacities reaching kInf.
  int addEdge(int u, int v, int64_t cap);
  int numEdges() const { return (int)from_.size(); }

  /// Computes a maximum s-t flow; returns its value (< kInf). May be called
  /// once per instance. Errors (internalError): s == t, unknown node, or an
  /// s->t path made only of infinite edges.
  int64_t solve(int s, int t);

  /// After solve(): flags, per node, membership of the source side of the
  /// canonical minimum cut (reachable from s through edges with residual
  /// capacity > 0).
  const std::vector<bool> &sourceSide() const;
  /// After solve(): the edges from the source side to the sink side, in
  /// insertion order. Their capacities sum to the flow value.
  std::vector<int> cutEdges() const;

  int edgeFrom(int e) const { return from_.at(e); }
  int edgeTo(int e) const { return to_[2 * e]; }
  int64_t capacity(int e) const { return cap_.at(e); }
  /// After solve(): the flow on edge e, in [0, capacity(e)].
  int64_t flow(int e) const;

private:
  bool buildLevels(int s, int t);
  void checkNode(int u, const char *what) const;

  // Residual arcs: arc 2e is edge e forward, arc 2e+1 its reverse.
  std::vector<int> to_;           ///< Head of each arc.
  std::vector<int64_t> residual_; ///< Residual capacity of each arc.
  std::vector<std::vector<int>> adj_; ///< Outgoing arcs per node, insertion order.
  std::vector<int> from_;         ///< Tail of each edge.
  std::vector<int64_t> cap_;      ///< Original capacity of each edge.
  int64_t finiteSum_ = 0;
  std::vector<int> level_;
  std::vector<bool> sourceSide_;
  bool solved_ = false;
};

} // namespace aotc
