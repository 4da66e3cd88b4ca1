//===- Sizes.h - The symbolic sizes of a dynamic torch.export ----*- C++ -*-===//
//
// A program exported with torch.export.Dim has sizes that are expressions over
// symbols (SymExpr.h), `range_constraints` giving each symbol's range, and
// nodes that compute integers and conditions from sizes (aten.sym_size.int,
// _operator.mul, torch.sym_not, aten._assert_scalar, ...). A symbol given a size
// by --specialize is evaluated at compile time (its asserts and ranges checked
// there). Every other symbol is a run-time size (docs/dynamic-shapes.md): the
// program keeps its expressions and checks, and is evaluated at reference sizes,
// every run-time symbol at its maximum (the range's, or --max-size).
//===----------------------------------------------------------------------===//
#pragma once

#include "aotc/Diagnostics.h"
#include "aotc/SymExpr.h"
#include "aotc/Types.h"

#include <nlohmann/json.hpp>

#include <map>
#include <optional>
#include <set>
#include <string>
#include <variant>
#include <vector>

namespace aotc::dynamic_sizes {

/// A symbol's range from `range_constraints` (max nullopt: unbounded).
struct Range {
  int64_t min = 0;
  std::optional<int64_t> max;
  std::string str() const; ///< "[2, 64]", "[1, inf]"
};

/// The value each symbol of the export gets.
struct Bindings {
  /// Every symbol's value: --specialize's, or a run-time symbol's reference value (its maximum).
  std::map<std::string, int64_t> values;
  std::map<std::string, int64_t> specialized; ///< The --specialize values only.
  std::set<std::string> dynamic;              ///< The run-time symbols.
  std::map<std::string, Range> ranges;
  std::map<std::string, std::string> dims; ///< Symbol -> the input dims whose size reads it: "x:0,y:0".
  std::string str() const; ///< "s17=37, s48=3" (by name); "" for a static export.
};

/// Reads `range_constraints` and the symbolic sizes of the graph inputs, and resolves each
/// `specialize` entry, "SYMBOL=N" or "INPUT:DIM=N" (a user input's placeholder name and a
/// dimension whose size is one symbol). User errors, all found at once: a malformed entry, an
/// unknown symbol or input, a dimension that is static or a derived expression (2*s0: name its
/// symbol), a value outside the symbol's range, two values for one symbol, and run-time
/// symbols without an upper bound (listing each, its range and the input dims that carry it).
/// The symbols with no value are run-time sizes at their maximum, lowered by a
/// `maxSize` entry (same forms); one without a bound and without an entry is an error. A
/// static export with no entries gives empty Bindings.
Bindings bindSymbols(const nlohmann::json &program, const std::vector<std::string> &specialize,
                     const std::vector<std::string> &maxSize, const SourceLoc &loc);

/// Whether capture evaluates `raw` (a node target as the JSON writes it) at compile time:
/// aten.sym_size.int, sym_numel, _assert_scalar, sym_constrain_range(_for_size), the Python
/// operators and math functions torch.export records on symbolic integers (_operator.mul,
/// math.floor, torch.sym_max, ...).
bool isSymbolicTarget(const std::string &raw);

using Value = std::variant<int64_t, double, bool>;
std::string str(const Value &v);

/// One argument of a symbolic node, in order: none, a number, a tensor (its shape) or a string.
using Arg = std::variant<std::monostate, Value, Shape, std::string>;

/// The value of a symbolic node from its arguments, in schema order (sym_constrain_range*:
/// size, min, max, a default one given as none); nullopt for the nodes without a result
/// (_assert_scalar, sym_constrain_range*). Throws SymExprError with the reason: a failed assert
/// gives the export's message, a value out of a constrained range names the range.
std::optional<Value> evalSymbolic(const std::string &raw, const std::vector<Arg> &args);

} // namespace aotc::dynamic_sizes
