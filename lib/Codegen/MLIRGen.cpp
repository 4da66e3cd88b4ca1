//===- MLIRGen.cpp - Kernels.h loop kernels -> MLIR -> LLVM IR ------------===//
//
// This file implements buildKernelModule (CodegenInternal.h). Each Loop kernel
// becomes a func.func over bare-pointer memrefs (one flat memref per buffer;
// element addresses are computed from the kernel's affine Accesses):
//   scf.parallel over the kernel's parallel outer dims (no reductions: every
//   fold stays inside one outer iteration, so results do not depend on the
//   number of threads) / scf.for over the other outer dims,
//     per phase: an scf.for nest over the inner domain, carrying the
//     accumulators of reduce phases as iter_args,
// with arith/math for the scalar code. The GEMM of a GEMM extern kernel is a function
// of its own: fixed-size blocks of C (from the shapes only) in an scf.parallel,
// one single-threaded cblas_[sd]gemm call (llvm.call) per block. Bounds-checked (data-dependent) accesses
// are guarded by scf.if and record {code, value} in the status pair.
// Lowering (C++ PassManager): scf-to-openmp, math-to-libm, then one conversion
// to the LLVM dialect (scf->cf, arith, math, memref, cf, func with the
// bare-pointer calling convention, openmp), reconcile-unrealized-casts, and
// translateModuleToLLVMIR.
//===----------------------------------------------------------------------===//
#include "CodegenInternal.h"
#include "ScalarEmit.h"

#include "aotc/Diagnostics.h"

#include "mlir/Conversion/ArithToLLVM/ArithToLLVM.h"
#include "mlir/Conversion/ControlFlowToLLVM/ControlFlowToLLVM.h"
#include "mlir/Conversion/FuncToLLVM/ConvertFuncToLLVM.h"
#include "mlir/Conversion/LLVMCommon/ConversionTarget.h"
#include "mlir/Conversion/LLVMCommon/TypeConverter.h"
#include "mlir/Conversion/MathToLLVM/MathToLLVM.h"
#include "mlir/Conversion/MathToLibm/MathToLibm.h"
#include "mlir/Conversion/MemRefToLLVM/MemRefToLLVM.h"
#include "mlir/Conversion/OpenMPToLLVM/ConvertOpenMPToLLVM.h"
#include "mlir/Conversion/ReconcileUnrealizedCasts/ReconcileUnrealizedCasts.h"
#include "mlir/Conversion/SCFToControlFlow/SCFToControlFlow.h"
#include "mlir/Conversion/SCFToOpenMP/SCFToOpenMP.h"
#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/ControlFlow/IR/ControlFlow.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Dialect/LLVMIR/LLVMDialect.h"
#include "mlir/Dialect/Math/IR/Math.h"
#include "mlir/Dialect/Math/Transforms/Passes.h"
#include "mlir/Transforms/GreedyPatternRewriteDriver.h"
#include "mlir/Dialect/MemRef/IR/MemRef.h"
#include "mlir/Dialect/OpenMP/OpenMPDialect.h"
#include "mlir/Dialect/SCF/IR/SCF.h"
#include "mlir/IR/Builders.h"
#include "mlir/IR/IRMapping.h"
#include "mlir/IR/BuiltinOps.h"
#include "mlir/IR/MLIRContext.h"
#include "mlir/IR/Verifier.h"
#include "mlir/Pass/Pass.h"
#include "mlir/Pass/PassManager.h"
#include "mlir/Target/LLVMIR/Dialect/Builtin/BuiltinToLLVMIRTranslation.h"
#include "mlir/Target/LLVMIR/Dialect/LLVMIR/LLVMToLLVMIRTranslation.h"
#include "mlir/Target/LLVMIR/Dialect/OpenMP/OpenMPToLLVMIRTranslation.h"
#include "mlir/Target/LLVMIR/Export.h"
#include "mlir/Transforms/DialectConversion.h"
#include "mlir/Transforms/Passes.h"

#include "llvm/IR/Module.h"
#include "llvm/Support/raw_ostream.h"

