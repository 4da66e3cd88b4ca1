//===- HostCommon.cpp - What the CPU and CUDA host objects share -----------===//
//
// Helpers of ObjectEmit.cpp (CPU entry points) and CudaHost.cpp (CUDA entry
// points), declared in CodegenInternal.h: the address of a buffer inside an
// entry point, the aotc_program descriptor (runtime/include/aotc/abi.h) and the
// last steps of both targets: verify, -O2 for the host CPU, emit a PIC ELF object.
//===----------------------------------------------------------------------===//
#include "CodegenInternal.h"

#include "aotc/Diagnostics.h"
#include "aotc/abi.h"

#include "mlir/ExecutionEngine/OptUtils.h"

#include "llvm/IR/Constants.h"
#include "llvm/IR/LegacyPassManager.h"
#include "llvm/IR/Module.h"
#include "llvm/IR/Verifier.h"
#include "llvm/Passes/PassBuilder.h"
#include "llvm/Transforms/Instrumentation/AddressSanitizer.h"
#include "llvm/Transforms/Instrumentation/ThreadSanitizer.h"
#include "llvm/MC/TargetRegistry.h"
#include "llvm/Support/TargetSelect.h"
#include "llvm/TargetParser/Host.h"
#include "llvm/Support/raw_ostream.h"
#include "llvm/Target/TargetMachine.h"
#include "llvm/Target/TargetOptions.h"

