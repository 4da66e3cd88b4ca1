//===- ParserImpl.h - The FX text parser's class (Parser.cpp, ParserHeader.cpp) -*- C++ -*-===//
//
// Internal to lib/IR. Parser.cpp reads the graph grammar (defs, statements, values);
// ParserHeader.cpp reads the `# aotc:` header lines, checks the stage contract they promise
// and parses tensor-type annotations. See Parser.cpp for the grammar.
//===----------------------------------------------------------------------===//
#pragma once

#include "FxLexer.h"

#include "aotc/Graph.h"
#include "aotc/OpRegistry.h"
#include "aotc/SymExpr.h"

#include <optional>
#include <algorithm>
#include <map>
#include <set>
#include <string>
#include <vector>

namespace aotc::parser {

using fx::TK;
using fx::Tok;

//===-- Python values -------------------------------------------------------===//

/// A parsed Python literal or name, before conversion to an Arg by schema type.
struct PyVal {
  /// Sym: a size expression over run-time symbols (`s17`, `2*s17 - 1`): its text in `s`,
  /// its value at the reference sizes in `i`.
  enum Kind { None, Bool, Int, Float, Str, Ref, List, DType_, Enum, Sym } kind = None;
  bool b = false;
  int64_t i = 0;
  double f = 0;
  std::string s;             ///< Str value, Ref name, Enum text.
  DType dt = DType::F32;
  std::vector<PyVal> items;  ///< List/tuple items.
  SourceLoc loc;
};

inline const char *kindName(PyVal::Kind k) {
  switch (k) {
  case PyVal::None: return "None";
  case PyVal::Bool: return "a bool";
  case PyVal::Int: return "an int";
  case PyVal::Float: return "a float";
  case PyVal::Str: return "a string";
  case PyVal::Ref: return "a node";
  case PyVal::List: return "a list";
  case PyVal::DType_: return "a dtype";
  case PyVal::Enum: return "an enum value";
  case PyVal::Sym: return "a size expression";
  }
  return "?";
}

inline std::string strip(const std::string &s) {
  size_t b = s.find_first_not_of(" \t\r");
  if (b == std::string::npos) return "";
  size_t e = s.find_last_not_of(" \t\r");
  return s.substr(b, e - b + 1);
}

inline int indentOf(const std::string &s) {
  int n = 0;
  for (char c : s) {
    if (c == ' ') ++n;
    else if (c == '\t') n += 8 - n % 8;
    else break;
  }
  return n;
}

inline bool isBlank(const std::string &s) { return strip(s).empty(); }

//===-- Parser --------------------------------------------------------------===//

struct HeaderInput {
  InputRole role = InputRole::UserInput;
  std::string fqn;
  bool requiresGrad = false;
  SourceLoc loc;
};

/// Defined in ParserHeader.cpp: the 0-based column of `class` in a `class Name(...):` line, or -1.
int classHeaderColumn(const std::string &s);

class Parser {
public:
  Parser(const std::string &text, std::string file) : file_(std::move(file)) {
    std::string cur;
    for (char c : text) {
      if (c == '\n') {
        lines_.push_back(cur);
        cur.clear();
      } else {
        cur += c;
      }
    }
    if (!cur.empty()) lines_.push_back(cur);
  }

  Program run();

private:
  SourceLoc at(int line, int col) const { return SourceLoc{file_, line, col}; }
  SourceLoc at(const Tok &t) const { return at(t.line, t.col); }
  [[noreturn]] void fail(const Tok &t, const std::string &msg) const { userError(at(t), msg); }

  // Header.
  void checkStageContract() const;
  void parseHeaderLine(const std::string &body, int line, int col);
  // Token helpers.
  const Tok &peek(size_t k = 0) const { return toks_[std::min(pos_ + k, toks_.size() - 1)]; }
  const Tok &next() { const Tok &t = toks_[pos_]; if (pos_ + 1 < toks_.size()) ++pos_; return t; }
  bool isOp(const Tok &t, const char *op) const { return t.kind == TK::Op && t.text == op; }
  bool isName(const Tok &t, const char *n) const { return t.kind == TK::Name && t.text == n; }
  const Tok &expectOp(const char *op, const char *what);
  const Tok &expectName(const char *what);
  std::string describe(const Tok &t) const;
  void skipToNewline();

