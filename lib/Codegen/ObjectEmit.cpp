//===- ObjectEmit.cpp - Entry points, descriptor, -O3, object file --------===//
//
// This file implements emitObject (Codegen.h). On the llvm::Module holding the
// lowered kernels (MLIRGen.cpp) it writes, with llvm::IRBuilder:
//  * <name>_forward / <name>_backward exactly as runtime/include/aotc/abi.h:
//    buffer pointers are read from the in/out/tangents/grads arrays or computed
//    as saved/scratch + offset; kernels are called in order, a Gemm kernel as
//    its init loop (if any) then its GEMM function (MLIRGen.cpp: blocks of
//    cblas_sgemm/cblas_dgemm calls, parallel over blocks);
//    after a bounds-checked kernel a non-zero status code is returned with its
//    value stored in the error_value global;
//  * the `const aotc_program <name>_program` descriptor.
// Then it optimizes at -O3 (mlir::makeOptimizingTransformer) for the requested
// CPU (default x86-64-v2) and emits a PIC ELF object. Kernel functions are
// internal, so the only exported symbols are the ABI ones.
//===----------------------------------------------------------------------===//
#include "CodegenInternal.h"

#include "aotc/Diagnostics.h"

#include "mlir/ExecutionEngine/OptUtils.h"

#include "llvm/IR/Constants.h"
#include "llvm/IR/IRBuilder.h"
#include "llvm/IR/LLVMContext.h"
#include "llvm/IR/LegacyPassManager.h"
#include "llvm/IR/Module.h"
#include "llvm/IR/Verifier.h"
#include "llvm/MC/TargetRegistry.h"
#include "llvm/Support/TargetSelect.h"
#include "llvm/Support/raw_ostream.h"
#include "llvm/Target/TargetMachine.h"
#include "llvm/Target/TargetOptions.h"

#include <climits>

namespace aotc {
namespace {

using llvm::IRBuilder;
using llvm::Type;
using llvm::Value;

constexpr const char *kTriple = "x86_64-unknown-linux-gnu";

struct EntryBuilder {
  llvm::Module &M;
  const KernelProgram &kp;
  llvm::LLVMContext &C;
  llvm::GlobalVariable *errorValue;
  IRBuilder<> b;

  EntryBuilder(llvm::Module &m, const KernelProgram &p, llvm::GlobalVariable *ev)
      : M(m), kp(p), C(m.getContext()), errorValue(ev), b(m.getContext()) {}

  Type *ptrTy() { return llvm::PointerType::get(C, 0); }
  Value *i32(int64_t v) { return b.getInt32((uint32_t)v); }

  Value *bufferPtr(const Buffer &bf, Value *in, Value *out, Value *saved, Value *tangents,
                   Value *grads, Value *scratch) {
    auto fromArray = [&](Value *arr, int idx) {
      AOTC_ASSERT(arr, "codegen: buffer array missing for " + bf.name);
      Value *slot = b.CreateConstInBoundsGEP1_64(ptrTy(), arr, idx);
      return b.CreateAlignedLoad(ptrTy(), slot, llvm::Align(8), bf.name + ".ptr");
    };
    switch (bf.kind) {
    case BufferKind::Input: return fromArray(in, bf.index);
    case BufferKind::Output: return fromArray(out, bf.index);
    case BufferKind::Tangent: return fromArray(tangents, bf.index);
    case BufferKind::Grad: return fromArray(grads, bf.index);
    case BufferKind::Saved:
      AOTC_ASSERT(saved, "codegen: no saved area");
      return b.CreateConstInBoundsGEP1_64(b.getInt8Ty(), saved, bf.offset, bf.name);
    case BufferKind::Scratch:
      AOTC_ASSERT(bf.offset >= 0, "codegen: unplanned scratch buffer " + bf.name);
      return b.CreateConstInBoundsGEP1_64(b.getInt8Ty(), scratch, bf.offset, bf.name);
    }
    return nullptr;
  }

