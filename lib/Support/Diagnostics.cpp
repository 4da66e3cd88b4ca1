//===- Diagnostics.cpp - Formatting and throwing diagnostics ----------------===//
#include "aotc/Diagnostics.h"

#include <iostream>

namespace aotc {

std::string SourceLoc::str() const {
  std::string s = file.empty() ? std::string("<input>") : file;
  if (line > 0) {
    s += ":" + std::to_string(line);
    if (col > 0)
      s += ":" + std::to_string(col);
  }
  return s;
}

void userError(const SourceLoc &loc, const std::string &msg) {
  throw Error(Error::Kind::User, loc.str() + ": error: " + msg);
}

void userError(const std::string &msg) { throw Error(Error::Kind::User, "error: " + msg); }

void internalError(const std::string &msg) {
  throw Error(Error::Kind::Internal, "internal error: " + msg);
}

void DiagnosticList::error(const SourceLoc &loc, const std::string &msg) {
  diags_.push_back(loc.str() + ": error: " + msg);
}

void DiagnosticList::throwIfAny(const std::string &summary) const {
  if (diags_.empty()) return;
  std::string all;
  for (const std::string &d : diags_) all += (all.empty() ? "" : "\n") + d;
  if (!summary.empty()) all += "\nerror: " + summary;
  throw Error(Error::Kind::User, all);
}

std::string unsupportedOpsSummary(size_t ops, size_t nodes) {
  return std::to_string(ops) + " unsupported op" + (ops == 1 ? "" : "s") + " in " + std::to_string(nodes) +
         " node" + (nodes == 1 ? "" : "s") + " (docs/ops.md lists the ops aotc reads)";
}

void warning(const std::string &msg) { std::cerr << "warning: " << msg << "\n"; }

} // namespace aotc
