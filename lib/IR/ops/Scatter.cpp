//===- Scatter.cpp - The *_scatter ops (functional writes into a view) --------===//
//
// slice_scatter and select_scatter return `self` with the slice (select) view
// replaced by `src`: the functional form of `self[view] = src` that
// functionalize emits for in-place writes through slice/select views
// (aten/src/ATen/native/TensorShape.cpp slice_scatter, select_scatter; the view
// ranges are clamped exactly like slice.Tensor / select.int).
//===----------------------------------------------------------------------===//
#include "Ops.h"


namespace aotc {
namespace ops {
namespace {

using Types = std::vector<TensorType>;

/// The slice of `self` that slice_scatter's (dim, start, end, step) select.
SliceRange sliceRangeOf(const Node &n) { return sliceRange(n, argType(n, 0).shape, 2, "slice_scatter"); }

/// The selected (dim, index) of select_scatter, wrapped and bounds-checked.
std::pair<int64_t, int64_t> selectOf(const Node &n) {
  const Shape &in = argType(n, 0).shape;
  if (in.empty()) nodeError(n, "select_scatter cannot be applied to a 0-dim tensor");
  int64_t dim = wrapDimOrError(n, n.intArg(2), (int64_t)in.size());
  int64_t idx = n.intArg(3), size = in[dim];
  if (idx < -size || idx >= size)
    nodeError(n, "select_scatter: index " + std::to_string(idx) + " out of range for tensor of size " +
                     shapeStr(in) + " at dimension " + std::to_string(dim));
  return {dim, idx < 0 ? idx + size : idx};
}

void checkSrc(const Node &n, const Shape &want) {
  TensorType self = argType(n, 0), src = argType(n, 1);
  if (src.shape != want)
    nodeError(n, "expected src to have a size equal to the slice of self. src size = " +
                     shapeStr(src.shape) + ", slice size = " + shapeStr(want));
  if (src.dtype != self.dtype)
    nodeError(n, std::string("expected src to have the dtype of self (") + dtypeAbbr(self.dtype) +
                     "), got " + dtypeAbbr(src.dtype));
}

} // namespace

void registerScatterOps(OpRegistry &r) {
  {
    OpDef &d = r.add("slice_scatter(Tensor self, Tensor src, int dim=0, SymInt? start=None, "
                     "SymInt? end=None, SymInt step=1) -> Tensor",
                     OpCategory::Index);
    d.primitive = true;
    d.infer = [](const Node &n) -> Types {
      TensorType t = argType(n, 0);
      SliceRange s = sliceRangeOf(n);
      Shape want = t.shape;
      want[s.dim] = s.len;
      checkSrc(n, want);
      return {t};
    };
    setEval(d, [](const Node &n, const RefArgs &a) {
      RefTensor out = *a.at(0);
      const RefTensor &src = *a.at(1);
      SliceRange s = sliceRangeOf(n);
      for (int64_t k = 0; k < src.numel(); ++k) {
        std::vector<int64_t> idx = unravel(k, src.shape);
        idx[s.dim] = s.start + idx[s.dim] * s.step;
        out.data[ravel(idx, out.shape)] = src.data[k];
      }
      return out;
    });
  }
  {
    OpDef &d = r.add("select_scatter(Tensor self, Tensor src, int dim, SymInt index) -> Tensor",
                     OpCategory::Index);
    d.primitive = true;
    d.infer = [](const Node &n) -> Types {
      TensorType t = argType(n, 0);
      auto [dim, idx] = selectOf(n);
      Shape want = t.shape;
      want.erase(want.begin() + dim);
      checkSrc(n, want);
      return {t};
    };
    setEval(d, [](const Node &n, const RefArgs &a) {
      RefTensor out = *a.at(0);
      const RefTensor &src = *a.at(1);
      auto [dim, index] = selectOf(n);
      for (int64_t k = 0; k < src.numel(); ++k) {
        std::vector<int64_t> idx = unravel(k, src.shape);
        idx.insert(idx.begin() + dim, index);
        out.data[ravel(idx, out.shape)] = src.data[k];
      }
      return out;
    });
  }
}

} // namespace ops
} // namespace aotc
