//===- Sort.cpp - sort, topk ------------------------------------------------------===//
//
// Sorting along a dim (Sorting.cpp, TensorCompare.cpp), NaN ordered as torch: after every
// number ascending, before every number descending. Ties keep their input order (a stable
// sort; torch's CPU sort is stable too, and `stable` may only ask for it). topk gives the k
// largest (or smallest) in that order, so its indices are those of the first k of a stable
// descending (ascending) sort. Both decompose (lib/Decompose/DecomposeSort.cpp) into each
// element's rank — how many elements go before it, one fused O(n^2) reduction along the dim —
// and scatters to the ranks, so the values' gradient goes to the element each came from (torch's
// value_selecting_reduction_backward) and indices have none.
//===----------------------------------------------------------------------===//
#include "Ops.h"

#include <algorithm>
#include <functional>
#include <numeric>

namespace aotc {
namespace ops {
namespace {

using Types = std::vector<TensorType>;

/// a goes strictly before b in a sort (`descending` or not), NaN being the largest value.
bool before(double a, double b, bool descending) {
  if (std::isnan(a) || std::isnan(b)) return descending ? std::isnan(a) && !std::isnan(b) : std::isnan(b) && !std::isnan(a);
  return descending ? a > b : a < b;
}

/// The stable order of one slice: positions, sorted.
std::vector<int64_t> order(const RefTensor &x, const Along &al, int64_t o, int64_t i, bool descending) {
  std::vector<int64_t> p(al.len);
  std::iota(p.begin(), p.end(), 0);
  std::stable_sort(p.begin(), p.end(), [&](int64_t a, int64_t b) {
    return before(x.data[al.at(o, a, i)], x.data[al.at(o, b, i)], descending);
  });
  return p;
}

/// (values, indices) of the first `k` of each sorted slice along `dim`.
std::vector<RefTensor> sortedRef(const Node &n, const RefTensor &x, int64_t dim, int64_t k, bool descending) {
  RefTensor vals(n.types[0].dtype, n.types[0].shape), idx(DType::I64, n.types[1].shape);
  Along al(x.shape, dim), ol(vals.shape, dim);
  for (int64_t o = 0; o < al.outer; ++o)
    for (int64_t i = 0; i < al.inner; ++i) {
      std::vector<int64_t> p = order(x, al, o, i, descending);
      for (int64_t j = 0; j < k; ++j) {
        vals.data[ol.at(o, j, i)] = x.data[al.at(o, p[j], i)];
        idx.data[ol.at(o, j, i)] = (double)p[j];
      }
    }
  return {vals, idx};
}

int64_t sortDim(const Node &n, size_t arg) {
  TensorType t = argType(n, 0);
  return t.rank() == 0 ? 0 : wrapDimOrError(n, n.intArg(arg), t.rank());
}

/// kthvalue / median / nanmedian along `dim` (the reduced dim kept as size 1 in `at`'s
/// layout): per slice, the position of the wanted element of the stable ascending order
/// (NaN last). `which(order, slice)` picks it.
std::vector<RefTensor> orderStatRef(const Node &n, const RefTensor &x, int64_t dim,
                                    const std::function<int64_t(const std::vector<int64_t> &, const std::vector<double> &)> &which) {
  RefTensor vals(n.types[0].dtype, n.types[0].shape), idx(DType::I64, n.types.size() > 1 ? n.types[1].shape : Shape{});
  Shape xs = x.shape.empty() ? Shape{1} : x.shape;
  RefTensor xx = x;
  xx.shape = xs;
  Along al(xs, dim);
  for (int64_t o = 0; o < al.outer; ++o)
    for (int64_t i = 0; i < al.inner; ++i) {
      std::vector<int64_t> p = order(xx, al, o, i, false);
      std::vector<double> v(al.len);
      for (int64_t j = 0; j < al.len; ++j) v[j] = xx.data[al.at(o, j, i)];
      int64_t pick = which(p, v);
      vals.data[o * al.inner + i] = v[pick];
      if (n.types.size() > 1) idx.data[o * al.inner + i] = (double)pick;
    }
  if (n.types.size() == 1) return {vals};
  return {vals, idx};
}

/// The reduced shape of an order statistic over `dim` (keepdim or not).
Shape statShape(const Shape &s, int64_t dim, bool keepdim) {
  if (s.empty()) return s;
  Shape r = s;
  if (keepdim) r[dim] = 1;
  else r.erase(r.begin() + dim);
  return r;
}

int64_t lowerMedian(const std::vector<int64_t> &p, const std::vector<double> &v) {
  for (size_t j = 0; j < v.size(); ++j)
    if (std::isnan(v[j])) return (int64_t)j; // median: the first NaN
  return p[(p.size() - 1) / 2];
}

int64_t nanLowerMedian(const std::vector<int64_t> &p, const std::vector<double> &v) {
  int64_t cnt = 0;
  for (double a : v) cnt += !std::isnan(a);
  return p[cnt == 0 ? 0 : (cnt - 1) / 2];
}

} // namespace

void registerSortOps(OpRegistry &r) {
  // sort(self, dim, descending) and sort.stable(self, *, stable, dim, descending): always stable.
  for (bool stable : {false, true}) {
    OpDef &d = stable ? r.add("sort.stable(Tensor self, *, bool? stable, int dim=-1, bool descending=False) -> "
                              "(Tensor values, Tensor indices)",
                              OpCategory::Composite)
                      : r.add("sort(Tensor self, int dim=-1, bool descending=False) -> (Tensor values, Tensor indices)",
                              OpCategory::Composite);
    const size_t dimArg = stable ? 2 : 1;
    d.infer = [dimArg](const Node &n) -> Types {
      TensorType t = argType(n, 0);
      sortDim(n, dimArg);
      return {t, {DType::I64, t.shape}};
    };
    d.eval = [dimArg](const Node &n, const RefArgs &a, const std::vector<std::vector<const RefTensor *>> &) {
      const RefTensor &x = *a.at(0);
      int64_t dim = sortDim(n, dimArg);
      return sortedRef(n, x, dim, x.shape.empty() ? 1 : x.shape[dim], n.boolArg(dimArg + 1));
    };
  }
  {
    OpDef &d = r.add("topk(Tensor self, SymInt k, int dim=-1, bool largest=True, bool sorted=True) -> "
                     "(Tensor values, Tensor indices)",
                     OpCategory::Composite);
    d.infer = [](const Node &n) -> Types {
      TensorType t = argType(n, 0);
      int64_t dim = sortDim(n, 2), k = n.intArg(1), len = t.rank() == 0 ? 1 : t.shape[dim];
      if (k < 0 || k > len) nodeError(n, "topk: selected index k out of range (k = " + std::to_string(k) +
                                             ", size " + std::to_string(len) + " along dim " + std::to_string(dim) + ")");
      Shape s = t.shape;
      if (!s.empty()) s[dim] = k;
      return {{t.dtype, s}, {DType::I64, s}};
    };
    d.eval = [](const Node &n, const RefArgs &a, const std::vector<std::vector<const RefTensor *>> &) {
      const RefTensor &x = *a.at(0);
      return sortedRef(n, x, sortDim(n, 2), n.intArg(1), n.boolArg(3));
    };
  }
  {
    // kthvalue(self, k, dim, keepdim): the k-th smallest (1-based; NaN largest) and its index.
    OpDef &d = r.add("kthvalue(Tensor self, SymInt k, int dim=-1, bool keepdim=False) -> (Tensor values, Tensor indices)",
                     OpCategory::Composite);
    d.infer = [](const Node &n) -> Types {
      TensorType t = argType(n, 0);
      int64_t dim = sortDim(n, 2), k = n.intArg(1), len = t.rank() == 0 ? 1 : t.shape[dim];
      if (k < 1 || k > len)
        nodeError(n, "kthvalue(): selected number k out of range for dimension " + std::to_string(dim));
      Shape s = statShape(t.shape, dim, n.boolArg(3));
      return {{t.dtype, s}, {DType::I64, s}};
    };
    d.eval = [](const Node &n, const RefArgs &a, const std::vector<std::vector<const RefTensor *>> &) {
      int64_t k = n.intArg(1);
      return orderStatRef(n, *a.at(0), sortDim(n, 2),
                          [k](const std::vector<int64_t> &p, const std::vector<double> &) { return p[k - 1]; });
    };
  }
  // median / nanmedian (Sorting.cpp median_with_indices_impl): the lower median; median gives
  // NaN (the first NaN's index) for a slice holding one, nanmedian ignores NaNs.
  for (bool nan : {false, true}) {
    std::string name = nan ? "nanmedian" : "median";
    OpDef &full = r.add(name + "(Tensor self) -> Tensor", OpCategory::Composite);
    full.infer = [name](const Node &n) -> Types {
      TensorType t = argType(n, 0);
      if (t.numel() == 0) nodeError(n, name + "() input tensor cannot be empty");
      return {{t.dtype, {}}};
    };
    full.eval = [nan](const Node &n, const RefArgs &a, const std::vector<std::vector<const RefTensor *>> &) {
      RefTensor x = *a.at(0);
      x.shape = {x.numel()};
      return orderStatRef(n, x, 0, nan ? nanLowerMedian : lowerMedian);
    };
    OpDef &d = r.add(name + ".dim(Tensor self, int dim, bool keepdim=False) -> (Tensor values, Tensor indices)",
                     OpCategory::Composite);
    d.infer = [name](const Node &n) -> Types {
      TensorType t = argType(n, 0);
      int64_t dim = sortDim(n, 1);
      if (t.rank() > 0 && t.shape[dim] == 0)
        nodeError(n, name + "() cannot compute median for an empty dimension " + std::to_string(dim));
      Shape s = statShape(t.shape, dim, n.boolArg(2));
      return {{t.dtype, s}, {DType::I64, s}};
    };
    d.eval = [nan](const Node &n, const RefArgs &a, const std::vector<std::vector<const RefTensor *>> &) {
      return orderStatRef(n, *a.at(0), sortDim(n, 1), nan ? nanLowerMedian : lowerMedian);
    };
  }
}

} // namespace ops
} // namespace aotc
