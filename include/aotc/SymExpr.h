//===- SymExpr.h - Integer expressions over size symbols --------*- C++ -*-===//
//
// A size (or a size condition) of a dynamic torch.export program: an integer or
// boolean expression over symbols such as `s77`. torch.export writes them as
// `as_expr.expr_str` (tensor sizes, sym_int_values, sym_bool_values) in one of
// two forms (../shared/reference/distributed-dynamic.md B.4):
//   * sympy srepr (torch >= 2.6): `Mul(Integer(2), Symbol('s77', positive=True, integer=True))`
//   * sympy str (torch <= 2.5):   `2*s77`, `s0 - 1`, `(s0//2)`, `Mod(s0, 2)`, `Ne(s0, 13)`
// parse() reads both. Integer semantics are Python's and torch.utils._sympy's:
// FloorDiv and Mod round toward negative infinity, CleanDiv is exact; every
// operation is checked for int64 overflow. Booleans evaluate to 0 or 1.
// docs/dynamic-shapes.md says where the pipeline uses them.
//===----------------------------------------------------------------------===//
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <optional>
#include <set>
#include <stdexcept>
#include <string>
#include <vector>

namespace aotc {

class SymExpr {
public:
  enum class Op {
    Int, Sym,                         // leaves: value_, name_
    Add, Mul, Pow, FloorDiv, Mod, CleanDiv, Max, Min, // integer
    Eq, Ne, Lt, Le, Gt, Ge, And, Or, Not,            // boolean (0 / 1)
  };

  /// Parses either form; throws SymExprError naming the offset and what was expected, or the
  /// function sympy wrote that aotc does not evaluate (Rational, IntTrueDiv, ...).
  static SymExpr parse(const std::string &text);
  static SymExpr integer(int64_t v);
  static SymExpr symbol(std::string name);
  /// `op` of two operands (Add, Mul, FloorDiv, Mod, Max, Min, ...), unsimplified; SymExprError
  /// beyond the depth bound. canonical() simplifies.
  static SymExpr binary(Op op, SymExpr a, SymExpr b);

  /// The canonical form: a polynomial with int64 coefficients over atoms (the symbols, and each
  /// FloorDiv, Mod, Max, Min, CleanDiv, Pow or boolean of canonical operands), its terms in a
  /// fixed order, constants folded (`s48*s24` and `s24*s48` give one form, `(s0 + 1) - 1` gives
  /// `s0`, `CleanDiv(4*s0, 2)` gives `2*s0`). Two expressions with the same form are equal for
  /// every value of their symbols; different forms may still be equal (FloorDiv identities).
  /// SymExprError on int64 overflow of a coefficient.
  SymExpr canonical() const;
  /// Whether this >= b for every value of the symbols (sizes: each at least its entry of
  /// `minimums`, 1 when it has none), as far as a simple rule proves it: the difference's
  /// monomials over symbols have coefficients >= 0 and its value with every symbol at its
  /// minimum is >= 0 (`16*s48 >= 16`). False when the rule cannot decide.
  bool atLeastForSizes(const SymExpr &b, const std::map<std::string, int64_t> &minimums = {}) const;
  /// canonical().str(), or str() when the expression is too large to normalize.
  std::string normalText() const;
  /// The value when the expression has no symbols.
  std::optional<int64_t> constant() const;

  /// The value with every symbol bound by `lookup` (nullopt: unbound, an error naming it).
  /// Throws SymExprError on an unbound symbol, division or modulo by zero, a negative power or
  /// int64 overflow.
  int64_t eval(const std::function<std::optional<int64_t>(const std::string &)> &lookup) const;
  int64_t eval(const std::map<std::string, int64_t> &values) const;

  /// The expression with the symbols `values` binds replaced by their values, and every subtree
  /// without symbols left folded to its value (a dynamic export with some symbols given by
  /// --specialize). Throws SymExprError as eval does when a folded subtree fails.
  SymExpr substitute(const std::map<std::string, int64_t> &values) const;
  bool hasSymbols() const;

  // Sizes as the IR keeps them (TensorType::sym, Node::symArgs): a list of texts, "" (or the
  // list shorter) where the size is a constant.
  /// Element k of such a list as an expression; `value` where it is a constant.
  static SymExpr ofSize(const std::vector<std::string> &texts, size_t k, int64_t value);
  /// The text to keep: the canonical form, "" when the expression is a constant.
  std::string sizeText() const;
  /// sizeText() of each; empty when every one is a constant.
  static std::vector<std::string> sizeTexts(const std::vector<SymExpr> &sizes);

  /// sympy str() form with full parentheses where precedence needs them: `2*s77 - 1`.
  std::string str() const;
  void collectSymbols(std::set<std::string> &out) const;
  Op op() const { return op_; }
  bool isSymbol() const { return op_ == Op::Sym; }
  bool isBoolean() const;
  const std::string &name() const { return name_; } ///< Sym only.

private:
  SymExpr(Op op) : op_(op) {}
  friend class SymExprParser;
  friend struct SymExprCanon;
  Op op_;
  int depth_ = 1; ///< Tree height, bounded (kMaxDepth in SymExpr.cpp): eval and str recurse.
  int64_t value_ = 0;
  std::string name_;
  std::vector<SymExpr> args_;
};

struct SymExprError : std::runtime_error {
  using std::runtime_error::runtime_error;
};

/// Whether `name` can stand for a run-time size in aotc's text (docs/formats.md): a Python
/// identifier that is none of the names the text reads otherwise (True, False, None, inf, nan,
/// torch, self). Capture and the text's parser share it, so what one writes the other reads.
bool isSizeSymbolName(const std::string &name);

/// A run-time symbol's values for sameSize: from `lo` to `hi` (its value at the reference sizes).
struct SizeRange {
  std::string symbol;
  int64_t lo = 0, hi = 0;
};
/// Whether x and y are one size for every value of the ranges' symbols (each of `fixed` at its
/// one value): equal canonical forms, else equal values at four points (every symbol at lo, at
/// hi, at the middle, and alternately lo and hi), a point where either is undefined (a
/// division by a size that is 0 there) skipped; false when none is defined. Torch simplifies
/// with the ranges (Max(1, s0) is s0 for s0 >= 1), so two forms may be one size there. Capture
/// and the text's parser check annotations with it.
bool sameSize(const SymExpr &x, const SymExpr &y, const std::vector<SizeRange> &ranges,
              const std::map<std::string, int64_t> &fixed = {});

/// Python's int64 `//`, `%` (rounding toward negative infinity) and `**` (exponent >= 0);
/// SymExprError on division by zero, a negative exponent or overflow.
int64_t pyFloorDiv(int64_t a, int64_t b);
int64_t pyMod(int64_t a, int64_t b);
int64_t pyPow(int64_t base, int64_t exp);

} // namespace aotc
