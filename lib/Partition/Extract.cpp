//===- Extract.cpp - Joint-graph classification and fwd/bwd extraction -------===//
//
// analyzeJoint: PyTorch's classify_nodes. extract: PyTorch's
// _extract_fwd_bwd_modules followed by reordering_to_mimic_autograd_engine
// (torch/_functorch/partitioners.py), adapted to aotc's contract: the backward
// receives every primal again, so primals are never saved.
//===----------------------------------------------------------------------===//
#include "PartitionImpl.h"

#include "aotc/Diagnostics.h"

#include <algorithm>

namespace aotc::part {

const std::vector<Node *> &JointInfo::usersOf(const Node *n) const {
  static const std::vector<Node *> none;
  auto it = users.find(n);
  return it == users.end() ? none : it->second;
}

JointInfo analyzeJoint(const Program &p, const Graph &joint) {
  JointInfo ji;
  ji.joint = &joint;
  for (size_t i = 0; i < joint.nodes().size(); ++i) ji.order[joint.nodes()[i].get()] = i;
  ji.users = joint.users();

  bool seenTangent = false;
  for (Node *ph : joint.placeholders()) {
    if (ph->role == InputRole::Tangent) {
      ji.tangents.push_back(ph);
      seenTangent = true;
    } else {
      AOTC_ASSERT(ph->role != InputRole::Saved,
                  "partition: joint graph has a Saved placeholder '" + ph->name + "'");
      AOTC_ASSERT(!seenTangent, "partition: primal '" + ph->name + "' after a tangent placeholder");
      ji.primals.push_back(ph);
    }
  }
  AOTC_ASSERT(joint.outputNode(), "partition: joint graph has no output node");
  std::vector<Node *> outs = joint.outputs();
  AOTC_ASSERT(outs.size() == joint.outputNode()->args.size(),
              "partition: joint graph returns None");
  AOTC_ASSERT(p.numForwardOutputs >= 0 && (size_t)p.numForwardOutputs <= outs.size(),
              "partition: numForwardOutputs out of range");
  ji.fwdOutputs.assign(outs.begin(), outs.begin() + p.numForwardOutputs);
  ji.bwdOutputs.assign(outs.begin() + p.numForwardOutputs, outs.end());
  AOTC_ASSERT(ji.bwdOutputs.size() == p.gradOf.size(),
              "partition: " + std::to_string(ji.bwdOutputs.size()) + " gradient outputs but gradOf has " +
                  std::to_string(p.gradOf.size()) + " entries");

  // requiredBw: tangents and their transitive users (graph order is topological).
  for (Node *t : ji.tangents) ji.requiredBw.insert(t);
  for (auto &up : joint.nodes()) {
    Node *n = up.get();
    if (!n->isCall()) continue;
    for (Node *in : n->inputs())
      if (ji.requiredBw.count(in)) {
        ji.requiredBw.insert(n);
        break;
      }
  }
  for (Node *o : ji.bwdOutputs) ji.requiredBw.insert(o);

  // requiredFw: call ancestors of the forward outputs (all reachable from the
  // primals, since the forward outputs must not depend on tangents).
  std::vector<Node *> stack(ji.fwdOutputs.begin(), ji.fwdOutputs.end());
  std::unordered_set<const Node *> seen;
  while (!stack.empty()) {
    Node *n = stack.back();
    stack.pop_back();
    if (!seen.insert(n).second) continue;
    if (n->isPlaceholder()) {
      if (n->role == InputRole::Tangent)
        internalError("partition: forward output depends on tangent '" + n->name + "'");
      continue;
    }
    ji.requiredFw.insert(n);
    for (Node *in : n->inputs()) stack.push_back(in);
  }
  return ji;
}

namespace {

/// Copies a call node into `g`, remapping its tensor arguments through `env`.
Node *copyCall(Graph &g, const Node *n, const std::unordered_map<const Node *, Node *> &env) {
  std::vector<Arg> args = n->args;
  auto remap = [&](Node *x) -> Node * {
    if (!x) return nullptr;
    auto it = env.find(x);
    AOTC_ASSERT(it != env.end(), "partition: '" + n->name + "' reads '" + x->name +
                                     "' which the backward does not have");
    return it->second;
  };
  for (Arg &a : args) {
    if (auto *p = std::get_if<Node *>(&a))
      *p = remap(*p);
    else if (auto *v = std::get_if<std::vector<Node *>>(&a))
      for (Node *&x : *v) x = remap(x);
  }
  Node *c = g.addCall(n->name, n->target, std::move(args), n->types);
  c->symArgs = n->symArgs; // run-time size arguments stay expressions (docs/dynamic-shapes.md)
  c->loc = n->loc;
  c->inheritSource(*n);
  return c;
}

Node *copyPlaceholder(Graph &g, const Node *n, InputRole role) {
  Node *c = g.addPlaceholder(n->name, n->type(), role);
  c->fqn = n->fqn;
  c->requiresGrad = role == InputRole::Saved ? false : n->requiresGrad;
  c->loc = n->loc;
  c->inheritSource(*n);
  return c;
}

} // namespace

BackwardPlan planBackward(const JointInfo &ji, const std::vector<Node *> &candidates) {
  // Candidate saved values: forward nodes only (never placeholders), unique,
  // in graph order.
  std::unordered_set<const Node *> savedSet;
  std::vector<Node *> saved;
  for (Node *n : candidates) {
    if (n->isPlaceholder() || !savedSet.insert(n).second) continue;
    AOTC_ASSERT(n->isCall(), "partition: saving a non-call node '" + n->name + "'");
    AOTC_ASSERT(!ji.requiredBw.count(n),
                "partition: saved value '" + n->name + "' depends on a tangent");
    AOTC_ASSERT(n->types.size() == 1,
                "partition: saved value '" + n->name + "' is a tuple (save its getitems)");
    saved.push_back(n);
  }
  std::sort(saved.begin(), saved.end(),
            [&](Node *a, Node *b) { return ji.order.at(a) < ji.order.at(b); });

  // The backward's boundary: primals, tangents, saved values.
  auto isBoundary = [&](const Node *n) { return n->isPlaceholder() || savedSet.count(n); };

  // Nodes the backward computes: ancestors of the gradients inside the boundary.
  BackwardPlan plan;
  std::unordered_set<const Node *> usedBoundary;
  std::vector<Node *> stack(ji.bwdOutputs.begin(), ji.bwdOutputs.end());
  while (!stack.empty()) {
    Node *n = stack.back();
    stack.pop_back();
    if (isBoundary(n)) {
      usedBoundary.insert(n);
      continue;
    }
    if (!plan.needed.insert(n).second) continue;
    for (Node *in : n->inputs()) stack.push_back(in);
  }

  // Saved values the backward does not use are dropped (this does not change
  // `needed`: the walk never reached them).
  for (Node *n : saved)
    if (usedBoundary.count(n)) plan.saved.push_back(n);
  return plan;
}

int64_t bytesOf(const std::vector<Node *> &nodes) {
  int64_t b = 0;
  for (const Node *n : nodes) b += n->type().bytes();
  return b;
}

void extract(Program &p, const JointInfo &ji, const std::vector<Node *> &candidates) {
  const Graph &joint = *ji.joint;
  BackwardPlan plan = planBackward(ji, candidates);
  const std::unordered_set<const Node *> &needed = plan.needed;
  const std::vector<Node *> &keptSaved = plan.saved;

  // Backward order, as PyTorch's reordering_to_mimic_autograd_engine: walk the
  // joint graph from the first node that reads a tangent; each needed node is
  // emitted together with its not-yet-emitted needed ancestors (in joint
  // order), so recomputed forward ops land right before their first backward
  // use instead of all at the start. The gradients are walked last, which
  // pulls in anything computed before the first tangent use.
  std::vector<const Node *> bwOrder;
  {
    size_t firstTangentUse = joint.nodes().size();
    for (Node *t : ji.tangents)
      for (Node *u : ji.usersOf(t))
        if (u->isCall()) firstTangentUse = std::min(firstTangentUse, ji.order.at(u));
    std::unordered_set<const Node *> emitted;
    auto emitWithAncestors = [&](Node *root) {
      if (!needed.count(root) || emitted.count(root)) return;
      std::vector<Node *> group, stack{root};
      std::unordered_set<const Node *> inGroup;
      while (!stack.empty()) {
        Node *n = stack.back();
        stack.pop_back();
        if (!needed.count(n) || emitted.count(n) || !inGroup.insert(n).second) continue;
        group.push_back(n);
        for (Node *in : n->inputs()) stack.push_back(in);
      }
      std::sort(group.begin(), group.end(),
                [&](Node *a, Node *b) { return ji.order.at(a) < ji.order.at(b); });
      for (Node *n : group) {
        emitted.insert(n);
        bwOrder.push_back(n);
      }
    };
    for (size_t i = firstTangentUse; i < joint.nodes().size(); ++i)
      emitWithAncestors(joint.nodes()[i].get());
    for (Node *o : ji.bwdOutputs) emitWithAncestors(o);
    AOTC_ASSERT(emitted.size() == needed.size(), "partition: backward ordering lost nodes");
  }

  // Backward graph: primals, Saved placeholders, tangents; then the nodes.
  Graph bw;
  std::unordered_map<const Node *, Node *> env;
  for (Node *n : ji.primals) env[n] = copyPlaceholder(bw, n, n->role);
  for (Node *n : keptSaved) env[n] = copyPlaceholder(bw, n, InputRole::Saved);
  for (Node *n : ji.tangents) env[n] = copyPlaceholder(bw, n, InputRole::Tangent);
  for (const Node *n : bwOrder) env[n] = copyCall(bw, n, env);
  std::vector<Node *> bwOuts;
  for (Node *o : ji.bwdOutputs) {
    auto it = env.find(o);
    AOTC_ASSERT(it != env.end(), "partition: gradient '" + o->name + "' not in the backward");
    bwOuts.push_back(it->second);
  }
  bw.setOutputs(bwOuts);
  bw.eliminateDeadCode();
  bw.verify();

  // Forward graph: the joint graph returning the user outputs and the saved
  // values, dead code removed, tangent placeholders dropped.
  std::unordered_map<const Node *, Node *> m;
  Graph fw = joint.clone(&m);
  std::vector<Node *> fwOuts;
  for (Node *o : ji.fwdOutputs) fwOuts.push_back(m.at(o));
  for (Node *s : keptSaved) fwOuts.push_back(m.at(s));
  fw.setOutputs(fwOuts);
  fw.eliminateDeadCode();
  {
    auto fwUsers = fw.users();
    for (Node *t : ji.tangents) {
      Node *ft = m.at(t);
      AOTC_ASSERT(fwUsers[ft].empty(),
                  "partition: the forward graph still reads tangent '" + t->name + "'");
      fw.erase(ft);
    }
  }
  fw.verify();

  p.saved.clear();
  for (Node *n : keptSaved) p.saved.push_back(n->name);
  p.forward = std::move(fw);
  p.backward = std::move(bw);
  p.stage = "partition";
}

} // namespace aotc::part
