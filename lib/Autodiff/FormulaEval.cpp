//===- FormulaEval.cpp - Derivative formulas -> graph nodes ------------------===//
//
// Evaluates a parsed formula (Formula.cpp) for one forward node: names become
// the node's arguments, results and incoming gradients; calls become registry
// ops (resolved by argument kinds, like PyTorch's overload resolution) or
// build-time helpers. docs/derivatives.md documents the language.
//===----------------------------------------------------------------------===//
#include "AutodiffInternal.h"
#include "aotc/SymExpr.h"

#include <algorithm>
#include <cmath>
#include <numeric>

namespace aotc {
namespace autodiff {

//===-- Helper and alias tables ---------------------------------------------===//

const std::vector<HelperInfo> &helpers() {
  static const std::vector<HelperInfo> h = {
      {"sum_to", 2, 2, "sum_to(x, sizes): sums x over broadcast dims to shape `sizes` (at::sum_to)"},
      {"restore_dims", 4, 4,
       "restore_dims(x, dim, keepdim, rank): unsqueezes the dims a reduction over `dim` removed "
       "(nothing when keepdim; dim None or [] = all dims of a rank-`rank` input), except "
       "leading ones, which broadcasting restores"},
      {"reduced_numel", 2, 2, "reduced_numel(sizes, dim): number of elements a reduction over `dim` combines"},
      {"invperm", 1, 1, "invperm(dims): the inverse permutation (negative dims allowed)"},
      {"last_dims", 1, 1, "last_dims(n or list): [-n, ..., -1] (n = length of a list)"},
      {"prod", 1, 1, "prod(list): product of an int list (1 for [])"},
      {"int_add", 2, 2, "int_add(a, b): the sum of two int constants (polygamma's rule: n + 1)"},
      {"exact_div", 2, 2, "exact_div(a, b): a / b for ints b divides (an int, also over run-time sizes: batch norm's count per channel)"},
      {"transpose_perm", 3, 3, "transpose_perm(rank, dim0, dim1): the permutation swapping two dims"},
      {"dim_shape", 3, 3, "dim_shape(rank, dim, n): [1, ..., n at dim, ..., 1] (for view before expand)"},
      {"planes2", 1, 1, "planes2(sizes): [prod(sizes[:-2]), sizes[-2] * sizes[-1]] (2-D pooling planes)"},
      {"neg_ints", 1, 1, "neg_ints(list): the int list negated elementwise (constant_pad_nd's rule: -pad)"},
      {"tail", 2, 2, "tail(list, n): the last n elements of a list (the spatial sizes of a pooling input)"},
      {"iota", 1, 1, "iota(n): the int64 tensor [0, 1, ..., n-1] (aten.arange; positions for as_strided's rule)"},
      {"dims_except", 2, 2, "dims_except(rank, dim): [0, ..., rank-1] without dim (batch norm's reduced dims)"},
      {"zeros", 1, 1, "zeros(x): a zero tensor of x's shape and dtype (aten.full)"},
      {"zero", 1, 1, "zero(x): a 0-d zero of x's dtype, for where(...) (aten.full with size [])"},
      {"if_defined", 3, 3, "if_defined(x, a, b): a when the optional tensor x is given, else b (lazy)"},
      {"if_equal", 4, 4, "if_equal(x, y, a, b): a when the constants x and y are equal, else b (lazy)"},
  };
  return h;
}

const HelperInfo *findHelper(const std::string &name) {
  for (auto &h : helpers())
    if (name == h.name) return &h;
  return nullptr;
}

const std::map<std::string, std::string> &shortNameAliases() {
  static const std::map<std::string, std::string> m = {
      {"sum_dim", "aten.sum.dim_IntList"},
      {"mean_dim", "aten.mean.dim"},
      {"squeeze_dims", "aten.squeeze.dims"},
      {"where", "aten.where.self"},
  };
  return m;
}

std::vector<const OpDef *> resolveCallee(const std::string &name) {
  const OpRegistry &reg = OpRegistry::get();
  auto al = shortNameAliases().find(name);
  if (al != shortNameAliases().end()) {
    const OpDef *d = reg.lookup(al->second);
    return d ? std::vector<const OpDef *>{d} : std::vector<const OpDef *>{};
  }
  if (name.find('.') != std::string::npos) {
    std::string t = name.rfind("aten.", 0) == 0 ? name : "aten." + name;
    const OpDef *d = reg.lookup(t);
    return d ? std::vector<const OpDef *>{d} : std::vector<const OpDef *>{};
  }
  std::vector<const OpDef *> c;
  for (auto &[t, d] : reg.all())
    if (d.schema.name == name) c.push_back(&d);
  auto rank = [](const OpDef *d) {
    const std::string &o = d->schema.overload;
    return o == "Tensor" ? 0 : o == "default" ? 1 : o == "Scalar" ? 2 : 3;
  };
  std::sort(c.begin(), c.end(), [&](const OpDef *a, const OpDef *b) {
    if (rank(a) != rank(b)) return rank(a) < rank(b);
    return a->schema.overload < b->schema.overload;
  });
  return c;
}

//===-- BackwardBuilder ---------------------------------------------------===//

static bool isNumber(const Arg &a) {
  return std::holds_alternative<int64_t>(a) || std::holds_alternative<double>(a);
}
static double numberOf(const Arg &a) {
  if (auto *i = std::get_if<int64_t>(&a)) return (double)*i;
  if (auto *d = std::get_if<double>(&a)) return *d;
  if (auto *b = std::get_if<bool>(&a)) return *b ? 1.0 : 0.0;
  return NAN;
}

/// The input x when `n` provably computes x unchanged (same type), else nullptr.
static Node *peephole(const Node &n) {
  if (n.args.empty() || !std::holds_alternative<Node *>(n.args[0]) || n.types.size() != 1)
    return nullptr;
  Node *x = std::get<Node *>(n.args[0]);
  if (!x || x->types.size() != 1) return nullptr;
  const std::string &t = n.target;
  if (t == "aten.permute.default") {
    int64_t r = x->type().rank();
    auto wrapped = [r](const std::vector<int64_t> &p) {
      std::vector<int64_t> w;
      for (int64_t d : p) w.push_back(d < 0 ? d + r : d);
      return w;
    };
    std::vector<int64_t> q = wrapped(n.intListArg(1));
    bool identity = true;
    for (int64_t i = 0; i < r; ++i) identity &= q[i] == i;
    if (identity) return x;
    // permute(permute(y, p), q) is y when p[q[i]] == i for all i.
    if (x->isCall() && x->target == "aten.permute.default") {
      std::vector<int64_t> p = wrapped(x->intListArg(1));
      Node *y = x->tensorArg(0);
      bool inverse = y->types.size() == 1 && y->type() == n.type();
      for (int64_t i = 0; i < r && inverse; ++i) inverse = p[q[i]] == i;
      if (inverse) return y;
    }
    return nullptr;
  }
  if (x->type() != n.type()) return nullptr;
  if (t == "aten.mul.Tensor" || t == "aten.mul.Scalar" || t == "aten.div.Tensor" ||
      t == "aten.div.Scalar" || t == "aten.pow.Tensor_Scalar") // a run-time size is 1 only somewhere
    return isNumber(n.args[1]) && numberOf(n.args[1]) == 1.0 && !n.symArg(1) ? x : nullptr;
  if (t == "aten.view.default" || t == "aten._unsafe_view.default" ||
      t == "aten.expand.default" || t == "aten._to_copy.default")
    return x;
  if (t == "aten.sum.dim_IntList" && n.boolArg(2)) {
    auto *dims = std::get_if<std::vector<int64_t>>(&n.args[1]);
    if (!dims || dims->empty()) return nullptr;
    for (int64_t d : *dims) {
      auto w = wrapDim(d, x->type().rank());
      if (!w || (x->type().rank() > 0 && x->type().shape[*w] != 1)) return nullptr; // 0-d: identity
    }
    return x;
  }
  return nullptr;
}

Node *BackwardBuilder::call(const std::string &target, const std::vector<Arg> &args,
                            const std::vector<std::pair<std::string, Arg>> &kwargs,
                            const Node *origin, const SymArgs &sym) {
  const OpDef *op = OpRegistry::get().lookup(target);
  AOTC_ASSERT(op, "backward builder: unknown op " + target);
  Node *n = buildCall(g_, g_.uniqueName(op->schema.name), target, args, kwargs,
                      origin ? origin->loc : SourceLoc{}, nullptr, sym);
  if (origin) n->inheritSource(*origin);
  if (Node *same = peephole(*n)) {
    g_.erase(n);
    return same;
  }
  std::string key = n->target + "(";
  for (auto &a : n->args) key += argStr(a) + "|" + std::to_string(a.index()) + ",";
  key += ")";
  for (auto &[i, e] : n->symArgs) { // the same values at the reference sizes are not the same sizes
    key += std::to_string(i) + ":";
    for (const std::string &x : e) key += x + ";";
  }
  auto it = cse_.find(key);
  if (it != cse_.end()) {
    g_.erase(n);
    return it->second;
  }
  cse_[key] = n;
  return n;
}

Node *BackwardBuilder::sumTo(Node *x, const Shape &to, const Node *origin, const std::vector<std::string> &toSym) {
  const TensorType &xt = x->type();
  const Shape &from = xt.shape;
  auto dimSym = [](const std::vector<std::string> &sym, size_t i) { return i < sym.size() ? sym[i] : std::string(); };
  std::vector<std::string> toS = toSym;
  bool anyTo = false;
  for (const std::string &e : toS) anyTo |= !e.empty();
  if (!anyTo) toS.clear();
  if (from == to && xt.sym == toS) return x;
  int64_t lead = (int64_t)from.size() - (int64_t)to.size();
  AOTC_ASSERT(lead >= 0, "sum_to: cannot reduce " + xt.str() + " to " + shapeStr(to));
  std::vector<int64_t> dims;
  for (int64_t i = 0; i < lead; ++i) dims.push_back(i);
  for (size_t i = 0; i < to.size(); ++i) {
    int64_t s = from[lead + i];
    // A dim of 1 in `to` (a constant) against a run-time or other size: broadcast, summed.
    bool toOne = to[i] == 1 && dimSym(toS, i).empty();
    bool fromOne = s == 1 && dimSym(xt.sym, lead + i).empty();
    if (toOne && !fromOne)
      dims.push_back(lead + (int64_t)i);
    else
      AOTC_ASSERT(s == to[i] && dimSym(xt.sym, lead + i) == dimSym(toS, i),
                  "sum_to: cannot reduce " + xt.str() + " to " + shapeStr(to));
  }
  Node *r = x;
  if (!dims.empty()) r = call("aten.sum.dim_IntList", {x, dims, true}, {}, origin);
  if (r->type().shape != to || r->type().sym != toS) r = call("aten.view.default", {r, to}, {}, origin, {{1, toS}});
  return r;
}

Node *BackwardBuilder::zeros(const TensorType &t, const Node *origin) {
  Arg fill = isFloating(t.dtype) ? Arg(0.0) : t.dtype == DType::Bool ? Arg(false) : Arg(int64_t(0));
  return call("aten.full.default", {t.shape, fill}, {{"dtype", DTypeLit{t.dtype}}}, origin, {{0, t.sym}});
}

Node *BackwardBuilder::cast(Node *x, DType dt, const Node *origin) {
  if (x->type().dtype == dt) return x;
  return call("aten._to_copy.default", {x}, {{"dtype", DTypeLit{dt}}}, origin);
}

//===-- Overload matching ---------------------------------------------------===//

static bool argFits(const SchemaArg &sa, const Arg &v, bool lenient, const OpDef &op) {
  if (std::holds_alternative<std::monostate>(v)) return sa.optional;
  const std::string &t = sa.type;
  auto emptyList = [&]() {
    if (auto *p = std::get_if<std::vector<int64_t>>(&v)) return p->empty();
    return false;
  };
  if (t == "Tensor") {
    if (auto *p = std::get_if<Node *>(&v)) return *p && (*p)->types.size() == 1;
    return lenient && (isNumber(v) || std::holds_alternative<bool>(v)) &&
           op.category == OpCategory::Pointwise;
  }
  if (t == "Tensor[]" || t == "Tensor?[]") return std::holds_alternative<std::vector<Node *>>(v) || emptyList();
  if (t == "int" || t == "SymInt") return std::holds_alternative<int64_t>(v) || std::holds_alternative<bool>(v);
  if (t == "int[]" || t == "SymInt[]")
    return std::holds_alternative<std::vector<int64_t>>(v) ||
           (sa.listLen > 0 && std::holds_alternative<int64_t>(v));
  if (t == "float") return isNumber(v);
  if (t == "float[]") return std::holds_alternative<std::vector<double>>(v) || std::holds_alternative<std::vector<int64_t>>(v);
  if (t == "bool") return std::holds_alternative<bool>(v);
  if (t == "bool[]") return std::holds_alternative<std::vector<bool>>(v) || emptyList();
  if (t == "Scalar") return isNumber(v) || std::holds_alternative<bool>(v);
  if (t == "str") return std::holds_alternative<std::string>(v);
  if (t == "ScalarType") return std::holds_alternative<DTypeLit>(v);
  return std::holds_alternative<std::string>(v) || std::holds_alternative<EnumLit>(v);
}

static bool overloadFits(const OpDef &op, const std::vector<Arg> &args,
                         const std::vector<std::pair<std::string, Arg>> &kwargs, bool lenient) {
  const auto &sa = op.schema.args;
  size_t numPositional = 0;
  for (auto &a : sa)
    if (!a.kwargOnly) ++numPositional;
  if (args.size() > numPositional) return false;
  std::vector<bool> given(sa.size(), false);
  for (size_t i = 0; i < args.size(); ++i) {
    if (!argFits(sa[i], args[i], lenient, op)) return false;
    given[i] = true;
  }
  for (auto &[k, v] : kwargs) {
    size_t i = 0;
    while (i < sa.size() && sa[i].name != k) ++i;
    if (i == sa.size() || given[i] || !argFits(sa[i], v, lenient, op)) return false;
    given[i] = true;
  }
  for (size_t i = 0; i < sa.size(); ++i)
    if (!given[i] && !sa[i].hasDefault) return false;
  return true;
}

//===-- Evaluation ----------------------------------------------------------===//

[[noreturn]] static void evalError(const FormulaExpr &e, const std::string &msg) {
  userError(e.loc, msg);
}


static Node *expectTensor(const FormulaExpr &e, const Arg &v) {
  auto *p = std::get_if<Node *>(&v);
  if (!p || !*p) evalError(e, "'" + e.str() + "' is " + argKindName(v) + ", expected a tensor");
  return *p;
}

static std::vector<int64_t> expectIntList(const FormulaExpr &e, const Arg &v) {
  if (auto *p = std::get_if<std::vector<int64_t>>(&v)) return *p;
  if (auto *i = std::get_if<int64_t>(&v)) return {*i};
  evalError(e, "'" + e.str() + "' is " + argKindName(v) + ", expected an int list");
}

static int64_t expectInt(const FormulaExpr &e, const Arg &v) {
  if (auto *i = std::get_if<int64_t>(&v)) return *i;
  evalError(e, "'" + e.str() + "' is " + argKindName(v) + ", expected an int");
}

bool Val::symbolic() const {
  return std::any_of(sym.begin(), sym.end(), [](const std::string &e) { return !e.empty(); });
}

/// Int k of v (an int or an int list) as an expression.
static SymExpr exprAt(const Val &v, size_t k, int64_t value) { return SymExpr::ofSize(v.sym, k, value); }
static std::vector<std::string> symTexts(const std::vector<SymExpr> &es) { return SymExpr::sizeTexts(es); }
static SymExpr mulExpr(SymExpr a, SymExpr b) { return SymExpr::binary(SymExpr::Op::Mul, std::move(a), std::move(b)); }
/// A value that must not depend on run-time sizes (a dim index, a rank, a flag).
static void expectStatic(const FormulaExpr &e, const Val &v) {
  if (v.symbolic())
    evalError(e, "'" + e.str() + "' depends on run-time sizes here, which this formula does not support yet: "
                                 "compile at one size with --specialize SYMBOL=N (docs/dynamic-shapes.md)");
}

/// The reduced-dims mask of a reduction over `dim` (int, list, None; [] = all).
static std::vector<bool> reducedMask(const FormulaExpr &e, const Arg &dim, int64_t rank) {
  std::vector<bool> mask(rank, false);
  std::vector<int64_t> dims;
  if (!std::holds_alternative<std::monostate>(dim)) dims = expectIntList(e, dim);
  if (dims.empty()) return std::vector<bool>(rank, true);
  for (int64_t d : dims) {
    auto w = wrapDim(d, rank);
    if (!w) evalError(e, "dimension " + std::to_string(d) + " out of range for rank " + std::to_string(rank));
    if (rank > 0) mask[*w] = true;
  }
  return mask;
}

static bool constEqual(const Arg &a, const Arg &b) {
  if ((isNumber(a) || std::holds_alternative<bool>(a)) && (isNumber(b) || std::holds_alternative<bool>(b)))
    return numberOf(a) == numberOf(b);
  return argStr(a) == argStr(b) && a.index() == b.index();
}

static Val evalHelper(const FormulaExpr &e, const HelperInfo &h, FormulaScope &sc, BackwardBuilder &bb) {
  const std::string n = h.name;
  if ((int)e.args.size() < h.minArgs || (int)e.args.size() > h.maxArgs || !e.kwargs.empty())
    evalError(e, "wrong arguments for helper: " + std::string(h.doc));
  // Lazy helpers first.
  if (n == "if_defined") {
    // grads[k] is "defined" when a gradient flowed into result k (not materialized here).
    if (e.args[0].kind == FormulaExpr::Kind::Index) {
      size_t k = (size_t)e.args[0].i;
      bool defined = k < sc.grads.size() && sc.grads[k];
      return evalFormula(defined ? e.args[1] : e.args[2], sc, bb);
    }
    Val x = evalFormula(e.args[0], sc, bb);
    return evalFormula(std::holds_alternative<std::monostate>(x.a) ? e.args[2] : e.args[1], sc, bb);
  }
  if (n == "if_equal") {
    Val x = evalFormula(e.args[0], sc, bb), y = evalFormula(e.args[1], sc, bb);
    if (x.sym != y.sym) expectStatic(e, x.symbolic() ? x : y); // equal at one size only
    return evalFormula(constEqual(x.a, y.a) ? e.args[2] : e.args[3], sc, bb);
  }
  std::vector<Val> vals;
  for (auto &a : e.args) vals.push_back(evalFormula(a, sc, bb));
  std::vector<Arg> v;
  for (const Val &x : vals) v.push_back(x.a);
  if (n == "sum_to") {
    Node *x = expectTensor(e.args[0], v[0]);
    Shape to = expectIntList(e.args[1], v[1]);
    const Shape &from = x->type().shape;
    auto b = broadcastShapes(from, to);
    if (!b || *b != from)
      evalError(e, "sum_to: " + shapeStr(from) + " is not a broadcast of " + shapeStr(to));
    return bb.sumTo(x, to, sc.node, vals[1].sym);
  }
  if (n == "restore_dims") {
    for (size_t i = 1; i < 4; ++i) expectStatic(e.args[i], vals[i]);
    Node *x = expectTensor(e.args[0], v[0]);
    auto *keep = std::get_if<bool>(&v[2]);
    if (!keep) evalError(e.args[2], "keepdim must be a bool");
    int64_t rank = expectInt(e.args[3], v[3]);
    if (*keep) return x;
    std::vector<bool> mask = reducedMask(e.args[1], v[1], rank);
    // Leading reduced dims are left out: broadcasting (expand, pointwise ops) adds them
    // back, so sum(x) -> expand(grad, sizes) needs no unsqueeze chain.
    int64_t lead = 0;
    while (lead < rank && mask[lead]) ++lead;
    Node *r = x;
    for (int64_t d = lead; d < rank; ++d)
      if (mask[d]) r = bb.call("aten.unsqueeze.default", {r, d - lead}, {}, sc.node);
    return r;
  }
  if (n == "reduced_numel") {
    Shape s = expectIntList(e.args[0], v[0]);
    expectStatic(e.args[1], vals[1]);
    std::vector<bool> mask = reducedMask(e.args[1], v[1], (int64_t)s.size());
    int64_t c = 1;
    SymExpr ce = SymExpr::integer(1);
    for (size_t d = 0; d < s.size(); ++d)
      if (mask[d]) {
        c *= s[d];
        ce = mulExpr(ce, exprAt(vals[0], d, s[d]));
      }
    return Val(c, symTexts({ce}));
  }
  // The helpers below compute on dims, ranks and permutations, never on run-time sizes, except
  // those that say so.
  for (size_t i = 0; i < vals.size(); ++i)
    if (n != "prod" && n != "int_add" && n != "exact_div" && n != "dim_shape" && n != "planes2" && n != "neg_ints" && n != "tail" &&
        n != "iota")
      expectStatic(e.args[i], vals[i]);
  if (n == "invperm") {
    std::vector<int64_t> p = expectIntList(e.args[0], v[0]);
    int64_t r = (int64_t)p.size();
    std::vector<int64_t> inv(r, -1);
    for (int64_t i = 0; i < r; ++i) {
      auto w = wrapDim(p[i], r);
      if (!w || inv[*w] != -1) evalError(e, "invperm: not a permutation");
      inv[*w] = i;
    }
    return inv;
  }
  if (n == "last_dims") {
    int64_t k = std::holds_alternative<int64_t>(v[0]) ? std::get<int64_t>(v[0])
                                                      : (int64_t)expectIntList(e.args[0], v[0]).size();
    std::vector<int64_t> d;
    for (int64_t i = -k; i < 0; ++i) d.push_back(i);
    return d;
  }
  if (n == "prod") {
    std::vector<int64_t> l = expectIntList(e.args[0], v[0]);
    SymExpr pe = SymExpr::integer(1);
    for (size_t i = 0; i < l.size(); ++i) pe = mulExpr(pe, exprAt(vals[0], i, l[i]));
    return Val(std::accumulate(l.begin(), l.end(), int64_t(1), std::multiplies<int64_t>()), symTexts({pe}));
  }
  if (n == "int_add") {
    int64_t a = expectInt(e.args[0], v[0]), b = expectInt(e.args[1], v[1]);
    return Val(a + b, symTexts({SymExpr::binary(SymExpr::Op::Add, exprAt(vals[0], 0, a), exprAt(vals[1], 0, b))}));
  }
  if (n == "exact_div") {
    int64_t a = expectInt(e.args[0], v[0]), b = expectInt(e.args[1], v[1]);
    if (b == 0 || a % b != 0) evalError(e, "exact_div: " + std::to_string(b) + " does not divide " + std::to_string(a));
    return Val(a / b, symTexts({SymExpr::binary(SymExpr::Op::CleanDiv, exprAt(vals[0], 0, a), exprAt(vals[1], 0, b))}));
  }
  if (n == "transpose_perm") {
    int64_t r = expectInt(e.args[0], v[0]);
    auto d0 = wrapDim(expectInt(e.args[1], v[1]), r), d1 = wrapDim(expectInt(e.args[2], v[2]), r);
    if (!d0 || !d1 || r == 0) evalError(e, "transpose_perm: dimension out of range");
    std::vector<int64_t> p(r);
    std::iota(p.begin(), p.end(), 0);
    std::swap(p[*d0], p[*d1]);
    return p;
  }
  if (n == "dim_shape") {
    expectStatic(e.args[0], vals[0]);
    expectStatic(e.args[1], vals[1]);
    int64_t r = expectInt(e.args[0], v[0]);
    auto d = wrapDim(expectInt(e.args[1], v[1]), r);
    if (!d) evalError(e, "dim_shape: dimension out of range");
    std::vector<int64_t> s(r, 1);
    std::vector<SymExpr> se(r, SymExpr::integer(1));
    if (r > 0) {
      s[*d] = expectInt(e.args[2], v[2]);
      se[*d] = exprAt(vals[2], 0, s[*d]);
    }
    return Val(s, symTexts(se));
  }
  if (n == "planes2") {
    std::vector<int64_t> l = expectIntList(e.args[0], v[0]);
    if (l.size() < 2) evalError(e, "planes2: needs at least two sizes");
    int64_t p = 1;
    SymExpr pe = SymExpr::integer(1);
    for (size_t i = 0; i + 2 < l.size(); ++i) {
      p *= l[i];
      pe = mulExpr(pe, exprAt(vals[0], i, l[i]));
    }
    size_t a = l.size() - 2, b = l.size() - 1;
    return Val(std::vector<int64_t>{p, l[a] * l[b]}, symTexts({pe, mulExpr(exprAt(vals[0], a, l[a]), exprAt(vals[0], b, l[b]))}));
  }
  if (n == "neg_ints") {
    std::vector<int64_t> l = expectIntList(e.args[0], v[0]);
    std::vector<SymExpr> le;
    for (size_t i = 0; i < l.size(); ++i) le.push_back(mulExpr(SymExpr::integer(-1), exprAt(vals[0], i, l[i])));
    for (int64_t &x : l) x = -x;
    return Val(l, symTexts(le));
  }
  if (n == "tail") {
    expectStatic(e.args[1], vals[1]);
    std::vector<int64_t> l = expectIntList(e.args[0], v[0]);
    int64_t k = expectInt(e.args[1], v[1]);
    if (k < 0 || k > (int64_t)l.size()) evalError(e, "tail: n out of range");
    std::vector<std::string> ts;
    if (vals[0].symbolic()) ts.assign(vals[0].sym.end() - k, vals[0].sym.end());
    return Val(std::vector<int64_t>(l.end() - k, l.end()), ts);
  }
  if (n == "iota")
    return bb.call("aten.arange.default", {expectInt(e.args[0], v[0])}, {{"dtype", DTypeLit{DType::I64}}}, sc.node,
                   {{0, vals[0].sym}});
  if (n == "dims_except") {
    int64_t r = expectInt(e.args[0], v[0]);
    auto d = wrapDim(expectInt(e.args[1], v[1]), r);
    if (!d) evalError(e, "dims_except: dimension out of range");
    std::vector<int64_t> out;
    for (int64_t i = 0; i < r; ++i)
      if (i != *d) out.push_back(i);
    return out;
  }
  if (n == "zeros") return bb.zeros(expectTensor(e.args[0], v[0])->type(), sc.node);
  if (n == "zero") return bb.zeros(TensorType{expectTensor(e.args[0], v[0])->type().dtype, {}}, sc.node);
  internalError("helper " + n + " not implemented");
}

/// Folds arithmetic on constants (alpha * -1, exponent - 1, ...).
static std::optional<Arg> foldConstants(const std::string &name, const std::vector<Arg> &v) {
  for (auto &a : v)
    if (!isNumber(a)) return std::nullopt;
  bool allInt = std::all_of(v.begin(), v.end(), [](const Arg &a) { return std::holds_alternative<int64_t>(a); });
  auto mk = [&](double r, int64_t ri) -> Arg { return allInt ? Arg(ri) : Arg(r); };
  if (name == "neg" && v.size() == 1) return mk(-numberOf(v[0]), allInt ? -std::get<int64_t>(v[0]) : 0);
  if (v.size() != 2) return std::nullopt;
  double a = numberOf(v[0]), b = numberOf(v[1]);
  int64_t ia = allInt ? std::get<int64_t>(v[0]) : 0, ib = allInt ? std::get<int64_t>(v[1]) : 0;
  if (name == "add") return mk(a + b, ia + ib);
  if (name == "sub") return mk(a - b, ia - ib);
  if (name == "mul") return mk(a * b, ia * ib);
  if (name == "div") return Arg(a / b); // true division, as Python
  if (name == "pow") return Arg(std::pow(a, b));
  return std::nullopt;
}

/// Integer arithmetic of a formula on run-time sizes (add, sub, mul, neg): the value and its
/// expression; nullopt for anything else.
static std::optional<Val> foldSymbolic(const FormulaExpr &e, const std::vector<Val> &v) {
  bool any = false;
  for (const Val &x : v) any |= x.symbolic();
  if (!any) return std::nullopt;
  for (const Val &x : v) // a tensor operand: an op whose argument is the run-time size
    if (!isNumber(x.a)) return std::nullopt;
  for (const Val &x : v)
    if (!std::holds_alternative<int64_t>(x.a))
      evalError(e, "'" + e.str() + "': a float computed from run-time sizes is not supported yet: compile at one "
                                   "size with --specialize SYMBOL=N (docs/dynamic-shapes.md)");
  auto ex = [&](size_t i) { return exprAt(v[i], 0, std::get<int64_t>(v[i].a)); };
  auto val = [&](size_t i) { return std::get<int64_t>(v[i].a); };
  using Op = SymExpr::Op;
  if (e.name == "neg" && v.size() == 1) return Val(-val(0), symTexts({mulExpr(SymExpr::integer(-1), ex(0))}));
  if (v.size() == 2 && e.name == "add") return Val(val(0) + val(1), symTexts({SymExpr::binary(Op::Add, ex(0), ex(1))}));
  if (v.size() == 2 && e.name == "sub")
    return Val(val(0) - val(1), symTexts({SymExpr::binary(Op::Add, ex(0), mulExpr(SymExpr::integer(-1), ex(1)))}));
  if (v.size() == 2 && e.name == "mul") return Val(val(0) * val(1), symTexts({mulExpr(ex(0), ex(1))}));
  if (e.name == "div" || e.name == "pow")
    evalError(e, "'" + e.str() + "': a float computed from run-time sizes is not supported yet: compile at one "
                                 "size with --specialize SYMBOL=N (docs/dynamic-shapes.md)");
  return std::nullopt;
}

Val evalFormula(const FormulaExpr &e, FormulaScope &sc, BackwardBuilder &bb) {
  using K = FormulaExpr::Kind;
  const Node &node = *sc.node;
  switch (e.kind) {
  case K::Int: return e.i;
  case K::Float: return e.f;
  case K::String: return e.name;
  case K::List: {
    std::vector<Val> vals;
    for (auto &a : e.args) vals.push_back(evalFormula(a, sc, bb));
    std::vector<Arg> v;
    for (const Val &x : vals) v.push_back(x.a);
    if (v.empty()) return std::vector<int64_t>{};
    auto all = [&](auto pred) { return std::all_of(v.begin(), v.end(), pred); };
    if (all([](const Arg &a) { return std::holds_alternative<int64_t>(a); })) {
      std::vector<int64_t> r;
      std::vector<std::string> sym;
      for (size_t i = 0; i < v.size(); ++i) {
        r.push_back(std::get<int64_t>(v[i]));
        sym.push_back(vals[i].symbolic() ? vals[i].sym[0] : std::string());
      }
      Val out(r);
      if (std::any_of(sym.begin(), sym.end(), [](const std::string &x) { return !x.empty(); })) out.sym = sym;
      return out;
    }
    for (const Val &x : vals) expectStatic(e, x);
    if (all([](const Arg &a) { return isNumber(a); })) {
      std::vector<double> r;
      for (auto &a : v) r.push_back(numberOf(a));
      return r;
    }
    if (all([](const Arg &a) { return std::holds_alternative<bool>(a); })) {
      std::vector<bool> r;
      for (auto &a : v) r.push_back(std::get<bool>(a));
      return r;
    }
    if (all([](const Arg &a) { return std::holds_alternative<Node *>(a); })) {
      std::vector<Node *> r;
      for (auto &a : v) r.push_back(std::get<Node *>(a));
      return r;
    }
    evalError(e, "list elements must be all ints, all numbers, all bools or all tensors");
  }
  case K::Ident: {
    const std::string &n = e.name;
    if (n == "True") return true;
    if (n == "False") return false;
    if (n == "None") return std::monostate{};
    const auto &sa = node.op->schema.args;
    for (size_t i = 0; i < sa.size(); ++i)
      if (sa[i].name == n) {
        Val r(node.args[i]);
        if (const std::vector<std::string> *x = node.symArg(i)) r.sym = *x;
        return r;
      }
    if (auto lv = sc.letValues.find(n); lv != sc.letValues.end()) return lv->second;
    if (sc.rule)
      for (auto &[ln, le] : sc.rule->lets)
        if (ln == n) {
          if (!sc.letInProgress.insert(n).second) evalError(e, "'" + n + "' is defined in terms of itself");
          Val v = evalFormula(le, sc, bb);
          sc.letInProgress.erase(n);
          sc.letValues[n] = v;
          return v;
        }
    if (n == "grad") {
      if (!sc.grads[0]) sc.grads[0] = bb.zeros(node.types[0], sc.node);
      return sc.grads[0];
    }
    if (n == "result" || (n.rfind("result", 0) == 0 && n.size() > 6)) {
      size_t k = n == "result" ? 0 : std::stoul(n.substr(6));
      AOTC_ASSERT(k < sc.results->size(), "result index out of range");
      Node *&r = (*sc.results)[k];
      if (!r) {
        Graph &g = bb.graph();
        r = buildCall(g, g.uniqueName("getitem"), "getitem",
                      {const_cast<Node *>(sc.node), int64_t(k)}, {}, node.loc);
        r->inheritSource(node);
      }
      return r;
    }
    evalError(e, "unknown name '" + n + "'");
  }
  case K::Index: {
    size_t k = (size_t)e.i;
    if (!(e.args[0].kind == K::Ident && e.args[0].name == "grads")) {
      // result k of a multi-result op the formula built (convolution_backward(...)[1]).
      Val v = evalFormula(e.args[0], sc, bb);
      Node *m = expectTensor(e.args[0], v.a);
      if (m->types.size() < 2 || k >= m->types.size())
        evalError(e, "index " + std::to_string(k) + " of '" + m->name + "', which has " +
                         std::to_string(m->types.size()) + " result(s)");
      Graph &g = bb.graph();
      Node *r = buildCall(g, g.uniqueName("getitem"), "getitem", {m, int64_t(k)}, {}, node.loc);
      r->inheritSource(node);
      return r;
    }
    if (k >= sc.grads.size()) evalError(e, "grads index out of range");
    if (!sc.grads[k]) sc.grads[k] = bb.zeros(node.types[k], sc.node);
    return sc.grads[k];
  }
  case K::Attr: {
    Val b = evalFormula(e.args[0], sc, bb);
    Node *x = expectTensor(e.args[0], b.a);
    const TensorType &t = x->type();
    if (e.name == "sizes") return Val(t.shape, t.sym);
    if (e.name == "dim") return t.rank();
    if (e.name == "numel") {
      SymExpr ne = SymExpr::integer(1);
      for (size_t d = 0; d < t.shape.size(); ++d)
        ne = mulExpr(ne, d < t.sym.size() && !t.sym[d].empty() ? SymExpr::parse(t.sym[d]) : SymExpr::integer(t.shape[d]));
      return Val(t.numel(), symTexts({ne}));
    }
    if (e.name == "dtype") return DTypeLit{t.dtype};
    evalError(e, "unknown attribute '" + e.name + "'");
  }
  case K::Call: {
    if (const HelperInfo *h = findHelper(e.name)) return evalHelper(e, *h, sc, bb);
    std::vector<Val> argVals, kwVals;
    std::vector<Arg> args;
    std::vector<std::pair<std::string, Arg>> kwargs;
    for (auto &a : e.args) {
      argVals.push_back(evalFormula(a, sc, bb));
      args.push_back(argVals.back().a);
    }
    for (auto &[k, a] : e.kwargs) {
      kwVals.push_back(evalFormula(a, sc, bb));
      kwargs.emplace_back(k, kwVals.back().a);
    }
    if (kwargs.empty()) {
      if (auto f = foldSymbolic(e, argVals)) return *f;
      bool symbolic = std::any_of(argVals.begin(), argVals.end(), [](const Val &x) { return x.symbolic(); });
      if (!symbolic)
        if (auto f = foldConstants(e.name, args)) return *f;
    }
    std::vector<const OpDef *> cands = resolveCallee(e.name);
    if (cands.empty()) evalError(e, "unknown function '" + e.name + "'");
    for (bool lenient : {false, true})
      for (const OpDef *op : cands)
        if (overloadFits(*op, args, kwargs, lenient)) {
          // The run-time sizes of the arguments, by schema index (positional ones in order).
          SymArgs sym;
          for (size_t i = 0; i < argVals.size(); ++i)
            if (argVals[i].symbolic()) sym.push_back({i, argVals[i].sym});
          for (size_t j = 0; j < kwVals.size(); ++j)
            if (kwVals[j].symbolic())
              for (size_t i = 0; i < op->schema.args.size(); ++i)
                if (op->schema.args[i].name == kwargs[j].first) sym.push_back({i, kwVals[j].sym});
          return bb.call(op->target(), args, kwargs, sc.node, sym);
        }
    std::string got;
    for (auto &a : args) got += std::string(got.empty() ? "" : ", ") + argKindName(a);
    for (auto &[k, a] : kwargs) got += (got.empty() ? "" : ", ") + k + "=" + argKindName(a);
    std::string have;
    for (const OpDef *op : cands) have += "\n  " + op->target();
    evalError(e, "no overload of '" + e.name + "' takes (" + got + "); candidates:" + have);
  }
  }
  internalError("bad formula kind");
}

//===-- Load-time validation --------------------------------------------------===//

void validateFormula(const FormulaExpr &e, const OpDef &op, const std::set<std::string> &lets) {
  using K = FormulaExpr::Kind;
  int nret = op.schema.numReturns;
  switch (e.kind) {
  case K::Int:
  case K::Float:
  case K::String: return;
  case K::List:
    for (auto &a : e.args) validateFormula(a, op, lets);
    return;
  case K::Ident: {
    const std::string &n = e.name;
    if (n == "True" || n == "False" || n == "None") return;
    for (auto &a : op.schema.args)
      if (a.name == n) return;
    if (lets.count(n)) return;
    if (n == "grad") {
      if (nret != 1) userError(e.loc, "'grad' is ambiguous for " + op.target() + ", which has " +
                                          std::to_string(nret) + " results; use grads[i]");
      return;
    }
    if (n == "grads") userError(e.loc, "'grads' must be indexed: grads[i]");
    if (n == "result") {
      if (nret != 1) userError(e.loc, "'result' is ambiguous for " + op.target() + "; use result0..result" +
                                          std::to_string(nret - 1));
      return;
    }
    if (n.rfind("result", 0) == 0 && n.size() > 6 &&
        std::all_of(n.begin() + 6, n.end(), [](char c) { return std::isdigit((unsigned char)c); })) {
      if (n.size() > 12 || std::stoul(n.substr(6)) >= (size_t)nret)
        userError(e.loc, "'" + n + "' out of range: " + op.target() + " has " + std::to_string(nret) +
                             " result(s)");
      return;
    }
    std::string names;
    for (auto &a : op.schema.args) names += (names.empty() ? "" : ", ") + a.name;
    userError(e.loc, "unknown name '" + n + "' in formula for " + op.target() +
                         " (inputs: " + names + "; also grad/grads[i], result/resultK)");
  }
  case K::Index:
    if (e.args[0].kind == K::Call || (e.args[0].kind == K::Ident && lets.count(e.args[0].name))) {
      validateFormula(e.args[0], op, lets); // f(...)[k] / let[k]: result k of a multi-result op
      return;
    }
    if (e.args[0].kind != K::Ident || e.args[0].name != "grads")
      userError(e.loc, "only grads[i], a call's result f(...)[k] or a let binding's can be indexed");
    if (e.i < 0 || e.i >= nret)
      userError(e.loc, "grads[" + std::to_string(e.i) + "] out of range: " + op.target() + " has " +
                           std::to_string(nret) + " result(s)");
    return;
  case K::Attr:
    if (e.name != "sizes" && e.name != "dim" && e.name != "numel" && e.name != "dtype")
      userError(e.loc, "unknown attribute '" + e.name + "' (known: sizes, dim, numel, dtype)");
    validateFormula(e.args[0], op, lets);
    return;
  case K::Call: {
    if (const HelperInfo *h = findHelper(e.name)) {
      if ((int)e.args.size() < h->minArgs || (int)e.args.size() > h->maxArgs || !e.kwargs.empty())
        userError(e.loc, "wrong number of arguments for helper: " + std::string(h->doc));
    } else {
      auto cands = resolveCallee(e.name);
      bool foldable = e.name == "neg" || e.name == "add" || e.name == "sub" || e.name == "mul" ||
                      e.name == "div" || e.name == "pow";
      if (cands.empty() && !foldable)
        userError(e.loc, "unknown function '" + e.name + "' (not a registry op, alias or helper)");
      for (auto &[k, v] : e.kwargs) {
        bool found = false;
        for (const OpDef *c : cands)
          for (auto &a : c->schema.args) found |= a.name == k;
        if (!found) userError(v.loc, "'" + e.name + "' has no argument '" + k + "'");
      }
    }
    for (auto &a : e.args) validateFormula(a, op, lets);
    for (auto &[k, v] : e.kwargs) validateFormula(v, op, lets);
    return;
  }
  }
}

} // namespace autodiff
} // namespace aotc