namespace aotc::cg {

namespace {
constexpr const char *kTriple = "x86_64-unknown-linux-gnu";
} // namespace

llvm::Value *bufferPointer(llvm::IRBuilder<> &b, const Buffer &bf, const EntryArgs &a) {
  llvm::Type *ptrTy = llvm::PointerType::get(b.getContext(), 0);
  auto fromArray = [&](llvm::Value *arr, int idx) {
    AOTC_ASSERT(arr, "codegen: buffer array missing for " + bf.name);
    llvm::Value *slot = b.CreateConstInBoundsGEP1_64(ptrTy, arr, idx);
    return b.CreateAlignedLoad(ptrTy, slot, llvm::Align(8), bf.name + ".ptr");
  };
  switch (bf.kind) {
  case BufferKind::Input: return fromArray(a.in, bf.index);
  case BufferKind::Output: return fromArray(a.out, bf.index);
  case BufferKind::Tangent: return fromArray(a.tangents, bf.index);
  case BufferKind::Grad: return fromArray(a.grads, bf.index);
  case BufferKind::Saved:
    AOTC_ASSERT(a.saved, "codegen: no saved area");
    return b.CreateConstInBoundsGEP1_64(b.getInt8Ty(), a.saved, bf.offset, bf.name);
  case BufferKind::Scratch:
    AOTC_ASSERT(bf.offset >= 0, "codegen: unplanned scratch buffer " + bf.name);
    return b.CreateConstInBoundsGEP1_64(b.getInt8Ty(), a.scratch, bf.offset, bf.name);
  case BufferKind::State:
    AOTC_ASSERT(a.state, "codegen: no state area");
    return b.CreateConstInBoundsGEP1_64(b.getInt8Ty(), a.state, bf.offset, bf.name);
  case BufferKind::Hyper:
    AOTC_ASSERT(a.hyper, "codegen: no hyperparameter array");
    return b.CreateConstInBoundsGEP1_64(b.getInt8Ty(), a.hyper, bf.offset, bf.name);
  }
  return nullptr;
}

llvm::Function *beginEntryPoint(llvm::IRBuilder<> &b, llvm::Module &M, const std::string &name,
                                unsigned nPtrParams) {
  std::vector<llvm::Type *> params(nPtrParams, llvm::PointerType::get(M.getContext(), 0));
  auto *f = llvm::Function::Create(llvm::FunctionType::get(b.getInt32Ty(), params, false),
                                   llvm::GlobalValue::ExternalLinkage, name, M);
  f->addFnAttr(llvm::Attribute::NoUnwind);
  b.SetInsertPoint(llvm::BasicBlock::Create(M.getContext(), "entry", f));
  return f;
}

ContextFns emitContextFunctions(llvm::IRBuilder<> &b, llvm::Module &M, const std::string &prog,
                                bool libraryState) {
  llvm::LLVMContext &C = M.getContext();
  llvm::Type *ptr = llvm::PointerType::get(C, 0);
  llvm::Type *i64 = b.getInt64Ty();
  llvm::FunctionCallee callocFn = M.getOrInsertFunction("calloc", llvm::FunctionType::get(ptr, {i64, i64}, false));
  llvm::FunctionCallee freeFn = M.getOrInsertFunction("free", llvm::FunctionType::get(b.getVoidTy(), {ptr}, false));
  ContextFns f;
  // The owner word points at a constant whose bytes name the program, so no two programs'
  // tags can be merged (identical-code folding could merge their create functions).
  auto *tagInit = llvm::ConstantDataArray::getString(C, "aotc_context:" + prog);
  f.tag = new llvm::GlobalVariable(M, tagInit->getType(), true, llvm::GlobalValue::PrivateLinkage, tagInit,
                                   prog + ".context_tag");
  auto stateSlot = [&](llvm::Value *ctx) {
    return b.CreateConstInBoundsGEP1_64(ptr, ctx, kContextStateWord, "ctx.state.slot");
  };
  f.create = llvm::Function::Create(llvm::FunctionType::get(ptr, {}, false), llvm::GlobalValue::ExternalLinkage,
                                    prog + "_context_create", M);
  f.create->addFnAttr(llvm::Attribute::NoUnwind);
  auto *entry = llvm::BasicBlock::Create(C, "entry", f.create);
  auto *init = llvm::BasicBlock::Create(C, "init", f.create);
  auto *done = llvm::BasicBlock::Create(C, "done", f.create);
  b.SetInsertPoint(entry);
  llvm::Value *p = b.CreateCall(callocFn, {b.getInt64(1), b.getInt64(kContextBytes)}, "ctx");
  b.CreateCondBr(b.CreateIsNull(p), done, init);
  b.SetInsertPoint(init);
  b.CreateAlignedStore(f.tag, p, llvm::Align(8)); // the owner word
  if (libraryState) {
    // The library state (aotc_kernels_state_create, aotc/kernels.h) in the second word; a
    // context without it is not made (NULL: out of memory).
    llvm::FunctionCallee createFn =
        M.getOrInsertFunction("aotc_kernels_state_create", llvm::FunctionType::get(ptr, {}, false));
    llvm::Value *st = b.CreateCall(createFn, {}, "state");
    auto *ok = llvm::BasicBlock::Create(C, "state.ok", f.create);
    auto *fail = llvm::BasicBlock::Create(C, "state.fail", f.create);
    b.CreateCondBr(b.CreateIsNull(st), fail, ok);
    b.SetInsertPoint(fail);
    b.CreateCall(freeFn, {p});
    b.CreateRet(llvm::ConstantPointerNull::get(llvm::PointerType::get(C, 0)));
    b.SetInsertPoint(ok);
    b.CreateAlignedStore(st, stateSlot(p), llvm::Align(8));
  }
  b.CreateBr(done);
  b.SetInsertPoint(done);
  b.CreateRet(p);

  f.destroy = llvm::Function::Create(llvm::FunctionType::get(b.getVoidTy(), {ptr}, false),
                                     llvm::GlobalValue::ExternalLinkage, prog + "_context_destroy", M);
  f.destroy->addFnAttr(llvm::Attribute::NoUnwind);
  b.SetInsertPoint(llvm::BasicBlock::Create(C, "entry", f.destroy));
  llvm::Value *dp = f.destroy->getArg(0);
  if (libraryState) {
    auto *some = llvm::BasicBlock::Create(C, "nonnull", f.destroy);
    auto *none = llvm::BasicBlock::Create(C, "null", f.destroy);
    b.CreateCondBr(b.CreateIsNull(dp), none, some);
    b.SetInsertPoint(none);
    b.CreateRetVoid();
    b.SetInsertPoint(some);
    llvm::FunctionCallee destroyFn = M.getOrInsertFunction(
        "aotc_kernels_state_destroy", llvm::FunctionType::get(b.getVoidTy(), {ptr}, false));
    b.CreateCall(destroyFn, {b.CreateAlignedLoad(ptr, stateSlot(dp), llvm::Align(8), "state")});
  }
  b.CreateCall(freeFn, {dp});
  b.CreateRetVoid();

  // const char *context_error(const aotc_context *): the library's message of the last failed
  // call with this context (aotc_kernels_state_error), NULL without one or for a foreign context.
  f.error = llvm::Function::Create(llvm::FunctionType::get(ptr, {ptr}, false), llvm::GlobalValue::InternalLinkage,
                                   prog + ".context_error", M);
  f.error->addFnAttr(llvm::Attribute::NoUnwind);
  b.SetInsertPoint(llvm::BasicBlock::Create(C, "entry", f.error));
  llvm::Value *null = llvm::ConstantPointerNull::get(llvm::PointerType::get(C, 0));
  if (!libraryState) {
    b.CreateRet(null);
    return f;
  }
  llvm::Value *ep = f.error->getArg(0);
  auto *nonnull = llvm::BasicBlock::Create(C, "nonnull", f.error);
  auto *mine = llvm::BasicBlock::Create(C, "mine", f.error);
  auto *none = llvm::BasicBlock::Create(C, "none", f.error);
  b.CreateCondBr(b.CreateIsNull(ep), none, nonnull);
  b.SetInsertPoint(nonnull);
  llvm::Value *owner = b.CreateAlignedLoad(ptr, ep, llvm::Align(8), "ctx.owner");
  b.CreateCondBr(b.CreateICmpEQ(owner, f.tag), mine, none);
  b.SetInsertPoint(none);
  b.CreateRet(null);
  b.SetInsertPoint(mine);
  llvm::FunctionCallee errFn =
      M.getOrInsertFunction("aotc_kernels_state_error", llvm::FunctionType::get(ptr, {ptr}, false));
  b.CreateRet(b.CreateCall(errFn, {b.CreateAlignedLoad(ptr, stateSlot(ep), llvm::Align(8), "state")}));
  return f;
}

llvm::Value *contextState(llvm::IRBuilder<> &b, llvm::Value *ctx) {
  llvm::Type *ptr = llvm::PointerType::get(b.getContext(), 0);
  return b.CreateAlignedLoad(ptr, b.CreateConstInBoundsGEP1_64(ptr, ctx, kContextStateWord), llvm::Align(8),
                             "ctx.state");
}

void checkContext(llvm::IRBuilder<> &b, llvm::Value *ctx, const ContextFns &fns) {
  llvm::LLVMContext &C = b.getContext();
  llvm::Function *f = b.GetInsertBlock()->getParent();
  auto *notNull = llvm::BasicBlock::Create(C, "ctx.nonnull", f);
  auto *bad = llvm::BasicBlock::Create(C, "ctx.bad", f);
  auto *ok = llvm::BasicBlock::Create(C, "ctx.ok", f);
  b.CreateCondBr(b.CreateIsNull(ctx), bad, notNull);
  b.SetInsertPoint(notNull);
  llvm::Value *owner = b.CreateAlignedLoad(llvm::PointerType::get(C, 0), ctx, llvm::Align(8), "ctx.owner");
  b.CreateCondBr(b.CreateICmpEQ(owner, fns.tag), ok, bad);
  b.SetInsertPoint(bad);
  b.CreateRet(b.getInt32(AOTC_ERROR_CONTEXT));
  b.SetInsertPoint(ok);
}

void checkNonNull(llvm::IRBuilder<> &b, const std::vector<std::pair<llvm::Value *, bool>> &args) {
  llvm::Value *anyNull = nullptr;
  for (auto &[p, needed] : args)
    if (needed) anyNull = anyNull ? b.CreateOr(anyNull, b.CreateIsNull(p)) : b.CreateIsNull(p);
  if (!anyNull) return;
  llvm::LLVMContext &C = b.getContext();
  llvm::Function *f = b.GetInsertBlock()->getParent();
  auto *bad = llvm::BasicBlock::Create(C, "args.null", f);
  auto *ok = llvm::BasicBlock::Create(C, "args.ok", f);
  b.CreateCondBr(anyNull, bad, ok);
  b.SetInsertPoint(bad);
  b.CreateRet(b.getInt32(AOTC_ERROR_NULL_ARGUMENT));
  b.SetInsertPoint(ok);
}

void returnIfNonZero(llvm::IRBuilder<> &b, llvm::Value *rc, const std::string &label, llvm::Value *ret) {
  llvm::Function *f = b.GetInsertBlock()->getParent();
  auto *fail = llvm::BasicBlock::Create(b.getContext(), label + ".failed", f);
  auto *ok = llvm::BasicBlock::Create(b.getContext(), label + ".ok", f);
  b.CreateCondBr(b.CreateICmpNE(rc, b.getInt32(0)), fail, ok);
  b.SetInsertPoint(fail);
  b.CreateRet(ret ? ret : rc);
  b.SetInsertPoint(ok);
}

llvm::Constant *privateConstant(llvm::Module &M, llvm::Constant *init, const std::string &name) {
  auto *g = new llvm::GlobalVariable(M, init->getType(), true, llvm::GlobalValue::PrivateLinkage, init, name);
  g->setUnnamedAddr(llvm::GlobalValue::UnnamedAddr::Global);
  return g;
}

llvm::Constant *stringConstant(llvm::Module &M, const std::string &s) {
  llvm::IRBuilder<> b(M.getContext());
  return b.CreateGlobalStringPtr(s, "", 0, &M);
}

namespace {

llvm::Constant *tensorArray(llvm::Module &M, const std::string &prog, const std::vector<AbiTensor> &ts,
                            llvm::StructType *descTy, const std::string &what) {
  llvm::LLVMContext &C = M.getContext();
  llvm::IRBuilder<> b(C);
  if (ts.empty()) return llvm::ConstantPointerNull::get(llvm::PointerType::get(C, 0));
  std::vector<llvm::Constant *> elems;
  for (size_t i = 0; i < ts.size(); ++i) {
    const AbiTensor &t = ts[i];
    llvm::Constant *shape = llvm::ConstantPointerNull::get(llvm::PointerType::get(C, 0));
    if (!t.type.shape.empty()) {
      std::vector<uint64_t> dims(t.type.shape.begin(), t.type.shape.end());
      shape = privateConstant(M, llvm::ConstantDataArray::get(C, dims),
                              prog + "." + what + std::to_string(i) + ".shape");
    }
    int dt = (int)t.type.dtype; // aotc_dtype and DType share their numbering (F32=0 .. U8=5)
    elems.push_back(llvm::ConstantStruct::get(
        descTy, {stringConstant(M, t.name), b.getInt32(dt), b.getInt32(t.role),
                 b.getInt32((int)t.type.shape.size()), b.getInt32(t.requiresGrad ? 1 : 0), shape,
                 b.getInt64(t.type.numel()), b.getInt64(t.type.bytes()), b.getInt32(t.updatesInput),
                 b.getInt32(0)}));
  }
  auto *at = llvm::ArrayType::get(descTy, elems.size());
  return new llvm::GlobalVariable(M, at, true, llvm::GlobalValue::PrivateLinkage,
                                  llvm::ConstantArray::get(at, elems), prog + "." + what);
}

/// `int <prog>.set_comm(aotc_context *, const aotc_comm *)` (abi.h aotc_set_comm_fn): stores
/// the communicator in the context's kContextCommWord; ZeRO-1 (zeroWorld > 0): only one of
/// zeroWorld ranks (AOTC_ERROR_COMM otherwise).
llvm::Function *emitSetComm(llvm::Module &M, const std::string &prog, const ContextFns &ctx, int zeroWorld) {
  llvm::LLVMContext &C = M.getContext();
  llvm::IRBuilder<> b(C);
  llvm::Type *ptr = b.getPtrTy();
  auto *f = llvm::Function::Create(llvm::FunctionType::get(b.getInt32Ty(), {ptr, ptr}, false),
                                   llvm::GlobalValue::InternalLinkage, prog + ".set_comm", M);
  f->addFnAttr(llvm::Attribute::NoUnwind);
  b.SetInsertPoint(llvm::BasicBlock::Create(C, "entry", f));
  checkContext(b, f->getArg(0), ctx);
  if (zeroWorld > 0) {
    // NULL detaches; any other table must have zeroWorld ranks.
    llvm::StructType *ct = abiType(C, AbiStruct::Comm);
    auto *check = llvm::BasicBlock::Create(C, "size", f), *bad = llvm::BasicBlock::Create(C, "bad", f),
         *store = llvm::BasicBlock::Create(C, "store", f);
    b.CreateCondBr(b.CreateIsNull(f->getArg(1)), store, check);
    b.SetInsertPoint(check);
    llvm::Value *size = b.CreateAlignedLoad(b.getInt32Ty(), b.CreateStructGEP(ct, f->getArg(1), 2), llvm::Align(4));
    b.CreateCondBr(b.CreateICmpEQ(size, b.getInt32(zeroWorld)), store, bad);
    b.SetInsertPoint(bad);
    b.CreateRet(b.getInt32(AOTC_ERROR_COMM));
    b.SetInsertPoint(store);
  }
  b.CreateAlignedStore(f->getArg(1), b.CreateConstInBoundsGEP1_64(ptr, f->getArg(0), kContextCommWord),
                       llvm::Align(8));
  b.CreateRet(b.getInt32(0));
  return f;
}

/// The `aotc_train` constant of a program with a train step (abi.h, ABI 8; buckets ABI 10.1).
llvm::Constant *trainDescriptor(llvm::Module &M, const KernelProgram &kp, llvm::Function *trainStep,
                                const ContextFns &ctx) {
  llvm::LLVMContext &C = M.getContext();
  llvm::IRBuilder<> b(C);
  const TrainPlan &tp = kp.train;
  llvm::Type *f64t = b.getDoubleTy();
  llvm::Constant *null = llvm::ConstantPointerNull::get(llvm::PointerType::get(C, 0));
  auto *stTy = abiType(C, AbiStruct::StateDesc);
  std::vector<llvm::Constant *> st;
  for (size_t i = 0; i < tp.states.size(); ++i) {
    const StateTensor &s = tp.states[i];
    llvm::Constant *shape = null;
    if (!s.type.shape.empty()) {
      std::vector<uint64_t> dims(s.type.shape.begin(), s.type.shape.end());
      shape = privateConstant(M, llvm::ConstantDataArray::get(C, dims), kp.name + ".state" + std::to_string(i) + ".shape");
    }
    st.push_back(llvm::ConstantStruct::get(
        stTy, {stringConstant(M, s.name), b.getInt32((int)s.type.dtype), b.getInt32((int)s.kind),
               b.getInt32((int)s.type.rank()), b.getInt32(s.paramInput), shape, b.getInt64(s.type.numel()),
               b.getInt64(s.type.bytes()), b.getInt64(s.offset), stringConstant(M, s.stateKey)}));
  }
  auto *hyTy = abiType(C, AbiStruct::HyperDesc);
  std::vector<llvm::Constant *> hy;
  for (const HyperParam &h : tp.hypers)
    hy.push_back(llvm::ConstantStruct::get(
        hyTy, {stringConstant(M, h.name), llvm::ConstantFP::get(f64t, h.value), llvm::ConstantFP::get(f64t, h.min),
               llvm::ConstantFP::get(f64t, h.max), b.getInt32(h.maxOpen ? 1 : 0), b.getInt32(0)}));
  auto array = [&](llvm::StructType *ty, const std::vector<llvm::Constant *> &v, const std::string &n) -> llvm::Constant * {
    if (v.empty()) return null;
    auto *at = llvm::ArrayType::get(ty, v.size());
    return privateConstant(M, llvm::ConstantArray::get(at, v), kp.name + n);
  };
  std::vector<uint32_t> params(tp.params.begin(), tp.params.end());
  auto *bkTy = abiType(C, AbiStruct::BucketDesc);
  std::vector<llvm::Constant *> bk;
  for (size_t i = 0; i < tp.buckets.size(); ++i) {
    const GradBucket &g = tp.buckets[i];
    std::vector<uint32_t> js(g.grads.begin(), g.grads.end());
    bk.push_back(llvm::ConstantStruct::get(
        bkTy, {b.getInt32((int)g.dtype), b.getInt32((int)js.size()),
               privateConstant(M, llvm::ConstantDataArray::get(C, js), kp.name + ".bucket" + std::to_string(i)),
               b.getInt64(g.offset), b.getInt64(g.count), b.getInt32(g.startAfter), b.getInt32(0)}));
  }
  llvm::Constant *setComm = tp.spec.dataParallel ? (llvm::Constant *)emitSetComm(M, kp.name, ctx, tp.spec.zeroWorld) : null;
  const bool zero = tp.spec.zeroWorld > 0;
  auto *trTy = abiType(C, AbiStruct::Train);
  llvm::Constant *init = llvm::ConstantStruct::get(
      trTy, {stringConstant(M, optimizerName(tp.spec.kind)), stringConstant(M, tp.spec.str()),
             llvm::ConstantFP::get(f64t, tp.spec.clipGradNorm), b.getInt32(tp.spec.skipNonfinite ? 1 : 0),
             b.getInt32(tp.accumulate ? 1 : 0), b.getInt32(0), b.getInt32((int)params.size()), privateConstant(M, llvm::ConstantDataArray::get(C, params), kp.name + ".train.params"),
             b.getInt32((int)st.size()), b.getInt32((int)hy.size()), array(stTy, st, ".train.state"),
             array(hyTy, hy, ".train.hyper"), b.getInt64(tp.stateBytes), b.getInt64(tp.scratchBytes), trainStep,
             b.getInt32((int)bk.size()), b.getInt32(0), array(bkTy, bk, ".train.buckets"), zero ? null : setComm,
             b.getInt32(tp.spec.zeroWorld), b.getInt32(0), zero ? setComm : null});
  return privateConstant(M, init, kp.name + ".train");
}

} // namespace

llvm::Constant *programDescriptor(llvm::Module &M, const KernelProgram &kp,
                                  const std::vector<std::string> &errors, llvm::Constant *fwd,
                                  llvm::Constant *bwd, int64_t errorValueOffset, uint32_t flags,
                                  const ContextFns &ctx, llvm::Function *trainStep, llvm::Function *eval,
                                  const ProfileDesc &profile) {
  llvm::LLVMContext &C = M.getContext();
  llvm::IRBuilder<> b(C);
  llvm::Type *p = llvm::PointerType::get(C, 0);
  auto *descTy = abiType(C, AbiStruct::TensorDesc);
  auto *progTy = abiType(C, AbiStruct::Program);
  llvm::Constant *null = llvm::ConstantPointerNull::get(llvm::PointerType::get(C, 0));
  llvm::Constant *gii = null;
  if (!kp.gradInputIndex.empty()) {
    std::vector<uint32_t> v(kp.gradInputIndex.begin(), kp.gradInputIndex.end());
    gii = privateConstant(M, llvm::ConstantDataArray::get(C, v), kp.name + ".grad_input_index");
  }
  llvm::Constant *errs = null;
  if (!errors.empty()) {
    std::vector<llvm::Constant *> ms;
    for (auto &e : errors) ms.push_back(stringConstant(M, e));
    auto *at = llvm::ArrayType::get(p, ms.size());
    errs = privateConstant(M, llvm::ConstantArray::get(at, ms), kp.name + ".errors");
  }
  return llvm::ConstantStruct::get(
      progTy, {b.getInt32(AOTC_ABI_VERSION), stringConstant(M, kp.name), b.getInt32((int)kp.inputs.size()),
               tensorArray(M, kp.name, kp.inputs, descTy, "inputs"), b.getInt32((int)kp.outputs.size()),
               tensorArray(M, kp.name, kp.outputs, descTy, "outputs"), b.getInt32((int)kp.grads.size()),
               tensorArray(M, kp.name, kp.grads, descTy, "grads"), gii, b.getInt64(kp.savedBytes),
               b.getInt64(kp.scratchBytes), fwd ? fwd : null, bwd ? bwd : null,
               b.getInt32((int)errors.size()), errs, b.getInt64(errorValueOffset),
               stringConstant(M, kp.buildId.empty() ? std::string(32, '0') : kp.buildId),
               b.getInt32(flags), b.getInt32(0), ctx.create, ctx.destroy, ctx.error,
               trainStep ? trainDescriptor(M, kp, trainStep, ctx) : null, eval ? eval : null, b.getInt32(profile.count),
               b.getInt32(0), profile.table ? profile.table : null, profile.attach ? profile.attach : null});
}

} // namespace aotc::cg