#include <algorithm>
#include <limits>
#include <map>

using namespace mlir;

namespace aotc::cg {

std::string kernelSymbol(const std::string &prog, const std::string &tag, const std::string &kernel) {
  return prog + "_" + tag + "_" + kernel;
}

std::string kernelSymbol(const std::string &prog, bool backward, const std::string &kernel) {
  return kernelSymbol(prog, std::string(backward ? "bwd" : "fwd"), kernel);
}

std::string gemmSymbol(const std::string &prog, const std::string &tag, const std::string &kernel) {
  return kernelSymbol(prog, tag, kernel) + "_gemm";
}

std::string gemmSymbol(const std::string &prog, bool backward, const std::string &kernel) {
  return gemmSymbol(prog, std::string(backward ? "bwd" : "fwd"), kernel);
}

std::vector<int> kernelArgs(const Kernel &k) {
  std::vector<int> ids = k.reads;
  ids.insert(ids.end(), k.writes.begin(), k.writes.end());
  if (k.kind == Kernel::Kind::Extern) {
    // Only the buffers the init phases touch (the call gets its operands itself).
    ids.clear();
    for (auto &p : k.phases)
      for (auto &a : p.accesses)
        if (a.buffer >= 0) ids.push_back(a.buffer);
  }
  std::sort(ids.begin(), ids.end());
  ids.erase(std::unique(ids.begin(), ids.end()), ids.end());
  return ids;
}

namespace {

class KernelBuilder : public ScalarEmitter {
public:
  KernelBuilder(OpBuilder &b, const KernelGraph &kg, const Kernel &k) : ScalarEmitter(b, kg, k) {
    reassocFolds_ = true;
    reuse_ = k.schedule.reuse;
  }