  /// Every `torch.ops.<ns>.<op>.<overload>(` call of an unknown op, grouped by target (count,
  /// first location and its `# File:` trace), and every get_attr without a type annotation
  /// (`c = self.<name>`), over the whole graph text: all reported at once. Called when the
  /// parser meets the first of them.
  void prescanTargets();

  // Grammar.
  void parseDef(int defIndent);
  void parseStatement(Graph &g, bool &returned);
  void parseAssignment(Graph &g);
  void parseReturn(Graph &g);
  /// `x = torch.ops.higher_order.with_effects(token, torch.ops.aten._linalg_check_errors.default,
  /// info, ...)`: check_errors on info's op (checkLinalgErrors); x and the token are tokens_.
  Node *parseEffect(Graph &g, const std::string &name, const SourceLoc &loc);
  /// Drops the effect tokens: the token placeholders, the effects and their getitems, and the
  /// outputs that return them (torch.export orders effects with them; aotc keeps graph order).
  void dropTokens(Graph &g);
  PyVal parseValue();
  bool symbolicSpan(size_t &count, std::string &text) const;
  std::string parseDotted(const Tok &first);
  TensorType parseAnnotation(const Tok &strTok, const std::string &what);

  Node *lookupRef(Graph &g, const PyVal &v);
  /// A node's annotated run-time sizes must be the op's shape function's, where it has one.
  void checkAnnotatedSizes(const Node &node, const TensorType &annot) const;
  Arg convert(Graph &g, const PyVal &v, const SchemaArg *sa, const std::string &target);
  Arg convertGeneric(Graph &g, const PyVal &v);

  std::string file_;
  std::vector<std::string> lines_;
  std::vector<Tok> toks_;
  size_t pos_ = 0;
  int depth_ = 0; ///< Nesting of the list parseValue is reading.

  Program prog_;
  bool hasHeader_ = false;
  std::map<std::string, std::map<std::string, HeaderInput>> headerInputs_; // graph -> name -> info
  /// FX text's get_attr nodes (`c: "f32[3]" = self.sub.c`): placeholder name -> attribute path
  /// ("sub.c"); they become constant inputs (InputRole::Constant, fqn = the path).
  std::map<std::string, std::string> getAttrs_;
  std::vector<std::pair<std::string, SourceLoc>> gradOfLocs_, savedLocs_;
  std::vector<std::pair<std::pair<int, std::string>, SourceLoc>> mutatedLocs_;
  std::set<std::string> defsSeen_;
  std::string curTrace_;
  /// The user-level op (Node::userOp) of the nodes that follow a trailing `# op: X` comment
  /// (the printer writes one where the op changes; "-" is none); unset: each node's target.
  std::optional<std::string> curUserOp_;
  Node *lastNode_ = nullptr; ///< The node the current statement made (for its trailing comment).
  std::string userOpFor(const Node &n) const {
    return curUserOp_ ? *curUserOp_ : textDefaultUserOp(n);
  }
  std::set<std::string> dropped_; ///< Names of result-less checks read and dropped (`x = None` may follow).
  std::set<Node *> tokens_;       ///< Effect tokens (with_effects' token argument, its result, getitems).
  std::string curGraphName_;
  /// The run-time size symbols (`# aotc: size <s> dynamic=<reference value> ...`) and their
  /// reference values: symbolic dims of annotations and arguments are evaluated there.
  std::map<std::string, int64_t> dynamicSymbols_;
  /// Parses a size expression at `loc` (its symbols must be run-time symbols): its canonical
  /// text and its value at the reference sizes.
  std::pair<std::string, int64_t> symbolicSize(const std::string &text, const SourceLoc &loc) const;
  /// Expressions of the symbolic arguments convert() read for the call being built
  /// (Node::symArgs), by schema argument name.
  std::vector<std::pair<std::string, std::vector<std::string>>> pendingSymArgs_;
};

} // namespace aotc::parser
