//===- CudaHost.cpp - The host side of a --target=cuda object ---------------===//
//
// emitCudaObject (CodegenInternal.h): after GpuGen.cpp built the kernels and
// CudaFatbin.cpp packed them, this writes, with llvm::IRBuilder, an x86-64 ELF
// object holding
//  * the fatbin as a private constant byte array (8-byte aligned) and the
//    `aotc_cuda_module` constant naming its kernels (runtime/include/aotc/abi.h);
//  * <name>_context_create/_destroy (HostCommon.cpp, as the CPU object's);
//  * <name>_forward(ctx, in, out, saved, scratch, exec) and
//    <name>_backward(ctx, in, saved, tangents, grads, scratch, exec): first the context is
//    checked (AOTC_ERROR_CONTEXT), then every
//    tensor pointer is checked for AOTC_CUDA_ALIGNMENT (a failure returns the code
//    of a message naming the tensor, the pointer in error_value); then, in kernel
//    order, one aotc_cuda_launch per Loop kernel (and per GEMM extern kernel's init
//    phases) with the grid/block of its schedule (KernelSchedule::gpu) and one aotc_cuda_matmul per GEMM
//    with a constant aotc_cuda_gemm_desc. A non-zero return of the runtime is
//    returned at once. Nothing else is called: no sync, no allocation, no copy;
//  * `const aotc_cuda_program <name>_program`.
// Kernels that check an index get exec->error_word as their last argument.
//===----------------------------------------------------------------------===//
#include "CodegenInternal.h"

#include "aotc/Diagnostics.h"

#include "llvm/IR/Constants.h"
#include "llvm/IR/LLVMContext.h"
#include "llvm/IR/Module.h"

#include <climits>
#include <sstream>

namespace aotc::cg {

uint32_t cudaProgramId(const std::string &prog) {
  uint32_t h = 2166136261u;
  for (unsigned char c : prog) {
    h ^= c;
    h *= 16777619u;
  }
  return h == 0 ? 1 : h;
}

namespace {

using llvm::Value;

constexpr int64_t kCudaAlignment = 256; // AOTC_CUDA_ALIGNMENT

struct CudaHostBuilder {
  const KernelProgram &kp;
  const CodegenOptions &opts;
  llvm::Module &M;
  llvm::LLVMContext &C;
  llvm::IRBuilder<> b;
  llvm::Type *ptr;
  llvm::Constant *module = nullptr;
  llvm::FunctionCallee launchFn, matmulFn;
  std::vector<std::string> errors;        ///< kp.errors, then the alignment messages.
  std::map<std::string, int> kernelIndex; ///< kernel symbol -> index in the module's table.
  // Per entry point:
  Value *exec = nullptr, *vals = nullptr, *argv = nullptr;
  int maxArgs = 1;

  CudaHostBuilder(const KernelProgram &p, const CodegenOptions &o, llvm::Module &m)
      : kp(p), opts(o), M(m), C(m.getContext()), b(m.getContext()), ptr(llvm::PointerType::get(C, 0)) {
    errors = kp.errors;
  }

  /// The Loop kernels (and Gemm kernels with init phases) of both graphs, in entry order.
  std::vector<std::string> kernelSymbols() {
    std::vector<std::string> names;
    for (bool bwd : {false, true}) {
      if (bwd && !kp.hasBackward) break;
      const KernelGraph &kg = bwd ? kp.backward : kp.forward;
      for (const Kernel &k : kg.kernels) {
        if (k.phases.empty()) continue;
        std::string sym = kernelSymbol(kp.name, bwd, k.name);
        kernelIndex[sym] = (int)names.size();
        names.push_back(sym);
        if (k.schedule.gpu.finalGrid > 0) {
          kernelIndex[sym + "_final"] = (int)names.size();
          names.push_back(sym + "_final");
        }
        maxArgs = std::max<int>(maxArgs, (int)kernelArgs(k).size() + 2);
      }
    }
    return names;
  }

  llvm::Constant *stringArray(const std::vector<std::string> &ss, const std::string &name) {
    if (ss.empty()) return llvm::ConstantPointerNull::get(llvm::PointerType::get(C, 0));
    std::vector<llvm::Constant *> cs;
    for (auto &s : ss) cs.push_back(stringConstant(M, s));
    return privateConstant(M, llvm::ConstantArray::get(llvm::ArrayType::get(ptr, cs.size()), cs), name);
  }

