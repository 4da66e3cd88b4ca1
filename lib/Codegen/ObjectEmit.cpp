//===- ObjectEmit.cpp - Entry points, descriptor, -O2, object file --------===//
//
// This file implements emitObject (Codegen.h). On the llvm::Module holding the
// lowered kernels (MLIRGen.cpp) it writes, with llvm::IRBuilder:
//  * <name>_forward / <name>_backward exactly as runtime/include/aotc/abi.h:
//    buffer pointers are read from the in/out/tangents/grads arrays or computed
//    as saved/scratch + offset; kernels are called in order, a GEMM extern kernel as
//    its init loop (if any) then its GEMM function (MLIRGen.cpp: blocks of
//    cblas_sgemm/cblas_dgemm calls, parallel over blocks);
//    after a bounds-checked kernel a non-zero status code is returned, its value
//    left in the caller's scratch at error_value_offset (per call, abi.h); a convolution
//    calls aotc_conv (libaotc_kernels) with the ABI context's library state and returns
//    its node's code, aotc_conv's status as the value, when the call fails;
//    with a checked arena (--sanitize=address) the entry points poison the saved
//    area and scratch, unpoison each buffer while it is live (scratch: from the
//    first kernel touching it to the last) and unpoison everything before returning;
//  * around each kernel, the profile counters' begin/end (Profile.cpp: a clock read only
//    when the context holds counters);
//  * the `const aotc_program <name>_program` descriptor.
// With --cpu=multi (the default) Multiversion.cpp then clones the code for x86-64-v2/v3/v4
// and makes the entry points dispatchers. HostCommon.cpp's finishObject optimizes at -O2
// (mlir::makeOptimizingTransformer) and emits a PIC ELF object. Kernel
// functions are internal, so the only exported symbols are the ABI ones.
// --target=cuda goes to CudaHost.cpp instead, after GpuGen.cpp and CudaFatbin.cpp.
//===----------------------------------------------------------------------===//
#include "CodegenInternal.h"

#include "aotc/Diagnostics.h"
#include "aotc/abi.h"

#include "llvm/IR/Constants.h"
#include "llvm/IR/IRBuilder.h"
#include "llvm/IR/LLVMContext.h"
#include "llvm/IR/Module.h"

#include <climits>
#include <functional>

namespace aotc {
namespace {

using llvm::IRBuilder;
using llvm::Value;

struct EntryBuilder {
  llvm::Module &M;
  const KernelProgram &kp;
  llvm::LLVMContext &C;
  uint32_t flags;
  IRBuilder<> b;
  llvm::FunctionCallee poisonFn, unpoisonFn; ///< ASan's manual poisoning (checked arena only)

  cg::ProfileTable profile; ///< The kernel table: each kernel's counter row (Profile.cpp).

  EntryBuilder(llvm::Module &m, const KernelProgram &p, uint32_t fl)
      : M(m), kp(p), C(m.getContext()), flags(fl), b(m.getContext()), profile(cg::profileTable(p)) {
    if (kp.checkedArena) {
      auto *fty = llvm::FunctionType::get(b.getVoidTy(), {b.getPtrTy(), b.getInt64Ty()}, false);
      poisonFn = M.getOrInsertFunction("__asan_poison_memory_region", fty);
      unpoisonFn = M.getOrInsertFunction("__asan_unpoison_memory_region", fty);
    }
  }

  /// Checked arena: (un)poisons [base + off, base + off + bytes).
  void poison(bool on, Value *base, int64_t off, int64_t bytes) {
    if (!kp.checkedArena || bytes <= 0) return;
    b.CreateCall(on ? poisonFn : unpoisonFn,
                 {b.CreateConstInBoundsGEP1_64(b.getInt8Ty(), base, off), b.getInt64(bytes)});
  }
  /// Before every return: the caller owns the whole arena again.
  void unpoisonArena(const cg::EntryArgs &ea) {
    if (ea.saved) poison(false, ea.saved, 0, kp.savedBytes);
    poison(false, ea.scratch, 0, scratchBytes_);
  }
  int64_t scratchBytes_ = 0; ///< The arena emitGraph poisons (ea.scratch onwards).

