//===- Kernels.h - Target-neutral description of fused kernels -*- C++ -*-===//
//
// The contract between fusion (lib/Codegen/Fusion.cpp, MLIR-free) and the
// targets (lib/Codegen/MLIRGen.cpp for the CPU, lib/Codegen/GpuGen.cpp for CUDA). Nothing
// here knows about MLIR, LLVM, threads or vector widths: how a target runs a kernel is its
// KernelSchedule, chosen by the schedule pass (include/aotc/Schedule.h).
//
// A graph (forward or backward, primitives only) becomes a KernelGraph:
//  * Buffers: every tensor that exists in memory. ABI buffers (in/out/saved/
//    tangents/grads) plus Scratch buffers, which live in one arena at offsets
//    planned by liveness (Arena.cpp). All buffers are dense row-major; element
//    addresses are computed by Accesses, so views never copy.
//  * Kernels, in execution order. A Loop kernel iterates an `outer` domain
//    (independent iterations: a target may run them in parallel) and, inside one
//    outer iteration, runs its Phases in order. A phase iterates its `inner`
//    domain sequentially: a reduce phase folds values into Reductions (whose
//    results are per-outer-iteration registers visible to later phases), a map
//    phase stores values. Because reductions never cross outer iterations, a
//    kernel gives bit-identical results for any number of threads.
//  * An Extern kernel is a library call (ExternCall): a function of a library the
//    target links (ExternFn), the buffers it reads and writes, an optional
//    workspace buffer and the function's attributes. Today's one function is the
//    (batched) BLAS-style matrix product C = alpha*op(A)op(B) + beta*C (GemmDesc);
//    an Extern kernel's optional phases run first (they initialise C with the
//    broadcast bias of addmm).
// Scalar computations are flat SSA instruction lists (Inst) per phase; operands
// refer to earlier instructions of the same phase.
//===----------------------------------------------------------------------===//
#pragma once

#include "aotc/Conv.h"
#include "aotc/Dim.h"
#include "aotc/Graph.h"
#include "aotc/Optimizer.h"
#include "aotc/ScalarOp.h"
#include "aotc/Schedule.h"
#include "aotc/Types.h"

#include <cstdint>
#include <map>
#include <string>
#include <vector>

