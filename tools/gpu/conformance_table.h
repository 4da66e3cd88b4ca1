//===- conformance_table.h - The programs linked into conformance_cuda --*- C++ -*-===//
//
// build-gpu/conformance/programs.cpp (written by tools/gpu/conformance_gpu.py prepare)
// defines the table: one entry per compiled conformance sample, in sample order.
//===----------------------------------------------------------------------===//
#pragma once

#include "aotc/cuda.h"

namespace aotc_gpu {

struct ConformanceEntry {
  const char *name;              ///< The object's --name (c0000, c0001, ...).
  const aotc_cuda_program *prog; ///< <name>_program.
};
extern const ConformanceEntry kConformance[];
extern const int kConformanceCount;

} // namespace aotc_gpu
