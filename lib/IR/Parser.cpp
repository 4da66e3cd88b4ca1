//===- Parser.cpp - FX graph code / aotc textual IR -> Program --------------===//
//
// Reads what torch.fx's GraphModule.print_readable() and TORCH_LOGS=aot_graphs
// print (see docs/formats.md and torch/fx/graph.py `python_code`), plus aotc's
// `# aotc:` header comments. The grammar handled:
//
//   <anything>                                   (lines before `class` ignored;
//                                                 `# aotc: ...` lines read)
//   class <Name>(torch.nn.Module):
//       def forward(self, <name>: "<annot>", ...):
//           # File: <file>:<line> in <fn>, code: <src>    (stack-trace summary)
//           <name>[: "<annot>"] = torch.ops.<ns>.<op>.<overload>(<args>, <kw> = <v>);  a = b = None
//           <name>[: "<annot>"] = <tuple node>[<int>]                     (getitem)
//           return (<name>, ...)          | return [<name>, ...] | return <name>
//       def backward(self, ...):                    (aotc IR after partition)
//           ...
//
// <annot> is `<dtype>[d0, d1, ...]` with optional `[strides]` and a device
// suffix (`f32[4, 8][8, 1]cpu`). `Sym(...)` and symbolic dims are rejected
// ("dynamic shapes not supported yet"). Each call is built with buildCall
// (defaults filled, types inferred) and its annotation is checked against the
// inferred type. Every error is `file:line:col: error: ...`.
//===----------------------------------------------------------------------===//
#include "ParserImpl.h"

#include "aotc/OpRegistry.h"
#include "aotc/SymExpr.h"
#include "aotc/TextIR.h"

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <cmath>
#include <cstdlib>
#include <map>
#include <optional>
#include <set>
#include <sstream>

