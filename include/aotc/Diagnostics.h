//===- Diagnostics.h - The one diagnostics engine of aotc -------*- C++ -*-===//
//
// Every error aotc reports goes through this file. Two kinds exist:
//  * user errors (bad input, bad flags): exit code 1;
//  * internal errors (a compiler bug, a broken invariant): exit code 2.
// Errors are C++ exceptions of type aotc::Error, thrown by the helpers below and
// caught once in tools/aotc/main.cpp, which prints Error::what() and exits with
// Error::exitCode().
//
// Message formats (LLVM/MLIR style):
//   <file>:<line>:<col>: error: <message>          (textual inputs)
//   <file>: error: <message>                        (no position known)
//   <where>: error: node '<name>' (<target>): <message>
//     stack_trace: <the node's FX stack_trace, if any>
//===----------------------------------------------------------------------===//
#pragma once

#include <stdexcept>
#include <string>
#include <vector>

namespace aotc {

/// A position in a user's file. line/col are 1-based; 0 means "unknown".
struct SourceLoc {
  std::string file; ///< Path as the user gave it, or an archive member ("mlp.pt2:models/model.json").
  int line = 0;
  int col = 0;
  std::string str() const; ///< "file:line:col", "file:line", or "file".
};

/// The exception every diagnostic is carried by.
class Error : public std::runtime_error {
public:
  enum class Kind { User, Internal };
  Error(Kind kind, std::string message) : std::runtime_error(std::move(message)), kind_(kind) {}
  Kind kind() const { return kind_; }
  /// 1 for user errors, 2 for internal errors.
  int exitCode() const { return kind_ == Kind::User ? 1 : 2; }

private:
  Kind kind_;
};

/// Throws a user error "<loc>: error: <msg>".
[[noreturn]] void userError(const SourceLoc &loc, const std::string &msg);
/// Throws a user error "error: <msg>" (no location: flags, files that cannot be opened).
[[noreturn]] void userError(const std::string &msg);
/// Throws an internal error "internal error: <msg>" (exit code 2).
[[noreturn]] void internalError(const std::string &msg);
/// Prints "warning: <msg>" to stderr and continues (compilation still succeeds).
void warning(const std::string &msg);

/// Collects user errors so that a stage reports every problem it can find before stopping
/// (capture: every unsupported op at once). Messages are complete diagnostics, one per entry.
class DiagnosticList {
public:
  /// Adds "<loc>: error: <msg>".
  void error(const SourceLoc &loc, const std::string &msg);
  /// Adds an already formatted diagnostic (formatNodeDiag of Graph.h, ...).
  void add(std::string diagnostic) { diags_.push_back(std::move(diagnostic)); }
  bool empty() const { return diags_.empty(); }
  size_t size() const { return diags_.size(); }
  /// When any error was added: throws one user error holding every diagnostic in the order
  /// added, one per line, then `summary` (when not empty) as a last "error: <summary>" line.
  void throwIfAny(const std::string &summary = "") const;

private:
  std::vector<std::string> diags_;
};

/// The last line of capture's all-unsupported-ops report (DiagnosticList::throwIfAny's summary):
/// "2 unsupported ops in 3 nodes (docs/ops.md lists the ops aotc reads)".
std::string unsupportedOpsSummary(size_t ops, size_t nodes);

/// Checks an internal invariant; on failure throws internalError with the message.
#define AOTC_ASSERT(cond, msg)                                                                     \
  do {                                                                                             \
    if (!(cond))                                                                                   \
      ::aotc::internalError(std::string(__FILE__ ":") + std::to_string(__LINE__) + ": " + (msg)); \
  } while (0)

} // namespace aotc
