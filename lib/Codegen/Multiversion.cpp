//===- Multiversion.cpp - One object for every x86-64 level ---------------===//
//
// This file implements multiversion (CodegenInternal.h), the CPU target's `--cpu=multi`
// (the default). Before -O2, on the module ObjectEmit.cpp built:
//  * every function an entry point reaches (<name>_forward, _backward, _eval, _train_step,
//    their kernels, GEMM block functions and OpenMP outlined bodies) gets a clone per x86-64
//    level: the originals become the x86-64-v2 code (suffix .v2), clones .v3 and .v4 carry
//    "target-cpu" = x86-64-v3 / x86-64-v4, so -O2 vectorizes each for its own ISA (AVX2 + FMA,
//    AVX-512) and calls inside a clone stay within its level;
//  * <name>_context_create stores the level in context word kContextCpuWord: the highest
//    level whose instructions the CPU has and the OS saves (CPUID leaves 1, 7 and 0x80000001,
//    XGETBV for the AVX / AVX-512 state), lowered to AOTC_CPU's when that names a lower one
//    (v2, v3, v4; a level the host lacks is never chosen);
//  * each exported entry point becomes a dispatcher: it reads that word (0 for a NULL
//    context) and tail-calls its clone, which then checks the context as before. The
//    program descriptor's function pointers are moved to the dispatchers and the new
//    context_create, so the runtime (which calls through the descriptor) dispatches too.
// So CPUID runs once per context, and each call costs one load and one switch.
//===----------------------------------------------------------------------===//
#include "CodegenInternal.h"

#include "aotc/Diagnostics.h"

#include "llvm/ADT/SetVector.h"
#include "llvm/IR/Constants.h"
#include "llvm/IR/IRBuilder.h"
#include "llvm/IR/InlineAsm.h"
#include "llvm/IR/Module.h"
#include "llvm/Transforms/Utils/Cloning.h"
#include "llvm/Transforms/Utils/ValueMapper.h"