  void emitGraph(const KernelGraph &kg, bool bwd, const cg::EntryArgs &ea) {
    emitGraph(kg, bwd ? "bwd" : "fwd", ea, kp.scratchBytes, true);
  }
  /// The kernels of kg in order, then `return 0` (when `ret`; else execution continues).
  /// `scratchBytes`: the size of the arena at ea.scratch. `after(ki)`, when given, emits code
  /// right after kernel ki (the data-parallel train step's all-reduce starts and progress).
  void emitGraph(const KernelGraph &kg, const std::string &bwd, const cg::EntryArgs &ea, int64_t scratchBytes,
                 bool ret, const std::function<void(size_t)> &after = {}) {
    scratchBytes_ = scratchBytes;
    // Checked arena: everything but the status pair and the saved tensors is poisoned;
    // scratch buffers are unpoisoned while live (first to last kernel touching them).
    std::vector<int> firstUse(kg.buffers.size(), -1), lastUse(kg.buffers.size(), -1);
    if (kp.checkedArena) {
      for (size_t k = 0; k < kg.kernels.size(); ++k)
        for (const std::vector<int> *ids : {&kg.kernels[k].reads, &kg.kernels[k].writes})
          for (int id : *ids) {
            if (firstUse[id] < 0) firstUse[id] = (int)k;
            lastUse[id] = (int)k;
          }
      // The {code, value} pair at scratch+0 stays addressable; the rest of its slot does not.
      int64_t base = kg.statusOffset >= 0 ? 16 : 0;
      poison(true, ea.scratch, base, scratchBytes - base);
      if (ea.saved) {
        poison(true, ea.saved, 0, kp.savedBytes);
        for (const Buffer &bf : kg.buffers)
          if (bf.kind == BufferKind::Saved) poison(false, ea.saved, bf.offset, bf.bytes());
      }
    }
    Value *status = nullptr;
    if (kg.statusOffset >= 0) {
      status = b.CreateConstInBoundsGEP1_64(b.getInt8Ty(), ea.scratch, kg.statusOffset, "status");
      b.CreateAlignedStore(b.getInt64(0), status, llvm::Align(8));
      b.CreateAlignedStore(b.getInt64(0), b.CreateConstInBoundsGEP1_64(b.getInt64Ty(), status, 1),
                           llvm::Align(8));
    }
    // The profile counters (NULL unless attached), loaded once; row of kernel ki: base + ki.
    Value *counters = cg::contextProfile(b, ea.ctx);
    auto baseIt = profile.base.find(bwd);
    AOTC_ASSERT(baseIt != profile.base.end(), "codegen: graph '" + bwd + "' has no kernel table rows");
    for (size_t ki = 0; ki < kg.kernels.size(); ++ki) {
      const Kernel &k = kg.kernels[ki];
      bool runs = !k.phases.empty() || (k.kind == Kernel::Kind::Extern && !k.call.empty());
      Value *t0 = runs ? cg::profileBegin(b, M, counters) : nullptr;
      for (size_t id = 0; id < kg.buffers.size(); ++id)
        if (firstUse[id] == (int)ki && kg.buffers[id].kind == BufferKind::Scratch)
          poison(false, ea.scratch, kg.buffers[id].offset, kg.buffers[id].bytes());
      std::vector<Value *> ptrs(kg.buffers.size(), nullptr);
      auto need = [&](int id) {
        if (!ptrs[id]) ptrs[id] = cg::bufferPointer(b, kg.buffers[id], ea);
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
          // The value stays where the kernel wrote it: scratch + error_value_offset.
          unpoisonArena(ea);
          b.CreateRet(b.CreateTrunc(code, b.getInt32Ty()));
          b.SetInsertPoint(cont);
        }
      }
      if (k.kind == Kernel::Kind::Extern && !k.call.empty()) {
        switch (k.call.fn) {
        case ExternFn::Gemm: {
          llvm::Function *gf = M.getFunction(cg::gemmSymbol(kp.name, bwd, k.name));
          AOTC_ASSERT(gf, "codegen: GEMM function missing: " + k.name);
          const GemmDesc &g = k.call.gemm;
          b.CreateCall(gf, {need(g.a), need(g.b), need(g.c)});
          break;
        }
        case ExternFn::Conv: {
          const ConvDesc &d = k.call.conv;
          auto at = [&](int id, int64_t off) {
            return b.CreateConstInBoundsGEP1_64(b.getInt8Ty(), need(id), off * itemSize(d.dtype));
          };
          llvm::Value *ws = k.call.workspace >= 0 ? need(k.call.workspace)
                                                  : llvm::ConstantPointerNull::get(b.getPtrTy());
          AOTC_ASSERT(ea.ctx && status && d.error >= 0, "codegen: convolution call without context or status");
          llvm::Value *rc = b.CreateCall(
              convFunction(), {cg::contextState(b, ea.ctx), convDescriptor(d, cg::kernelSymbol(kp.name, bwd, k.name)),
                               at(d.a, d.offA), at(d.b, d.offB), at(d.c, d.offC), ws},
              "conv.rc");
          failWith(rc, d.error, status, ea, k.name + ".conv");
          break;
        }
        case ExternFn::Fft: {
          const FftDesc &d = k.call.fft;
          auto at = [&](int id, int64_t off) {
            return b.CreateConstInBoundsGEP1_64(b.getInt8Ty(), need(id), off * itemSize(d.dtype));
          };
          AOTC_ASSERT(status && d.error >= 0, "codegen: FFT call without status");
          llvm::Value *rc = b.CreateCall(
              fftFunction(), {fftDescriptor(d, cg::kernelSymbol(kp.name, bwd, k.name)), at(d.in, d.offIn),
                              at(d.out, d.offOut)},
              "fft.rc");
          failWith(rc, d.error, status, ea, k.name + ".fft");
          break;
        }
        case ExternFn::Linalg: {
          const LinalgDesc &d = k.call.linalg;
          auto at = [&](int id, int64_t off, DType dt) -> llvm::Value * {
            if (id < 0) return llvm::ConstantPointerNull::get(b.getPtrTy());
            return b.CreateConstInBoundsGEP1_64(b.getInt8Ty(), need(id), off * itemSize(dt));
          };
          bool intB = d.kind == LinalgDesc::Kind::LuSolve || d.kind == LinalgDesc::Kind::Perm;
          AOTC_ASSERT(status && d.error >= 0, "codegen: linalg call without status");
          llvm::Value *rc = b.CreateCall(linalgFunction(),
                                         {linalgDescriptor(d, cg::kernelSymbol(kp.name, bwd, k.name)),
                                          at(d.a, d.offA, d.dtype), at(d.b, d.offB, intB ? DType::I64 : d.dtype),
                                          at(d.c, d.offC, d.dtype), at(d.out, d.offOut, d.dtype)},
                                         "linalg.rc");
          failWith(rc, d.error, status, ea, k.name + ".linalg");
          break;
        }
        }
      }
      if (runs) cg::profileEnd(b, M, counters, baseIt->second + (int)ki, t0);
      for (size_t id = 0; id < kg.buffers.size(); ++id)
        if (lastUse[id] == (int)ki && kg.buffers[id].kind == BufferKind::Scratch)
          poison(true, ea.scratch, kg.buffers[id].offset, kg.buffers[id].bytes());
      if (after) after(ki);
    }
    unpoisonArena(ea);
    if (ret) b.CreateRet(b.getInt32(0));
  }

  /// After a library call returning `rc`: a failure returns the node's error code `error + 1`
  /// with the call's status as the value (scratch + error_value_offset, as a bounds-checked
  /// kernel leaves it).
  void failWith(llvm::Value *rc, int error, llvm::Value *status, const cg::EntryArgs &ea, const std::string &label) {
    llvm::Function *F = b.GetInsertBlock()->getParent();
    auto *err = llvm::BasicBlock::Create(C, label + ".error", F);
    auto *cont = llvm::BasicBlock::Create(C, label + ".ok", F);
    b.CreateCondBr(b.CreateICmpNE(rc, b.getInt32(0)), err, cont);
    b.SetInsertPoint(err);
    b.CreateAlignedStore(b.getInt64(error + 1), status, llvm::Align(8));
    b.CreateAlignedStore(b.CreateSExt(rc, b.getInt64Ty()), b.CreateConstInBoundsGEP1_64(b.getInt64Ty(), status, 1),
                         llvm::Align(8));
    unpoisonArena(ea);
    b.CreateRet(b.getInt32(error + 1));
    b.SetInsertPoint(cont);
  }

