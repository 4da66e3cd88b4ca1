//===- Index.cpp - gather, scatter_add, index_select, embedding -------------===//
//
// Shape checks follow aten/src/ATen/native/ScatterGatherChecks.h
// (gather_shape_check, scatter_shape_check) and TensorAdvancedIndexing.cpp
// (index_select); embedding follows aten/src/ATen/native/Embedding.cpp.
// Index tensors are i64 or i32 (as PyTorch; an empty gather/scatter index may have
// any integer dtype, see scatter_gather_dtype_check). Out-of-range index values are reported by the
// reference evaluator as node errors (the generated code returns an error code).
//===----------------------------------------------------------------------===//
#include "Ops.h"

namespace aotc {
namespace ops {
namespace {

using Types = std::vector<TensorType>;

void requireIndex(const Node &n, const TensorType &t, const char *what, bool anyIntIfEmpty = false) {
  if (t.dtype == DType::I64 || t.dtype == DType::I32) return;
  if (anyIntIfEmpty && t.numel() == 0 && isIntegral(t.dtype) && t.dtype != DType::Bool) return;
  nodeError(n, std::string(what) + " expected an int64 or int32 index tensor, got " + dtypeTorchName(t.dtype));
}

int64_t checkedIndex(const Node &n, double v, int64_t size, int64_t dim) {
  int64_t i = (int64_t)v;
  if (i < -size || i >= size)
    nodeError(n, "index " + std::to_string(i) + " is out of bounds for dimension " + std::to_string(dim) +
                     " with size " + std::to_string(size));
  return i < 0 ? i + size : i;
}

/// Rank used by the scatter/gather checks: a 0-d tensor counts as 1-d.
int64_t ensure1(const TensorType &t) { return std::max<int64_t>(t.rank(), 1); }
int64_t sizeAt(const TensorType &t, int64_t d) { return t.rank() == 0 ? 1 : t.shape[d]; }

} // namespace

void registerIndexOps(OpRegistry &r) {
  {
    OpDef &d = r.add("gather(Tensor self, int dim, Tensor index, *, bool sparse_grad=False) -> Tensor", OpCategory::Index);
    d.indexArgs = {2};
    d.infer = [](const Node &n) -> Types {
      TensorType s = argType(n, 0), ix = argType(n, 2);
      requireIndex(n, ix, "gather()", true);
      int64_t dim = wrapDimOrError(n, n.intArg(1), s.rank());
      if (ix.numel() != 0) {
        if (ensure1(ix) != ensure1(s))
          nodeError(n, "gather(): index tensor must have the same number of dimensions as input tensor");
        for (int64_t i = 0; i < ensure1(s); ++i)
          if (i != dim && sizeAt(ix, i) > sizeAt(s, i))
            nodeError(n, "gather(): size of index " + shapeStr(ix.shape) + " does not match input " +
                             shapeStr(s.shape) + " at dimension " + std::to_string(i));
      }
      return {{s.dtype, ix.shape}};
    };
    setEval(d, [](const Node &n, const RefArgs &a) {
      const RefTensor &s = *a.at(0), &ix = *a.at(2);
      int64_t dim = *wrapDim(n.intArg(1), (int64_t)s.shape.size());
      RefTensor out(n.types[0].dtype, n.types[0].shape);
      for (int64_t k = 0; k < ix.numel(); ++k) {
        if (s.shape.empty()) {
          checkedIndex(n, ix.data[k], 1, 0);
          out.data[k] = s.data[0];
          continue;
        }
        std::vector<int64_t> idx = unravel(k, ix.shape);
        idx[dim] = checkedIndex(n, ix.data[k], s.shape[dim], dim);
        out.data[k] = s.data[ravel(idx, s.shape)];
      }
      return out;
    });
  }
  {
    OpDef &d = r.add("scatter_add(Tensor self, int dim, Tensor index, Tensor src) -> Tensor", OpCategory::Index);
    d.indexArgs = {2};
    d.infer = [](const Node &n) -> Types {
      TensorType s = argType(n, 0), ix = argType(n, 2), src = argType(n, 3);
      requireIndex(n, ix, "scatter_add()", true);
      int64_t dim = wrapDimOrError(n, n.intArg(1), s.rank());
      if (src.dtype != s.dtype) nodeError(n, "scatter_add(): expected self and src to have the same dtype");
      if (ix.numel() != 0) {
        if (ensure1(ix) != ensure1(s) || ensure1(src) != ensure1(s))
          nodeError(n, "scatter_add(): index, self and src must have the same number of dimensions");
        for (int64_t i = 0; i < ensure1(s); ++i)
          if ((i != dim && sizeAt(ix, i) > sizeAt(s, i)) || sizeAt(ix, i) > sizeAt(src, i))
            nodeError(n, "scatter_add(): expected index " + shapeStr(ix.shape) + " to be smaller than self " +
                             shapeStr(s.shape) + " apart from dimension " + std::to_string(dim) +
                             " and to be smaller size than src " + shapeStr(src.shape));
      }
      return {s};
    };
    setEval(d, [](const Node &n, const RefArgs &a) {
      const RefTensor &s = *a.at(0), &ix = *a.at(2), &src = *a.at(3);
      RefTensor out = s;
      if (s.shape.empty()) {
        for (int64_t k = 0; k < ix.numel(); ++k) checkedIndex(n, ix.data[k], 1, 0), out.data[0] += src.data[0];
        return out;
      }
      int64_t dim = *wrapDim(n.intArg(1), (int64_t)s.shape.size());
      for (int64_t k = 0; k < ix.numel(); ++k) {
        std::vector<int64_t> idx = unravel(k, ix.shape);
        double v = src.data[ravel(idx, src.shape)];
        idx[dim] = checkedIndex(n, ix.data[k], s.shape[dim], dim);
        out.data[ravel(idx, s.shape)] += v;
      }
      for (double &v : out.data) v = castValue(out.dtype, v);
      return out;
    });
  }
  {
    OpDef &d = r.add("index_select(Tensor self, int dim, Tensor index) -> Tensor", OpCategory::Index);
    d.indexArgs = {2};
    d.infer = [](const Node &n) -> Types {
      TensorType s = argType(n, 0), ix = argType(n, 2);
      requireIndex(n, ix, "index_select()");
      if (ix.rank() > 1) nodeError(n, "index_select(): index must be a vector or a scalar");
      int64_t dim = wrapDimOrError(n, n.intArg(1), s.rank());
      if (s.rank() > 0) s.shape[dim] = ix.numel();
      return {s};
    };
    setEval(d, [](const Node &n, const RefArgs &a) {
      const RefTensor &s = *a.at(0), &ix = *a.at(2);
      RefTensor out(n.types[0].dtype, n.types[0].shape);
      if (s.shape.empty()) {
        checkedIndex(n, ix.data.at(0), 1, 0);
        out.data[0] = s.data[0];
        return out;
      }
      int64_t dim = *wrapDim(n.intArg(1), (int64_t)s.shape.size());
      for (int64_t k = 0; k < out.numel(); ++k) {
        std::vector<int64_t> idx = unravel(k, out.shape);
        idx[dim] = checkedIndex(n, ix.data[idx[dim]], s.shape[dim], dim);
        out.data[k] = s.data[ravel(idx, s.shape)];
      }
      return out;
    });
  }
  {
    OpDef &d = r.add("embedding(Tensor weight, Tensor indices, SymInt padding_idx=-1, bool scale_grad_by_freq=False, "
                     "bool sparse=False) -> Tensor",
                     OpCategory::Index);
    d.indexArgs = {1};
    d.infer = [](const Node &n) -> Types {
      TensorType w = argType(n, 0), ix = argType(n, 1);
      if (w.rank() != 2) nodeError(n, "embedding(): 'weight' must be 2-D, got " + w.str());
      requireIndex(n, ix, "embedding()");
      Shape out = ix.shape;
      out.push_back(w.shape[1]);
      return {{w.dtype, out}};
    };
    setEval(d, [](const Node &n, const RefArgs &a) {
      const RefTensor &w = *a.at(0), &ix = *a.at(1);
      int64_t D = w.shape[1];
      RefTensor out(n.types[0].dtype, n.types[0].shape);
      for (int64_t k = 0; k < ix.numel(); ++k) {
        int64_t row = checkedIndex(n, ix.data[k], w.shape[0], 0);
        for (int64_t j = 0; j < D; ++j) out.data[k * D + j] = w.data[row * D + j];
      }
      return out;
    });
  }
}

} // namespace ops
} // namespace aotc
