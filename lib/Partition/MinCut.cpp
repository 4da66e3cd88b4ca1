//===- MinCut.cpp - PyTorch's min-cut rematerialization network --------------===//
//
// Builds and solves the flow network of PyTorch's
// min_cut_rematerialization_partition / solve_min_cut
// (torch/_functorch/partitioners.py; summary in
// the project notes beside the repository, ../shared/reference/partitioner.md sections
// 1.2-1.3; docs/stage-partition.md):
//
//  * every joint node X becomes X_in -> X_out with capacity weight(X); every
//    data edge X -> U becomes X_out -> U_in with capacity INF;
//  * a node required by the backward (tangents, their transitive users, the
//    gradients) gets X_in -> sink (INF); a primal that is itself a gradient
//    gets X_out -> sink;
//  * a banned node (never recomputed) gets source -> X_in (INF). Banned are
//    the primals and every forward node that fails should_ban_recomputation:
//    ops off the recompute allowlist (which excludes mm/addmm/bmm and random
//    ops), nodes materialized in the backward anyway, reductions whose output
//    is more than 4x smaller than their inputs, fusible users of a node that
//    come after its first unfusible use ("used far apart"), and one node per
//    fusible chain longer than 100 forward nodes. Views and getitems are
//    never banned;
//  * weight(X) = int(bytes(X) * 1.1^clamp(dist_from_bw, 1, 100)), x2 when X
//    is not otherwise materialized (all its users fuse with it); tuple-valued
//    nodes weigh INF (they are saved through their getitems). The weights are
//    integers, computed exactly like PyTorch's `int(mem_sz * 1.1 ** d)`
//    (IEEE double, truncation), in bytes. Primals weigh 0 (aotc's backward
//    receives them again; PyTorch: treat_parameters_as_free_to_save);
//
// The saved set is the cut's X_in -> X_out edges, with the canonical minimum
// cut (source side = reachable from the source in the residual graph).
// Saved primals are dropped by extract(): the backward gets the primals again.
// Not modelled: recompute tags (SAC), SymInts, the memory budget/knapsack.
//===----------------------------------------------------------------------===//
#include "PartitionImpl.h"

#include "aotc/Diagnostics.h"
#include "aotc/MaxFlow.h"
#include "aotc/OpRegistry.h"

#include <algorithm>
#include <cmath>
#include <queue>
#include <set>

namespace aotc::part {

namespace {

bool isView(const Node *n) {
  return n->isCall() && n->op && n->op->category == OpCategory::View;
}

bool isRandom(const Node *n) { return n->isCall() && n->op && n->op->random; }

/// PyTorch's recomputable_ops (the allowlist): the op's OpDef::recomputable.
bool isRecomputable(const Node *n) {
  if (!n->isCall()) return false;
  if (n->isGetitem()) return true;
  return n->op && !n->op->random && n->op->recomputable;
}

bool isFusibleOp(const Node *n) { return isRecomputable(n) || isRandom(n); }

/// PyTorch's is_fusible(a, b) (its memory fusion into a cat does not arise: cat is not a
/// primitive, so lower() has rewritten it before the partitioner).
bool isFusible(const Node *a, const Node *b) { return isFusibleOp(a) && isFusibleOp(b); }

int64_t sizeOf(const Node *n) {
  int64_t s = 0;
  for (const TensorType &t : n->types) s += t.bytes();
  return s;
}

/// Elements of all results of n.
int64_t numelOf(const Node *n) {
  int64_t s = 0;
  for (const TensorType &t : n->types) s += t.numel();
  return s;
}

class MinCutBuilder {
public:
  MinCutBuilder(const JointInfo &ji, bool fusionFactor) : ji_(ji), fusionFactor_(fusionFactor) {}

  std::vector<Node *> run(std::unordered_set<const Node *> *bannedOut);

private:
  const JointInfo &ji_;
  const bool fusionFactor_; ///< x2 for values that are not otherwise materialized.
  MaxFlow flow_;
  int source_ = -1, sink_ = -1;
  std::unordered_map<const Node *, int> inId_; ///< X_in; X_out = X_in + 1.
  std::unordered_map<const Node *, int64_t> dist_;
  std::unordered_map<const Node *, int> fwOrder_;
  std::unordered_set<const Node *> banned_;

