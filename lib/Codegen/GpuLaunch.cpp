//===- GpuLaunch.cpp - How the CUDA target maps a kernel onto threads ---------===//
//
// MLIR-free, so --emit=kernels can print the launch geometry. See Codegen.h
// (GpuLaunch) and GpuGen.cpp (the kernels built for each mapping).
//===----------------------------------------------------------------------===//
#include "aotc/Codegen.h"

#include <algorithm>

namespace aotc {

const char *gpuMappingName(GpuMapping m) {
  switch (m) {
  case GpuMapping::Elementwise: return "elementwise";
  case GpuMapping::WarpPerRow: return "warp-per-row";
  case GpuMapping::ThreadPerRow: return "thread-per-row";
  }
  return "?";
}

namespace {

int64_t prod(const Shape &s) {
  int64_t n = 1;
  for (int64_t d : s) n *= d;
  return n;
}

} // namespace

GpuLaunch gpuLaunch(const Kernel &k) {
  GpuLaunch l;
  bool reduces = false, accumulates = false;
  for (auto &p : k.phases) {
    reduces |= !p.reductions.empty();
    for (auto &s : p.stores) accumulates |= s.accumulate;
  }
  int64_t outer = prod(k.outer);
  if (reduces) {
    l.mapping = GpuMapping::WarpPerRow;
    l.block = 256;
    l.grid = std::max<int64_t>(1, (outer + 7) / 8);
  } else if (k.phases.size() == 1 && !accumulates) {
    l.mapping = GpuMapping::Elementwise;
    int64_t total = outer * prod(k.phases[0].inner);
    l.block = 256;
    l.grid = std::max<int64_t>(1, (total + 255) / 256);
  } else {
    l.mapping = GpuMapping::ThreadPerRow;
    l.block = outer >= 256 ? 256 : std::max<int64_t>(32, (outer + 31) / 32 * 32);
    l.grid = std::max<int64_t>(1, (outer + l.block - 1) / l.block);
  }
  return l;
}

} // namespace aotc
