//===- GpuGen.cpp - Kernels.h loop kernels -> gpu.func -> NVVM -> PTX ---------===//
//
// The CUDA target's kernels (issue 4; docs/cuda.md). Every Loop kernel (and the
// init phases of a Gemm kernel) becomes a `gpu.func` in one `gpu.module` per
// program, built directly with block and thread ids (no scf.parallel mapping:
// MLIR 19's convert-parallel-loops-to-gpu leaves loops with reductions on the
// host). The scalar code is the CPU target's (ScalarEmit.h). Mappings, chosen
// from the kernel's shape only (gpuMapping):
//   * elementwise: one map phase, no accumulating store: one thread per
//     (outer, inner) element, 256 threads per block;
//   * warp per row: kernels with reduce phases: one 32-lane warp per outer
//     iteration, 8 warps per block. A reduce phase folds lanes' strided
//     partials (lane l takes inner elements l, l+32, ... in order) and combines
//     them with a fixed gpu.shuffle xor butterfly (16, 8, 4, 2, 1), so every
//     lane holds the result and the order depends on the shapes only
//     (bit-identical run to run; not the CPU's sequential order). After-fold
//     stores run on lane 0; phases are separated by a warp barrier.
//   * block per row: a reduce phase over >= 8192 elements: one 256-thread block per
//     outer iteration; a row an earlier phase loaded is kept in shared memory for the
//     later phases (rowCacheUses, ScalarEmitter::rowCache_);
//   * thread per row: everything else (scatter_add's accumulating stores, multi-
//     phase map kernels): one thread runs the whole outer iteration as the CPU
//     does, so each output element is written by one thread in index order and
//     no atomics are needed.
// Lowering: scf -> cf, nvvm-attach-target (the lowest --cuda-arch), convert-gpu-
// to-nvvm (bare-pointer calling convention, 64-bit index; libdevice for math),
// gpu-module-to-binary to PTX ("isa"). The PTX comes back with a trailing NUL,
// which is stripped.
//===----------------------------------------------------------------------===//
#include "CodegenInternal.h"
#include "ScalarEmit.h"

#include "aotc/Diagnostics.h"

#include "mlir/Conversion/ArithToLLVM/ArithToLLVM.h"
#include "mlir/Conversion/ControlFlowToLLVM/ControlFlowToLLVM.h"
#include "mlir/Conversion/FuncToLLVM/ConvertFuncToLLVM.h"
#include "mlir/Conversion/GPUToNVVM/GPUToNVVMPass.h"
#include "mlir/Conversion/IndexToLLVM/IndexToLLVM.h"
#include "mlir/Conversion/MathToLLVM/MathToLLVM.h"
#include "mlir/Conversion/MemRefToLLVM/MemRefToLLVM.h"
#include "mlir/Conversion/ReconcileUnrealizedCasts/ReconcileUnrealizedCasts.h"
#include "mlir/Conversion/SCFToControlFlow/SCFToControlFlow.h"
#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/ControlFlow/IR/ControlFlow.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Dialect/GPU/IR/GPUDialect.h"
#include "mlir/Dialect/GPU/Transforms/Passes.h"
#include "mlir/Dialect/LLVMIR/LLVMDialect.h"
#include "mlir/Dialect/LLVMIR/NVVMDialect.h"
#include "mlir/Dialect/Math/IR/Math.h"
#include "mlir/Dialect/MemRef/IR/MemRef.h"
#include "mlir/Dialect/SCF/IR/SCF.h"
#include "mlir/Dialect/Vector/IR/VectorOps.h"
#include "mlir/IR/Builders.h"
#include "mlir/IR/BuiltinOps.h"
#include "mlir/IR/MLIRContext.h"
#include "mlir/IR/Verifier.h"
#include "mlir/Pass/PassManager.h"
#include "mlir/Target/LLVM/NVVM/Target.h"
#include "mlir/Target/LLVMIR/Dialect/Builtin/BuiltinToLLVMIRTranslation.h"
#include "mlir/Target/LLVMIR/Dialect/GPU/GPUToLLVMIRTranslation.h"
#include "mlir/Target/LLVMIR/Dialect/LLVMIR/LLVMToLLVMIRTranslation.h"
#include "mlir/Target/LLVMIR/Dialect/NVVM/NVVMToLLVMIRTranslation.h"
#include "mlir/Transforms/Passes.h"

#include "llvm/Support/FileSystem.h"
#include "llvm/Support/raw_ostream.h"

#include <algorithm>
#include <map>
#include <tuple>
#include <set>

using namespace mlir;

