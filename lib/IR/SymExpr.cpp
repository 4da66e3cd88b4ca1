//===- SymExpr.cpp - Integer expressions over size symbols ------------------===//
//
// One recursive-descent parser for both forms torch.export writes (SymExpr.h):
// srepr is function calls (`Add(Symbol('s0', integer=True), Integer(-1))`), str
// is infix (`s0 - 1`); the grammar below is infix with calls as atoms, so a
// string mixing them parses too.
//   expr  := and ('|' and)*          and := cmp ('&' cmp)*
//   cmp   := add [relop add]         add := mul (('+' | '-') mul)*
//   mul   := unary (('*' | '//' | '%') unary)*
//   unary := ('-' | '~') unary | pow pow := atom ['**' unary]
//   atom  := INT | '(' expr ')' | IDENT | IDENT '(' [arg (',' arg)*] ')'
//   arg   := IDENT '=' atom | STRING | expr
//===----------------------------------------------------------------------===//
#include "aotc/SymExpr.h"

#include <algorithm>
#include <cctype>
#include <iterator>
#include <map>

namespace aotc {

/// Bounds on hostile input: expression trees this tall and this much nesting of parentheses
/// and calls are errors (torch's sizes are a few levels deep), so no recursion overflows.
constexpr int kMaxDepth = 256;

class SymExprParser {
public:
  explicit SymExprParser(const std::string &s) : s_(s) {}

  SymExpr parseAll() {
    SymExpr e = parseOr();
    skipSpace();
    if (i_ != s_.size()) fail("unexpected '" + std::string(1, s_[i_]) + "'");
    return e;
  }

private:
  [[noreturn]] void fail(const std::string &msg) const {
    std::string text = s_.size() > 120 ? s_.substr(0, 120) + "..." : s_; // hostile input: short messages
    throw SymExprError("at offset " + std::to_string(i_) + " of '" + text + "': " + msg);
  }
  void skipSpace() {
    while (i_ < s_.size() && std::isspace((unsigned char)s_[i_])) ++i_;
  }
  bool eat(const char *tok) {
    skipSpace();
    size_t n = std::char_traits<char>::length(tok);
    if (s_.compare(i_, n, tok) != 0) return false;
    i_ += n;
    return true;
  }
  /// `tok` but not when it begins a longer operator (`*` of `**`, `<` of `<=`, `/` of `//`).
  bool eatExact(const char *tok, const char *notFollowedBy) {
    skipSpace();
    size_t n = std::char_traits<char>::length(tok);
    if (s_.compare(i_, n, tok) != 0) return false;
    if (i_ + n < s_.size() && std::char_traits<char>::find(notFollowedBy, std::char_traits<char>::length(notFollowedBy),
                                                           s_[i_ + n]))
      return false;
    i_ += n;
    return true;
  }
  void expect(const char *tok) {
    if (!eat(tok)) fail(std::string("expected '") + tok + "'");
  }

  SymExpr node(SymExpr::Op op, std::vector<SymExpr> args) const {
    SymExpr e(op);
    for (const SymExpr &a : args) e.depth_ = std::max(e.depth_, a.depth_ + 1);
    if (e.depth_ > kMaxDepth) fail("expression deeper than " + std::to_string(kMaxDepth) + " levels");
    e.args_ = std::move(args);
    return e;
  }
  /// A binary node, moving both operands in (an initializer list would copy the left one: a
  /// copy per level of a long chain).
  SymExpr node2(SymExpr::Op op, SymExpr a, SymExpr b) const {
    std::vector<SymExpr> v;
    v.reserve(2);
    v.push_back(std::move(a));
    v.push_back(std::move(b));
    return node(op, std::move(v));
  }
  /// Counts nesting of parentheses and calls (the parser's own recursion).
  struct Nest {
    int &n;
    Nest(int &n, const SymExprParser &p) : n(n) {
      if (++n > kMaxDepth) p.fail("nesting deeper than " + std::to_string(kMaxDepth) + " levels");
    }
    ~Nest() { --n; }
  };

