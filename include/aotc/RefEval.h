//===- RefEval.h - Naive float64 reference evaluator ------------*- C++ -*-===//
//
// The oracle: evaluates a Graph node by node, every value held as doubles in
// row-major order (i64 and bool values are exact as doubles up to 2^53).
// Floating results are computed in float64 whatever the graph's dtype says,
// so gradchecks can use central differences with eps = 1e-6.
// Slow on purpose: no fusion, no views, one fresh buffer per node.
//===----------------------------------------------------------------------===//
#pragma once

#include "aotc/Graph.h"

#include <cstdint>
#include <random>
#include <vector>

namespace aotc {

struct RefTensor {
  DType dtype = DType::F64;
  Shape shape;
  std::vector<double> data; ///< numel() values, row-major.

  RefTensor() = default;
  RefTensor(DType dt, Shape s, double fill = 0.0);
  int64_t numel() const { return (int64_t)data.size(); }
  /// Flat index of a multi-index.
  int64_t offset(const std::vector<int64_t> &idx) const;
};

/// Evaluates `g` on `inputs` (one per placeholder, in placeholder order).
/// Returns one RefTensor per graph output. Shapes/dtypes are checked against
/// the placeholders' types (internal error on mismatch).
std::vector<RefTensor> evaluate(const Graph &g, const std::vector<RefTensor> &inputs);

/// Random tensor: uniform in [lo, hi) for floating dtypes, in [lo, hi) rounded
/// down for i64, 0/1 for bool. Deterministic for a given generator state.
RefTensor randomTensor(const TensorType &t, std::mt19937_64 &rng, double lo = -1.0,
                       double hi = 1.0);

/// Broadcast helper used by op implementations: for each flat index of `out`,
/// the flat index into a tensor of shape `in` broadcast to `out`.
std::vector<int64_t> broadcastIndexMap(const Shape &in, const Shape &out);

} // namespace aotc
