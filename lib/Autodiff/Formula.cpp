//===- Formula.cpp - Parser of derivative formulas ---------------------------===//
//
// The expression language of derivatives.yaml formulas (docs/derivatives.md):
//
//   expr    := primary postfix*
//   primary := NUMBER | '-' NUMBER | STRING | '[' [expr (',' expr)*] ']' | '(' expr ')'
//            | DOTTED '(' [arg (',' arg)*] ')'       call (DOTTED: a.b.c, e.g. aten.mul.Tensor)
//            | IDENT
//   arg     := IDENT '=' expr | expr
//   postfix := '.' IDENT                             attribute (self.sizes)
//            | '[' INT ']'                           index (grads[0])
//
// Every sub-expression records its location (line of the formula, column of its
// first character) so later checks can point into the rules file.
//===----------------------------------------------------------------------===//
#include "aotc/Autodiff.h"

#include <cctype>
#include <cerrno>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <functional>

namespace aotc {

std::string FormulaExpr::str() const {
  switch (kind) {
  case Kind::Ident: return name;
  case Kind::Int: return std::to_string(i);
  case Kind::Float: {
    char buf[64];
    std::snprintf(buf, sizeof buf, "%.17g", f);
    std::string s = buf;
    if (s.find_first_of(".eni") == std::string::npos) s += ".0";
    return s;
  }
  case Kind::String: return "'" + name + "'";
  case Kind::List: {
    std::string s = "[";
    for (size_t k = 0; k < args.size(); ++k) s += (k ? ", " : "") + args[k].str();
    return s + "]";
  }
  case Kind::Call: {
    std::string s = name + "(";
    bool first = true;
    for (auto &a : args) {
      s += (first ? "" : ", ") + a.str();
      first = false;
    }
    for (auto &[k, v] : kwargs) {
      s += (first ? "" : ", ") + k + "=" + v.str();
      first = false;
    }
    return s + ")";
  }
  case Kind::Attr: return args[0].str() + "." + name;
  case Kind::Index: return args[0].str() + "[" + std::to_string(i) + "]";
  }
  return "?";
}

namespace {

class FormulaParser {
public:
  FormulaParser(const std::string &text, std::function<SourceLoc(size_t)> locOf)
      : s_(text), locOf_(std::move(locOf)) {}

  FormulaExpr parseAll() {
    skipWs();
    if (pos_ >= s_.size()) fail("empty formula");
    FormulaExpr e = parseExpr();
    skipWs();
    if (pos_ < s_.size()) fail(std::string("unexpected '") + s_[pos_] + "' after expression");
    return e;
  }

private:
  const std::string &s_;
  std::function<SourceLoc(size_t)> locOf_;
  size_t pos_ = 0;

  SourceLoc locAt(size_t p) const { return locOf_(p); }
  [[noreturn]] void fail(const std::string &msg) const {
    userError(locAt(pos_), "malformed derivative formula: " + msg);
  }
  void skipWs() {
    while (pos_ < s_.size() && std::isspace((unsigned char)s_[pos_])) ++pos_;
  }
  bool peek(char c) {
    skipWs();
    return pos_ < s_.size() && s_[pos_] == c;
  }
  void expect(char c) {
    skipWs();
    if (pos_ >= s_.size()) fail(std::string("expected '") + c + "' before end of formula");
    if (s_[pos_] != c) fail(std::string("expected '") + c + "', got '" + s_[pos_] + "'");
    ++pos_;
  }
  static bool identStart(char c) { return std::isalpha((unsigned char)c) || c == '_'; }
  static bool identChar(char c) { return std::isalnum((unsigned char)c) || c == '_'; }

  std::string ident() {
    skipWs();
    if (pos_ >= s_.size() || !identStart(s_[pos_])) fail("expected a name");
    size_t b = pos_;
    while (pos_ < s_.size() && identChar(s_[pos_])) ++pos_;
    return s_.substr(b, pos_ - b);
  }

  FormulaExpr parseNumber(bool negate, size_t startPos) {
    size_t b = pos_;
    bool isFloat = false;
    while (pos_ < s_.size() && std::isdigit((unsigned char)s_[pos_])) ++pos_;
    if (pos_ < s_.size() && s_[pos_] == '.') {
      isFloat = true;
      ++pos_;
      while (pos_ < s_.size() && std::isdigit((unsigned char)s_[pos_])) ++pos_;
    }
    if (pos_ < s_.size() && (s_[pos_] == 'e' || s_[pos_] == 'E')) {
      isFloat = true;
      ++pos_;
      if (pos_ < s_.size() && (s_[pos_] == '+' || s_[pos_] == '-')) ++pos_;
      size_t d = pos_;
      while (pos_ < s_.size() && std::isdigit((unsigned char)s_[pos_])) ++pos_;
      if (d == pos_) fail("malformed number exponent");
    }
    std::string text = s_.substr(b, pos_ - b);
    if (pos_ < s_.size() && identStart(s_[pos_])) fail("malformed number '" + text + s_[pos_] + "'");
    FormulaExpr e;
    e.loc = locAt(startPos);
    if (isFloat) {
      e.kind = FormulaExpr::Kind::Float;
      e.f = std::strtod(text.c_str(), nullptr);
      if (negate) e.f = -e.f;
    } else {
      e.kind = FormulaExpr::Kind::Int;
      errno = 0;
      long long v = std::strtoll(text.c_str(), nullptr, 10);
      if (errno == ERANGE) fail("integer literal out of range");
      e.i = negate ? -v : v;
    }
    return e;
  }

