//===- Sizes.cpp - The symbolic sizes of a dynamic torch.export --------------===//
//
// Sizes.h. The symbol facts (range_constraints, `as_expr` sizes, the node kinds)
// are torch 2.15's (../shared/reference/distributed-dynamic.md B.4, measured on
// tools/export/gen_dynamic_cases.py's archives).
//===----------------------------------------------------------------------===//
#include "Sizes.h"

#include <cctype>
#include <cmath>
#include <set>

namespace aotc::dynamic_sizes {

using json = nlohmann::json;

std::string Range::str() const {
  return "[" + std::to_string(min) + ", " + (max ? std::to_string(*max) : std::string("inf")) + "]";
}

std::string Bindings::str() const {
  std::string s;
  for (auto &[k, v] : values) s += (s.empty() ? "" : ", ") + k + "=" + std::to_string(v);
  return s;
}

namespace {

/// A user input dimension whose size is symbolic.
struct SymDim {
  std::string input;
  size_t dim;
  std::string exprStr; ///< As written (srepr or str).
  std::optional<SymExpr> expr;
  std::set<std::string> symbols; ///< expr's symbols.
};

/// A range bound: an int64, or nullopt for null (unbounded); anything else is an error.
std::optional<int64_t> bound(const json &v, const std::string &what, DiagnosticList &diags, const SourceLoc &loc) {
  if (v.is_number_unsigned()) {
    if (v.get<uint64_t>() <= (uint64_t)INT64_MAX) return (int64_t)v.get<uint64_t>();
  } else if (v.is_number_integer()) {
    return v.get<int64_t>();
  } else if (v.is_null() || (v.is_number_float() && std::isinf(v.get<double>()))) {
    return std::nullopt;
  }
  diags.error(loc, what + ": expected an int64 or null, got " + (v.is_primitive() ? v.dump() : v.type_name()));
  return std::nullopt;
}

std::optional<int64_t> parseInt(const std::string &s) {
  if (s.empty() || s.size() > 18) return std::nullopt;
  size_t i = s[0] == '-' ? 1 : 0;
  if (i == s.size()) return std::nullopt;
  for (size_t k = i; k < s.size(); ++k)
    if (!std::isdigit((unsigned char)s[k])) return std::nullopt;
  return std::stoll(s);
}

} // namespace

Bindings bindSymbols(const json &program, const std::vector<std::string> &specialize,
                      const std::vector<std::string> &maxSize, const SourceLoc &loc) {
  Bindings b;
  DiagnosticList diags;
  if (program.contains("range_constraints")) {
    const json &rcs = program["range_constraints"];
    if (!rcs.is_object()) diags.error(loc, "range_constraints: expected an object");
    else
      for (auto &[name, rc] : rcs.items()) {
        Range r;
        std::string what = "range_constraints['" + name + "']";
        if (!rc.is_object()) {
          diags.error(loc, what + ": expected an object with min_val and max_val");
        } else {
          if (rc.contains("min_val")) r.min = bound(rc["min_val"], what + ".min_val", diags, loc).value_or(0);
          if (rc.contains("max_val")) r.max = bound(rc["max_val"], what + ".max_val", diags, loc);
          if (r.max && *r.max < r.min) diags.error(loc, what + ": an empty range " + r.str());
        }
        b.ranges[name] = r;
      }
  }

  // The user inputs' symbolic dims (graph.inputs in order, their tensor_values sizes).
  std::vector<SymDim> dims;
  std::map<std::string, int64_t> inputRank;
  std::set<std::string> symbols; // every symbol a graph input's size reads
  const json *graph = nullptr;
  if (program.contains("graph_module") && program["graph_module"].is_object() &&
      program["graph_module"].contains("graph"))
    graph = &program["graph_module"]["graph"];
  if (graph && graph->is_object() && graph->contains("inputs") && (*graph)["inputs"].is_array() &&
      graph->contains("tensor_values") && (*graph)["tensor_values"].is_object()) {
    const json &tv = (*graph)["tensor_values"];
    for (const json &in : (*graph)["inputs"]) {
      if (!in.is_object() || !in.contains("as_tensor") || !in["as_tensor"].is_object() ||
          !in["as_tensor"].contains("name") || !in["as_tensor"]["name"].is_string())
        continue; // readInputs reports malformed inputs
      std::string name = in["as_tensor"]["name"].get<std::string>();
      if (!tv.contains(name) || !tv[name].is_object() || !tv[name].contains("sizes") || !tv[name]["sizes"].is_array())
        continue;
      const json &sizes = tv[name]["sizes"];
      inputRank[name] = (int64_t)sizes.size();
      for (size_t d = 0; d < sizes.size(); ++d) {
        const json &s = sizes[d];
        if (!s.is_object() || !s.contains("as_expr")) continue;
        const json &e = s["as_expr"];
        SymDim sd{name, d, e.is_object() && e.contains("expr_str") && e["expr_str"].is_string()
                               ? e["expr_str"].get<std::string>() : "", std::nullopt, {}};
        try {
          sd.expr = SymExpr::parse(sd.exprStr);
          sd.expr->collectSymbols(sd.symbols);
          symbols.insert(sd.symbols.begin(), sd.symbols.end());
        } catch (const SymExprError &err) {
          diags.error(loc, "input '" + name + "' dim " + std::to_string(d) + ": cannot read its size '" + sd.exprStr +
                               "': " + err.what());
        }
        dims.push_back(std::move(sd));
      }
    }
  }

  auto rangeOf = [&](const std::string &sym) {
    auto it = b.ranges.find(sym);
    return it == b.ranges.end() ? Range{} : it->second;
  };
  // --specialize and --max-size entries: SYMBOL=N or INPUT:DIM=N.
  std::set<std::string> rejected; // symbols of rejected entries: not "missing" as well
  auto resolve = [&](const std::string &entry, const std::string &flag) -> std::optional<std::pair<std::string, int64_t>> {
    std::string where = flag + " '" + entry + "': ";
    size_t eq = entry.rfind('=');
    std::optional<int64_t> value = eq == std::string::npos ? std::nullopt : parseInt(entry.substr(eq + 1));
    if (eq == std::string::npos || eq == 0 || !value) {
      diags.error(loc, where + "expected SYMBOL=N or INPUT:DIM=N with an integer N");
      return std::nullopt;
    }
    std::string lhs = entry.substr(0, eq), sym;
    if (size_t colon = lhs.rfind(':'); colon != std::string::npos) {
      std::string input = lhs.substr(0, colon);
      std::optional<int64_t> dim = parseInt(lhs.substr(colon + 1));
      const SymDim *found = nullptr;
      bool known = false;
      for (const SymDim &sd : dims) {
        known |= sd.input == input;
        if (sd.input == input && dim && (int64_t)sd.dim == *dim) found = &sd;
      }
      auto rankIt = inputRank.find(input);
      if (!dim) {
        diags.error(loc, where + "'" + lhs.substr(colon + 1) + "' is not a dimension number");
        return std::nullopt;
      }
      if (!found) {
        if (!known) diags.error(loc, where + "no user input named '" + input + "' has a symbolic size");
        else if (rankIt != inputRank.end() && (*dim < 0 || *dim >= rankIt->second))
          diags.error(loc, where + "input '" + input + "' has " + std::to_string(rankIt->second) + " dims");
        else diags.error(loc, where + "dim " + std::to_string(*dim) + " of input '" + input + "' has a static size");
        return std::nullopt;
      }
      if (!found->expr || !found->expr->isSymbol()) {
        diags.error(loc, where + "input '" + input + "' dim " + std::to_string(*dim) + " is '" +
                             (found->expr ? found->expr->str() : found->exprStr) + "': give the value of its symbol");
        rejected.insert(found->symbols.begin(), found->symbols.end());
        return std::nullopt;
      }
      sym = found->expr->name();
    } else {
      sym = lhs;
      if (!symbols.count(sym)) { // a symbol of range_constraints only (u0: data-dependent) included
        std::string known;
        for (const std::string &s : symbols) known += (known.empty() ? "" : ", ") + s;
        diags.error(loc, where + "no input size of the export reads a symbol '" + sym + "'" +
                             (known.empty() ? " (its sizes are static)" : " (its symbols: " + known + ")"));
        return std::nullopt;
      }
    }
    Range r = rangeOf(sym);
    if (*value < r.min || (r.max && *value > *r.max)) {
      diags.error(loc, where + sym + "=" + std::to_string(*value) + " is outside the range the export allows, " +
                           r.str());
      rejected.insert(sym);
      return std::nullopt;
    }
    return std::make_pair(sym, *value);
  };
  for (const std::string &entry : specialize) {
    auto sv = resolve(entry, "--specialize");
    if (!sv) continue;
    auto [it, fresh] = b.specialized.try_emplace(sv->first, sv->second);
    if (!fresh && it->second != sv->second)
      diags.error(loc, "--specialize '" + entry + "': " + sv->first + " was given " + std::to_string(it->second) + " already");
  }
  std::map<std::string, int64_t> maxima;
  for (const std::string &entry : maxSize) {
    auto sv = resolve(entry, "--max-size");
    if (!sv) continue;
    if (b.specialized.count(sv->first)) {
      diags.error(loc, "--max-size '" + entry + "': " + sv->first + " is given a size by --specialize");
      rejected.insert(sv->first);
      continue;
    }
    auto [it, fresh] = maxima.try_emplace(sv->first, sv->second);
    if (!fresh && it->second != sv->second)
      diags.error(loc, "--max-size '" + entry + "': " + sv->first + " was given " + std::to_string(it->second) + " already");
  }
  // The symbols without a value are run-time sizes, at their reference value: the maximum.
  b.values = b.specialized;
  std::string unbounded;
  for (const std::string &s : symbols) {
    std::string at, list;
    for (const SymDim &sd : dims) {
      if (!sd.symbols.count(s)) continue;
      std::string d = sd.input + ":" + std::to_string(sd.dim);
      at += (at.empty() ? "" : ", ") + d + (sd.expr->isSymbol() ? "" : " = " + sd.expr->str());
      list += (list.empty() ? "" : ",") + d;
    }
    b.dims[s] = list;
    if (b.specialized.count(s) || rejected.count(s)) continue;
    // A run-time symbol is printed in the program's text, which must read it back.
    if (!isSizeSymbolName(s)) {
      diags.error(loc, "dynamic export: the symbol '" + s + "' is not a name aotc can keep as a run-time size; give it "
                           "a size with --specialize");
      continue;
    }
    b.dynamic.insert(s);
    Range &r = b.ranges[s];
    if (auto m = maxima.find(s); m != maxima.end()) r.max = m->second;
    if (r.max) b.values[s] = *r.max;
    else unbounded += "\n  " + s + " in " + r.str() + ": " + at;
  }
  if (!unbounded.empty())
    diags.error(loc, "dynamic export: run-time sizes without an upper bound:" + unbounded +
                         "\ngive each a largest size with --max-size SYMBOL=N or INPUT:DIM=N (memory is planned for "
                         "it), or a size with --specialize");
  diags.throwIfAny();
  return b;
}

bool isSymbolicTarget(const std::string &raw) {
  static const std::set<std::string> targets = {
      "torch.ops.aten.sym_size.int", "torch.ops.aten.sym_numel.default", "torch.ops.aten._assert_scalar.default",
      "torch.ops.aten.sym_constrain_range.default", "torch.ops.aten.sym_constrain_range_for_size.default",
      "_operator.add", "_operator.sub", "_operator.mul", "_operator.floordiv", "_operator.mod", "_operator.truediv",
      "_operator.pow", "_operator.neg", "_operator.pos", "_operator.abs", "_operator.eq", "_operator.ne",
      "_operator.lt", "_operator.le", "_operator.gt", "_operator.ge", "_operator.and_", "_operator.or_",
      "_operator.not_", "torch.sym_not", "torch.sym_max", "torch.sym_min", "torch.sym_float", "torch.sym_int",
      "torch.sym_ite", "math.ceil", "math.floor", "math.trunc"};
  return targets.count(raw) > 0;
}

std::string str(const Value &v) {
  if (auto *i = std::get_if<int64_t>(&v)) return std::to_string(*i);
  if (auto *b = std::get_if<bool>(&v)) return *b ? "True" : "False";
  char buf[64];
  double d = std::get<double>(v);
  std::snprintf(buf, sizeof buf, "%.17g", d);
  std::string s = buf;
  if (std::isfinite(d) && s.find_first_of(".en") == std::string::npos) s += ".0"; // Python's float repr
  return s;
}

namespace {

[[noreturn]] void fail(const std::string &m) { throw SymExprError(m); }

const Value &num(const std::vector<Arg> &a, size_t k, const std::string &op) {
  if (k >= a.size() || !std::holds_alternative<Value>(a[k]))
    fail(op + ": argument " + std::to_string(k) + " is not a number");
  return std::get<Value>(a[k]);
}
bool isFloat(const Value &v) { return std::holds_alternative<double>(v); }
double toDouble(const Value &v) {
  if (auto *i = std::get_if<int64_t>(&v)) return (double)*i;
  if (auto *b = std::get_if<bool>(&v)) return *b;
  return std::get<double>(v);
}
int64_t toInt(const Value &v, const std::string &op) {
  if (auto *i = std::get_if<int64_t>(&v)) return *i;
  if (auto *b = std::get_if<bool>(&v)) return *b;
  fail(op + ": expected an integer, got " + str(v));
}
bool truth(const Value &v) { return toDouble(v) != 0.0; }

int64_t checked(bool overflow, int64_t r) {
  if (overflow) fail("int64 overflow");
  return r;
}

/// Python's binary arithmetic on int/float (bool as int).
Value arith(const std::string &op, const Value &x, const Value &y) {
  if (op == "truediv") {
    if (toDouble(y) == 0.0) fail("division by zero");
    return toDouble(x) / toDouble(y);
  }
  if (isFloat(x) || isFloat(y) || (op == "pow" && toDouble(y) < 0)) {
    double a = toDouble(x), c = toDouble(y);
    if (op == "add") return a + c;
    if (op == "sub") return a - c;
    if (op == "mul") return a * c;
    if (op == "pow") return std::pow(a, c);
    if (c == 0.0) fail("division by zero");
    if (op == "floordiv") return std::floor(a / c);
    return a - std::floor(a / c) * c; // mod
  }
  int64_t a = toInt(x, op), c = toInt(y, op), r = 0;
  if (op == "add") return checked(__builtin_add_overflow(a, c, &r), r);
  if (op == "sub") return checked(__builtin_sub_overflow(a, c, &r), r);
  if (op == "mul") return checked(__builtin_mul_overflow(a, c, &r), r);
  if (op == "pow") return pyPow(a, c);
  return op == "floordiv" ? pyFloorDiv(a, c) : pyMod(a, c);
}

} // namespace

std::optional<Value> evalSymbolic(const std::string &raw, const std::vector<Arg> &a) {
  auto n = [&](size_t k) { return num(a, k, raw); };
  if (raw == "torch.ops.aten.sym_size.int" || raw == "torch.ops.aten.sym_numel.default") {
    if (a.empty() || !std::holds_alternative<Shape>(a[0])) fail(raw + ": expected a tensor");
    const Shape &s = std::get<Shape>(a[0]);
    if (raw == "torch.ops.aten.sym_numel.default") {
      int64_t p = 1;
      for (int64_t d : s) p = checked(__builtin_mul_overflow(p, d, &p), p);
      return Value{p};
    }
    int64_t d = toInt(n(1), raw), r = (int64_t)s.size();
    if (d < -r || d >= r) fail("sym_size: dim " + std::to_string(d) + " out of range for a " + std::to_string(r) + "-d tensor");
    return Value{s[d < 0 ? d + r : d]};
  }
  if (raw == "torch.ops.aten._assert_scalar.default") {
    if (!truth(n(0))) {
      std::string msg = a.size() > 1 && std::holds_alternative<std::string>(a[1]) ? std::get<std::string>(a[1]) : "";
      fail("the export's runtime assertion fails" + (msg.empty() ? std::string() : ": " + msg));
    }
    return std::nullopt;
  }
  if (raw == "torch.ops.aten.sym_constrain_range.default" ||
      raw == "torch.ops.aten.sym_constrain_range_for_size.default") {
    int64_t v = toInt(n(0), raw);
    auto bound = [&](size_t k, int64_t dflt) {
      return k < a.size() && std::holds_alternative<Value>(a[k]) ? toInt(std::get<Value>(a[k]), raw) : dflt;
    };
    int64_t lo = bound(1, raw.find("for_size") != std::string::npos ? 0 : INT64_MIN), hi = bound(2, INT64_MAX);
    if (v < lo || v > hi)
      fail("the export constrains this value to [" + std::to_string(lo) + ", " + std::to_string(hi) + "], got " +
           std::to_string(v));
    return std::nullopt;
  }
  std::string op = raw.substr(raw.find('.') + 1);
  if (op == "add" || op == "sub" || op == "mul" || op == "floordiv" || op == "mod" || op == "truediv" || op == "pow")
    return arith(op, n(0), n(1));
  if (op == "neg") {
    const Value &x = n(0);
    if (isFloat(x)) return Value{-std::get<double>(x)};
    return arith("sub", Value{int64_t(0)}, x);
  }
  if (op == "pos") return n(0);
  if (op == "abs") {
    const Value &x = n(0);
    if (isFloat(x)) return Value{std::fabs(std::get<double>(x))};
    int64_t v = toInt(x, raw);
    return v < 0 ? arith("sub", Value{int64_t(0)}, x) : Value{v};
  }
  auto cmp = [&](auto f) {
    const Value &x = n(0), &y = n(1);
    if (isFloat(x) || isFloat(y)) return Value{(bool)f(toDouble(x), toDouble(y))};
    return Value{(bool)f(toInt(x, raw), toInt(y, raw))};
  };
  if (op == "eq") return cmp([](auto x, auto y) { return x == y; });
  if (op == "ne") return cmp([](auto x, auto y) { return x != y; });
  if (op == "lt") return cmp([](auto x, auto y) { return x < y; });
  if (op == "le") return cmp([](auto x, auto y) { return x <= y; });
  if (op == "gt") return cmp([](auto x, auto y) { return x > y; });
  if (op == "ge") return cmp([](auto x, auto y) { return x >= y; });
  if (op == "and_" || op == "or_") { // Python's & and |: logical on bools, bitwise on ints
    const Value &x = n(0), &y = n(1);
    if (std::holds_alternative<bool>(x) && std::holds_alternative<bool>(y))
      return Value{op == "and_" ? (std::get<bool>(x) && std::get<bool>(y)) : (std::get<bool>(x) || std::get<bool>(y))};
    int64_t a = toInt(x, raw), c = toInt(y, raw);
    return Value{op == "and_" ? (a & c) : (a | c)};
  }
  if (op == "not_" || op == "sym_not") return Value{!truth(n(0))};
  if (op == "sym_max" || op == "sym_min") {
    bool mx = op == "sym_max";
    if (isFloat(n(0)) || isFloat(n(1))) {
      double x = toDouble(n(0)), y = toDouble(n(1));
      return Value{mx ? std::max(x, y) : std::min(x, y)};
    }
    int64_t x = toInt(n(0), raw), y = toInt(n(1), raw);
    return Value{mx ? std::max(x, y) : std::min(x, y)};
  }
  if (op == "sym_float") return Value{toDouble(n(0))};
  if (op == "sym_int" || op == "trunc") {
    const Value &x = n(0);
    if (!isFloat(x)) return Value{toInt(x, raw)};
    double t = std::trunc(std::get<double>(x));
    if (!(std::fabs(t) < 9.2e18)) fail(raw + ": " + str(x) + " is not an int64");
    return Value{(int64_t)t};
  }
  if (op == "ceil" || op == "floor") {
    const Value &x = n(0);
    if (!isFloat(x)) return Value{toInt(x, raw)};
    double t = op == "ceil" ? std::ceil(std::get<double>(x)) : std::floor(std::get<double>(x));
    if (!(std::fabs(t) < 9.2e18)) fail(raw + ": " + str(x) + " is not an int64");
    return Value{(int64_t)t};
  }
  if (op == "sym_ite") {
    if (a.size() != 3) fail(raw + ": expected 3 arguments, got " + std::to_string(a.size()));
    return truth(n(0)) ? n(1) : n(2);
  }
  fail("'" + raw + "' is not a symbolic op aotc evaluates");
}

} // namespace aotc::dynamic_sizes
