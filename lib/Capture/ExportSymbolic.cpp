//===- ExportSymbolic.cpp - Size computations of a dynamic export ------------===//
//
// The reader's (ExportReader.h) evaluation of torch.export's size computations at the
// --specialize values: aten.sym_size.int, _operator.*, torch.sym_*, aten._assert_scalar
// (docs/dynamic-shapes.md; the values themselves: Sizes.cpp).
//===----------------------------------------------------------------------===//
#include "ExportReader.h"

namespace aotc::export_json {

dynamic_sizes::Value Reader::symValue(const json &v, const json &jn, const std::string &ctx) const {
  auto [k, xv] = unionOf(v, ctx);
  if (k == "as_int") return jsonInt(*xv, ctx);
  if (k == "as_float") return jsonFloat(*xv, ctx);
  if (k == "as_bool" && xv->is_boolean()) return xv->get<bool>();
  if (k != "as_name" || !xv->is_string()) failNode(jn, ctx + ": unexpected '" + k + "'");
  std::string name = xv->get<std::string>();
  if (auto it = symValues_.find(name); it != symValues_.end()) return it->second;
  if (scalars_.count(name))
    failNode(jn, ctx + ": the value of item() ('" + name + "') used as a size: data-dependent (sizes must be known "
                       "when compiling)");
  failNode(jn, ctx + ": '" + name + "' is not the result of a size computation aotc evaluates");
}

int64_t Reader::symInt(const json &v, const json &jn, const std::string &ctx) const {
  dynamic_sizes::Value sv = symValue(v, jn, ctx);
  if (!std::holds_alternative<int64_t>(sv)) failNode(jn, ctx + ": expected an integer, got " + dynamic_sizes::str(sv));
  return std::get<int64_t>(sv);
}

std::string Reader::symIntExpr(const json &v) const {
  if (!v.is_object() || !v.contains("as_name") || !v["as_name"].is_string()) return "";
  auto it = symExprs_.find(v["as_name"].get<std::string>());
  return it == symExprs_.end() ? "" : it->second;
}

std::optional<std::string> Reader::exportedExpr(const std::string &name) const {
  for (const char *table : {"sym_int_values", "sym_bool_values"}) {
    if (!graph_->contains(table) || !(*graph_)[table].is_object() || !(*graph_)[table].contains(name)) continue;
    const json &e = (*graph_)[table][name];
    if (e.is_object() && e.contains("as_expr") && e["as_expr"].is_object() && e["as_expr"].contains("expr_str") &&
        e["as_expr"]["expr_str"].is_string())
      return e["as_expr"]["expr_str"].get<std::string>();
  }
  return std::nullopt;
}

void Reader::buildSymbolic(const json &jn, const std::string &raw) {
  // sym_constrain_range(_for_size)(size, *, min=None, max=None): the keyword-only bounds are
  // omitted when default, so they are placed by name.
  bool byName = raw.find("sym_constrain_range") != std::string::npos;
  std::vector<dynamic_sizes::Arg> args(byName ? 3 : 0);
  std::vector<std::string> argExprs(3); // run-time size expressions of the symbolic arguments
  bool dynamicInput = false;
  size_t positional = 0;
  for (const json &na : field(jn, "inputs", "node")) {
    std::string an = na.is_object() && na.contains("name") && na["name"].is_string() ? na["name"].get<std::string>() : "";
    size_t slot = positional++;
    if (byName) {
      slot = an == "min" ? 1 : an == "max" ? 2 : an == "size" || an.empty() ? 0 : 3;
      if (slot == 3) failNode(jn, "unexpected argument '" + an + "'");
    } else {
      args.emplace_back();
    }
    std::string ctx = "argument " + (an.empty() ? std::to_string(slot) : "'" + an + "'");
    auto [k, v] = unionOf(field(na, "arg", ctx), ctx);
    if (k == "as_tensor") {
      Node *t = ref(tensorName(*v, ctx), jn);
      if (complex_.count(t)) failNode(jn, "the size of a complex tensor: not supported");
      args[slot] = t->type().shape;
      dynamicInput |= t->type().symbolic();
    } else if (k == "as_int" || k == "as_float" || k == "as_bool") {
      args[slot] = symValue(field(na, "arg", ctx), jn, ctx);
    } else if (k == "as_sym_int" || k == "as_sym_float" || k == "as_sym_bool") {
      args[slot] = symValue(*v, jn, ctx);
      std::string e = symIntExpr(*v);
      if (!e.empty() && slot < argExprs.size()) argExprs[slot] = e;
      dynamicInput |= !e.empty();
    } else if (k == "as_string" && v->is_string()) {
      args[slot] = v->get<std::string>();
    } else if (k == "as_none") {
      args[slot] = std::monostate{};
    } else {
      failNode(jn, ctx + ": unexpected '" + k + "' for a size computation");
    }
  }
  const json &outs = field(jn, "outputs", "node");
  if (!outs.is_array()) failNode(jn, "'outputs' must be a list");
  bool checkOnly = raw == "torch.ops.aten._assert_scalar.default" || raw.find("sym_constrain_range") != std::string::npos;
  if (checkOnly && dynamicInput) {
    // A condition on run-time sizes: checked at every call (Program::sizeChecks), not now.
    if (argExprs[0].empty()) failNode(jn, "a check on run-time sizes without an expression");
    Program::SizeCheck c;
    if (raw == "torch.ops.aten._assert_scalar.default") {
      c.expr = argExprs[0];
      c.message = args.size() > 1 && std::holds_alternative<std::string>(args[1]) ? std::get<std::string>(args[1]) : "";
      for (char &ch : c.message) // one header line: the message's line breaks become spaces
        if (ch == '\n' || ch == '\r') ch = ' ';
      if (c.message.find_first_not_of(' ') == std::string::npos) c.message = "assertion failed: " + c.expr;
    } else {
      std::string e = "(" + argExprs[0] + ")", cond;
      for (size_t k : {1, 2})
        if (auto *b = std::get_if<dynamic_sizes::Value>(&args[k]); b && std::holds_alternative<int64_t>(*b))
          cond += (cond.empty() ? "" : " & ") + (k == 1 ? "(" + std::to_string(std::get<int64_t>(*b)) + " <= " + e + ")"
                                                        : "(" + e + " <= " + std::to_string(std::get<int64_t>(*b)) + ")");
      if (cond.empty()) return; // no bounds given
      c.expr = SymExpr::parse(cond).normalText();
      c.message = "sym_constrain_range: " + c.expr;
    }
    for (const Program::SizeCheck &o : p_.sizeChecks)
      if (o.expr == c.expr) return; // torch repeats a check per use: the first message is kept
    p_.sizeChecks.push_back(c);
    return;
  }
  std::optional<dynamic_sizes::Value> r;
  try {
    r = dynamic_sizes::evalSymbolic(raw, args);
  } catch (const SymExprError &e) {
    failNode(jn, std::string(e.what()) + (bindings_.values.empty() ? "" : " (at " + bindings_.str() + ")"));
  }
  if (!r) return;
  std::vector<std::string> names = outs.size() == 1 ? refsOf(outs[0]) : std::vector<std::string>{};
  if (names.size() != 1) failNode(jn, "expected one symbolic output");
  symValues_[names[0]] = *r;
  // The export's own expression for the value (sym_int_values / sym_bool_values), read once.
  std::optional<std::string> theirs = exportedExpr(names[0]);
  std::optional<SymExpr> theirExpr;
  std::string parseError;
  if (theirs) try {
      theirExpr = SymExpr::parse(*theirs);
    } catch (const SymExprError &err) {
      parseError = err.what();
    }
  // A value over run-time sizes keeps its expression (the export's, else sym_size's dim).
  std::string expr;
  try {
    if (theirExpr)
      if (SymExpr e = theirExpr->substitute(bindings_.specialized); e.hasSymbols()) expr = e.normalText();
  } catch (const SymExprError &) {
    // a folded part fails: reported by the check below
  }
  if (expr.empty() && dynamicInput && !theirs) {
    if (raw == "torch.ops.aten.sym_size.int" && args.size() == 2 && std::holds_alternative<Shape>(args[0])) {
      const json &a0 = field(field(jn, "inputs", "node")[0], "arg", "argument 0");
      const TensorType &t = ref(tensorName(*unionOf(a0, "argument 0").second, "argument 0"), jn)->type();
      auto *d = std::get_if<dynamic_sizes::Value>(&args[1]);
      if (d && std::holds_alternative<int64_t>(*d)) {
        std::optional<int64_t> w = wrapDim(std::get<int64_t>(*d), t.rank());
        if (w && (size_t)*w < t.sym.size()) expr = t.sym[*w];
      }
    }
    if (expr.empty())
      failNode(jn, "a value computed from run-time sizes that the export gives no expression for: not supported "
                   "as a run-time size (compile at one size with --specialize)");
  }
  if (!expr.empty()) symExprs_[names[0]] = expr;
  // The export's own expression for the value must agree.
  if (!theirs) return;
  int64_t mine = std::holds_alternative<bool>(*r) ? std::get<bool>(*r)
                 : std::holds_alternative<int64_t>(*r) ? std::get<int64_t>(*r) : INT64_MIN;
  if (!theirExpr) failNode(jn, "cannot evaluate the export's expression '" + *theirs + "': " + parseError);
  try {
    int64_t value = theirExpr->eval(bindings_.values);
    if (mine != value)
      failNode(jn, "evaluates to " + dynamic_sizes::str(*r) + " but the export's expression '" + *theirs + "' gives " +
                       std::to_string(value) + " at " + bindings_.str() + ": an inconsistent export");
  } catch (const SymExprError &err) {
    failNode(jn, "cannot evaluate the export's expression '" + *theirs + "': " + err.what());
  }
}

} // namespace aotc::export_json