  SymExpr parseOr() {
    SymExpr e = parseAnd();
    while (eat("|")) e = node2(SymExpr::Op::Or, std::move(e), parseAnd());
    return e;
  }
  SymExpr parseAnd() {
    SymExpr e = parseCmp();
    while (eat("&")) e = node2(SymExpr::Op::And, std::move(e), parseCmp());
    return e;
  }
  SymExpr parseCmp() {
    SymExpr e = parseAdd();
    static const std::pair<const char *, SymExpr::Op> rel[] = {
        {"<=", SymExpr::Op::Le}, {">=", SymExpr::Op::Ge}, {"==", SymExpr::Op::Eq},
        {"!=", SymExpr::Op::Ne}, {"<", SymExpr::Op::Lt},  {">", SymExpr::Op::Gt}};
    for (auto &[tok, op] : rel)
      if (eat(tok)) return node2(op, std::move(e), parseAdd());
    return e;
  }
  SymExpr parseAdd() {
    SymExpr e = parseMul();
    for (;;) {
      if (eat("+")) e = node2(SymExpr::Op::Add, std::move(e), parseMul());
      else if (eat("-")) e = node2(SymExpr::Op::Add, std::move(e), negate(parseMul()));
      else return e;
    }
  }
  SymExpr parseMul() {
    SymExpr e = parseUnary();
    for (;;) {
      if (eat("//")) e = node2(SymExpr::Op::FloorDiv, std::move(e), parseUnary());
      else if (eatExact("*", "*")) e = node2(SymExpr::Op::Mul, std::move(e), parseUnary());
      else if (eat("%")) e = node2(SymExpr::Op::Mod, std::move(e), parseUnary());
      else if (eatExact("/", "/")) fail("true division '/' (a size is an integer: aotc reads '//' and CleanDiv)");
      else return e;
    }
  }
  SymExpr negate(SymExpr e) const {
    if (e.op_ == SymExpr::Op::Int && e.value_ != INT64_MIN) return SymExpr::integer(-e.value_);
    return node2(SymExpr::Op::Mul, SymExpr::integer(-1), std::move(e));
  }
  SymExpr parseUnary() {
    Nest guard(nest_, *this); // `- - - x` recurses too
    if (eat("-")) return negate(parseUnary());
    if (eat("~")) return node(SymExpr::Op::Not, {parseUnary()});
    SymExpr e = parseAtom();
    if (eat("**")) e = node2(SymExpr::Op::Pow, std::move(e), parseUnary());
    return e;
  }
  std::string ident() {
    size_t b = i_;
    while (i_ < s_.size() && (std::isalnum((unsigned char)s_[i_]) || s_[i_] == '_')) ++i_;
    return s_.substr(b, i_ - b);
  }
  SymExpr parseAtom() {
    skipSpace();
    if (i_ >= s_.size()) fail("unexpected end");
    char c = s_[i_];
    if (std::isdigit((unsigned char)c)) {
      int64_t v = 0;
      while (i_ < s_.size() && std::isdigit((unsigned char)s_[i_]))
        if (__builtin_mul_overflow(v, 10, &v) || __builtin_add_overflow(v, s_[i_++] - '0', &v))
          fail("integer out of int64 range");
      if (i_ < s_.size() && (s_[i_] == '.' || s_[i_] == 'e')) fail("a float (sizes are integers)");
      return SymExpr::integer(v);
    }
    if (c == '(') {
      ++i_;
      Nest guard(nest_, *this);
      SymExpr e = parseOr();
      expect(")");
      return e;
    }
    if (!(std::isalpha((unsigned char)c) || c == '_')) fail("unexpected '" + std::string(1, c) + "'");
    std::string id = ident();
    if (!eat("(")) {
      if (id == "True" || id == "true") return SymExpr::integer(1);
      if (id == "False" || id == "false") return SymExpr::integer(0);
      if (id == "oo" || id == "zoo" || id == "int_oo" || id == "nan")
        fail("'" + id + "' (an unbounded or undefined value, not a size)");
      return SymExpr::symbol(id);
    }
    return parseCall(id);
  }
  SymExpr parseCall(const std::string &fn) {
    Nest guard(nest_, *this);
    std::vector<SymExpr> args;
    std::string symName;
    if (!eat(")")) {
      do {
        skipSpace();
        size_t save = i_;
        std::string kw = (i_ < s_.size() && std::isalpha((unsigned char)s_[i_])) ? ident() : "";
        if (!kw.empty() && eatExact("=", "=")) { // keyword argument (Symbol's assumptions): ignored
          parseAtom();
          continue;
        }
        i_ = save;
        skipSpace();
        if (i_ < s_.size() && (s_[i_] == '\'' || s_[i_] == '"')) {
          char q = s_[i_++];
          size_t e = s_.find(q, i_);
          if (e == std::string::npos) fail("unterminated string");
          if (!symName.empty()) fail(fn + "() with two names");
          symName = s_.substr(i_, e - i_);
          i_ = e + 1;
          continue;
        }
        args.push_back(parseOr());
      } while (eat(","));
      expect(")");
    }
    auto arity = [&](size_t lo, size_t hi) {
      if (args.size() < lo || args.size() > hi)
        fail(fn + "() takes " + (lo == hi ? std::to_string(lo) : std::to_string(lo) + " or more") + " arguments, got " +
             std::to_string(args.size()));
    };
    if (fn == "Symbol") {
      if (symName.empty() || !args.empty()) fail("Symbol() takes one quoted name");
      return SymExpr::symbol(symName);
    }
    if (!symName.empty()) fail(fn + "() with a string argument");
    if (fn == "Integer") {
      arity(1, 1);
      if (args[0].op_ != SymExpr::Op::Int) fail("Integer() of a non-integer");
      return args[0];
    }
    static const std::map<std::string, std::pair<SymExpr::Op, int>> fns = {
        // arity -1: two or more (n-ary, folded left)
        {"Add", {SymExpr::Op::Add, -1}},           {"Mul", {SymExpr::Op::Mul, -1}},
        {"Pow", {SymExpr::Op::Pow, 2}},            {"FloorDiv", {SymExpr::Op::FloorDiv, 2}},
        {"Mod", {SymExpr::Op::Mod, 2}},            {"PythonMod", {SymExpr::Op::Mod, 2}},
        {"CleanDiv", {SymExpr::Op::CleanDiv, 2}},  {"Max", {SymExpr::Op::Max, -1}},
        {"Min", {SymExpr::Op::Min, -1}},           {"Equality", {SymExpr::Op::Eq, 2}},
        {"Eq", {SymExpr::Op::Eq, 2}},              {"Unequality", {SymExpr::Op::Ne, 2}},
        {"Ne", {SymExpr::Op::Ne, 2}},              {"StrictLessThan", {SymExpr::Op::Lt, 2}},
        {"Lt", {SymExpr::Op::Lt, 2}},              {"LessThan", {SymExpr::Op::Le, 2}},
        {"Le", {SymExpr::Op::Le, 2}},              {"StrictGreaterThan", {SymExpr::Op::Gt, 2}},
        {"Gt", {SymExpr::Op::Gt, 2}},              {"GreaterThan", {SymExpr::Op::Ge, 2}},
        {"Ge", {SymExpr::Op::Ge, 2}},              {"And", {SymExpr::Op::And, -1}},
        {"Or", {SymExpr::Op::Or, -1}},             {"Not", {SymExpr::Op::Not, 1}}};
    auto it = fns.find(fn);
    if (it == fns.end())
      fail("function '" + fn + "' (aotc evaluates Symbol, Integer, Add, Mul, Pow, FloorDiv, Mod, PythonMod, "
           "CleanDiv, Max, Min, comparisons, And, Or, Not)");
    auto [op, n] = it->second;
    if (n < 0) {
      arity(2, SIZE_MAX);
      SymExpr e = std::move(args[0]);
      for (size_t k = 1; k < args.size(); ++k) e = node2(op, std::move(e), std::move(args[k]));
      return e;
    }
    arity(n, n);
    return node(op, std::move(args));
  }

