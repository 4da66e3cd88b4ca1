//===- FusionInternal.h - Tree form of kernels during fusion ----*- C++ -*-===//
//
// Internal to lib/Codegen (MLIR-free). While fusing, scalar computations are
// immutable expression trees (shared DAGs) whose loads address buffers through
// affine maps over the index space of the value being computed. Views rewrite
// those maps (no copies); pointwise ops build bigger trees; reductions, GEMMs
// and stores into buffers end a tree and make a TKernel. TKernels are merged
// (KernelMerge.cpp) and finally flattened into the Kernels.h form.
//===----------------------------------------------------------------------===//
#pragma once

#include "aotc/Kernels.h"

#include <functional>
#include <memory>
#include <optional>

namespace aotc::fusion {

struct EExpr;
using ERef = std::shared_ptr<const EExpr>;

struct EDyn {
  ERef value; ///< i64 expression in the same index space as the load.
  Dim stride = 0, bound = 0;
  int error = -1;
};

/// A load (or the address of a store): element = offset + sum coef[k]*var[k] + dyn.
struct EAddr {
  int buffer = -1;
  Dim offset = 0;
  Dims coef;
  std::vector<EDyn> dyn;
};

struct EExpr {
  ScalarOp op = ScalarOp::Const;
  DType type = DType::F32;
  std::vector<ERef> args;
  double f = 0.0;
  int64_t i = 0;
  EAddr addr; ///< Load; Index (buffer -1: the i64 value of the address itself).
  int reg = -1; ///< Reg.
  std::string sym; ///< Const: a run-time size (Inst::sym); i and f hold its reference value.
};

ERef mkConst(DType t, double v);
/// Scalar argument i of n as a constant of dtype t: integer and bool arguments of an integer
/// or bool dtype are taken exactly (not through double).
ERef mkConstArg(DType t, const Node &n, size_t i);
/// Node errors for a scalar argument that fusion takes as a constant only (a pow exponent, a
/// diagonal, alpha / beta) when it is a run-time size (Node::symArgs).
void refuseRuntimeArg(const Node &n, size_t i);
/// A size as a constant of dtype t (integer or floating): a run-time size is a Const whose
/// `sym` names it (its value at run time; the reference value in i and f).
ERef mkSizeConst(DType t, const Dim &d);
/// An exact integer constant of integer or bool type t (no detour through double).
ERef mkIntConst(DType t, int64_t v);
ERef mkLoad(DType t, EAddr a);
/// The i64 value offset + sum coef*var (+ dyn terms) of an index space; views
/// rewrite it exactly like a load's address (`a.buffer` is set to -1).
ERef mkIndex(EAddr a);
ERef mkReg(DType t, int reg);
ERef mkOp(ScalarOp op, DType t, std::vector<ERef> args);
/// Special function `fn` (AOTC_SPECIAL_*) of x with polygamma's order n (ScalarOp::Special).
ERef mkSpecial(int64_t fn, DType t, ERef x, ERef n);
/// Word `word` (0..3) of Philox 4x32-10 for i64 seed, offset and element index (I64 result).
ERef mkPhilox(ERef seed, ERef offset, ERef index, int64_t word);
/// Cast unless already of type t.
ERef mkCast(ERef e, DType t);
/// Number of arithmetic nodes in the tree (shared subtrees counted once).
int exprCost(const ERef &e);

/// Rewrites every load's (and Index's) address (dyn values first, recursively), memoized so
/// DAG sharing is kept. `fn` receives the load with already-rewritten dyn terms
/// and edits it in place; returning false aborts (the result is nullptr).
using AddrFn = std::function<bool(EAddr &)>;
ERef mapAddrs(const ERef &e, const AddrFn &fn);
/// Rewrites registers / loads: `fn` returns a replacement or nullptr to keep.
ERef substitute(const ERef &e, const std::function<ERef(const EExpr &)> &fn);
/// Calls fn on every load address (including those inside dyn values).
void forEachAddr(const ERef &e, const std::function<void(const EAddr &)> &fn);
/// Calls fn on every register used.
void forEachReg(const ERef &e, const std::function<void(int)> &fn);

/// old_var[d] = sum_k m[d][k] * new_var[k] + c[d]  (an affine index map).
struct IndexMap {
  std::vector<std::vector<int64_t>> m;
  Dims c;
  int newRank = 0;
  bool operator==(const IndexMap &) const = default;
  static IndexMap identity(int rank);
  /// Maps an operand of shape `from` broadcast (right-aligned) to shape `to`.
  static IndexMap broadcast(const Shape &from, const Shape &to);
  /// old var d = new var perm[d] (a permutation/embedding of vars).
  static IndexMap select(const std::vector<int> &newPosOfOld, int newRank);
};
/// Applies an index map to every load of e (returns e unchanged for rank-0 identity).
ERef applyIndexMap(const ERef &e, const IndexMap &map);

/// Dimension `d` of a rank-`rank` tensor wrapped as ATen's maybe_wrap_dim (wrapDim, Types.h);
/// out of range: nodeError "codegen: dimension out of range". Defined in ViewScatter.cpp.
int64_t wrapDimOrError(const Node &n, int64_t d, int64_t rank);

/// select's (and select_scatter's) index, argument `arg` of n, along a dim of size `size`:
/// a negative one counts from the end; a constant index of a constant size out of range is a
/// node error ("codegen: <what> index out of range"); over a run-time size it is in range (the
/// shape function assumes so). Defined in ViewScatter.cpp.
Dim selectIndex(const Node &n, size_t arg, const Dim &size, const char *what);
/// The value of slice_scatter / select_scatter node `n` (ViewScatter.cpp) over
/// its output index space (`shape`): self where the element is off the slice,
/// src (re-indexed, clamped) on it. Errors: nodeError for bad dims/indices.
ERef viewScatterValue(const Node &n, const ERef &self, const ERef &src, const Dims &shape);

struct TReduction {
  ReduceKind kind = ReduceKind::Sum;
  ERef value;
  int reg = -1;
  DType accType = DType::F32;
};

struct TStore {
  EAddr addr;
  ERef value;
  bool accumulate = false;
  StoreCombine combine = StoreCombine::Add;
};

struct TPhase {
  Dims inner;
  std::vector<TReduction> reds;
  std::vector<TStore> stores;
  bool isReduce() const { return !reds.empty(); }
};

struct TKernel {
  Kernel::Kind kind = Kernel::Kind::Loop;
  Dims outer;
  std::vector<TPhase> phases;
  std::vector<DType> regs;
  ExternCall call; ///< Kind::Extern.
  std::vector<std::string> ops;
  bool noMerge = false;
  bool dead = false; ///< Merged into another kernel.
};

/// Whether a run-time size appears anywhere in k: its domains, an address's offset,
/// coefficients or index terms, a size constant.
bool hasRuntimeSizes(const TKernel &k);

/// Buffers read / written by a kernel (sorted, unique).
std::vector<int> kernelReads(const TKernel &k);
std::vector<int> kernelWrites(const TKernel &k);

/// Merges kernels (same outer domain, dependencies only within an outer
/// iteration), then removes stores to scratch buffers nobody reads.
void mergeKernels(std::vector<TKernel> &ks, const std::vector<Buffer> &buffers);

/// Index-set splitting (IndexSplit.cpp): a pure map kernel whose values compare a loop index
/// with constants (slice_scatter, select_scatter) is cut along that index where the
/// comparisons change, one map phase per piece, each with its selects folded. Returns false
/// (k unchanged) when the kernel does not qualify.
bool splitIndexSets(TKernel &k);

/// Flattens tree kernels into Kernels.h form (CSE per phase); the schedule pass decides how a
/// target runs them (Schedule.h).
Kernel flattenKernel(const TKernel &tk, const std::string &name);

} // namespace aotc::fusion
