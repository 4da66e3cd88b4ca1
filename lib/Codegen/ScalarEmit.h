//===- ScalarEmit.h - Kernels.h scalar code -> MLIR arith/math/memref -*- C++ -*-===//
//
// Internal to lib/Codegen (includes MLIR headers). The part of a kernel that is
// the same on every target: constants, casts, element addresses (with the
// bounds checks of data-dependent indices), loads, stores and the scalar
// instructions of one phase. A target's kernel builder derives from it, sets
// `vars_` (outer then inner loop variables, index-typed), `regs_` and `ph_`,
// and owns the loop structure: scf.parallel/scf.for on the CPU (MLIRGen.cpp),
// thread/block ids and warp shuffles on CUDA (GpuGen.cpp).
//===----------------------------------------------------------------------===//
#pragma once

#include "aotc/Kernels.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/IR/Builders.h"
#include "mlir/IR/BuiltinOps.h"

#include <map>
#include <string>
#include <vector>

namespace aotc::cg {

/// Verifies a generated module (internal error with its text when it does not), runs
/// canonicalize + CSE, and prints it into `mlirText` when non-null. `what` prefixes errors.
void verifyAndTidy(mlir::ModuleOp mod, const std::string &what, std::string *mlirText);

/// MLIR element type of a dtype; Bool is i1 in registers and i8 in memory, U8 is i8.
mlir::Type elemType(mlir::MLIRContext *ctx, DType d, bool memory);

class ScalarEmitter {
public:
  ScalarEmitter(mlir::OpBuilder &b, const KernelGraph &kg, const Kernel &k)
      : b_(b), ctx_(b.getContext()), kg_(kg), k_(k) {}

protected:
  mlir::OpBuilder &b_;
  mlir::MLIRContext *ctx_;
  const KernelGraph &kg_;
  const Kernel &k_;
  mlir::Location loc_ = mlir::UnknownLoc::get(ctx_);
  std::map<int, mlir::Value> bufArg_; ///< Buffer id -> memref argument.
  mlir::Value status_;                ///< memref<2xi64> {code, value}, when k_.mayFail()
                                      ///< (CUDA: memref<4xi64> {code, value, program id, 0}).
  int64_t statusProgramId_ = 0;       ///< CUDA: written as status_[2] with every error.
  std::vector<mlir::Value> regs_;     ///< Reduction results, by Reduction::reg.
  /// The in-order folds of floating reductions carry fastmath<reassoc> (the CPU target): the
  /// loop vectorizer may then keep one partial accumulator per vector lane and interleaved
  /// copy, combined in a fixed tree after the loop. The order is a property of the compiled
  /// code (its vector width and interleave), never of the thread count.
  bool reassocFolds_ = false;

  // Vector lanes (the CUDA target's 16-byte accesses): while non-empty, a load of access
  // index i in laneVectors_ is element lane_ of that vector, and a store to an access in
  // laneStores_ appends its value there (the caller writes the vector after the last lane).
  std::map<int, mlir::Value> laneVectors_;
  std::map<int, std::vector<mlir::Value>> laneStores_;
  int64_t lane_ = 0;

  // Row cache (the CUDA target's block-per-row kernels, GpuGen.cpp): a load of access index
  // i in rowCache_ inside a strided inner loop (rowJ_: the linear inner index) goes through
  // a workgroup buffer indexed by rowJ_: the phase that fills it (second: true) loads from
  // global memory and stores the value there; later phases, whose threads visit the same
  // positions, read it back instead of global memory.
  std::map<int, std::pair<mlir::Value, bool>> rowCache_;
  mlir::Value rowJ_;

  // Per-scope state while emitting one phase body.
  const Phase *ph_ = nullptr;
  std::vector<mlir::Value> vars_; ///< Outer ivs then inner ivs (index).
  std::map<int, mlir::Value> memo_;

