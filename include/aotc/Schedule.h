//===- Schedule.h - Target policy: the schedule of every kernel -*- C++ -*-===//
//
// Fusion (Kernels.h) says *what* a kernel computes: its outer domain of independent
// iterations, its phases, its library call. A schedule says *how* one target runs it: which
// outer loops go to the thread team, how many outer iterations one loop body runs (so a
// column reduction loads a vector of neighbouring columns per step), which loop the vector
// code runs along and how wide, how a GEMM is cut into independent library calls, and for
// CUDA the mapping and launch geometry. The schedule pass (lib/Codegen/Schedule.cpp) chooses
// it from a TargetInfo; the targets (MLIRGen.cpp, GpuGen.cpp, CudaHost.cpp) only read it;
// `aotc --emit=kernels` prints it (docs/stage-codegen.md "Schedules").
//
// Every choice is a function of the kernel's shapes and the target, never of the number of
// threads the program will run with, so the results are bit-identical at any thread count:
// that is why the machine's core count is not a TargetInfo field (the object runs on machines
// the compiler never sees; the thread team only distributes the fixed chunks).
//===----------------------------------------------------------------------===//
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace aotc {

struct GemmDesc;
struct Kernel;
struct KernelGraph;
struct Phase;
struct KernelProgram;

/// What the schedule pass knows of a target. Units: bits and elements as named.
struct TargetInfo {
  /// "x86-64-v2", "x86-64-v3", "x86-64-v4", "native" (the compiling machine's CPU),
  /// "multi" (one object with v2, v3 and v4 clones: one schedule for all three), or "cuda".
  std::string name = "multi";
  bool gpu = false;
  /// The vector register width every clone the schedule serves has: 128 (SSE4.2: x86-64-v2 and
  /// multi), 256 (AVX2: v3), 512 (AVX-512: v4, native with AVX-512F).
  int vectorBits = 128;
  /// The widest vector register among the clones ("multi": 512), for the printed widths.
  int maxVectorBits = 128;
  /// A loop kernel runs on the thread team only when its cost (per phase: inner elements x
  /// instructions, summed, times the outer iterations) reaches this; below, one thread runs
  /// it. A parallel region costs ~0.7 us at 2 threads on the 2-core machine, ~0.13 us at 1;
  /// a kernel of 20,000 is ~5 us serial (docs/stage-codegen.md "Parallel loops").
  int64_t parallelMinCost = 20000;
  /// ... and only when it has at least this many elements (outer iterations x the largest
  /// phase's inner elements): a kernel of fewer runs in about a microsecond, what a parallel
  /// region costs at 2 threads, whatever its instruction count says.
  int64_t parallelMinElems = 2048;
  /// Outer iterations one loop body of a column reduction runs: 8 on every CPU target (two
  /// SSE / one AVX2 register of f32 columns, f64 partials in 2-4 registers).
  int64_t columnLanes = 8;
  /// Column reductions whose phases are all folds (and their after-fold stores) run their
  /// innermost outer dim in blocks of columnBlock iterations (KernelSchedule::block) when it
  /// divides that extent: a row segment of columnBlock f32 values per inner step.
  int64_t columnBlock = 64;
  /// Column scatters (isColumnScatter) run in columnBlock blocks only from this many elements
  /// (outer iterations x inner): below, the strided walk stays in L1 and the block loop's
  /// per-lane index checks cost more than it saves (bilstm_tagger's [2, 64] x 7 scatters,
  /// 896 elements: 0.136 -> 0.141 ms a step with blocks).
  int64_t columnScatterMinElems = 16384;
  /// GEMM blocking (gemmBlocks): blocks are a multiple of gemmUnit rows or columns, at least
  /// gemmMinExtent of them and gemmBlockMacs multiply-adds, at most gemmMaxBlocks; a GEMM of
  /// fewer than gemmParallelMacs multiply-adds in all runs its blocks on one thread.
  int64_t gemmUnit = 32, gemmMinExtent = 128, gemmMaxBlocks = 64;
  int64_t gemmBlockMacs = int64_t(1) << 22, gemmParallelMacs = int64_t(1) << 18;
  /// Split folds (KernelSchedule::splitRows): in a kernel with one outer iteration, a reduce
  /// phase of at least splitMinElems elements is cut into chunks of about splitChunkElems
  /// elements (whole rows of its split dim, splitDimOf), at most splitMaxParts.
  int64_t splitMinElems = 65536, splitChunkElems = 16384, splitMaxParts = 64;
  /// The library of f32 GEMMs (GemmBlocks::library): "openblas" (the default), "auto" (the
  /// measured rule of chooseGemmLibrary) or "onednn" (every f32 GEMM). f64 GEMMs are OpenBLAS's.
  /// oneDNN's dnnl_sgemm allocates its packing buffers in every call, so an object with oneDNN
  /// GEMMs has no allocation-free step: opt-in (docs/stage-codegen.md "GEMM libraries").
  std::string gemmLibrary = "openblas";
};

/// The TargetInfo of a CPU level (CodegenOptions::cpu after the driver resolved "host":
/// multi, native, x86-64-v2, -v3, -v4). Unknown names are an internal error.
TargetInfo cpuTargetInfo(const std::string &cpu);
/// The TargetInfo of --target=cuda.
TargetInfo cudaTargetInfo();

/// How a GEMM is split into independent blocks (a pure function of the shapes and the
/// target, never of the thread count, so results do not depend on threads): `count` blocks of
/// `size` rows of C (rows = true) or columns of C, per batch entry; the last block may be
/// smaller. The count x batch blocks may run in parallel when `parallel` is set: each thread
/// takes a contiguous share of them and makes one single-threaded BLAS call per batch entry
/// for its run of blocks (MLIRGen.cpp buildGemmFunction), except that a last block smaller
/// than gemmBlockMacs multiply-adds (`tailAlone`) is always a call of its own, as the BLAS
/// may compute a small call with other kernels. The larger of m and n is split (the operand
/// re-read by every call is then the smaller one) into at most gemmMaxBlocks blocks (a power
/// of two is asked for; rounding the block size up to a multiple of gemmUnit may leave fewer)
/// of at least gemmMinExtent rows or columns and gemmBlockMacs multiply-adds each.
enum class GemmLibrary {
  OpenBlas, ///< cblas_[sd]gemm of the linked CBLAS (OpenBLAS)
  OneDnn,   ///< aotc_onednn_sgemm (libaotc_kernels, aotc/kernels.h): oneDNN's dnnl_sgemm
};
const char *gemmLibraryName(GemmLibrary l); ///< "openblas", "onednn"

struct GemmBlocks {
  /// Which library computes the blocks. OpenBLAS: a thread's run of blocks is one call (see
  /// above). oneDNN: every block is a call of its own, always: its results depend on the rows
  /// and columns a call covers (dnnl_sgemm of a whole NT GEMM and of two row or column pieces
  /// differ in the last bits for 44 of 150 random shapes), while a fixed block's call gives
  /// the same bits at any thread count.
  GemmLibrary library = GemmLibrary::OpenBlas;
  bool rows = true;
  int64_t size = 0, count = 1;
  bool parallel = false; ///< count * batch > 1 and at least gemmParallelMacs multiply-adds in total.
  bool tailAlone = false; ///< The last block is smaller than `size` and than gemmBlockMacs.
};
GemmBlocks gemmBlocks(const GemmDesc &g, const TargetInfo &t);
/// The CPU library of a GEMM under t.gemmLibrary (Schedule.cpp: the measured rule).
GemmLibrary chooseGemmLibrary(const GemmDesc &g, const TargetInfo &t);

/// How the CUDA target runs one Loop kernel; a function of the kernel's shapes only
/// (never of the device's SM count). block = threads per block, grid = blocks (x only).
enum class GpuMapping {
  Elementwise,  ///< One map phase without accumulation: one thread per (outer, inner) element.
  WarpPerRow,   ///< Has reduce phases: one warp per outer iteration, shuffle-xor butterfly.
  BlockPerRow,  ///< Reduce phases over >= 8192 elements: one 256-thread block per outer
                ///< iteration; warp butterflies, then the 8 partials through workgroup memory.
  ThreadPerRow, ///< Otherwise (scatter_add, multi-phase maps): one thread per outer iteration.
  ColumnBlock,  ///< Column reductions (isColumnReduction): a 256-thread block takes 32
                ///< neighbouring columns, 8 row groups fold coalesced, then an 8-lane
                ///< shuffle butterfly per column over workgroup memory. Columns of >= 4096
                ///< rows are cut into chunks (one block each) whose f64 partials a second
                ///< kernel, one thread per column, folds in chunk order.
  SplitRow,     ///< Few long rows (the rows would fit in one block but hold > 4096 elements):
                ///< `parts` blocks per row fold contiguous chunks into f64 partials in
                ///< scratch; a second kernel (<symbol>_final, one block per row) folds each
                ///< row's partials in order and runs the remaining phases. Deterministic.
};
const char *gpuMappingName(GpuMapping m);
struct GpuLaunch {
  GpuMapping mapping = GpuMapping::Elementwise;
  int64_t grid = 1, block = 256;
  /// Elementwise only: elements per thread along the innermost dim (4: the accesses that are
  /// contiguous there are 16-byte vector loads/stores of 4-byte elements), else 1.
  int64_t vectorWidth = 1;
  /// Two-kernel reductions (finalGrid > 0), the second kernel being <symbol>_final with
  /// `block` threads: SplitRow: blocks per row (grid = rows * parts), finalGrid = rows;
  /// ColumnBlock over long columns ("column split"): row chunks (grid = column blocks *
  /// parts), finalGrid = columns / 256 (one thread per column). partialValues: f64 partials
  /// in scratch at gpuPartialsOffset (parts * rows or columns * accumulators).
  int64_t parts = 0, finalGrid = 0, partialValues = 0;
};
/// The mapping and launch geometry of Loop kernel k of kg on CUDA (lib/Codegen/GpuLaunch.cpp).
GpuLaunch gpuLaunch(const KernelGraph &kg, const Kernel &k);

/// A kernel's schedule on one target (Kernel::schedule, filled by scheduleProgram).
/// A value a reduce phase computes per element anyway and a later map phase of the same kernel
/// computes again (softmax's exp(x - max): summed, then divided by the sum): the reduce
/// phase `from` also stores its instruction `fromInst` where store `store` of map phase `to`
/// writes that element, and phase `to` loads it there instead of computing its instruction
/// `toInst` (lib/Codegen/PhaseReuse.cpp says when that is exact and safe).
struct PhaseReuse {
  int from = -1, to = -1;
  int store = -1;
  int fromInst = -1, toInst = -1;
};

/// The reuses of loop kernel k (CPU schedules: a store and a load cost less there than an
/// exp or a log; a GPU recomputes). None when a phase is split (splitRows).
std::vector<PhaseReuse> phaseReuses(const KernelGraph &kg, const Kernel &k, const std::vector<int64_t> &splitRows);

struct KernelSchedule {
  bool valid = false;    ///< Set by scheduleProgram; the targets refuse a kernel without it.
  /// CPU loop kernels: the leading outer dims that form the thread team's parallel loop (0:
  /// one thread runs the kernel). Chunks are whole outer iterations, so bits never depend on
  /// the thread count.
  int parallelDims = 0;
  /// CPU loop kernels: outer iterations one loop body runs (unroll-and-jam of the innermost
  /// outer dim): TargetInfo::columnLanes for a column reduction whose innermost outer extent
  /// it divides, else 1. Each iteration still folds in its own order.
  int64_t lanes = 1;
  /// CPU column reductions (instead of lanes) and column scatters (isColumnScatter): the
  /// innermost outer dim in blocks of this many
  /// iterations, 0 when off. The block's loop runs innermost, inside each phase's inner loops,
  /// with the block's accumulators and registers in arrays on the stack: every inner step
  /// reads a contiguous row segment of the block (a vector loop) instead of one column down a
  /// strided path. Each outer iteration still folds in its own order (the bits of one lane).
  int64_t block = 0;
  /// CPU loop kernels: the vector code's loop and width, a report (codegen does not read it:
  /// LLVM's vectorizers pick the width per clone). vectorDim indexes the iteration variables
  /// (outer..., inner...) of the kernel's last phase with an inner loop: the innermost inner dim (LLVM's
  /// loop vectorizer, reductions reassociated per lane), or with lanes > 1 the innermost outer
  /// dim (the SLP vectorizer over the lanes); -1 (printed `scalar`) when the kernel has no
  /// loop or accumulating stores (a scatter may hit one element twice in a vector). vectorElems:
  /// elements of the phase's widest type per register of TargetInfo::vectorBits (multi:
  /// the v2 width; the v3 / v4 clones are vectorized for their own registers).
  int vectorDim = -1;
  int64_t vectorElems = 1;
  /// CPU loop kernels with one outer iteration (a loss, a norm, any full reduction): per phase,
  /// 0 or the rows per chunk of its split dim (splitDimOf: the first inner dim longer than 1). A split reduce phase folds its chunks
  /// (the last may be shorter) on the thread team into partials, which one thread then
  /// combines in chunk order before the next phase runs. A function of the shapes only, so
  /// the bits do not depend on the thread count. Empty: no phase is split.
  std::vector<int64_t> splitRows;
  bool split() const;
  /// CPU loop kernels: values handed from a reduce phase to a later map phase (PhaseReuse).
  std::vector<PhaseReuse> reuse;
  GemmBlocks gemm;       ///< Extern GEMM kernels.
  GpuLaunch gpu;         ///< --target=cuda Loop kernels with phases.
};

/// The inner dim a split fold cuts into chunks: the first of `p`'s inner dims longer than 1
/// (so a batch of one, [1, N], still splits), or -1 when there is none.
int splitDimOf(const Phase &p);
/// The chunks of a split phase: ceil(extent of its split dim / rows).
int64_t splitChunks(const Phase &p, int64_t rows);

/// `aotc --emit=kernels`' text of a kernel's schedule, e.g. `parallel=2 lanes=8 vector=d3x4` or
/// `split=p0:16x32,p2:5x60 vector=d1x2` (phase 0 in 16 chunks of 32 rows of its split dim, ...).
std::string scheduleText(const Kernel &k, const TargetInfo &t);

/// A Loop kernel without accumulating stores with a reduce phase that walks its inner
/// domain with a stride while neighbouring outer iterations read neighbouring elements
/// (coefficient 1 on the innermost outer variable): a column sum such as a bias gradient.
/// The CPU schedule runs TargetInfo::columnLanes neighbouring outer iterations per loop body
/// (KernelSchedule::lanes); the CUDA schedule puts neighbouring columns on neighbouring lanes
/// (GpuMapping::ColumnBlock, docs/cuda.md). An analysis of the kernel's accesses, not a policy.
bool isColumnReduction(const Kernel &k);

/// A Loop kernel of one map phase over an inner domain whose stores all accumulate into an
/// element with coefficient 1 on the innermost outer variable, every other access moving by 0
/// or 1 element with it: a column scatter such as an embedding's gradient (scatter_add along
/// the tokens, parallel over the columns). The CPU schedule runs it in blocks
/// (KernelSchedule::block): per inner step, a row segment of the block is read and updated.
/// The bits are kept because outer iterations are independent (Kernels.h: none writes an
/// element another writes or reads), so each target element still receives its values in
/// inner-loop order; the predicate only picks the layouts where blocking pays.
bool isColumnScatter(const Kernel &k);

/// `in` itself when it is scheduled, else a copy in `storage` scheduled for `t` (for callers
/// handed a program straight from planProgram, such as unit tests).
const KernelProgram &scheduledProgram(const KernelProgram &in, const TargetInfo &t, KernelProgram &storage);

/// The schedule pass: fills Kernel::schedule of every kernel of kp (forward, backward, eval,
/// the train step's graphs) for `t`, and records t in kp.target. Idempotent for one target.
void scheduleProgram(KernelProgram &kp, const TargetInfo &t);

} // namespace aotc