namespace aotc {

/// Where a buffer lives (see abi.h for the entry-point arrays).
enum class BufferKind {
  Input,   ///< in[index] (forward and backward).
  Output,  ///< out[index] (forward).
  Saved,   ///< saved + offset (written by forward, read by backward).
  Tangent, ///< tangents[index] (backward).
  Grad,    ///< grads[index] (backward).
  Scratch, ///< scratch + offset (planned by Arena.cpp).
  State,   ///< state + offset (train step: the persistent optimizer state area, Optimizer.h).
  Hyper,   ///< hyper + offset (train step: a run-time hyperparameter, one f64).
};
const char *bufferKindName(BufferKind k);

struct Buffer {
  std::string name;   ///< The graph node (or a synthesized name for copies).
  TensorType type;    ///< Dense row-major storage of type.numel() elements.
  BufferKind kind = BufferKind::Scratch;
  int index = -1;     ///< Array index for Input/Output/Tangent/Grad.
  int64_t offset = 0; ///< Byte offset for Saved/Scratch (64-byte aligned).
  int64_t bytes() const { return type.bytes(); }
};

/// A data-dependent index term: `stride * v` where v = the i64 value of
/// instruction `value`. The target checks 0 <= v < bound; when violated, the
/// access does not happen (loads yield 0) and the entry point returns error
/// code `error + 1` with v as the error value. `error == -1` marks an
/// unchecked term whose value is in range by construction (slice_scatter's
/// clamped source index): no check is emitted.
struct DynIndex {
  int value = -1;
  Dim stride = 0;
  Dim bound = 0;
  int error = -1; ///< Index into KernelGraph::errors (program-wide after planning), or -1.
};

/// An affine element address into a buffer:
///   element = offset + sum_k coef[k] * var[k] + sum dyn terms,
/// where var = (outer index..., inner index...) of the phase (coef has
/// outer.size() + inner.size() entries). Units are elements, not bytes.
/// buffer == -1: no buffer; the address is the value of an Index instruction.
struct Access {
  int buffer = -1;
  Dim offset = 0;
  Dims coef;
  std::vector<DynIndex> dyn;
};

// ScalarOp (the scalar operations an Inst computes) is include/aotc/ScalarOp.h, in IR: an
// op's OpDef names the one a simple pointwise primitive is made of (OpDef::scalar).

struct Inst {
  ScalarOp op = ScalarOp::Const;
  DType type = DType::F32;
  int a = -1, b = -1, c = -1;
  double fconst = 0.0;
  int64_t iconst = 0;
  int access = -1; ///< Load.
  int reg = -1;    ///< Reg.
  /// Const only: "" for a constant; else the constant is this run-time size (an integer
  /// expression over the program's size symbols, Dim::sym) and fconst / iconst hold its value
  /// at the reference sizes.
  std::string sym;
};

enum class ReduceKind { Sum, Max, Min, ArgMax, Prod };
const char *reduceKindName(ReduceKind k);

/// One reduction of a reduce phase: folds `value` (type `valueType`) over the
/// phase's inner domain in row-major order, starting from the identity (0 for
/// Sum, 1 for Prod, -inf/INT64_MIN for Max, +inf/INT64_MAX for Min). ArgMax keeps the first
/// position of the maximum (a NaN counts as maximal, as torch.argmax) as an i64
/// linear inner index. The result (type `resultType`) becomes register `reg`;
/// Sum and Prod of f32 accumulate in f64 and round once at the end.
struct Reduction {
  ReduceKind kind = ReduceKind::Sum;
  int value = -1;
  int reg = -1;
  DType accType = DType::F32;
};

/// How an accumulating store combines `value` with the element already there: the
/// scatter family (scatter_add: Add; scatter_reduce: Mul, Max, Min with NaN propagating;
/// scatter: Set, the last store in loop order wins).
enum class StoreCombine { Add, Mul, Max, Min, Set };

/// A store of `value` to `access`. `accumulate` combines it with the existing element
/// (`combine`); such kernels keep one outer iteration per target slice, their stores in
/// order, so the result does not depend on the thread count.
struct Store {
  int access = -1;
  int value = -1;
  bool accumulate = false;
  StoreCombine combine = StoreCombine::Add;
};

struct Phase {
  Dims inner;                ///< Sequential domain (may be empty: one iteration).
  std::vector<Access> accesses;
  std::vector<Inst> insts;
  std::vector<Reduction> reductions; ///< Non-empty: a reduce phase.
  /// Stores run per inner iteration in a map phase; in a reduce phase they run
  /// once after the fold and may only use registers/constants/outer indices.
  std::vector<Store> stores;
};

/// Matrix product, row-major: for b in [0, batch):
///   C_b = alpha * op(A_b) * op(B_b) + beta * C_b, op = transpose when trans*.
/// Element offsets (not bytes) into buffers a/b/c; ld* are leading dimensions.
struct GemmDesc {
  DType dtype = DType::F32;
  int a = -1, b = -1, c = -1;
  bool transA = false, transB = false;
  Dim m = 0, n = 0, k = 0;
  Dim lda = 0, ldb = 0, ldc = 0;
  Dim offA = 0, offB = 0, offC = 0;
  Dim batch = 1, strideA = 0, strideB = 0, strideC = 0;
  double alpha = 1.0, beta = 0.0;
};

// How a target splits a GEMM into blocks: GemmBlocks (Schedule.h).

/// The library functions an Extern kernel can call. Each has a descriptor of its own for its
/// attributes; each target maps it to a library (CPU: cblas from OpenBLAS; CUDA: cuBLASLt).
enum class ExternFn { Gemm, Conv, Fft, Linalg };
const char *externFnName(ExternFn f); ///< "gemm", "conv", "fft", "linalg"

/// One of the three regular convolution primitives (include/aotc/Conv.h), a call of the
/// run-time kernel library (aotc_conv, runtime/include/aotc/kernels.h: oneDNN for f32,
/// im2col + GEMM for f64). Buffers are dense row-major; offsets are elements.
struct ConvDesc {
  enum class Role { Forward, InputGrad, WeightGrad } role = Role::Forward;
  DType dtype = DType::F32;
  ConvGeometry geom; ///< At the reference sizes (a run-time batch at its largest value).
  /// The batch N as a size: a run-time size when the batch is one (every other dim is constant).
  Dim batch = 0;
  /// Forward: a = x, b = w, c = y. InputGrad: a = dy, b = w, c = dx. WeightGrad: a = dy, b = x, c = dw.
  int a = -1, b = -1, c = -1;
  int64_t offA = 0, offB = 0, offC = 0;
  /// Index into KernelGraph::errors (program-wide after planning) of "the library call
  /// failed": the entry point returns error + 1 with aotc_conv's status as the value.
  int error = -1;
};
const char *convRoleName(ConvDesc::Role r); ///< "forward", "input_grad", "weight_grad"

/// One discrete Fourier transform (_fft_r2c / _fft_c2r / _fft_c2c, lib/IR/ops/Fft.cpp), a call
/// of the run-time kernel library (aotc_fft, runtime/include/aotc/kernels.h: PocketFFT). Complex
/// buffers are view_as_real pairs; buffers are dense row-major; offsets are elements.
struct FftDesc {
  enum class Kind { C2C, R2C, C2R } kind = Kind::C2C; ///< the values of AOTC_FFT_*
  DType dtype = DType::F32;
  bool forward = true;       ///< C2C only.
  bool onesided = true;      ///< R2C only: the half spectrum along the last axis, else the whole.
  Shape shape;               ///< The logical shape: R2C's input, C2R's output, C2C's (without the pair dim).
  std::vector<int64_t> axes; ///< Transformed dims of `shape`; R2C / C2R halve the last.
  double scale = 1.0;        ///< Multiplies every output element.
  int in = -1, out = -1;
  int64_t offIn = 0, offOut = 0;
  int error = -1; ///< As ConvDesc::error: aotc_fft's status is the value.
};
const char *fftKindName(FftDesc::Kind k); ///< "c2c", "r2c", "c2r"

/// One dense linear-algebra call (the aotc::lapack_* primitives, lib/IR/ops/Linalg.cpp), a call
/// of the run-time kernel library (aotc_linalg, runtime/include/aotc/kernels.h: OpenBLAS's
/// LAPACK) over `batch` matrices; the packed result layout of each kind is kernels.h's.
struct LinalgDesc {
  enum class Kind { Cholesky, TriSolve, Lu, LuSolve, Eigh, Svd, Qr, Perm } kind = Kind::Cholesky; ///< AOTC_LINALG_*
  DType dtype = DType::F32;
  bool upper = false, left = true, unit = false, adjoint = false, computeUV = true, check = false;
  int full = 0; ///< Svd: full_matrices; Qr: the mode (0 reduced, 1 complete, 2 r).
  int64_t batch = 1, m = 0, n = 0, nrhs = 0;
  int a = -1, b = -1, c = -1, out = -1; ///< Buffers (b: LuSolve's / Perm's int64 pivots).
  int64_t offA = 0, offB = 0, offC = 0, offOut = 0;
  int error = -1; ///< As ConvDesc::error: aotc_linalg's status is the value.
};
const char *linalgKindName(LinalgDesc::Kind k); ///< "cholesky", "trisolve", "lu", ...

/// A library call (Kernel::Kind::Extern).
struct ExternCall {
  ExternFn fn = ExternFn::Gemm;
  std::vector<int> inputs;  ///< Buffers read, in the function's argument order.
  std::vector<int> outputs; ///< Buffers written.
  /// A Scratch buffer the call may use as workspace (planned in the arena with the others), or -1.
  int workspace = -1;
  GemmDesc gemm;            ///< ExternFn::Gemm: shapes, layout, alpha/beta, element offsets.
  ConvDesc conv;            ///< ExternFn::Conv.
  FftDesc fft;              ///< ExternFn::Fft.
  LinalgDesc linalg;        ///< ExternFn::Linalg.
  /// True when the call computes nothing (a GEMM with m, n or batch 0): no call is emitted.
  bool empty() const;
};
/// The call of a GEMM: inputs {a, b} (and c when beta != 0), output {c}.
ExternCall gemmCall(const GemmDesc &g);
/// The call of a convolution primitive: inputs {a, b}, output {c}.
ExternCall convCall(const ConvDesc &c);
/// The call of a transform: inputs {in}, output {out}.
ExternCall fftCall(const FftDesc &f);
/// The call of a linalg kind: inputs {a, b, c} (those >= 0), output {out}.
ExternCall linalgCall(const LinalgDesc &l);

struct Kernel {
  enum class Kind { Loop, Extern } kind = Kind::Loop;
  std::string name;       ///< "k0", "k1", ... (unique within the graph).
  Dims outer;             ///< Independent iterations.
  std::vector<Phase> phases;
  std::vector<DType> regTypes; ///< Register types, indexed by Reduction::reg.
  ExternCall call;        ///< Kind::Extern only (its phases, if any, run before the call).
  std::vector<std::string> ops; ///< Fused op names ("add", "relu", ...), for --emit=kernels.
  std::vector<int> reads, writes; ///< Buffers, sorted, deduplicated.
  KernelSchedule schedule; ///< How the target runs it (scheduleProgram; invalid until then).
  bool mayFail() const;   ///< Has a bounds-checked access.
  /// An Extern kernel whose library call can fail (a convolution, FFT or linalg call: its desc's error).
  bool callMayFail() const;
};

struct KernelGraph {
  std::vector<Buffer> buffers;
  std::vector<Kernel> kernels;
  std::vector<std::string> errors; ///< Error messages (node + what), indexed by DynIndex::error.
  int64_t scratchBytes = 0;        ///< Arena size, bytes (includes the status slot when needed).
  int64_t statusOffset = -1;       ///< Byte offset in scratch of the {code, value} i64 pair, or -1.
};

/// ABI-level description of one tensor of the program descriptor.
struct AbiTensor {
  std::string name;   ///< FQN for parameters/buffers, else the node name.
  TensorType type;
  int role = 0;       ///< aotc_role.
  bool requiresGrad = false;
  int updatesInput = -1; ///< Outputs: index into inputs of the input this is the new value of.
};

/// One all-reduce bucket of a data-parallel train step (PlanTrain.cpp, abi.h aotc_bucket_desc):
/// parameter gradients of one dtype laid out contiguously (each 64-byte aligned) in the train
/// step's scratch, in the order the backward finishes them.
struct GradBucket {
  DType dtype = DType::F32;
  std::vector<int> grads;  ///< Indices into KernelProgram::grads, in finishing order.
  int64_t offset = 0;      ///< Byte offset in the train step's scratch.
  int64_t count = 0;       ///< Elements reduced, the padding between gradients included.
  int startAfter = -1;     ///< The backward kernel after which its all-reduce starts.
  /// ZeRO-1: count is a multiple of world x 64 bytes' elements; a rank's 1/world of it starts
  /// at this element of the flat shard (the sum of the earlier buckets' shares).
  int64_t shardOffset = 0;
};

/// The train step of a program compiled with --optimizer (PlanTrain.cpp, abi.h aotc_train):
/// the update and accumulate graphs, which run after the backward inside <name>_train_step.
/// Its scratch arena holds the forward's/backward's arena, then the gradients the backward
/// writes (grads[j] at gradOffsets[j]), then the arena of the update/accumulate graphs.
struct TrainPlan {
  OptimizerSpec spec;
  KernelGraph update, accumulateGraph; ///< accumulateGraph: only when `accumulate`.
  bool accumulate = false;             ///< --grad-accumulation.
  std::vector<StateTensor> states;
  std::vector<HyperParam> hypers;
  std::vector<int> params;          ///< Input indices of the updated parameters.
  int64_t stateBytes = 0;
  std::vector<int64_t> gradOffsets; ///< Byte offset of grads[j] in the train step's scratch.
  int64_t graphScratchOffset = 0;   ///< Where the update/accumulate arena starts in it.
  int64_t scratchBytes = 0;         ///< The train step's scratch arena, bytes.
  /// --data-parallel: the buckets, in the order their all-reduces start (empty otherwise).
  std::vector<GradBucket> buckets;
  int dpScaleState = -1;            ///< states index of "dp.grad_scale", or -1.
  /// ZeRO-1 (spec.zeroWorld > 0): the graph of this rank's gradient sum of squares, the states
  /// index of "dp.sumsq", the shard's length and dtype, and where its staging lies in the train
  /// scratch (TrainBinding::Kind::Staging; the train step points grads[] slots numGrads and
  /// numGrads + 1 at them): the gradient shard after the buckets (the reduce-scatters write it
  /// while the backward runs), the parameter shard over the dead forward/backward arena when
  /// it fits (not with a checked arena).
  KernelGraph shardNormGraph;
  int sumsqState = -1;
  int64_t shardElems = 0;
  DType shardDType = DType::F32;
  int64_t shardParamOffset = -1, shardGradOffset = -1;
};

/// The whole planned program: forward and backward kernel graphs plus the ABI.
struct KernelProgram {
  std::string name;
  /// Program::specializedSizes as text ("s17=37 (range [2, 64]; x:0, y:0)"), for the header.
  std::vector<std::string> specializedSizes;
  KernelGraph forward, backward;
  bool hasBackward = false;
  std::vector<AbiTensor> inputs, outputs, grads;
  std::vector<int> gradInputIndex;
  std::vector<std::string> errors;  ///< Program-wide error table (forward's, backward's, eval's).
  int backwardErrorBase = 0;        ///< Backward DynIndex::error + this = program error index.
  int64_t savedBytes = 0;
  int64_t scratchBytes = 0;         ///< max(forward, backward, eval).
  bool checkedArena = false;        ///< FusionOptions::checkedArena was set (abi.h).
  /// aotc_program::build_id (32 hex digits; the driver sets it from the compile's inputs);
  /// empty in unit tests, where the descriptor gets "0" x 32.
  std::string buildId;
  /// Byte offset in scratch of the error value ({code, value} pair at 0): 8 when an entry
  /// point can fail, else -1 (aotc_program::error_value_offset).
  int64_t errorValueOffset() const { return errors.empty() ? -1 : 8; }
  bool hasTrain = false; ///< Compiled with --optimizer: `train` is planned.
  TrainPlan train;
  /// <name>_eval (abi.h aotc_eval_fn): the forward without its saved outputs (dead code
  /// removed), in the same scratch arena. Planned when the forward saves anything (hasEval);
  /// otherwise <name>_eval runs the forward graph itself.
  KernelGraph eval;
  bool hasEval = false;
  int evalErrorBase = 0; ///< eval's DynIndex::error + this = program error index.
  /// The target the kernels' schedules were chosen for (scheduleProgram); `scheduled` is
  /// false until then.
  TargetInfo target;
  bool scheduled = false;
};

struct FusionOptions {
  bool fuse = true;            ///< false: one kernel per op (for tests/debugging).
  /// The smallest value of each run-time size symbol (Program::specializedSizes; planProgram
  /// sets it): what fusion may assume of a size expression (a leading dimension >= 1).
  std::map<std::string, int64_t> sizeMinimums;
  /// --sanitize=address: the checked arena (abi.h AOTC_PROGRAM_CHECKED_ARENA). Every saved and
  /// scratch buffer is followed by kArenaRedzone unused bytes, so neighbours never touch;
  /// the entry points poison what is not live.
  bool checkedArena = false;
  /// Plan the eval graph (KernelProgram::eval): CPU targets; the CUDA target has no eval
  /// entry point yet, so its plan (errors, scratch) leaves it out.
  bool eval = true;
  /// Index-set splitting of map kernels (lib/Codegen/IndexSplit.cpp): CPU targets; the CUDA
  /// target maps only single-phase map kernels to its elementwise launch (GpuLaunch.cpp), so
  /// a split kernel would run a thread per row there.
  bool splitIndexSets = true;
};
/// `o` as target `target` ("cpu", "cuda") takes it: eval and splitIndexSets off for CUDA.
/// Defined in lib/Codegen/Codegen.cpp; every caller that plans for a target goes through it.
FusionOptions fusionOptionsFor(FusionOptions o, const std::string &target);
/// Bytes between two planned buffers in a checked arena.
constexpr int64_t kArenaRedzone = 64;

/// The targets codegen lowers (lib/Codegen/OpLowering.cpp's table, and the primitives whose
/// OpDef::scalar names their one scalar operation), sorted. Every
/// target of primitiveTargets() (Decompositions.h) is one of them.
std::vector<std::string> codegenTargets();

/// Plans one graph whose placeholders/outputs are bound to `bind*` buffers
/// (already in `kg.buffers`): builds fused kernels in execution order, then
/// plans the scratch arena. `inputBuffers[i]` is the buffer of placeholder i;
/// `outputBuffers[k]` the buffer that output k must be written to (dense).
/// Unsupported ops raise nodeError.
void fuseGraph(const Graph &g, KernelGraph &kg, const std::vector<int> &inputBuffers,
               const std::vector<int> &outputBuffers, const FusionOptions &opts);

/// Plans a partitioned Program (see the stage contracts in docs/abi.md):
/// forward in[i] = primal i, out[k] = user output k, saved tensors in the saved
/// area; backward tangents/grads as abi.h. A Program without backward nodes gets
/// an empty backward. Program stage must be "partition" (or a forward-only graph).
KernelProgram planProgram(const Program &p, const FusionOptions &opts = {});
/// Plans the train step `t` (Optimizer.h) of an already planned program (PlanTrain.cpp):
/// binds its graphs' placeholders and outputs (parameters and state in place), fuses them
/// and lays out the train step's scratch. Sets kp.hasTrain.
void planTrainStep(KernelProgram &kp, const TrainStep &t, const FusionOptions &opts = {});

/// Arena planning (greedy best fit by size, 64-byte aligned). `live[i]` is the
/// inclusive [first, last] step range of buffer i, sizes in bytes. Returns each
/// buffer's offset and sets `total` to the arena size. Two buffers whose ranges
/// intersect never overlap in memory. Deterministic.
std::vector<int64_t> planArena(const std::vector<std::pair<int, int>> &live,
                               const std::vector<int64_t> &sizes, int64_t &total,
                               int64_t alignment = 64);
/// Computes liveness of the Scratch buffers of `kg` from kernel order and assigns
/// their offsets (after the status slot when a kernel may fail).
/// `redzone` bytes (kArenaRedzone for a checked arena, else 0) are added after every buffer.
void planScratch(KernelGraph &kg, int64_t redzone = 0);

// isColumnReduction: Schedule.h.

/// `--emit=kernels` text: a header naming the target the schedules are for, then one line per
/// kernel, e.g.
///   kernel k3: ops=[add, relu] reads=[addmm_1] writes=[relu] domain=[64, 256] schedule=[parallel=2 vector=d1x4]
/// `schedule=[..]` is scheduleText (Schedule.h): on the CPU `parallel=N` (the leading outer
/// dims on the thread team; absent: one thread), `lanes=N`, `vector=dIxW`, a GEMM's
/// `blocks=COUNTxSIZE{rows|cols}` and `parallel`; on CUDA
///   cuda=<mapping> grid=<blocks> block=<threads> [vec=4]   (KernelSchedule::gpu)
/// and split-row kernels add `final=<blocks>x<threads> partials=scratch+<byte offset>` (the
/// second kernel's launch and where the partials live, `partialsOffset`).
/// After each graph: `# <graph> scratch buffers: ...` and `# <graph> buffers: name=location ...`
/// (in[i], out[i], tangents[i], grads[i], saved+offset, scratch+offset or none), in buffer-id
/// order, which is the order of a kernel's pointer arguments. An unscheduled kp is printed with
/// the schedule of the CPU's default target ("multi").
std::string printKernels(const KernelProgram &kp);
std::string printKernelGraph(const KernelGraph &kg, const std::string &title, const TargetInfo &t,
                             int64_t partialsOffset = 0);

} // namespace aotc