namespace aotc::cg {

namespace {

int64_t prod(const Shape &s) {
  int64_t n = 1;
  for (int64_t d : s) n *= d;
  return n;
}
/// The CUDA target compiles constant sizes (the driver refuses run-time ones before).
int64_t prod(const Dims &d) { return prod(constShape(d)); }

/// Shared memory a block-per-row kernel may spend on cached rows (of the 48 KiB a block gets
/// without opting in; the reduction slots take 8 × 8 bytes per accumulator).
constexpr int64_t kRowCacheBytes = 40 * 1024;

/// A load that reads the same row as a load of an earlier phase: the block-per-row kernel
/// keeps that row in shared memory (ScalarEmitter::rowCache_) instead of reading it again.
struct RowCacheUse {
  size_t phase = 0;
  int access = -1;   ///< Index into the phase's accesses.
  size_t slot = 0;   ///< Which cached row (one workgroup buffer each).
  bool fill = false; ///< The first phase that reads it: loads and fills.
};

/// The access indices a phase's strided inner loop loads on every iteration: those reachable
/// from its reductions (a reduce phase, whose stores use registers only) or its stores' values
/// (a map phase). Loads with bounds checks (dyn terms) are left out.
std::set<int> loopLoads(const Phase &p) {
  std::set<int> seen, loads;
  std::vector<int> todo;
  if (!p.reductions.empty())
    for (auto &r : p.reductions) todo.push_back(r.value);
  else
    for (auto &st : p.stores) todo.push_back(st.value);
  while (!todo.empty()) {
    int id = todo.back();
    todo.pop_back();
    if (id < 0 || !seen.insert(id).second) continue;
    const Inst &in = p.insts[id];
    if (in.op == ScalarOp::Load && p.accesses[in.access].dyn.empty()) loads.insert(in.access);
    for (int o : {in.a, in.b, in.c}) todo.push_back(o);
  }
  return loads;
}

/// Loads of block-per-row kernel k that read what a load of an earlier phase read: the same
/// buffer (one the kernel does not write) at the same affine address over the same inner
/// domain, so the thread that visits inner position j visits it in both phases and can keep
/// the value. Rows are cached in phase order while they fit in `budget` bytes.
std::vector<RowCacheUse> rowCacheUses(const Kernel &k, const KernelGraph &kg, int64_t budget) {
  std::set<int> written(k.writes.begin(), k.writes.end());
  using Key = std::tuple<int, int64_t, std::vector<int64_t>, Shape>;
  std::map<Key, std::vector<std::pair<size_t, int>>> uses; // key -> (phase, access), in order
  for (size_t i = 0; i < k.phases.size(); ++i) {
    const Phase &p = k.phases[i];
    for (int a : loopLoads(p)) {
      const Access &acc = p.accesses[a];
      if (written.count(acc.buffer) || kg.buffers[acc.buffer].type.dtype == DType::Bool) continue;
      auto &u = uses[{acc.buffer, (int64_t)acc.offset, constShape(acc.coef), constShape(p.inner)}];
      if (u.empty() || u.back().first != i) u.push_back({i, a});
    }
  }
  std::vector<std::vector<std::pair<size_t, int>>> rows;
  for (auto &[key, u] : uses)
    if (u.size() > 1) rows.push_back(u);
  // Phase order of the first use, then by access: deterministic, earliest rows first.
  std::sort(rows.begin(), rows.end());
  std::vector<RowCacheUse> out;
  int64_t used = 0;
  size_t slot = 0;
  for (auto &u : rows) {
    const Phase &p = k.phases[u[0].first];
    int64_t bytes = prod(p.inner) * itemSize(kg.buffers[p.accesses[u[0].second].buffer].type.dtype);
    if (used + bytes > budget) continue;
    used += bytes;
    for (size_t n = 0; n < u.size(); ++n) out.push_back({u[n].first, u[n].second, slot, n == 0});
    ++slot;
  }
  return out;
}

class GpuKernelBuilder : public ScalarEmitter {
public:
  GpuKernelBuilder(OpBuilder &b, const KernelGraph &kg, const Kernel &k, uint32_t programId)
      : ScalarEmitter(b, kg, k) {
    statusProgramId_ = programId;
  }