namespace aotc {

std::string hostCpuLevel() {
  llvm::StringMap<bool> f = llvm::sys::getHostCPUFeatures(); // empty when unknown: v2
  auto all = [&](std::initializer_list<const char *> names) {
    for (const char *n : names)
      if (!f.lookup(n)) return false;
    return true;
  };
  if (!all({"avx", "avx2", "fma", "bmi", "bmi2", "lzcnt", "movbe", "f16c"})) return "x86-64-v2";
  if (!all({"avx512f", "avx512dq", "avx512cd", "avx512bw", "avx512vl"})) return "x86-64-v3";
  return "x86-64-v4";
}

} // namespace aotc

namespace aotc::cg {

void finishObject(llvm::Module &M, const std::string &prog, const CodegenOptions &opts, Artifact &out) {
  llvm::InitializeNativeTarget();
  llvm::InitializeNativeTargetAsmPrinter();
  llvm::InitializeNativeTargetAsmParser(); // inline asm: Multiversion.cpp's cpuid / xgetbv
  std::string err;
  const llvm::Target *target = llvm::TargetRegistry::lookupTarget(kTriple, err);
  if (!target) internalError("codegen: no x86-64 target in LLVM: " + err);
  llvm::TargetOptions to;
  // multi: the module's functions name their levels (Multiversion.cpp); the rest is v2 code.
  std::string cpu = opts.cpu == "multi" ? "x86-64-v2" : opts.cpu, features;
  if (cpu == "native") { // this machine's CPU and the features it reports (a VM may mask some)
    cpu = llvm::sys::getHostCPUName().str();
    llvm::StringMap<bool> host = llvm::sys::getHostCPUFeatures();
    std::vector<std::string> fs;
    for (auto &f : host) fs.push_back((f.second ? "+" : "-") + f.first().str());
    std::sort(fs.begin(), fs.end());
    for (auto &f : fs) features += (features.empty() ? "" : ",") + f;
  }
  std::unique_ptr<llvm::TargetMachine> tm(target->createTargetMachine(
      kTriple, cpu, features, to, llvm::Reloc::PIC_, std::nullopt, llvm::CodeGenOptLevel::Aggressive));
  if (!tm) internalError("codegen: cannot create a target machine for cpu '" + opts.cpu + "'");
  M.setTargetTriple(kTriple);
  M.setDataLayout(tm->createDataLayout());
  M.setSourceFileName(prog);
  {
    std::string msg;
    llvm::raw_string_ostream os(msg);
    if (llvm::verifyModule(M, &os)) internalError("codegen: invalid LLVM module: " + os.str());
  }
  // -O2, not -O3: on the zoo and the bench's LMs the steps run equally fast (nanoGPT large
  // 343 vs 347 ms, MobileNetV2 21.3 vs 21.4 ms, U-Net 4.59 vs 4.59 ms; 1 thread, interleaved)
  // while -O3's larger unrolling makes objects 28 % bigger and compiles 1.5x slower (MobileNetV2
  // 11.8 vs 17.8 s; with --sanitize=address 27.6 vs 49.7 s). docs/stage-codegen.md.
  constexpr unsigned kLlvmOptLevel = 2;
  auto opt = mlir::makeOptimizingTransformer(kLlvmOptLevel, 0, tm.get());
  if (auto e = opt(&M)) {
    std::string msg;
    llvm::raw_string_ostream os(msg);
    os << e;
    internalError("codegen: LLVM optimization failed: " + os.str());
  }
  // --sanitize: LLVM's instrumentation, after the -O2 pipeline as clang places it (OptimizerLastEP),
  // on every function aotc defined (kernels, OpenMP outlined bodies, entry points).
  if (!opts.sanitize.empty()) {
    bool asan = opts.sanitize == "address";
    if (!asan && opts.sanitize != "thread")
      internalError("codegen: unknown sanitizer '" + opts.sanitize + "'");
    for (llvm::Function &f : M)
      if (!f.isDeclaration())
        f.addFnAttr(asan ? llvm::Attribute::SanitizeAddress : llvm::Attribute::SanitizeThread);
    llvm::LoopAnalysisManager lam;
    llvm::FunctionAnalysisManager fam;
    llvm::CGSCCAnalysisManager cgam;
    llvm::ModuleAnalysisManager mam;
    llvm::PassBuilder pb(tm.get());
    pb.registerModuleAnalyses(mam);
    pb.registerCGSCCAnalyses(cgam);
    pb.registerFunctionAnalyses(fam);
    pb.registerLoopAnalyses(lam);
    pb.crossRegisterProxies(lam, fam, cgam, mam);
    llvm::ModulePassManager mpm;
    if (asan) {
      llvm::AddressSanitizerOptions ao;
      ao.UseAfterScope = true;
      mpm.addPass(llvm::AddressSanitizerPass(ao));
    } else {
      mpm.addPass(llvm::ModuleThreadSanitizerPass());
      mpm.addPass(llvm::createModuleToFunctionPassAdaptor(llvm::ThreadSanitizerPass()));
    }
    mpm.run(M, mam);
  }
  if (opts.emitLLVM) {
    llvm::raw_string_ostream os(out.llvmText);
    M.print(os, nullptr);
  }
  if (!opts.emitObject) return;
  llvm::SmallVector<char, 0> buf;
  llvm::raw_svector_ostream os(buf);
  llvm::legacy::PassManager pm;
  if (tm->addPassesToEmitFile(pm, os, nullptr, llvm::CodeGenFileType::ObjectFile))
    internalError("codegen: the target cannot emit object files");
  pm.run(M);
  out.object.assign(buf.begin(), buf.end());
}

} // namespace aotc::cg
