//===- Graph.cpp - Graph construction, rewriting and verification -----------===//
#include "aotc/Graph.h"
#include "aotc/OpRegistry.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <functional>
#include <set>
#include <unordered_set>

namespace aotc {

// Python's float repr: the shortest digit string that round-trips, printed
// positionally when -4 <= exponent < 16 and in exponent form otherwise
// ("10.0", "0.0001", "1e-05", "1e+16"), as CPython's float_repr_style 'short'.
static std::string fmtDouble(double v) {
  if (std::isinf(v)) return v > 0 ? "inf" : "-inf";
  if (std::isnan(v)) return "nan";
  if (v == 0) return std::signbit(v) ? "-0.0" : "0.0";
  char buf[64];
  int prec = 1;
  for (; prec <= 17; ++prec) {
    std::snprintf(buf, sizeof buf, "%.*e", prec - 1, v);
    if (std::strtod(buf, nullptr) == v) break;
  }
  std::string e = buf; // d.ddde[+-]XX
  bool neg = e[0] == '-';
  if (neg) e = e.substr(1);
  size_t epos = e.find('e');
  int exp10 = std::atoi(e.c_str() + epos + 1);
  std::string digits;
  for (size_t i = 0; i < epos; ++i)
    if (e[i] != '.') digits += e[i];
  while (digits.size() > 1 && digits.back() == '0') digits.pop_back();
  std::string out;
  if (exp10 >= -5 && exp10 < 16) {
    if (exp10 < 0) {
      out = "0." + std::string(-exp10 - 1, '0') + digits;
    } else if ((int)digits.size() <= exp10 + 1) {
      out = digits + std::string(exp10 + 1 - digits.size(), '0') + ".0";
    } else {
      out = digits.substr(0, exp10 + 1) + "." + digits.substr(exp10 + 1);
    }
    if (exp10 == -5) { // Python switches to exponent form below 1e-4
      out.clear();
    }
  }
  if (out.empty()) {
    out = digits.substr(0, 1);
    if (digits.size() > 1) out += "." + digits.substr(1);
    char eb[16];
    std::snprintf(eb, sizeof eb, "e%c%02d", exp10 < 0 ? '-' : '+', std::abs(exp10));
    out += eb;
  }
  return neg ? "-" + out : out;
}

std::string argStr(const Arg &a) {
  struct V {
    std::string operator()(std::monostate) const { return "None"; }
    std::string operator()(Node *n) const { return n ? n->name : "<null>"; }
    std::string operator()(const std::vector<Node *> &v) const {
      std::string s = "[";
      for (size_t i = 0; i < v.size(); ++i) s += (i ? ", " : "") + (v[i] ? v[i]->name : "None");
      return s + "]";
    }
    std::string operator()(int64_t v) const { return std::to_string(v); }
    std::string operator()(double v) const { return fmtDouble(v); }
    std::string operator()(bool v) const { return v ? "True" : "False"; }
    std::string operator()(const std::string &v) const { return "'" + v + "'"; }
    std::string operator()(const std::vector<int64_t> &v) const {
      std::string s = "[";
      for (size_t i = 0; i < v.size(); ++i) s += (i ? ", " : "") + std::to_string(v[i]);
      return s + "]";
    }
    std::string operator()(const std::vector<double> &v) const {
      std::string s = "[";
      for (size_t i = 0; i < v.size(); ++i) s += (i ? ", " : "") + fmtDouble(v[i]);
      return s + "]";
    }
    std::string operator()(const std::vector<bool> &v) const {
      std::string s = "[";
      for (size_t i = 0; i < v.size(); ++i) s += (i ? ", " : "") + std::string(v[i] ? "True" : "False");
      return s + "]";
    }
    std::string operator()(const DTypeLit &v) const { return dtypeTorchName(v.dtype); }
    std::string operator()(const EnumLit &v) const { return v.text; }
  };
  return std::visit(V{}, a);
}

const char *argKindName(const Arg &a) {
  switch (a.index()) {
  case 0: return "None";
  case 1: return "a tensor";
  case 2: return "a tensor list";
  case 3: return "an int";
  case 4: return "a float";
  case 5: return "a bool";
  case 6: return "a string";
  case 7: return "an int list";
  case 8: return "a float list";
  case 9: return "a bool list";
  case 10: return "a dtype";
  default: return "an enum";
  }
}

const std::string *Program::mutatedInputOf(int k) const {
  for (const auto &[idx, name] : mutatedInputs)
    if (idx == k) return &name;
  return nullptr;
}

bool Program::outputHasTangent(int k, DType dt) const {
  if (!isFloating(dt)) return false;
  const std::string *mut = mutatedInputOf(k);
  if (!mut) return true;
  // A mutated input's new value takes a cotangent when the input requires grad (an activation
  // mutated in place: eager's gradient flows through the mutation); buffers never do.
  const Node *ph = forward.find(*mut);
  return ph && ph->isPlaceholder() && ph->requiresGrad;
}

Program Program::clone() const {
  Program q;
  q.stage = stage;
  q.name = name;
  q.origin = origin;
  q.forward = forward.clone();
  q.backward = backward.clone();
  q.numForwardOutputs = numForwardOutputs;
  q.gradOf = gradOf;
  q.saved = saved;
  q.mutatedInputs = mutatedInputs;
  q.specializedSizes = specializedSizes;
  q.sizeChecks = sizeChecks;
  return q;
}

std::string Program::dynamicSymbols() const {
  std::string s;
  for (const SpecializedSize &z : specializedSizes)
    if (z.dynamic) s += (s.empty() ? "" : ", ") + z.symbol;
  return s;
}

std::string Program::SpecializedSize::str() const {
  std::string s = symbol + (dynamic ? std::string(" (run time, ") : "=" + std::to_string(value) + " (") + "range [" +
                  std::to_string(min) + ", " +
                  (max < 0 ? std::string("inf") : std::to_string(max)) + "]";
  if (!dims.empty()) {
    std::string d = dims;
    for (size_t k = 0; (k = d.find(',', k)) != std::string::npos; k += 2) d.replace(k, 1, ", ");
    s += "; " + d;
  }
  return s + ")";
}

const char *roleName(InputRole r) {
  switch (r) {
  case InputRole::Parameter: return "parameter";
  case InputRole::Buffer: return "buffer";
  case InputRole::Constant: return "constant";
  case InputRole::RngState: return "rng_state";
  case InputRole::UserInput: return "user_input";
  case InputRole::Tangent: return "tangent";
  case InputRole::Saved: return "saved";
  }
  return "?";
}

//===-- Node ---------------------------------------------------------------===//

const TensorType &Node::type() const {
  AOTC_ASSERT(types.size() == 1, "node '" + name + "' has " + std::to_string(types.size()) +
                                     " results, expected exactly one");
  return types[0];
}

std::vector<Node *> Node::inputs() const {
  std::vector<Node *> r;
  for (const Arg &a : args) {
    if (auto *n = std::get_if<Node *>(&a)) {
      if (*n) r.push_back(*n);
    } else if (auto *v = std::get_if<std::vector<Node *>>(&a)) {
      for (Node *n2 : *v)
        if (n2) r.push_back(n2);
    }
  }
  return r;
}

const std::string &Node::symArgText(size_t i, size_t k) const {
  static const std::string none;
  const std::vector<std::string> *e = symArg(i);
  return e && k < e->size() ? (*e)[k] : none;
}

void Node::setSymArg(size_t i, std::vector<std::string> exprs) {
  if (auto *l = std::get_if<std::vector<int64_t>>(&args.at(i)); l && exprs.size() == 1 && l->size() != 1)
    exprs.assign(l->size(), exprs[0]);
  symArgs.push_back({i, std::move(exprs)});
}

bool Node::runtimeSized() const {
  if (!symArgs.empty()) return true;
  for (const TensorType &t : types)
    if (t.symbolic()) return true;
  for (const Node *in : inputs())
    for (const TensorType &t : in->types)
      if (t.symbolic()) return true;
  return false;
}

Node *Node::tensorArg(size_t i) const {
  AOTC_ASSERT(i < args.size() && std::holds_alternative<Node *>(args[i]),
              "node '" + name + "' argument " + std::to_string(i) + " is not a tensor");
  return std::get<Node *>(args[i]);
}

int64_t Node::intArg(size_t i) const {
  AOTC_ASSERT(i < args.size(), "node '" + name + "' has no argument " + std::to_string(i));
  if (auto *v = std::get_if<int64_t>(&args[i])) return *v;
  if (auto *b = std::get_if<bool>(&args[i])) return *b;
  internalError("node '" + name + "' argument " + std::to_string(i) + " is not an int");
}

double Node::scalarArg(size_t i) const {
  AOTC_ASSERT(i < args.size(), "node '" + name + "' has no argument " + std::to_string(i));
  if (auto *v = std::get_if<int64_t>(&args[i])) return (double)*v;
  if (auto *d = std::get_if<double>(&args[i])) return *d;
  if (auto *b = std::get_if<bool>(&args[i])) return *b ? 1.0 : 0.0;
  internalError("node '" + name + "' argument " + std::to_string(i) + " is not a scalar");
}

bool Node::boolArg(size_t i) const {
  AOTC_ASSERT(i < args.size() && std::holds_alternative<bool>(args[i]),
              "node '" + name + "' argument " + std::to_string(i) + " is not a bool");
  return std::get<bool>(args[i]);
}

const std::vector<int64_t> &Node::intListArg(size_t i) const {
  AOTC_ASSERT(i < args.size() && std::holds_alternative<std::vector<int64_t>>(args[i]),
              "node '" + name + "' argument " + std::to_string(i) + " is not an int list");
  return std::get<std::vector<int64_t>>(args[i]);
}

bool Node::isNoneArg(size_t i) const {
  return i >= args.size() || std::holds_alternative<std::monostate>(args[i]);
}

//===-- Graph --------------------------------------------------------------===//

std::string Graph::uniqueName(const std::string &base) {
  if (!byName_.count(base)) return base;
  for (int i = 1;; ++i) {
    std::string n = base + "_" + std::to_string(i);
    if (!byName_.count(n)) return n;
  }
}

bool fxShadowsBuiltin(const std::string &name) {
  static const std::set<std::string> names = {
      "sum", "pow", "abs", "max", "min", "round", "slice", "all", "any", "len", "list", "tuple",
      "float", "int", "bool", "str", "type", "id", "input", "print", "range", "map", "filter",
      "zip", "hash", "iter", "next", "format", "divmod", "sorted", "reversed", "set", "dict",
      "and", "or", "not", "is", "in", "if", "else", "for", "while", "del", "import", "from",
      "as", "with", "def", "class", "return", "lambda", "global", "pass", "None", "True", "False"};
  return names.count(name) > 0;
}

std::string Graph::fxName(const std::string &base, const Graph *alsoTaken) const {
  auto taken = [&](const std::string &n) { return byName_.count(n) || (alsoTaken && alsoTaken->find(n)); };
  if (!fxShadowsBuiltin(base) && !taken(base)) return base;
  for (int i = 1;; ++i) {
    std::string n = base + "_" + std::to_string(i);
    if (!taken(n)) return n;
  }
}

Node *Graph::addPlaceholder(const std::string &name, TensorType type, InputRole role) {
  AOTC_ASSERT(!byName_.count(name), "duplicate node name '" + name + "'");
  auto n = std::make_unique<Node>();
  n->name = name;
  n->kind = NodeKind::Placeholder;
  n->types = {std::move(type)};
  n->role = role;
  Node *raw = n.get();
  // Placeholders go after the last placeholder.
  auto it = std::find_if(nodes_.begin(), nodes_.end(),
                         [](const auto &x) { return x->kind != NodeKind::Placeholder; });
  nodes_.insert(it, std::move(n));
  byName_[name] = raw;
  return raw;
}

Node *Graph::addCall(const std::string &name, const std::string &target, std::vector<Arg> args,
                     std::vector<TensorType> types) {
  Node *out = outputNode();
  return insertCallBefore(out, name, target, std::move(args), std::move(types));
}

Node *Graph::insertCallBefore(Node *before, const std::string &name, const std::string &target,
                              std::vector<Arg> args, std::vector<TensorType> types) {
  AOTC_ASSERT(!byName_.count(name), "duplicate node name '" + name + "'");
  auto n = std::make_unique<Node>();
  n->name = name;
  n->kind = NodeKind::CallFunction;
  n->target = target;
  n->op = target == "getitem" ? nullptr : OpRegistry::get().lookup(target);
  n->args = std::move(args);
  n->types = std::move(types);
  Node *raw = n.get();
  auto it = before ? std::find_if(nodes_.begin(), nodes_.end(),
                                  [&](const auto &x) { return x.get() == before; })
                   : nodes_.end();
  nodes_.insert(it, std::move(n));
  byName_[name] = raw;
  return raw;
}

Node *Graph::setOutputs(std::vector<Node *> outs) {
  Node *o = outputNode();
  if (!o) {
    auto n = std::make_unique<Node>();
    n->name = "output";
    n->kind = NodeKind::Output;
    o = n.get();
    nodes_.push_back(std::move(n));
  }
  o->args.clear();
  for (Node *x : outs) o->args.push_back(x);
  return o;
}

std::vector<Node *> Graph::placeholders() const {
  std::vector<Node *> r;
  for (auto &n : nodes_)
    if (n->kind == NodeKind::Placeholder) r.push_back(n.get());
  return r;
}

Node *Graph::outputNode() const {
  if (!nodes_.empty() && nodes_.back()->kind == NodeKind::Output) return nodes_.back().get();
  return nullptr;
}

std::vector<Node *> Graph::outputs() const {
  Node *o = outputNode();
  return o ? o->inputs() : std::vector<Node *>{};
}

Node *Graph::find(const std::string &name) const {
  auto it = byName_.find(name);
  return it == byName_.end() ? nullptr : it->second;
}

void Graph::rename(Node *n, const std::string &newName) {
  if (n->name == newName) return;
  AOTC_ASSERT(!byName_.count(newName), "rename: node name '" + newName + "' is taken");
  auto it = byName_.find(n->name);
  AOTC_ASSERT(it != byName_.end() && it->second == n, "rename: node '" + n->name + "' is not in this graph");
  byName_.erase(it);
  n->name = newName;
  byName_[newName] = n;
}

void Graph::replaceAllUses(Node *from, Node *to) {
  for (auto &n : nodes_) {
    if (n.get() == to) continue; // never make a node its own input
    for (Arg &a : n->args) {
      if (auto *p = std::get_if<Node *>(&a)) {
        if (*p == from) *p = to;
      } else if (auto *v = std::get_if<std::vector<Node *>>(&a)) {
        for (Node *&x : *v)
          if (x == from) x = to;
      }
    }
  }
}

std::unordered_map<const Node *, std::vector<Node *>> Graph::users() const {
  std::unordered_map<const Node *, std::vector<Node *>> u;
  for (auto &n : nodes_) {
    std::unordered_set<const Node *> seen;
    for (Node *in : n->inputs())
      if (seen.insert(in).second) u[in].push_back(n.get());
  }
  return u;
}

void Graph::eliminateDeadCode() {
  // Walk backwards so chains of dead nodes disappear in one pass.
  std::unordered_set<const Node *> live;
  for (auto it = nodes_.rbegin(); it != nodes_.rend(); ++it) {
    Node *n = it->get();
    if (n->kind != NodeKind::CallFunction || live.count(n))
      for (Node *in : n->inputs()) live.insert(in);
  }
  std::vector<std::unique_ptr<Node>> kept;
  for (auto &n : nodes_) {
    if (n->kind == NodeKind::CallFunction && !live.count(n.get()))
      byName_.erase(n->name);
    else
      kept.push_back(std::move(n));
  }
  nodes_ = std::move(kept);
}

void Graph::erase(Node *n) {
  auto u = users();
  AOTC_ASSERT(u[n].empty(), "erasing node '" + n->name + "' which still has users");
  byName_.erase(n->name);
  nodes_.erase(std::find_if(nodes_.begin(), nodes_.end(), [&](auto &x) { return x.get() == n; }));
}

void Graph::verify() const {
  std::unordered_set<const Node *> defined;
  std::set<std::string> names;
  bool seenCall = false;
  for (size_t i = 0; i < nodes_.size(); ++i) {
    const Node *n = nodes_[i].get();
    AOTC_ASSERT(names.insert(n->name).second, "duplicate node name '" + n->name + "'");
    if (n->kind == NodeKind::Placeholder)
      AOTC_ASSERT(!seenCall, "placeholder '" + n->name + "' after a call_function");
    else
      seenCall = true;
    if (n->kind == NodeKind::Output)
      AOTC_ASSERT(i + 1 == nodes_.size(), "output node is not last");
    for (const Node *in : n->inputs())
      AOTC_ASSERT(defined.count(in), "node '" + n->name + "' uses '" + in->name +
                                         "' before its definition or from another graph");
    defined.insert(n);
  }
}

void Graph::topoSort() {
  std::unordered_map<const Node *, size_t> pos;
  for (size_t i = 0; i < nodes_.size(); ++i) pos[nodes_[i].get()] = i;
  std::vector<std::unique_ptr<Node>> out;
  std::unordered_set<const Node *> done, onStack;
  std::vector<std::unique_ptr<Node>> &src = nodes_;
  std::function<void(size_t)> visit = [&](size_t i) {
    Node *n = src[i].get();
    if (done.count(n)) return;
    AOTC_ASSERT(!onStack.count(n), "cycle through node '" + n->name + "'");
    onStack.insert(n);
    for (Node *in : n->inputs()) {
      auto it = pos.find(in);
      AOTC_ASSERT(it != pos.end(), "node '" + n->name + "' uses a node outside the graph");
      visit(it->second);
    }
    onStack.erase(n);
    done.insert(n);
    out.push_back(std::move(src[i]));
  };
  for (size_t i = 0; i < src.size(); ++i)
    if (src[i] && src[i]->kind == NodeKind::Placeholder) visit(i);
  size_t outIdx = src.size();
  for (size_t i = 0; i < src.size(); ++i) {
    if (!src[i]) continue;
    if (src[i]->kind == NodeKind::Output) { outIdx = i; continue; }
    visit(i);
  }
  if (outIdx < src.size() && src[outIdx]) visit(outIdx);
  nodes_ = std::move(out);
}

Graph Graph::clone(std::unordered_map<const Node *, Node *> *mapOut) const {
  Graph g;
  std::unordered_map<const Node *, Node *> m;
  for (auto &n : nodes_) {
    auto c = std::make_unique<Node>(*n);
    m[n.get()] = c.get();
    g.byName_[c->name] = c.get();
    g.nodes_.push_back(std::move(c));
  }
  for (auto &n : g.nodes_) {
    for (Arg &a : n->args) {
      if (auto *p = std::get_if<Node *>(&a)) {
        if (*p) *p = m.at(*p);
      } else if (auto *v = std::get_if<std::vector<Node *>>(&a)) {
        for (Node *&x : *v)
          if (x) x = m.at(x);
      }
    }
  }
  if (mapOut) *mapOut = std::move(m);
  return g;
}

} // namespace aotc
