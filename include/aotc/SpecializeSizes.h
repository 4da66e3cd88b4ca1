//===- SpecializeSizes.h - A program with run-time sizes at given sizes -*- C++ -*-===//
//
// A captured program with run-time sizes (a dynamic export, docs/dynamic-shapes.md) keeps
// each symbolic dim's expression in its types (TensorType::sym), each size argument's in
// Node::symArgs, and the export's checks in Program::sizeChecks. specializeSizes gives some
// of its run-time symbols a value: every expression is evaluated there, every check over
// them is evaluated (a failing one is the export's assertion error), and every node's types
// are inferred again at those sizes and compared with the evaluated expressions, so a wrong
// or missing expression is found (a user error naming the node). With every symbol given, the
// result is the program `--specialize` captures from the export itself.
// lib/IR/SpecializeSizes.cpp; `aotc --specialize` with --start-from=capture ... partition
// runs it (a partitioned program: both graphs).
//===----------------------------------------------------------------------===//
#pragma once

#include "aotc/Graph.h"

#include <string>
#include <vector>

namespace aotc {

/// Gives run-time symbols of `p` (stage capture to partition) a value: each entry is "SYMBOL=N" or
/// "INPUT:DIM=N" (a user input and a dimension whose size is one run-time symbol). User
/// errors, all entries checked at once: a malformed entry, a symbol that is not a run-time
/// symbol of p, an unknown input or a dim that is not one symbol, a value outside the range,
/// two values for one symbol; then a failing check, and a node whose type at these sizes is
/// not what inference gives.
void specializeSizes(Program &p, const std::vector<std::string> &entries);

} // namespace aotc
