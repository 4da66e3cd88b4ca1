//===- Joint.cpp - Reverse-mode autodiff: the joint forward+backward graph ----===//
//
// Stage 4. Algorithm (docs/stage-joint.md):
//  1. requires-grad analysis, forward: a value requires grad when it is a
//     floating placeholder with requiresGrad, or a floating result of a
//     differentiable op with a requires-grad input in a differentiable position
//     (not marked non_differentiable by its rule; ops the registry marks
//     nonDifferentiable and integral/bool results stop gradients);
//  2. usefulness, backward: a requires-grad value is useful when it is a
//     floating forward output or feeds a useful value through a differentiable
//     edge. Only useful edges get backward nodes;
//  3. one Tangent placeholder per floating forward output seeds its gradient;
//  4. nodes are visited in reverse order; each useful node's rule formulas
//     produce input gradients, which get sum_to (broadcast inputs, PyTorch's
//     InputMetadata::reduce_grad) and a dtype cast, and accumulate with add
//     when a value has several uses (Glow lib/Graph/Grad.cpp does the same);
//  5. outputs = forward outputs, then one gradient per requires-grad
//     placeholder (a zero tensor when no gradient reaches it).
//===----------------------------------------------------------------------===//
#include "AutodiffInternal.h"

#include <unordered_map>
#include <unordered_set>

namespace aotc {

using autodiff::BackwardBuilder;
using autodiff::FormulaScope;

namespace {

/// Tensor inputs of a call node: (schema argument index, node) pairs; tensor
/// lists are reported with their argument index as well.
struct TensorUse {
  size_t argIndex;
  Node *value;
  bool inList;
};

std::vector<TensorUse> tensorUses(const Node &n) {
  std::vector<TensorUse> r;
  for (size_t i = 0; i < n.args.size(); ++i) {
    if (auto *p = std::get_if<Node *>(&n.args[i])) {
      if (*p) r.push_back({i, *p, false});
    } else if (auto *v = std::get_if<std::vector<Node *>>(&n.args[i])) {
      for (Node *x : *v)
        if (x) r.push_back({i, x, true});
    }
  }
  return r;
}

class JointBuilder {
public:
  JointBuilder(Program &p, const DerivativeRules &rules) : p_(p), g_(p.forward), rules_(rules), bb_(g_) {}

  void run();

private:
  Program &p_;
  Graph &g_;
  const DerivativeRules &rules_;
  BackwardBuilder bb_;
  std::unordered_set<const Node *> requiresGrad_, useful_;
  /// Accumulated gradient per (node, result index).
  std::unordered_map<const Node *, std::vector<Node *>> grads_;

