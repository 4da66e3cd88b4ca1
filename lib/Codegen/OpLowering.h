//===- OpLowering.h - The codegen op table: one entry per primitive target -*- C++ -*-===//
//
// Internal to lib/Codegen (MLIR-free). Fusion (Fusion.cpp) looks every call node up in this
// table, keyed by canonical target ("aten.add.Tensor"), and never compares op names itself.
// An entry says how the op becomes kernel IR:
//  * Pointwise: a rule building the scalar expression of one output element from the
//    operands' expressions (broadcast to the output's shape, cast to a dtype the rule picks);
//  * View: a rule giving the affine index map from the output's index space to the input's
//    (old var = m * new var + c); Reshape re-strides each leaf (torch's computeStride) or
//    realizes first; Alias is the value itself; Clone is the value, stored when it must be;
//  * Reduction: the fold (sum, max, min, argmax) and whether the result is divided by the
//    count (mean);
//  * Matmul, Gather, IndexSelect, Scatter (scatter_add, scatter, aotc::scatter_combine),
//    ViewScatter: a dedicated builder in Fusion.cpp.
// The table (OpLowering.cpp) covers every target of primitiveTargets()
// (include/aotc/Decompositions.h), which a unit test checks. Where the other parts of an op
// live (schema, shape function, f64 reference, derivative, decomposition) is in docs/ops.md.
//===----------------------------------------------------------------------===//
#pragma once

#include "FusionInternal.h"

#include <functional>
#include <map>
#include <string>
#include <vector>

namespace aotc::fusion {

enum class LoweringKind {
  Pointwise,
  View,
  Reshape,
  Alias,
  Clone,
  Reduction,
  Matmul,
  Gather,
  IndexSelect,
  Scatter,
  ViewScatter,
  Conv, ///< A convolution primitive (include/aotc/Conv.h): a library call (ExternFn::Conv).
  Fft,  ///< _fft_r2c / _fft_c2r / _fft_c2c: a library call (ExternFn::Fft).
  Linalg, ///< aotc::lapack_*: a library call (ExternFn::Linalg).
};

/// What a pointwise rule sees of its node.
struct PointwiseArgs {
  const Node &n;
  const Dims &shape;  ///< The output's dims.
  DType od;           ///< The output's dtype.
  /// Argument i (a tensor broadcast to `shape`, or a scalar argument as a constant) as dtype t.
  std::function<ERef(size_t i, DType t)> operand;
  ERef x(size_t i, DType t) const { return operand(i, t); }
  ERef x(size_t i) const { return operand(i, od); }
};
/// Returns the element's value (any dtype; fusion casts it to `od`). Bad arguments: nodeError.
using PointwiseRule = ERef (*)(const PointwiseArgs &);

/// Old var d = sum_k m[d][k] * new var k + c[d], for a view node with input dims `in` and
/// output dims `out` (run-time sizes make c run-time: x[:, -1] of a dim of s17 is s17 - 1).
using ViewRule = IndexMap (*)(const Node &n, const Dims &in, const Dims &out);

struct OpLowering {
  LoweringKind kind = LoweringKind::Pointwise;
  PointwiseRule pointwise = nullptr; ///< Pointwise.
  ViewRule view = nullptr;           ///< View.
  ReduceKind reduce = ReduceKind::Sum; ///< Reduction.
  bool mean = false;                 ///< Reduction: divide by the number of reduced elements.
  bool bias = false;    ///< Matmul: addmm (self is the bias, beta/alpha scale it and the product).
  bool batched = false; ///< Matmul: bmm (rank-3 operands).
  ConvDesc::Role conv = ConvDesc::Role::Forward; ///< Conv: which of the three primitives.
  LinalgDesc::Kind linalg = LinalgDesc::Kind::Cholesky; ///< Linalg: which call.
};

/// Every entry, by canonical target.
const std::map<std::string, OpLowering> &loweringTable();
/// The entry of canonical `target`, or nullptr when codegen cannot lower it.
const OpLowering *findLowering(const std::string &target);
/// The entry of a call node's target; nullptr for other nodes and unknown targets.
inline const OpLowering *findLowering(const Node &n) { return n.isCall() ? findLowering(n.target) : nullptr; }

/// The library call of an aotc.lapack_* node (its lowering `l`): kind, flags and sizes from the
/// node's arguments (lib/IR/ops/Linalg.cpp); buffers, offsets and error are the fuser's.
LinalgDesc linalgDescOf(const Node &n, const OpLowering &l);
/// What a failed call of `d` means, for the node's error entry (the value is aotc_linalg's status).
const char *linalgErrorText(const LinalgDesc &d);

/// The op's short name for --emit=kernels ("aten.add.Tensor" -> "add").
std::string opBase(const std::string &target);

} // namespace aotc::fusion
