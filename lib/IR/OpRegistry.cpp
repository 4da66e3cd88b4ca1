//===- OpRegistry.cpp - Schema parsing, the op table, call construction ------===//
//
// This file implements:
//  * parseSchema: ATen's function-schema grammar as used in
//    aten/src/ATen/native/native_functions.yaml (torchgen/model.py FunctionSchema),
//    restricted to what aotc's ops use: alias annotations "(a)", "(a!)", "(a -> *)",
//    sized lists "int[1]", optionals "?", "Tensor?[]", kwarg-only marker "*",
//    defaults (None, True/False, ints, floats, 'strings', [lists], Mean/Sum/None
//    reduction names) and tuple returns;
//  * the registry (filled explicitly from lib/IR/ops/*.cpp on first use);
//  * buildCall: positional + keyword arguments -> schema order with defaults,
//    type coercion (int -> float for float args, int -> int[N] broadcasting),
//    then shape/dtype inference.
//===----------------------------------------------------------------------===//
#include "aotc/OpRegistry.h"
#include "ops/Ops.h"

#include <algorithm>
#include <cctype>
#include <cstdlib>

namespace aotc {

//===-- Schema parsing -------------------------------------------------------===//

static std::string trim(const std::string &s) {
  size_t b = s.find_first_not_of(" \t\n");
  if (b == std::string::npos) return "";
  size_t e = s.find_last_not_of(" \t\n");
  return s.substr(b, e - b + 1);
}

/// Splits on commas that are not inside (), [] or quotes.
static std::vector<std::string> splitTopLevel(const std::string &s) {
  std::vector<std::string> parts;
  int depth = 0;
  bool inStr = false;
  std::string cur;
  for (char c : s) {
    if (c == '\'' ) inStr = !inStr;
    if (!inStr) {
      if (c == '(' || c == '[') ++depth;
      if (c == ')' || c == ']') --depth;
      if (c == ',' && depth == 0) {
        parts.push_back(trim(cur));
        cur.clear();
        continue;
      }
    }
    cur += c;
  }
  if (!trim(cur).empty() || !parts.empty()) parts.push_back(trim(cur));
  return parts;
}

static bool parseIntText(const std::string &s, int64_t &out) {
  if (s.empty()) return false;
  char *end = nullptr;
  long long v = std::strtoll(s.c_str(), &end, 10);
  if (*end != 0) return false;
  out = v;
  return true;
}

static bool parseDoubleText(const std::string &s, double &out) {
  if (s.empty()) return false;
  char *end = nullptr;
  double v = std::strtod(s.c_str(), &end);
  if (*end != 0) return false;
  out = v;
  return true;
}

/// Parses a default value for a schema argument of (base) type `type`.
static Arg parseDefault(const std::string &text, const SchemaArg &a, const std::string &schema) {
  auto bad = [&]() -> Arg {
    internalError("schema '" + schema + "': cannot parse default '" + text + "' of '" + a.name + "'");
  };
  if (text == "None") return std::monostate{};
  const std::string &t = a.type;
  bool isList = t.size() > 2 && t.substr(t.size() - 2) == "[]";
  if (isList) {
    std::string elem = t.substr(0, t.size() - 2);
    std::vector<std::string> items;
    if (text.front() == '[') {
      AOTC_ASSERT(text.back() == ']', "schema '" + schema + "': bad list default");
      std::string inner = trim(text.substr(1, text.size() - 2));
      if (!inner.empty()) items = splitTopLevel(inner);
    } else {
      // "int[2] stride=1": a scalar default repeated N times.
      for (int64_t i = 0; i < std::max<int64_t>(a.listLen, 1); ++i) items.push_back(text);
    }
    if (elem == "int" || elem == "SymInt") {
      std::vector<int64_t> v;
      for (auto &it : items) {
        int64_t x;
        if (!parseIntText(it, x)) return bad();
        v.push_back(x);
      }
      return v;
    }
    if (elem == "float") {
      std::vector<double> v;
      for (auto &it : items) {
        double x;
        if (!parseDoubleText(it, x)) return bad();
        v.push_back(x);
      }
      return v;
    }
    if (elem == "bool") {
      std::vector<bool> v;
      for (auto &it : items) {
        if (it != "True" && it != "False") return bad();
        v.push_back(it == "True");
      }
      return v;
    }
    if (elem == "Tensor" || elem == "Tensor?") {
      if (!items.empty()) return bad();
      return std::vector<Node *>{};
    }
    return bad();
  }
  if (t == "int" || t == "SymInt") {
    // Reduction enum of at::Reduction (aten/src/ATen/core/Reduction.h).
    if (text == "Mean") return int64_t(1);
    if (text == "Sum") return int64_t(2);
    int64_t x;
    if (!parseIntText(text, x)) return bad();
    return x;
  }
  if (t == "float") {
    double x;
    if (!parseDoubleText(text, x)) return bad();
    return x;
  }
  if (t == "bool") {
    if (text == "True") return true;
    if (text == "False") return false;
    return bad();
  }
  if (t == "str") {
    if (text.size() < 2 || text.front() != '\'' || text.back() != '\'') return bad();
    return text.substr(1, text.size() - 2);
  }
  if (t == "Scalar") {
    if (text == "True") return true;
    if (text == "False") return false;
    int64_t i;
    if (parseIntText(text, i)) return i;
    double d;
    if (parseDoubleText(text, d)) return d;
    return bad();
  }
  if (t == "ScalarType") {
    if (auto dt = parseDType(text)) return DTypeLit{*dt};
    return bad();
  }
  if (t == "MemoryFormat" || t == "Layout") return EnumLit{"torch." + text};
  return EnumLit{text};
}

/// Parses "Tensor(a!)", "int[1]?", "Tensor?[]" into base type, list size, optional, alias.
static void parseType(std::string ty, SchemaArg &a, std::string &alias, const std::string &schema) {
  // Alias annotation "(a)", "(a!)", "(a -> *)".
  size_t lp = ty.find('(');
  if (lp != std::string::npos) {
    size_t rp = ty.find(')', lp);
    AOTC_ASSERT(rp != std::string::npos, "schema '" + schema + "': unbalanced alias annotation");
    alias = ty.substr(lp + 1, rp - lp - 1);
    ty = ty.substr(0, lp) + ty.substr(rp + 1);
  }
  if (!ty.empty() && ty.back() == '?') {
    a.optional = true;
    ty.pop_back();
  }
  size_t lb = ty.find('[');
  if (lb != std::string::npos) {
    size_t rb = ty.find(']', lb);
    AOTC_ASSERT(rb != std::string::npos, "schema '" + schema + "': unbalanced list type");
    std::string n = ty.substr(lb + 1, rb - lb - 1);
    if (!n.empty()) {
      int64_t len;
      AOTC_ASSERT(parseIntText(n, len), "schema '" + schema + "': bad list size '" + n + "'");
      a.listLen = len;
    }
    ty = ty.substr(0, lb) + "[]";
  }
  a.type = ty;
}

std::string OpSchema::target() const { return ns + "." + name + "." + overload; }

OpSchema parseSchema(const std::string &text) {
  OpSchema s;
  std::string str = text;
  if (str.rfind("aten::", 0) == 0) str = str.substr(6);
  if (str.rfind("aotc::", 0) == 0) { // aotc's own primitives (lower rules emit them)
    s.ns = "aotc";
    str = str.substr(6);
  }
  size_t lp = str.find('(');
  size_t arrow = str.rfind("->");
  AOTC_ASSERT(lp != std::string::npos && arrow != std::string::npos && arrow > lp,
              "malformed schema '" + text + "'");
  std::string fullName = trim(str.substr(0, lp));
  size_t dot = fullName.find('.');
  s.name = dot == std::string::npos ? fullName : fullName.substr(0, dot);
  s.overload = dot == std::string::npos ? "default" : fullName.substr(dot + 1);
  size_t rp = str.rfind(')', arrow);
  AOTC_ASSERT(rp != std::string::npos && rp > lp, "malformed schema '" + text + "'");
  std::string argText = str.substr(lp + 1, rp - lp - 1);
  bool kwOnly = false;
  for (const std::string &part : splitTopLevel(argText)) {
    if (part.empty()) continue;
    if (part == "*") {
      kwOnly = true;
      continue;
    }
    SchemaArg a;
    a.kwargOnly = kwOnly;
    std::string decl = part, def;
    size_t eq = part.find('=');
    if (eq != std::string::npos) {
      decl = trim(part.substr(0, eq));
      def = trim(part.substr(eq + 1));
      a.hasDefault = true;
    }
    // The type may contain spaces inside an alias annotation "(a -> *)".
    size_t sp = std::string::npos;
    int depth = 0;
    for (size_t i = 0; i < decl.size(); ++i) {
      if (decl[i] == '(') ++depth;
      if (decl[i] == ')') --depth;
      if (decl[i] == ' ' && depth == 0) sp = i;
    }
    AOTC_ASSERT(sp != std::string::npos, "schema '" + text + "': argument '" + part + "' has no name");
    a.name = trim(decl.substr(sp + 1));
    std::string alias;
    parseType(trim(decl.substr(0, sp)), a, alias, text);
    if (alias.find('!') != std::string::npos) {
      s.mutates = true;
      s.mutatedArgs.push_back((int)s.args.size());
    }
    if (a.hasDefault) a.defaultValue = parseDefault(def, a, text);
    s.args.push_back(std::move(a));
  }
  std::string ret = trim(str.substr(arrow + 2));
  std::vector<std::string> rets;
  if (!ret.empty() && ret.front() == '(') {
    AOTC_ASSERT(ret.back() == ')', "malformed returns in '" + text + "'");
    std::string inner = trim(ret.substr(1, ret.size() - 2));
    if (!inner.empty()) rets = splitTopLevel(inner);
  } else {
    rets.push_back(ret);
  }
  s.numReturns = (int)rets.size();
  s.returnsList = rets.size() == 1 && rets[0].size() >= 2 && rets[0].compare(rets[0].size() - 2, 2, "[]") == 0;
  for (const std::string &r : rets) {
    size_t a = r.find('(');
    if (a != std::string::npos) {
      std::string ann = r.substr(a + 1, r.find(')', a) - a - 1);
      if (ann.find('!') == std::string::npos) s.returnsAlias = true;
    }
  }
  return s;
}

const char *categoryName(OpCategory c) {
  switch (c) {
  case OpCategory::Pointwise: return "pointwise";
  case OpCategory::Reduction: return "reduction";
  case OpCategory::View: return "view";
  case OpCategory::Matmul: return "matmul";
  case OpCategory::Index: return "index";
  case OpCategory::Factory: return "factory";
  case OpCategory::Composite: return "composite";
  case OpCategory::Conv: return "conv";
  case OpCategory::Fft: return "fft";
  case OpCategory::Other: return "other";
  }
  return "?";
}

//===-- Registry ---------------------------------------------------------------===//

OpRegistry &OpRegistry::get() {
  // Filled by explicit calls (not static constructors, which a static-library
  // link could drop).
  static OpRegistry *reg = [] {
    auto *r = new OpRegistry;
    ops::registerPointwiseOps(*r);
    ops::registerReductionOps(*r);
    ops::registerViewOps(*r);
    ops::registerMatmulOps(*r);
    ops::registerIndexOps(*r);
    ops::registerFactoryOps(*r);
    ops::registerCompositeOps(*r);
    ops::registerInPlaceOps(*r);
    ops::registerScatterOps(*r);
    ops::registerConvOps(*r);
    ops::registerBatchNormOps(*r);
    ops::registerPoolOps(*r);
    ops::registerResampleOps(*r);
    ops::registerGroupNormOps(*r);
    ops::registerAttentionOps(*r);
    ops::registerRandomOps(*r);
    ops::registerScanOps(*r);
    ops::registerArithOps(*r);
    ops::registerRearrangeOps(*r);
    ops::registerSortOps(*r);
    ops::registerDistanceOps(*r);
    ops::registerPool3dOps(*r);
    ops::registerGridSampleOps(*r);
    ops::registerFftOps(*r);
    ops::registerLinalgOps(*r);
    ops::registerSpecialOps(*r);
    ops::registerEmbeddingBagOps(*r);
    ops::registerAdaptiveMaxPoolOps(*r);
    ops::registerNonCoreOps(*r); // last: the *_copy forms copy their views' entries
    ops::registerSymbolicShapes(*r); // SymShapes.cpp: OpDef::symInfer of the ops above
    for (auto &[name, def] : r->ops_)
      AOTC_ASSERT(def.infer && def.eval, "op '" + name + "' lacks a shape function or evaluator");
    return r;
  }();
  return *reg;
}

OpDef &OpRegistry::add(const std::string &schema, OpCategory cat) {
  OpSchema s = parseSchema(schema);
  std::string t = s.target();
  AOTC_ASSERT(!ops_.count(t), "op '" + t + "' registered twice");
  OpDef &d = ops_[t];
  d.schema = std::move(s);
  d.category = cat;
  // PyTorch's default_recomputable_ops by category (the registration sets it for others).
  d.recomputable = cat == OpCategory::Pointwise || cat == OpCategory::View || cat == OpCategory::Reduction ||
                   cat == OpCategory::Factory;
  return d;
}

std::string canonicalTarget(const std::string &target) {
  std::string t = target;
  if (t.rfind("torch.ops.", 0) == 0) t = t.substr(10);
  size_t cc = t.find("::");
  if (cc != std::string::npos) t = t.substr(0, cc) + "." + t.substr(cc + 2);
  if (t == "_operator.getitem" || t == "operator.getitem") return "getitem";
  if (t.rfind("aten.", 0) == 0 && t.find('.', 5) == std::string::npos) t += ".default";
  return t;
}

OpDef *OpRegistry::edit(const std::string &target) {
  auto it = ops_.find(canonicalTarget(target));
  return it == ops_.end() ? nullptr : &it->second;
}

const OpDef *OpRegistry::lookup(const std::string &target) const {
  auto it = ops_.find(canonicalTarget(target));
  return it == ops_.end() ? nullptr : &it->second;
}

//===-- buildCall ---------------------------------------------------------------===//


/// Converts a user-supplied argument to the representation its schema type uses.
/// op.infer(node) plus the dtype contract of DType: I32/U8 tensors only at op.indexArgs
/// or through views (an index is often unsqueezed or expanded first), never computed.
static std::vector<TensorType> checkedInfer(const OpDef &op, const Node &node) {
  if (op.category == OpCategory::View) return op.infer(node);
  auto narrowMsg = [](DType dt) {
    return std::string(dtypeAbbr(dt)) + " tensors are index-only in aotc (it computes on f32, f64, "
                                        "i64 and bool; see docs/formats.md, \"Dtypes\")";
  };
  for (size_t i = 0; i < node.args.size(); ++i) {
    auto check = [&](const Node *a) {
      if (!a || a->types.size() != 1 || !isNarrowInt(a->type().dtype)) return;
      if (std::find(op.indexArgs.begin(), op.indexArgs.end(), (int)i) != op.indexArgs.end()) return;
      // A comparison reads the values exactly (its result is bool): eye's u8 aranges.
      if (op.scalar && op.scalar->operands == OpDef::ScalarBody::Operands::Compare) return;
      std::string argName = i < op.schema.args.size() ? op.schema.args[i].name : std::to_string(i);
      nodeError(node, "argument '" + argName + "' ('" + a->name + "') is " + a->type().str() + ": " +
                          narrowMsg(a->type().dtype));
    };
    if (auto *p = std::get_if<Node *>(&node.args[i])) check(*p);
    if (auto *l = std::get_if<std::vector<Node *>>(&node.args[i]))
      for (const Node *a : *l) check(a);
  }
  std::vector<TensorType> types = op.infer(node);
  for (const TensorType &t : types)
    if (isNarrowInt(t.dtype) && !op.narrowResults) nodeError(node, "produces " + t.str() + ": " + narrowMsg(t.dtype));
  return types;
}

static Arg coerceArg(const Node &n, const OpDef &op, const SchemaArg &sa, Arg v) {
  auto bad = [&](const std::string &want) -> Arg {
    nodeError(n, "argument '" + sa.name + "' expects " + want + ", got " + argKindName(v));
  };
  if (std::holds_alternative<std::monostate>(v)) {
    if (sa.optional) return v;
    return bad(sa.type);
  }
  const std::string &t = sa.type;
  bool emptyList = (std::holds_alternative<std::vector<int64_t>>(v) && std::get<std::vector<int64_t>>(v).empty()) ||
                   (std::holds_alternative<std::vector<double>>(v) && std::get<std::vector<double>>(v).empty()) ||
                   (std::holds_alternative<std::vector<bool>>(v) && std::get<std::vector<bool>>(v).empty()) ||
                   (std::holds_alternative<std::vector<Node *>>(v) && std::get<std::vector<Node *>>(v).empty());
  if (t == "Tensor") {
    if (auto *p = std::get_if<Node *>(&v)) {
      if (!*p) return bad("a tensor");
      if ((*p)->types.size() != 1)
        nodeError(n, "argument '" + sa.name + "' is the tuple '" + (*p)->name +
                         "'; read one element with getitem");
      return v;
    }
    // Python numbers in tensor positions of elementwise ops are wrapped scalars
    // (as eager PyTorch does for `aten.mul.Tensor(x, 0.5)`).
    bool num = std::holds_alternative<int64_t>(v) || std::holds_alternative<double>(v) ||
               std::holds_alternative<bool>(v);
    if (num && op.category == OpCategory::Pointwise)
      return v;
    return bad("a tensor");
  }
  if (t == "Tensor[]" || t == "Tensor?[]") {
    if (emptyList) return std::vector<Node *>{};
    if (auto *p = std::get_if<std::vector<Node *>>(&v)) {
      for (Node *x : *p) {
        if (!x && t == "Tensor[]") return bad("a list of tensors");
        if (x && x->types.size() != 1)
          nodeError(n, "argument '" + sa.name + "' contains the tuple '" + x->name + "'");
      }
      return v;
    }
    return bad("a list of tensors");
  }
  if (t == "int" || t == "SymInt") {
    if (std::holds_alternative<int64_t>(v)) return v;
    if (auto *b = std::get_if<bool>(&v)) return int64_t(*b);
    return bad("an int");
  }
  if (t == "int[]" || t == "SymInt[]") {
    if (emptyList) return std::vector<int64_t>{};
    if (std::holds_alternative<std::vector<int64_t>>(v)) return v;
    if (auto *i = std::get_if<int64_t>(&v)) {
      if (sa.listLen > 0) return std::vector<int64_t>(sa.listLen, *i);
    }
    return bad("a list of ints");
  }
  if (t == "float") {
    if (std::holds_alternative<double>(v)) return v;
    if (auto *i = std::get_if<int64_t>(&v)) return (double)*i;
    return bad("a float");
  }
  if (t == "float[]") {
    if (emptyList) return std::vector<double>{};
    if (std::holds_alternative<std::vector<double>>(v)) return v;
    if (auto *i = std::get_if<std::vector<int64_t>>(&v)) return std::vector<double>(i->begin(), i->end());
    return bad("a list of floats");
  }
  if (t == "bool") {
    if (std::holds_alternative<bool>(v)) return v;
    return bad("a bool");
  }
  if (t == "bool[]") {
    if (emptyList) return std::vector<bool>{};
    if (std::holds_alternative<std::vector<bool>>(v)) {
      if (sa.listLen > 0 && (int64_t)std::get<std::vector<bool>>(v).size() != sa.listLen)
        nodeError(n, "argument '" + sa.name + "' expects " + std::to_string(sa.listLen) + " bools");
      return v;
    }
    return bad("a list of bools");
  }
  if (t == "Scalar") {
    if (std::holds_alternative<int64_t>(v) || std::holds_alternative<double>(v) ||
        std::holds_alternative<bool>(v))
      return v;
    return bad("a number");
  }
  if (t == "str") {
    if (std::holds_alternative<std::string>(v)) return v;
    return bad("a string");
  }
  if (t == "ScalarType") {
    if (std::holds_alternative<DTypeLit>(v)) return v;
    return bad("a dtype");
  }
  // Layout, Device, MemoryFormat: carried, not interpreted.
  if (auto *s = std::get_if<std::string>(&v)) return EnumLit{*s};
  if (std::holds_alternative<EnumLit>(v)) return v;
  return bad(t);
}

std::vector<Arg> bindArgs(const Node &at, const std::vector<Arg> &args,
                          const std::vector<std::pair<std::string, Arg>> &kwargs) {
  AOTC_ASSERT(at.op, "bindArgs: node '" + at.name + "' has no registry entry");
  const OpDef &op = *at.op;
  const auto &sa = op.schema.args;
  size_t numPositional = 0;
  for (auto &a : sa)
    if (!a.kwargOnly) ++numPositional;
  if (args.size() > numPositional)
    nodeError(at, "expects at most " + std::to_string(numPositional) + " arguments, got " + std::to_string(args.size()));
  std::vector<std::optional<Arg>> slots(sa.size());
  for (size_t i = 0; i < args.size(); ++i) slots[i] = args[i];
  for (auto &[k, v] : kwargs) {
    size_t i = 0;
    while (i < sa.size() && sa[i].name != k) ++i;
    if (i == sa.size()) nodeError(at, "unexpected keyword argument '" + k + "'");
    if (slots[i]) nodeError(at, "got multiple values for argument '" + k + "'");
    slots[i] = v;
  }
  std::vector<Arg> out;
  for (size_t i = 0; i < sa.size(); ++i) {
    if (!slots[i]) {
      if (!sa[i].hasDefault) nodeError(at, "missing argument '" + sa[i].name + "'");
      slots[i] = sa[i].defaultValue;
    }
    out.push_back(coerceArg(at, op, sa[i], *slots[i]));
  }
  return out;
}

/// The run-time sizes a node reads, for messages: "argument 'x' is f32[s17, 16]".
static std::string describeSizes(const Node &n) {
  std::vector<std::string> parts;
  const OpSchema *s = n.op ? &n.op->schema : nullptr;
  for (size_t i = 0; i < n.args.size(); ++i) {
    std::string name = s && i < s->args.size() ? s->args[i].name : std::to_string(i);
    if (auto *p = std::get_if<Node *>(&n.args[i]); p && *p && (*p)->types.size() == 1 && (*p)->type().symbolic())
      parts.push_back("argument '" + name + "' is " + (*p)->type().str());
    else if (n.symArg(i))
      parts.push_back("argument '" + name + "' depends on run-time sizes");
  }
  std::string r;
  for (const std::string &p : parts) r += (r.empty() ? "" : ", ") + p;
  return r.empty() ? "its results have run-time sizes" : r;
}

Node *buildCall(Graph &g, const std::string &name, const std::string &target,
                const std::vector<Arg> &args, const std::vector<std::pair<std::string, Arg>> &kwargs,
                const SourceLoc &loc, Node *insertBefore, const SymArgs &symArgs, SizeInference sizes) {
  std::string t = canonicalTarget(target);
  Node tmp;
  tmp.name = name;
  tmp.kind = NodeKind::CallFunction;
  tmp.target = t;
  tmp.loc = loc;
  std::vector<TensorType> types;
  if (t == "getitem") {
    if (args.size() != 2 || !kwargs.empty() || !std::holds_alternative<Node *>(args[0]) ||
        !std::get<Node *>(args[0]) || !std::holds_alternative<int64_t>(args[1]))
      nodeError(tmp, "getitem expects (node, index)");
    tmp.args = args;
    types = inferTypes(tmp);
  } else {
    const OpDef *op = OpRegistry::get().lookup(t);
    if (!op) userError(loc, "unknown op '" + target + "'");
    tmp.op = op;
    tmp.args = bindArgs(tmp, args, kwargs);
    for (const auto &[i, exprs] : symArgs) {
      AOTC_ASSERT(i < tmp.args.size(), "run-time sizes for argument " + std::to_string(i) + " of " + t);
      if (std::any_of(exprs.begin(), exprs.end(), [](const std::string &e) { return !e.empty(); }))
        tmp.setSymArg(i, exprs);
    }
    types = checkedInfer(*op, tmp);
  }
  if (sizes == SizeInference::Runtime) {
    std::optional<std::vector<std::vector<std::string>>> sym = inferSymbolic(tmp, types);
    if (!sym)
      nodeError(tmp, "aotc has no shape function over run-time sizes for this op yet (" + describeSizes(tmp) +
                         "): compile at one size with --specialize SYMBOL=N (docs/dynamic-shapes.md)");
    for (size_t k = 0; k < types.size(); ++k) types[k].sym = (*sym)[k];
  }
  Node *n = insertBefore ? g.insertCallBefore(insertBefore, name, t, std::move(tmp.args), std::move(types))
                         : g.addCall(name, t, std::move(tmp.args), std::move(types));
  n->loc = loc;
  n->symArgs = std::move(tmp.symArgs);
  return n;
}

std::vector<TensorType> inferTypes(const Node &node) {
  if (node.isGetitem()) {
    AOTC_ASSERT(node.args.size() == 2, "getitem needs 2 arguments");
    Node *src = std::get<Node *>(node.args[0]);
    int64_t i = std::get<int64_t>(node.args[1]);
    if (i < 0) i += (int64_t)src->types.size();
    if (i < 0 || i >= (int64_t)src->types.size())
      nodeError(node, "getitem index " + std::to_string(std::get<int64_t>(node.args[1])) +
                          " out of range for '" + src->name + "' with " +
                          std::to_string(src->types.size()) + " results");
    return {src->types[i]};
  }
  const OpDef *op = node.op ? node.op : OpRegistry::get().lookup(node.target);
  if (!op) userError(node.loc, "unknown op '" + node.target + "'");
  return checkedInfer(*op, node);
}

} // namespace aotc
