//===- CodegenInternal.h - Between MLIRGen.cpp and ObjectEmit.cpp -*- C++ -*-===//
//
// Internal to lib/Codegen. MLIRGen.cpp builds each Loop kernel as a func.func
// (MLIR scf/memref/arith/math), lowers it to the LLVM dialect (scf.parallel via
// OpenMP) and translates it to an llvm::Module. ObjectEmit.cpp then writes the
// ABI entry points, BLAS calls and the program descriptor with llvm::IRBuilder,
// optimizes (-O3) and emits the object.
//===----------------------------------------------------------------------===//
#pragma once

#include "aotc/Codegen.h"

#include <memory>
#include <string>

namespace llvm {
class LLVMContext;
class Module;
} // namespace llvm

namespace aotc::cg {

/// Symbol of a kernel function: "<name>_fwd_k3" / "<name>_bwd_k0".
std::string kernelSymbol(const std::string &prog, bool backward, const std::string &kernel);

/// Symbol of a Gemm kernel's GEMM function "<name>_fwd_k3_gemm": takes the base
/// pointers of buffers gemm.a, gemm.b, gemm.c (offsets are applied inside) and
/// runs the blocks of gemmBlocks() (Kernels.h), one cblas call each. Absent
/// when m, n or batch is 0.
std::string gemmSymbol(const std::string &prog, bool backward, const std::string &kernel);

/// Builds and lowers the Loop kernels of both graphs. Kernel function k takes
/// one pointer per buffer of (k.reads ∪ k.writes), ascending buffer id, then a
/// pointer to the {code, value} i64 status pair when k.mayFail(). Gemm kernels
/// with init phases get a loop function too (for the phases only).
/// `mlirText` (optional) receives the module before lowering.
std::unique_ptr<llvm::Module> buildKernelModule(const KernelProgram &kp, llvm::LLVMContext &ctx,
                                                std::string *mlirText);

/// CUDA target (GpuGen.cpp): every Loop kernel of both graphs as a gpu.func (symbol
/// kernelSymbol(), the same arguments as the CPU kernel function, launched as gpuLaunch()
/// says), lowered through NVVM to PTX for o.archs.front(). Returns the PTX text (no NUL).
/// `mlirText` (optional) receives the gpu.module before lowering.
std::string buildGpuPtx(const KernelProgram &kp, const CudaOptions &o, std::string *mlirText);

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

/// Buffer ids a kernel function takes, in argument order.
std::vector<int> kernelArgs(const Kernel &k);

} // namespace aotc::cg