  FormulaExpr parsePrimary() {
    skipWs();
    if (pos_ >= s_.size()) fail("expected an expression before end of formula");
    // Calls, lists and parentheses nest through recursion (here, and in validation,
    // printing and evaluation): bounded, so a hostile rule file cannot overflow the stack.
    static constexpr int kMaxNesting = 64;
    if (depth_ >= kMaxNesting) fail("expression nested deeper than " + std::to_string(kMaxNesting) + " levels");
    struct Deeper {
      int &d;
      explicit Deeper(int &x) : d(++x) {}
      ~Deeper() { --d; }
    } deeper(depth_);
    size_t b = pos_;
    char c = s_[pos_];
    if (c == '-') {
      ++pos_;
      skipWs();
      if (pos_ >= s_.size() || !(std::isdigit((unsigned char)s_[pos_]) || s_[pos_] == '.'))
        fail("'-' is only allowed before a number; use neg(...)");
      return parseNumber(true, b);
    }
    if (std::isdigit((unsigned char)c) || c == '.') return parseNumber(false, b);
    if (c == '\'' || c == '"') {
      ++pos_;
      size_t e = s_.find(c, pos_);
      if (e == std::string::npos) fail("unterminated string");
      FormulaExpr r;
      r.kind = FormulaExpr::Kind::String;
      r.name = s_.substr(pos_, e - pos_);
      r.loc = locAt(b);
      pos_ = e + 1;
      return r;
    }
    if (c == '[') {
      ++pos_;
      FormulaExpr r;
      r.kind = FormulaExpr::Kind::List;
      r.loc = locAt(b);
      if (!peek(']')) {
        for (;;) {
          r.args.push_back(parseExpr());
          if (peek(',')) {
            ++pos_;
            continue;
          }
          break;
        }
      }
      expect(']');
      return r;
    }
    if (c == '(') {
      ++pos_;
      FormulaExpr r = parseExpr();
      expect(')');
      return r;
    }
    if (!identStart(c)) fail(std::string("unexpected '") + c + "'");
    // A dotted name followed by '(' is a call of a full target (aten.mul.Tensor);
    // otherwise the dots are attribute accesses, handled as postfix.
    size_t save = pos_;
    std::string dotted = ident();
    while (pos_ + 1 < s_.size() && s_[pos_] == '.' && identStart(s_[pos_ + 1])) {
      ++pos_;
      dotted += "." + ident();
    }
    if (peek('(')) {
      ++pos_;
      FormulaExpr r;
      r.kind = FormulaExpr::Kind::Call;
      r.name = dotted;
      r.loc = locAt(b);
      if (!peek(')')) {
        for (;;) {
          skipWs();
          // keyword argument?
          size_t p0 = pos_;
          if (pos_ < s_.size() && identStart(s_[pos_])) {
            std::string k = ident();
            skipWs();
            if (pos_ < s_.size() && s_[pos_] == '=' ) {
              ++pos_;
              for (auto &kv : r.kwargs)
                if (kv.name == k) {
                  pos_ = p0;
                  fail("keyword argument '" + k + "' given twice");
                }
              r.kwargs.push_back({k, parseExpr()});
              goto next;
            }
            pos_ = p0;
          }
          if (!r.kwargs.empty()) fail("positional argument after keyword argument");
          r.args.push_back(parseExpr());
        next:
          if (peek(',')) {
            ++pos_;
            continue;
          }
          break;
        }
      }
      expect(')');
      return r;
    }
    // Plain identifier; re-parse so postfix handles the dots.
    pos_ = save;
    FormulaExpr r;
    r.kind = FormulaExpr::Kind::Ident;
    r.loc = locAt(b);
    r.name = ident();
    return r;
  }

  FormulaExpr parseExpr() {
    FormulaExpr e = parsePrimary();
    for (;;) {
      skipWs();
      if (pos_ < s_.size() && s_[pos_] == '.') {
        size_t b = pos_;
        ++pos_;
        FormulaExpr a;
        a.kind = FormulaExpr::Kind::Attr;
        a.loc = locAt(b + 1);
        a.name = ident();
        a.args.push_back(std::move(e));
        e = std::move(a);
        continue;
      }
      if (pos_ < s_.size() && s_[pos_] == '[') {
        size_t b = pos_;
        ++pos_;
        skipWs();
        if (pos_ >= s_.size() || !std::isdigit((unsigned char)s_[pos_])) fail("expected an index");
        FormulaExpr idx = parseNumber(false, pos_);
        if (idx.kind != FormulaExpr::Kind::Int) fail("index must be an integer");
        expect(']');
        FormulaExpr a;
        a.kind = FormulaExpr::Kind::Index;
        a.loc = locAt(b);
        a.i = idx.i;
        a.args.push_back(std::move(e));
        e = std::move(a);
        continue;
      }
      return e;
    }
  }
  int depth_ = 0; ///< Nesting of parsePrimary calls.
};

} // namespace

FormulaExpr parseFormula(const std::string &text, const SourceLoc &start) {
  return FormulaParser(text, [start](size_t p) {
           SourceLoc l = start;
           if (l.line > 0) l.col = start.col + (int)p;
           return l;
         }).parseAll();
}

FormulaExpr parseFormula(const std::string &text, const std::function<SourceLoc(size_t)> &locOf) {
  return FormulaParser(text, locOf).parseAll();
}

} // namespace aotc