  const std::string &s_;
  size_t i_ = 0;
  int nest_ = 0;
};

SymExpr SymExpr::parse(const std::string &text) { return SymExprParser(text).parseAll(); }

SymExpr SymExpr::integer(int64_t v) {
  SymExpr e(Op::Int);
  e.value_ = v;
  return e;
}

SymExpr SymExpr::symbol(std::string name) {
  SymExpr e(Op::Sym);
  e.name_ = std::move(name);
  return e;
}

bool SymExpr::isBoolean() const {
  switch (op_) {
  case Op::Eq: case Op::Ne: case Op::Lt: case Op::Le: case Op::Gt: case Op::Ge: case Op::And: case Op::Or:
  case Op::Not:
    return true;
  default:
    return false;
  }
}

int64_t pyFloorDiv(int64_t a, int64_t b) {
  if (b == 0) throw SymExprError("division by zero");
  if (a == INT64_MIN && b == -1) throw SymExprError("int64 overflow");
  int64_t q = a / b;
  if ((a % b != 0) && ((a < 0) != (b < 0))) --q;
  return q;
}

int64_t pyMod(int64_t a, int64_t b) {
  if (b == 0) throw SymExprError("modulo by zero");
  if (b == -1) return 0; // INT64_MIN % -1 would trap
  int64_t r = a % b;
  if (r != 0 && ((r < 0) != (b < 0))) r += b;
  return r;
}

int64_t pyPow(int64_t base, int64_t exp) {
  if (exp < 0) throw SymExprError("negative power");
  if (base == 0 || base == 1) return exp == 0 ? 1 : base;
  if (base == -1) return exp % 2 ? -1 : 1;
  int64_t r = 1; // |base| >= 2: overflows within 63 steps
  for (int64_t k = 0; k < exp; ++k)
    if (__builtin_mul_overflow(r, base, &r)) throw SymExprError("int64 overflow");
  return r;
}

int64_t SymExpr::eval(const std::function<std::optional<int64_t>(const std::string &)> &lookup) const {
  auto ovf = [](bool o) {
    if (o) throw SymExprError("int64 overflow");
  };
  auto a = [&](size_t k) { return args_[k].eval(lookup); };
  int64_t r = 0;
  switch (op_) {
  case Op::Int: return value_;
  case Op::Sym: {
    std::optional<int64_t> v = lookup(name_);
    if (!v) throw SymExprError("symbol '" + name_ + "' has no value");
    return *v;
  }
  case Op::Add: ovf(__builtin_add_overflow(a(0), a(1), &r)); return r;
  case Op::Mul: ovf(__builtin_mul_overflow(a(0), a(1), &r)); return r;
  case Op::Pow: return pyPow(a(0), a(1));
  case Op::FloorDiv: return pyFloorDiv(a(0), a(1));
  case Op::Mod: return pyMod(a(0), a(1));
  case Op::CleanDiv: {
    int64_t x = a(0), y = a(1), q = pyFloorDiv(x, y);
    if (pyMod(x, y) != 0) throw SymExprError("CleanDiv of " + std::to_string(x) + " by " + std::to_string(y) + " is not exact");
    return q;
  }
  case Op::Max: return std::max(a(0), a(1));
  case Op::Min: return std::min(a(0), a(1));
  case Op::Eq: return a(0) == a(1);
  case Op::Ne: return a(0) != a(1);
  case Op::Lt: return a(0) < a(1);
  case Op::Le: return a(0) <= a(1);
  case Op::Gt: return a(0) > a(1);
  case Op::Ge: return a(0) >= a(1);
  case Op::And: return a(0) && a(1);
  case Op::Or: return a(0) || a(1);
  case Op::Not: return !a(0);
  }
  throw SymExprError("bad expression");
}

int64_t SymExpr::eval(const std::map<std::string, int64_t> &values) const {
  return eval([&](const std::string &n) -> std::optional<int64_t> {
    auto it = values.find(n);
    if (it == values.end()) return std::nullopt;
    return it->second;
  });
}

/// Binding strength for printing: a child weaker than its context gets parentheses.
static int precedence(const SymExpr &e) {
  switch (e.op()) {
  case SymExpr::Op::Or: return 1;
  case SymExpr::Op::And: return 2;
  case SymExpr::Op::Lt: case SymExpr::Op::Le: case SymExpr::Op::Gt: case SymExpr::Op::Ge: return 3;
  case SymExpr::Op::Add: return 4;
  case SymExpr::Op::Mul: case SymExpr::Op::FloorDiv: return 5;
  case SymExpr::Op::Not: return 6;
  case SymExpr::Op::Pow: return 7;
  default: return 8; // leaves and function-call forms
  }
}

std::string SymExpr::str() const {
  auto sub = [&](size_t k, int need) {
    const SymExpr &c = args_[k];
    std::string s = c.str();
    bool negLeaf = c.op_ == Op::Int && c.value_ < 0 && need > 4;
    return precedence(c) < need || negLeaf ? "(" + s + ")" : s;
  };
  auto bin = [&](const char *tok, int p) { return sub(0, p) + tok + sub(1, p + 1); };
  switch (op_) {
  case Op::Int: return std::to_string(value_);
  case Op::Sym: return name_;
  case Op::Add: {
    const SymExpr &r = args_[1];
    if (r.op_ == Op::Int && r.value_ < 0 && r.value_ != INT64_MIN)
      return sub(0, 4) + " - " + std::to_string(-r.value_);
    if (r.op_ == Op::Mul && r.args_[0].op_ == Op::Int && r.args_[0].value_ == -1) {
      const SymExpr &y = r.args_[1];
      return sub(0, 4) + " - " + (precedence(y) <= 4 ? "(" + y.str() + ")" : y.str());
    }
    if (r.op_ == Op::Mul && r.args_[0].op_ == Op::Int && r.args_[0].value_ < 0 && r.args_[0].value_ != INT64_MIN) {
      const SymExpr &y = r.args_[1]; // x + -2*y prints as x - 2*y
      return sub(0, 4) + " - " + std::to_string(-r.args_[0].value_) + "*" +
             (precedence(y) < 6 ? "(" + y.str() + ")" : y.str());
    }
    return bin(" + ", 4);
  }
  case Op::Mul:
    if (args_[0].op_ == Op::Int && args_[0].value_ == -1) return "-" + sub(1, 6);
    if (args_[0].op_ == Op::Int && args_[0].value_ < 0 && args_[0].value_ != INT64_MIN) // -2*s0, as sympy
      return std::to_string(args_[0].value_) + "*" + sub(1, 6);
    return bin("*", 5);
  case Op::FloorDiv: return bin("//", 5);
  case Op::Pow: return sub(0, 8) + "**" + sub(1, 7);
  case Op::Mod: return "Mod(" + args_[0].str() + ", " + args_[1].str() + ")";
  case Op::CleanDiv: return "CleanDiv(" + args_[0].str() + ", " + args_[1].str() + ")";
  case Op::Max: return "Max(" + args_[0].str() + ", " + args_[1].str() + ")";
  case Op::Min: return "Min(" + args_[0].str() + ", " + args_[1].str() + ")";
  case Op::Eq: return "Eq(" + args_[0].str() + ", " + args_[1].str() + ")";
  case Op::Ne: return "Ne(" + args_[0].str() + ", " + args_[1].str() + ")";
  case Op::Lt: return bin(" < ", 3);
  case Op::Le: return bin(" <= ", 3);
  case Op::Gt: return bin(" > ", 3);
  case Op::Ge: return bin(" >= ", 3);
  case Op::And: return sub(0, 8) + " & " + sub(1, 8); // sympy's parentheses: Python's & binds
  case Op::Or: return sub(0, 8) + " | " + sub(1, 8);  // tighter than a comparison
  case Op::Not: return "~" + sub(0, 7);
  }
  return "?";
}

SymExpr SymExpr::binary(Op op, SymExpr a, SymExpr b) {
  SymExpr e(op);
  e.depth_ = std::max(a.depth_, b.depth_) + 1;
  if (e.depth_ > kMaxDepth) throw SymExprError("expression deeper than " + std::to_string(kMaxDepth) + " levels");
  e.args_.reserve(2);
  e.args_.push_back(std::move(a));
  e.args_.push_back(std::move(b));
  return e;
}

std::optional<int64_t> SymExpr::constant() const {
  if (hasSymbols()) return std::nullopt;
  return eval(std::map<std::string, int64_t>{});
}

namespace {

/// A polynomial: monomial (sorted atom keys, repeated for powers) -> coefficient.
using Poly = std::map<std::vector<std::string>, int64_t>;

int64_t checkedAdd(int64_t a, int64_t b) {
  int64_t r;
  if (__builtin_add_overflow(a, b, &r)) throw SymExprError("int64 overflow");
  return r;
}
int64_t checkedMul(int64_t a, int64_t b) {
  int64_t r;
  if (__builtin_mul_overflow(a, b, &r)) throw SymExprError("int64 overflow");
  return r;
}

void addTerm(Poly &p, const std::vector<std::string> &m, int64_t c) {
  int64_t &x = p[m];
  x = checkedAdd(x, c);
  if (x == INT64_MIN) throw SymExprError("int64 overflow"); // its text would not read back
  if (x == 0) p.erase(m);
}

} // namespace

/// Polynomial arithmetic over atoms; `atoms` maps an atom's key (its canonical text) to it.
struct SymExprCanon {
  std::map<std::string, SymExpr> atoms;

