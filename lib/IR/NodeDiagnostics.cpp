//===- NodeDiagnostics.cpp - Diagnostics that name a graph node -------------===//
//
// The node form of the diagnostics engine (include/aotc/Diagnostics.h): the message names
// the node, its target, where it was written and the export's stack_trace. It lives in IR,
// not in Support, because it reads a Node (Support sits below IR).
//===----------------------------------------------------------------------===//
#include "aotc/Graph.h"

#include <cctype>

namespace aotc {

std::string formatNodeDiag(const Node &node, const std::string &severity, const std::string &msg) {
  std::string s = node.loc.str() + ": " + severity + ": node '" + node.name + "'";
  if (!node.target.empty())
    s += " (" + node.target + ")";
  s += ": " + msg;
  if (!node.stackTrace.empty())
    s += "\n  stack_trace: " + node.stackTrace;
  return s;
}

std::string userContext(const Node &node) {
  std::string op = node.userOp;
  if (op.rfind("aten.", 0) == 0) op = op.substr(5);
  if (op.size() > 8 && op.compare(op.size() - 8, 8, ".default") == 0) op.resize(op.size() - 8);
  // "File: /path/model.py:17 in forward, code: ..." -> "model.py:17"
  std::string where, s = traceSummary(node.stackTrace);
  if (s.rfind("File: ", 0) == 0) {
    for (size_t c = s.find(':', 6); c != std::string::npos; c = s.find(':', c + 1)) {
      size_t e = c + 1;
      while (e < s.size() && std::isdigit((unsigned char)s[e])) ++e;
      if (e == c + 1 || s.compare(e, 4, " in ") != 0) continue;
      std::string file = s.substr(6, c - 6);
      where = file.substr(file.find_last_of('/') == std::string::npos ? 0 : file.find_last_of('/') + 1) +
              s.substr(c, e - c);
      break;
    }
  }
  if (op.empty() && where.empty()) return "";
  if (where.empty()) return "in " + op;
  return op.empty() ? "at " + where : "in " + op + " (" + where + ")";
}

void nodeError(const Node &node, const std::string &msg) {
  throw Error(Error::Kind::User, formatNodeDiag(node, "error", msg));
}

} // namespace aotc