  /// `int aotc_fft(const aotc_fft_desc *, const void *in, void *out)` of libaotc_kernels.
  llvm::Function *fftFunction() {
    if (llvm::Function *f = M.getFunction("aotc_fft")) return f;
    llvm::Type *p = b.getPtrTy();
    auto *ft = llvm::FunctionType::get(b.getInt32Ty(), {p, p, p}, false);
    auto *f = llvm::Function::Create(ft, llvm::GlobalValue::ExternalLinkage, "aotc_fft", M);
    f->setDoesNotThrow();
    return f;
  }
  /// The constant aotc_fft_desc of one call: {6 x i32, 16 x i64 shape, 16 x i64 axes, double} (kernels.h).
  llvm::Constant *fftDescriptor(const FftDesc &d, const std::string &sym) {
    constexpr int kMax = 16; // AOTC_FFT_MAX_RANK
    std::vector<llvm::Type *> fields(6, b.getInt32Ty());
    fields.resize(6 + 2 * kMax, b.getInt64Ty());
    fields.push_back(b.getDoubleTy());
    auto *ty = llvm::StructType::get(C, fields);
    std::vector<llvm::Constant *> v = {b.getInt32((int)d.dtype), b.getInt32((int)d.kind), b.getInt32(d.forward ? 1 : 0),
                                       b.getInt32((int)d.shape.size()), b.getInt32((int)d.axes.size()),
                                       b.getInt32(d.onesided ? 1 : 0)};
    for (int i = 0; i < kMax; ++i) v.push_back(b.getInt64(i < (int)d.shape.size() ? d.shape[i] : 0));
    for (int i = 0; i < kMax; ++i) v.push_back(b.getInt64(i < (int)d.axes.size() ? d.axes[i] : 0));
    v.push_back(llvm::ConstantFP::get(b.getDoubleTy(), d.scale));
    return cg::privateConstant(M, llvm::ConstantStruct::get(ty, v), sym + ".fft");
  }

  /// `int aotc_linalg(const aotc_linalg_desc *, const void *a, const void *b, const void *c,
  /// void *out)` of libaotc_kernels.
  llvm::Function *linalgFunction() {
    if (llvm::Function *f = M.getFunction("aotc_linalg")) return f;
    llvm::Type *p = b.getPtrTy();
    auto *ft = llvm::FunctionType::get(b.getInt32Ty(), {p, p, p, p, p}, false);
    auto *f = llvm::Function::Create(ft, llvm::GlobalValue::ExternalLinkage, "aotc_linalg", M);
    f->setDoesNotThrow();
    return f;
  }
  /// The constant aotc_linalg_desc of one call: {10 x i32, 4 x i64} (kernels.h).
  llvm::Constant *linalgDescriptor(const LinalgDesc &d, const std::string &sym) {
    std::vector<llvm::Type *> fields(10, b.getInt32Ty());
    fields.resize(14, b.getInt64Ty());
    auto *ty = llvm::StructType::get(C, fields);
    std::vector<llvm::Constant *> v = {
        b.getInt32((int)d.dtype), b.getInt32((int)d.kind),    b.getInt32(d.upper),     b.getInt32(d.left),
        b.getInt32(d.unit),       b.getInt32(d.adjoint),      b.getInt32(d.full),      b.getInt32(d.computeUV),
        b.getInt32(d.check),      b.getInt32(0),              b.getInt64(d.batch),     b.getInt64(d.m),
        b.getInt64(d.n),          b.getInt64(d.nrhs)};
    return cg::privateConstant(M, llvm::ConstantStruct::get(ty, v), sym + ".linalg");
  }

  /// `int aotc_conv(aotc_kernels_state *, const aotc_conv_desc *, const void *a, const void *b,
  /// void *c, void *ws)` of libaotc_kernels (runtime/include/aotc/kernels.h).
  llvm::Function *convFunction() {
    if (llvm::Function *f = M.getFunction("aotc_conv")) return f;
    llvm::Type *p = b.getPtrTy();
    auto *ft = llvm::FunctionType::get(b.getInt32Ty(), {p, p, p, p, p, p}, false);
    auto *f = llvm::Function::Create(ft, llvm::GlobalValue::ExternalLinkage, "aotc_conv", M);
    f->setDoesNotThrow();
    return f;
  }
  /// The constant aotc_conv_desc of one call: {i32 dtype, i32 role, 16 x i64} (kernels.h).
  llvm::Constant *convDescriptor(const ConvDesc &d, const std::string &sym) {
    const ConvGeometry &g = d.geom;
    std::vector<llvm::Type *> fields = {b.getInt32Ty(), b.getInt32Ty()};
    fields.resize(18, b.getInt64Ty());
    auto *ty = llvm::StructType::get(C, fields);
    std::vector<llvm::Constant *> v = {b.getInt32((int)d.dtype), b.getInt32((int)d.role)};
    for (int64_t x : {g.N, g.C, g.K, g.groups, g.H, g.W, g.OH, g.OW, g.KH, g.KW, g.strideH, g.strideW, g.padH,
                      g.padW, g.dilH, g.dilW})
      v.push_back(b.getInt64(x));
    return cg::privateConstant(M, llvm::ConstantStruct::get(ty, v), sym + ".conv");
  }