  void emitGraph(const KernelGraph &kg, bool bwd, Value *in, Value *out, Value *saved,
                 Value *tangents, Value *grads, Value *scratch) {
    Value *status = nullptr;
    if (kg.statusOffset >= 0) {
      status = b.CreateConstInBoundsGEP1_64(b.getInt8Ty(), scratch, kg.statusOffset, "status");
      b.CreateAlignedStore(b.getInt64(0), status, llvm::Align(8));
      b.CreateAlignedStore(b.getInt64(0), b.CreateConstInBoundsGEP1_64(b.getInt64Ty(), status, 1),
                           llvm::Align(8));
    }
    for (const Kernel &k : kg.kernels) {
      std::vector<Value *> ptrs(kg.buffers.size(), nullptr);
      auto need = [&](int id) {
        if (!ptrs[id]) ptrs[id] = bufferPtr(kg.buffers[id], in, out, saved, tangents, grads, scratch);
        return ptrs[id];
      };
      if (!k.phases.empty()) {
        std::vector<Value *> args;
        for (int id : cg::kernelArgs(k)) args.push_back(need(id));
        if (k.mayFail()) args.push_back(status);
        llvm::Function *kf = M.getFunction(cg::kernelSymbol(kp.name, bwd, k.name));
        AOTC_ASSERT(kf, "codegen: kernel function missing: " + k.name);
        b.CreateCall(kf, args);
        if (k.mayFail()) {
          Value *code = b.CreateAlignedLoad(b.getInt64Ty(), status, llvm::Align(8), "code");
          llvm::Function *F = b.GetInsertBlock()->getParent();
          auto *err = llvm::BasicBlock::Create(C, k.name + ".error", F);
          auto *cont = llvm::BasicBlock::Create(C, k.name + ".ok", F);
          b.CreateCondBr(b.CreateICmpNE(code, b.getInt64(0)), err, cont);
          b.SetInsertPoint(err);
          Value *v = b.CreateAlignedLoad(b.getInt64Ty(), b.CreateConstInBoundsGEP1_64(b.getInt64Ty(), status, 1),
                                         llvm::Align(8));
          b.CreateAlignedStore(v, errorValue, llvm::Align(8));
          b.CreateRet(b.CreateTrunc(code, b.getInt32Ty()));
          b.SetInsertPoint(cont);
        }
      }
      if (k.kind == Kernel::Kind::Gemm && k.gemm.m > 0 && k.gemm.n > 0 && k.gemm.batch > 0) {
        llvm::Function *gf = M.getFunction(cg::gemmSymbol(kp.name, bwd, k.name));
        AOTC_ASSERT(gf, "codegen: GEMM function missing: " + k.name);
        b.CreateCall(gf, {need(k.gemm.a), need(k.gemm.b), need(k.gemm.c)});
      }
    }
    b.CreateRet(b.getInt32(0));
  }

  void build() {
    Type *p = ptrTy();
    auto *fwdTy = llvm::FunctionType::get(b.getInt32Ty(), {p, p, p, p}, false);
    auto *fwd = llvm::Function::Create(fwdTy, llvm::GlobalValue::ExternalLinkage, kp.name + "_forward", M);
    fwd->addFnAttr(llvm::Attribute::NoUnwind);
    b.SetInsertPoint(llvm::BasicBlock::Create(C, "entry", fwd));
    emitGraph(kp.forward, false, fwd->getArg(0), fwd->getArg(1), fwd->getArg(2), nullptr, nullptr,
              fwd->getArg(3));
    auto *bwdTy = llvm::FunctionType::get(b.getInt32Ty(), {p, p, p, p, p}, false);
    auto *bwd = llvm::Function::Create(bwdTy, llvm::GlobalValue::ExternalLinkage, kp.name + "_backward", M);
    bwd->addFnAttr(llvm::Attribute::NoUnwind);
    b.SetInsertPoint(llvm::BasicBlock::Create(C, "entry", bwd));
    if (kp.hasBackward)
      emitGraph(kp.backward, true, bwd->getArg(0), nullptr, bwd->getArg(1), bwd->getArg(2),
                bwd->getArg(3), bwd->getArg(4));
    else
      b.CreateRet(b.getInt32(0));
    buildDescriptor(fwd, bwd);
  }

