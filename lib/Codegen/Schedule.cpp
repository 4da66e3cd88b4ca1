//===- Schedule.cpp - The schedule pass: target policy for every kernel ---===//
//
// scheduleProgram (include/aotc/Schedule.h) runs after fusion and planning and before a
// target lowers anything: for each kernel it decides, from the TargetInfo and the kernel's
// shapes alone, how the target runs it, and stores that in Kernel::schedule. This file is the
// CPU's policy (parallel loops, column lanes, vector loop, GEMM blocks) and the dispatch to
// the CUDA policy (GpuLaunch.cpp). MLIR-free.
//===----------------------------------------------------------------------===//
#include "aotc/Schedule.h"

#include "aotc/Codegen.h"
#include "aotc/Diagnostics.h"
#include "aotc/Kernels.h"

#include <algorithm>
#include <sstream>

namespace aotc {

TargetInfo cpuTargetInfo(const std::string &cpu) {
  if (cpu == "host") return cpuTargetInfo(hostCpuLevel());
  TargetInfo t;
  t.name = cpu;
  if (cpu == "multi") {
    t.vectorBits = 128; // one schedule serves the v2 clone too
    t.maxVectorBits = 512;
  } else if (cpu == "x86-64-v2") {
    t.vectorBits = t.maxVectorBits = 128;
  } else if (cpu == "x86-64-v3") {
    t.vectorBits = t.maxVectorBits = 256;
  } else if (cpu == "x86-64-v4") {
    t.vectorBits = t.maxVectorBits = 512;
  } else if (cpu == "native") {
    const std::string level = hostCpuLevel(); // the compiling machine's x86-64 level
    t.vectorBits = t.maxVectorBits = level == "x86-64-v4" ? 512 : level == "x86-64-v3" ? 256 : 128;
  } else {
    internalError("schedule: unknown CPU target '" + cpu + "'");
  }
  return t;
}

TargetInfo cudaTargetInfo() {
  TargetInfo t;
  t.name = "cuda";
  t.gpu = true;
  t.vectorBits = t.maxVectorBits = 128; // 16-byte vector loads and stores (GpuLaunch::vectorWidth)
  return t;
}

GemmBlocks gemmBlocks(const GemmDesc &g, const TargetInfo &t) {
  GemmBlocks b;
  // Planned at the reference sizes (the largest) for a run-time size.
  const int64_t m = g.m.ref(), n = g.n.ref(), kk = g.k.ref(), batch = g.batch.ref();
  b.rows = m >= n;
  int64_t d = b.rows ? m : n;
  int64_t macs = m * n * std::max<int64_t>(kk, 1);
  // A power of two (balanced on 2, 4, 8... threads) with >= 2^22 multiply-adds
  // per block: every block re-packs the operand it shares with the others, so
  // blocks cost single-thread time (MLP fc1: 2 blocks +1%, 8 blocks +11%).
  int64_t want = 1;
  while (want * 2 <= std::min<int64_t>(macs / t.gemmBlockMacs, t.gemmMaxBlocks)) want *= 2;
  // And >= 128 rows/columns per block: a block re-packs the whole shared operand, i.e. one
  // packed element per `extent` multiply-adds (LN-GELU large, 2048x2048x2048: 32-row blocks
  // spent 19 % of the step in OpenBLAS's packing copies).
  want = std::min(want, std::max<int64_t>(d / t.gemmMinExtent, 1));
  b.size = std::max<int64_t>(alignUp((d + want - 1) / want, t.gemmUnit), 1);
  if (b.size >= d) b.size = std::max<int64_t>(d, 1);
  b.count = d == 0 ? 1 : (d + b.size - 1) / b.size;
  b.parallel = b.count * batch > 1 && macs * batch >= t.gemmParallelMacs;
  const int64_t tail = d - (b.count - 1) * b.size;
  b.tailAlone = b.count > 1 && tail < b.size && tail * (macs / std::max<int64_t>(d, 1)) < t.gemmBlockMacs;
  if (!t.gpu) b.library = chooseGemmLibrary(g, t);
  return b;
}

const char *gemmLibraryName(GemmLibrary l) { return l == GemmLibrary::OneDnn ? "onednn" : "openblas"; }

/// The library of a GEMM. f64: OpenBLAS (oneDNN has no f64 GEMM). f32 under "auto": oneDNN
/// for op(A) @ B^T (transB alone: nn.Linear's forward, attention's q @ k^T), OpenBLAS
/// otherwise. Measured one call per 128-row block against OpenBLAS's one call for the whole
/// GEMM, 1 thread, AVX-512 Xeon (docs/stage-codegen.md "GEMM libraries"): NT 1024x256x768
/// 138 vs 120 GFLOP/s, 1024x1024x256 121 vs 111, 1024x256x512 150 vs 122, batched
/// 64 x 128x32x128 113 vs 75; NN at par (118 vs 119); TN mixed (768x1024x256: 104 vs 111,
/// 1024x1024x256: 84 vs 109), so TN and NN stay OpenBLAS's.
GemmLibrary chooseGemmLibrary(const GemmDesc &g, const TargetInfo &t) {
  if (g.dtype != DType::F32 || t.gemmLibrary == "openblas") return GemmLibrary::OpenBlas;
  if (t.gemmLibrary == "onednn") return GemmLibrary::OneDnn;
  return g.transB && !g.transA ? GemmLibrary::OneDnn : GemmLibrary::OpenBlas;
}

bool isColumnReduction(const Kernel &k) {
  if (k.kind != Kernel::Kind::Loop || k.outer.empty()) return false;
  const size_t last = k.outer.size() - 1;
  bool strided = false;
  for (auto &p : k.phases) {
    for (auto &s : p.stores)
      if (s.accumulate) return false;
    if (p.reductions.empty() || p.inner.empty()) continue;
    const size_t innerLast = k.outer.size() + p.inner.size() - 1;
    for (auto &a : p.accesses)
      if (a.buffer >= 0 && a.coef.size() > innerLast && a.coef[last] == 1 && a.coef[innerLast] != 1 &&
          a.coef[innerLast] != 0)
        strided = true;
  }
  return strided;
}

bool isColumnScatter(const Kernel &k) {
  if (k.kind != Kernel::Kind::Loop || k.outer.empty() || k.phases.size() != 1) return false;
  const Phase &p = k.phases[0];
  if (!p.reductions.empty() || p.inner.empty() || p.stores.empty()) return false;
  const size_t last = k.outer.size() - 1;
  // Outer iterations are independent (Kernels.h): no two write one element and none reads
  // what another writes, so running a block of them lane by lane inside the inner loop keeps
  // every element's own sequence of updates, and with it the bits. What the block needs on
  // top is locality: every store accumulates at coefficient 1 on the last outer variable and
  // every buffer access moves with it by 0 or 1 element (a row segment, or a shared value).
  for (auto &st : p.stores)
    if (!st.accumulate || p.accesses[st.access].coef[last] != 1) return false;
  for (auto &a : p.accesses)
    if (a.buffer >= 0 && a.coef[last] != 0 && a.coef[last] != 1) return false;
  return true;
}

int splitDimOf(const Phase &p) {
  for (size_t d = 0; d < p.inner.size(); ++d)
    if (p.inner[d].symbolic() || p.inner[d].ref() > 1) return (int)d;
  return -1;
}

int64_t splitChunks(const Phase &p, int64_t rows) {
  const int64_t extent = p.inner[splitDimOf(p)].ref();
  return (extent + rows - 1) / rows;
}

bool KernelSchedule::split() const {
  return std::any_of(splitRows.begin(), splitRows.end(), [](int64_t r) { return r > 0; });
}

namespace {

/// The work of a loop kernel: per phase inner elements x instructions, summed, times the
/// outer iterations (TargetInfo::parallelMinCost's unit).
int64_t loopCost(const Kernel &k) {
  int64_t cost = 0;
  for (auto &ph : k.phases)
    cost += std::max<int64_t>(numelOf(ph.inner).ref(), 1) * std::max<int64_t>((int64_t)ph.insts.size(), 1);
  return cost * std::max<int64_t>(numelOf(k.outer).ref(), 1);
}

/// Bits of the widest value the kernel computes (f32 sums accumulate in f64: 64).
int widestBits(const Kernel &k) {
  int bits = 8;
  for (auto &ph : k.phases) {
    for (auto &in : ph.insts) bits = std::max(bits, (int)itemSize(in.type) * 8);
    for (auto &r : ph.reductions) bits = std::max(bits, (int)itemSize(r.accType) * 8);
  }
  return bits;
}

void scheduleCpuLoop(const KernelGraph &kg, const Kernel &k, const TargetInfo &t, KernelSchedule &s) {
  // All outer dims on the thread team when the work pays for a parallel region. Serial or
  // parallel, the bits are the same: outer iterations are independent.
  int64_t inner = 1;
  for (auto &ph : k.phases) inner = std::max(inner, numelOf(ph.inner).ref());
  const int64_t outerN = numelOf(k.outer).ref(); // at the reference sizes for a run-time size
  if (!k.outer.empty() && (outerN > 1 || anySymbolic(k.outer)) && loopCost(k) >= t.parallelMinCost &&
      outerN * inner >= t.parallelMinElems)
    s.parallelDims = (int)k.outer.size();
  // Column reductions: one loop body runs `columnLanes` neighbouring outer iterations
  // (ScalarEmitter::emitLanesBody), so an inner step loads a vector of neighbouring columns
  // instead of that many cache lines in separate passes.
  auto divides = [](const Dim &d, int64_t by) { return !d.symbolic() && d.ref() % by == 0; };
  if (!k.outer.empty() && divides(k.outer.back(), t.columnLanes) && isColumnReduction(k))
    s.lanes = t.columnLanes;
  // ... or, when every phase is a fold (or its after-fold stores) without argmax, in blocks of
  // columnBlock columns whose loop runs innermost, accumulators on the stack.
  if (s.lanes > 1 && t.columnBlock > 0 && divides(k.outer.back(), t.columnBlock)) {
    bool folds = true;
    for (auto &ph : k.phases) {
      folds = folds && (!ph.reductions.empty() || ph.inner.empty());
      for (auto &r : ph.reductions) folds = folds && r.kind != ReduceKind::ArgMax;
    }
    if (folds) {
      s.lanes = 1;
      s.block = t.columnBlock;
    }
  }
  // Accumulating stores (scatter_add and kin) may hit one element twice in a vector: scalar.
  bool accumulates = false;
  for (auto &ph : k.phases)
    for (auto &st : ph.stores) accumulates |= st.accumulate;
  // ... and a column scatter (an embedding's gradient: for each column, every token's row
  // added into its target row) runs columnBlock columns innermost per token, so a step reads
  // and updates a contiguous row segment instead of one element in a cache line of its own.
  if (accumulates && s.lanes == 1 && s.block == 0 && t.columnBlock > 0 && !k.outer.empty() &&
      divides(k.outer.back(), t.columnBlock) && outerN * inner >= t.columnScatterMinElems &&
      isColumnScatter(k))
    s.block = t.columnBlock;
  const Phase *last = nullptr; // the last phase with an inner loop
  for (auto &ph : k.phases)
    if (!ph.inner.empty()) last = &ph;
  // Long folds with nothing else to split across (one outer iteration): each reduce phase of
  // enough elements in chunks of whole rows of its split dim on the team, its partials combined
  // in chunk order. Not for checked kernels (the status pair has one writer), accumulating
  // stores, nor argmax (its ties need the positions).
  if (numelOf(k.outer).is(1) && !accumulates && !k.mayFail()) {
    std::vector<int64_t> rows(k.phases.size(), 0);
    bool any = false;
    for (size_t i = 0; i < k.phases.size(); ++i) {
      const Phase &p = k.phases[i];
      const int d = splitDimOf(p);
      bool ok = !p.reductions.empty() && d >= 0;
      for (auto &r : p.reductions) ok = ok && r.kind != ReduceKind::ArgMax;
      const int64_t n = numelOf(p.inner).ref();
      if (!ok || n < t.splitMinElems) continue;
      const int64_t parts = std::min({t.splitMaxParts, n / t.splitChunkElems, p.inner[d].ref()});
      if (parts < 2) continue;
      rows[i] = (p.inner[d].ref() + parts - 1) / parts; // splitChunks(p, rows) <= parts
      any = true;
    }
    if (any) s.splitRows = rows;
  }
  s.reuse = phaseReuses(kg, k, s.splitRows);
  if (accumulates) s.vectorDim = -1;
  else if (s.lanes > 1 || s.block > 0) s.vectorDim = (int)k.outer.size() - 1;
  else if (last) s.vectorDim = (int)(k.outer.size() + last->inner.size() - 1);
  else if (!k.outer.empty()) s.vectorDim = (int)k.outer.size() - 1;
  s.vectorElems = std::max<int64_t>(t.vectorBits / widestBits(k), 1);
}

void scheduleGraph(const KernelGraph &kg, std::vector<Kernel> &kernels, const TargetInfo &t) {
  for (Kernel &k : kernels) {
    KernelSchedule s;
    s.valid = true;
    if (t.gpu) {
      if (!k.phases.empty()) s.gpu = gpuLaunch(kg, k);
    } else if (k.kind == Kernel::Kind::Loop) {
      scheduleCpuLoop(kg, k, t, s);
    } else if (k.call.fn == ExternFn::Gemm) {
      s.gemm = gemmBlocks(k.call.gemm, t);
    }
    k.schedule = s;
  }
}

} // namespace

const KernelProgram &scheduledProgram(const KernelProgram &in, const TargetInfo &t, KernelProgram &storage) {
  if (in.scheduled) return in;
  storage = in;
  scheduleProgram(storage, t);
  return storage;
}

void scheduleProgram(KernelProgram &kp, const TargetInfo &t) {
  for (KernelGraph *kg : {&kp.forward, &kp.backward, &kp.eval, &kp.train.update, &kp.train.accumulateGraph,
                          &kp.train.shardNormGraph})
    scheduleGraph(*kg, kg->kernels, t);
  kp.target = t;
  kp.scheduled = true;
}

std::string scheduleText(const Kernel &k, const TargetInfo &t) {
  const KernelSchedule &s = k.schedule;
  std::ostringstream os;
  auto sep = [&] { return os.tellp() > 0 ? " " : ""; };
  if (t.gpu) {
    if (k.phases.empty()) return "";
    const GpuLaunch &l = s.gpu;
    os << "cuda=" << gpuMappingName(l.mapping) << " grid=" << l.grid << " block=" << l.block;
    if (l.vectorWidth > 1) os << " vec=" << l.vectorWidth;
    return os.str(); // printKernelGraph adds final= and partials=
  }
  if (k.kind == Kernel::Kind::Extern) {
    if (k.call.fn != ExternFn::Gemm) return "";
    if (s.gemm.count > 1)
      os << "blocks=" << s.gemm.count << "x" << s.gemm.size << (s.gemm.rows ? "rows" : "cols")
         << (s.gemm.tailAlone ? " last=alone" : "");
    if (s.gemm.parallel) os << sep() << "parallel";
    if (s.gemm.library != GemmLibrary::OpenBlas) os << sep() << "lib=" << gemmLibraryName(s.gemm.library);
    return os.str();
  }
  if (s.parallelDims > 0) os << "parallel=" << s.parallelDims;
  else if (s.split()) {
    os << "split=";
    bool first = true;
    for (size_t i = 0; i < s.splitRows.size(); ++i)
      if (s.splitRows[i] > 0) {
        os << (first ? "" : ",") << "p" << i << ":" << splitChunks(k.phases[i], s.splitRows[i]) << "x"
           << s.splitRows[i];
        first = false;
      }
  }
  else os << "serial";
  if (s.lanes > 1) os << " lanes=" << s.lanes;
  if (s.block > 0) os << " block=" << s.block;
  for (size_t i = 0; i < s.reuse.size(); ++i)
    os << (i ? "," : " reuse=") << "p" << s.reuse[i].from << ">p" << s.reuse[i].to;
  if (s.vectorDim < 0) {
    os << " scalar";
  } else {
    os << " vector=d" << s.vectorDim << "x" << s.vectorElems;
    if (t.maxVectorBits > t.vectorBits) // multi: the wider clones' widths
      for (int bits = t.vectorBits * 2; bits <= t.maxVectorBits; bits *= 2)
        os << "|" << s.vectorElems * bits / t.vectorBits;
  }
  return os.str();
}

} // namespace aotc