  void build() {
    // Argument order as abi.h: forward(ctx, in, out, saved, scratch), backward(ctx, in, saved,
    // tangents, grads, scratch).
    // Convolutions keep library state (oneDNN primitives, scratchpad) in the ABI context.
    bool convs = false;
    for (const KernelGraph *kg : {&kp.forward, &kp.backward, &kp.eval})
      for (const Kernel &k : kg->kernels) convs |= k.kind == Kernel::Kind::Extern && k.call.fn == ExternFn::Conv;
    cg::ContextFns ctx = cg::emitContextFunctions(b, M, kp.name, convs);
    // The arrays and areas a call needs must not be NULL (AOTC_ERROR_NULL_ARGUMENT).
    const bool ins = !kp.inputs.empty(), outs = !kp.outputs.empty(), grads = !kp.grads.empty();
    const bool saved = kp.savedBytes > 0, scratch = kp.scratchBytes > 0;
    llvm::Function *fwd = cg::beginEntryPoint(b, M, kp.name + "_forward", 5);
    cg::checkContext(b, fwd->getArg(0), ctx);
    cg::checkNonNull(b, {{fwd->getArg(1), ins}, {fwd->getArg(2), outs}, {fwd->getArg(3), saved},
                              {fwd->getArg(4), scratch}});
    emitGraph(kp.forward, false,
              {fwd->getArg(1), fwd->getArg(2), fwd->getArg(3), nullptr, nullptr, fwd->getArg(4), fwd->getArg(0)});
    llvm::Function *bwd = cg::beginEntryPoint(b, M, kp.name + "_backward", 6);
    cg::checkContext(b, bwd->getArg(0), ctx);
    if (kp.hasBackward)
      cg::checkNonNull(b, {{bwd->getArg(1), ins}, {bwd->getArg(2), saved}, {bwd->getArg(3), outs},
                                {bwd->getArg(4), grads}, {bwd->getArg(5), scratch}});
    if (kp.hasBackward)
      emitGraph(kp.backward, true, {bwd->getArg(1), nullptr, bwd->getArg(2), bwd->getArg(3), bwd->getArg(4),
                                    bwd->getArg(5), bwd->getArg(0)});
    else
      b.CreateRet(b.getInt32(0));
    llvm::Function *train = kp.hasTrain ? buildTrainStep(fwd, bwd, ctx) : nullptr;
    buildDescriptor(fwd, bwd, ctx, train, buildEval(fwd, ctx));
  }

  /// int <name>_eval(ctx, in, out, scratch) (abi.h): the eval graph, or, for a program that
  /// saves nothing, the forward itself (saved = NULL).
  llvm::Function *buildEval(llvm::Function *fwd, const cg::ContextFns &ctx) {
    llvm::Function *f = cg::beginEntryPoint(b, M, kp.name + "_eval", 4);
    cg::checkContext(b, f->getArg(0), ctx);
    cg::checkNonNull(b, {{f->getArg(1), !kp.inputs.empty()}, {f->getArg(2), !kp.outputs.empty()},
                         {f->getArg(3), kp.scratchBytes > 0}});
    if (!kp.hasEval) {
      b.CreateRet(b.CreateCall(fwd, {f->getArg(0), f->getArg(1), f->getArg(2),
                                     llvm::ConstantPointerNull::get(b.getPtrTy()), f->getArg(3)}));
      return f;
    }
    emitGraph(kp.eval, "evl", {f->getArg(1), f->getArg(2), nullptr, nullptr, nullptr, f->getArg(3), f->getArg(0)},
              kp.scratchBytes, true);
    return f;
  }

  /// int <name>_train_step(ctx, in, out, saved, state, hyper, scratch, uint32_t flags) (abi.h):
  /// forward, backward (the loss's cotangent 1, other outputs' the state's zeros, gradients
  /// into the train scratch), mutated inputs written back, then the accumulate graph
  /// (AOTC_STEP_ACCUMULATE) or the update graph.
  llvm::Function *buildTrainStep(llvm::Function *fwd, llvm::Function *bwd, const cg::ContextFns &ctx) {
    const TrainPlan &tp = kp.train;
    llvm::Type *ptr = b.getPtrTy();
    std::vector<llvm::Type *> params(7, ptr);
    params.push_back(b.getInt32Ty());
    auto *f = llvm::Function::Create(llvm::FunctionType::get(b.getInt32Ty(), params, false),
                                     llvm::GlobalValue::ExternalLinkage, kp.name + "_train_step", M);
    f->addFnAttr(llvm::Attribute::NoUnwind);
    b.SetInsertPoint(llvm::BasicBlock::Create(C, "entry", f));
    Value *cx = f->getArg(0), *in = f->getArg(1), *out = f->getArg(2), *saved = f->getArg(3), *state = f->getArg(4),
          *hyper = f->getArg(5), *scratch = f->getArg(6), *fl = f->getArg(7);
    cg::checkContext(b, cx, ctx);
    cg::checkNonNull(b, {{in, !kp.inputs.empty()}, {out, !kp.outputs.empty()}, {saved, kp.savedBytes > 0},
                         {state, tp.stateBytes > 0}, {hyper, !tp.hypers.empty()}, {scratch, tp.scratchBytes > 0}});
    auto returnIfFailed = [&](Value *rc, const char *what) { cg::returnIfNonZero(b, rc, what); };
    returnIfFailed(b.CreateCall(fwd, {cx, in, out, saved, scratch}), "forward");
    // Cotangents: 1 for the loss (output 0), the state area's zeros for the other differentiable
    // outputs, NULL for the rest.
    const int nOut = (int)kp.outputs.size();
    auto *tangents = b.CreateAlloca(llvm::ArrayType::get(ptr, std::max(nOut, 1)), nullptr, "tangents");
    const DType ldt = kp.outputs[0].type.dtype;
    llvm::Constant *one = ldt == DType::F64 ? (llvm::Constant *)llvm::ConstantFP::get(b.getDoubleTy(), 1.0)
                                            : llvm::ConstantFP::get(b.getFloatTy(), 1.0);
    auto *oneGv = new llvm::GlobalVariable(M, one->getType(), true, llvm::GlobalValue::PrivateLinkage, one,
                                           kp.name + ".train.one");
    oneGv->setAlignment(llvm::Align(64));
    for (int k = 0; k < nOut; ++k) {
      Value *t = llvm::ConstantPointerNull::get(b.getPtrTy());
      if (k == 0) t = oneGv;
      for (const StateTensor &s : tp.states)
        if (s.kind == StateKind::Zeros && s.output == k)
          t = b.CreateConstInBoundsGEP1_64(b.getInt8Ty(), state, s.offset);
      b.CreateStore(t, b.CreateConstInBoundsGEP2_64(tangents->getAllocatedType(), tangents, 0, k));
    }
    // ZeRO-1: two more slots, its staging (TrainBinding::Kind::Staging).
    std::vector<int64_t> slots(tp.gradOffsets.begin(), tp.gradOffsets.end());
    if (tp.spec.zeroWorld > 0) slots.insert(slots.end(), {tp.shardParamOffset, tp.shardGradOffset});
    auto *grads = b.CreateAlloca(llvm::ArrayType::get(ptr, std::max<size_t>(slots.size(), 1)), nullptr, "grads");
    for (size_t j = 0; j < slots.size(); ++j)
      b.CreateStore(b.CreateConstInBoundsGEP1_64(b.getInt8Ty(), scratch, slots[j]),
                    b.CreateConstInBoundsGEP2_64(grads->getAllocatedType(), grads, 0, j));
    Value *tangentsPtr = b.CreateConstInBoundsGEP2_64(tangents->getAllocatedType(), tangents, 0, 0);
    Value *gradsPtr = b.CreateConstInBoundsGEP2_64(grads->getAllocatedType(), grads, 0, 0);
    DataParallel dp;
    if (tp.spec.dataParallel)
      dp = emitDataParallelBackward(f, cx, in, saved, state, scratch, fl, tangentsPtr, gradsPtr);
    else
      returnIfFailed(b.CreateCall(bwd, {cx, in, saved, tangentsPtr, gradsPtr, scratch}), "backward");
    // Mutated inputs (batch-norm statistics, the RNG state) take their new values.
    for (int k = 0; k < nOut; ++k) {
      int i = kp.outputs[k].updatesInput;
      if (i < 0) continue;
      auto load = [&](Value *arr, int idx) {
        return b.CreateAlignedLoad(ptr, b.CreateConstInBoundsGEP1_64(ptr, arr, idx), llvm::Align(8));
      };
      b.CreateMemCpy(load(in, i), llvm::Align(AOTC_ALIGNMENT), load(out, k), llvm::Align(AOTC_ALIGNMENT),
                     b.getInt64(kp.outputs[k].type.bytes()));
    }
    cg::EntryArgs ea{in, out, nullptr, nullptr, gradsPtr, nullptr, cx};
    ea.state = state;
    ea.hyper = hyper;
    ea.scratch = b.CreateConstInBoundsGEP1_64(b.getInt8Ty(), scratch, tp.graphScratchOffset, "train.scratch");
    auto *accBB = llvm::BasicBlock::Create(C, "accumulate", f);
    auto *updBB = llvm::BasicBlock::Create(C, "update", f);
    b.CreateCondBr(b.CreateICmpNE(b.CreateAnd(fl, b.getInt32(AOTC_STEP_ACCUMULATE)), b.getInt32(0)), accBB, updBB);
    const int64_t graphScratch = tp.scratchBytes - tp.graphScratchOffset;
    b.SetInsertPoint(accBB);
    if (tp.accumulate)
      emitGraph(tp.accumulateGraph, "acc", ea, graphScratch, true);
    else
      b.CreateRet(b.getInt32(AOTC_ERROR_NO_ACCUMULATION));
    b.SetInsertPoint(updBB);
    if (tp.spec.zeroWorld > 0) {
      emitZeroUpdate(dp, in, state, hyper, scratch, ea, graphScratch);
      return f;
    }
    if (tp.spec.dataParallel) waitForBuckets(dp, state, hyper);
    emitGraph(tp.update, "upd", ea, graphScratch, true);
    return f;
  }