  bool differentiableEdge(const Node &user, size_t argIndex) const;
  void analyze(const std::vector<Node *> &outputs);
  void accumulate(Node *value, size_t resultIndex, Node *g, const Node *origin);
  void backprop(Node *n);
};

bool JointBuilder::differentiableEdge(const Node &user, size_t argIndex) const {
  if (user.isGetitem()) return argIndex == 0;
  if (user.op && user.op->nonDifferentiable) return false;
  if (const DerivativeRule *r = rules_.find(user.target)) {
    const std::string &name = user.op->schema.args[argIndex].name;
    if (r->nonDifferentiable.count(name)) return false;
  }
  return true;
}

void JointBuilder::analyze(const std::vector<Node *> &outputs) {
  // Forward: requires-grad values.
  for (auto &up : g_.nodes()) {
    Node *n = up.get();
    if (n->isPlaceholder()) {
      if (n->requiresGrad) {
        if (!isFloating(n->type().dtype))
          nodeError(*n, "only floating-point inputs can require gradients (input is " +
                            n->type().str() + ")");
        requiresGrad_.insert(n);
      }
      continue;
    }
    if (!n->isCall()) continue;
    bool anyFloat = false;
    for (auto &t : n->types) anyFloat |= isFloating(t.dtype);
    if (!anyFloat) continue;
    for (auto &u : tensorUses(*n))
      if (requiresGrad_.count(u.value) && differentiableEdge(*n, u.argIndex)) {
        requiresGrad_.insert(n);
        break;
      }
  }
  // Backward: useful values (reach a floating output through differentiable edges).
  for (Node *o : outputs)
    if (requiresGrad_.count(o) && isFloating(o->type().dtype)) useful_.insert(o);
  const auto &nodes = g_.nodes();
  for (auto it = nodes.rbegin(); it != nodes.rend(); ++it) {
    Node *n = it->get();
    if (!n->isCall() || !useful_.count(n)) continue;
    for (auto &u : tensorUses(*n))
      if (requiresGrad_.count(u.value) && differentiableEdge(*n, u.argIndex)) useful_.insert(u.value);
  }
}

void JointBuilder::accumulate(Node *value, size_t k, Node *g, const Node *origin) {
  auto &slots = grads_[value];
  slots.resize(value->types.size(), nullptr);
  if (!slots[k])
    slots[k] = g;
  else
    slots[k] = bb_.call("aten.add.Tensor", {slots[k], g}, {}, origin);
}

/// Strips the "<where>: error: " prefix of a formatted diagnostic.
static std::string bareMessage(const std::string &m) {
  size_t p = m.find("error: ");
  return p == std::string::npos ? m : m.substr(p + 7);
}

void JointBuilder::backprop(Node *n) {
  auto git = grads_.find(n);
  if (git == grads_.end()) return; // no gradient flowed here
  if (n->isGetitem()) {
    Node *src = n->tensorArg(0);
    int64_t k = n->intArg(1);
    if (k < 0) k += (int64_t)src->types.size();
    accumulate(src, (size_t)k, git->second[0], n);
    return;
  }
  std::vector<TensorUse> needed;
  for (auto &u : tensorUses(*n))
    if (useful_.count(u.value) && requiresGrad_.count(u.value) && differentiableEdge(*n, u.argIndex))
      needed.push_back(u);
  if (needed.empty()) return;
  const DerivativeRule *rule = rules_.find(n->target);
  if (!rule) nodeError(*n, "no derivative rule for " + n->target);
  std::vector<Node *> results(n->types.size(), nullptr);
  if (n->types.size() == 1) results[0] = n;
  // Existing getitems serve as resultK.
  if (n->types.size() > 1)
    for (auto &up : g_.nodes())
      if (up->isGetitem() && up->tensorArg(0) == n) {
        int64_t k = up->intArg(1);
        if (k < 0) k += (int64_t)n->types.size();
        if (!results[k]) results[k] = up.get();
      }
  FormulaScope scope;
  scope.node = n;
  scope.rule = rule;
  scope.grads = git->second;
  scope.grads.resize(n->types.size(), nullptr);
  scope.results = &results;
  for (auto &u : needed) {
    const std::string &argName = n->op->schema.args[u.argIndex].name;
    if (u.inList)
      nodeError(*n, "gradients through the tensor-list argument '" + argName + "' are not supported");
    auto f = rule->formulas.find(argName);
    if (f == rule->formulas.end())
      nodeError(*n, "the derivative rule for " + n->target + " (" + rule->loc.str() +
                        ") has no formula for input '" + argName + "'");
    Node *g = nullptr;
    const TensorType &want = u.value->type();
    try {
      Arg v = autodiff::evalFormula(f->second, scope, bb_).a;
      auto *gp = std::get_if<Node *>(&v);
      if (!gp || !*gp)
        userError(f->second.loc, "the formula does not produce a tensor");
      g = *gp;
      const Shape &have = g->type().shape;
      auto b = broadcastShapes(have, want.shape);
      if (!b || *b != have)
        userError(f->second.loc, "the formula produces " + g->type().str() +
                                     ", which cannot be summed to the input's " + want.str());
      if (!isFloating(g->type().dtype))
        userError(f->second.loc, "the formula produces non-floating " + g->type().str());
      g = bb_.sumTo(g, want.shape, n, want.sym);
      g = bb_.cast(g, want.dtype, n);
    } catch (const Error &e) {
      if (e.kind() != Error::Kind::User) throw;
      userError(f->second.loc, "in the derivative of '" + argName + "' for node '" + n->name + "' (" +
                                   n->target + "): " + bareMessage(e.what()));
    }
    accumulate(u.value, 0, g, n);
  }
}

void JointBuilder::run() {
  if (p_.stage == "joint" || p_.stage == "lower" || p_.stage == "partition")
    userError(p_.origin, "the program is already at stage '" + p_.stage +
                             "'; the joint graph is built once");
  std::vector<Node *> outputs = g_.outputs();
  AOTC_ASSERT(g_.outputNode(), "buildJoint: graph has no output node");
  analyze(outputs);

  // Tangents, one per differentiable output (Program::outputHasTangent), in output order.
  int tangentNo = 0;
  for (size_t k = 0; k < outputs.size(); ++k) {
    Node *o = outputs[k];
    if (!p_.outputHasTangent((int)k, o->type().dtype)) continue;
    // AOTAutograd's names; a forward that already uses one gets FX's "_1" suffix
    // (the role, not the name, marks a tangent).
    std::string name = g_.uniqueName("tangents_" + std::to_string(++tangentNo));
    Node *t = g_.addPlaceholder(name, o->type(), InputRole::Tangent);
    t->requiresGrad = false;
    if (useful_.count(o)) accumulate(o, 0, t, o);
  }

  // Reverse sweep over the forward nodes (backward nodes are appended after them).
  std::vector<Node *> fwd;
  for (auto &up : g_.nodes())
    if (up->isCall()) fwd.push_back(up.get());
  for (auto it = fwd.rbegin(); it != fwd.rend(); ++it)
    if (useful_.count(*it)) backprop(*it);

  // Outputs.
  std::vector<Node *> outs = outputs;
  p_.gradOf.clear();
  for (Node *ph : g_.placeholders()) {
    if (ph->role == InputRole::Tangent || !ph->requiresGrad) continue;
    p_.gradOf.push_back(ph->name);
    Node *g = nullptr;
    auto it = grads_.find(ph);
    if (it != grads_.end() && !it->second.empty()) g = it->second[0];
    if (!g) g = bb_.zeros(ph->type(), ph);
    outs.push_back(g);
  }
  g_.setOutputs(outs);
  g_.verify();
  p_.numForwardOutputs = (int)outputs.size();
  p_.stage = "joint";
}

} // namespace

void buildJoint(Program &p, const DerivativeRules &rules) { JointBuilder(p, rules).run(); }

void buildJoint(Program &p, const JointOptions &opts) {
  DerivativeRules rules = loadDerivativeRules(opts);
  buildJoint(p, rules);
}

} // namespace aotc
