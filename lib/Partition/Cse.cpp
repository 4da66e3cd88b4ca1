//===- Cse.cpp - Dead code and common subexpressions of the joint graph ------===//
//
// prepareJoint() is what partition() does to the joint graph before it
// classifies it, as PyTorch's min_cut_rematerialization_partition does
// (torch/_functorch/partitioners.py: DCE, then fx_graph_cse when config.cse,
// which is on by default). CSE matters for partitioning: the lowered joint
// graph can compute one value twice, e.g. native_layer_norm's backward formula
// rebuilds (x - mean) * rstd although the lowered forward already computes it.
// Two copies of one value make the network pay twice for it (and the backward
// recompute it twice), so duplicates are merged into their first occurrence.
//
// Two call nodes are duplicates when target, result types and arguments (after
// their own inputs have been merged) are equal. Random ops are never merged
// (none exist today). A node returned by the output node keeps its identity,
// so the joint outputs stay distinct nodes (the contract gives each output its
// own buffer); its inputs are still merged.
//===----------------------------------------------------------------------===//
#include "PartitionImpl.h"

#include "aotc/OpRegistry.h"

#include <map>
#include <set>

namespace aotc::part {

namespace {

std::string argKey(const Arg &a, const std::unordered_map<const Node *, Node *> &canon) {
  auto name = [&](Node *x) -> std::string {
    if (!x) return "None";
    auto it = canon.find(x);
    return "%" + (it == canon.end() ? x : it->second)->name;
  };
  if (auto *p = std::get_if<Node *>(&a)) return name(*p);
  if (auto *v = std::get_if<std::vector<Node *>>(&a)) {
    std::string s = "[";
    for (Node *x : *v) s += name(x) + ",";
    return s + "]";
  }
  return std::string(argKindName(a)) + ":" + argStr(a);
}

} // namespace

void prepareJoint(Graph &g) {
  g.eliminateDeadCode();
  std::set<const Node *> returned;
  if (Node *o = g.outputNode())
    for (Node *x : o->inputs()) returned.insert(x);
  std::unordered_map<const Node *, Node *> canon;
  std::map<std::string, Node *> seen;
  std::vector<Node *> dups;
  for (auto &up : g.nodes()) {
    Node *n = up.get();
    if (!n->isCall() || (n->op && n->op->random)) continue;
    std::string key = n->target + "|";
    for (const TensorType &t : n->types) key += t.str() + ";";
    for (const Arg &a : n->args) key += "|" + argKey(a, canon);
    for (const auto &[i, exprs] : n->symArgs) { // a view to [s17, 8] is not one to [64, 8]
      key += "|sym" + std::to_string(i) + ":";
      for (const std::string &e : exprs) key += e + ",";
    }
    auto [it, fresh] = seen.emplace(key, n);
    if (!fresh && !returned.count(n)) {
      canon[n] = it->second;
      dups.push_back(n);
    }
  }
  for (Node *d : dups) g.replaceAllUses(d, canon.at(d));
  for (auto it = dups.rbegin(); it != dups.rend(); ++it) g.erase(*it);
  g.eliminateDeadCode();
}

} // namespace aotc::part
