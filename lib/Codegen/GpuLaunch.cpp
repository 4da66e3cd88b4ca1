//===- GpuLaunch.cpp - How the CUDA target maps a kernel onto threads ---------===//
//
// MLIR-free, so --emit=kernels can print the launch geometry. See Codegen.h
// (GpuLaunch) and GpuGen.cpp (the kernels built for each mapping).
//===----------------------------------------------------------------------===//
#include "aotc/Codegen.h"
#include "aotc/Diagnostics.h"

#include <algorithm>

namespace aotc {

const char *gpuMappingName(GpuMapping m) {
  switch (m) {
  case GpuMapping::Elementwise: return "elementwise";
  case GpuMapping::WarpPerRow: return "warp-per-row";
  case GpuMapping::BlockPerRow: return "block-per-row";
  case GpuMapping::ColumnBlock: return "column-block";
  case GpuMapping::ThreadPerRow: return "thread-per-row";
  case GpuMapping::SplitRow: return "split-row";
  }
  return "?";
}

namespace {

int64_t prod(const Shape &s) {
  int64_t n = 1;
  for (int64_t d : s) n *= d;
  return n;
}
/// The CUDA target compiles constant sizes (the driver refuses run-time ones before).
int64_t prod(const Dims &d) { return prod(constShape(d)); }

/// 4 when every access of the elementwise phase either does not move along the innermost
/// dim (coefficient 0: one value for all four lanes) or is contiguous there (coefficient 1) with
/// a 16-byte aligned start for every thread (offset and all other coefficients multiples of 4)
/// and 4-byte elements (f32, i32); at least one contiguous access; no data-dependent terms; the domain's
/// innermost extent a multiple of 4. Else 1.
int64_t vectorWidth(const KernelGraph &kg, const Kernel &k, const Phase &p) {
  constexpr int64_t kWidth = 4;
  Shape all = constShape(k.outer);
  all.insert(all.end(), p.inner.begin(), p.inner.end());
  if (all.empty() || all.back() % kWidth != 0) return 1;
  const size_t last = all.size() - 1;
  bool any = false;
  for (auto &a : p.accesses) {
    if (a.buffer < 0) continue;
    if (!a.dyn.empty() || a.coef.size() != all.size()) return 1;
    if (a.coef[last] == 0) continue;
    if (a.coef[last] != 1 || a.offset % kWidth != 0 || itemSize(kg.buffers[a.buffer].type.dtype) != 4) return 1;
    for (size_t d = 0; d < last; ++d)
      if (a.coef[d] % kWidth != 0) return 1;
    any = true;
  }
  return any ? kWidth : 1;
}

/// SplitRow applies when the row mappings would leave > 4096 elements to one block and the
/// kernel is phase 0 = the only reduce phase (sum/max/min with an f32/f64 accumulator; its
/// partials travel as f64, exactly) followed by phases of at most 256 elements per row.
bool splittable(const Kernel &k) {
  if (k.phases.empty() || k.phases[0].reductions.empty()) return false;
  for (auto &r : k.phases[0].reductions)
    if (r.kind == ReduceKind::ArgMax || (r.accType != DType::F32 && r.accType != DType::F64)) return false;
  for (size_t i = 1; i < k.phases.size(); ++i)
    if (!k.phases[i].reductions.empty() || prod(k.phases[i].inner) > 256) return false;
  return true;
}

/// Column split applies to column reductions whose reduce phases fold independent values
/// (no register of an earlier phase: every phase's sums can run on any chunk of rows) with
/// sum/max/min over f32/f64 accumulators, and whose map phases store one element per column.
bool columnSplittable(const Kernel &k) {
  // Stage 1 runs every fold before any store: a kernel reading what it writes is not split.
  for (int w : k.writes)
    if (std::find(k.reads.begin(), k.reads.end(), w) != k.reads.end()) return false;
  for (auto &p : k.phases) {
    if (p.reductions.empty()) {
      if (prod(p.inner) > 1) return false;
      continue;
    }
    for (auto &r : p.reductions) {
      if (r.kind == ReduceKind::ArgMax || (r.accType != DType::F32 && r.accType != DType::F64)) return false;
      std::vector<int> todo{r.value};
      while (!todo.empty()) {
        int i = todo.back();
        todo.pop_back();
        if (i < 0) continue;
        const Inst &in = p.insts[i];
        if (in.op == ScalarOp::Reg) return false;
        todo.insert(todo.end(), {in.a, in.b, in.c});
        if (in.access >= 0) // data-dependent index terms are computed too
          for (auto &d : p.accesses[in.access].dyn) todo.push_back(d.value);
      }
    }
  }
  return true;
}

/// Shared memory of the column-block mapping: its largest phase's (8 x 32 + 32) accumulator
/// slots (phases share their buffers, GpuGen.cpp).
int64_t columnSharedBytes(const Kernel &k) {
  int64_t most = 0;
  for (auto &p : k.phases) {
    int64_t bytes = 0;
    for (auto &r : p.reductions)
      bytes += (8 * 32 + 32) * (itemSize(r.accType) + (r.kind == ReduceKind::ArgMax ? 8 : 0));
    most = std::max(most, bytes);
  }
  return most;
}

} // namespace

int64_t gpuPartialsOffset(const KernelProgram &kp) { return (kp.scratchBytes + 255) / 256 * 256; }

int64_t gpuScratchBytes(const KernelProgram &kp) {
  AOTC_ASSERT(kp.scheduled && kp.target.gpu, "gpuScratchBytes of a program not scheduled for CUDA");
  int64_t values = 0;
  for (const KernelGraph *kg : {&kp.forward, &kp.backward})
    for (const Kernel &k : kg->kernels) values = std::max(values, k.schedule.gpu.partialValues);
  return values > 0 ? gpuPartialsOffset(kp) + values * 8 : kp.scratchBytes;
}

GpuLaunch gpuLaunch(const KernelGraph &kg, const Kernel &k) {
  GpuLaunch l;
  bool reduces = false, accumulates = false;
  for (auto &p : k.phases) {
    reduces |= !p.reductions.empty();
    for (auto &s : p.stores) accumulates |= s.accumulate;
  }
  int64_t outer = prod(k.outer);
  int64_t longest = 0;
  for (auto &p : k.phases)
    if (!p.reductions.empty()) longest = std::max(longest, prod(p.inner));
  // One thread per outer iteration, at most 256 per block (whole warps).
  auto threadPerRow = [&] {
    l.mapping = GpuMapping::ThreadPerRow;
    l.block = outer >= 256 ? 256 : std::max<int64_t>(32, (outer + 31) / 32 * 32);
    l.grid = std::max<int64_t>(1, (outer + l.block - 1) / l.block);
  };
  // Column blocks up to 40 KiB of shared memory (48 KiB is every arch's static limit); more
  // accumulators (two dozen sums merged into one kernel) take a thread per column instead
  // (the threads of a warp read neighbouring columns: still coalesced, just less parallel).
  const bool column = reduces && isColumnReduction(k);
  if (column && columnSharedBytes(k) > 40 * 1024) {
    threadPerRow();
  } else if (column) {
    // Neighbouring columns on neighbouring lanes: a warp's loads are one contiguous run.
    l.mapping = GpuMapping::ColumnBlock;
    l.block = 256;
    l.grid = std::max<int64_t>(1, (outer + 31) / 32);
    if (longest >= 4096 && columnSplittable(k)) {
      // Long columns: chunks of <= 2048 rows (256 per thread), folded by a second kernel.
      int64_t accs = 0;
      for (auto &p : k.phases) accs += (int64_t)p.reductions.size();
      l.parts = std::clamp<int64_t>((longest + 2047) / 2048, 2, 64);
      l.grid *= l.parts;
      l.finalGrid = (outer + 255) / 256;
      l.partialValues = l.parts * outer * accs;
    }
  } else if (reduces && outer <= 8 && outer * longest > 4096 && splittable(k)) {
    // One block would hold it all (a loss: the mean over a whole tensor): split each row.
    l.mapping = GpuMapping::SplitRow;
    l.block = 256;
    l.parts = std::clamp<int64_t>((longest + 8191) / 8192, 2, 1024);
    l.grid = outer * l.parts;
    l.finalGrid = outer;
    l.partialValues = outer * l.parts * (int64_t)k.phases[0].reductions.size();
  } else if (reduces && longest >= 8192) {
    // A long row (the MSE loss: a whole tensor): a warp alone would be serial for too long.
    l.mapping = GpuMapping::BlockPerRow;
    l.block = 256;
    l.grid = std::max<int64_t>(1, outer);
  } else if (reduces) {
    l.mapping = GpuMapping::WarpPerRow;
    l.block = 256;
    l.grid = std::max<int64_t>(1, (outer + 7) / 8);
  } else if (k.phases.size() == 1 && !accumulates) {
    l.mapping = GpuMapping::Elementwise;
    int64_t total = outer * prod(k.phases[0].inner);
    l.vectorWidth = vectorWidth(kg, k, k.phases[0]);
    l.block = 256;
    l.grid = std::max<int64_t>(1, (total / l.vectorWidth + 255) / 256);
  } else {
    threadPerRow();
  }
  if (outer == 0) { // nothing to compute or store: the host does not launch it
    l.grid = l.finalGrid = l.parts = l.partialValues = 0;
  }
  return l;
}

} // namespace aotc