  mlir::Value cIdx(int64_t v) { return b_.create<mlir::arith::ConstantIndexOp>(loc_, v); }
  mlir::Value cI64(int64_t v) { return b_.create<mlir::arith::ConstantIntOp>(loc_, v, 64); }
  mlir::Value constOf(DType t, double f, int64_t i);
  mlir::Value zeroOf(DType t) { return constOf(t, 0.0, 0); }
  /// Identity of a reduction's accumulator (0, -inf/INT64_MIN, +inf/INT64_MAX).
  mlir::Value reduceInit(const Reduction &r);

  mlir::Value cast(mlir::Value v, DType from, DType to);
  /// Word `word` of Philox 4x32-10 (key: seed; counter: index lo/hi, offset lo/hi), as i64.
  mlir::Value philox(mlir::Value seed, mlir::Value offset, mlir::Value index, int64_t word);
  mlir::Value inst(int id);
  /// The element index of access a; ok (null: none) is the conjunction of its bounds checks,
  /// errCode/errVal what a failure reports. With `checked` non-null, the dyn terms whose check
  /// hoistInvariants already emitted use their index only when in bounds (else 0, so the
  /// access stays in the buffer) and *checked is the conjunction of those checks: the caller
  /// accesses unconditionally and selects.
  mlir::Value address(const Access &a, mlir::Value &ok, mlir::Value &errCode, mlir::Value &errVal,
                      mlir::Value *checked = nullptr);
  mlir::Value load(const Access &a, DType t);
  /// Folds (b, bIdx) into (a, aIdx) for reduction r (aIdx/bIdx: ArgMax's i64 positions):
  /// the in-order fold when `tree` is false (b comes later), a tree combine when true
  /// (ArgMax ties then go to the smaller index: torch.argmax's first occurrence).
  void combine(const Reduction &r, mlir::Value &a, mlir::Value &aIdx, mlir::Value b, mlir::Value bIdx,
               bool tree);
  void store(const Store &s);
  /// 0 <= v < bound for an i64 index v (the check of a gathered access).
  mlir::Value inBounds(mlir::Value v, int64_t bound);
  /// Records a failed bounds check: status_ = {code, val[, statusProgramId_]}.
  void writeStatus(mlir::OpBuilder &b, mlir::Location l, mlir::Value code, mlir::Value val);

