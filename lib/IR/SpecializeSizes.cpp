//===- SpecializeSizes.cpp - A program with run-time sizes at given sizes ---===//
//
// include/aotc/SpecializeSizes.h. The expressions are SymExpr's (Python's integer semantics);
// the types are inferred again with the ops' own shape functions (OpRegistry.h inferTypes).
//===----------------------------------------------------------------------===//
#include "aotc/SpecializeSizes.h"

#include "aotc/OpRegistry.h"
#include "aotc/SymExpr.h"

#include <cctype>
#include <map>
#include <optional>
#include <set>

namespace aotc {
namespace {

std::optional<int64_t> parseCount(const std::string &s) {
  if (s.empty() || s.size() > 18) return std::nullopt;
  for (char c : s)
    if (!std::isdigit((unsigned char)c)) return std::nullopt;
  return std::stoll(s);
}

std::string valuesStr(const std::map<std::string, int64_t> &v) {
  std::string s;
  for (auto &[k, x] : v) s += (s.empty() ? "" : ", ") + k + "=" + std::to_string(x);
  return s;
}

} // namespace

void specializeSizes(Program &p, const std::vector<std::string> &entries) {
  const SourceLoc loc = p.origin;
  std::map<std::string, Program::SpecializedSize *> dynamic;
  for (Program::SpecializedSize &z : p.specializedSizes)
    if (z.dynamic) dynamic[z.symbol] = &z;
  if (dynamic.empty())
    userError(loc, "--specialize: this program has no run-time sizes (no '# aotc: size <symbol> dynamic=...' line)");

  // The entries: SYMBOL=N or INPUT:DIM=N.
  DiagnosticList diags;
  std::map<std::string, int64_t> given;
  for (const std::string &entry : entries) {
    std::string where = "--specialize '" + entry + "': ";
    size_t eq = entry.rfind('=');
    std::optional<int64_t> value = eq == std::string::npos ? std::nullopt : parseCount(entry.substr(eq + 1));
    if (eq == std::string::npos || eq == 0 || !value) {
      diags.error(loc, where + "expected SYMBOL=N or INPUT:DIM=N with an integer N >= 0");
      continue;
    }
    std::string lhs = entry.substr(0, eq), sym = lhs;
    if (size_t colon = lhs.rfind(':'); colon != std::string::npos) {
      std::string input = lhs.substr(0, colon);
      std::optional<int64_t> dim = parseCount(lhs.substr(colon + 1));
      Node *ph = p.forward.find(input);
      if (!ph || !ph->isPlaceholder()) {
        diags.error(loc, where + "the program has no input named '" + input + "'");
        continue;
      }
      const TensorType &t = ph->type();
      if (!dim || *dim >= t.rank()) {
        diags.error(loc, where + "input '" + input + "' has " + std::to_string(t.rank()) + " dims");
        continue;
      }
      std::string e = (size_t)*dim < t.sym.size() ? t.sym[*dim] : "";
      if (e.empty() || !SymExpr::parse(e).isSymbol()) {
        diags.error(loc, where + "dim " + std::to_string(*dim) + " of input '" + input + "' is " +
                             (e.empty() ? "static (" + std::to_string(t.shape[*dim]) + ")" : "'" + e + "'") +
                             (e.empty() ? "" : ": give the value of its symbol"));
        continue;
      }
      sym = e;
    }
    auto it = dynamic.find(sym);
    if (it == dynamic.end()) {
      diags.error(loc, where + "'" + sym + "' is not a run-time size of this program (" + p.dynamicSymbols() + ")");
      continue;
    }
    const Program::SpecializedSize &z = *it->second;
    if (*value < z.min || (z.max >= 0 && *value > z.max)) {
      diags.error(loc, where + sym + "=" + std::to_string(*value) + " is outside its range [" + std::to_string(z.min) +
                           ", " + (z.max < 0 ? std::string("inf") : std::to_string(z.max)) + "]");
      continue;
    }
    auto [g, fresh] = given.try_emplace(sym, *value);
    if (!fresh && g->second != *value)
      diags.error(loc, where + sym + " was given " + std::to_string(g->second) + " already");
  }
  diags.throwIfAny();

  // Every symbol's value: the given ones, the others at their reference values.
  std::map<std::string, int64_t> all = given;
  for (auto &[s, z] : dynamic) all.try_emplace(s, z->value);
  auto atSizes = [&](const std::string &text, int64_t &value) {
    SymExpr e = SymExpr::parse(text).substitute(given);
    value = e.eval(all);
    return e.hasSymbols() ? e.normalText() : std::string(); // the form capture writes
  };
  auto specializeType = [&](TensorType &t) {
    if (!t.symbolic()) return;
    bool any = false;
    for (size_t i = 0; i < t.sym.size(); ++i)
      if (!t.sym[i].empty()) {
        t.sym[i] = atSizes(t.sym[i], t.shape[i]);
        any |= !t.sym[i].empty();
      }
    if (!any) t.sym.clear();
  };

  try {
    // The checks over the given symbols are evaluated now; a failing one is the export's error.
    std::vector<Program::SizeCheck> kept;
    for (Program::SizeCheck &c : p.sizeChecks) {
      int64_t holds = 0;
      std::string rest = atSizes(c.expr, holds);
      if (!rest.empty()) kept.push_back({rest, c.message});
      else if (!holds)
        diags.error(loc, "the export's runtime assertion fails: " + c.message + " (at " + valuesStr(given) + ")");
    }
    diags.throwIfAny();
    p.sizeChecks = std::move(kept);

    // Arguments and types, in graph order; each node's types inferred again at these sizes. A
    // partitioned program's backward as well (its saved placeholders' types are its own).
    auto specializeGraph = [&](Graph &g) {
      auto users = g.users();
      for (const auto &up : g.nodes()) {
        Node &n = *up;
        if (n.isPlaceholder()) {
          for (TensorType &t : n.types) specializeType(t);
          continue;
        }
        if (!n.isCall()) continue;
        SymArgs symArgs;
        for (auto &[i, exprs] : n.symArgs) {
          bool any = false;
          for (size_t k = 0; k < exprs.size(); ++k) {
            if (exprs[k].empty()) continue;
            int64_t v = 0;
            exprs[k] = atSizes(exprs[k], v);
            any |= !exprs[k].empty();
            if (auto *x = std::get_if<int64_t>(&n.args[i])) *x = v;
            else if (auto *l = std::get_if<std::vector<int64_t>>(&n.args[i]); l && k < l->size()) (*l)[k] = v;
            else AOTC_ASSERT(false, "node '" + n.name + "': a size expression on a non-int argument");
          }
          if (any) symArgs.push_back({i, exprs});
        }
        n.symArgs = std::move(symArgs);
        std::vector<TensorType> expected = n.types;
        for (TensorType &t : expected) specializeType(t);
        std::vector<TensorType> inferred = inferTypes(n);
        if (inferred.size() != expected.size())
          nodeError(n, "inference gives " + std::to_string(inferred.size()) + " results, the program " +
                           std::to_string(expected.size()));
        std::set<int64_t> read; // results of a tuple that some getitem reads
        for (Node *u : users[&n])
          if (u->isGetitem()) read.insert(u->intArg(1));
        for (size_t k = 0; k < expected.size(); ++k) {
          bool same = inferred[k].dtype == expected[k].dtype && inferred[k].shape == expected[k].shape;
          // A result nothing reads has no expression from the export (no meta): inference's.
          if (!same && expected.size() > 1 && !read.count((int64_t)k) && !n.types[k].symbolic()) {
            expected[k] = inferred[k];
            expected[k].sym.clear();
            continue;
          }
          if (!same) {
            diags.add(formatNodeDiag(n, "error", "its type " + n.types[k].str() + " is " + expected[k].str() + " at " +
                                                     valuesStr(given) + ", but inference gives " + inferred[k].str()));
            expected[k] = inferred[k]; // the nodes after it are checked against what it computes
            expected[k].sym.clear();
          }
        }
        n.types = std::move(expected);
      }
    };
    specializeGraph(p.forward);
    specializeGraph(p.backward);
  } catch (const SymExprError &e) {
    userError(loc, std::string("--specialize: ") + e.what() + " (at " + valuesStr(given) + ")");
  }
  diags.throwIfAny();
  for (auto &[s, v] : given) {
    dynamic[s]->value = v;
    dynamic[s]->dynamic = false;
  }
}

} // namespace aotc
