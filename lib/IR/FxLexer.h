//===- FxLexer.h - Tokens of FX graph code (private to the parser) --*- C++ -*-===//
//
// Python-style tokens for lib/IR/Parser.cpp: names, numbers, strings,
// operators, comments and logical-line ends (never inside brackets).
//===----------------------------------------------------------------------===//
#pragma once

#include <string>
#include <vector>

namespace aotc::fx {

enum class TK { Name, Int, Float, Str, Op, Comment, Newline, End };

struct Tok {
  TK kind = TK::End;
  std::string text; ///< Name/Op spelling, number spelling, decoded string, comment body.
  int line = 0, col = 0;
  int indent = -1;  ///< Indentation of the logical line (set on its first token).
};

/// Tokenizes `lines` (the class block of an FX file; `firstLine` is the 1-based
/// file line of lines[0]). Lexical errors are user errors at file:line:col.
std::vector<Tok> lex(const std::vector<std::string> &lines, int firstLine, const std::string &file);

} // namespace aotc::fx