  /// What the data-parallel backward leaves for the update: the communicator (NULL: one
  /// process), whether this step communicates, the requests of the buckets' all-reduces.
  struct DataParallel {
    Value *comm = nullptr, *communicate = nullptr;
    llvm::AllocaInst *requests = nullptr;
  };
  /// abi.h aotc_comm's fields.
  Value *commField(Value *comm, unsigned field) {
    llvm::StructType *ty = cg::abiType(C, cg::AbiStruct::Comm);
    Value *p = b.CreateStructGEP(ty, comm, field);
    return b.CreateAlignedLoad(ty->getElementType(field), p, llvm::Align(field == 1 || field == 2 ? 4 : 8));
  }
  enum CommField {
    kSelf = 0, kRank, kSize, kAllreduceStart, kTest, kWait, kProgress, kBroadcast, kAllreduce, kAbort, kError,
    kReduceScatterStart, kAllgatherStart
  };
  /// At the insertion point: if `cond`, what `body` emits; continues after it.
  void emitIf(Value *cond, const std::string &label, const std::function<void()> &body) {
    llvm::Function *F = b.GetInsertBlock()->getParent();
    auto *then = llvm::BasicBlock::Create(C, label, F);
    auto *cont = llvm::BasicBlock::Create(C, label + ".end", F);
    b.CreateCondBr(cond, then, cont);
    b.SetInsertPoint(then);
    body();
    b.CreateBr(cont);
    b.SetInsertPoint(cont);
  }
  /// Returns AOTC_ERROR_COMM when the communicator's call returned non-zero.
  void returnIfCommFailed(Value *rc, const std::string &label) {
    cg::returnIfNonZero(b, rc, label, b.getInt32(AOTC_ERROR_COMM));
  }
  /// The request slot of bucket i's collective (an i64 in the step's frame).
  Value *requestSlot(const DataParallel &dp, size_t i) {
    return b.CreateConstInBoundsGEP2_64(dp.requests->getAllocatedType(), dp.requests, 0, i);
  }
  /// comm->wait on bucket i's request; AOTC_ERROR_COMM when it fails.
  void waitRequest(const DataParallel &dp, size_t i, const std::string &label) {
    Value *req = b.CreateAlignedLoad(b.getInt64Ty(), requestSlot(dp, i), llvm::Align(8));
    Value *rc = b.CreateCall(llvm::FunctionType::get(b.getInt32Ty(), {b.getPtrTy(), b.getInt64Ty()}, false),
                             commField(dp.comm, kWait), {commField(dp.comm, kSelf), req});
    returnIfCommFailed(rc, label);
  }
  /// `void <name>.dp_add_<dt>(dst, src, n)`: dst[i] += src[i] (the accumulators into a bucket).
  llvm::Function *addFunction(DType dt) {
    const std::string sym = kp.name + ".dp_add_" + dtypeAbbr(dt);
    if (llvm::Function *f = M.getFunction(sym)) return f;
    llvm::Type *ptr = b.getPtrTy(), *et = dt == DType::F64 ? b.getDoubleTy() : b.getFloatTy();
    auto *f = llvm::Function::Create(llvm::FunctionType::get(b.getVoidTy(), {ptr, ptr, b.getInt64Ty()}, false),
                                     llvm::GlobalValue::InternalLinkage, sym, M);
    f->addFnAttr(llvm::Attribute::NoUnwind);
    f->addParamAttr(0, llvm::Attribute::NoAlias);
    f->addParamAttr(1, llvm::Attribute::NoAlias);
    IRBuilder<> fb(llvm::BasicBlock::Create(C, "entry", f));
    auto *loop = llvm::BasicBlock::Create(C, "loop", f), *done = llvm::BasicBlock::Create(C, "done", f);
    fb.CreateCondBr(fb.CreateICmpSGT(f->getArg(2), fb.getInt64(0)), loop, done);
    fb.SetInsertPoint(loop);
    llvm::PHINode *i = fb.CreatePHI(fb.getInt64Ty(), 2);
    i->addIncoming(fb.getInt64(0), &f->getEntryBlock());
    Value *d = fb.CreateInBoundsGEP(et, f->getArg(0), i), *sv = fb.CreateInBoundsGEP(et, f->getArg(1), i);
    fb.CreateStore(fb.CreateFAdd(fb.CreateLoad(et, d), fb.CreateLoad(et, sv)), d);
    Value *next = fb.CreateAdd(i, fb.getInt64(1));
    i->addIncoming(next, loop);
    fb.CreateCondBr(fb.CreateICmpSLT(next, f->getArg(2)), loop, done);
    fb.SetInsertPoint(done);
    fb.CreateRetVoid();
    return f;
  }

