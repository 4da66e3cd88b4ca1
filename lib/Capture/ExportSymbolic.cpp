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

void Reader::buildSymbolic(const json &jn, const std::string &raw) {
  // sym_constrain_range(_for_size)(size, *, min=None, max=None): the keyword-only bounds are
  // omitted when default, so they are placed by name.
  bool byName = raw.find("sym_constrain_range") != std::string::npos;
  std::vector<dynamic_sizes::Arg> args(byName ? 3 : 0);
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
    } else if (k == "as_int" || k == "as_float" || k == "as_bool") {
      args[slot] = symValue(field(na, "arg", ctx), jn, ctx);
    } else if (k == "as_sym_int" || k == "as_sym_float" || k == "as_sym_bool") {
      args[slot] = symValue(*v, jn, ctx);
    } else if (k == "as_string" && v->is_string()) {
      args[slot] = v->get<std::string>();
    } else if (k == "as_none") {
      args[slot] = std::monostate{};
    } else {
      failNode(jn, ctx + ": unexpected '" + k + "' for a size computation");
    }
  }
  std::optional<dynamic_sizes::Value> r;
  try {
    r = dynamic_sizes::evalSymbolic(raw, args);
  } catch (const SymExprError &e) {
    failNode(jn, std::string(e.what()) + (bindings_.values.empty() ? "" : " (at " + bindings_.str() + ")"));
  }
  const json &outs = field(jn, "outputs", "node");
  if (!outs.is_array()) failNode(jn, "'outputs' must be a list");
  if (!r) return;
  std::vector<std::string> names = outs.size() == 1 ? refsOf(outs[0]) : std::vector<std::string>{};
  if (names.size() != 1) failNode(jn, "expected one symbolic output");
  symValues_[names[0]] = *r;
  // The export's own expression for the value (sym_int_values / sym_bool_values) must agree.
  for (const char *table : {"sym_int_values", "sym_bool_values"}) {
    if (!graph_->contains(table) || !(*graph_)[table].is_object() || !(*graph_)[table].contains(names[0])) continue;
    const json &e = (*graph_)[table][names[0]];
    if (!e.is_object() || !e.contains("as_expr") || !e["as_expr"].is_object() || !e["as_expr"].contains("expr_str") ||
        !e["as_expr"]["expr_str"].is_string())
      continue;
    std::string text = e["as_expr"]["expr_str"].get<std::string>();
    int64_t mine = std::holds_alternative<bool>(*r) ? std::get<bool>(*r)
                   : std::holds_alternative<int64_t>(*r) ? std::get<int64_t>(*r) : INT64_MIN;
    try {
      int64_t theirs = SymExpr::parse(text).eval(bindings_.values);
      if (mine != theirs)
        failNode(jn, "evaluates to " + dynamic_sizes::str(*r) + " but the export's expression '" + text + "' gives " +
                         std::to_string(theirs) + " at " + bindings_.str() + ": an inconsistent export");
    } catch (const SymExprError &err) {
      failNode(jn, "cannot evaluate the export's expression '" + text + "': " + err.what());
    }
  }
}

} // namespace aotc::export_json
