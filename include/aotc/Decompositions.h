//===- Decompositions.h - The decompose and lower tables, the primitive set -*- C++ -*-===//
//
// Stage 3 (decompose, before autodiff) and stage 5a (lower, after autodiff) are
// tables of rewrite rules (lib/Decompose/Decompose.cpp, lib/Decompose/Lower*.cpp):
// one entry per op target, each a small function that emits simpler ops.
// The entry points are decompose() and lower() in Stages.h; this header exposes
// the tables for documentation and tests, and the primitive set that lower()
// guarantees (the only targets codegen ever sees).
//===----------------------------------------------------------------------===//
#pragma once

#include <string>
#include <utility>
#include <vector>

namespace aotc {

/// The decompose table: (target, one-line summary of its rule), in table order.
std::vector<std::pair<std::string, std::string>> decomposeTable();

/// The lower table: (target, one-line summary of its rule), in table order.
std::vector<std::pair<std::string, std::string>> lowerTable();

/// The targets allowed after lower(): the registered ops whose OpDef says `primitive`
/// (pointwise ops, reductions, views, matmuls, convolutions, index ops, factories, philox)
/// and getitem. Sorted. Read from the registry; not a list of its own.
const std::vector<std::string> &primitiveTargets();

/// True when `target` (canonical, e.g. "aten.add.Tensor") is a primitive.
bool isPrimitive(const std::string &target);

} // namespace aotc