  /// The backward of a data-parallel train step (docs/distributed.md), inline: right after the
  /// kernel finishing a bucket's last gradient, the accumulators are added into the bucket (a
  /// last micro-batch) and its all-reduce starts; after every later kernel the communicator
  /// progresses. Micro-batches (AOTC_STEP_ACCUMULATE) and a context without a communicator do
  /// not communicate.
  DataParallel emitDataParallelBackward(llvm::Function *f, Value *cx, Value *in, Value *saved, Value *state,
                                        Value *scratch, Value *fl, Value *tangentsPtr, Value *gradsPtr) {
    const TrainPlan &tp = kp.train;
    llvm::Type *ptr = b.getPtrTy();
    DataParallel dp;
    const size_t nb = tp.buckets.size();
    {
      IRBuilder<>::InsertPointGuard g(b);
      b.SetInsertPoint(&f->getEntryBlock(), f->getEntryBlock().begin());
      dp.requests = b.CreateAlloca(llvm::ArrayType::get(b.getInt64Ty(), std::max<size_t>(nb, 1)), nullptr, "requests");
    }
    dp.comm = b.CreateAlignedLoad(ptr, b.CreateConstInBoundsGEP1_64(ptr, cx, cg::kContextCommWord), llvm::Align(8),
                                  "comm");
    Value *micro = b.CreateICmpNE(b.CreateAnd(fl, b.getInt32(AOTC_STEP_ACCUMULATE)), b.getInt32(0));
    dp.communicate = b.CreateAnd(b.CreateIsNotNull(dp.comm), b.CreateNot(micro), "communicate");
    // The last micro-batch adds the accumulators (count > 0) before its buckets are reduced.
    Value *addAcc = nullptr;
    if (tp.accumulate) {
      const StateTensor *count = nullptr;
      for (const StateTensor &s : tp.states)
        if (s.kind == StateKind::AccumCount) count = &s;
      AOTC_ASSERT(count, "codegen: accumulation without accum.count");
      Value *c = b.CreateAlignedLoad(b.getFloatTy(), b.CreateConstInBoundsGEP1_64(b.getInt8Ty(), state, count->offset),
                                     llvm::Align(4));
      addAcc = b.CreateAnd(b.CreateNot(micro), b.CreateFCmpOGT(c, llvm::ConstantFP::get(b.getFloatTy(), 0.0)), "add.acc");
    }
    // The padding between a bucket's gradients (and ZeRO-1's after the last) is reduced too:
    // zero it.
    for (const GradBucket &bk : tp.buckets)
      for (size_t i = 0; i < bk.grads.size(); ++i) {
        const int j = bk.grads[i];
        const int64_t end =
            i + 1 < bk.grads.size() ? tp.gradOffsets[bk.grads[i + 1]] : bk.offset + bk.count * itemSize(bk.dtype);
        const int64_t bytes = kp.grads[j].type.bytes(), pad = end - tp.gradOffsets[j] - bytes;
        if (pad > 0)
          b.CreateMemSet(b.CreateConstInBoundsGEP1_64(b.getInt8Ty(), scratch, tp.gradOffsets[j] + bytes), b.getInt8(0),
                         pad, llvm::Align(1));
      }
    // ZeRO-1: the gradient shard past the buckets' shares is padding the update reads: zero.
    if (tp.spec.zeroWorld > 0 && !tp.buckets.empty()) {
      const GradBucket &last = tp.buckets.back();
      const int64_t used = last.shardOffset + last.count / tp.spec.zeroWorld, isz = itemSize(tp.shardDType);
      if (used < tp.shardElems)
        b.CreateMemSet(b.CreateConstInBoundsGEP1_64(b.getInt8Ty(), scratch, tp.shardGradOffset + used * isz),
                       b.getInt8(0), (tp.shardElems - used) * isz, llvm::Align(AOTC_ALIGNMENT));
    }
    std::vector<std::vector<int>> startsAfter(kp.backward.kernels.size());
    for (size_t i = 0; i < nb; ++i) startsAfter[tp.buckets[i].startAfter].push_back((int)i);
    const int firstStart = nb ? tp.buckets.front().startAfter : INT_MAX;
    auto after = [&](size_t ki) {
      for (int i : startsAfter[ki]) {
        const GradBucket &bk = tp.buckets[i];
        if (addAcc)
          emitIf(addAcc, "bucket" + std::to_string(i) + ".acc", [&] {
            for (int j : bk.grads) {
              const StateTensor *acc = nullptr;
              for (const StateTensor &s : tp.states)
                if (s.kind == StateKind::Accum && s.paramInput == kp.gradInputIndex[j]) acc = &s;
              AOTC_ASSERT(acc, "codegen: no accumulator for gradient " + kp.grads[j].name);
              b.CreateCall(addFunction(bk.dtype),
                           {b.CreateConstInBoundsGEP1_64(b.getInt8Ty(), scratch, tp.gradOffsets[j]),
                            b.CreateConstInBoundsGEP1_64(b.getInt8Ty(), state, acc->offset),
                            b.getInt64(kp.grads[j].type.numel())});
            }
          });
        emitIf(dp.communicate, "bucket" + std::to_string(i) + ".start", [&] {
          Value *buf = b.CreateConstInBoundsGEP1_64(b.getInt8Ty(), scratch, bk.offset);
          Value *req = requestSlot(dp, i);
          Value *rc;
          if (const int zw = tp.spec.zeroWorld) {
            // ZeRO-1: this rank's share of the sum lands in its place in the gradient shard.
            Value *recv = b.CreateConstInBoundsGEP1_64(b.getInt8Ty(), scratch,
                                                       tp.shardGradOffset + bk.shardOffset * itemSize(bk.dtype));
            rc = b.CreateCall(collectiveType(), commField(dp.comm, kReduceScatterStart),
                              {commField(dp.comm, kSelf), buf, recv, b.getInt64(bk.count / zw),
                               b.getInt32((int)bk.dtype), req});
          } else {
            auto *fty = llvm::FunctionType::get(b.getInt32Ty(), {ptr, ptr, b.getInt64Ty(), b.getInt32Ty(), ptr}, false);
            rc = b.CreateCall(fty, commField(dp.comm, kAllreduceStart),
                              {commField(dp.comm, kSelf), buf, b.getInt64(bk.count), b.getInt32((int)bk.dtype), req});
          }
          returnIfCommFailed(rc, "bucket" + std::to_string(i) + ".start");
        });
      }
      if ((int)ki >= firstStart && ki + 1 < kp.backward.kernels.size())
        emitIf(dp.communicate, "progress" + std::to_string(ki), [&] {
          b.CreateCall(llvm::FunctionType::get(b.getVoidTy(), {ptr}, false), commField(dp.comm, kProgress),
                       {commField(dp.comm, kSelf)});
        });
    };
    cg::EntryArgs ea{in, nullptr, saved, tangentsPtr, gradsPtr, scratch, cx};
    emitGraph(kp.backward, "bwd", ea, kp.scratchBytes, false, after);
    return dp;
  }

