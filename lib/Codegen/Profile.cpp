//===- Profile.cpp - The kernel table and the counters around each kernel ---===//
//
// What `aotc run --profile` and AOTC_PROFILE (docs/profiling.md) read from a CPU object:
//  * the kernel table (abi.h aotc_kernel_desc): every kernel of the forward, backward, eval,
//    update and accumulate graphs, in that order, with its static costs: bytes of the buffers
//    it reads plus those it writes, floating-point operations, a library call's shape;
//  * `<name>.profile_attach(ctx, counters)`: stores the counters' address in the context's
//    word kContextProfileWord (NULL: no profiling, the default);
//  * around each kernel call in an entry point, begin/end: when the context holds counters,
//    CLOCK_MONOTONIC before and after the call, the difference and one call added to the
//    kernel's pair. Without counters a kernel costs one compare of a value loaded once per
//    entry point (the functions are inlined).
// The costs are a pure function of the kernel graph; nothing here changes what a kernel computes.
//===----------------------------------------------------------------------===//
#include "CodegenInternal.h"

#include "aotc/Diagnostics.h"
#include "aotc/abi.h"

#include "llvm/IR/Constants.h"
#include "llvm/IR/Module.h"

#include <set>

namespace aotc::cg {

namespace {

const char *graphName(const std::string &tag) {
  if (tag == "fwd") return "forward";
  if (tag == "bwd") return "backward";
  if (tag == "evl") return "eval";
  if (tag == "upd") return "update";
  if (tag == "acc") return "accumulate";
  if (tag == "nrm") return "shard_norm";
  internalError("codegen: unknown graph tag '" + tag + "'");
}

/// Arithmetic of one iteration of a phase: its instructions other than constants, loads,
/// registers and index values, plus one per reduction.
int64_t phaseOps(const Phase &ph) {
  int64_t n = (int64_t)ph.reductions.size();
  for (const Inst &in : ph.insts)
    if (in.op != ScalarOp::Const && in.op != ScalarOp::Load && in.op != ScalarOp::Reg && in.op != ScalarOp::Index)
      ++n;
  return n;
}

ProfileRow rowOf(const KernelGraph &kg, const Kernel &k, const std::string &tag) {
  ProfileRow r;
  r.graph = graphName(tag);
  r.name = k.name;
  for (size_t i = 0; i < k.ops.size(); ++i) r.ops += (i ? "," : "") + k.ops[i];
  std::set<int> reads(k.reads.begin(), k.reads.end()), writes(k.writes.begin(), k.writes.end());
  for (int id : reads) r.bytes += kg.buffers[id].bytes();
  for (int id : writes) r.bytes += kg.buffers[id].bytes();
  int64_t outer = std::max<int64_t>(numelOf(k.outer), 1);
  for (const Phase &ph : k.phases)
    r.flops += (double)outer * (double)std::max<int64_t>(numelOf(ph.inner), 1) * (double)phaseOps(ph);
  r.dtype = k.writes.empty() ? DType::F32 : kg.buffers[k.writes.front()].type.dtype;
  r.kind = "loop";
  if (k.kind != Kernel::Kind::Extern || k.call.empty()) return r;
  r.kind = externFnName(k.call.fn);
  switch (k.call.fn) {
  case ExternFn::Gemm: {
    const GemmDesc &g = k.call.gemm;
    r.dtype = g.dtype;
    r.trans = (g.transA ? 1 : 0) | (g.transB ? 2 : 0);
    r.m = g.m, r.n = g.n, r.k = g.k, r.batch = g.batch;
    // The operands it touches (a view of a larger buffer moves only its part), C twice with beta.
    const double m = (double)r.m, n = (double)r.n, kk = (double)r.k;
    double elems = (double)r.batch * (m * kk + kk * n + (g.beta != 0 ? 2.0 : 1.0) * m * n);
    r.bytes = (int64_t)elems * itemSize(g.dtype);
    r.flops += 2.0 * (double)r.batch * m * n * kk;
    break;
  }
  case ExternFn::Conv: {
    const ConvGeometry &c = k.call.conv.geom;
    r.dtype = k.call.conv.dtype;
    r.m = c.N * c.OH * c.OW, r.n = c.K / c.groups, r.k = c.C / c.groups * c.KH * c.KW, r.batch = c.groups;
    r.flops += 2.0 * (double)r.m * (double)r.n * (double)r.k * (double)r.batch;
    break;
  }
  case ExternFn::Fft: r.dtype = k.call.fft.dtype; break;
  case ExternFn::Linalg: r.dtype = k.call.linalg.dtype; break;
  }
  return r;
}

llvm::Function *internalFunction(llvm::Module &M, llvm::Type *ret, llvm::ArrayRef<llvm::Type *> params,
                                 const std::string &name) {
  auto *f = llvm::Function::Create(llvm::FunctionType::get(ret, params, false), llvm::GlobalValue::InternalLinkage,
                                   name, M);
  f->addFnAttr(llvm::Attribute::NoUnwind);
  f->addFnAttr(llvm::Attribute::AlwaysInline);
  return f;
}

/// i64 aotc.prof.now(): CLOCK_MONOTONIC in nanoseconds.
llvm::Function *nowFunction(llvm::Module &M) {
  if (llvm::Function *f = M.getFunction("aotc.prof.now")) return f;
  llvm::LLVMContext &C = M.getContext();
  llvm::IRBuilder<> b(C);
  llvm::Type *i64 = b.getInt64Ty();
  llvm::FunctionCallee clock = M.getOrInsertFunction(
      "clock_gettime", llvm::FunctionType::get(b.getInt32Ty(), {b.getInt32Ty(), b.getPtrTy()}, false));
  llvm::Function *f = internalFunction(M, i64, {}, "aotc.prof.now");
  b.SetInsertPoint(llvm::BasicBlock::Create(C, "entry", f));
  auto *tsTy = llvm::StructType::get(C, {i64, i64}); // struct timespec
  llvm::Value *ts = b.CreateAlloca(tsTy, nullptr, "ts");
  b.CreateCall(clock, {b.getInt32(1 /* CLOCK_MONOTONIC */), ts});
  llvm::Value *sec = b.CreateLoad(i64, b.CreateStructGEP(tsTy, ts, 0));
  llvm::Value *nsec = b.CreateLoad(i64, b.CreateStructGEP(tsTy, ts, 1));
  b.CreateRet(b.CreateAdd(b.CreateMul(sec, b.getInt64(1000000000)), nsec));
  return f;
}

} // namespace

ProfileTable profileTable(const KernelProgram &kp) {
  ProfileTable t;
  forEachGraph(kp, [&](const KernelGraph &kg, const std::string &tag) {
    t.base[tag] = (int)t.rows.size();
    for (const Kernel &k : kg.kernels) t.rows.push_back(rowOf(kg, k, tag));
  });
  return t;
}

ProfileDesc profileDescriptor(llvm::Module &M, const KernelProgram &kp, const ProfileTable &t, const ContextFns &ctx) {
  llvm::LLVMContext &C = M.getContext();
  llvm::IRBuilder<> b(C);
  ProfileDesc d;
  d.count = (int)t.rows.size();
  auto *ty = abiType(C, AbiStruct::KernelDesc);
  std::vector<llvm::Constant *> rows;
  for (const ProfileRow &r : t.rows)
    rows.push_back(llvm::ConstantStruct::get(
        ty, {stringConstant(M, r.graph), stringConstant(M, r.name), stringConstant(M, r.kind), stringConstant(M, r.ops),
             b.getInt64(r.bytes), llvm::ConstantFP::get(b.getDoubleTy(), r.flops), b.getInt32((int)r.dtype) /* DType numbers are aotc_dtype's */,
             b.getInt32(r.trans), b.getInt64(r.m), b.getInt64(r.n), b.getInt64(r.k), b.getInt64(r.batch)}));
  if (!rows.empty())
    d.table = privateConstant(M, llvm::ConstantArray::get(llvm::ArrayType::get(ty, rows.size()), rows),
                              kp.name + ".kernels");

  // int profile_attach(aotc_context *ctx, int64_t *counters)
  llvm::Type *ptr = b.getPtrTy();
  d.attach = llvm::Function::Create(llvm::FunctionType::get(b.getInt32Ty(), {ptr, ptr}, false),
                                    llvm::GlobalValue::InternalLinkage, kp.name + ".profile_attach", M);
  d.attach->addFnAttr(llvm::Attribute::NoUnwind);
  b.SetInsertPoint(llvm::BasicBlock::Create(C, "entry", d.attach));
  checkContext(b, d.attach->getArg(0), ctx);
  b.CreateAlignedStore(d.attach->getArg(1),
                       b.CreateConstInBoundsGEP1_64(ptr, d.attach->getArg(0), kContextProfileWord), llvm::Align(8));
  b.CreateRet(b.getInt32(0));
  return d;
}

llvm::Value *contextProfile(llvm::IRBuilder<> &b, llvm::Value *ctx) {
  llvm::Type *ptr = b.getPtrTy();
  return b.CreateAlignedLoad(ptr, b.CreateConstInBoundsGEP1_64(ptr, ctx, kContextProfileWord), llvm::Align(8),
                             "ctx.profile");
}

llvm::Value *profileBegin(llvm::IRBuilder<> &b, llvm::Module &M, llvm::Value *counters) {
  llvm::Function *f = M.getFunction("aotc.prof.begin");
  if (!f) {
    llvm::LLVMContext &C = M.getContext();
    llvm::IRBuilder<> fb(C);
    f = internalFunction(M, fb.getInt64Ty(), {fb.getPtrTy()}, "aotc.prof.begin");
    auto *entry = llvm::BasicBlock::Create(C, "entry", f), *on = llvm::BasicBlock::Create(C, "on", f),
         *off = llvm::BasicBlock::Create(C, "off", f);
    fb.SetInsertPoint(entry);
    fb.CreateCondBr(fb.CreateIsNull(f->getArg(0)), off, on);
    fb.SetInsertPoint(off);
    fb.CreateRet(fb.getInt64(0));
    fb.SetInsertPoint(on);
    fb.CreateRet(fb.CreateCall(nowFunction(M), {}));
  }
  return b.CreateCall(f, {counters}, "prof.t0");
}

void profileEnd(llvm::IRBuilder<> &b, llvm::Module &M, llvm::Value *counters, int index, llvm::Value *t0) {
  llvm::Function *f = M.getFunction("aotc.prof.end");
  if (!f) {
    llvm::LLVMContext &C = M.getContext();
    llvm::IRBuilder<> fb(C);
    llvm::Type *i64 = fb.getInt64Ty();
    f = internalFunction(M, fb.getVoidTy(), {fb.getPtrTy(), i64, i64}, "aotc.prof.end");
    auto *entry = llvm::BasicBlock::Create(C, "entry", f), *on = llvm::BasicBlock::Create(C, "on", f),
         *off = llvm::BasicBlock::Create(C, "off", f);
    fb.SetInsertPoint(entry);
    fb.CreateCondBr(fb.CreateIsNull(f->getArg(0)), off, on);
    fb.SetInsertPoint(off);
    fb.CreateRetVoid();
    fb.SetInsertPoint(on);
    llvm::Value *dt = fb.CreateSub(fb.CreateCall(nowFunction(M), {}), f->getArg(2));
    llvm::Value *slot = fb.CreateInBoundsGEP(i64, f->getArg(0), fb.CreateMul(f->getArg(1), fb.getInt64(2)));
    fb.CreateAlignedStore(fb.CreateAdd(fb.CreateAlignedLoad(i64, slot, llvm::Align(8)), dt), slot, llvm::Align(8));
    llvm::Value *calls = fb.CreateConstInBoundsGEP1_64(i64, slot, 1);
    fb.CreateAlignedStore(fb.CreateAdd(fb.CreateAlignedLoad(i64, calls, llvm::Align(8)), fb.getInt64(1)), calls,
                          llvm::Align(8));
    fb.CreateRetVoid();
  }
  b.CreateCall(f, {counters, b.getInt64(index), t0});
}

} // namespace aotc::cg
