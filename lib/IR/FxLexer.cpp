//===- FxLexer.cpp - Tokens of FX graph code ---------------------------------===//
#include "FxLexer.h"

#include "aotc/Diagnostics.h"

#include <cctype>

namespace aotc::fx {
namespace {

/// Splits the class block into tokens. Newline tokens end logical lines
/// (never inside brackets, as in Python); comments are tokens of their own.
class Lexer {
public:
  Lexer(const std::vector<std::string> &lines, int firstLine, int firstCol, std::string file)
      : lines_(lines), file_(std::move(file)), first_(firstLine), firstCol_(firstCol) {}

  std::vector<Tok> run() {
    std::vector<Tok> out;
    std::vector<Tok> open; // unclosed brackets
    int depth = 0;
    for (size_t li = 0; li < lines_.size(); ++li) {
      const std::string &s = lines_[li];
      int lineNo = first_ + (int)li;
      size_t i = li == 0 ? (size_t)firstCol_ : 0;
      bool lineStart = depth == 0;
      int indent = -1;
      bool any = false;
      while (i < s.size()) {
        char c = s[i];
        if (c == ' ' || c == '\t' || c == '\r') { ++i; continue; }
        Tok t;
        t.line = lineNo;
        t.col = (int)i + 1;
        if (lineStart && !any) indent = (int)i;
        if (c == '#') {
          t.kind = TK::Comment;
          size_t b = i + 1;
          while (b < s.size() && s[b] == ' ') ++b;
          t.text = s.substr(b);
          while (!t.text.empty() && (t.text.back() == ' ' || t.text.back() == '\r')) t.text.pop_back();
          i = s.size();
        } else if (std::isalpha((unsigned char)c) || c == '_') {
          size_t b = i;
          while (i < s.size() && (std::isalnum((unsigned char)s[i]) || s[i] == '_')) ++i;
          t.kind = TK::Name;
          t.text = s.substr(b, i - b);
        } else if (std::isdigit((unsigned char)c) ||
                   (c == '.' && i + 1 < s.size() && std::isdigit((unsigned char)s[i + 1]))) {
          size_t b = i;
          bool isFloat = false;
          while (i < s.size() && std::isdigit((unsigned char)s[i])) ++i;
          if (i < s.size() && s[i] == '.') {
            isFloat = true;
            ++i;
            while (i < s.size() && std::isdigit((unsigned char)s[i])) ++i;
          }
          if (i < s.size() && (s[i] == 'e' || s[i] == 'E')) {
            size_t j = i + 1;
            if (j < s.size() && (s[j] == '+' || s[j] == '-')) ++j;
            if (j < s.size() && std::isdigit((unsigned char)s[j])) {
              isFloat = true;
              i = j;
              while (i < s.size() && std::isdigit((unsigned char)s[i])) ++i;
            }
          }
          if (i < s.size() && (std::isalpha((unsigned char)s[i]) || s[i] == '_'))
            userError(SourceLoc{file_, lineNo, (int)i + 1}, "invalid number literal");
          t.kind = isFloat ? TK::Float : TK::Int;
          t.text = s.substr(b, i - b);
        } else if (c == '\'' || c == '"') {
          t.kind = TK::Str;
          char q = c;
          ++i;
          bool closed = false;
          while (i < s.size()) {
            char d = s[i++];
            if (d == q) { closed = true; break; }
            if (d == '\\' && i < s.size()) {
              char e = s[i++];
              switch (e) {
              case 'n': t.text += '\n'; break;
              case 't': t.text += '\t'; break;
              case 'r': t.text += '\r'; break;
              case '0': t.text += '\0'; break;
              default: t.text += e; break;
              }
            } else {
              t.text += d;
            }
          }
          if (!closed) userError(SourceLoc{file_, lineNo, t.col}, "unterminated string literal");
        } else {
          static const std::string ops = "()[]{},:;=.-+*/%@<>!~&|^";
          if (ops.find(c) == std::string::npos)
            userError(SourceLoc{file_, lineNo, t.col},
                      std::string("unexpected character '") + c + "'");
          t.kind = TK::Op;
          if (c == '-' && i + 1 < s.size() && s[i + 1] == '>') {
            t.text = "->";
            i += 2;
          } else if (c == '*' && i + 1 < s.size() && s[i + 1] == '*') {
            t.text = "**";
            i += 2;
          } else if ((c == '=' || c == '!' || c == '<' || c == '>') && i + 1 < s.size() &&
                     s[i + 1] == '=') {
            t.text = std::string(1, c) + "=";
            i += 2;
          } else {
            t.text = std::string(1, c);
            ++i;
          }
          if (c == '(' || c == '[' || c == '{') {
            ++depth;
            open.push_back(t);
          }
          if (c == ')' || c == ']' || c == '}') {
            if (depth == 0) userError(SourceLoc{file_, lineNo, t.col}, "unmatched '" + t.text + "'");
            --depth;
            open.pop_back();
          }
        }
        if (!any) t.indent = indent;
        any = true;
        out.push_back(std::move(t));
        // A comment ends the physical line; at depth 0 it is its own logical line.
      }
      if (any && depth == 0) {
        Tok nl;
        nl.kind = TK::Newline;
        nl.line = lineNo;
        nl.col = (int)s.size() + 1;
        out.push_back(nl);
      }
    }
    if (depth != 0)
      userError(SourceLoc{file_, open.back().line, open.back().col},
                "'" + open.back().text + "' was never closed");
    Tok end;
    end.kind = TK::End;
    end.line = first_ + (int)lines_.size();
    end.col = 1;
    out.push_back(end);
    return out;
  }

private:
  const std::vector<std::string> &lines_;
  std::string file_;
  int first_, firstCol_;
};

} // namespace

std::vector<Tok> lex(const std::vector<std::string> &lines, int firstLine, const std::string &file) {
  return Lexer(lines, firstLine, 0, file).run();
}

} // namespace aotc::fx
