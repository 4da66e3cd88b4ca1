//===- NodeDiagnostics.cpp - Diagnostics that name a graph node -------------===//
//
// The node form of the diagnostics engine (include/aotc/Diagnostics.h): the message names
// the node, its target, where it was written and the export's stack_trace. It lives in IR,
// not in Support, because it reads a Node (Support sits below IR).
//===----------------------------------------------------------------------===//
#include "aotc/Graph.h"

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

void nodeError(const Node &node, const std::string &msg) {
  throw Error(Error::Kind::User, formatNodeDiag(node, "error", msg));
}

} // namespace aotc
