//===- Printer.cpp - Program -> FX graph code with `# aotc:` headers ---------===//
//
// Prints the textual IR described in docs/formats.md: a `# aotc:` header, then
// FX graph code in GraphModule.print_readable() style (torch/fx/graph.py
// `python_code(verbose=True)`):
//   * one `def` per graph (`forward`, then `backward` after partition);
//   * `name: "f32[4, 16]" = torch.ops.aten.mm.default(a, b)`; arguments equal to
//     their schema default are omitted, trailing positional ones first, and
//     keyword-only arguments are printed `key = value` (as FX does);
//   * no `;  a = None` deletion tails (the parser accepts them);
//   * a `# File: ...` summary comment, preceded by a blank line, whenever the
//     stack-trace summary changes, `# No stacktrace found for following nodes`
//     when it becomes empty (FX's rule).
// The output is deterministic, and parseProgram(printProgram(p)) prints back
// byte-identically.
//===----------------------------------------------------------------------===//
#include "aotc/OpRegistry.h"
#include "aotc/TextIR.h"

#include <optional>
#include <sstream>

namespace aotc {
namespace {

/// Python repr of a str (single quotes unless the text has ' and no ").
std::string pyStr(const std::string &s) {
  char q = (s.find('\'') != std::string::npos && s.find('"') == std::string::npos) ? '"' : '\'';
  std::string r(1, q);
  for (char c : s) {
    switch (c) {
    case '\\': r += "\\\\"; break;
    case '\n': r += "\\n"; break;
    case '\t': r += "\\t"; break;
    case '\r': r += "\\r"; break;
    case '\0': r += "\\0"; break;
    default:
      if (c == q) r += '\\';
      r += c;
    }
  }
  return r + q;
}

std::string pyArg(const Arg &a) {
  if (auto *s = std::get_if<std::string>(&a)) return pyStr(*s);
  if (auto *n = std::get_if<Node *>(&a)) return *n ? (*n)->name : "None";
  return argStr(a);
}

} // namespace

/// The one-line summary FX prints for a stack trace:
/// "File: <file>:<line> in <fn>, code: <code>" from the last frame of a
/// Python traceback. A trace that already is a summary is returned unchanged,
/// so printing is idempotent through parse.
///
/// A Python traceback frame line, `  File "<file>", line <N>, in <fn>` (the file being the
/// longest prefix that fits, as a greedy regex would take it). Written by hand: libstdc++'s
/// std::regex recurses once per character and overflowed the stack on a long
/// stack_trace line from a user's file.
bool matchTraceFrame(const std::string &l, std::string &file, std::string &line, std::string &fn) {
  size_t b = l.find_first_not_of(" \t\n\r\f\v");
  if (b == std::string::npos || l.compare(b, 6, "File \"") != 0) return false;
  const size_t f0 = b + 6;
  static const std::string sep = "\", line ";
  for (size_t q = l.rfind(sep); q != std::string::npos && q > f0; q = q ? l.rfind(sep, q - 1) : std::string::npos) {
    size_t d = q + sep.size(), e = d;
    while (e < l.size() && std::isdigit((unsigned char)l[e])) ++e;
    if (e == d || l.compare(e, 5, ", in ") != 0) continue;
    size_t r = e + 5;
    if (r >= l.size()) continue;
    size_t last = l.find_last_not_of(" \t\n\r\f\v");
    file = l.substr(f0, q - f0);
    line = l.substr(d, e - d);
    fn = last == std::string::npos || last < r ? l.substr(r, 1) : l.substr(r, last - r + 1);
    return true;
  }
  return false;
}

std::string traceSummary(const std::string &st) {
  if (st.empty()) return "";
  std::vector<std::string> lines;
  {
    std::istringstream in(st);
    for (std::string l; std::getline(in, l);) lines.push_back(l);
  }
  auto strip = [](const std::string &s) {
    size_t b = s.find_first_not_of(" \t\r");
    if (b == std::string::npos) return std::string();
    return s.substr(b, s.find_last_not_of(" \t\r") - b + 1);
  };
  for (size_t i = lines.size(); i-- > 0;) {
    std::string file, line, fn;
    if (matchTraceFrame(lines[i], file, line, fn)) {
      std::string code = i + 1 < lines.size() ? strip(lines[i + 1]) : "";
      // Trailing blanks are stripped so that the parsed comment prints back identically.
      return strip("File: " + file + ":" + line + " in " + fn + ", code: " + code);
    }
  }
  for (const std::string &l : lines) {
    std::string t = strip(l);
    if (t.empty()) continue;
    return t.rfind("File:", 0) == 0 ? t : "File: " + t;
  }
  return "";
}

namespace {

/// Argument i of n: its run-time size expressions where it has them (Node::symArgs).
std::string nodeArg(const Node &n, size_t i) {
  const std::vector<std::string> *e = n.symArg(i);
  if (!e) return pyArg(n.args[i]);
  auto elem = [&](size_t k, int64_t v) { return k < e->size() && !(*e)[k].empty() ? (*e)[k] : std::to_string(v); };
  if (auto *v = std::get_if<int64_t>(&n.args[i])) return elem(0, *v);
  if (auto *l = std::get_if<std::vector<int64_t>>(&n.args[i])) {
    std::string s = "[";
    for (size_t k = 0; k < l->size(); ++k) s += (k ? ", " : "") + elem(k, (*l)[k]);
    return s + "]";
  }
  return pyArg(n.args[i]);
}

std::string callArgs(const Node &n) {
  std::vector<std::string> parts;
  const OpDef *op = n.op;
  if (!op || op->schema.args.size() != n.args.size()) {
    for (size_t i = 0; i < n.args.size(); ++i) parts.push_back(nodeArg(n, i));
  } else {
    const auto &sargs = op->schema.args;
    auto isDefault = [&](size_t i) {
      return sargs[i].hasDefault && sargs[i].defaultValue == n.args[i] && !n.symArg(i);
    };
    int lastPos = -1;
    for (size_t i = 0; i < sargs.size(); ++i)
      if (!sargs[i].kwargOnly && !isDefault(i)) lastPos = (int)i;
    for (int i = 0; i <= lastPos; ++i)
      if (!sargs[i].kwargOnly) parts.push_back(nodeArg(n, i));
    for (size_t i = 0; i < sargs.size(); ++i)
      if (sargs[i].kwargOnly && !isDefault(i)) parts.push_back(sargs[i].name + " = " + nodeArg(n, i));
  }
  std::string s;
  for (size_t i = 0; i < parts.size(); ++i) s += (i ? ", " : "") + parts[i];
  return s;
}

void printGraph(std::ostringstream &out, const char *fn, const Graph &g) {
  const std::string ind = "        ";
  out << "    def " << fn << "(self";
  for (Node *ph : g.placeholders()) out << ", " << ph->name << ": \"" << ph->type().str() << "\"";
  out << "):\n";
  std::optional<std::string> prevTrace;
  // Node::userOp as a trailing `# op: X` where it differs from what the parser would give the
  // node (the last such comment's op, else the node's own target), so --start-from keeps it.
  std::optional<std::string> curOp;
  for (const auto &up : g.nodes()) {
    const Node &n = *up;
    if (!n.isCall()) continue;
    std::string tr = traceSummary(n.stackTrace);
    if (!prevTrace || tr != *prevTrace) {
      if (!tr.empty()) out << "\n" << ind << "# " << tr << "\n";
      else if (!prevTrace || !prevTrace->empty())
        out << "\n" << ind << "# No stacktrace found for following nodes\n";
      prevTrace = tr;
    }
    out << ind << n.name;
    if (n.types.size() == 1) out << ": \"" << n.types[0].str() << "\"";
    out << " = ";
    if (n.isGetitem()) {
      out << pyArg(n.args.at(0)) << "[" << pyArg(n.args.at(1)) << "]";
    } else {
      out << "torch.ops." << n.target << "(" << callArgs(n) << ")";
    }
    std::string expect = curOp ? *curOp : textDefaultUserOp(n);
    if (n.userOp != expect) {
      out << "  # op: " << (n.userOp.empty() ? "-" : n.userOp);
      curOp = n.userOp;
    }
    out << "\n";
  }
  std::vector<Node *> outs = g.outputs();
  out << ind << "return (";
  for (size_t i = 0; i < outs.size(); ++i) out << (i ? ", " : "") << outs[i]->name;
  if (outs.size() == 1) out << ",";
  out << ")\n";
}

void printInputs(std::ostringstream &out, const char *gname, const Graph &g) {
  for (Node *ph : g.placeholders()) {
    out << "# aotc: input " << gname << " " << ph->name << " role=" << roleName(ph->role);
    if (!ph->fqn.empty()) out << " fqn=" << ph->fqn;
    out << " requires_grad=" << (ph->requiresGrad ? "True" : "False") << "\n";
  }
}

} // namespace

std::string printGraphCode(const Graph &g, const std::string &fn) {
  std::ostringstream out;
  printGraph(out, fn.c_str(), g);
  return out.str();
}

std::string printProgram(const Program &p) {
  std::ostringstream out;
  bool hasBackward = !p.backward.nodes().empty();
  out << "# aotc: stage " << (p.stage.empty() ? "capture" : p.stage) << "\n";
  if (!p.name.empty()) out << "# aotc: name " << p.name << "\n";
  printInputs(out, "forward", p.forward);
  if (hasBackward) printInputs(out, "backward", p.backward);
  if (p.numForwardOutputs) out << "# aotc: num_forward_outputs " << p.numForwardOutputs << "\n";
  if (!p.gradOf.empty()) {
    out << "# aotc: grad_of";
    for (const auto &n : p.gradOf) out << " " << n;
    out << "\n";
  }
  if (!p.saved.empty()) {
    out << "# aotc: saved";
    for (const auto &n : p.saved) out << " " << n;
    out << "\n";
  }
  for (const auto &[idx, name] : p.mutatedInputs) out << "# aotc: mutated_input " << idx << " " << name << "\n";
  for (const Program::SpecializedSize &s : p.specializedSizes)
    out << "# aotc: size " << s.symbol << " " << (s.dynamic ? "dynamic=" : "") << s.value << " " << s.min << " "
        << (s.max < 0 ? "inf" : std::to_string(s.max)) << (s.dims.empty() ? "" : " " + s.dims) << "\n";
  for (const Program::SizeCheck &c : p.sizeChecks) out << "# aotc: check " << c.expr << " : " << c.message << "\n";
  out << "class GraphModule(torch.nn.Module):\n";
  printGraph(out, "forward", p.forward);
  if (hasBackward) {
    out << "\n";
    printGraph(out, "backward", p.backward);
  }
  return out.str();
}

} // namespace aotc