  Poly constPoly(int64_t v) {
    Poly p;
    if (v) p[{}] = v;
    return p;
  }
  Poly atom(const SymExpr &e) {
    std::string key = e.op() == SymExpr::Op::Sym ? e.name() : "(" + e.str() + ")";
    atoms.emplace(key, e);
    return Poly{{{key}, 1}};
  }
  static std::optional<int64_t> asConst(const Poly &p) {
    if (p.empty()) return 0;
    if (p.size() == 1 && p.begin()->first.empty()) return p.begin()->second;
    return std::nullopt;
  }
  Poly mul(const Poly &a, const Poly &b) {
    // A bound on the work: sizes are short polynomials; a hostile one is an error, not minutes.
    if (a.size() * b.size() > 4096) throw SymExprError("expression too large to normalize");
    Poly r;
    for (auto &[ma, ca] : a)
      for (auto &[mb, cb] : b) {
        std::vector<std::string> m = ma;
        m.insert(m.end(), mb.begin(), mb.end());
        std::sort(m.begin(), m.end());
        addTerm(r, m, checkedMul(ca, cb));
      }
    return r;
  }
  Poly poly(const SymExpr &e) {
    using Op = SymExpr::Op;
    switch (e.op()) {
    case Op::Int: return constPoly(e.value_);
    case Op::Sym: return atom(e);
    case Op::Add: {
      Poly r = poly(e.args_[0]);
      for (size_t k = 1; k < e.args_.size(); ++k)
        for (auto &[m, c] : poly(e.args_[k])) addTerm(r, m, c);
      return r;
    }
    case Op::Mul: {
      Poly r = poly(e.args_[0]);
      for (size_t k = 1; k < e.args_.size(); ++k) r = mul(r, poly(e.args_[k]));
      return r;
    }
    case Op::Pow: {
      Poly b = poly(e.args_[0]), x = poly(e.args_[1]);
      std::optional<int64_t> n = asConst(x);
      if (n && *n >= 0 && *n <= 8) {
        Poly r = constPoly(1);
        for (int64_t k = 0; k < *n; ++k) r = mul(r, b);
        return r;
      }
      return opaque(e, {b, x});
    }
    case Op::CleanDiv: {
      Poly a = poly(e.args_[0]), b = poly(e.args_[1]);
      std::optional<int64_t> d = asConst(b);
      bool exact = d && *d != 0;
      for (auto &[m, c] : a) exact = exact && !(c == INT64_MIN && *d == -1) && c % *d == 0;
      if (exact) {
        Poly r;
        for (auto &[m, c] : a) r[m] = c / *d;
        return r;
      }
      // By one monomial that divides every term (view's -1 from an element count:
      // CleanDiv(16*s24, s24) is 16).
      if (b.size() == 1 && b.begin()->second != 0) {
        const auto &[mb, cb] = *b.begin();
        Poly r;
        bool divides = true;
        for (auto &[m, c] : a) {
          std::vector<std::string> rest;
          if (!(c == INT64_MIN && cb == -1) && c % cb == 0 &&
              std::includes(m.begin(), m.end(), mb.begin(), mb.end())) {
            std::set_difference(m.begin(), m.end(), mb.begin(), mb.end(), std::back_inserter(rest));
            r[rest] = c / cb;
          } else {
            divides = false;
            break;
          }
        }
        if (divides) return r;
      }
      return opaque(e, {a, b});
    }
    case Op::FloorDiv: {
      Poly a = poly(e.args_[0]), b = poly(e.args_[1]);
      if (asConst(b) == std::optional<int64_t>(1)) return a;
      return opaque(e, {a, b});
    }
    default: {
      std::vector<Poly> args;
      for (const SymExpr &x : e.args_) args.push_back(poly(x));
      return opaque(e, args);
    }
    }
  }
  /// An atom of canonical operands; folded when they are constants.
  Poly opaque(const SymExpr &e, const std::vector<Poly> &args) {
    bool allConst = true;
    for (const Poly &a : args) allConst = allConst && asConst(a).has_value();
    SymExpr c = e;
    for (size_t k = 0; k < args.size(); ++k) c.args_[k] = build(args[k]);
    if (allConst) return constPoly(c.eval(std::map<std::string, int64_t>{}));
    return atom(c);
  }
  /// The expression of a polynomial: terms by decreasing degree, then by their atoms; the
  /// constant last (sympy's `2*s17 - 1`).
  SymExpr build(const Poly &p) {
    std::vector<std::pair<std::vector<std::string>, int64_t>> terms(p.begin(), p.end());
    std::sort(terms.begin(), terms.end(), [](const auto &a, const auto &b) { // distinct monomials: a total order
      if (a.first.size() != b.first.size()) return a.first.size() > b.first.size();
      return a.first < b.first;
    });
    std::optional<SymExpr> r;
    for (auto &[m, c] : terms) {
      // A later negative term prints as " - <term>": its magnitude, wrapped in -1*.
      bool minus = c < 0 && r && c != INT64_MIN;
      int64_t coef = minus ? -c : c;
      std::optional<SymExpr> t;
      if (coef != 1 || m.empty()) t = SymExpr::integer(coef);
      for (const std::string &k : m) t = t ? SymExpr::binary(SymExpr::Op::Mul, *t, atoms.at(k)) : atoms.at(k);
      if (minus) t = m.empty() ? SymExpr::integer(c) : SymExpr::binary(SymExpr::Op::Mul, SymExpr::integer(-1), *t);
      r = r ? SymExpr::binary(SymExpr::Op::Add, *r, *t) : *t;
    }
    return r ? *r : SymExpr::integer(0);
  }
};

std::string SymExpr::normalText() const {
  try {
    return canonical().str();
  } catch (const SymExprError &) {
    return str();
  }
}

SymExpr SymExpr::canonical() const {
  SymExprCanon c;
  return c.build(c.poly(*this));
}

bool SymExpr::atLeastForSizes(const SymExpr &b, const std::map<std::string, int64_t> &minimums) const {
  try {
    SymExprCanon c;
    Poly d = c.poly(*this);
    for (auto &[m, k] : c.poly(b)) addTerm(d, m, checkedMul(k, -1));
    // Every symbol is a size >= its minimum >= 0: monomials of symbols with coefficients >= 0 grow
    // with them, so the difference is smallest with every symbol at its minimum.
    int64_t atMinimums = 0;
    for (auto &[m, k] : d) {
      int64_t term = k;
      for (const std::string &atom : m) {
        if (atom.empty() || atom[0] == '(') return false; // //, Mod, Max, ...: not decided here
        auto it = minimums.find(atom);
        const int64_t lo = it == minimums.end() ? 1 : it->second;
        if (lo < 0) return false;
        term = checkedMul(term, lo);
      }
      if (!m.empty() && k < 0) return false;
      atMinimums = checkedAdd(atMinimums, term);
    }
    return atMinimums >= 0;
  } catch (const SymExprError &) {
    return false;
  }
}

bool isSizeSymbolName(const std::string &name) {
  static const std::set<std::string> taken = {"True", "False", "None", "inf", "nan", "torch", "self"};
  bool ident = !name.empty() && !std::isdigit((unsigned char)name[0]);
  for (char c : name) ident = ident && (std::isalnum((unsigned char)c) || c == '_');
  return ident && !taken.count(name);
}

bool SymExpr::hasSymbols() const {
  if (op_ == Op::Sym) return true;
  for (const SymExpr &a : args_)
    if (a.hasSymbols()) return true;
  return false;
}

SymExpr SymExpr::substitute(const std::map<std::string, int64_t> &values) const {
  if (op_ == Op::Sym) {
    auto it = values.find(name_);
    return it == values.end() ? *this : integer(it->second);
  }
  if (op_ == Op::Int) return *this;
  SymExpr r = *this;
  for (SymExpr &a : r.args_) a = a.substitute(values);
  if (!r.hasSymbols()) return integer(r.eval(values));
  return r;
}

void SymExpr::collectSymbols(std::set<std::string> &out) const {
  if (op_ == Op::Sym) out.insert(name_);
  for (const SymExpr &a : args_) a.collectSymbols(out);
}

SymExpr SymExpr::ofSize(const std::vector<std::string> &texts, size_t k, int64_t value) {
  return k < texts.size() && !texts[k].empty() ? parse(texts[k]) : integer(value);
}

std::string SymExpr::sizeText() const {
  SymExpr c = canonical();
  return c.hasSymbols() ? c.str() : std::string();
}

std::vector<std::string> SymExpr::sizeTexts(const std::vector<SymExpr> &sizes) {
  std::vector<std::string> r;
  bool any = false;
  for (const SymExpr &e : sizes) {
    r.push_back(e.sizeText());
    any |= !r.back().empty();
  }
  if (!any) r.clear();
  return r;
}

bool sameSize(const SymExpr &x, const SymExpr &y, const std::vector<SizeRange> &ranges,
              const std::map<std::string, int64_t> &fixed) {
  try {
    if (x.canonical().str() == y.canonical().str()) return true;
  } catch (const SymExprError &) {
    // too large to normalize: the values decide
  }
  std::vector<std::map<std::string, int64_t>> points(4, fixed);
  for (size_t k = 0; k < ranges.size(); ++k) {
    const SizeRange &r = ranges[k];
    int64_t lo = std::min(r.lo, r.hi);
    points[0][r.symbol] = lo;
    points[1][r.symbol] = r.hi;
    points[2][r.symbol] = lo + (r.hi - lo) / 2;
    points[3][r.symbol] = k % 2 ? lo : r.hi;
  }
  int compared = 0;
  for (const auto &pt : points) {
    int64_t u, v;
    try {
      u = x.eval(pt);
      v = y.eval(pt);
    } catch (const SymExprError &) {
      continue; // undefined at this point
    }
    if (u != v) return false;
    ++compared;
  }
  return compared > 0;
}

} // namespace aotc