  /// Before the update of a data-parallel step: wait for every bucket (in start order), then
  /// state dp.grad_scale = hyper grad_scale / world size (1 without communication).
  void waitForBuckets(const DataParallel &dp, Value *state, Value *hyper) {
    const TrainPlan &tp = kp.train;
    emitIf(dp.communicate, "wait", [&] {
      for (size_t i = 0; i < tp.buckets.size(); ++i) waitRequest(dp, i, "bucket" + std::to_string(i) + ".wait");
    });
    Value *world = b.CreateSIToFP(commFieldOrOne(dp), b.getDoubleTy());
    int h = -1;
    for (size_t i = 0; i < tp.hypers.size(); ++i)
      if (tp.hypers[i].name == "grad_scale") h = (int)i;
    AOTC_ASSERT(h >= 0 && tp.dpScaleState >= 0, "codegen: data parallel without grad_scale");
    Value *gs = b.CreateAlignedLoad(b.getDoubleTy(), b.CreateConstInBoundsGEP1_64(b.getDoubleTy(), hyper, h), llvm::Align(8));
    b.CreateAlignedStore(b.CreateFDiv(gs, world),
                         b.CreateConstInBoundsGEP1_64(b.getInt8Ty(), state, tp.states[tp.dpScaleState].offset),
                         llvm::Align(8));
  }
  /// abi.h's reduce_scatter_start / allgather_start: (self, send, recv, count, dtype, request).
  llvm::FunctionType *collectiveType() {
    llvm::Type *ptr = b.getPtrTy();
    return llvm::FunctionType::get(b.getInt32Ty(), {ptr, ptr, ptr, b.getInt64Ty(), b.getInt32Ty(), ptr}, false);
  }
  /// The parameter whose gradient is grads[j]: in[gradInputIndex[j]].
  Value *paramOfGrad(Value *in, int j) {
    llvm::Type *ptr = b.getPtrTy();
    return b.CreateAlignedLoad(ptr, b.CreateConstInBoundsGEP1_64(ptr, in, kp.gradInputIndex[j]), llvm::Align(8));
  }