namespace aotc::cg {
namespace {

using llvm::Function;
using llvm::IRBuilder;
using llvm::Value;

/// The functions a value refers to, looking through constant expressions.
void collectFunctions(Value *v, llvm::SmallVectorImpl<Function *> &out,
                      llvm::SmallPtrSetImpl<llvm::Constant *> &seen) {
  if (auto *f = llvm::dyn_cast<Function>(v)) {
    out.push_back(f);
    return;
  }
  auto *c = llvm::dyn_cast<llvm::ConstantExpr>(v);
  if (!c || !seen.insert(c).second) return;
  for (Value *op : c->operands()) collectFunctions(op, out, seen);
}

/// Points every constant that refers to `from` (the program descriptor's function pointers)
/// at `to`; calls keep `from`.
void retarget(Function *from, Function *to) {
  llvm::SmallVector<llvm::Constant *, 4> users;
  for (llvm::User *u : from->users())
    if (auto *c = llvm::dyn_cast<llvm::Constant>(u); c && !llvm::isa<llvm::GlobalValue>(c)) users.push_back(c);
  for (llvm::Constant *c : users) c->handleOperandChange(from, to);
}

/// `int level(void)`: 0 (x86-64-v2), 1 (v3) or 2 (v4) for this CPU, capped by AOTC_CPU.
Function *emitLevelFunction(llvm::Module &M, const std::string &prog) {
  llvm::LLVMContext &C = M.getContext();
  IRBuilder<> b(C);
  llvm::Type *i32 = b.getInt32Ty(), *ptr = b.getPtrTy();
  auto *f = Function::Create(llvm::FunctionType::get(i32, {}, false), llvm::GlobalValue::InternalLinkage,
                             prog + ".cpu_level", M);
  f->addFnAttr(llvm::Attribute::NoUnwind);
  auto *regs = llvm::StructType::get(C, {i32, i32, i32, i32});
  auto *cpuidTy = llvm::FunctionType::get(regs, {i32, i32}, false);
  auto *cpuid = llvm::InlineAsm::get(cpuidTy, "cpuid", "={ax},={bx},={cx},={dx},{ax},{cx},~{dirflag},~{fpsr},~{flags}",
                                     /*hasSideEffects=*/true);
  auto *xgetbvTy = llvm::FunctionType::get(llvm::StructType::get(C, {i32, i32}), {i32}, false);
  auto *xgetbv = llvm::InlineAsm::get(xgetbvTy, "xgetbv", "={ax},={dx},{cx},~{dirflag},~{fpsr},~{flags}", true);
  auto reg = [&](Value *leaf, int sub, unsigned i) {
    return b.CreateExtractValue(b.CreateCall(cpuidTy, cpuid, {leaf, b.getInt32(sub)}), i);
  };
  auto bits = [&](Value *word, uint32_t mask) { return b.CreateICmpEQ(b.CreateAnd(word, mask), b.getInt32(mask)); };
  auto *entry = llvm::BasicBlock::Create(C, "entry", f);
  auto *xsave = llvm::BasicBlock::Create(C, "xsave", f);
  auto *leaf7 = llvm::BasicBlock::Create(C, "leaf7", f);
  auto *env = llvm::BasicBlock::Create(C, "env", f);
  b.SetInsertPoint(entry);
  Value *maxLeaf = reg(b.getInt32(0), 0, 0);
  Value *ecx1 = reg(b.getInt32(1), 0, 2);
  // v3 needs AVX (28), FMA (12), MOVBE (22), F16C (29) and OSXSAVE (27) for XGETBV.
  Value *v3base = bits(ecx1, (1u << 28) | (1u << 12) | (1u << 22) | (1u << 29) | (1u << 27));
  b.CreateCondBr(b.CreateAnd(v3base, b.CreateICmpUGE(maxLeaf, b.getInt32(7))), xsave, env);
  b.SetInsertPoint(xsave);
  Value *xcr0 = b.CreateExtractValue(b.CreateCall(xgetbvTy, xgetbv, {b.getInt32(0)}), 0);
  Value *osAvx = bits(xcr0, 0x6);     // SSE and AVX state saved
  Value *osAvx512 = bits(xcr0, 0xE6); // plus opmask, ZMM_Hi256, Hi16_ZMM
  b.CreateCondBr(osAvx, leaf7, env);
  b.SetInsertPoint(leaf7);
  Value *ebx7 = reg(b.getInt32(7), 0, 1);
  Value *maxExt = reg(b.getInt32((int32_t)0x80000000u), 0, 0);
  Value *lzcnt = b.CreateAnd(b.CreateICmpUGE(maxExt, b.getInt32((int32_t)0x80000001u)),
                             bits(reg(b.getInt32((int32_t)0x80000001u), 0, 2), 1u << 5));
  // AVX2 (5), BMI1 (3), BMI2 (8); AVX-512 F (16), DQ (17), CD (28), BW (30), VL (31).
  Value *v3 = b.CreateAnd(bits(ebx7, (1u << 5) | (1u << 3) | (1u << 8)), lzcnt);
  Value *v4 = b.CreateAnd(b.CreateAnd(v3, osAvx512),
                          bits(ebx7, (1u << 16) | (1u << 17) | (1u << 28) | (1u << 30) | (1u << 31)));
  Value *hw = b.CreateSelect(v4, b.getInt32(2), b.CreateSelect(v3, b.getInt32(1), b.getInt32(0)));
  b.CreateBr(env);
  b.SetInsertPoint(env);
  llvm::PHINode *level = b.CreatePHI(i32, 3, "level");
  level->addIncoming(b.getInt32(0), entry);
  level->addIncoming(b.getInt32(0), xsave);
  level->addIncoming(hw, leaf7);
  // AOTC_CPU = "v2" | "v3" | "v4" lowers the level (anything else is ignored).
  llvm::FunctionCallee getenvFn = M.getOrInsertFunction("getenv", llvm::FunctionType::get(ptr, {ptr}, false));
  Value *name = b.CreateGlobalStringPtr("AOTC_CPU", prog + ".aotc_cpu");
  Value *s = b.CreateCall(getenvFn, {name});
  auto *some = llvm::BasicBlock::Create(C, "env.set", f);
  auto *done = llvm::BasicBlock::Create(C, "done", f);
  b.CreateCondBr(b.CreateIsNull(s), done, some);
  b.SetInsertPoint(some);
  auto ch = [&](int i) { return b.CreateLoad(b.getInt8Ty(), b.CreateConstInBoundsGEP1_64(b.getInt8Ty(), s, i)); };
  Value *c0 = ch(0);
  // Each byte is read only after the previous one was not the terminator.
  auto *second = llvm::BasicBlock::Create(C, "env.1", f);
  auto *third = llvm::BasicBlock::Create(C, "env.2", f);
  auto *parsed = llvm::BasicBlock::Create(C, "env.parsed", f);
  b.CreateCondBr(b.CreateICmpEQ(c0, b.getInt8('v')), second, done);
  b.SetInsertPoint(second);
  Value *c1 = ch(1);
  Value *digit = b.CreateAnd(b.CreateICmpUGE(c1, b.getInt8('2')), b.CreateICmpULE(c1, b.getInt8('4')));
  b.CreateCondBr(digit, third, done);
  b.SetInsertPoint(third);
  b.CreateCondBr(b.CreateICmpEQ(ch(2), b.getInt8(0)), parsed, done);
  b.SetInsertPoint(parsed);
  Value *want = b.CreateSub(b.CreateZExt(c1, i32), b.getInt32('2'));
  Value *capped = b.CreateSelect(b.CreateICmpULT(want, level), want, level);
  b.CreateBr(done);
  b.SetInsertPoint(done);
  llvm::PHINode *out = b.CreatePHI(i32, 5, "cpu");
  for (llvm::BasicBlock *bb : {env, some, second, third}) out->addIncoming(level, bb);
  out->addIncoming(capped, parsed);
  b.CreateRet(out);
  return f;
}

} // namespace

void multiversion(llvm::Module &M, const std::string &prog) {
  static const char *const kLevels[] = {"x86-64-v2", "x86-64-v3", "x86-64-v4"};
  static const char *const kSuffix[] = {".v2", ".v3", ".v4"};
  llvm::LLVMContext &C = M.getContext();
  // The entry points and everything defined that they reach.
  std::vector<Function *> entries;
  for (const char *s : {"_forward", "_backward", "_eval", "_train_step"})
    if (Function *f = M.getFunction(prog + s); f && !f->isDeclaration()) entries.push_back(f);
  AOTC_ASSERT(!entries.empty(), "multiversion: no entry points in " + prog);
  llvm::SetVector<Function *> reach(entries.begin(), entries.end());
  for (size_t i = 0; i < reach.size(); ++i) {
    llvm::SmallVector<Function *, 8> fs;
    llvm::SmallPtrSet<llvm::Constant *, 8> seen;
    for (llvm::BasicBlock &bb : *reach[i])
      for (llvm::Instruction &in : bb)
        for (Value *op : in.operands()) collectFunctions(op, fs, seen);
    for (Function *f : fs)
      if (!f->isDeclaration()) reach.insert(f);
  }
  // The originals are the v2 code; entry points lose their exported names to the dispatchers.
  std::vector<std::string> entryNames;
  for (Function *f : entries) {
    entryNames.push_back(f->getName().str());
    f->setName(entryNames.back() + kSuffix[0]);
    f->setLinkage(llvm::GlobalValue::InternalLinkage);
  }
  for (Function *f : reach) {
    f->addFnAttr("target-cpu", kLevels[0]);
    if (!f->getName().ends_with(kSuffix[0])) f->setName(f->getName() + kSuffix[0]);
  }
  std::vector<std::vector<Function *>> clones(3);
  clones[0].assign(entries.begin(), entries.end());
  for (int lv = 1; lv < 3; ++lv) {
    llvm::ValueToValueMapTy vmap;
    std::vector<Function *> made;
    for (Function *f : reach) {
      std::string base = f->getName().str();
      if (base.size() > 3 && base.compare(base.size() - 3, 3, kSuffix[0]) == 0) base.resize(base.size() - 3);
      Function *nf = Function::Create(f->getFunctionType(), llvm::GlobalValue::InternalLinkage,
                                      base + kSuffix[lv], M);
      nf->setLinkage(llvm::GlobalValue::InternalLinkage);
      vmap[f] = nf;
      made.push_back(nf);
    }
    for (size_t i = 0; i < reach.size(); ++i) {
      Function *f = reach[i], *nf = made[i];
      auto arg = nf->arg_begin();
      for (llvm::Argument &a : f->args()) {
        arg->setName(a.getName());
        vmap[&a] = &*arg++;
      }
      llvm::SmallVector<llvm::ReturnInst *, 4> rets;
      llvm::CloneFunctionInto(nf, f, vmap, llvm::CloneFunctionChangeType::LocalChangesOnly, rets);
      nf->addFnAttr("target-cpu", kLevels[lv]); // after the clone, which copies f's attributes
    }
    for (Function *f : entries) clones[lv].push_back(llvm::cast<Function>(vmap[f]));
  }
  // The dispatchers, under the exported names.
  IRBuilder<> b(C);
  llvm::Type *ptr = b.getPtrTy();
  for (size_t e = 0; e < entries.size(); ++e) {
    Function *v2 = entries[e];
    Function *d = Function::Create(v2->getFunctionType(), llvm::GlobalValue::ExternalLinkage, entryNames[e], M);
    d->addFnAttr(llvm::Attribute::NoUnwind);
    auto *entry = llvm::BasicBlock::Create(C, "entry", d);
    auto *load = llvm::BasicBlock::Create(C, "level", d);
    auto *sw = llvm::BasicBlock::Create(C, "dispatch", d);
    b.SetInsertPoint(entry);
    Value *ctx = d->getArg(0);
    b.CreateCondBr(b.CreateIsNull(ctx), sw, load);
    b.SetInsertPoint(load);
    Value *word = b.CreateAlignedLoad(b.getInt64Ty(), b.CreateConstInBoundsGEP1_64(ptr, ctx, kContextCpuWord),
                                      llvm::Align(8), "cpu");
    b.CreateBr(sw);
    b.SetInsertPoint(sw);
    llvm::PHINode *lv = b.CreatePHI(b.getInt64Ty(), 2);
    lv->addIncoming(b.getInt64(0), entry);
    lv->addIncoming(word, load);
    std::vector<Value *> args;
    for (llvm::Argument &a : d->args()) args.push_back(&a);
    auto call = [&](Function *f) {
      llvm::CallInst *c = b.CreateCall(f, args);
      c->setTailCallKind(llvm::CallInst::TCK_MustTail);
      b.CreateRet(c);
    };
    auto *dflt = llvm::BasicBlock::Create(C, "v2", d);
    llvm::SwitchInst *s = b.CreateSwitch(lv, dflt, 2);
    for (int l = 1; l < 3; ++l) {
      auto *bb = llvm::BasicBlock::Create(C, std::string("v") + char('2' + l), d);
      s->addCase(b.getInt64(l), bb);
      b.SetInsertPoint(bb);
      call(clones[l][e]);
    }
    b.SetInsertPoint(dflt);
    call(v2);
    retarget(v2, d);
  }
  // The context's level, set once where it is made.
  Function *create = M.getFunction(prog + "_context_create");
  AOTC_ASSERT(create && !create->isDeclaration(), "multiversion: no context_create in " + prog);
  create->setName(prog + ".context_create.base");
  create->setLinkage(llvm::GlobalValue::InternalLinkage);
  Function *level = emitLevelFunction(M, prog);
  Function *nc = Function::Create(create->getFunctionType(), llvm::GlobalValue::ExternalLinkage,
                                  prog + "_context_create", M);
  nc->addFnAttr(llvm::Attribute::NoUnwind);
  auto *entry = llvm::BasicBlock::Create(C, "entry", nc);
  auto *set = llvm::BasicBlock::Create(C, "set", nc);
  auto *done = llvm::BasicBlock::Create(C, "done", nc);
  b.SetInsertPoint(entry);
  Value *p = b.CreateCall(create, {}, "ctx");
  b.CreateCondBr(b.CreateIsNull(p), done, set);
  b.SetInsertPoint(set);
  b.CreateAlignedStore(b.CreateZExt(b.CreateCall(level, {}), b.getInt64Ty()),
                       b.CreateConstInBoundsGEP1_64(ptr, p, kContextCpuWord), llvm::Align(8));
  b.CreateBr(done);
  b.SetInsertPoint(done);
  b.CreateRet(p);
  retarget(create, nc);
}

} // namespace aotc::cg
