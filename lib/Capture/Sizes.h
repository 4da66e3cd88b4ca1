//===- Sizes.h - The symbolic sizes of a dynamic torch.export ----*- C++ -*-===//
//
// A program exported with torch.export.Dim has sizes that are expressions over
// symbols (SymExpr.h), `range_constraints` giving each symbol's range, and
// nodes that compute integers and conditions from sizes (aten.sym_size.int,
// _operator.mul, torch.sym_not, aten._assert_scalar, ...). Until the pipeline
// carries run-time sizes (issue 30, docs/dynamic-shapes.md), capture compiles
// such an export at one size per symbol, given by --specialize: every size and
// symbolic integer is evaluated there, every symbolic node is evaluated (and
// every assert and range checked) at compile time, and the program is static.
//===----------------------------------------------------------------------===//
#pragma once

#include "aotc/Diagnostics.h"
#include "aotc/SymExpr.h"
#include "aotc/Types.h"

#include <nlohmann/json.hpp>

#include <map>
#include <optional>
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
  std::map<std::string, int64_t> values;
  std::map<std::string, Range> ranges;
  std::map<std::string, std::string> dims; ///< Symbol -> the input dims whose size reads it: "x:0,y:0".
  std::string str() const; ///< "s17=37, s48=3" (by name); "" for a static export.
};

/// Reads `range_constraints` and the symbolic sizes of the graph inputs, and resolves each
/// `specialize` entry, "SYMBOL=N" or "INPUT:DIM=N" (a user input's placeholder name and a
/// dimension whose size is one symbol). User errors, all found at once: a malformed entry, an
/// unknown symbol or input, a dimension that is static or a derived expression (2*s0: name its
/// symbol), a value outside the symbol's range, two values for one symbol, and an export with
/// symbols some of which have no value (listing every symbol, its range and the input dims that
/// carry it). A static export with no entries gives empty Bindings.
Bindings bindSymbols(const nlohmann::json &program, const std::vector<std::string> &specialize,
                     const SourceLoc &loc);

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