  /// The update of a ZeRO-1 step (docs/distributed.md): without a communicator
  /// AOTC_ERROR_NO_COMM; else wait for the reduce-scatters (this rank's gradient shard is then
  /// in its staging), pack this rank's share of the parameters into theirs (zeroed first), the
  /// shard's sum of squares (shard-norm graph) all-reduced into dp.sumsq, the update graph over
  /// the shard, then every bucket's shares all-gathered into the bucket and copied out to the
  /// parameters.
  void emitZeroUpdate(const DataParallel &dp, Value *in, Value *state, Value *hyper, Value *scratch,
                      const cg::EntryArgs &ea, int64_t graphScratch) {
    const TrainPlan &tp = kp.train;
    const int64_t zw = tp.spec.zeroWorld;
    llvm::Type *ptr = b.getPtrTy();
    llvm::Function *F = b.GetInsertBlock()->getParent();
    auto *none = llvm::BasicBlock::Create(C, "zero1.nocomm", F), *go = llvm::BasicBlock::Create(C, "zero1", F);
    b.CreateCondBr(dp.communicate, go, none);
    b.SetInsertPoint(none);
    b.CreateRet(b.getInt32(AOTC_ERROR_NO_COMM));
    b.SetInsertPoint(go);
    waitForBuckets(dp, state, hyper);
    auto at = [&](Value *base, int64_t bytes) { return b.CreateConstInBoundsGEP1_64(b.getInt8Ty(), base, bytes); };
    const int64_t pShard = tp.shardParamOffset;
    Value *rank = b.CreateSExt(commField(dp.comm, kRank), b.getInt64Ty(), "rank");
    // Zeroed first: the positions no parameter fills (padding) stay 0 through the update.
    b.CreateMemSet(at(scratch, pShard), b.getInt8(0), tp.shardElems * itemSize(tp.shardDType), llvm::Align(AOTC_ALIGNMENT));
    for (const GradBucket &bk : tp.buckets) {
      const int64_t isz = itemSize(bk.dtype), share = bk.count / zw;
      Value *lo0 = b.CreateMul(rank, b.getInt64(share)), *hi0 = b.CreateAdd(lo0, b.getInt64(share));
      for (int j : bk.grads) {
        // Elements [o, o + n) of the bucket are this gradient's parameter; the rank owns [lo0, hi0).
        const int64_t o = (tp.gradOffsets[j] - bk.offset) / isz, n = kp.grads[j].type.numel();
        Value *lo = b.CreateBinaryIntrinsic(llvm::Intrinsic::smax, b.getInt64(o), lo0);
        Value *hi = b.CreateBinaryIntrinsic(llvm::Intrinsic::smin, b.getInt64(o + n), hi0);
        emitIf(b.CreateICmpSLT(lo, hi), "zero1.pack", [&] {
          Value *dst = b.CreateInBoundsGEP(b.getInt8Ty(), at(scratch, pShard + bk.shardOffset * isz),
                                           b.CreateMul(b.CreateSub(lo, lo0), b.getInt64(isz)));
          Value *src = b.CreateInBoundsGEP(b.getInt8Ty(), paramOfGrad(in, j),
                                           b.CreateMul(b.CreateSub(lo, b.getInt64(o)), b.getInt64(isz)));
          b.CreateMemCpy(dst, llvm::Align(isz), src, llvm::Align(isz), b.CreateMul(b.CreateSub(hi, lo), b.getInt64(isz)));
        });
      }
    }
    emitGraph(tp.shardNormGraph, "nrm", ea, graphScratch, false);
    const StateTensor &sq = tp.states[tp.sumsqState];
    Value *rc = b.CreateCall(llvm::FunctionType::get(b.getInt32Ty(), {ptr, ptr, b.getInt64Ty(), b.getInt32Ty()}, false),
                             commField(dp.comm, kAllreduce),
                             {commField(dp.comm, kSelf), at(state, sq.offset), b.getInt64(1), b.getInt32((int)sq.type.dtype)});
    returnIfCommFailed(rc, "zero1.sumsq");
    emitGraph(tp.update, "upd", ea, graphScratch, false);
    for (size_t i = 0; i < tp.buckets.size(); ++i) {
      const GradBucket &bk = tp.buckets[i];
      rc = b.CreateCall(collectiveType(), commField(dp.comm, kAllgatherStart),
                        {commField(dp.comm, kSelf), at(scratch, pShard + bk.shardOffset * itemSize(bk.dtype)),
                         at(scratch, bk.offset), b.getInt64(bk.count / zw), b.getInt32((int)bk.dtype),
                         requestSlot(dp, i)});
      returnIfCommFailed(rc, "gather" + std::to_string(i) + ".start");
    }
    for (size_t i = 0; i < tp.buckets.size(); ++i) {
      waitRequest(dp, i, "gather" + std::to_string(i) + ".wait");
      for (int j : tp.buckets[i].grads)
        b.CreateMemCpy(paramOfGrad(in, j), llvm::Align(AOTC_ALIGNMENT), at(scratch, tp.gradOffsets[j]),
                       llvm::Align(AOTC_ALIGNMENT), b.getInt64(kp.grads[j].type.bytes()));
    }
    b.CreateRet(b.getInt32(0));
  }

  /// The communicator's size when this step communicates, else 1.
  Value *commFieldOrOne(const DataParallel &dp) {
    llvm::Function *F = b.GetInsertBlock()->getParent();
    llvm::BasicBlock *from = b.GetInsertBlock();
    auto *read = llvm::BasicBlock::Create(C, "world.read", F), *cont = llvm::BasicBlock::Create(C, "world", F);
    b.CreateCondBr(dp.communicate, read, cont);
    b.SetInsertPoint(read);
    Value *n = commField(dp.comm, kSize);
    b.CreateBr(cont);
    b.SetInsertPoint(cont);
    llvm::PHINode *phi = b.CreatePHI(b.getInt32Ty(), 2, "world.size");
    phi->addIncoming(b.getInt32(1), from);
    phi->addIncoming(n, read);
    return phi;
  }

  void buildDescriptor(llvm::Function *fwd, llvm::Function *bwd, const cg::ContextFns &ctx, llvm::Function *train,
                       llvm::Function *eval) {
    llvm::Constant *init =
        cg::programDescriptor(M, kp, kp.errors, fwd, bwd, kp.errorValueOffset(), flags, ctx, train, eval,
                              cg::profileDescriptor(M, kp, profile, ctx));
    new llvm::GlobalVariable(M, init->getType(), true, llvm::GlobalValue::ExternalLinkage, init,
                             kp.name + "_program");
  }
};

} // namespace

/// The TargetInfo of a compile's options (CodegenOptions::target and cpu).
TargetInfo targetInfoOf(const CodegenOptions &opts) {
  if (opts.target == "cuda") return cudaTargetInfo();
  TargetInfo t = cpuTargetInfo(opts.cpu);
  t.gemmLibrary = opts.cpuGemm;
  return t;
}

void emitObject(const KernelProgram &in, const CodegenOptions &opts, Artifact &out) {
  // The schedule pass runs before codegen (the driver calls it so --emit=kernels shows it);
  // a program planned without it (unit tests) is scheduled here for opts' target.
  const TargetInfo want = targetInfoOf(opts);
  KernelProgram storage;
  const KernelProgram &kp = scheduledProgram(in, want, storage);
  if (kp.target.name != want.name)
    internalError("codegen: the program was scheduled for " + kp.target.name + ", not " + want.name);
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
    if (opts.emitObject) cg::emitCudaObject(kp, opts, out);
    return;
  }
  llvm::LLVMContext ctx;
  std::unique_ptr<llvm::Module> M =
      cg::buildKernelModule(kp, ctx, opts.emitMLIR ? &out.mlirText : nullptr);
  for (llvm::Function &f : *M)
    if (!f.isDeclaration()) f.setLinkage(llvm::GlobalValue::InternalLinkage);
  uint32_t flags = opts.sanitize == "address" ? AOTC_PROGRAM_ASAN
                   : opts.sanitize == "thread" ? AOTC_PROGRAM_TSAN
                                               : 0u;
  if (kp.checkedArena) flags |= AOTC_PROGRAM_CHECKED_ARENA;
  EntryBuilder eb(*M, kp, flags);
  eb.build();
  if (opts.cpu == "multi") cg::multiversion(*M, kp.name);
  cg::finishObject(*M, kp.name, opts, out);
}

} // namespace aotc
