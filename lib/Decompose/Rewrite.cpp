//===- Rewrite.cpp - Table-driven node rewriting (decompose, lower) ----------===//
#include "Rewrite.h"

#include <algorithm>
#include <map>
#include <set>

namespace aotc::rewrite {

/// "aten.sum.dim_IntList" -> "sum".
static std::string opBaseName(const std::string &target) {
  if (target.rfind("aten.", 0) != 0 && target.rfind("aotc.", 0) != 0) return target;
  std::string rest = target.substr(5);
  return rest.substr(0, rest.find('.'));
}

Node *Emitter::call(const std::string &target, const std::vector<Arg> &args,
                    const KwArgs &kwargs) {
  return call(target, args, kwargs, {});
}

Node *Emitter::call(const std::string &target, const std::vector<Arg> &args, const KwArgs &kwargs,
                    const SymArgs &sym) {
  Node *n = buildCall(g_, g_.fxName(opBaseName(target)), target, args, kwargs, at_->loc, at_, sym);
  n->inheritSource(*at_);
  created_.insert(n);
  order_.push_back(n);
  return n;
}

Node *Emitter::sum(Node *x, std::vector<int64_t> dims, bool keepdim) {
  return call("aten.sum.dim_IntList", {x, std::move(dims), keepdim});
}

Node *Emitter::scalarTensor(Arg v, DType dt) {
  return call("aten.scalar_tensor.default", {std::move(v)}, {{"dtype", DTypeLit{dt}}});
}

Node *Emitter::toDtype(Node *x, DType dt) {
  if (x->type().dtype == dt) return x;
  return call("aten._to_copy.default", {x}, {{"dtype", DTypeLit{dt}}});
}

Node *Emitter::view(Node *x, const Shape &shape, const std::vector<std::string> &sym) {
  return call("aten.view.default", {x, std::vector<int64_t>(shape)}, {}, {{1, sym}});
}
Node *Emitter::viewTo(Node *x, const std::vector<Size> &sizes) {
  return view(x, values(sizes), symArg(0, sizes).second);
}
Node *Emitter::fullOf(const std::vector<Size> &sizes, Arg fill, DType dt) {
  return call("aten.full.default", {values(sizes), std::move(fill)}, {{"dtype", DTypeLit{dt}}}, {symArg(0, sizes)});
}
Node *Emitter::divBy(Node *x, const Size &n) { return call("aten.div.Tensor", {x, n.v}, {}, {symArg(1, {n})}); }

std::string Size::text() const { return e.sizeText(); }
Size operator+(const Size &a, const Size &b) {
  return {a.v + b.v, SymExpr::binary(SymExpr::Op::Add, a.e, b.e).canonical()};
}
Size operator-(const Size &a, const Size &b) {
  return {a.v - b.v,
          SymExpr::binary(SymExpr::Op::Add, a.e, SymExpr::binary(SymExpr::Op::Mul, SymExpr::integer(-1), b.e)).canonical()};
}
Size operator*(const Size &a, const Size &b) {
  return {a.v * b.v, SymExpr::binary(SymExpr::Op::Mul, a.e, b.e).canonical()};
}
Size product(const std::vector<Size> &s) {
  Size p = 1;
  for (const Size &x : s) p = p * x;
  return p;
}
Size sizeOf(const TensorType &t, size_t d) { return {t.shape.at(d), SymExpr::ofSize(t.sym, d, t.shape.at(d))}; }
Size sizeArg(const Node &n, size_t i) {
  const std::string &e = n.symArgText(i);
  return e.empty() ? Size(n.intArg(i)) : Size(n.intArg(i), SymExpr::parse(e));
}
std::vector<Size> sizesOf(const TensorType &t) {
  std::vector<Size> r;
  for (size_t d = 0; d < t.shape.size(); ++d) r.push_back(sizeOf(t, d));
  return r;
}
std::vector<int64_t> values(const std::vector<Size> &s) {
  std::vector<int64_t> r;
  for (const Size &x : s) r.push_back(x.v);
  return r;
}
std::pair<size_t, std::vector<std::string>> symArg(size_t i, const std::vector<Size> &s) {
  std::vector<std::string> r;
  for (const Size &x : s) r.push_back(x.text());
  return {i, r};
}

Node *Emitter::iota(int64_t n, DType dt) { return call("aten.arange.default", {n}, {{"dtype", DTypeLit{dt}}}); }

Node *Emitter::permute(Node *x, const std::vector<int64_t> &dims) {
  return call("aten.permute.default", {x, dims});
}

static void checkType(const Node &orig, size_t i, const Node *v, const std::string &stage) {
  AOTC_ASSERT(v->types.size() == 1, stage + ": the value replacing '" + orig.name + "' is a tuple");
  const TensorType &want = orig.types[i], &got = v->types[0];
  AOTC_ASSERT(want == got, stage + " rule for " + orig.target + " changed the type of '" +
                               orig.name + "' result " + std::to_string(i) + " from " +
                               want.str() + " to " + got.str());
}

/// Rewrites one node; returns false when the rule declined.
static bool rewriteOne(Graph &g, Node *n, const RuleEntry &e, const std::string &stage) {
  // Before the rule runs: what it builds would have the sizes at their largest values.
  if (!e.runtimeSizes && n->runtimeSized())
    nodeError(*n, stage + " of this op over run-time sizes is not supported yet (its rule: " + e.summary +
                      "): compile at one size with --specialize SYMBOL=N (docs/dynamic-shapes.md)");
  if (!e.runtimeSizeArgs && !n->symArgs.empty()) {
    const OpSchema &s = n->op->schema;
    size_t i = n->symArgs.front().first;
    nodeError(*n, stage + " of this op with a run-time size as its argument '" +
                      (i < s.args.size() ? s.args[i].name : std::to_string(i)) +
                      "' is not supported yet (its rule: " + e.summary +
                      "): compile at one size with --specialize SYMBOL=N (docs/dynamic-shapes.md)");
  }
  Emitter em(g, n);
  std::vector<Node *> vals = e.rule(em, *n);
  if (vals.empty()) {
    AOTC_ASSERT(em.createdNodes().empty(), stage + " rule for " + n->target +
                                               " declined after emitting nodes");
    return false;
  }
  AOTC_ASSERT(vals.size() == n->types.size(),
              stage + " rule for " + n->target + " returned " + std::to_string(vals.size()) +
                  " values for " + std::to_string(n->types.size()) + " results");
  // A new node that computes the same op as the one it replaces takes over its name (a view
  // stays `view_3`); one of another op keeps its own (`convolution` lowered to a convolution
  // and a bias add: the add is `add_7`, not `convolution`), so every printed name matches
  // its op (docs/cli.md "Reading --emit output").
  std::set<const Node *> renamed;
  auto take = [&](Node *from, Node *to) {
    std::string name = from->name;
    bool sameOp = opBaseName(to->target) == opBaseName(from->isGetitem() ? n->target : from->target);
    g.replaceAllUses(from, to);
    g.erase(from);
    if (em.created(to) && sameOp && renamed.insert(to).second) g.rename(to, name);
  };
  if (n->types.size() == 1) {
    checkType(*n, 0, vals[0], stage);
    take(n, vals[0]);
  } else {
    std::vector<Node *> users = g.users()[n];
    for (Node *u : users) {
      AOTC_ASSERT(u->isGetitem(), "'" + u->name + "' reads the tuple '" + n->name +
                                      "' without getitem");
      int64_t i = u->intArg(1);
      if (i < 0) i += (int64_t)vals.size();
      AOTC_ASSERT(i >= 0 && i < (int64_t)vals.size(), "getitem index out of range");
      if (!vals[i])
        nodeError(*u, stage + ": result " + std::to_string(i) + " of '" + n->name +
                          "' is read but not computed (output_mask/None)");
      checkType(*n, (size_t)i, vals[i], stage);
      take(u, vals[i]);
    }
    g.erase(n);
  }
  // Erase the nodes this rule created that nobody reads (e.g. unused tuple results).
  const auto &made = em.createdNodes();
  std::set<const Node *> outs;
  for (Node *o : g.outputs()) outs.insert(o);
  for (auto it = made.rbegin(); it != made.rend(); ++it) {
    auto users = g.users();
    if (users[*it].empty() && !outs.count(*it)) g.erase(*it);
  }
  return true;
}

int applyRules(Graph &g, const std::vector<RuleEntry> &table, const std::string &stage) {
  std::map<std::string, const RuleEntry *> byTarget;
  for (const RuleEntry &e : table) {
    AOTC_ASSERT(!byTarget.count(e.target), stage + ": two rules for " + e.target);
    byTarget[e.target] = &e;
  }
  int total = 0;
  for (int iter = 0;; ++iter) {
    AOTC_ASSERT(iter < 64, stage + " did not reach a fixed point");
    std::vector<std::pair<Node *, const RuleEntry *>> todo;
    for (auto &n : g.nodes()) {
      if (!n->isCall()) continue;
      auto it = byTarget.find(n->target);
      if (it != byTarget.end()) todo.push_back({n.get(), it->second});
    }
    int fired = 0;
    for (auto &[n, e] : todo) fired += rewriteOne(g, n, *e, stage);
    total += fired;
    if (!fired) break;
  }
  g.verify();
  return total;
}

int64_t wrapDimAt(const Node &n, int64_t d, int64_t rank) {
  auto w = wrapDim(d, rank);
  if (!w)
    nodeError(n, "dimension out of range (expected to be in range of [" +
                     std::to_string(-std::max<int64_t>(rank, 1)) + ", " +
                     std::to_string(std::max<int64_t>(rank, 1) - 1) + "], but got " +
                     std::to_string(d) + ")");
  return *w;
}

std::vector<int64_t> reducedDims(const Node &n, size_t argIndex, int64_t rank) {
  std::vector<int64_t> dims;
  if (!n.isNoneArg(argIndex)) {
    const Arg &a = n.args[argIndex];
    if (auto *v = std::get_if<std::vector<int64_t>>(&a))
      dims = *v;
    else
      dims = {n.intArg(argIndex)};
  }
  if (dims.empty()) {
    for (int64_t i = 0; i < rank; ++i) dims.push_back(i);
    return dims;
  }
  for (int64_t &d : dims) d = rank == 0 ? 0 : wrapDimAt(n, d, rank);
  std::sort(dims.begin(), dims.end());
  dims.erase(std::unique(dims.begin(), dims.end()), dims.end());
  if (rank == 0) dims.clear();
  return dims;
}

std::optional<DType> dtypeArgOf(const Node &n, size_t i) {
  if (i >= n.args.size()) return std::nullopt;
  if (auto *d = std::get_if<DTypeLit>(&n.args[i])) return d->dtype;
  return std::nullopt;
}

} // namespace aotc::rewrite