  /// Adds an alignment message for `what` and returns its error code (1-based).
  int alignmentError(const std::string &entry, const std::string &what) {
    errors.push_back(kp.name + "_" + entry + ": " + what + " is not a " + std::to_string(kCudaAlignment) +
                     "-byte aligned device pointer (AOTC_CUDA_ALIGNMENT)");
    return (int)errors.size();
  }

  /// if (p % 256 != 0) { if (exec->host_error_value) *exec->host_error_value = p; return code; }
  void checkAligned(Value *p, int code, const std::string &label) {
    llvm::Function *F = b.GetInsertBlock()->getParent();
    Value *bits = b.CreateAnd(b.CreatePtrToInt(p, b.getInt64Ty()), b.getInt64(kCudaAlignment - 1));
    auto *bad = llvm::BasicBlock::Create(C, label + ".misaligned", F);
    auto *ok = llvm::BasicBlock::Create(C, label + ".aligned", F);
    b.CreateCondBr(b.CreateICmpNE(bits, b.getInt64(0)), bad, ok);
    b.SetInsertPoint(bad);
    // aotc_cuda_exec::host_error_value: after 6 pointer-sized fields and two int32 (offset 56).
    Value *hev = b.CreateAlignedLoad(ptr, b.CreateConstInBoundsGEP1_64(b.getInt8Ty(), exec, 56), llvm::Align(8));
    auto *store = llvm::BasicBlock::Create(C, label + ".report", F);
    auto *ret = llvm::BasicBlock::Create(C, label + ".return", F);
    b.CreateCondBr(b.CreateIsNotNull(hev), store, ret);
    b.SetInsertPoint(store);
    b.CreateAlignedStore(b.CreatePtrToInt(p, b.getInt64Ty()), hev, llvm::Align(8));
    b.CreateBr(ret);
    b.SetInsertPoint(ret);
    b.CreateRet(b.getInt32(code));
    b.SetInsertPoint(ok);
  }

  /// Checks every pointer of an array argument (`count` slots named by ts).
  void checkArray(const std::string &entry, const char *arr, Value *base, const std::vector<AbiTensor> &ts) {
    for (size_t i = 0; i < ts.size(); ++i) {
      std::string what = std::string(arr) + "[" + std::to_string(i) + "] '" + ts[i].name + "'";
      Value *slot = b.CreateConstInBoundsGEP1_64(ptr, base, i);
      Value *p = b.CreateAlignedLoad(ptr, slot, llvm::Align(8), std::string(arr) + std::to_string(i));
      checkAligned(p, alignmentError(entry, what), std::string(arr) + std::to_string(i));
    }
  }

  /// Returns early with the runtime's code when it is not 0.
  void returnIfFailed(Value *rc, const std::string &label) { cg::returnIfNonZero(b, rc, label); }

  llvm::Constant *gemmDesc(const GemmDesc &g, const std::string &sym) {
    for (int64_t v : {g.m, g.n, g.k, g.lda, g.ldb, g.ldc})
      if (v > INT32_MAX) userError("codegen: matrix dimension " + std::to_string(v) + " exceeds the cuBLAS int range");
    llvm::Type *f64t = b.getDoubleTy();
    auto *ty = abiType(C, AbiStruct::CudaGemmDesc);
    auto I = [&](int64_t v) { return b.getInt64(v); };
    llvm::Constant *init = llvm::ConstantStruct::get(
        ty, {b.getInt32((int)g.dtype), b.getInt32(g.transA), b.getInt32(g.transB),
             b.getInt32(opts.cuda.allowTf32 && g.dtype == DType::F32 ? 1 : 0), I(g.m),
             I(g.n), I(g.k), I(std::max<int64_t>(g.lda, 1)), I(std::max<int64_t>(g.ldb, 1)),
             I(std::max<int64_t>(g.ldc, 1)), I(g.batch), I(g.strideA), I(g.strideB), I(g.strideC),
             llvm::ConstantFP::get(f64t, g.alpha), llvm::ConstantFP::get(f64t, g.beta),
             stringConstant(M, sym)});
    return privateConstant(M, init, sym + ".gemm");
  }

