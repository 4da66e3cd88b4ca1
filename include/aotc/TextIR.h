//===- TextIR.h - aotc's textual IR: FX graph code ---------------*- C++ -*-===//
//
// aotc's textual IR *is* FX graph-code text, as printed by
// GraphModule.print_readable() and TORCH_LOGS=aot_graphs, plus `# aotc:` header
// comments carrying what plain FX text cannot (stage, roles, requires_grad,
// FQNs, saved list, grad mapping). See docs/formats.md for the grammar.
//   print -> parse -> print is byte-identical for every stage.
//===----------------------------------------------------------------------===//
#pragma once

#include "aotc/Graph.h"

#include <string>

namespace aotc {

/// Prints a Program (one graph, or forward+backward after partition).
std::string printProgram(const Program &p);
/// One graph as a `    def <fn>(self, ...):` method of FX code (no `# aotc:` header): the
/// optimizer stage's graphs (Optimizer.h).
std::string printGraphCode(const Graph &g, const std::string &fn);

/// Parses FX graph-code text or aotc's textual IR. `filename` is used in
/// diagnostics ("file:line:col: error: ..."). Plain FX text (no `# aotc:`
/// header) yields stage "capture" with every floating placeholder requiring grad.
Program parseProgram(const std::string &text, const std::string &filename);

/// True when `text` looks like FX graph code (a `def forward(` line).
bool looksLikeFxText(const std::string &text);

} // namespace aotc
