//===- CodegenInternal.h - Between MLIRGen.cpp and ObjectEmit.cpp -*- C++ -*-===//
//
// Internal to lib/Codegen. MLIRGen.cpp builds each Loop kernel as a func.func
// (MLIR scf/memref/arith/math), lowers it to the LLVM dialect (scf.parallel via
// OpenMP) and translates it to an llvm::Module. ObjectEmit.cpp then writes the
// ABI entry points, BLAS calls and the program descriptor with llvm::IRBuilder,
// optimizes (-O2) and emits the object.
//===----------------------------------------------------------------------===//
#pragma once

#include "aotc/Codegen.h"

#include "llvm/IR/IRBuilder.h"

#include <map>
#include <memory>
#include <string>

namespace llvm {
class LLVMContext;
class Module;
} // namespace llvm

namespace aotc::cg {

/// Symbol of a kernel function: "<name>_fwd_k3" / "<name>_bwd_k0".
std::string kernelSymbol(const std::string &prog, bool backward, const std::string &kernel);
/// The same for any graph tag: "fwd", "bwd", "upd" (update), "acc" (accumulate).
std::string kernelSymbol(const std::string &prog, const std::string &tag, const std::string &kernel);

/// Symbol of a GEMM extern kernel's GEMM function "<name>_fwd_k3_gemm": takes the base
/// pointers of buffers gemm.a, gemm.b, gemm.c (offsets are applied inside) and
/// runs the blocks of its schedule (KernelSchedule::gemm, Schedule.h), one cblas call each. Absent
/// when m, n or batch is 0.
std::string gemmSymbol(const std::string &prog, bool backward, const std::string &kernel);
std::string gemmSymbol(const std::string &prog, const std::string &tag, const std::string &kernel);

/// Builds and lowers the Loop kernels of both graphs. Kernel function k takes
/// one pointer per buffer of (k.reads ∪ k.writes), ascending buffer id, then a
/// pointer to the {code, value} i64 status pair when k.mayFail(). GEMM extern kernels
/// with init phases get a loop function too (for the phases only).
/// `mlirText` (optional) receives the module before lowering.
std::unique_ptr<llvm::Module> buildKernelModule(const KernelProgram &kp, llvm::LLVMContext &ctx,
                                                std::string *mlirText);

/// CUDA target (GpuGen.cpp): every Loop kernel of both graphs as a gpu.func (symbol
/// kernelSymbol(), the same arguments as the CPU kernel function, launched as gpuLaunch()
/// says), lowered through NVVM to PTX for o.archs.front(). Returns the PTX text (no NUL).
/// `mlirText` (optional) receives the gpu.module before lowering.
std::string buildGpuPtx(const KernelProgram &kp, const CudaOptions &o, std::string *mlirText);

/// The arch the PTX is generated for: the lowest --cuda-arch, capped at sm_90 (the newest
/// that LLVM 19's NVPTX back end knows; ptxas assembles sm_90 PTX for any newer GPU).
std::string ptxArch(const CudaOptions &o);

/// ptxas's resource report for one arch (`-v`), and the spill bytes summed over kernels.
struct PtxasReport {
  std::string arch, log;
  int64_t spillBytes = 0;
};
/// The fatbin of one program (CudaFatbin.cpp): a cubin per o.archs entry (`ptxas -O3 -v`)
/// plus the PTX for o.archs.front(), packed by `fatbinary`; the tools' version lines.
struct CudaBinary {
  std::vector<uint8_t> fatbin;
  std::string ptxasVersion, fatbinaryVersion;
  std::vector<PtxasReport> reports;
};
/// Errors: a missing tool is a user error naming --cuda-toolkit; a tool failure is internal.
CudaBinary buildFatbin(const std::string &ptx, const CudaOptions &o);

/// The pointer arguments of an entry point (NULL where the entry point has none); ctx is the
/// ABI context, past checkContext.
struct EntryArgs {
  llvm::Value *in = nullptr, *out = nullptr, *saved = nullptr, *tangents = nullptr,
              *grads = nullptr, *scratch = nullptr, *ctx = nullptr;
  llvm::Value *state = nullptr, *hyper = nullptr; ///< The train step's (update/accumulate graphs).
};
/// Address of buffer `bf` inside an entry point (HostCommon.cpp): a load from the
/// in/out/tangents/grads array, or saved/scratch + the buffer's byte offset.
llvm::Value *bufferPointer(llvm::IRBuilder<> &b, const Buffer &bf, const EntryArgs &a);
/// Creates the exported entry point `int name(void *, ... nPtrParams times)` (nounwind) and
/// puts b at the start of its entry block.
llvm::Function *beginEntryPoint(llvm::IRBuilder<> &b, llvm::Module &M, const std::string &name,
                                unsigned nPtrParams);
/// The ABI context functions (abi.h) of program `prog`: `aotc_context *<prog>_context_create(void)`
/// (calloc of kContextBytes; the first word holds the address of the private constant
/// "aotc_context:<prog>", which identifies the program; with `libraryState` the word
/// kContextStateWord holds an aotc_kernels_state (aotc/kernels.h) made here, and a failed
/// aotc_kernels_state_create frees the context and returns NULL), `void
/// <prog>_context_destroy(aotc_context *)` (destroys the state, then free; NULL is fine) and
/// the internal `const char *<prog>.context_error(const aotc_context *)` of the descriptor
/// (aotc_kernels_state_error of the context's state; NULL without library state, for NULL or
/// another program's context).
struct ContextFns {
  llvm::Function *create = nullptr, *destroy = nullptr, *error = nullptr;
  llvm::GlobalVariable *tag = nullptr; ///< The owner word's target.
};
ContextFns emitContextFunctions(llvm::IRBuilder<> &b, llvm::Module &M, const std::string &prog,
                                bool libraryState);
/// Bytes of an ABI context today: the owner word, the library state's word, the rest reserved.
constexpr int64_t kContextBytes = 64;
/// The word (index of an 8-byte slot) of the context holding the aotc_kernels_state pointer.
constexpr int64_t kContextStateWord = 1;
/// The word of the context holding the profile counters (abi.h aotc_profile_attach_fn), or NULL.
constexpr int64_t kContextProfileWord = 2;
/// The word of the context holding the x86-64 level a multiversioned object runs (0 = v2,
/// 1 = v3, 2 = v4; Multiversion.cpp); 0 in other objects, which never read it.
constexpr int64_t kContextCpuWord = 3;
/// The word of the context holding the data-parallel communicator (abi.h aotc_comm, ABI 10.1),
/// set by aotc_train::set_comm; NULL: one process.
constexpr int64_t kContextCommWord = 4;
/// Loads the aotc_kernels_state pointer of a (checked) context.
llvm::Value *contextState(llvm::IRBuilder<> &b, llvm::Value *ctx);
/// At the insertion point of an entry point: returns AOTC_ERROR_CONTEXT unless `ctx` is a
/// context made by `fns.create` (its owner word is `fns.tag`); continues in a new block.
void checkContext(llvm::IRBuilder<> &b, llvm::Value *ctx, const ContextFns &fns);
/// At the insertion point of an entry point: returns AOTC_ERROR_NULL_ARGUMENT when one of the
/// pointer arguments the call needs is NULL; each argument comes with whether the call needs it
/// (an array of a non-empty list, an area of non-zero size); continues in a new block.
void checkNonNull(llvm::IRBuilder<> &b, const std::vector<std::pair<llvm::Value *, bool>> &args);
/// At the insertion point of an entry point: returns `ret` (default: `rc` itself) when the i32
/// `rc` is not 0; continues in a new block ("<label>.failed" / "<label>.ok").
void returnIfNonZero(llvm::IRBuilder<> &b, llvm::Value *rc, const std::string &label, llvm::Value *ret = nullptr);
/// The descriptor structs of abi.h as LLVM types (AbiTypes.cpp, the compiler's one spelling of
/// them; created once per context, by name).
enum class AbiStruct {
  TensorDesc, StateDesc, HyperDesc, Train, Program, CudaModule, CudaGemmDesc, CudaProgram, KernelDesc,
  BucketDesc, Comm
};
llvm::StructType *abiType(llvm::LLVMContext &C, AbiStruct s);
/// A private, unnamed_addr constant global holding `init`.
llvm::Constant *privateConstant(llvm::Module &M, llvm::Constant *init, const std::string &name);
/// A NUL-terminated private string constant.
llvm::Constant *stringConstant(llvm::Module &M, const std::string &s);
/// Calls fn(graph, tag) for each kernel graph of kp that the CPU object emits, in this order:
/// forward "fwd", backward "bwd", eval "evl", update "upd", accumulate "acc", ZeRO-1's shard
/// norm "nrm" (the tags in kernel symbols and the kernel table's order).
template <class F> void forEachGraph(const KernelProgram &kp, F &&fn) {
  fn(kp.forward, "fwd");
  if (kp.hasBackward) fn(kp.backward, "bwd");
  if (kp.hasEval) fn(kp.eval, "evl");
  if (kp.hasTrain) {
    fn(kp.train.update, "upd");
    if (kp.train.accumulate) fn(kp.train.accumulateGraph, "acc");
    if (kp.train.spec.zeroWorld > 0) fn(kp.train.shardNormGraph, "nrm");
  }
}

/// One row of the kernel table (abi.h aotc_kernel_desc; Profile.cpp).
struct ProfileRow {
  std::string graph, name, kind, ops;
  int64_t bytes = 0;
  double flops = 0;
  DType dtype = DType::F32;
  int trans = 0;
  int64_t m = 0, n = 0, k = 0, batch = 0;
};
/// Every kernel of the forward, backward, eval, update and accumulate graphs, in that order;
/// base[tag]: the row of the first kernel of the graph emitted with that tag ("fwd", "bwd",
/// "evl", "upd", "acc").
struct ProfileTable {
  std::vector<ProfileRow> rows;
  std::map<std::string, int> base;
};
ProfileTable profileTable(const KernelProgram &kp);
/// The descriptor's kernel table and its internal `int <prog>.profile_attach(ctx, counters)`.
struct ProfileDesc {
  int count = 0;
  llvm::Constant *table = nullptr;   ///< NULL: no kernels (or a CUDA object's base).
  llvm::Function *attach = nullptr;  ///< NULL in a CUDA object's base.
};
ProfileDesc profileDescriptor(llvm::Module &M, const KernelProgram &kp, const ProfileTable &t, const ContextFns &ctx);
/// Loads the counters pointer of a (checked) context: once per entry point.
llvm::Value *contextProfile(llvm::IRBuilder<> &b, llvm::Value *ctx);
/// Before a kernel: the clock when `counters` is non-null, else 0.
llvm::Value *profileBegin(llvm::IRBuilder<> &b, llvm::Module &M, llvm::Value *counters);
/// After it: when `counters` is non-null, adds the elapsed time and one call to row `index`.
void profileEnd(llvm::IRBuilder<> &b, llvm::Module &M, llvm::Value *counters, int index, llvm::Value *t0);

/// The initializer of the `aotc_program` descriptor (abi.h) of kp with error table `errors`;
/// fwd/bwd may be NULL (the CUDA object's base descriptor has no CPU entry points).
/// errorValueOffset: aotc_program::error_value_offset; flags: AOTC_PROGRAM_* bits.
llvm::Constant *programDescriptor(llvm::Module &M, const KernelProgram &kp,
                                  const std::vector<std::string> &errors, llvm::Constant *fwd,
                                  llvm::Constant *bwd, int64_t errorValueOffset, uint32_t flags,
                                  const ContextFns &ctx, llvm::Function *trainStep = nullptr,
                                  llvm::Function *eval = nullptr, const ProfileDesc &profile = {});
/// --cpu=multi (Multiversion.cpp): clones everything the entry points of `prog` reach for
/// x86-64-v2, -v3 and -v4 ("target-cpu" attributes), makes the exported entry points
/// dispatch on the context's kContextCpuWord, and has <prog>_context_create set it (CPUID,
/// capped by AOTC_CPU). Runs before finishObject.
void multiversion(llvm::Module &M, const std::string &prog);
/// Verifies M, optimizes it at -O2 for opts.cpu (x86-64 Linux, PIC), fills out.llvmText
/// when opts.emitLLVM and out.object when opts.emitObject. Internal errors exit 2.
void finishObject(llvm::Module &M, const std::string &prog, const CodegenOptions &opts, Artifact &out);

/// The CUDA object (CudaHost.cpp), after out.fatbin and out.toolVersions are set: the
/// fatbin as a constant, <name>_forward/_backward(…, const aotc_cuda_exec*) that check
/// 256-byte alignment and enqueue the kernels (aotc_cuda_launch) and GEMMs
/// (aotc_cuda_matmul) in order, and `const aotc_cuda_program <name>_program`.
void emitCudaObject(const KernelProgram &kp, const CodegenOptions &opts, Artifact &out);
/// FNV-1a of the program name, never 0: written by a failing CUDA kernel into the third
/// word of the device error word so that aotc_cuda_check finds the program's messages.
uint32_t cudaProgramId(const std::string &prog);

/// Buffer ids a kernel function takes, in argument order.
std::vector<int> kernelArgs(const Kernel &k);

} // namespace aotc::cg