namespace aotc {
namespace parser {

const Tok &Parser::expectOp(const char *op, const char *what) {
  const Tok &t = peek();
  if (!isOp(t, op)) fail(t, std::string("expected '") + op + "' " + what + ", found " + describe(t));
  return next();
}

const Tok &Parser::expectName(const char *what) {
  const Tok &t = peek();
  if (t.kind != TK::Name) fail(t, std::string("expected ") + what + ", found " + describe(t));
  return next();
}

std::string Parser::describe(const Tok &t) const {
  switch (t.kind) {
  case TK::Name: return "'" + t.text + "'";
  case TK::Int:
  case TK::Float: return "number " + t.text;
  case TK::Str: return "a string";
  case TK::Op: return "'" + t.text + "'";
  case TK::Comment: return "a comment";
  case TK::Newline: return "end of line";
  case TK::End: return "end of input";
  }
  return "?";
}

void Parser::skipToNewline() {
  while (peek().kind != TK::Newline && peek().kind != TK::End) next();
  if (peek().kind == TK::Newline) next();
}

Program Parser::run() {
  prog_.origin = SourceLoc{file_};
  prog_.stage = "capture";
  // 1. Find the start: a `class X(...):` line (possibly after a log prefix) or a `def forward(`.
  int classLine = -1, classCol = 0;
  for (size_t i = 0; i < lines_.size(); ++i) {
    const std::string &s = lines_[i];
    std::string t = strip(s);
    if (t.rfind("# aotc:", 0) == 0) {
      size_t c = s.find("# aotc:");
      parseHeaderLine(s.substr(c + 7), (int)i + 1, (int)c + 1);
      continue;
    }
    if (int c = classHeaderColumn(s); c >= 0) {
      classLine = (int)i;
      classCol = c;
      break;
    }
    if (t.rfind("def forward(", 0) == 0) {
      classLine = (int)i;
      classCol = indentOf(s);
      break;
    }
  }
  if (classLine < 0)
    userError(SourceLoc{file_}, "no FX graph found: expected a 'class <Name>(torch.nn.Module):' "
                                "line followed by 'def forward(self, ...):'");
  // 2. The block: the class line plus every following line indented at least as much as its
  //    first `def` (or blank). Text after it (e.g. print(ep)'s "Graph signature:") is ignored.
  bool isDefStart = strip(lines_[classLine]).rfind("def ", 0) == 0;
  int blockEnd = classLine + 1;
  int defIndent = isDefStart ? classCol : -1;
  for (int i = classLine + 1; i < (int)lines_.size(); ++i) {
    if (isBlank(lines_[i])) { blockEnd = i + 1; continue; }
    int ind = indentOf(lines_[i]);
    if (defIndent < 0) defIndent = ind;
    if (ind < defIndent || (isDefStart && ind == defIndent && strip(lines_[i]).rfind("def ", 0) != 0))
      break;
    blockEnd = i + 1;
  }
  if (defIndent < 0)
    userError(at(classLine + 1, classCol + 1), "class without a 'def forward(self, ...):' method");
  std::vector<std::string> block(lines_.begin() + (isDefStart ? classLine : classLine + 1),
                                 lines_.begin() + blockEnd);
  int firstLine = isDefStart ? classLine + 1 : classLine + 2;
  if (!isDefStart) {
    // Check the class line itself: `class Name(...):`.
    std::string t = strip(lines_[classLine].substr(classCol));
    size_t p = t.find('(');
    std::string nm = strip(t.substr(6, p - 6));
    bool ok = !nm.empty();
    for (char c : nm) ok = ok && (std::isalnum((unsigned char)c) || c == '_');
    if (!ok) userError(at(classLine + 1, classCol + 1), "malformed class line");
  }
  toks_ = fx::lex(block, firstLine, file_);

  // 3. Defs at defIndent.
  while (peek().kind != TK::End) {
    const Tok &t = peek();
    if (t.kind == TK::Newline) { next(); continue; }
    if (t.kind == TK::Comment) { skipToNewline(); continue; }
    if (t.indent != defIndent)
      fail(t, "unexpected indentation (expected a 'def' at column " + std::to_string(defIndent + 1) + ")");
    if (isName(t, "class"))
      fail(t, "nested GraphModules (subgraphs of higher-order ops) are not supported");
    if (!isName(t, "def")) fail(t, "expected 'def forward(self, ...):', found " + describe(t));
    parseDef(defIndent);
  }
  if (!defsSeen_.count("forward")) userError(SourceLoc{file_}, "no 'def forward' in the graph module");

  // 4. Apply the header to the placeholders.
  for (auto &[gname, m] : headerInputs_) {
    Graph &g = gname == "forward" ? prog_.forward : prog_.backward;
    for (auto &[n, hi] : m) {
      Node *ph = g.find(n);
      if (!ph || !ph->isPlaceholder())
        userError(hi.loc, "'# aotc: input' names '" + n + "', which is not an input of " + gname);
    }
  }
  for (const char *gname : {"forward", "backward"}) {
    Graph &g = std::string(gname) == "forward" ? prog_.forward : prog_.backward;
    auto &m = headerInputs_[gname];
    for (Node *ph : g.placeholders()) {
      auto it = m.find(ph->name);
      auto attr = getAttrs_.find(ph->name);
      if (it != m.end()) {
        ph->role = it->second.role;
        ph->fqn = it->second.fqn;
        ph->requiresGrad = it->second.requiresGrad;
      } else if (attr != getAttrs_.end() && std::string(gname) == "forward") {
        ph->role = InputRole::Constant;
        ph->fqn = attr->second;
        ph->requiresGrad = false;
      } else {
        ph->role = InputRole::UserInput;
        ph->requiresGrad = isFloating(ph->type().dtype);
      }
    }
  }
  for (auto &[n, loc] : gradOfLocs_) {
    Node *ph = prog_.forward.find(n);
    if (!ph || !ph->isPlaceholder()) userError(loc, "grad_of names '" + n + "', which is not a forward input");
    prog_.gradOf.push_back(n);
  }
  for (auto &[n, loc] : savedLocs_) {
    if (!prog_.forward.find(n)) userError(loc, "saved names '" + n + "', which is not a forward node");
    prog_.saved.push_back(n);
  }
  for (auto &[e, loc] : mutatedLocs_) {
    Node *ph = prog_.forward.find(e.second);
    if (!ph || !ph->isPlaceholder())
      userError(loc, "mutated_input names '" + e.second + "', which is not a forward input");
    if (e.first >= (int)prog_.forward.outputs().size())
      userError(loc, "mutated_input: output index " + std::to_string(e.first) + " out of range");
    prog_.mutatedInputs.push_back(e);
  }
  if (prog_.numForwardOutputs > (int)prog_.forward.outputs().size())
    userError(SourceLoc{file_}, "num_forward_outputs is larger than the number of forward outputs");
  checkStageContract();
  return std::move(prog_);
}

void Parser::prescanTargets() {
  struct Group {
    SourceLoc first;
    std::string trace;
    size_t count = 0;
  };
  std::map<std::string, Group> groups;
  std::vector<std::string> order;
  size_t bad = 0;
  DiagnosticList diags;
  std::string trace;
  for (size_t i = 0; i < toks_.size(); ++i) {
    const Tok &t = toks_[i];
    if (isName(t, "def")) trace.clear(); // as parseDef does for curTrace_
    if (t.kind == TK::Comment) {
      if (t.text.rfind("File:", 0) == 0) trace = t.text;
      else if (t.text.rfind("No stacktrace found", 0) == 0) trace.clear();
      continue;
    }
    auto dotName = [&](size_t j) {
      return j + 1 < toks_.size() && isOp(toks_[j], ".") && toks_[j + 1].kind == TK::Name;
    };
    // `c = self.c` without `: "f32[3]"` (a Str before the `=`): no type for the constant
    if (isName(t, "self") && dotName(i + 1) && i > 0 && isOp(toks_[i - 1], "=") &&
        !(i >= 2 && toks_[i - 2].kind == TK::Str)) {
      std::string where = "get_attr 'self." + toks_[i + 2].text + "'";
      std::string msg = where + " (a tensor constant) has no type annotation: FX text carries no values, so its "
                                "dtype and shape must be written as print_readable() does (`c: \"f32[3]\" = self.c`)";
      diags.add(at(t).str() + ": error: " + msg + (trace.empty() ? "" : "\n  stack_trace: " + trace));
      continue;
    }
    if (!isName(t, "torch") || !dotName(i + 1) || toks_[i + 2].text != "ops") continue;
    std::string target;
    size_t j = i + 3;
    for (; dotName(j); j += 2) target += (target.empty() ? "" : ".") + toks_[j + 1].text;
    i = j - 1;
    // A malformed target (no overload, no call) is reported where the statement is read.
    if (j >= toks_.size() || !isOp(toks_[j], "(") || std::count(target.begin(), target.end(), '.') != 2) continue;
    if (OpRegistry::get().lookup(target)) continue;
    ++bad;
    auto [it, fresh] = groups.try_emplace(target, Group{at(t), trace, 0});
    if (fresh) order.push_back(target);
    ++it->second.count;
  }
  for (const std::string &target : order) {
    const Group &g = groups[target];
    std::string uses = g.count == 1 ? "" : " (" + std::to_string(g.count) + " calls; the first is shown)";
    const std::string *why = refusalReason(target);
    diags.add(g.first.str() + ": error: " + (why ? "unsupported" : "unknown") + " op 'torch.ops." + target + "'" +
              (why ? ": " + *why : std::string()) + uses +
              (g.trace.empty() ? "" : "\n  stack_trace: " + g.trace));
  }
  diags.throwIfAny(order.empty() ? "" : unsupportedOpsSummary(order.size(), bad));
}

void Parser::parseDef(int defIndent) {
  next(); // def
  const Tok &nameTok = expectName("a method name after 'def'");
  std::string gname = nameTok.text;
  if (gname != "forward" && gname != "backward")
    fail(nameTok, "unsupported method '" + gname + "' (expected 'forward' or 'backward')");
  if (!defsSeen_.insert(gname).second) fail(nameTok, "duplicate 'def " + gname + "'");
  if (gname == "backward" && !defsSeen_.count("forward"))
    fail(nameTok, "'def backward' must follow 'def forward'");
  curGraphName_ = gname;
  Graph &g = gname == "forward" ? prog_.forward : prog_.backward;
  curTrace_.clear();
  curUserOp_.reset();

  expectOp("(", "after the method name");
  const Tok &selfTok = peek();
  if (!isName(selfTok, "self")) fail(selfTok, "expected 'self' as the first parameter");
  next();
  while (isOp(peek(), ",")) {
    next();
    if (isOp(peek(), ")")) break; // trailing comma
    if (isOp(peek(), "*") || isOp(peek(), "**"))
      fail(peek(), "variadic parameters are not supported (print the graph without pytree codegen)");
    const Tok &pn = expectName("a parameter name");
    if (!isOp(peek(), ":")) {
      bool pytree = false;
      for (const std::string &l : lines_) pytree |= l.find("fx_pytree.tree_flatten_spec") != std::string::npos;
      if (pytree)
        fail(pn, "input '" + pn.text + "' is a pytree (a TORCH_LOGS joint graph `def forward(self, primals, "
                 "tangents)`), which is not supported: use the forward graph or print_readable() output");
      fail(pn, "input '" + pn.text + "' has no type annotation (expected e.g. \"f32[4, 8]\")");
    }
    next();
    const Tok &an = peek();
    if (an.kind != TK::Str)
      fail(an, "input '" + pn.text + "': expected a quoted tensor type such as \"f32[4, 8]\", found " +
                   describe(an));
    next();
    TensorType ty = parseAnnotation(an, "input '" + pn.text + "'");
    if (isOp(peek(), "=")) fail(peek(), "default values of inputs are not supported");
    if (g.find(pn.text)) fail(pn, "duplicate name '" + pn.text + "'");
    Node *ph = g.addPlaceholder(pn.text, ty, InputRole::UserInput);
    ph->loc = at(pn);
  }
  expectOp(")", "to close the parameter list");
  if (isOp(peek(), "->")) {
    while (!isOp(peek(), ":") && peek().kind != TK::Newline && peek().kind != TK::End) next();
  }
  expectOp(":", "at the end of the 'def' line");
  if (peek().kind != TK::Newline) fail(peek(), "unexpected " + describe(peek()) + " after 'def ...:'");
  next();

  bool returned = false;
  int bodyIndent = -1;
  while (true) {
    const Tok &t = peek();
    if (t.kind == TK::End) break;
    if (t.kind == TK::Newline) { next(); continue; }
    if (t.indent <= defIndent) break;
    if (bodyIndent < 0) bodyIndent = t.indent;
    if (t.indent != bodyIndent && t.kind != TK::Comment)
      fail(t, "unexpected indentation (expected column " + std::to_string(bodyIndent + 1) + ")");
    if (returned && t.kind != TK::Comment) fail(t, "statement after 'return'");
    parseStatement(g, returned);
  }
  if (!returned) fail(nameTok, "'def " + gname + "' has no return statement");
}

void Parser::parseStatement(Graph &g, bool &returned) {
  const Tok &t = peek();
  if (t.kind == TK::Comment) {
    const std::string &c = t.text;
    if (c.rfind("File:", 0) == 0) curTrace_ = c;
    else if (c.rfind("No stacktrace found", 0) == 0) curTrace_.clear();
    // Other comments (# Annotation:, # ac_graph_id, ...) are ignored.
    next();
    if (peek().kind == TK::Newline) next();
    return;
  }
  if (isName(t, "return")) {
    parseReturn(g);
    returned = true;
  } else {
    lastNode_ = nullptr;
    parseAssignment(g);
  }
  // `;`-separated tails: `a = b = None` deletions only.
  while (isOp(peek(), ";")) {
    next();
    if (peek().kind == TK::Newline || peek().kind == TK::End) break;
    if (peek().kind == TK::Comment) break;
    while (true) {
      const Tok &n = expectName("a name in the '= None' tail");
      // A dropped check (_assert_tensor_metadata) is deleted like any node: `x = op(...);  x = None`.
      if (!g.find(n.text) && !dropped_.count(n.text)) fail(n, "undefined name '" + n.text + "'");
      expectOp("=", "in the '= None' tail");
      if (isName(peek(), "None")) { next(); break; }
    }
  }
  if (peek().kind == TK::Comment) { // trailing comment; `# op: X` is the printer's Node::userOp
    const std::string &c = peek().text;
    if (c.rfind("op: ", 0) == 0) {
      std::string op = c.substr(4);
      while (!op.empty() && (op.back() == ' ' || op.back() == '\t' || op.back() == '\r')) op.pop_back();
      curUserOp_ = op == "-" ? std::string() : op;
      if (lastNode_) lastNode_->userOp = *curUserOp_;
    }
    next();
  }
  if (peek().kind == TK::Op && peek().text != ";" && peek().text != "," && peek().text != ")" &&
      peek().text != "]")
    fail(peek(), "unsupported Python operator '" + peek().text +
                     "': only torch.ops.<ns>.<op>.<overload>(...) calls and getitem are supported");
  if (peek().kind != TK::Newline && peek().kind != TK::End)
    fail(peek(), "unexpected " + describe(peek()) + " at the end of the statement");
  if (peek().kind == TK::Newline) next();
}

void Parser::parseReturn(Graph &g) {
  next(); // return
  const Tok &t = peek();
  std::vector<PyVal> items;
  if (t.kind == TK::Name && (t.text == "pytree" || (peek(1).kind == TK::Op && peek(1).text == ".")))
    fail(t, "pytree-structured outputs are not supported: print the graph with a flat tuple return");
  if (t.kind == TK::Newline || t.kind == TK::End) fail(t, "'return' without a value");
  PyVal v = parseValue();
  if (v.kind == PyVal::List) items = v.items;
  else items.push_back(v);
  std::vector<Node *> outs;
  for (const PyVal &it : items) {
    if (it.kind != PyVal::Ref) userError(it.loc, std::string("return values must be graph nodes, got ") + kindName(it.kind));
    Node *n = lookupRef(g, it);
    if (tokens_.count(n)) continue; // the effects' last token
    if (n->types.size() != 1)
      userError(it.loc, "returns the tuple-valued node '" + n->name + "'; return its getitem results instead");
    outs.push_back(n);
  }
  g.setOutputs(outs);
  dropTokens(g);
}

Node *Parser::parseEffect(Graph &g, const std::string &name, const SourceLoc &loc) {
  next(); // (
  PyVal tok = parseValue();
  expectOp(",", "after with_effects' token");
  const Tok &o = next();
  std::string op = parseDotted(o);
  if (op != "torch.ops.aten._linalg_check_errors.default")
    fail(o, "the effectful op '" + op + "' (with_effects) is not supported");
  expectOp(",", "after with_effects' operator");
  PyVal info = parseValue();
  while (!isOp(peek(), ")")) { // api name, is_matrix: torch's message details
    if (isOp(peek(), ",")) {
      next();
      continue;
    }
    if (peek().kind == TK::Name && isOp(peek(1), "=")) next(), next();
    parseValue();
  }
  next(); // )
  Node *t = lookupRef(g, tok), *inf = lookupRef(g, info);
  // torch prints the token as an f32[0] placeholder, then each with_effects' new token.
  if (!tokens_.count(t) && !(t->isPlaceholder() && t->types.size() == 1 && t->type().numel() == 0))
    userError(tok.loc, "with_effects: '" + t->name + "' is not an effect token (an empty placeholder or the "
                                                      "result of an earlier with_effects)");
  if (!checkLinalgErrors(inf))
    userError(info.loc, "_linalg_check_errors reads '" + inf->name +
                            "', which is not the info result of a linalg op with check_errors: aotc checks "
                            "LAPACK's info only where the op computes it");
  tokens_.insert(t);
  Node *n = buildCall(g, name, "aten.alias.default", {Arg(t)}, {}, loc, nullptr, {}, SizeInference::Reference);
  tokens_.insert(n);
  return n;
}

void Parser::dropTokens(Graph &g) {
  if (tokens_.empty()) return;
  std::vector<Node *> order;
  for (auto &n : g.nodes())
    if (tokens_.count(n.get())) order.push_back(n.get());
  for (auto it = order.rbegin(); it != order.rend(); ++it) {
    auto users = g.users();
    if (!users[*it].empty())
      userError((*it)->loc, "the effect token '" + (*it)->name + "' is read by '" + users[*it][0]->name +
                                "': tokens only order with_effects calls");
    g.erase(*it);
  }
  tokens_.clear();
}

std::string Parser::parseDotted(const Tok &first) {
  std::string s = first.text;
  while (isOp(peek(), ".") && peek(1).kind == TK::Name) {
    next();
    s += "." + next().text;
  }
  return s;
}

void Parser::parseAssignment(Graph &g) {
  const Tok &lhs = peek();
  if (lhs.kind != TK::Name)
    fail(lhs, "expected a statement 'name = torch.ops...(...)' or 'return', found " + describe(lhs));
  next();
  // Deletion-only statement: `a = b = None`.
  std::optional<TensorType> annot;
  Tok annotTok;
  if (isOp(peek(), ":")) {
    next();
    if (peek().kind != TK::Str)
      fail(peek(), "expected a quoted tensor type annotation such as \"f32[4, 16]\", found " + describe(peek()));
    annotTok = next();
    annot = parseAnnotation(annotTok, "node '" + lhs.text + "'");
  } else if (isOp(peek(), ",")) {
    fail(peek(), "tuple unpacking is not supported (pytree-flattened inputs?): use print_readable() output");
  }
  expectOp("=", "after the assigned name");
  const Tok &r = peek();
  if (isName(r, "None")) {
    next();
    if (!g.find(lhs.text) && !dropped_.count(lhs.text)) fail(lhs, "undefined name '" + lhs.text + "'");
    return;
  }
  if (r.kind == TK::Name && isOp(peek(1), "=")) {
    // a = b = ... = None
    if (!g.find(lhs.text) && !dropped_.count(lhs.text)) fail(lhs, "undefined name '" + lhs.text + "'");
    while (peek().kind == TK::Name && isOp(peek(1), "=")) {
      const Tok &n = next();
      if (!g.find(n.text) && !dropped_.count(n.text)) fail(n, "undefined name '" + n.text + "'");
      next();
    }
    if (!isName(peek(), "None")) fail(peek(), "chained assignment must end with '= None'");
    next();
    return;
  }
  if (g.find(lhs.text)) fail(lhs, "duplicate name '" + lhs.text + "'");
  if (lhs.text == "self" || lhs.text == "torch" || lhs.text == "None")
    fail(lhs, "'" + lhs.text + "' cannot be a node name");
  SourceLoc nodeLoc = at(lhs);
  Node *node = nullptr;
  if (r.kind == TK::Name && isOp(peek(1), "[")) {
    // getitem: `x = tup[0]`
    Node *src = g.find(r.text);
    if (!src) fail(r, "undefined name '" + r.text + "'");
    next();
    next(); // [
    const Tok &idx = peek();
    bool neg = false;
    if (isOp(idx, "-")) { neg = true; next(); }
    const Tok &it = peek();
    if (it.kind != TK::Int) fail(it, "expected an integer index, found " + describe(it));
    next();
    expectOp("]", "after the index");
    int64_t k = std::strtoll(it.text.c_str(), nullptr, 10) * (neg ? -1 : 1);
    if (tokens_.count(src) && k == 0) { // with_effects' new token
      node = buildCall(g, lhs.text, "aten.alias.default", {Arg(src)}, {}, nodeLoc, nullptr, {}, SizeInference::Reference);
      tokens_.insert(node);
    } else if (src->types.size() == 1 && src->op && src->op->schema.returnsList && k == 0) {
      // The only element of a one-element list result (a split into one chunk) is the
      // node's value itself; an alias keeps the getitem's name.
      node = buildCall(g, lhs.text, "aten.alias.default", {Arg(src)}, {}, nodeLoc, nullptr, {}, SizeInference::Reference);
    } else if (src->types.size() < 2)
      fail(r, "'" + src->name + "' is not a tuple-valued node; cannot index it");
    if (!node && (k < 0 || k >= (int64_t)src->types.size()))
      fail(it, "index " + std::to_string(k) + " out of range for '" + src->name + "' with " +
                   std::to_string(src->types.size()) + " results");
    if (!node) node = buildCall(g, lhs.text, "getitem", {Arg(src), Arg(k)}, {}, nodeLoc);
  } else if (isName(r, "self")) {
    // get_attr: a tensor constant of the GraphModule, a constant input whose value the user
    // gives with --constants (docs/formats.md "FX text").
    std::string attr = parseDotted(next());
    if (!annot) {
      prescanTargets(); // this and every other unsupported op and unannotated get_attr, at once
      fail(r, "get_attr '" + attr + "' (a tensor constant) has no type annotation");
    }
    if (attr.rfind("self.", 0) != 0) fail(r, "expected 'self.<attribute>'");
    if (&g != &prog_.forward)
      fail(r, "get_attr '" + attr + "' in 'def backward': tensor constants are inputs of the forward only");
    for (const auto &[other, path] : getAttrs_)
      if (path == attr.substr(5))
        fail(r, "get_attr '" + attr + "' is read twice ('" + other + "' and '" + lhs.text +
                    "'): one constant input per attribute");
    Node *ph = g.addPlaceholder(lhs.text, *annot, InputRole::Constant);
    ph->loc = nodeLoc;
    ph->stackTrace = curTrace_;
    getAttrs_[lhs.text] = attr.substr(5);
    return; // parseStatement checks what follows, as after any statement
  } else if (r.kind == TK::Name) {
    next();
    std::string callee = parseDotted(r);
    if (!isOp(peek(), "(")) {
      const Tok &after = peek();
      if (after.kind == TK::Op && after.text != ";")
        fail(after, "unsupported Python operator '" + after.text +
                        "': only torch.ops.<ns>.<op>.<overload>(...) calls and getitem are supported");
      if (g.find(callee)) fail(r, "aliasing assignment '" + lhs.text + " = " + callee + "' is not supported");
      fail(r, "undefined name '" + callee + "'");
    }
    if (callee == "torch.ops.higher_order.with_effects") {
      node = parseEffect(g, lhs.text, nodeLoc);
      node->stackTrace = curTrace_;
      node->userOp = userOpFor(*node);
      lastNode_ = node;
      return;
    }
    std::string target;
    if (callee.rfind("torch.ops.", 0) == 0) target = callee.substr(10);
    else
      fail(r, "unsupported call target '" + callee + "' (only torch.ops.<ns>.<op>.<overload> calls)");
    if (std::count(target.begin(), target.end(), '.') != 2)
      fail(r, "op target '" + callee + "' must name an overload, e.g. torch.ops.aten.relu.default");
    const OpDef *def = OpRegistry::get().lookup(target);
    if (!def) {
      prescanTargets(); // this and every other unsupported op and get_attr, at once
      fail(r, "unknown op '" + callee + "'");
    }
    next(); // (
    pendingSymArgs_.clear();
    std::vector<PyVal> pos;
    std::vector<std::pair<Tok, PyVal>> kw;
    while (!isOp(peek(), ")")) {
      if (peek().kind == TK::Name && isOp(peek(1), "=")) {
        Tok k = next();
        next();
        for (auto &e : kw)
          if (e.first.text == k.text) fail(k, "keyword argument '" + k.text + "' repeated");
        kw.push_back({k, parseValue()});
      } else {
        if (!kw.empty()) fail(peek(), "positional argument after keyword argument");
        pos.push_back(parseValue());
      }
      if (isOp(peek(), ",")) next();
      else if (!isOp(peek(), ")")) fail(peek(), "expected ',' or ')' in the argument list, found " + describe(peek()));
    }
    next(); // )
    const auto &sargs = def->schema.args;
    std::vector<Arg> args;
    for (size_t i = 0; i < pos.size(); ++i)
      args.push_back(convert(g, pos[i], i < sargs.size() ? &sargs[i] : nullptr, target));
    std::vector<std::pair<std::string, Arg>> kwargs;
    for (auto &[k, v] : kw) {
      const SchemaArg *sa = nullptr;
      for (const auto &s : sargs)
        if (s.name == k.text) sa = &s;
      if (!sa) fail(k, "op '" + target + "' has no argument named '" + k.text + "'");
      kwargs.push_back({k.text, convert(g, v, sa, target)});
    }
    size_t numPositional = 0;
    for (const auto &s : sargs) numPositional += !s.kwargOnly;
    if (pos.size() > numPositional)
      userError(pos[numPositional].loc, "op '" + target + "' takes at most " +
                                            std::to_string(numPositional) + " positional arguments, got " +
                                            std::to_string(pos.size()));
    try {
      node = buildCall(g, lhs.text, target, args, kwargs, nodeLoc, nullptr, {}, SizeInference::Reference);
      for (auto &[argName, exprs] : pendingSymArgs_)
        for (size_t i = 0; i < sargs.size(); ++i)
          if (sargs[i].name == argName) node->setSymArg(i, exprs);
      // A tuple's results that no getitem prints keep the op's own run-time sizes (the
      // annotations below give the others').
      if (node->types.size() > 1)
        if (auto sym = inferSymbolic(*node, node->types))
          for (size_t k = 0; k < node->types.size(); ++k) node->types[k].sym = (*sym)[k];
    } catch (const Error &e) {
      // Errors of argument binding / shape inference: add the statement's stack trace.
      std::string msg = e.what();
      if (e.kind() == Error::Kind::User && !curTrace_.empty() && msg.find("\n  stack_trace: ") == std::string::npos)
        throw Error(e.kind(), msg + "\n  stack_trace: " + curTrace_);
      throw;
    }
  } else {
    fail(r, "unsupported expression: only torch.ops calls and getitem are allowed, found " + describe(r));
  }
  node->loc = nodeLoc;
  node->stackTrace = curTrace_;
  node->userOp = userOpFor(*node);
  lastNode_ = node;
  if (node->types.empty()) { // a check without results (_assert_tensor_metadata): done by its infer
    if (annot) userError(at(annotTok), "node '" + node->name + "' has no result; it cannot have a tensor annotation");
    dropped_.insert(node->name);
    g.erase(node);
    return;
  }
  if (annot) {
    if (node->types.size() != 1)
      userError(at(annotTok), "node '" + node->name + "' returns a tuple; it cannot have a tensor annotation");
    // A run-time size's dim: inference checks its value at the reference sizes, the
    // annotation gives its expression (symbolic shape functions: docs/dynamic-shapes.md).
    if (node->types[0].dtype != annot->dtype || node->types[0].shape != annot->shape)
      nodeError(*node, "annotated type " + annot->str() + " does not match the inferred type " +
                           node->types[0].str());
    checkAnnotatedSizes(*node, *annot);
    node->types[0].sym = annot->sym;
    bool anySym = false;
    for (std::string &e : node->types[0].sym) // one spelling per size, as capture writes it
      if (!e.empty()) {
        SymExpr x = SymExpr::parse(e);
        e = x.hasSymbols() ? x.normalText() : std::string();
        anySym |= !e.empty();
      }
    if (!anySym) node->types[0].sym.clear();
    if (node->isGetitem()) { // the tuple's result gets the expressions too (printed on the getitem only)
      Node *src = node->tensorArg(0);
      int64_t k = node->intArg(1);
      if (k >= 0 && k < (int64_t)src->types.size()) src->types[k].sym = node->types[0].sym;
    }
  }
}

/// Two expressions of one size: the same normal form, or the same values at the ends, the
/// middle and a mix of the run-time sizes' ranges (as capture compares an export's).
static bool sameSize(const std::string &a, const std::string &b, int64_t value, const Program &p) {
  // "": a constant, `value` (the dim's size)
  std::vector<SizeRange> ranges;
  std::map<std::string, int64_t> fixed;
  for (const Program::SpecializedSize &z : p.specializedSizes)
    if (z.dynamic) ranges.push_back({z.symbol, z.min, z.value});
    else fixed[z.symbol] = z.value;
  return aotc::sameSize(SymExpr::ofSize({a}, 0, value), SymExpr::ofSize({b}, 0, value), ranges, fixed);
}

void Parser::checkAnnotatedSizes(const Node &node, const TensorType &annot) const {
  if (!annot.symbolic() && !node.runtimeSized()) return;
  if (node.isGetitem() && !inferSymbolic(*node.tensorArg(0), node.tensorArg(0)->types)) return;
  std::optional<std::vector<std::vector<std::string>>> ours = inferSymbolic(node, node.types);
  if (!ours) return; // no shape function over run-time sizes: the annotation gives them
  std::vector<std::string> want = (*ours)[0], got = annot.sym;
  want.resize(annot.shape.size());
  got.resize(annot.shape.size());
  for (size_t i = 0; i < annot.shape.size(); ++i)
    if (!sameSize(want[i], got[i], annot.shape[i], prog_)) {
      TensorType t(annot.dtype, annot.shape, (*ours)[0]);
      nodeError(node, "annotated type " + annot.str() + ", but from its arguments' run-time sizes the op gives " +
                          t.str());
    }
}

Node *Parser::lookupRef(Graph &g, const PyVal &v) {
  Node *n = g.find(v.s);
  if (!n) userError(v.loc, "undefined name '" + v.s + "'");
  return n;
}

/// A size expression over run-time symbols where a value starts (`s17`, `2*s17 - 1`,
/// `Mod(s17, 2)`): the tokens up to the next ',', ')' or ']' outside parentheses, when they
/// name a run-time symbol and are not a list or tuple.
bool Parser::symbolicSpan(size_t &count, std::string &text) const {
  if (dynamicSymbols_.empty() || isOp(peek(), "[")) return false;
  int depth = 0;
  bool sym = false, tupleComma = false;
  size_t k = 0;
  for (;; ++k) {
    const Tok &t = peek(k);
    if (t.kind == TK::Newline || t.kind == TK::End || t.kind == TK::Comment || pos_ + k + 1 >= toks_.size()) break;
    if (isOp(t, "(") || isOp(t, "[")) ++depth;
    else if (isOp(t, ")") || isOp(t, "]")) {
      if (depth == 0) break;
      --depth;
    } else if (isOp(t, ",")) {
      if (depth == 0) break;
      tupleComma |= depth == 1 && isOp(peek(), "(");
    } else if (t.kind == TK::Name && dynamicSymbols_.count(t.text)) {
      sym = true;
    } else if (t.kind != TK::Int && t.kind != TK::Name && t.kind != TK::Op) {
      return false;
    }
    text += t.text;
  }
  count = k;
  return sym && !tupleComma && k > 0;
}

PyVal Parser::parseValue() {
  const Tok &t = peek();
  PyVal v;
  v.loc = at(t);
  size_t symCount = 0;
  if (std::string text; symbolicSpan(symCount, text)) {
    v.kind = PyVal::Sym;
    std::tie(v.s, v.i) = symbolicSize(text, v.loc);
    for (size_t k = 0; k < symCount; ++k) next();
    return v;
  }
  if (isOp(t, "-")) {
    next();
    const Tok &n = peek();
    if (n.kind == TK::Int) {
      next();
      errno = 0;
      v.kind = PyVal::Int;
      v.i = std::strtoll(("-" + n.text).c_str(), nullptr, 10);
      if (errno == ERANGE) fail(n, "integer literal out of range");
      return v;
    }
    if (n.kind == TK::Float) {
      next();
      v.kind = PyVal::Float;
      v.f = -std::strtod(n.text.c_str(), nullptr);
      return v;
    }
    if (isName(n, "inf")) { next(); v.kind = PyVal::Float; v.f = -INFINITY; return v; }
    fail(n, "expected a number after '-', found " + describe(n));
  }
  if (t.kind == TK::Int) {
    next();
    errno = 0;
    v.kind = PyVal::Int;
    v.i = std::strtoll(t.text.c_str(), nullptr, 10);
    if (errno == ERANGE) fail(t, "integer literal out of range");
    return v;
  }
  if (t.kind == TK::Float) {
    next();
    v.kind = PyVal::Float;
    v.f = std::strtod(t.text.c_str(), nullptr);
    return v;
  }
  if (t.kind == TK::Str) {
    next();
    v.kind = PyVal::Str;
    v.s = t.text;
    return v;
  }
  if (isOp(t, "[") || isOp(t, "(")) {
    std::string close = t.text == "[" ? "]" : ")";
    // Lists nest through recursion: bounded, so a hostile file cannot overflow the stack.
    static constexpr int kMaxNesting = 64;
    if (depth_ >= kMaxNesting) fail(t, "lists nested deeper than " + std::to_string(kMaxNesting) + " levels");
    struct Deeper {
      int &d;
      explicit Deeper(int &x) : d(++x) {}
      ~Deeper() { --d; }
    } deeper(depth_);
    next();
    v.kind = PyVal::List;
    bool comma = false;
    while (!isOp(peek(), close.c_str())) {
      v.items.push_back(parseValue());
      if (isOp(peek(), ",")) { next(); comma = true; }
      else if (!isOp(peek(), close.c_str()))
        fail(peek(), "expected ',' or '" + close + "', found " + describe(peek()));
    }
    next();
    if (close == ")" && v.items.size() == 1 && !comma) return v.items[0]; // parenthesized value
    return v;
  }
  if (t.kind == TK::Name) {
    next();
    if (t.text == "None") { v.kind = PyVal::None; return v; }
    if (t.text == "True" || t.text == "False") { v.kind = PyVal::Bool; v.b = t.text == "True"; return v; }
    if (t.text == "inf") { v.kind = PyVal::Float; v.f = INFINITY; return v; }
    if (t.text == "nan") { v.kind = PyVal::Float; v.f = NAN; return v; }
    if (t.text == "device" && isOp(peek(), "(")) {
      next();
      std::string type;
      std::optional<int64_t> index;
      while (!isOp(peek(), ")")) {
        std::string key = "type";
        if (peek().kind == TK::Name && isOp(peek(1), "=")) { key = next().text; next(); }
        const Tok &a = peek();
        if (key == "type" && a.kind == TK::Str) { type = a.text; next(); }
        else if (key == "index" && a.kind == TK::Int) { index = std::strtoll(a.text.c_str(), nullptr, 10); next(); }
        else fail(a, "malformed device(...) literal");
        if (isOp(peek(), ",")) next();
      }
      next();
      v.kind = PyVal::Enum;
      v.s = "device(type='" + type + "'" + (index ? ", index=" + std::to_string(*index) : "") + ")";
      return v;
    }
    if (t.text == "torch" && isOp(peek(), ".")) {
      std::string d = parseDotted(t);
      if (auto dt = parseDType(d); dt && d.rfind("torch.", 0) == 0) {
        v.kind = PyVal::DType_;
        v.dt = *dt;
        return v;
      }
      static const std::set<std::string> enums = {
          "torch.strided", "torch.sparse_coo", "torch.contiguous_format", "torch.preserve_format",
          "torch.channels_last", "torch.channels_last_3d"};
      if (enums.count(d)) { v.kind = PyVal::Enum; v.s = d; return v; }
      static const std::set<std::string> otherDtypes = {
          "torch.float16", "torch.half", "torch.bfloat16", "torch.int16",
          "torch.short", "torch.int8", "torch.complex64", "torch.complex128",
          "torch.cfloat", "torch.cdouble", "torch.uint16", "torch.uint32", "torch.uint64",
          "torch.float8_e4m3fn", "torch.float8_e5m2"};
      if (otherDtypes.count(d))
        userError(v.loc, "unsupported dtype '" + d + "' (aotc supports float32, float64, int64, bool; "
                                                      "int32 and uint8 as index inputs)");
      userError(v.loc, "unsupported value '" + d + "'");
    }
    if (isOp(peek(), ".") || isOp(peek(), "(") || isOp(peek(), "["))
      fail(peek(), "unsupported expression after '" + t.text + "': arguments must be names or literals");
    v.kind = PyVal::Ref;
    v.s = t.text;
    return v;
  }
  fail(t, "expected a value, found " + describe(t));
}

/// Converts a Python value for schema argument `sa`. Tensor arguments resolve
/// names here (located errors); the representation of other literals is
/// coerced by buildCall (int -> float, int -> int[N], typed empty lists, ...).
Arg Parser::convert(Graph &g, const PyVal &v, const SchemaArg *sa, const std::string &target) {
  if (!sa) return convertGeneric(g, v);
  const std::string &ty = sa->type;
  auto expects = [&](const PyVal &x, const char *what) {
    userError(x.loc, "argument '" + sa->name + "' of " + target + " expects " + what + ", got " + kindName(x.kind));
  };
  if (v.kind == PyVal::None) return std::monostate{};
  if (ty == "Tensor" && (v.kind == PyVal::Str || v.kind == PyVal::List || v.kind == PyVal::DType_ || v.kind == PyVal::Enum))
    expects(v, "a tensor");
  if ((ty == "Tensor[]" || ty == "Tensor?[]") && v.kind != PyVal::List) expects(v, "a list of tensors");
  bool intLike = ty == "int" || ty == "SymInt" || ty == "int[]" || ty == "SymInt[]" || ty == "Scalar";
  if (v.kind == PyVal::Sym && !intLike && ty != "Tensor") expects(v, (ty + (sa->optional ? "?" : "")).c_str());
  if (v.kind == PyVal::Sym && ty == "Tensor") pendingSymArgs_.push_back({sa->name, {v.s}}); // a wrapped number
  if (intLike) {
    // Run-time size expressions: the node's symArgs (attached after buildCall).
    std::vector<std::string> exprs;
    bool any = v.kind == PyVal::Sym;
    if (any) exprs.push_back(v.s);
    for (const PyVal &e : v.items) {
      exprs.push_back(e.kind == PyVal::Sym ? e.s : "");
      any |= e.kind == PyVal::Sym;
    }
    if (any) pendingSymArgs_.push_back({sa->name, exprs});
    // A node where an int is expected is a SymInt value: dynamic shapes.
    std::vector<const PyVal *> vals = {&v};
    for (const PyVal &e : v.items) vals.push_back(&e);
    for (const PyVal *x : vals)
      if (x->kind == PyVal::Ref)
        userError(x->loc, "symbolic integer '" + x->s + "': dynamic shapes not supported yet");
  }
  if (v.kind == PyVal::Ref && ty != "Tensor") expects(v, (ty + (sa->optional ? "?" : "")).c_str());
  return convertGeneric(g, v);
}

Arg Parser::convertGeneric(Graph &g, const PyVal &v) {
  switch (v.kind) {
  case PyVal::None: return std::monostate{};
  case PyVal::Bool: return v.b;
  case PyVal::Int:
  case PyVal::Sym: return v.i;
  case PyVal::Float: return v.f;
  case PyVal::Str: return v.s;
  case PyVal::Ref: return lookupRef(g, v);
  case PyVal::DType_: return DTypeLit{v.dt};
  case PyVal::Enum: return EnumLit{v.s};
  case PyVal::List: {
    bool allInt = true, allNum = true, allBool = true, allRef = true;
    for (const PyVal &e : v.items) {
      allInt &= e.kind == PyVal::Int || e.kind == PyVal::Sym;
      allNum &= e.kind == PyVal::Int || e.kind == PyVal::Float;
      allBool &= e.kind == PyVal::Bool;
      allRef &= e.kind == PyVal::Ref || e.kind == PyVal::None;
    }
    if (allInt) {
      std::vector<int64_t> r;
      for (const PyVal &e : v.items) r.push_back(e.i);
      return r;
    }
    if (allNum) {
      std::vector<double> r;
      for (const PyVal &e : v.items) r.push_back(e.kind == PyVal::Int ? (double)e.i : e.f);
      return r;
    }
    if (allBool) {
      std::vector<bool> r;
      for (const PyVal &e : v.items) r.push_back(e.b);
      return r;
    }
    if (allRef) {
      std::vector<Node *> r;
      for (const PyVal &e : v.items) r.push_back(e.kind == PyVal::None ? nullptr : lookupRef(g, e));
      return r;
    }
    userError(v.loc, "unsupported mixed list literal");
  }
  }
  userError(v.loc, "unsupported value");
}

} // namespace parser

using parser::strip;

bool looksLikeFxText(const std::string &text) {
  size_t p = 0;
  while (p < text.size()) {
    size_t e = text.find('\n', p);
    if (e == std::string::npos) e = text.size();
    std::string line = strip(text.substr(p, e - p));
    if (line.rfind("def forward(", 0) == 0) return true;
    p = e + 1;
  }
  return false;
}

Program parseProgram(const std::string &text, const std::string &filename) {
  return parser::Parser(text, filename).run();
}

} // namespace aotc
