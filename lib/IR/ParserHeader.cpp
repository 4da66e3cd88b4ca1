//===- ParserHeader.cpp - `# aotc:` header lines, stage contracts, annotations ---===//
//
// The parts of the FX text parser (ParserImpl.h) that read what is not graph code: the
// `# aotc: <key> ...` header lines (docs/formats.md), the output layout a header's stage
// promises (Graph.h "Contracts between stages"), the `class Name(...):` line, and tensor-type
// annotations such as "f32[4, 8][8, 1]cpu".
//===----------------------------------------------------------------------===//
#include "ParserImpl.h"

#include <cctype>
#include <cerrno>
#include <climits>
#include <cstdlib>
#include <optional>
#include <sstream>

namespace aotc::parser {

/// `# aotc: <key> <words...>` (see docs/formats.md).
void Parser::parseHeaderLine(const std::string &body, int line, int col) {
  hasHeader_ = true;
  std::istringstream in(body);
  std::vector<std::string> w;
  for (std::string x; in >> x;) w.push_back(x);
  SourceLoc loc = at(line, col);
  if (w.empty()) userError(loc, "empty '# aotc:' header line");
  // A non-negative int (at most 2^31-1), else "<what> a non-negative integer ...".
  auto count = [&](const std::string &text, const std::string &what) {
    char *end = nullptr;
    errno = 0;
    long v = std::strtol(text.c_str(), &end, 10);
    if (*end || errno == ERANGE || v < 0 || v > INT_MAX)
      userError(loc, what + " a non-negative integer (at most 2^31-1)");
    return (int)v;
  };
  const std::string &key = w[0];
  auto need = [&](size_t n) {
    if (w.size() != n) userError(loc, "'# aotc: " + key + "' expects " + std::to_string(n - 1) +
                                          " value(s), got " + std::to_string(w.size() - 1));
  };
  if (key == "stage") {
    need(2);
    static const std::set<std::string> stages = {"capture", "functionalize", "decompose",
                                                 "joint",   "lower",         "partition"};
    if (!stages.count(w[1])) userError(loc, "unknown stage '" + w[1] + "'");
    prog_.stage = w[1];
  } else if (key == "name") {
    need(2);
    prog_.name = w[1];
  } else if (key == "input") {
    // input <graph> <name> role=<role> [fqn=<fqn>] requires_grad=<True|False>
    if (w.size() < 4) userError(loc, "'# aotc: input' expects: <graph> <name> role=<role> ...");
    if (w[1] != "forward" && w[1] != "backward")
      userError(loc, "'# aotc: input': graph must be 'forward' or 'backward', got '" + w[1] + "'");
    HeaderInput hi;
    hi.loc = loc;
    bool haveRole = false;
    for (size_t k = 3; k < w.size(); ++k) {
      size_t eq = w[k].find('=');
      if (eq == std::string::npos) userError(loc, "expected key=value, got '" + w[k] + "'");
      std::string kk = w[k].substr(0, eq), v = w[k].substr(eq + 1);
      if (kk == "role") {
        haveRole = true;
        if (v == "parameter") hi.role = InputRole::Parameter;
        else if (v == "buffer") hi.role = InputRole::Buffer;
        else if (v == "user_input") hi.role = InputRole::UserInput;
        else if (v == "tangent") hi.role = InputRole::Tangent;
        else if (v == "saved") hi.role = InputRole::Saved;
        else if (v == "constant") hi.role = InputRole::Constant;
        else if (v == "rng_state") hi.role = InputRole::RngState;
        else userError(loc, "unknown input role '" + v + "'");
      } else if (kk == "fqn") {
        hi.fqn = v;
      } else if (kk == "requires_grad") {
        if (v != "True" && v != "False") userError(loc, "requires_grad must be True or False");
        hi.requiresGrad = v == "True";
      } else {
        userError(loc, "unknown input attribute '" + kk + "'");
      }
    }
    if (!haveRole) userError(loc, "'# aotc: input' line without role=");
    if (!headerInputs_[w[1]].emplace(w[2], hi).second)
      userError(loc, "duplicate '# aotc: input' line for '" + w[2] + "'");
  } else if (key == "num_forward_outputs") {
    need(2);
    prog_.numForwardOutputs = count(w[1], "num_forward_outputs must be");
  } else if (key == "grad_of") {
    for (size_t k = 1; k < w.size(); ++k) gradOfLocs_.push_back({w[k], loc});
  } else if (key == "saved") {
    for (size_t k = 1; k < w.size(); ++k) savedLocs_.push_back({w[k], loc});
  } else if (key == "mutated_input") {
    need(3);
    mutatedLocs_.push_back({{count(w[1], "mutated_input: output index must be"), w[2]}, loc});
  } else if (key == "size") {
    // size <symbol> [dynamic=]<value> <min> <max|inf> [dims]: a size symbol of a dynamic
    // export, given by --specialize or, with dynamic=, a run-time size at its reference value.
    if (w.size() != 5 && w.size() != 6)
      userError(loc, "'# aotc: size' expects <symbol> [dynamic=]<value> <min> <max|inf> [dims]");
    auto num = [&](const std::string &t) {
      char *end = nullptr;
      errno = 0;
      long long v = std::strtoll(t.c_str(), &end, 10);
      if (t.empty() || *end || errno == ERANGE || v < 0) userError(loc, "'# aotc: size': '" + t + "' is not a size");
      return (int64_t)v;
    };
    bool dynamic = w[2].rfind("dynamic=", 0) == 0;
    if (!isSizeSymbolName(w[1])) userError(loc, "'# aotc: size': '" + w[1] + "' is not a symbol name");
    for (const Program::SpecializedSize &o : prog_.specializedSizes)
      if (o.symbol == w[1]) userError(loc, "'# aotc: size': symbol '" + w[1] + "' is declared twice");
    Program::SpecializedSize z{w[1], num(dynamic ? w[2].substr(8) : w[2]), num(w[3]), w[4] == "inf" ? -1 : num(w[4]),
                               w.size() == 6 ? w[5] : "", dynamic};
    if (z.value < z.min || (z.max >= 0 && z.value > z.max))
      userError(loc, "'# aotc: size': " + z.symbol + "=" + std::to_string(z.value) + " is outside its range");
    if (dynamic && z.value != z.max)
      userError(loc, "'# aotc: size': a run-time size's reference value is the maximum of its range (" +
                         std::to_string(z.value) + " given, the range ends at " +
                         (z.max < 0 ? std::string("inf") : std::to_string(z.max)) + ")");
    prog_.specializedSizes.push_back(z);
    if (dynamic) dynamicSymbols_[z.symbol] = z.value;
  } else if (key == "check") {
    // check <expr> : <message>: a condition on run-time sizes (Program::SizeCheck).
    std::string rest = strip(body.substr(body.find("check") + 5));
    size_t colon = rest.find(" : ");
    if (colon == std::string::npos) userError(loc, "'# aotc: check' expects <expression> : <message>");
    Program::SizeCheck c{strip(rest.substr(0, colon)), strip(rest.substr(colon + 3))};
    try {
      SymExpr e = SymExpr::parse(c.expr);
      std::set<std::string> syms;
      e.collectSymbols(syms);
      for (const std::string &sym : syms)
        if (!dynamicSymbols_.count(sym))
          userError(loc, "'# aotc: check': '" + sym + "' is not a run-time size symbol declared by '# aotc: size'");
      if (!e.isBoolean()) userError(loc, "'# aotc: check': '" + c.expr + "' is not a condition");
      if (!e.eval(dynamicSymbols_))
        userError(loc, "'# aotc: check': the reference sizes (every run-time symbol at its maximum) fail " + c.expr);
      c.expr = e.str();
    } catch (const SymExprError &err) {
      userError(loc, "'# aotc: check': '" + c.expr + "': " + err.what());
    }
    prog_.sizeChecks.push_back(c);
  } else {
    userError(loc, "unknown '# aotc:' header key '" + key + "'");
  }
}

/// The 0-based column of `class` in a `class Name(...):` line (preceded by the line start
/// or a blank, as after a log prefix), or -1. Written by hand: libstdc++'s std::regex
/// recursed once per character and overflowed the stack on a long line.
int classHeaderColumn(const std::string &s) {
  auto blank = [](char c) { return std::isspace((unsigned char)c) != 0; };
  size_t end = s.size();
  while (end > 0 && blank(s[end - 1])) --end;
  if (end == 0 || s[end - 1] != ':') return -1;
  --end;
  while (end > 0 && blank(s[end - 1])) --end;
  if (end == 0 || s[end - 1] != ')') return -1;
  const size_t close = end - 1; // the last ')', before the ':'
  for (size_t pos = s.find("class"); pos != std::string::npos; pos = s.find("class", pos + 1)) {
    if (pos > 0 && !blank(s[pos - 1])) continue;
    size_t j = pos + 5;
    if (j >= s.size() || !blank(s[j])) continue;
    while (j < s.size() && blank(s[j])) ++j;
    if (j >= s.size() || !(std::isalpha((unsigned char)s[j]) || s[j] == '_')) continue;
    while (j < s.size() && (std::isalnum((unsigned char)s[j]) || s[j] == '_')) ++j;
    while (j < s.size() && blank(s[j])) ++j;
    if (j < close && s[j] == '(') return (int)pos;
  }
  return -1;
}

/// The output layout the header promises (Graph.h "Contracts between stages").
void Parser::checkStageContract() const {
  SourceLoc loc{file_};
  const std::string &st = prog_.stage;
  size_t nf = prog_.forward.outputs().size(), ng = prog_.gradOf.size();
  auto count = [](size_t n) { return std::to_string(n); };
  if (st == "joint" || st == "lower") {
    // The joint graph's inputs: the primals, then the tangents (docs/stage-joint.md); the
    // partitioner relies on it.
    const Node *tangent = nullptr;
    for (const Node *ph : prog_.forward.placeholders()) {
      if (ph->role == InputRole::Saved)
        userError(loc, "input '" + ph->name + "' of a '" + st + "' program has role=saved (only 'def backward' "
                       "of a 'partition' program reads saved tensors)");
      if (ph->role == InputRole::Tangent) tangent = ph;
      else if (tangent)
        userError(loc, "input '" + ph->name + "' (role=" + roleName(ph->role) + ") comes after the tangent '" +
                           tangent->name + "': a '" + st + "' program takes its primals first, then its tangents");
    }
    if (nf != (size_t)prog_.numForwardOutputs + ng)
      userError(loc, "a '" + st + "' program must return num_forward_outputs (" +
                         count(prog_.numForwardOutputs) + ") + one gradient per grad_of entry (" + count(ng) +
                         ") values; 'def forward' returns " + count(nf));
  }
  if (st == "partition") {
    if (!defsSeen_.count("backward")) userError(loc, "a 'partition' program needs a 'def backward'");
    if (nf != (size_t)prog_.numForwardOutputs + prog_.saved.size())
      userError(loc, "'def forward' of a 'partition' program must return num_forward_outputs (" +
                         count(prog_.numForwardOutputs) + ") + the saved tensors (" + count(prog_.saved.size()) +
                         "); it returns " + count(nf));
    if (prog_.backward.outputs().size() != ng)
      userError(loc, "'def backward' must return one gradient per grad_of entry (" + count(ng) + "); it returns " +
                         count(prog_.backward.outputs().size()));
    for (const std::string &n : prog_.saved) {
      Node *b = prog_.backward.find(n);
      if (!b || !b->isPlaceholder() || b->role != InputRole::Saved)
        userError(loc, "saved tensor '" + n + "' is not a role=saved input of 'def backward'");
    }
  }
}

std::pair<std::string, int64_t> Parser::symbolicSize(const std::string &text, const SourceLoc &loc) const {
  try {
    SymExpr e = SymExpr::parse(text);
    std::set<std::string> syms;
    e.collectSymbols(syms);
    for (const std::string &sym : syms)
      if (!dynamicSymbols_.count(sym))
        userError(loc, "symbolic size '" + text + "': '" + sym + "' is not a run-time size symbol (declare it with "
                       "'# aotc: size " + sym + " dynamic=<max> <min> <max>', docs/formats.md)");
    return {e.str(), e.eval(dynamicSymbols_)};
  } catch (const SymExprError &err) {
    userError(loc, "symbolic size '" + text + "': " + err.what());
  }
}

/// `f32[4, 16]`, `b8[]`, `f32[4, 8][8, 1]cpu`, `f32[s17, 16]` (run-time sizes declared in the
/// header). `Sym(...)` values are rejected.
TensorType Parser::parseAnnotation(const Tok &tok, const std::string &what) {
  const std::string &s = tok.text;
  // The string starts one column after the opening quote; escapes are rare in annotations.
  auto loc = [&](size_t i) { return at(tok.line, tok.col + 1 + (int)i); };
  if (s.rfind("Sym(", 0) == 0)
    userError(loc(0), what + ": symbolic value '" + s + "': dynamic shapes not supported yet");
  size_t i = 0;
  while (i < s.size() && std::isalnum((unsigned char)s[i])) ++i;
  std::string abbr = s.substr(0, i);
  if (i >= s.size() || s[i] != '[') {
    if (i < s.size() && s[i] == '(')
      userError(loc(0), what + ": tensor subclass annotation '" + s + "' is not supported");
    userError(loc(0), what + ": malformed tensor type '" + s + "' (expected e.g. \"f32[4, 16]\")");
  }
  std::optional<DType> dt;
  if (abbr == "f32" || abbr == "f64" || abbr == "i64" || abbr == "b8" || abbr == "i32" || abbr == "u8")
    dt = parseDType(abbr);
  static const std::set<std::string> known = {"bf16", "f16", "f8e4m3fn", "f8e5m2", "f8e4m3fnuz", "f8e5m2fnuz",
                                              "c32",  "c64", "c128",     "i8",     "i16",
                                              "u16", "u32",      "u64",    "b16",        "b1x8"};
  if (!dt) {
    if (abbr == "c64" || abbr == "c128")
      userError(loc(0), what + ": complex dtype '" + abbr + "': aotc reads complex values from a .pt2 (or its "
                                "ExportedProgram JSON) only, not from FX text (docs/complex.md)");
    if (known.count(abbr))
      userError(loc(0), what + ": unsupported dtype '" + abbr +
                                "' (aotc supports f32, f64, i64, b8; i32 and u8 as index inputs)");
    userError(loc(0), what + ": unknown dtype '" + abbr + "' in tensor type '" + s + "'");
  }
  TensorType ty;
  ty.dtype = *dt;
  auto parseList = [&](size_t &p, bool isShape) {
    Shape out;
    ++p; // '['
    while (true) {
      while (p < s.size() && s[p] == ' ') ++p;
      if (p < s.size() && s[p] == ']') { ++p; break; }
      size_t b = p;
      int parens = 0; // a size expression's own commas: Max(1, s17)
      while (p < s.size() && (parens > 0 || (s[p] != ',' && s[p] != ']'))) {
        parens += s[p] == '(' ? 1 : s[p] == ')' ? -1 : 0;
        ++p;
      }
      if (p >= s.size()) userError(loc(b), what + ": unterminated '[' in tensor type '" + s + "'");
      std::string d = strip(s.substr(b, p - b));
      bool digits = !d.empty();
      for (char c : d) digits = digits && std::isdigit((unsigned char)c);
      if (!digits) {
        if (!isShape) userError(loc(b), what + ": malformed stride '" + d + "'");
        if (dynamicSymbols_.empty())
          userError(loc(b), what + ": symbolic dimension '" + d + "' without run-time sizes in the header (a "
                                   "dynamic export: compile its .pt2, docs/dynamic-shapes.md)");
        auto [text, value] = symbolicSize(d, loc(b));
        ty.sym.resize(out.size());
        ty.sym.push_back(text);
        out.push_back(value);
      } else {
        errno = 0;
        out.push_back(std::strtoll(d.c_str(), nullptr, 10));
        if (errno == ERANGE) userError(loc(b), what + ": dimension out of range");
        if (!ty.sym.empty()) ty.sym.push_back("");
      }
      if (s[p] == ',') ++p;
    }
    return out;
  };
  size_t p = i;
  ty.shape = parseList(p, true);
  if (!ty.sym.empty()) ty.sym.resize(ty.shape.size());
  int64_t numel = 1;
  for (int64_t d : ty.shape)
    if (__builtin_mul_overflow(numel, d, &numel))
      userError(loc(0), what + ": tensor type '" + s + "' has more than 2^63 elements");
  if (p < s.size() && s[p] == '[') parseList(p, false); // strides: ignored (aotc is dense row-major)
  if (p < s.size()) {
    std::string dev = s.substr(p);
    bool ok = true;
    for (char c : dev) ok = ok && (std::isalnum((unsigned char)c) || c == ':' || c == '_');
    if (!ok) userError(loc(p), what + ": unexpected '" + dev + "' after the tensor type");
  }
  return ty;
}

} // namespace aotc::parser
