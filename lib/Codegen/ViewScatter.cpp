//===- ViewScatter.cpp - slice_scatter / select_scatter as pointwise values ---===//
//
// This file implements viewScatterValue (FusionInternal.h). functionalize turns
// a write through a slice/select view into
//   out = slice_scatter(self, src, dim, start, end, step)   (select_scatter(self, src, dim, index)),
// i.e. out[i] = src[(i_dim - start) / step] where i_dim lies on the slice
// (i_dim == index for select) and self[i] elsewhere
// (aten/src/ATen/native/TensorShape.cpp slice_scatter / select_scatter; the
// ranges are clamped like slice.Tensor / select.int, lib/IR/ops/Scatter.cpp).
// Codegen builds that as one expression over out's index space, so it inlines
// and fuses like any pointwise op:
//   inside = start <= i_dim <= last  [&& (i_dim - start) % step == 0]
//   out    = inside ? src[..., q, ...] : self[...]
// where i_dim is an Index expression (an affine function of the loop variables
// that views rewrite like addresses) and q = inside ? (i_dim - start) / step : 0
// enters src's loads as an unchecked data-dependent term: it is clamped, so the
// src load stays in bounds on the elements where self is taken (both sides of
// the select are evaluated).
//===----------------------------------------------------------------------===//
#include "FusionInternal.h"

#include "aotc/Diagnostics.h"
#include "aotc/OpRegistry.h"


namespace aotc::fusion {

namespace {

ERef i64c(const Dim &v) { return mkSizeConst(DType::I64, v); }

/// i_dim of an index space of rank `rank`.
ERef indexOf(int rank, int64_t dim) {
  EAddr a;
  a.coef.assign(rank, Dim(0));
  a.coef[dim] = 1;
  return mkIndex(std::move(a));
}

} // namespace

int64_t wrapDimOrError(const Node &n, int64_t d, int64_t rank) {
  auto w = wrapDim(d, rank);
  if (!w) nodeError(n, "codegen: dimension out of range");
  return *w;
}

Dim selectIndex(const Node &n, size_t arg, const Dim &size, const char *what) {
  Dim idx = dimArg(n, arg);
  if (idx.symbolic()) return idx; // in range (the shape function assumes so)
  if (size.symbolic()) return idx.ref() < 0 ? size + idx : idx; // x[:, -1] of a run-time size
  int64_t i = idx.ref() < 0 ? idx.ref() + size.ref() : idx.ref();
  if (i < 0 || i >= size.ref()) nodeError(n, std::string("codegen: ") + what + " index out of range");
  return i;
}

ERef viewScatterValue(const Node &n, const ERef &self, const ERef &src, const Dims &shape) {
  int r = (int)shape.size();
  if (r == 0) nodeError(n, "codegen: " + n.target + " of a 0-dim tensor");
  DType t = n.type().dtype;
  ERef s = mkCast(src, t), x = mkCast(self, t);
  if (n.target == "aten.select_scatter.default") {
    int64_t dim = wrapDimOrError(n, n.intArg(2), r);
    Dim idx = selectIndex(n, 3, shape[dim], "select_scatter");
    // src var k is out var k (k < dim) or k + 1.
    std::vector<int> pos(r - 1);
    for (int k = 0; k < r - 1; ++k) pos[k] = k < dim ? k : k + 1;
    ERef sv = applyIndexMap(s, IndexMap::select(pos, r));
    ERef inside = mkOp(ScalarOp::Eq, DType::Bool, {indexOf(r, dim), i64c(idx)});
    return mkOp(ScalarOp::Select, t, {inside, sv, x});
  }
  AOTC_ASSERT(n.target == "aten.slice_scatter.default", "codegen: not a view scatter: " + n.target);
  const SliceRange sr = sliceRange(n, refShape(shape), 2, "slice_scatter");
  const int64_t dim = sr.dim, step = sr.step;
  Dim start = sr.start, len = sr.len;
  const Dim size = shape[dim];
  if (n.runtimeSized()) {
    // The slice is in range (the shape function assumes so): src's size is its length.
    len = dimsOf(n.tensorArg(1)->type())[dim];
    start = n.isNoneArg(3) ? Dim(0) : dimArg(n, 3);
    if (!start.symbolic() && start.ref() < 0) start = size + start;
  }
  if (len.is(0)) return x;
  if (start.is(0) && step == 1 && len == size) return s; // the slice is all of self
  Dim last = start + (len - 1) * step;
  ERef i = indexOf(r, dim);
  ERef rel = mkOp(ScalarOp::Sub, DType::I64, {i, i64c(start)});
  ERef inside = mkOp(ScalarOp::And, DType::Bool,
                     {mkOp(ScalarOp::Ge, DType::Bool, {i, i64c(start)}),
                      mkOp(ScalarOp::Le, DType::Bool, {i, i64c(last)})});
  ERef q = rel;
  if (step > 1) {
    q = mkOp(ScalarOp::Div, DType::I64, {rel, i64c(step)});
    ERef onStep = mkOp(ScalarOp::Eq, DType::Bool, {mkOp(ScalarOp::Mul, DType::I64, {q, i64c(step)}), rel});
    inside = mkOp(ScalarOp::And, DType::Bool, {inside, onStep});
  }
  ERef qc = mkOp(ScalarOp::Select, DType::I64, {inside, q, i64c(0)});
  // src var dim = qc (data-dependent, unchecked: 0 <= qc < len); the other vars are out's.
  ERef sv = mapAddrs(s, [&](EAddr &a) {
    Dim c = a.coef[dim];
    a.coef[dim] = 0;
    if (!c.is(0)) {
      EDyn d;
      d.value = qc;
      d.stride = c;
      d.bound = len;
      d.error = -1;
      a.dyn.push_back(d);
    }
    return true;
  });
  return mkOp(ScalarOp::Select, t, {inside, sv, x});
}

} // namespace aotc::fusion