  void build(ModuleOp mod, const std::string &sym);

};

void KernelBuilder::build(ModuleOp mod, const std::string &sym) {
  std::vector<int> args = kernelArgs(k_);
  SmallVector<Type> types;
  for (int id : args) {
    const Buffer &bf = kg_.buffers[id];
    types.push_back(MemRefType::get({std::max<int64_t>(bf.type.numel(), 1)},
                                    elemType(ctx_, bf.type.dtype, true)));
  }
  bool fail = k_.mayFail();
  if (fail) types.push_back(MemRefType::get({2}, b_.getI64Type()));
  b_.setInsertionPointToEnd(mod.getBody());
  auto fn = b_.create<func::FuncOp>(loc_, sym, b_.getFunctionType(types, {}));
  Block *entry = fn.addEntryBlock();
  b_.setInsertionPointToStart(entry);
  for (size_t i = 0; i < args.size(); ++i) bufArg_[args[i]] = entry->getArgument(i);
  if (fail) status_ = entry->getArgument(args.size());
  // Outer loops as the schedule says (Schedule.h): parallel dims first, then sequential ones.
  // With `lanes` > 1 the innermost outer dim steps by `lanes` and the body runs that many
  // outer iterations (unroll-and-jam, ScalarEmitter::emitLanesBody): a column reduction's
  // inner step loads `lanes` contiguous values the SLP vectorizer combines. Every outer
  // iteration still folds in its own order, so results are bit-identical to 1 lane.
  if (!k_.schedule.valid) internalError("codegen: kernel " + k_.name + " has no schedule");
  if (k_.schedule.split()) { // long folds in parallel chunks (Schedule.h)
    emitSplitBody(k_.schedule.splitRows);
    b_.setInsertionPointToEnd(entry);
    b_.create<func::ReturnOp>(loc_);
    return;
  }
  const int64_t lanes = k_.schedule.lanes, block = k_.schedule.block;
  int np = std::min<int>(k_.schedule.parallelDims, (int)k_.outer.size());
  SmallVector<Value> plb, pub, pst, slb, sub, sst;
  for (int d = 0; d < (int)k_.outer.size(); ++d) {
    int64_t extent = k_.outer[d] / (d + 1 == (int)k_.outer.size() ? (block > 0 ? block : lanes) : 1);
    (d < np ? plb : slb).push_back(cIdx(0));
    (d < np ? pub : sub).push_back(cIdx(extent));
    (d < np ? pst : sst).push_back(cIdx(1));
  }
  auto sequential = [&](OpBuilder &b, Location l, ValueRange pivs) {
    OpBuilder::InsertionGuard g(b_);
    b_.setInsertionPoint(b.getInsertionBlock(), b.getInsertionPoint());
    SmallVector<Value> pv(pivs.begin(), pivs.end());
    scf::buildLoopNest(b_, loc_, slb, sub, sst, [&](OpBuilder &b2, Location l2, ValueRange sivs) {
      OpBuilder::InsertionGuard g2(b_);
      b_.setInsertionPoint(b2.getInsertionBlock(), b2.getInsertionPoint());
      SmallVector<Value> all = pv;
      all.append(sivs.begin(), sivs.end());
      if (block > 0) {
        emitBlockBody(all, block);
        return;
      }
      if (lanes == 1) {
        emitSequentialBody(all);
        return;
      }
      std::vector<std::vector<Value>> laneOuter;
      Value base = b_.create<arith::MulIOp>(loc_, all.back(), cIdx(lanes));
      for (int64_t t = 0; t < lanes; ++t) {
        laneOuter.emplace_back(all.begin(), all.end());
        laneOuter.back().back() = t ? b_.create<arith::AddIOp>(loc_, base, cIdx(t)).getResult() : base;
      }
      emitLanesBody(laneOuter);
    });
  };
  if (np > 0) {
    b_.create<scf::ParallelOp>(loc_, plb, pub, pst,
                               [&](OpBuilder &b, Location l, ValueRange ivs) { sequential(b, l, ivs); });
  } else {
    sequential(b_, loc_, {});
  }
  b_.setInsertionPointToEnd(entry);
  b_.create<func::ReturnOp>(loc_);
}

/// Declares `i32 NAME()` (omp_get_thread_num, omp_get_num_threads) in mod once.
static func::FuncOp declareOmpQuery(ModuleOp mod, StringRef name) {
  if (auto f = mod.lookupSymbol<func::FuncOp>(name)) return f;
  OpBuilder mb(mod.getContext());
  mb.setInsertionPointToStart(mod.getBody());
  auto f = mb.create<func::FuncOp>(mod.getLoc(), name, mb.getFunctionType({}, {mb.getI32Type()}));
  f.setPrivate();
  return f;
}

/// The GEMM of a GEMM extern kernel as `func.func @<kernel>_gemm(%a, %b, %c: !llvm.ptr)`:
/// the schedule's GemmBlocks of C (rows or columns, per batch entry), run as single-threaded
/// `llvm.call @cblas_[sd]gemm`s (row-major, transposes as flags). A parallel GEMM is an
/// omp.parallel in which thread t of n takes the t-th contiguous share of the count × batch
/// blocks and makes one call per batch entry for its run of blocks (GemmBlocks::tailAlone: a
/// small last block is a call of its own): every call packs the operand the blocks share, so
/// one call for a thread's blocks packs it once where a call per block packed it count / n
/// times (a 2048^3 mm in 16 blocks: 169-184 -> 135-150 ms at 1 thread, 91-104 -> 71 at 2).
/// Bit-identity across thread counts: every call covers blocks of >= gemmBlockMacs
/// multiply-adds, or exactly the small last block as before, and OpenBLAS's level-3 driver
/// computes each element of C the same way whatever rows or columns the call covers (its K
/// blocking depends on K alone; its small-matrix kernels, chosen by m·n·k, stay below a
/// block's size); the tests compare outputs at 1 and 2 threads byte for byte. A oneDNN GEMM
/// (GemmBlocks::library) calls aotc_onednn_sgemm once per block instead: oneDNN's bits
/// depend on the rows and columns a call covers.
void buildGemmFunction(OpBuilder &b, ModuleOp mod, const Kernel &k, const std::string &sym) {
  const GemmDesc &g = k.call.gemm;
  for (int64_t v : {g.m, g.n, g.k, g.lda, g.ldb, g.ldc})
    if (v > std::numeric_limits<int32_t>::max())
      userError("codegen: matrix dimension " + std::to_string(v) + " exceeds BLAS int range");
  MLIRContext *ctx = b.getContext();
  Location loc = UnknownLoc::get(ctx);
  Type fp = g.dtype == DType::F64 ? (Type)Float64Type::get(ctx) : (Type)Float32Type::get(ctx);
  Type i32 = b.getI32Type();
  Type ptr = LLVM::LLVMPointerType::get(ctx);
  if (!k.schedule.valid) internalError("codegen: kernel " + k.name + " has no schedule");
  const GemmBlocks &gb = k.schedule.gemm;
  // oneDNN: aotc_onednn_sgemm (libaotc_kernels), cblas_sgemm's arguments; a call per block.
  const bool dnnl = gb.library == GemmLibrary::OneDnn;
  if (dnnl && g.dtype != DType::F32) internalError("codegen: oneDNN GEMM of " + k.name + " is not f32");
  const char *blas = dnnl ? "aotc_onednn_sgemm" : g.dtype == DType::F64 ? "cblas_dgemm" : "cblas_sgemm";
  if (!mod.lookupSymbol(blas)) {
    auto fty = LLVM::LLVMFunctionType::get(LLVM::LLVMVoidType::get(ctx),
                                           {i32, i32, i32, i32, i32, i32, fp, ptr, i32, ptr, i32, fp, ptr, i32});
    b.setInsertionPointToStart(mod.getBody());
    b.create<LLVM::LLVMFuncOp>(loc, blas, fty);
  }
  const int64_t total = gb.count * g.batch;
  func::FuncOp tidFn, nthFn;
  if (total > 1 && gb.parallel) {
    tidFn = declareOmpQuery(mod, "omp_get_thread_num");
    nthFn = declareOmpQuery(mod, "omp_get_num_threads");
  }
  b.setInsertionPointToEnd(mod.getBody());
  auto fn = b.create<func::FuncOp>(loc, sym, b.getFunctionType({ptr, ptr, ptr}, {}));
  Block *entry = fn.addEntryBlock();
  b.setInsertionPointToStart(entry);
  int64_t extent = gb.rows ? g.m : g.n;
  Value pa = entry->getArgument(0), pb = entry->getArgument(1), pc = entry->getArgument(2);
  // One call for blocks [s, e) of batch entry bi (index values; s < e).
  auto call = [&](OpBuilder &ob, Value bi, Value s, Value e) {
    auto ci = [&](int64_t v) { return ob.create<arith::ConstantIndexOp>(loc, v).getResult(); };
    auto add = [&](Value x, Value y) { return ob.create<arith::AddIOp>(loc, x, y).getResult(); };
    auto mul = [&](Value x, int64_t c) { return ob.create<arith::MulIOp>(loc, x, ci(c)).getResult(); };
    Value start = mul(s, gb.size);
    Value len = ob.create<arith::SubIOp>(loc, ob.create<arith::MinUIOp>(loc, mul(e, gb.size), ci(extent)), start);
    Value offA = add(ci(g.offA), mul(bi, g.strideA));
    Value offB = add(ci(g.offB), mul(bi, g.strideB));
    Value offC = add(ci(g.offC), mul(bi, g.strideC));
    if (gb.rows) {
      offA = add(offA, mul(start, g.transA ? int64_t(1) : (int64_t)g.lda));
      offC = add(offC, mul(start, g.ldc));
    } else {
      offB = add(offB, mul(start, g.transB ? (int64_t)g.ldb : int64_t(1)));
      offC = add(offC, start);
    }
    auto at = [&](Value base, Value off) {
      Value o = ob.create<arith::IndexCastOp>(loc, ob.getI64Type(), off);
      return ob.create<LLVM::GEPOp>(loc, ptr, fp, base, ValueRange{o}, /*inbounds=*/true).getResult();
    };
    auto i32c = [&](int64_t v) { return ob.create<arith::ConstantIntOp>(loc, v, 32).getResult(); };
    auto i32v = [&](Value v) { return ob.create<arith::IndexCastOp>(loc, i32, v).getResult(); };
    auto fpc = [&](double v) { return ob.create<arith::ConstantOp>(loc, fp, ob.getFloatAttr(fp, v)).getResult(); };
    Value M = gb.rows ? i32v(len) : i32c(g.m);
    Value N = gb.rows ? i32c(g.n) : i32v(len);
    ob.create<LLVM::CallOp>(
        loc, TypeRange{}, blas,
        ValueRange{i32c(101), i32c(g.transA ? 112 : 111), i32c(g.transB ? 112 : 111), M, N, i32c(g.k),
                   fpc(g.alpha), at(pa, offA), i32c(std::max<int64_t>(g.lda, 1)), at(pb, offB),
                   i32c(std::max<int64_t>(g.ldb, 1)), fpc(g.beta), at(pc, offC),
                   i32c(std::max<int64_t>(g.ldc, 1))});
  };
  auto cidx = [&](OpBuilder &ob, int64_t v) { return ob.create<arith::ConstantIndexOp>(loc, v).getResult(); };
  if (total == 1) {
    call(b, cidx(b, 0), cidx(b, 0), cidx(b, 1));
  } else if (!gb.parallel) {
    b.create<scf::ForOp>(loc, cidx(b, 0), cidx(b, total), cidx(b, 1), ValueRange{},
                         [&](OpBuilder &ob, Location l, Value iv, ValueRange) {
                           Value bi = ob.create<arith::DivUIOp>(l, iv, cidx(ob, gb.count));
                           Value s = ob.create<arith::RemUIOp>(l, iv, cidx(ob, gb.count));
                           call(ob, bi, s, ob.create<arith::AddIOp>(l, s, cidx(ob, 1)));
                           ob.create<scf::YieldOp>(l);
                         });
  } else {
    // Thread t of n: blocks [t·total/n, (t+1)·total/n), walked per batch entry.
    auto omp = b.create<omp::ParallelOp>(loc);
    Block *blk = b.createBlock(&omp.getRegion());
    b.setInsertionPointToStart(blk);
    auto q = [&](func::FuncOp f) -> Value {
      return b.create<arith::IndexCastOp>(loc, b.getIndexType(), b.create<func::CallOp>(loc, f).getResult(0));
    };
    Value tid = q(tidFn), nth = q(nthFn), tot = cidx(b, total), cnt = cidx(b, gb.count), one = cidx(b, 1);
    Value lo = b.create<arith::DivUIOp>(loc, b.create<arith::MulIOp>(loc, tid, tot), nth);
    Value hi = b.create<arith::DivUIOp>(loc, b.create<arith::MulIOp>(loc, b.create<arith::AddIOp>(loc, tid, one), tot), nth);
    Value firstEntry = b.create<arith::DivUIOp>(loc, lo, cnt);
    Value endEntry = b.create<arith::DivUIOp>(loc, b.create<arith::SubIOp>(loc, b.create<arith::AddIOp>(loc, hi, cnt), one), cnt);
    b.create<scf::ForOp>(
        loc, firstEntry, endEntry, one, ValueRange{}, [&](OpBuilder &ob, Location l, Value bi, ValueRange) {
          Value base = ob.create<arith::MulIOp>(l, bi, cnt);
          Value s = ob.create<arith::SubIOp>(l, ob.create<arith::MaxUIOp>(l, lo, base), base);
          Value e = ob.create<arith::SubIOp>(
              l, ob.create<arith::MinUIOp>(l, hi, ob.create<arith::AddIOp>(l, base, cnt)), base);
          // One call for blocks [x, y) of this entry when x < y.
          auto callIfAny = [&](Value x, Value y) {
            Value any = ob.create<arith::CmpIOp>(l, arith::CmpIPredicate::ult, x, y);
            ob.create<scf::IfOp>(l, any, [&](OpBuilder &tb, Location tl) {
              call(tb, bi, x, y);
              tb.create<scf::YieldOp>(tl);
            });
          };
          if (dnnl) { // one call per block of [s, e)
            ob.create<scf::ForOp>(l, s, e, one, ValueRange{}, [&](OpBuilder &fb, Location fl, Value j, ValueRange) {
              call(fb, bi, j, fb.create<arith::AddIOp>(fl, j, one));
              fb.create<scf::YieldOp>(fl);
            });
          } else if (!gb.tailAlone) {
            callIfAny(s, e);
          } else { // [s, min(e, last)), then [max(s, last), e): the last block alone
            Value last = cidx(ob, gb.count - 1);
            callIfAny(s, ob.create<arith::MinUIOp>(l, e, last));
            callIfAny(ob.create<arith::MaxUIOp>(l, s, last), e);
          }
          ob.create<scf::YieldOp>(l);
        });
    b.setInsertionPointToEnd(blk);
    b.create<omp::TerminatorOp>(loc);
  }
  b.setInsertionPointToEnd(entry);
  b.create<func::ReturnOp>(loc);
}

/// Every outermost scf.parallel becomes an omp.parallel in which thread t of n runs the t-th
/// contiguous block of ceil(N / n) of the N (row-major linearized) iterations, exactly the
/// iterations a static schedule gives it, in an scf.for. Not scf-to-openmp's omp.wsloop:
/// its __kmpc_for_static_init_8u in Debian's libomp 19 (built with KMP_DEBUG) formats a
/// trace string with malloc on every call, a heap allocation per parallel loop and step
/// (docs/training.md "No allocation per step"). Iterations are independent (reductions never
/// cross outer iterations, Kernels.h), so the results do not depend on the split.
void distributeParallelLoops(ModuleOp mod) {
  SmallVector<scf::ParallelOp> loops;
  mod.walk([&](scf::ParallelOp p) {
    if (!p->getParentOfType<scf::ParallelOp>()) loops.push_back(p);
  });
  if (loops.empty()) return;
  func::FuncOp tidFn = declareOmpQuery(mod, "omp_get_thread_num"), nthFn = declareOmpQuery(mod, "omp_get_num_threads");
  for (scf::ParallelOp par : loops) {
    OpBuilder b(par);
    Location loc = par.getLoc();
    auto idx = [&](int64_t v) -> Value { return b.create<arith::ConstantIndexOp>(loc, v); };
    auto ceilDiv = [&](Value a, Value d) -> Value { // (a + d - 1) / d, a >= 0, d > 0
      return b.create<arith::DivUIOp>(loc, b.create<arith::SubIOp>(loc, b.create<arith::AddIOp>(loc, a, d), idx(1)), d);
    };
    const size_t n = par.getNumLoops();
    SmallVector<Value> trips;
    Value total = idx(1);
    for (size_t d = 0; d < n; ++d) {
      Value span = b.create<arith::SubIOp>(loc, par.getUpperBound()[d], par.getLowerBound()[d]);
      trips.push_back(ceilDiv(span, par.getStep()[d]));
      total = b.create<arith::MulIOp>(loc, total, trips.back());
    }
    auto omp = b.create<omp::ParallelOp>(loc);
    Block *blk = b.createBlock(&omp.getRegion());
    b.setInsertionPointToStart(blk);
    auto call = [&](func::FuncOp f) -> Value {
      return b.create<arith::IndexCastOp>(loc, b.getIndexType(), b.create<func::CallOp>(loc, f).getResult(0));
    };
    Value tid = call(tidFn), nth = call(nthFn);
    Value chunk = ceilDiv(total, nth);
    Value begin = b.create<arith::MinUIOp>(loc, total, b.create<arith::MulIOp>(loc, tid, chunk));
    Value end = b.create<arith::MinUIOp>(loc, total, b.create<arith::AddIOp>(loc, begin, chunk));
    auto loop = b.create<scf::ForOp>(loc, begin, end, idx(1));
    b.setInsertionPointToStart(loop.getBody());
    IRMapping map;
    Value rem = loop.getInductionVar();
    for (size_t d = n; d-- > 0;) {
      Value r = d > 0 ? b.create<arith::RemUIOp>(loc, rem, trips[d]).getResult() : rem;
      if (d > 0) rem = b.create<arith::DivUIOp>(loc, rem, trips[d]);
      Value iv = b.create<arith::AddIOp>(loc, par.getLowerBound()[d],
                                         b.create<arith::MulIOp>(loc, r, par.getStep()[d]));
      map.map(par.getInductionVars()[d], iv);
    }
    // A stack scope per iteration, as scf-to-openmp does, so allocas in the body do not pile up.
    auto scope = b.create<memref::AllocaScopeOp>(loc, TypeRange{});
    b.createBlock(&scope.getBodyRegion());
    for (Operation &op : par.getBody()->without_terminator()) b.clone(op, map);
    b.create<memref::AllocaScopeReturnOp>(loc);
    b.setInsertionPointToEnd(blk);
    b.create<omp::TerminatorOp>(loc);
    par.erase();
  }
}

/// Lowers scf/arith/math/memref/func/omp to the LLVM dialect.
LogicalResult lowerToLLVMDialect(ModuleOp mod) {
  MLIRContext *ctx = mod.getContext();
  {
    // Vector math: pure arithmetic, so the loop vectorizer can widen it (libm's scalar erff was
    // 9 % of LN-GELU large's step, tanhf with the expm1f it calls 22 % of nanoGPT large's, expf
    // 4-9 % of the LM steps). f32 exp and log: our own f64 evaluation rounded once
    // (VectorMath.cpp); f32 erf and tanh: MLIR's rational approximations (the other
    // approximations MLIR has, sin, cos, atan, log1p, expm1, ..., are not measured here and
    // stay libm's). f64 keeps libm. Errors: NumericTest "f32 tanh and erf",
    // "f32 exp and log".
    expandExpLogF32(mod);
    RewritePatternSet approx(ctx);
    populatePolynomialApproximateErfPattern(approx);
    populatePolynomialApproximateTanhPattern(approx);
    if (failed(applyPatternsAndFoldGreedily(mod, std::move(approx)))) return failure();
    // tanh's and erf's math.fma: a multiply and an add that LLVM may contract into one FMA
    // instruction where the CPU has one (x86-64-v3 and up), never a libm fmaf call (x86-64-v2
    // has no FMA). So the v2 and v3 code of these functions may differ in the last bit.
    mod.walk([](math::FmaOp op) {
      OpBuilder b(op);
      auto fm = arith::FastMathFlagsAttr::get(op.getContext(), arith::FastMathFlags::contract);
      Value m = b.create<arith::MulFOp>(op.getLoc(), op.getA(), op.getB(), fm);
      op.replaceAllUsesWith(b.create<arith::AddFOp>(op.getLoc(), m, op.getC(), fm).getResult());
      op.erase();
    });
  }
  // Rounding ops (floor, ceil, trunc, round, round_even of f32 and f64) become LLVM
  // intrinsics (roundss/roundps, roundsd/roundpd on every x86-64 level, so loops vectorize),
  // not the libm floorf / ceilf / truncf calls math-to-libm would make.
  mod.walk([](Operation *op) {
    OpBuilder b(op);
    Value r;
    if (auto o = dyn_cast<math::FloorOp>(op)) r = b.create<LLVM::FFloorOp>(o.getLoc(), o.getOperand());
    else if (auto o = dyn_cast<math::CeilOp>(op)) r = b.create<LLVM::FCeilOp>(o.getLoc(), o.getOperand());
    else if (auto o = dyn_cast<math::TruncOp>(op)) r = b.create<LLVM::FTruncOp>(o.getLoc(), o.getOperand());
    else if (auto o = dyn_cast<math::RoundEvenOp>(op)) r = b.create<LLVM::RoundEvenOp>(o.getLoc(), o.getOperand());
    else if (auto o = dyn_cast<math::RoundOp>(op)) r = b.create<LLVM::RoundOp>(o.getLoc(), o.getOperand());
    else return;
    op->getResult(0).replaceAllUsesWith(r);
    op->erase();
  });
  {
    distributeParallelLoops(mod);
    PassManager pm(ctx);
    pm.addPass(createConvertSCFToOpenMPPass()); // none left; kept for nested loops, were there any
    pm.addPass(createConvertMathToLibmPass());
    if (failed(pm.run(mod))) return failure();
  }
  LowerToLLVMOptions options(ctx);
  options.useBarePtrCallConv = true;
  LLVMTypeConverter converter(ctx, options);
  RewritePatternSet patterns(ctx);
  // scf -> cf in the same conversion: scf-to-openmp wraps loop bodies in
  // memref.alloca_scope, a single-block op that must be inlined first.
  populateSCFToControlFlowConversionPatterns(patterns);
  arith::populateArithToLLVMConversionPatterns(converter, patterns);
  populateMathToLLVMConversionPatterns(converter, patterns);
  populateFinalizeMemRefToLLVMConversionPatterns(converter, patterns);
  cf::populateControlFlowToLLVMConversionPatterns(converter, patterns);
  populateFuncToLLVMConversionPatterns(converter, patterns);
  populateOpenMPToLLVMConversionPatterns(converter, patterns);
  LLVMConversionTarget target(*ctx);
  configureOpenMPToLLVMConversionLegality(target, converter);
  target.addLegalOp<ModuleOp, omp::TerminatorOp, omp::BarrierOp, omp::TaskwaitOp,
                    omp::TaskyieldOp>();
  if (failed(applyFullConversion(mod, target, std::move(patterns)))) return failure();
  PassManager pm2(ctx);
  pm2.addPass(createReconcileUnrealizedCastsPass());
  return pm2.run(mod);
}

} // namespace

std::unique_ptr<llvm::Module> buildKernelModule(const KernelProgram &kp, llvm::LLVMContext &lctx,
                                                std::string *mlirText) {
  DialectRegistry registry;
  registry.insert<func::FuncDialect, arith::ArithDialect, math::MathDialect, memref::MemRefDialect,
                  scf::SCFDialect, cf::ControlFlowDialect, LLVM::LLVMDialect, omp::OpenMPDialect>();
  registerBuiltinDialectTranslation(registry);
  registerLLVMDialectTranslation(registry);
  registerOpenMPDialectTranslation(registry);
  MLIRContext ctx(registry, MLIRContext::Threading::DISABLED);
  ctx.loadAllAvailableDialects();
  OpBuilder b(&ctx);
  ModuleOp mod = ModuleOp::create(UnknownLoc::get(&ctx), StringRef(kp.name));
  auto addGraph = [&](const KernelGraph &kg, const std::string &bwd) {
    for (auto &k : kg.kernels) {
      if (!k.phases.empty()) {
        KernelBuilder kb(b, kg, k);
        kb.build(mod, kernelSymbol(kp.name, bwd, k.name));
      }
      if (k.kind == Kernel::Kind::Extern && !k.call.empty()) {
        switch (k.call.fn) {
        case ExternFn::Gemm: buildGemmFunction(b, mod, k, gemmSymbol(kp.name, bwd, k.name)); break;
        case ExternFn::Conv:
        case ExternFn::Fft:
        case ExternFn::Linalg: break; // calls of libaotc_kernels, emitted by the entry point (ObjectEmit)
        }
      }
    }
  };
  forEachGraph(kp, addGraph);
  verifyAndTidy(mod, "codegen", mlirText);
  if (failed(lowerToLLVMDialect(mod))) {
    mod.erase();
    internalError("codegen: lowering MLIR to the LLVM dialect failed");
  }
  auto llvmMod = translateModuleToLLVMIR(mod, lctx, kp.name);
  mod.erase();
  if (!llvmMod) internalError("codegen: translation to LLVM IR failed");
  return llvmMod;
}

} // namespace aotc::cg