  /// Sets the registers of reduce phase p from its final accumulators accs[ai..] (ArgMax:
  /// value then index; the index becomes the register), advancing ai.
  void setRegs(const Phase &p, mlir::ValueRange accs, size_t &ai, std::vector<mlir::Value> &regs);
  /// One phase for the outer iterations `laneOuter` (each: outer loop variables, index
  /// values) at once, as Kernels.h defines it per iteration: an scf.for nest over the
  /// inner domain in row-major order whose body runs every lane (unroll-and-jam of the
  /// outer loop); reduce phases carry each lane's accumulators as iter_args, set that
  /// lane's registers (laneRegs[t]) and then run their stores once per lane. Lanes are
  /// independent outer iterations, so each gets exactly the one-lane result.
  void emitPhaseLanes(const Phase &p, const std::vector<std::vector<mlir::Value>> &laneOuter,
                      std::vector<std::vector<mlir::Value>> &laneRegs);
  /// The scf loop bounds of p's inner domain: [0, extent) per dim, [lb, ub) for dim `dim`.
  void innerBounds(const Phase &p, int dim, mlir::Value lb, mlir::Value ub, llvm::SmallVector<mlir::Value> &lbs,
                   llvm::SmallVector<mlir::Value> &ubs, llvm::SmallVector<mlir::Value> &steps);
  /// The schedule's reuses (PhaseReuse, CPU) and the index of the phase being emitted: a
  /// reduce phase `from` stores its value in its fold loop, map phase `to` loads it.
  std::vector<PhaseReuse> reuse_;
  int phase_ = -1;
  /// Per lane, the values computed before the current phase's inner loop (hoistInvariants),
  /// by instruction id: enterLane starts each lane's memo from them. Empty outside a phase.
  std::vector<std::map<int, mlir::Value>> hoisted_;
  /// Per lane, the bounds checks hoistInvariants emitted for loads, by (access, dyn term):
  /// the in-bounds condition. checked_ is the current lane's.
  std::vector<std::map<std::pair<int, int>, mlir::Value>> hoistedChecks_;
  std::map<std::pair<int, int>, mlir::Value> checked_;
  /// Emits, before p's inner loop and for each lane, the loads of p whose address does not
  /// depend on the inner loop variables (a gather's checked index, a row's target, a
  /// per-row scale) together with what they need, into hoisted_. In the loop they were a
  /// load per element that LLVM may not move (a store of the phase might alias it) and, when
  /// checked, a branch that keeps the loop scalar. Not for loads of a buffer the phase
  /// stores to, nor when the inner domain may be empty (a hoisted bounds check would then
  /// fail where the loop never ran).
  void hoistInvariants(const Phase &p, const std::vector<std::vector<mlir::Value>> &laneOuter,
                       const std::vector<std::vector<mlir::Value>> &laneRegs);
  /// Forgets the current phase's per-scope state (memo, hoisted values and checks).
  void leavePhase();
  /// Enters lane t's scope at inner position ivs (its outer vars, registers; the memo holds
  /// just the lane's hoisted values).
  void enterLane(const std::vector<std::vector<mlir::Value>> &laneOuter,
                 const std::vector<std::vector<mlir::Value>> &laneRegs, size_t t, mlir::ValueRange ivs);
  /// The fold of reduce phase p for every lane over its inner domain, inner dim `dim`
  /// limited to [lb, ub) when given; returns the accumulators (per lane, per reduction;
  /// ArgMax: value then index).
  llvm::SmallVector<mlir::Value> emitFold(const Phase &p, const std::vector<std::vector<mlir::Value>> &laneOuter,
                                          const std::vector<std::vector<mlir::Value>> &laneRegs, int dim = -1,
                                          mlir::Value lb = {}, mlir::Value ub = {});
  /// Sets the registers of reduce phase p from its accumulators and runs its stores.
  void finishFold(const Phase &p, mlir::ValueRange results, const std::vector<std::vector<mlir::Value>> &laneOuter,
                  std::vector<std::vector<mlir::Value>> &laneRegs);
  /// The kernel's one outer iteration with split folds (KernelSchedule::splitRows): a phase
  /// with rows[i] > 0 folds its chunks of rows[i] rows of its split dim (splitDimOf) in an scf.parallel into
  /// partials on the stack, which this thread then combines in chunk order; the other phases
  /// run as emitPhaseLanes does.
  void emitSplitBody(const std::vector<int64_t> &rows);
  /// All phases of k_ for `block` outer iterations (KernelSchedule::block): outerIvs' last is
  /// the block index; the block's loop runs inside each phase's inner loop nest, its
  /// accumulators and registers in stack arrays (a column reduction reads a contiguous row
  /// segment per inner step). Each iteration folds in its own order, as one lane would.
  void emitBlockBody(mlir::ValueRange outerIvs, int64_t block);
  /// All phases of k_ for the outer iterations `laneOuter`.
  void emitLanesBody(const std::vector<std::vector<mlir::Value>> &laneOuter);
  /// All phases of k_ for one outer iteration (outerIvs: index values).
  void emitSequentialBody(mlir::ValueRange outerIvs);
};

/// Rewrites every f32 math.exp and math.log of `mod` into branch-free f64 arithmetic rounded
/// once to f32 (VectorMath.cpp): vectorizable, within 0.5 ulp plus ~1e-7 ulp, identical on
/// every x86-64 level.
void expandExpLogF32(mlir::ModuleOp mod);

} // namespace aotc::cg