  void emitGraph(const KernelGraph &kg, bool bwd, const EntryArgs &ea) {
    Value *errorWord = nullptr;
    for (const Kernel &k : kg.kernels) {
      std::vector<Value *> ptrs(kg.buffers.size(), nullptr);
      auto need = [&](int id) {
        if (!ptrs[id]) ptrs[id] = bufferPointer(b, kg.buffers[id], ea);
        return ptrs[id];
      };
      std::string sym = kernelSymbol(kp.name, bwd, k.name);
      if (!k.phases.empty() && k.schedule.gpu.grid > 0) { // grid 0: an empty domain
        std::vector<Value *> args;
        for (int id : kernelArgs(k)) args.push_back(need(id));
        if (k.mayFail()) {
          if (!errorWord) {
            // aotc_cuda_exec::error_word: the 6th pointer-sized field (byte offset 40).
            Value *slot = b.CreateConstInBoundsGEP1_64(b.getInt8Ty(), exec, 40);
            errorWord = b.CreateAlignedLoad(ptr, slot, llvm::Align(8), "error_word");
          }
          args.push_back(errorWord);
        }
        const GpuLaunch &l = k.schedule.gpu;
        if (l.partialValues > 0) // the f64 partials, after the planned arena
          args.push_back(b.CreateConstInBoundsGEP1_64(b.getInt8Ty(), ea.scratch, gpuPartialsOffset(kp), "partials"));
        for (size_t i = 0; i < args.size(); ++i) {
          Value *v = b.CreateConstInBoundsGEP1_64(ptr, vals, i);
          b.CreateAlignedStore(args[i], v, llvm::Align(8));
          b.CreateAlignedStore(v, b.CreateConstInBoundsGEP1_64(ptr, argv, i), llvm::Align(8));
        }
        if (l.grid > INT32_MAX) userError("codegen (cuda): kernel " + sym + " needs " + std::to_string(l.grid) + " blocks");
        Value *rc = b.CreateCall(launchFn, {exec, module, b.getInt32(kernelIndex.at(sym)),
                                            b.getInt32((uint32_t)l.grid), b.getInt32((uint32_t)l.block), argv});
        returnIfFailed(rc, sym);
        if (l.finalGrid > 0) {
          rc = b.CreateCall(launchFn, {exec, module, b.getInt32(kernelIndex.at(sym + "_final")),
                                       b.getInt32((uint32_t)l.finalGrid), b.getInt32((uint32_t)l.block), argv});
          returnIfFailed(rc, sym + "_final");
        }
      }
      if (k.kind == Kernel::Kind::Extern && !k.call.empty()) {
        AOTC_ASSERT(k.call.fn == ExternFn::Gemm, "cuda: extern call without a CUDA library mapping"); // Conv: refused in fuseGraph's caller
        const GemmDesc &g = k.call.gemm;
        llvm::Type *et = g.dtype == DType::F64 ? b.getDoubleTy() : b.getFloatTy();
        Value *pa = b.CreateConstInBoundsGEP1_64(et, need(g.a), g.offA);
        Value *pb = b.CreateConstInBoundsGEP1_64(et, need(g.b), g.offB);
        Value *pc = b.CreateConstInBoundsGEP1_64(et, need(g.c), g.offC);
        Value *rc = b.CreateCall(matmulFn, {exec, gemmDesc(g, sym), pa, pb, pc});
        returnIfFailed(rc, sym + ".gemm");
      }
    }
    b.CreateRet(b.getInt32(0));
  }

  /// The entry block's argument arrays for aotc_cuda_launch (reused by every launch: the
  /// runtime reads the arguments before it returns).
  void allocaArgs() {
    auto *at = llvm::ArrayType::get(ptr, maxArgs);
    vals = b.CreateAlloca(at, nullptr, "arg_values");
    argv = b.CreateAlloca(at, nullptr, "arg_pointers");
  }

  llvm::Function *entry(const std::string &suffix, unsigned nPtrParams) {
    llvm::Function *f = beginEntryPoint(b, M, kp.name + suffix, nPtrParams);
    exec = f->getArg(f->arg_size() - 1);
    allocaArgs();
    return f;
  }