  /// Builds gpu.func `sym`; for SplitRow, `final` selects the second kernel.
  void build(gpu::GPUModuleOp mod, const std::string &sym, const GpuLaunch &launch, bool final = false);

private:
  Value cI32(int32_t v) { return b_.create<arith::ConstantIntOp>(loc_, v, 32); }
  Value partials_; ///< SplitRow: memref<partialValues x f64> in scratch (the last argument).
  /// Index of a partial: ((major * minors + minor) * accs + acc) — (row, part) for split rows,
  /// (chunk, column) for column splits; both stages of a split use this one formula.
  Value partialIndex(Value major, int64_t minors, Value minor, int64_t accs, int64_t acc) {
    Value mm = b_.create<arith::AddIOp>(loc_, b_.create<arith::MulIOp>(loc_, major, cIdx(minors)), minor);
    return b_.create<arith::AddIOp>(loc_, b_.create<arith::MulIOp>(loc_, mm, cIdx(accs)), cIdx(acc));
  }
  /// Partials travel as f64 (exact for f32 and f64 accumulators).
  void storePartial(Value at, Value v, DType accType) {
    if (accType == DType::F32) v = b_.create<arith::ExtFOp>(loc_, b_.getF64Type(), v);
    b_.create<memref::StoreOp>(loc_, v, partials_, ValueRange{at});
  }
  Value loadPartial(Value at, DType accType) {
    Value v = b_.create<memref::LoadOp>(loc_, partials_, ValueRange{at});
    return accType == DType::F32 ? b_.create<arith::TruncFOp>(loc_, b_.getF32Type(), v).getResult() : v;
  }
  /// Folds p's reductions over partials q = start, start + step, ... < parts, in order (a tree
  /// combine: each partial is an accumulator), partial (q, r) being at index(q, r).
  SmallVector<Value> foldPartials(const Phase &p, Value start, int64_t step, int64_t parts,
                                  const std::function<Value(Value, int64_t)> &index) {
    SmallVector<Value> init;
    for (auto &r : p.reductions) init.push_back(reduceInit(r));
    auto loop = b_.create<scf::ForOp>(
        loc_, start, cIdx(parts), cIdx(step), init, [&](OpBuilder &b, Location, Value q, ValueRange a) {
          OpBuilder::InsertionGuard g(b_);
          b_.setInsertionPoint(b.getInsertionBlock(), b.getInsertionPoint());
          SmallVector<Value> next(a.begin(), a.end());
          for (size_t r = 0; r < p.reductions.size(); ++r) {
            Value v = loadPartial(index(q, (int64_t)r), p.reductions[r].accType), dummy;
            combine(p.reductions[r], next[r], dummy, v, Value(), /*tree=*/true);
          }
          b_.create<scf::YieldOp>(loc_, next);
        });
    return SmallVector<Value>(loop.getResults().begin(), loop.getResults().end());
  }
  /// A workgroup (shared) buffer of n elements of dtype t, 16-byte aligned (LLVM marks loads
  /// from an unaligned global > 16 bytes as align 16 and vectorizes them: ld.shared.v2.f64).
  Value workgroup(gpu::GPUFuncOp fn, DType t, int64_t n) {
    auto space = gpu::AddressSpaceAttr::get(ctx_, gpu::AddressSpace::Workgroup);
    Value v = fn.addWorkgroupAttribution(
        MemRefType::get({n}, elemType(ctx_, t, false), MemRefLayoutAttrInterface{}, space), loc_);
    fn.setWorkgroupAttributionAttr(fn.getNumWorkgroupAttributions() - 1, LLVM::LLVMDialect::getAlignAttrName(),
                                   b_.getI64IntegerAttr(16));
    return v;
  }
  /// Appends the row-major coordinates of linear index `lin` in `dims` to `out`.
  void unravel(Value lin, const Shape &dims, std::vector<Value> &out);
  void unravel(Value lin, const Dims &dims, std::vector<Value> &out) { unravel(lin, constShape(dims), out); }
  /// Runs `body` when `cond` holds (scf.if with the builder moved inside).
  void ifThen(Value cond, const std::function<void()> &body);
  /// Runs p's stores for inner positions start, start+step, ... < prod(p.inner) (a map phase).
  void stridedStores(const Phase &p, const std::vector<Value> &outerVars, Value start, int64_t step);
  /// Folds p's reductions over inner positions start, start+step, ... in order; returns the
  /// accumulators (ArgMax: value, index) — the identities when start >= prod(p.inner).
  SmallVector<Value> stridedFold(const Phase &p, const std::vector<Value> &outerVars, Value start,
                                 int64_t step, Value end = Value());
  /// xor-shuffle butterfly within each aligned group of `width` lanes (offsets width/2 .. 1),
  /// combining acc in place; the shuffles always span the full warp.
  void butterfly(const Phase &p, SmallVector<Value> &acc, int width);
  /// p's after-fold stores (inner variables 0) when `cond` holds.
  void foldStores(const Phase &p, const std::vector<Value> &outerVars, Value cond);
  /// Phase p of one row, run by a group of `threads` threads: a warp (threads 32, me = lane,
  /// shared null) or a block of 8 warps (threads 256, me = thread id; `shared` holds one
  /// workgroup memref<8 x acc type> per accumulator of p, for the warps' partials).
  void emitGroupPhase(const Phase &p, const std::vector<Value> &outerVars, Value me, int64_t threads,
                      Value lane, Value warp, const std::vector<Value> *shared);
  /// Combines the per-thread accumulators of a warp (butterfly) and, with `shared`, of the
  /// block's 8 warps in warp order: afterwards every thread holds the group's result.
  void groupCombine(const Phase &p, SmallVector<Value> &acc, int64_t threads, Value lane, Value warp,
                    const std::vector<Value> *shared);
  /// SplitRow (GpuLaunch): stage 1 (`final` false) folds block bid's chunk of its row into
  /// partials; stage 2 folds a row's partials and runs the remaining phases.
  void emitSplitRow(gpu::GPUFuncOp fn, const GpuLaunch &launch, Value tid, Value bid, bool final);
  /// Column-block mapping: phase p for column `col` (valid when `valid`), row group `group`
  /// of 8; `wg` makes a fresh workgroup buffer of n elements of a dtype.
  /// With `publish` (column split, stage 1): rows [begin, end) only, and the column totals go
  /// to `publish` instead of the registers and the phase's stores.
  void emitColumnPhase(const Phase &p, const std::vector<Value> &outerVars, Value valid, Value group,
                       Value lane, Value tid, const std::function<Value(DType, int64_t)> &wg,
                       const std::function<void(SmallVector<Value> &)> *publish = nullptr,
                       Value begin = Value(), Value end = Value());
  /// Column split, stage 2: one thread per column folds its partials of every reduce phase
  /// in chunk order and runs the phases' stores.
  void emitColumnFinal(const GpuLaunch &launch, Value tid, Value bid);
  /// The elementwise phase p for `width` consecutive elements of the innermost dim from
  /// `base`: accesses contiguous in that dim become one aligned vector load/store each.
  void emitVectorLanes(const Phase &p, const std::vector<Value> &base, int64_t width);
};

void GpuKernelBuilder::unravel(Value lin, const Shape &dims, std::vector<Value> &out) {
  std::vector<int64_t> strides = contiguousStrides(dims);
  Value rest = lin;
  for (size_t d = 0; d < dims.size(); ++d) {
    if (d + 1 == dims.size()) {
      out.push_back(rest);
      break;
    }
    out.push_back(b_.create<arith::DivUIOp>(loc_, rest, cIdx(strides[d])));
    rest = b_.create<arith::RemUIOp>(loc_, rest, cIdx(strides[d]));
  }
}

void GpuKernelBuilder::ifThen(Value cond, const std::function<void()> &body) {
  auto ifOp = b_.create<scf::IfOp>(loc_, cond, /*withElseRegion=*/false);
  OpBuilder::InsertionGuard g(b_);
  b_.setInsertionPoint(ifOp.thenBlock()->getTerminator());
  body();
}

void GpuKernelBuilder::stridedStores(const Phase &p, const std::vector<Value> &outerVars, Value start,
                                     int64_t step) {
  ph_ = &p;
  b_.create<scf::ForOp>(loc_, start, cIdx(prod(p.inner)), cIdx(step), ValueRange{},
                        [&](OpBuilder &b, Location, Value j, ValueRange) {
                          OpBuilder::InsertionGuard g(b_);
                          b_.setInsertionPoint(b.getInsertionBlock(), b.getInsertionPoint());
                          vars_ = outerVars;
                          unravel(j, p.inner, vars_);
                          memo_.clear();
                          rowJ_ = j;
                          for (auto &s : p.stores) store(s);
                          rowJ_ = Value();
                          b_.create<scf::YieldOp>(loc_);
                        });
  memo_.clear();
}

SmallVector<Value> GpuKernelBuilder::stridedFold(const Phase &p, const std::vector<Value> &outerVars, Value start,
                                                 int64_t step, Value end) {
  ph_ = &p;
  SmallVector<Value> init;
  for (auto &r : p.reductions) {
    init.push_back(reduceInit(r));
    if (r.kind == ReduceKind::ArgMax) init.push_back(cI64(0));
  }
  auto loop = b_.create<scf::ForOp>(
      loc_, start, end ? end : cIdx(prod(p.inner)), cIdx(step), init, [&](OpBuilder &b, Location, Value j, ValueRange acc) {
        OpBuilder::InsertionGuard g(b_);
        b_.setInsertionPoint(b.getInsertionBlock(), b.getInsertionPoint());
        vars_ = outerVars;
        unravel(j, p.inner, vars_);
        memo_.clear();
        rowJ_ = j;
        SmallVector<Value> next;
        size_t ai = 0;
        for (auto &r : p.reductions) {
          Value a = acc[ai++], idx;
          if (r.kind == ReduceKind::ArgMax) idx = acc[ai++];
          Value v = inst(r.value);
          Value jIdx = r.kind == ReduceKind::ArgMax
                           ? b_.create<arith::IndexCastOp>(loc_, b_.getI64Type(), j).getResult()
                           : Value();
          combine(r, a, idx, v, jIdx, /*tree=*/false);
          next.push_back(a);
          if (r.kind == ReduceKind::ArgMax) next.push_back(idx);
        }
        rowJ_ = Value();
        b_.create<scf::YieldOp>(loc_, next);
      });
  memo_.clear();
  return SmallVector<Value>(loop.getResults().begin(), loop.getResults().end());
}

void GpuKernelBuilder::butterfly(const Phase &p, SmallVector<Value> &acc, int width) {
  // Every shuffle names the whole warp (width 32: member mask 0xffffffff, clamp 31): all 32
  // lanes execute it. gpu.shuffle's width is "the first `width` lanes take part", so a
  // narrower one would leave lanes >= width out of the member mask (undefined in PTX). With
  // offsets < `width`, xor stays inside each aligned group of `width` lanes, which is what a
  // narrower butterfly (the column block's 8 row groups) needs.
  Value w = cI32(32);
  for (int off = width / 2; off >= 1; off /= 2) {
    Value o = cI32(off);
    size_t ai = 0;
    for (auto &r : p.reductions) {
      Value &a = acc[ai++];
      Value dummy;
      Value *idx = &dummy;
      if (r.kind == ReduceKind::ArgMax) idx = &acc[ai++];
      Value b = b_.create<gpu::ShuffleOp>(loc_, a, o, w, gpu::ShuffleMode::XOR).getShuffleResult();
      Value bIdx = r.kind == ReduceKind::ArgMax
                       ? b_.create<gpu::ShuffleOp>(loc_, *idx, o, w, gpu::ShuffleMode::XOR).getShuffleResult()
                       : Value();
      combine(r, a, *idx, b, bIdx, /*tree=*/true);
    }
  }
}

void GpuKernelBuilder::foldStores(const Phase &p, const std::vector<Value> &outerVars, Value cond) {
  if (p.stores.empty()) return;
  ifThen(cond, [&] {
    vars_ = outerVars;
    for (size_t k = 0; k < p.inner.size(); ++k) vars_.push_back(cIdx(0));
    memo_.clear();
    for (auto &s : p.stores) store(s);
  });
  memo_.clear();
}

void GpuKernelBuilder::emitGroupPhase(const Phase &p, const std::vector<Value> &outerVars, Value me,
                                      int64_t threads, Value lane, Value warp, const std::vector<Value> *shared) {
  ph_ = &p;
  Value first = b_.create<arith::CmpIOp>(loc_, arith::CmpIPredicate::eq, me, cIdx(0));
  if (p.reductions.empty()) {
    if (prod(p.inner) == 1)
      foldStores(p, outerVars, first); // one element: the first thread
    else
      stridedStores(p, outerVars, me, threads);
    return;
  }
  SmallVector<Value> acc = stridedFold(p, outerVars, me, threads);
  groupCombine(p, acc, threads, lane, warp, shared);
  size_t ai = 0;
  setRegs(p, acc, ai, regs_);
  foldStores(p, outerVars, first);
}

void GpuKernelBuilder::groupCombine(const Phase &p, SmallVector<Value> &acc, int64_t threads, Value lane,
                                    Value warp, const std::vector<Value> *shared) {
  butterfly(p, acc, 32); // every lane of the warp now holds the warp's result
  if (shared) {
    // Block: lane 0 of every warp publishes its warp's result; after the barrier every thread
    // combines the 8 partials in warp order (the same bits in every thread).
    Value lane0 = b_.create<arith::CmpIOp>(loc_, arith::CmpIPredicate::eq, lane, cIdx(0));
    ifThen(lane0, [&] {
      for (size_t k = 0; k < acc.size(); ++k)
        b_.create<memref::StoreOp>(loc_, acc[k], (*shared)[k], ValueRange{warp});
    });
    b_.create<gpu::BarrierOp>(loc_);
    for (size_t k = 0; k < acc.size(); ++k)
      acc[k] = b_.create<memref::LoadOp>(loc_, (*shared)[k], ValueRange{cIdx(0)});
    for (int64_t w = 1; w < threads / 32; ++w) {
      size_t ai = 0;
      for (auto &r : p.reductions) {
        size_t k = ai++;
        Value b = b_.create<memref::LoadOp>(loc_, (*shared)[k], ValueRange{cIdx(w)});
        Value dummy, bIdx;
        Value *idx = &dummy;
        if (r.kind == ReduceKind::ArgMax) {
          bIdx = b_.create<memref::LoadOp>(loc_, (*shared)[ai], ValueRange{cIdx(w)});
          idx = &acc[ai++];
        }
        combine(r, acc[k], *idx, b, bIdx, /*tree=*/true);
      }
    }
  }
}

void GpuKernelBuilder::emitColumnPhase(const Phase &p, const std::vector<Value> &outerVars, Value valid,
                                       Value group, Value lane, Value tid,
                                       const std::function<Value(DType, int64_t)> &wg,
                                       const std::function<void(SmallVector<Value> &)> *publish, Value begin,
                                       Value end) {
  constexpr int64_t kGroups = 8, kCols = 32;
  ph_ = &p;
  const int64_t n = prod(p.inner);
  Value group0 = b_.create<arith::AndIOp>(
      loc_, valid, b_.create<arith::CmpIOp>(loc_, arith::CmpIPredicate::eq, group, cIdx(0)));
  if (p.reductions.empty()) {
    if (!publish) ifThen(valid, [&] { stridedStores(p, outerVars, group, kGroups); });
    return;
  }
  // 1. Each thread folds rows group, group+8, ... of its column, in order (identities when the
  //    column is past the end: the thread still takes part in barriers and shuffles).
  std::vector<DType> accTypes;
  for (auto &r : p.reductions) {
    accTypes.push_back(r.accType);
    if (r.kind == ReduceKind::ArgMax) accTypes.push_back(DType::I64);
  }
  Value first = begin ? b_.create<arith::AddIOp>(loc_, begin, group).getResult() : group;
  SmallVector<Value> acc =
      stridedFold(p, outerVars, b_.create<arith::SelectOp>(loc_, valid, first, cIdx(n)), kGroups, end);
  // 2. Partials to workgroup memory [group][column]; after the barrier thread t combines the 8
  //    partials of column t/8 (part t%8) with an xor butterfly over 8 lanes (fixed order).
  std::vector<Value> parts, totals;
  for (DType t : accTypes) {
    parts.push_back(wg(t, kGroups * kCols));
    totals.push_back(wg(t, kCols));
  }
  Value slot = b_.create<arith::AddIOp>(loc_, b_.create<arith::MulIOp>(loc_, group, cIdx(kCols)), lane);
  for (size_t k = 0; k < acc.size(); ++k) b_.create<memref::StoreOp>(loc_, acc[k], parts[k], ValueRange{slot});
  b_.create<gpu::BarrierOp>(loc_);
  Value col = b_.create<arith::DivUIOp>(loc_, tid, cIdx(kGroups));
  Value part = b_.create<arith::RemUIOp>(loc_, tid, cIdx(kGroups));
  Value mine = b_.create<arith::AddIOp>(loc_, b_.create<arith::MulIOp>(loc_, part, cIdx(kCols)), col);
  for (size_t k = 0; k < acc.size(); ++k) acc[k] = b_.create<memref::LoadOp>(loc_, parts[k], ValueRange{mine});
  butterfly(p, acc, kGroups);
  // 3. Back to the column's own threads: part 0 publishes, all read their column's total.
  ifThen(b_.create<arith::CmpIOp>(loc_, arith::CmpIPredicate::eq, part, cIdx(0)), [&] {
    for (size_t k = 0; k < acc.size(); ++k) b_.create<memref::StoreOp>(loc_, acc[k], totals[k], ValueRange{col});
  });
  b_.create<gpu::BarrierOp>(loc_);
  for (size_t k = 0; k < acc.size(); ++k) acc[k] = b_.create<memref::LoadOp>(loc_, totals[k], ValueRange{lane});
  if (publish) {
    ifThen(group0, [&] { (*publish)(acc); });
    return;
  }
  size_t ai = 0;
  setRegs(p, acc, ai, regs_);
  foldStores(p, outerVars, group0);
}

void GpuKernelBuilder::emitColumnFinal(const GpuLaunch &launch, Value tid, Value bid) {
  const int64_t outer = prod(k_.outer);
  int64_t nacc = 0;
  for (auto &p : k_.phases) nacc += (int64_t)p.reductions.size();
  Value col = b_.create<arith::AddIOp>(loc_, b_.create<arith::MulIOp>(loc_, bid, cIdx(launch.block)), tid);
  ifThen(b_.create<arith::CmpIOp>(loc_, arith::CmpIPredicate::ult, col, cIdx(outer)), [&] {
    std::vector<Value> ov;
    unravel(col, k_.outer, ov);
    Value yes = b_.create<arith::ConstantIntOp>(loc_, 1, 1);
    int64_t ridx = 0;
    for (auto &p : k_.phases) {
      ph_ = &p;
      if (!p.reductions.empty()) {
        const int64_t base = ridx;
        SmallVector<Value> acc = foldPartials(p, cIdx(0), 1, launch.parts, [&](Value q, int64_t r) {
          return partialIndex(q, outer, col, nacc, base + r);
        });
        size_t ai = 0;
        setRegs(p, acc, ai, regs_);
        ridx += (int64_t)p.reductions.size();
      }
      foldStores(p, ov, yes); // inner positions 0: a reduce phase's stores, or a one-element map
    }
  });
}

void GpuKernelBuilder::emitVectorLanes(const Phase &p, const std::vector<Value> &base, int64_t width) {
  const size_t last = base.size() - 1;
  std::set<int> loaded;
  for (auto &in : p.insts)
    if (in.op == ScalarOp::Load) loaded.insert(in.access);
  std::set<int> stored;
  for (auto &st : p.stores) stored.insert(st.access);
  auto contiguous = [&](const Access &a) { return a.buffer >= 0 && a.coef[last] == 1; };
  // Every vector access starts at lane 0's address, which is 16-byte aligned (gpuLaunch
  // checked offsets and strides; the ABI aligns every buffer to 256 bytes).
  vars_ = base;
  memo_.clear();
  std::set<int> aligned;
  auto vecType = [&](const Access &a) {
    return VectorType::get({width}, elemType(ctx_, kg_.buffers[a.buffer].type.dtype, true));
  };
  auto addrOf = [&](const Access &a) {
    Value ok, code, val;
    Value buf = bufArg_.at(a.buffer);
    if (aligned.insert(a.buffer).second) b_.create<memref::AssumeAlignmentOp>(loc_, buf, 16);
    return address(a, ok, code, val);
  };
  laneVectors_.clear();
  laneStores_.clear();
  for (int i : loaded) {
    const Access &a = p.accesses[i];
    if (contiguous(a))
      laneVectors_[i] = b_.create<vector::LoadOp>(loc_, vecType(a), bufArg_.at(a.buffer), ValueRange{addrOf(a)});
  }
  for (int i : stored)
    if (contiguous(p.accesses[i])) laneStores_[i] = {};
  for (int64_t t = 0; t < width; ++t) {
    lane_ = t;
    vars_ = base;
    if (t) vars_[last] = b_.create<arith::AddIOp>(loc_, base[last], cIdx(t));
    memo_.clear();
    for (auto &st : p.stores) store(st);
  }
  vars_ = base;
  memo_.clear();
  for (auto &[i, vals] : laneStores_) {
    const Access &a = p.accesses[i];
    VectorType vt = vecType(a);
    Value v = b_.create<arith::ConstantOp>(loc_, vt, b_.getZeroAttr(vt));
    for (int64_t t = 0; t < width; ++t) v = b_.create<vector::InsertOp>(loc_, vals[t], v, ArrayRef<int64_t>{t});
    b_.create<vector::StoreOp>(loc_, v, bufArg_.at(a.buffer), ValueRange{addrOf(a)});
  }
  laneVectors_.clear();
  laneStores_.clear();
  lane_ = 0;
}

void GpuKernelBuilder::emitSplitRow(gpu::GPUFuncOp fn, const GpuLaunch &launch, Value tid, Value bid,
                                    bool final) {
  const Phase &p0 = k_.phases[0];
  const int64_t parts = launch.parts, nred = (int64_t)p0.reductions.size(), len = prod(p0.inner);
  Value warp = b_.create<arith::DivUIOp>(loc_, tid, cIdx(32));
  Value lane = b_.create<arith::RemUIOp>(loc_, tid, cIdx(32));
  Value row = final ? bid : b_.create<arith::DivUIOp>(loc_, bid, cIdx(parts)).getResult();
  std::vector<Value> ov;
  unravel(row, k_.outer, ov);
  std::vector<Value> shared;
  for (auto &r : p0.reductions) shared.push_back(workgroup(fn, r.accType, launch.block / 32));
  ph_ = &p0;
  SmallVector<Value> acc;
  if (!final) {
    // Stage 1: block `part` of the row folds elements [part*chunk, (part+1)*chunk) thread-strided.
    const int64_t chunk = (len + parts - 1) / parts;
    Value part = b_.create<arith::RemUIOp>(loc_, bid, cIdx(parts));
    Value begin = b_.create<arith::MulIOp>(loc_, part, cIdx(chunk));
    Value end = b_.create<arith::MinUIOp>(loc_, b_.create<arith::AddIOp>(loc_, begin, cIdx(chunk)), cIdx(len));
    acc = stridedFold(p0, ov, b_.create<arith::AddIOp>(loc_, begin, tid), launch.block, end);
    groupCombine(p0, acc, launch.block, lane, warp, &shared);
    Value t0 = b_.create<arith::CmpIOp>(loc_, arith::CmpIPredicate::eq, tid, cIdx(0));
    ifThen(t0, [&] {
      for (int64_t r = 0; r < nred; ++r)
        storePartial(partialIndex(row, parts, part, nred, r), acc[r], p0.reductions[r].accType);
    });
    return;
  }
  // Stage 2: thread t folds partials t, t+256, ... of its row in order, then the block combines.
  acc = foldPartials(p0, tid, launch.block, parts,
                     [&](Value q, int64_t r) { return partialIndex(row, parts, q, nred, r); });
  groupCombine(p0, acc, launch.block, lane, warp, &shared);
  size_t ai = 0;
  setRegs(p0, acc, ai, regs_);
  foldStores(p0, ov, b_.create<arith::CmpIOp>(loc_, arith::CmpIPredicate::eq, tid, cIdx(0)));
  for (size_t i = 1; i < k_.phases.size(); ++i) {
    b_.create<gpu::BarrierOp>(loc_); // earlier phases' stores are visible
    emitGroupPhase(k_.phases[i], ov, tid, launch.block, lane, warp, nullptr);
  }
}

void GpuKernelBuilder::build(gpu::GPUModuleOp mod, const std::string &sym, const GpuLaunch &launch, bool final) {
  std::vector<int> args = kernelArgs(k_);
  SmallVector<Type> types;
  for (int id : args) {
    const Buffer &bf = kg_.buffers[id];
    types.push_back(
        MemRefType::get({std::max<int64_t>(bf.type.numel(), 1)}, elemType(ctx_, bf.type.dtype, true)));
  }
  bool fail = k_.mayFail();
  if (fail) types.push_back(MemRefType::get({4}, b_.getI64Type())); // aotc_cuda_exec::error_word
  if (launch.partialValues > 0) // split row / column split: the f64 partials in scratch
    types.push_back(MemRefType::get({launch.partialValues}, b_.getF64Type()));
  b_.setInsertionPoint(mod.getBody()->getTerminator());
  auto fn = b_.create<gpu::GPUFuncOp>(loc_, sym, b_.getFunctionType(types, {}));
  fn->setAttr(gpu::GPUDialect::getKernelFuncAttrName(), b_.getUnitAttr());
  fn.setKnownBlockSizeAttr(b_.getDenseI32ArrayAttr({(int32_t)launch.block, 1, 1}));
  Block *entry = &fn.getBody().front();
  b_.setInsertionPointToStart(entry);
  for (size_t i = 0; i < args.size(); ++i) bufArg_[args[i]] = entry->getArgument(i);
  if (fail) status_ = entry->getArgument(args.size());
  if (launch.partialValues > 0) partials_ = entry->getArgument(args.size() + (fail ? 1 : 0));
  regs_.assign(k_.regTypes.size(), Value());
  Value tid = b_.create<gpu::ThreadIdOp>(loc_, gpu::Dimension::x);
  Value bid = b_.create<gpu::BlockIdOp>(loc_, gpu::Dimension::x);
  const int64_t outer = prod(k_.outer);
  switch (launch.mapping) {
  case GpuMapping::Elementwise: {
    const Phase &p = k_.phases[0];
    const int64_t width = launch.vectorWidth;
    Value gid = b_.create<arith::AddIOp>(loc_, b_.create<arith::MulIOp>(loc_, bid, cIdx(launch.block)), tid);
    Value inRange =
        b_.create<arith::CmpIOp>(loc_, arith::CmpIPredicate::ult, gid, cIdx(outer * prod(p.inner) / width));
    ifThen(inRange, [&] {
      ph_ = &p;
      Shape all = constShape(k_.outer);
      all.insert(all.end(), p.inner.begin(), p.inner.end());
      std::vector<Value> base;
      unravel(width == 1 ? gid : b_.create<arith::MulIOp>(loc_, gid, cIdx(width)).getResult(), all, base);
      if (width == 1) {
        vars_ = base;
        memo_.clear();
        for (auto &s : p.stores) store(s);
        return;
      }
      emitVectorLanes(p, base, width);
    });
    break;
  }
  case GpuMapping::ThreadPerRow: {
    Value gid = b_.create<arith::AddIOp>(loc_, b_.create<arith::MulIOp>(loc_, bid, cIdx(launch.block)), tid);
    Value inRange = b_.create<arith::CmpIOp>(loc_, arith::CmpIPredicate::ult, gid, cIdx(outer));
    ifThen(inRange, [&] {
      std::vector<Value> ov;
      unravel(gid, k_.outer, ov);
      emitSequentialBody(ov);
    });
    break;
  }
  case GpuMapping::WarpPerRow: {
    Value warp = b_.create<arith::DivUIOp>(loc_, tid, cIdx(32));
    Value lane = b_.create<arith::RemUIOp>(loc_, tid, cIdx(32));
    Value row = b_.create<arith::AddIOp>(loc_, b_.create<arith::MulIOp>(loc_, bid, cIdx(launch.block / 32)), warp);
    Value inRange = b_.create<arith::CmpIOp>(loc_, arith::CmpIPredicate::ult, row, cIdx(outer));
    ifThen(inRange, [&] { // uniform per warp: the whole warp has one row
      std::vector<Value> ov;
      unravel(row, k_.outer, ov);
      for (size_t i = 0; i < k_.phases.size(); ++i) {
        if (i > 0) b_.create<NVVM::SyncWarpOp>(loc_, cI32(-1)); // earlier phases' stores are visible
        emitGroupPhase(k_.phases[i], ov, lane, 32, lane, Value(), nullptr);
      }
    });
    break;
  }
  case GpuMapping::ColumnBlock: {
    if (final) {
      emitColumnFinal(launch, tid, bid);
      break;
    }
    Value group = b_.create<arith::DivUIOp>(loc_, tid, cIdx(32));
    Value lane = b_.create<arith::RemUIOp>(loc_, tid, cIdx(32));
    // Column split: block = chunk * column blocks + column block.
    Value colBlock = launch.parts ? b_.create<arith::RemUIOp>(loc_, bid, cIdx(launch.grid / launch.parts)).getResult()
                                  : bid;
    Value colIdx = b_.create<arith::AddIOp>(loc_, b_.create<arith::MulIOp>(loc_, colBlock, cIdx(32)), lane);
    Value valid = b_.create<arith::CmpIOp>(loc_, arith::CmpIPredicate::ult, colIdx, cIdx(outer));
    // Past-the-end lanes address column 0 (never loaded or stored: `valid` guards them).
    Value safeCol = b_.create<arith::SelectOp>(loc_, valid, colIdx, cIdx(0));
    std::vector<Value> ov;
    unravel(safeCol, k_.outer, ov);
    // Phases share their workgroup buffers (the k-th buffer of a dtype and size is reused by
    // every phase): a phase writes its partials only after a barrier that every thread passes
    // after reading the previous phase's partials and totals, so shared memory is the largest
    // phase's need, not the sum over phases.
    std::map<std::tuple<int, int64_t, int>, Value> wgCache;
    std::map<std::pair<int, int64_t>, int> wgUses;
    auto wgBuf = [&](DType t, int64_t n) -> Value {
      auto key = std::make_tuple((int)t, n, wgUses[{(int)t, n}]++);
      auto it = wgCache.find(key);
      if (it != wgCache.end()) return it->second;
      return wgCache[key] = workgroup(fn, t, n);
    };
    if (launch.parts == 0) {
      for (size_t i = 0; i < k_.phases.size(); ++i) {
        if (i > 0) b_.create<gpu::BarrierOp>(loc_); // earlier phases' stores are visible
        wgUses.clear();
        emitColumnPhase(k_.phases[i], ov, valid, group, lane, tid, wgBuf);
      }
      break;
    }
    // Column split, stage 1: this block's chunk of rows; column totals to the f64 partials
    // [(chunk * columns + column) * accumulators + accumulator].
    int64_t nacc = 0;
    for (auto &p : k_.phases) nacc += (int64_t)p.reductions.size();
    Value chunk = b_.create<arith::DivUIOp>(loc_, bid, cIdx(launch.grid / launch.parts));
    int64_t ridx = 0;
    for (size_t i = 0; i < k_.phases.size(); ++i) {
      const Phase &p = k_.phases[i];
      if (p.reductions.empty()) continue;
      const int64_t n = prod(p.inner), rows = (n + launch.parts - 1) / launch.parts;
      Value begin = b_.create<arith::MulIOp>(loc_, chunk, cIdx(rows));
      Value end = b_.create<arith::MinUIOp>(loc_, b_.create<arith::AddIOp>(loc_, begin, cIdx(rows)), cIdx(n));
      const int64_t base = ridx;
      std::function<void(SmallVector<Value> &)> publish = [&](SmallVector<Value> &acc) {
        for (size_t r = 0; r < acc.size(); ++r)
          storePartial(partialIndex(chunk, outer, colIdx, nacc, base + (int64_t)r), acc[r], p.reductions[r].accType);
      };
      wgUses.clear();
      emitColumnPhase(p, ov, valid, group, lane, tid, wgBuf, &publish, begin, end);
      ridx += (int64_t)p.reductions.size();
    }
    break;
  }
  case GpuMapping::SplitRow:
    emitSplitRow(fn, launch, tid, bid, final);
    break;
  case GpuMapping::BlockPerRow: {
    // One block per row (grid = rows, so no guard: every thread reaches every barrier).
    Value warp = b_.create<arith::DivUIOp>(loc_, tid, cIdx(32));
    Value lane = b_.create<arith::RemUIOp>(loc_, tid, cIdx(32));
    std::vector<Value> ov;
    unravel(bid, k_.outer, ov);
    std::vector<RowCacheUse> cache = rowCacheUses(k_, kg_, kRowCacheBytes);
    std::map<size_t, Value> rows; // RowCacheUse::slot -> workgroup buffer
    for (size_t i = 0; i < k_.phases.size(); ++i) {
      const Phase &p = k_.phases[i];
      rowCache_.clear();
      for (const RowCacheUse &u : cache) {
        if (u.phase != i) continue;
        if (!rows.count(u.slot))
          rows[u.slot] = workgroup(fn, kg_.buffers[p.accesses[u.access].buffer].type.dtype, prod(p.inner));
        rowCache_[u.access] = {rows[u.slot], u.fill};
      }
      if (i > 0) b_.create<gpu::BarrierOp>(loc_); // earlier phases' stores are visible
      std::vector<Value> shared;
      if (!p.reductions.empty()) {
        auto slot = [&](DType t) { return workgroup(fn, t, launch.block / 32); };
        for (auto &r : p.reductions) {
          shared.push_back(slot(r.accType));
          if (r.kind == ReduceKind::ArgMax) shared.push_back(slot(DType::I64));
        }
      }
      emitGroupPhase(p, ov, tid, launch.block, lane, warp, p.reductions.empty() ? nullptr : &shared);
    }
    rowCache_.clear();
    break;
  }
  }
  b_.setInsertionPointToEnd(entry);
  b_.create<gpu::ReturnOp>(loc_);
}

/// The math ops LLVM 19's GPU-to-NVVM patterns leave unconverted although libdevice has them:
/// each becomes a call of libdevice's __nv_<name>f (f32) / __nv_<name> (f64), linked by
/// gpu-module-to-binary as the converted ones are.
void mathToLibdevice(ModuleOp mod) {
  std::vector<std::pair<Operation *, const char *>> todo;
  mod.walk([&](Operation *op) {
    const char *name = isa<math::AsinOp>(op)    ? "asin"
                       : isa<math::AcosOp>(op)  ? "acos"
                       : isa<math::SinhOp>(op)  ? "sinh"
                       : isa<math::CoshOp>(op)  ? "cosh"
                       : isa<math::AsinhOp>(op) ? "asinh"
                       : isa<math::AcoshOp>(op) ? "acosh"
                       : isa<math::AtanhOp>(op) ? "atanh"
                       : isa<math::TruncOp>(op) ? "trunc"
                       : isa<math::RoundEvenOp>(op) ? "rint" // half to even in the default rounding mode
                                                    : nullptr;
    if (name) todo.emplace_back(op, name);
  });
  for (auto [op, base] : todo) {
    Type t = op->getResult(0).getType();
    auto gm = op->getParentOfType<gpu::GPUModuleOp>();
    std::string name = std::string("__nv_") + base + (t.isF32() ? "f" : "");
    auto fn = gm.lookupSymbol<LLVM::LLVMFuncOp>(name);
    if (!fn) {
      OpBuilder mb(gm.getBody(), gm.getBody()->begin());
      fn = mb.create<LLVM::LLVMFuncOp>(op->getLoc(), name, LLVM::LLVMFunctionType::get(t, {t}));
    }
    OpBuilder b(op);
    auto call = b.create<LLVM::CallOp>(op->getLoc(), fn, op->getOperands());
    op->getResult(0).replaceAllUsesWith(call.getResult());
    op->erase();
  }
}

/// Lowers the gpu.module to PTX for `chip` (gpu-module-to-binary, format isa).
std::string lowerToPtx(ModuleOp mod, const std::string &chip, const std::string &toolkit) {
  MLIRContext *ctx = mod.getContext();
  mathToLibdevice(mod);
  std::string diag;
  llvm::raw_string_ostream diagOs(diag);
  ScopedDiagnosticHandler h(ctx, [&](Diagnostic &d) {
    diagOs << d << "\n";
    return success();
  });
  PassManager pm(ctx);
  pm.addPass(createConvertSCFToCFPass());
  GpuNVVMAttachTargetOptions at;
  at.chip = chip;
  at.features = "+ptx80";
  at.optLevel = 3;
  pm.addPass(createGpuNVVMAttachTarget(at));
  ConvertGpuOpsToNVVMOpsOptions nv;
  nv.useBarePtrCallConv = true;
  nv.indexBitwidth = 64;
  pm.addNestedPass<gpu::GPUModuleOp>(createConvertGpuOpsToNVVMOps(nv));
  pm.addPass(createReconcileUnrealizedCastsPass());
  if (failed(pm.run(mod))) internalError("codegen (cuda): lowering to NVVM failed:\n" + diag);
  // Without a data layout the translation gives i64 loads/stores LLVM's default ABI alignment
  // of 4 and NVPTX splits them into two 32-bit accesses (twice the transactions; a torn error
  // word). Every i64 the kernels touch is 8-byte aligned (buffers are 64-byte aligned, shared
  // buffers 16, the error word 256), so say so.
  auto align8 = [](Type t) { return getElementTypeOrSelf(t).isInteger(64); };
  mod.walk([&](LLVM::LoadOp op) {
    if (align8(op.getType()) && op.getAlignment().value_or(0) < 8) op.setAlignment(8);
  });
  mod.walk([&](LLVM::StoreOp op) {
    if (align8(op.getValue().getType()) && op.getAlignment().value_or(0) < 8) op.setAlignment(8);
  });
  // f32 math.sqrt became a call of libdevice's __nv_sqrtf, which is sqrt.approx.f32 unless
  // __CUDA_PREC_SQRT is set (and NVPTX then folds 1/sqrt into rsqrt.approx.f32). The LLVM
  // intrinsic instead lowers to the correctly rounded sqrt.rn.f32, as torch.sqrt on CUDA and
  // the CPU target compute. (f64's __nv_sqrt is sqrt.rn.f64 already.)
  mod.walk([&](LLVM::CallOp call) {
    auto callee = call.getCallee();
    if (!callee || *callee != "__nv_sqrtf" || call.getNumOperands() != 1) return;
    OpBuilder b(call);
    Value r = b.create<LLVM::SqrtOp>(call.getLoc(), call.getOperand(0));
    call.getResult().replaceAllUsesWith(r);
    call.erase();
  });
  PassManager bin(ctx);
  GpuModuleToBinaryPassOptions bo;
  bo.toolkitPath = toolkit;
  bo.compilationTarget = "isa";
  bin.addPass(createGpuModuleToBinaryPass(bo));
  if (failed(bin.run(mod))) internalError("codegen (cuda): lowering to PTX failed:\n" + diag);
  std::string ptx;
  mod.walk([&](gpu::BinaryOp b) {
    for (Attribute a : b.getObjects())
      if (auto o = dyn_cast<gpu::ObjectAttr>(a)) ptx += o.getObject().getValue().str();
  });
  while (!ptx.empty() && ptx.back() == '\0') ptx.pop_back();
  if (ptx.empty()) internalError("codegen (cuda): gpu-module-to-binary produced no PTX");
  return ptx;
}

} // namespace

std::string buildGpuPtx(const KernelProgram &kp, const CudaOptions &o, std::string *mlirText) {
  // libdevice (math functions) comes from the toolkit; say which flag points there.
  std::string libdevice = o.toolkit + "/nvvm/libdevice/libdevice.10.bc";
  if (!llvm::sys::fs::exists(libdevice))
    userError("--cuda-toolkit: no CUDA toolkit at '" + o.toolkit + "' (" + libdevice + " is missing)");
  DialectRegistry registry;
  registry.insert<func::FuncDialect, arith::ArithDialect, math::MathDialect, memref::MemRefDialect,
                  scf::SCFDialect, cf::ControlFlowDialect, LLVM::LLVMDialect, gpu::GPUDialect,
                  NVVM::NVVMDialect, vector::VectorDialect>();
  registerBuiltinDialectTranslation(registry);
  registerLLVMDialectTranslation(registry);
  registerGPUDialectTranslation(registry);
  registerNVVMDialectTranslation(registry);
  NVVM::registerNVVMTargetInterfaceExternalModels(registry);
  arith::registerConvertArithToLLVMInterface(registry);
  cf::registerConvertControlFlowToLLVMInterface(registry);
  registerConvertFuncToLLVMInterface(registry);
  index::registerConvertIndexToLLVMInterface(registry);
  registerConvertMathToLLVMInterface(registry);
  registerConvertMemRefToLLVMInterface(registry);
  MLIRContext ctx(registry, MLIRContext::Threading::DISABLED);
  ctx.loadAllAvailableDialects();
  OpBuilder b(&ctx);
  Location loc = UnknownLoc::get(&ctx);
  ModuleOp mod = ModuleOp::create(loc, StringRef(kp.name));
  mod->setAttr(gpu::GPUDialect::getContainerModuleAttrName(), b.getUnitAttr());
  b.setInsertionPointToEnd(mod.getBody());
  auto gmod = b.create<gpu::GPUModuleOp>(loc, kp.name + "_kernels");
  auto addGraph = [&](const KernelGraph &kg, bool bwd) {
    for (auto &k : kg.kernels) {
      if (k.phases.empty()) continue;
      const GpuLaunch &launch = k.schedule.gpu;
      GpuKernelBuilder kb(b, kg, k, cudaProgramId(kp.name));
      kb.build(gmod, kernelSymbol(kp.name, bwd, k.name), launch);
      if (launch.finalGrid > 0) {
        GpuKernelBuilder fb(b, kg, k, cudaProgramId(kp.name));
        fb.build(gmod, kernelSymbol(kp.name, bwd, k.name) + "_final", launch, /*final=*/true);
      }
    }
  };
  addGraph(kp.forward, false);
  if (kp.hasBackward) addGraph(kp.backward, true);
  verifyAndTidy(mod, "codegen (cuda)", mlirText);
  std::string ptx = lowerToPtx(mod, ptxArch(o), o.toolkit);
  mod.erase();
  return ptx;
}

} // namespace aotc::cg
