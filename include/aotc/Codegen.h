//===- Codegen.h - Fused kernels -> object file + C header -----*- C++ -*-===//
//
// Stage "kernels/mlir/llvm" of the pipeline. Input: a partitioned Program
// (primitives only, see docs/stage-codegen.md). Output: an Artifact holding a
// relocatable, position-independent x86-64 ELF object. For the CPU target
// (MLIRGen.cpp + ObjectEmit.cpp) it defines
//   aotc_context *<name>_context_create(void);  void <name>_context_destroy(aotc_context*);
//   int <name>_forward(aotc_context* ctx, const void*const* in, void*const* out, void* saved,
//                      void* scratch);
//   int <name>_backward(aotc_context* ctx, const void*const* in, const void* saved,
//                       const void*const* tangents, void*const* grads, void* scratch);
//   int <name>_eval(aotc_context* ctx, const void*const* in, void*const* out, void* scratch);
//   const aotc_program <name>_program;
// and, with --optimizer, <name>_train_step (docs/training.md), exactly as
// runtime/include/aotc/abi.h (AOTC_ABI_VERSION), plus the matching C header.
// Undefined symbols of the CPU object: cblas_sgemm/cblas_dgemm (OpenBLAS),
// __kmpc_* (LLVM libomp), libm functions, memset/memcpy, calloc/free in the context
// functions only (the entry points never allocate), and libaotc_kernels' aotc_conv* /
// aotc_kernels_state_* when the program has convolutions (docs/abi.md).
// --target=cuda (GpuGen.cpp, CudaFatbin.cpp, CudaHost.cpp; docs/cuda.md): the same
// x86-64 object holds a fatbin and host entry points that call the CUDA runtime
// (runtime/cuda, aotc_cuda_launch / aotc_cuda_matmul) and define <name>_program as an
// aotc_cuda_program.
// The same Program and options always give byte-identical object and header.
//===----------------------------------------------------------------------===//
#pragma once

#include "aotc/Graph.h"
#include "aotc/Kernels.h"

#include <cstdint>
#include <string>
#include <vector>

namespace aotc {

/// The CUDA target's options (--target=cuda; docs/cuda.md).
struct CudaOptions {
  /// --cuda-arch, ascending ("sm_80", "sm_90"): PTX is generated once for the first (lowest).
  std::vector<std::string> archs = {"sm_80", "sm_90"};
  std::string toolkit = "/usr/local/cuda"; ///< --cuda-toolkit: libdevice, ptxas, fatbinary.
  bool allowTf32 = false; ///< --allow-tf32: f32 GEMMs may use TF32 (aotc_cuda_gemm_desc::allow_tf32).
};

// How the CUDA target runs a Loop kernel: GpuLaunch (Schedule.h), in KernelSchedule::gpu.
/// CUDA target: byte offset in the scratch arena of the SplitRow partials (after the
/// arena the CPU target plans, 256-byte aligned), and the arena size with them.
int64_t gpuPartialsOffset(const KernelProgram &kp);
int64_t gpuScratchBytes(const KernelProgram &kp); ///< kp scheduled for CUDA (its partials)

struct CodegenOptions {
  std::string name;            ///< C identifier for the entry points; empty: Program::name.
  std::string target = "cpu";  ///< "cpu" or "cuda".
  CudaOptions cuda;            ///< target "cuda" only.
  bool emitPtx = false;        ///< target "cuda": fill Artifact::ptxText.
  bool emitFatbin = false;     ///< target "cuda": fill Artifact::fatbin (runs ptxas + fatbinary).
  /// CPU target: "multi" (x86-64-v2, -v3 and -v4 clones of every kernel, chosen per context by
  /// CPUID; Multiversion.cpp), an LLVM CPU name (x86-64-v2, x86-64-v3, x86-64-v4) or "native"
  /// (the compiling machine's CPU and features). The driver turns its "host" into
  /// hostCpuLevel() first.
  std::string cpu = "multi";
  /// CPU target: the library of f32 GEMMs, TargetInfo::gemmLibrary ("openblas", "auto",
  /// "onednn").
  std::string cpuGemm = "openblas";
  bool emitKernels = false;    ///< Fill Artifact::kernelsText.
  bool emitMLIR = false;       ///< Fill Artifact::mlirText (before lowering to LLVM dialect).
  bool emitLLVM = false;       ///< Fill Artifact::llvmText (optimized LLVM IR).
  bool emitObject = true;      ///< Run the LLVM backend (false: stop after the requested texts).
  /// --sanitize: "" (none), "address" (AddressSanitizer on the generated LLVM IR; plan with
  /// fusion.checkedArena) or "thread" (ThreadSanitizer). CPU target only.
  std::string sanitize;
  FusionOptions fusion;
};

struct Artifact {
  std::vector<uint8_t> object; ///< ELF relocatable object (empty unless emitObject).
  std::string header;          ///< The C header text.
  std::string kernelsText, mlirText, llvmText;
  std::string ptxText; ///< target "cuda": the PTX of all kernels, from its `.version` line.
  std::vector<uint8_t> fatbin; ///< target "cuda": cubins for every --cuda-arch + the PTX.
  std::string toolVersions;    ///< target "cuda": ptxas and fatbinary version lines.
  int64_t savedBytes = 0;      ///< Size of the saved area, bytes.
  int64_t scratchBytes = 0;    ///< Size of the scratch arena, bytes.
  int numKernels = 0;          ///< Forward + backward kernels.
};

/// The x86-64 level a --cpu=multi object runs on this machine ("x86-64-v2", "-v3" or "-v4"):
/// the same CPU features and OS state that its context_create checks (Multiversion.cpp), read
/// through LLVM (llvm::sys::getHostCPUFeatures). AOTC_CPU does not change it.
std::string hostCpuLevel();

/// Compiles a partitioned Program. Errors: nodeError for unsupported ops or
/// shapes (exit 1), internalError when MLIR/LLVM fail (exit 2).
Artifact compileProgram(const Program &p, const CodegenOptions &opts);

/// User error listing every node of p (stage partition or lower) that `target` ("cpu",
/// "cuda") cannot compile yet, e.g. a convolution for CUDA; nothing when all can be.
void checkTargetSupport(const Program &p, const std::string &target);

/// The TargetInfo (Schedule.h) of opts: cudaTargetInfo() or cpuTargetInfo(opts.cpu).
TargetInfo targetInfoOf(const CodegenOptions &opts);

/// Lower level: the object (and optional texts) of an already planned program, scheduled by
/// scheduleProgram for targetInfoOf(opts) (an unscheduled one is scheduled here first).
/// Implemented in lib/Codegen/ObjectEmit.cpp: MLIRGen.cpp for the CPU; GpuGen.cpp,
/// CudaFatbin.cpp and CudaHost.cpp for --target=cuda (lib/Codegen is the only MLIR/LLVM code).
void emitObject(const KernelProgram &kp, const CodegenOptions &opts, Artifact &out);

/// The C header for a planned program ("Generated by aotc — DO NOT EDIT"); target "cuda"
/// declares the CUDA entry points (abi.h's second half) and 256-byte device alignment.
/// It defines <name>_BUILD_ID (kp.buildId) and, compiled as C++, checks at static
/// initialization that the linked object has the same build id (else: a message naming
/// both, then abort, as protobuf's version check does).
std::string emitHeader(const KernelProgram &kp, const std::string &target = "cpu");

/// True when `s` is a valid C identifier (the --name check).
bool isCIdentifier(const std::string &s);

} // namespace aotc