  llvm::Constant *str(const std::string &s) {
    return b.CreateGlobalStringPtr(s, "", 0, &M);
  }

  llvm::Constant *tensorArray(const std::vector<AbiTensor> &ts, llvm::StructType *descTy,
                              const std::string &what) {
    if (ts.empty()) return llvm::ConstantPointerNull::get(llvm::PointerType::get(C, 0));
    std::vector<llvm::Constant *> elems;
    for (size_t i = 0; i < ts.size(); ++i) {
      const AbiTensor &t = ts[i];
      llvm::Constant *shape = llvm::ConstantPointerNull::get(llvm::PointerType::get(C, 0));
      if (!t.type.shape.empty()) {
        std::vector<uint64_t> dims(t.type.shape.begin(), t.type.shape.end());
        auto *arr = llvm::ConstantDataArray::get(C, dims);
        auto *g = new llvm::GlobalVariable(M, arr->getType(), true, llvm::GlobalValue::PrivateLinkage, arr,
                                           kp.name + "." + what + std::to_string(i) + ".shape");
        g->setUnnamedAddr(llvm::GlobalValue::UnnamedAddr::Global);
        shape = g;
      }
      int dt = (int)t.type.dtype; // aotc_dtype and DType share their numbering (F32=0 .. U8=5)
      elems.push_back(llvm::ConstantStruct::get(
          descTy, {str(t.name), b.getInt32(dt), b.getInt32(t.role), b.getInt32((int)t.type.shape.size()),
                   b.getInt32(t.requiresGrad ? 1 : 0), shape, b.getInt64(t.type.numel()),
                   b.getInt64(t.type.bytes())}));
    }
    auto *at = llvm::ArrayType::get(descTy, elems.size());
    auto *g = new llvm::GlobalVariable(M, at, true, llvm::GlobalValue::PrivateLinkage,
                                       llvm::ConstantArray::get(at, elems), kp.name + "." + what);
    return g;
  }

