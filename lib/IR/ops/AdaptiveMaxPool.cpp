//===- AdaptiveMaxPool.cpp - adaptive_max_pool2d, adaptive_max_pool3d --------------===//
//
// AdaptiveMaxPooling2d.cpp / 3d.cpp: over the last 2 (3) dims of a [N, C, ...] or [C, ...]
// input, output position o of a dim of size I -> O reads the window [floor(o I / O),
// ceil((o + 1) I / O)); the value is the window's maximum and the index its flat position in
// the input plane (H·W, or D·H·W), the first maximum in row-major order, a NaN replacing it
// (the last NaN wins: ATen's `val > max || isnan(val)`). Non-core composites: decomposed
// (lib/Decompose/DecomposeNonCore.cpp) into gathers of the window taps, an argmax and a gather
// by the index, whose gradient is ATen's adaptive_max_pool*_backward (the gradient goes to the
// index). Integer inputs are refused (torch: floating only).
//===----------------------------------------------------------------------===//
#include "Ops.h"

#include <cmath>

namespace aotc {
namespace ops {
namespace {

using Types = std::vector<TensorType>;

Types adaptiveMaxShapes(const Node &n, int dims) {
  TensorType x = argType(n, 0);
  const std::string op = dims == 2 ? "adaptive_max_pool2d" : "adaptive_max_pool3d";
  if (x.rank() != dims + 1 && x.rank() != dims + 2)
    nodeError(n, op + "(): Expected " + std::to_string(dims + 1) + "D or " + std::to_string(dims + 2) +
                     "D tensor, but got " + shapeStr(x.shape));
  for (int64_t i = x.rank() - dims; i < x.rank(); ++i)
    if (x.shape[i] == 0)
      nodeError(n, op + "(): Expected input to have non-zero size for non-batch dimensions, but input has sizes " +
                       shapeStr(x.shape) + " with dimension " + std::to_string(i) + " being empty");
  requireFloating(n, x.dtype, op);
  const std::vector<int64_t> &o = n.intListArg(1);
  if ((int)o.size() != dims) nodeError(n, op + "(): internal error: output_size.size() must be " + std::to_string(dims));
  Shape s = x.shape;
  for (int k = 0; k < dims; ++k) {
    if (o[k] < 0) nodeError(n, op + ": output_size must be non-negative, got " + shapeStr(o));
    s[s.size() - dims + k] = o[k];
  }
  return {{x.dtype, s}, {DType::I64, s}};
}

std::vector<RefTensor> adaptiveMaxRef(const Node &n, const RefTensor &x, int dims) {
  RefTensor vals(n.types[0].dtype, n.types[0].shape), idx(DType::I64, n.types[1].shape);
  int64_t r = (int64_t)x.shape.size(), planes = 1, inPlane = 1, outPlane = 1;
  std::vector<int64_t> in(x.shape.end() - dims, x.shape.end()), out(vals.shape.end() - dims, vals.shape.end());
  for (int64_t i = 0; i < r - dims; ++i) planes *= x.shape[i];
  for (int k = 0; k < dims; ++k) inPlane *= in[k], outPlane *= out[k];
  for (int64_t p = 0; p < planes; ++p)
    for (int64_t q = 0; q < outPlane; ++q) {
      std::vector<int64_t> oi = unravel(q, Shape(out.begin(), out.end())), lo(dims), hi(dims);
      for (int k = 0; k < dims; ++k) {
        lo[k] = oi[k] * in[k] / out[k];
        hi[k] = ((oi[k] + 1) * in[k] + out[k] - 1) / out[k];
      }
      double best = -INFINITY;
      int64_t at = -1;
      std::vector<int64_t> w(lo);
      for (;;) { // row-major over the window
        int64_t f = ravel(w, Shape(in.begin(), in.end()));
        double v = x.data[p * inPlane + f];
        if (at < 0 || v > best || std::isnan(v)) best = v, at = f;
        int k = dims - 1;
        while (k >= 0 && ++w[k] == hi[k]) w[k] = lo[k], --k;
        if (k < 0) break;
      }
      vals.data[p * outPlane + q] = best;
      idx.data[p * outPlane + q] = (double)at;
    }
  return {vals, idx};
}

} // namespace

void registerAdaptiveMaxPoolOps(OpRegistry &r) {
  for (int dims : {2, 3}) {
    OpDef &d = r.add(dims == 2 ? "adaptive_max_pool2d(Tensor self, int[2] output_size) -> (Tensor, Tensor)"
                               : "adaptive_max_pool3d(Tensor self, int[3] output_size) -> (Tensor, Tensor)",
                     OpCategory::Composite);
    d.infer = [dims](const Node &n) { return adaptiveMaxShapes(n, dims); };
    d.eval = [dims](const Node &n, const RefArgs &a, const std::vector<std::vector<const RefTensor *>> &) {
      return adaptiveMaxRef(n, *a.at(0), dims);
    };
  }
}

} // namespace ops
} // namespace aotc