  bool fw(const Node *n) const { return ji_.requiredFw.count(n) > 0; }
  void computeDistances();
  bool isMaterializedBackwards(const Node *n) const;
  bool shouldBanRecomputation(const Node *n) const;
  bool isMaterialized(const Node *n) const;
  int64_t weight(const Node *n) const;
  void ban(const Node *n);
  int findFirstUnfusible(const std::vector<Node *> &starts, int maxRange) const;
  void banUsedFarApart();
  void banLongFusibleChains();
};

void MinCutBuilder::computeDistances() {
  // Reverse topological order: 0 off the forward, else 1 + min over users (the
  // output node counts as infinitely far: PyTorch's int(1e9)).
  const int64_t far = 1000000000;
  auto &nodes = ji_.joint->nodes();
  for (auto it = nodes.rbegin(); it != nodes.rend(); ++it) {
    const Node *n = it->get();
    if (n->kind == NodeKind::Output) {
      dist_[n] = far;
    } else if (!fw(n)) {
      dist_[n] = 0;
    } else {
      int64_t d = far;
      for (Node *u : ji_.usersOf(n)) d = std::min(d, dist_.at(u) + 1);
      dist_[n] = d;
    }
  }
  int k = 0;
  for (auto &up : nodes)
    if (fw(up.get())) fwOrder_[up.get()] = k++;
}

/// A non-view node that some non-forward user reads through an unfusible op
/// (looking through views) must exist in the backward anyway.
bool MinCutBuilder::isMaterializedBackwards(const Node *n) const {
  if (isView(n)) return false;
  std::vector<const Node *> work{n};
  std::unordered_set<const Node *> seen{n};
  while (!work.empty()) {
    const Node *cur = work.back();
    work.pop_back();
    for (Node *u : ji_.usersOf(cur)) {
      if (!fw(u) && !isFusible(cur, u)) return true;
      if (isView(u) && seen.insert(u).second) work.push_back(u);
    }
  }
  return false;
}

bool MinCutBuilder::shouldBanRecomputation(const Node *n) const {
  if (!n->isCall() || n->isGetitem()) return false;
  if (!isRecomputable(n)) return true; // ban_recompute_not_in_allowlist
  if (isMaterializedBackwards(n)) return true; // ban_recompute_materialized_backward
  // ban_recompute_reductions: output more than 4x smaller than the inputs.
  // PyTorch compares bytes; aotc compares elements, so that a comparison
  // narrowing i64 to bool (8x fewer bytes, no fewer elements, e.g. the MLP's
  // ne(target, -100)) is not taken for a reduction: the rule exists to keep
  // reduction outputs such as norm statistics saved (docs/partition.md).
  int64_t in = 0;
  for (const Arg &a : n->args)
    if (auto *p = std::get_if<Node *>(&a))
      if (*p) in += numelOf(*p);
  return numelOf(n) * 4 < in;
}

bool MinCutBuilder::isMaterialized(const Node *n) const {
  if (n->isPlaceholder()) return true;
  for (Node *u : ji_.usersOf(n))
    if (!isFusible(n, u)) return true;
  return false;
}

int64_t MinCutBuilder::weight(const Node *n) const {
  // Primals are free to save: aotc's backward receives every primal again, so
  // keeping one costs no memory. PyTorch weighs parameters 0 for the same
  // reason (config.treat_parameters_as_free_to_save); in aotc's ABI this holds
  // for every primal, user inputs included.
  if (ji_.isPrimal(n)) return 0;
  if (n->types.size() != 1) return MaxFlow::kInf; // tuple: saved through getitems
  int64_t d = std::max<int64_t>(std::min<int64_t>(dist_.at(n), 100), 1);
  double scaled = (double)sizeOf(n) * std::pow(1.1, (double)d);
  if (!(scaled < 1e18)) internalError("min-cut: weight of node '" + n->name + "' overflows");
  int64_t w = (int64_t)scaled; // Python int(): truncation
  return !fusionFactor_ || isMaterialized(n) ? w : 2 * w;
}

void MinCutBuilder::ban(const Node *n) {
  if (isView(n)) return; // views are never banned
  if (!banned_.insert(n).second) return;
  flow_.addEdge(source_, inId_.at(n), MaxFlow::kInf);
}

int MinCutBuilder::findFirstUnfusible(const std::vector<Node *> &starts, int maxRange) const {
  // Min-heap on (fw_order, fusible-flag) with unfusible entries first on ties.
  using Item = std::tuple<int, bool, const Node *>;
  auto cmp = [](const Item &a, const Item &b) {
    if (std::get<0>(a) != std::get<0>(b)) return std::get<0>(a) > std::get<0>(b);
    return std::get<1>(a) > std::get<1>(b);
  };
  std::priority_queue<Item, std::vector<Item>, decltype(cmp)> heap(cmp);
  for (Node *s : starts) heap.emplace(fwOrder_.at(s), true, s);
  while (!heap.empty()) {
    auto [order, fusible, n] = heap.top();
    heap.pop();
    if (!fusible) return order;
    if (order > maxRange) continue;
    for (Node *u : ji_.usersOf(n))
      if (fw(u)) heap.emplace(fwOrder_.at(u), isFusible(n, u), u);
  }
  return maxRange;
}

/// ban_recompute_used_far_apart: a fusible forward user of X that comes after
/// X's first unfusible use would not fuse with X's other users if recomputed.
void MinCutBuilder::banUsedFarApart() {
  for (auto &up : ji_.joint->nodes()) {
    const Node *used = up.get();
    if (!fw(used)) continue;
    std::vector<Node *> fwUsers;
    int maxOrder = -1;
    for (Node *u : ji_.usersOf(used))
      if (fw(u)) {
        fwUsers.push_back(u);
        maxOrder = std::max(maxOrder, fwOrder_.at(u));
      }
    if (fwUsers.empty()) continue;
    int firstUnfusible = findFirstUnfusible(fwUsers, maxOrder);
    for (Node *u : fwUsers)
      if (fwOrder_.at(u) > firstUnfusible && isFusible(used, u) && !banned_.count(u)) ban(u);
  }
}

/// ban_recompute_long_fusible_chains: a fusible chain running more than 100
/// forward nodes past its start gets its far end banned.
void MinCutBuilder::banLongFusibleChains() {
  std::unordered_set<const Node *> visited;
  using Item = std::pair<int, const Node *>;
  auto cmp = [](const Item &a, const Item &b) { return a.first > b.first; };
  for (auto &up : ji_.joint->nodes()) {
    const Node *start = up.get();
    if (!fw(start)) continue;
    int startOrder = fwOrder_.at(start);
    std::priority_queue<Item, std::vector<Item>, decltype(cmp)> heap(cmp);
    heap.emplace(startOrder, start);
    while (!heap.empty()) {
      auto [order, cur] = heap.top();
      heap.pop();
      if (!visited.insert(cur).second) continue;
      if (order > startOrder + 100 && heap.empty()) {
        ban(cur);
        break;
      }
      for (Node *u : ji_.usersOf(cur))
        if (fw(u) && isFusible(cur, u) && !banned_.count(u)) heap.emplace(fwOrder_.at(u), u);
    }
  }
}

std::vector<Node *> MinCutBuilder::run(std::unordered_set<const Node *> *bannedOut) {
  computeDistances();
  source_ = flow_.addNode();
  sink_ = flow_.addNode();
  std::vector<Node *> order;
  for (auto &up : ji_.joint->nodes()) {
    Node *n = up.get();
    if (n->kind == NodeKind::Output) continue;
    order.push_back(n);
    inId_[n] = flow_.addNode();
    flow_.addNode(); // X_out
  }
  for (Node *n : order) {
    int in = inId_.at(n), out = in + 1;
    if (ji_.requiredBw.count(n)) {
      if (!ji_.isPrimal(n)) {
        flow_.addEdge(in, sink_, MaxFlow::kInf);
        continue;
      }
      flow_.addEdge(out, sink_, MaxFlow::kInf); // a primal returned as a gradient
    }
    if (ji_.isPrimal(n)) ban(n);
    if (fw(n) && shouldBanRecomputation(n)) ban(n);
    flow_.addEdge(in, out, weight(n));
    for (Node *u : ji_.usersOf(n))
      if (u->kind != NodeKind::Output) flow_.addEdge(out, inId_.at(u), MaxFlow::kInf);
  }
  banUsedFarApart();
  banLongFusibleChains();

  flow_.solve(source_, sink_);
  const std::vector<bool> &S = flow_.sourceSide();
  std::vector<Node *> saved;
  for (Node *n : order) {
    int in = inId_.at(n);
    if (S[in] && !S[in + 1]) saved.push_back(n);
  }
  // Sanity: nothing banned is recomputed, i.e. every banned node is on the
  // source side (the INF source edge cannot be cut).
  for (const Node *b : banned_)
    AOTC_ASSERT(S[inId_.at(b)], "min-cut: banned node '" + b->name + "' on the sink side");
  if (bannedOut) *bannedOut = banned_;
  return saved;
}

} // namespace

std::vector<Node *> minCutSavedValues(const JointInfo &ji,
                                      std::unordered_set<const Node *> *banned,
                                      bool fusionFactor) {
  MinCutBuilder b(ji, fusionFactor);
  return b.run(banned);
}

} // namespace aotc::part