  void buildDescriptor(llvm::Function *fwd, llvm::Function *bwd) {
    Type *p = ptrTy();
    Type *i32t = b.getInt32Ty(), *i64t = b.getInt64Ty();
    auto *descTy = llvm::StructType::create(C, {p, i32t, i32t, i32t, i32t, p, i64t, i64t}, "aotc_tensor_desc");
    auto *progTy = llvm::StructType::create(
        C, {i32t, p, i32t, p, i32t, p, i32t, p, p, i64t, i64t, p, p, i32t, p, p}, "aotc_program");
    llvm::Constant *gii = llvm::ConstantPointerNull::get(llvm::PointerType::get(C, 0));
    if (!kp.gradInputIndex.empty()) {
      std::vector<uint32_t> v(kp.gradInputIndex.begin(), kp.gradInputIndex.end());
      auto *arr = llvm::ConstantDataArray::get(C, v);
      gii = new llvm::GlobalVariable(M, arr->getType(), true, llvm::GlobalValue::PrivateLinkage, arr,
                                     kp.name + ".grad_input_index");
    }
    llvm::Constant *errs = llvm::ConstantPointerNull::get(llvm::PointerType::get(C, 0));
    if (!kp.errors.empty()) {
      std::vector<llvm::Constant *> ms;
      for (auto &e : kp.errors) ms.push_back(str(e));
      auto *at = llvm::ArrayType::get(p, ms.size());
      errs = new llvm::GlobalVariable(M, at, true, llvm::GlobalValue::PrivateLinkage,
                                      llvm::ConstantArray::get(at, ms), kp.name + ".errors");
    }
    llvm::Constant *init = llvm::ConstantStruct::get(
        progTy, {b.getInt32(1), str(kp.name), b.getInt32((int)kp.inputs.size()),
                 tensorArray(kp.inputs, descTy, "inputs"), b.getInt32((int)kp.outputs.size()),
                 tensorArray(kp.outputs, descTy, "outputs"), b.getInt32((int)kp.grads.size()),
                 tensorArray(kp.grads, descTy, "grads"), gii, b.getInt64(kp.savedBytes),
                 b.getInt64(kp.scratchBytes), fwd, bwd, b.getInt32((int)kp.errors.size()), errs,
                 errorValue});
    new llvm::GlobalVariable(M, progTy, true, llvm::GlobalValue::ExternalLinkage, init,
                             kp.name + "_program");
  }
};

} // namespace

void emitObject(const KernelProgram &kp, const CodegenOptions &opts, Artifact &out) {
  if (opts.target == "cuda") {
    std::string ptx = cg::buildGpuPtx(kp, opts.cuda, opts.emitMLIR ? &out.mlirText : nullptr);
    size_t v = ptx.find(".version");
    out.ptxText = v == std::string::npos ? ptx : ptx.substr(v);
    if (opts.emitFatbin || opts.emitObject) {
      cg::CudaBinary bin = cg::buildFatbin(out.ptxText, opts.cuda);
      for (auto &r : bin.reports)
        if (r.spillBytes > 0)
          warning("ptxas -arch=" + r.arch + ": " + std::to_string(r.spillBytes) + " spill bytes in the kernels");
      out.fatbin = std::move(bin.fatbin);
      out.toolVersions = "ptxas: " + bin.ptxasVersion + "\nfatbinary: " + bin.fatbinaryVersion;
    }
    if (opts.emitObject)
      userError("--target=cuda: the object (host entry points around the fatbin, cuBLAS calls) is "
                "not implemented yet; --emit=kernels, --emit=mlir, --emit=ptx and --emit=fatbin work "
                "(docs/cuda.md)");
    return;
  }
  llvm::InitializeNativeTarget();
  llvm::InitializeNativeTargetAsmPrinter();
  llvm::LLVMContext ctx;
  std::unique_ptr<llvm::Module> M =
      cg::buildKernelModule(kp, ctx, opts.emitMLIR ? &out.mlirText : nullptr);
  std::string err;
  const llvm::Target *target = llvm::TargetRegistry::lookupTarget(kTriple, err);
  if (!target) internalError("codegen: no x86-64 target in LLVM: " + err);
  llvm::TargetOptions to;
  std::unique_ptr<llvm::TargetMachine> tm(target->createTargetMachine(
      kTriple, opts.cpu, "", to, llvm::Reloc::PIC_, std::nullopt, llvm::CodeGenOptLevel::Aggressive));
  if (!tm) internalError("codegen: cannot create a target machine for cpu '" + opts.cpu + "'");
  M->setTargetTriple(kTriple);
  M->setDataLayout(tm->createDataLayout());
  M->setSourceFileName(kp.name);
  for (llvm::Function &f : *M)
    if (!f.isDeclaration()) f.setLinkage(llvm::GlobalValue::InternalLinkage);
  auto *ev = new llvm::GlobalVariable(*M, llvm::Type::getInt64Ty(ctx), false,
                                      llvm::GlobalValue::InternalLinkage,
                                      llvm::ConstantInt::get(llvm::Type::getInt64Ty(ctx), 0),
                                      kp.name + "_error_value");
  ev->setAlignment(llvm::Align(8));
  EntryBuilder eb(*M, kp, ev);
  eb.build();
  {
    std::string msg;
    llvm::raw_string_ostream os(msg);
    if (llvm::verifyModule(*M, &os)) internalError("codegen: invalid LLVM module: " + os.str());
  }
  auto opt = mlir::makeOptimizingTransformer(3, 0, tm.get());
  if (auto e = opt(M.get())) {
    std::string msg;
    llvm::raw_string_ostream os(msg);
    os << e;
    internalError("codegen: LLVM optimization failed: " + os.str());
  }
  if (opts.emitLLVM) {
    llvm::raw_string_ostream os(out.llvmText);
    M->print(os, nullptr);
  }
  if (!opts.emitObject) return;
  llvm::SmallVector<char, 0> buf;
  llvm::raw_svector_ostream os(buf);
  llvm::legacy::PassManager pm;
  if (tm->addPassesToEmitFile(pm, os, nullptr, llvm::CodeGenFileType::ObjectFile))
    internalError("codegen: the target cannot emit object files");
  pm.run(*M);
  out.object.assign(buf.begin(), buf.end());
}

} // namespace aotc
