//===- Pool.cpp - max_pool2d_with_indices and its backward -------------------===//
//
// max_pool2d_with_indices(self, kernel_size, stride=[], padding=0, dilation=1, ceil_mode=False)
// -> (out, indices): self [N, C, H, W] or [C, H, W]; stride [] means kernel_size; one-element
// lists serve both dims. Output size as ATen's pooling_output_shape (Pool.h): with ceil_mode a
// last window must start inside the input or its left padding. indices are flat positions in
// H*W. Values as PyTorch's CPU kernel (MaxPoolKernel.cpp): the first maximum in window order
// (strict >), NaN propagates (a NaN replaces the maximum; the last NaN's index wins); padded
// positions are never read. max_pool2d_with_indices_backward(grad_output, self, ..., indices):
// each output's gradient is added at its index.
//===----------------------------------------------------------------------===//
#include "Ops.h"

#include "aotc/Pool.h"

namespace aotc {
namespace ops {
namespace {

using Types = std::vector<TensorType>;

/// The geometry of a pooling node whose kernel_size is argument `ka` (stride, padding, dilation,
/// ceil_mode follow).
PoolGeometry geometryOf(const Node &n, const Shape &in, size_t ka = 1) {
  PoolShapeResult r = maxPool2dShape(in, n.intListArg(ka), n.intListArg(ka + 1), n.intListArg(ka + 2),
                                     n.intListArg(ka + 3), n.boolArg(ka + 4));
  if (!r.error.empty()) nodeError(n, r.error);
  return r.geom;
}

/// Calls f(plane, oh, ow, h, w) for every in-bounds window position, in window order.
template <class F> void forEachWindow(const PoolGeometry &g, F f) {
  for (int64_t p = 0; p < g.planes; ++p)
    for (int64_t oh = 0; oh < g.OH; ++oh)
      for (int64_t ow = 0; ow < g.OW; ++ow)
        for (int64_t i = 0; i < g.KH; ++i) {
          int64_t h = oh * g.strideH - g.padH + i * g.dilH;
          if (h < 0 || h >= g.H) continue;
          for (int64_t j = 0; j < g.KW; ++j) {
            int64_t w = ow * g.strideW - g.padW + j * g.dilW;
            if (w < 0 || w >= g.W) continue;
            f(p, oh, ow, h, w);
          }
        }
}

} // namespace

void registerPoolOps(OpRegistry &r) {
  {
    OpDef &d = r.add("max_pool2d_with_indices(Tensor self, int[2] kernel_size, int[2] stride=[], int[2] padding=0, "
                     "int[2] dilation=1, bool ceil_mode=False) -> (Tensor, Tensor)",
                     OpCategory::Reduction);
    d.infer = [](const Node &n) -> Types {
      TensorType x = argType(n, 0);
      requireFloating(n, x.dtype, "max_pool2d");
      PoolGeometry g = geometryOf(n, x.shape);
      Shape out = x.shape;
      out[out.size() - 2] = g.OH;
      out.back() = g.OW;
      return {{x.dtype, out}, {DType::I64, out}};
    };
    d.eval = [](const Node &n, const RefArgs &a, const std::vector<std::vector<const RefTensor *>> &) {
      const RefTensor &x = *a[0];
      PoolGeometry g = geometryOf(n, x.shape);
      RefTensor out(n.types[0].dtype, n.types[0].shape), idx(DType::I64, n.types[1].shape);
      std::vector<bool> seen(out.numel(), false);
      forEachWindow(g, [&](int64_t p, int64_t oh, int64_t ow, int64_t h, int64_t w) {
        int64_t o = (p * g.OH + oh) * g.OW + ow;
        double v = x.data[(p * g.H + h) * g.W + w];
        if (!seen[o]) { // MaxPoolKernel.cpp: maxval = -inf, maxindex = the first position read
          out.data[o] = -INFINITY;
          idx.data[o] = (double)(h * g.W + w);
          seen[o] = true;
        }
        if (v > out.data[o] || std::isnan(v)) {
          out.data[o] = v;
          idx.data[o] = (double)(h * g.W + w);
        }
      });
      return std::vector<RefTensor>{out, idx};
    };
  }
  {
    OpDef &d = r.add("max_pool2d_with_indices_backward(Tensor grad_output, Tensor self, int[2] kernel_size, "
                     "int[2] stride, int[2] padding, int[2] dilation, bool ceil_mode, Tensor indices) -> Tensor",
                     OpCategory::Reduction);
    d.indexArgs = {7};
    d.infer = [](const Node &n) -> Types {
      TensorType g = argType(n, 0), x = argType(n, 1), ix = argType(n, 7);
      PoolGeometry geo = geometryOf(n, x.shape, 2);
      Shape out = x.shape;
      out[out.size() - 2] = geo.OH;
      out.back() = geo.OW;
      if (g.shape != out || ix.shape != out)
        nodeError(n, "grad_output " + g.str() + " and indices " + ix.str() + " must have the output shape " +
                         shapeStr(out));
      if (g.dtype != x.dtype) nodeError(n, "grad_output and self must have the same dtype");
      if (ix.dtype != DType::I64) nodeError(n, "indices must be int64, got " + ix.str());
      return {x};
    };
    setEval(d, [](const Node &n, const RefArgs &a) {
      const RefTensor &g = *a[0], &x = *a[1], &ix = *a[7];
      PoolGeometry geo = geometryOf(n, x.shape, 2);
      RefTensor dx(n.types[0].dtype, x.shape);
      int64_t hw = geo.H * geo.W, ohw = geo.OH * geo.OW;
      for (int64_t p = 0; p < geo.planes; ++p)
        for (int64_t o = 0; o < ohw; ++o) {
          int64_t k = (int64_t)ix.data[p * ohw + o];
          if (k < 0 || k >= hw) nodeError(n, "index " + std::to_string(k) + " is out of bounds for " + std::to_string(hw));
          dx.data[p * hw + k] += g.data[p * ohw + o];
        }
      return dx;
    });
  }
}

} // namespace ops
} // namespace aotc