  void build() {
    std::vector<std::string> names = kernelSymbols();
    llvm::Type *i32t = b.getInt32Ty();
    launchFn = M.getOrInsertFunction("aotc_cuda_launch",
                                     llvm::FunctionType::get(i32t, {ptr, ptr, i32t, i32t, i32t, ptr}, false));
    matmulFn = M.getOrInsertFunction("aotc_cuda_matmul",
                                     llvm::FunctionType::get(i32t, {ptr, ptr, ptr, ptr, ptr}, false));

    // Entry points first: they append the alignment messages to `errors`.
    ContextFns ctx = emitContextFunctions(b, M, kp.name, false); // no library state: CUDA has no convolutions
    llvm::Function *fwd = entry("_forward", 6);
    checkContext(b, fwd->getArg(0), ctx);
    // NULL arrays and areas the call needs (and the exec) are AOTC_ERROR_NULL_ARGUMENT, before the
    // arrays' pointers are read for the alignment checks.
    const bool ins = !kp.inputs.empty(), outs = !kp.outputs.empty(), grads = !kp.grads.empty();
    const int64_t scratchDev = gpuScratchBytes(kp);
    checkNonNull(b, {{fwd->getArg(1), ins}, {fwd->getArg(2), outs}, {fwd->getArg(3), kp.savedBytes > 0},
                            {fwd->getArg(4), scratchDev > 0}, {fwd->getArg(5), true}});
    // The module constant is referenced by the launches; its initializer is set at the end.
    auto *modTy = abiType(C, AbiStruct::CudaModule);
    auto *modVar = new llvm::GlobalVariable(M, modTy, true, llvm::GlobalValue::PrivateLinkage, nullptr,
                                            kp.name + ".cuda_module");
    module = modVar;
    EntryArgs fa{fwd->getArg(1), fwd->getArg(2), fwd->getArg(3), nullptr, nullptr, fwd->getArg(4)};
    checkArray("forward", "in", fa.in, kp.inputs);
    checkArray("forward", "out", fa.out, kp.outputs);
    checkAligned(fa.saved, alignmentError("forward", "saved"), "saved");
    checkAligned(fa.scratch, alignmentError("forward", "scratch"), "scratch");
    emitGraph(kp.forward, false, fa);

    llvm::Function *bwd = entry("_backward", 7);
    checkContext(b, bwd->getArg(0), ctx);
    EntryArgs ba{bwd->getArg(1), nullptr, bwd->getArg(2), bwd->getArg(3), bwd->getArg(4), bwd->getArg(5)};
    if (kp.hasBackward) {
      checkNonNull(b, {{bwd->getArg(1), ins}, {bwd->getArg(2), kp.savedBytes > 0}, {bwd->getArg(3), outs},
                              {bwd->getArg(4), grads}, {bwd->getArg(5), scratchDev > 0}, {bwd->getArg(6), true}});
      checkArray("backward", "in", ba.in, kp.inputs);
      checkAligned(ba.saved, alignmentError("backward", "saved"), "saved");
      checkArray("backward", "tangents", ba.tangents, kp.outputs);
      checkArray("backward", "grads", ba.grads, kp.grads);
      checkAligned(ba.scratch, alignmentError("backward", "scratch"), "scratch");
      emitGraph(kp.backward, true, ba);
    } else {
      b.CreateRet(b.getInt32(0));
    }

    auto *fbArr = llvm::ConstantDataArray::get(C, llvm::ArrayRef<uint8_t>(out().fatbin));
    auto *fb = new llvm::GlobalVariable(M, fbArr->getType(), true, llvm::GlobalValue::PrivateLinkage, fbArr,
                                        kp.name + ".fatbin");
    fb->setAlignment(llvm::Align(8));
    modVar->setInitializer(llvm::ConstantStruct::get(
        modTy, {stringConstant(M, kp.name), b.getInt32(cudaProgramId(kp.name)), b.getInt32((int)names.size()),
                stringArray(names, kp.name + ".kernel_names"), fb, b.getInt64((int64_t)out().fatbin.size()),
                b.getInt32((int)errors.size()), stringArray(errors, kp.name + ".cuda_errors")}));

    KernelProgram sized = kp; // the descriptor's scratch size includes the SplitRow partials
    sized.scratchBytes = gpuScratchBytes(kp);
    llvm::Constant *base = programDescriptor(M, sized, errors, nullptr, nullptr, -1, 0, ctx);
    std::ostringstream archs;
    for (size_t i = 0; i < opts.cuda.archs.size(); ++i) archs << (i ? "," : "") << opts.cuda.archs[i];
    auto *progTy = abiType(C, AbiStruct::CudaProgram);
    new llvm::GlobalVariable(
        M, progTy, true, llvm::GlobalValue::ExternalLinkage,
        llvm::ConstantStruct::get(progTy, {base, fwd, bwd, stringConstant(M, archs.str()),
                                           stringConstant(M, out().toolVersions), modVar}),
        kp.name + "_program");
  }

  Artifact *art = nullptr;
  Artifact &out() { return *art; }
};

} // namespace

void emitCudaObject(const KernelProgram &kp, const CodegenOptions &opts, Artifact &out) {
  llvm::LLVMContext ctx;
  llvm::Module M(kp.name, ctx);
  CudaHostBuilder hb(kp, opts, M);
  hb.art = &out;
  hb.build();
  // The host code is a few hundred calls: the CPU's -O2 pipeline, for a stable x86-64 baseline.
  CodegenOptions host = opts;
  host.emitLLVM = false;
  finishObject(M, kp.name, host, out);
}

} // namespace aotc::cg
