//===- DecomposeIndex.cpp - Advanced indexing to index_select / scatter_add ---===//
//
// Decompose rules of index.Tensor and index_put (before autodiff, so their gradients are those
// of index_select, scatter_add, where, views). Semantics: TensorAdvancedIndexing.cpp and
// torch/_refs index; the result shape is OpRegistry's (lib/IR/ops/Index.cpp advIndex).
//
// The indexed dims (the non-None entries) are brought together: where they are not adjacent,
// self is permuted so that they come first, in order, followed by the others (torch puts the
// broadcast index shape first in that case). They are then viewed as one dim of size
// prod(sizes), and the index tensors become one linear index
//   L = sum_j wrap(idx_j) * stride_j   (broadcast; wrap(i) = i < 0 ? i + size : i),
// where an index outside [-size, size) is replaced by prod(sizes), so that the index_select or
// scatter_add that uses L reports it at run time as out of range.
//===----------------------------------------------------------------------===//
#include "Rules.h"

#include <algorithm>
#include <numeric>

namespace aotc::rules {

using namespace rewrite;

namespace {

struct Linearized {
  Node *self = nullptr;   ///< self permuted (if needed) and viewed: [pre..., M, post...].
  int64_t pos = 0;        ///< Position of the merged dim M.
  Node *index = nullptr;  ///< i64 linear index, shape = broadcast shape of the indices.
  Shape pre, post;        ///< The dims before and after M in `self`.
  Shape bshape;           ///< The broadcast index shape.
  std::vector<int64_t> perm; ///< The permutation applied to self (empty: none).
  Shape permuted;         ///< self's shape after the permutation.
};

Linearized linearize(Emitter &e, Node &n) {
  Node *self = n.tensorArg(0);
  const Shape &ss = self->type().shape;
  const auto &ix = std::get<std::vector<Node *>>(n.args.at(1));
  std::vector<int64_t> dims;
  for (size_t d = 0; d < ix.size(); ++d)
    if (ix[d]) dims.push_back((int64_t)d);
  bool adjacent = true;
  for (size_t k = 1; k < dims.size(); ++k) adjacent &= dims[k] == dims[k - 1] + 1;
  Linearized L;
  int64_t rank = (int64_t)ss.size();
  Node *x = self;
  Shape xs = ss;
  if (!adjacent) {
    std::vector<int64_t> perm = dims;
    for (int64_t d = 0; d < rank; ++d)
      if (std::find(dims.begin(), dims.end(), d) == dims.end()) perm.push_back(d);
    x = e.permute(x, perm);
    xs = x->type().shape;
    L.perm = perm;
  }
  L.permuted = xs;
  int64_t first = adjacent ? dims.front() : 0, count = (int64_t)dims.size();
  L.pre.assign(xs.begin(), xs.begin() + first);
  L.post.assign(xs.begin() + first + count, xs.end());
  // Over run-time sizes (an indexed batch dim) the sizes, the merged size and the strides are
  // expressions: the views' sizes and the scalar arguments below carry them.
  const std::vector<Size> xsz = sizesOf(x->type()), ssz = sizesOf(self->type());
  Size merged = 1;
  for (int64_t k = 0; k < count; ++k) merged = merged * xsz[first + k];
  std::vector<Size> vs(xsz.begin(), xsz.begin() + first);
  vs.push_back(merged);
  vs.insert(vs.end(), xsz.begin() + first + count, xsz.end());
  L.self = e.viewTo(x, vs);
  L.pos = first;
  // The linear index.
  auto scalar = [](size_t i, const Size &v) { return SymArgs{symArg(i, {v})}; };
  Node *lin = nullptr;
  Size stride = 1;
  for (int64_t k = count - 1; k >= 0; --k) {
    Size size = ssz[dims[k]], negSize = Size(0) - size;
    Node *i = e.toDtype(ix[dims[k]], DType::I64);
    Node *neg = e.call("aten.lt.Scalar", {i, int64_t(0)});
    Node *wrapped = e.call("aten.where.self", {neg, e.call("aten.add.Tensor", {i, size.v}, {}, scalar(1, size)), i});
    Node *ok = e.call("aten.logical_and.default", {e.call("aten.ge.Scalar", {i, negSize.v}, {}, scalar(1, negSize)),
                                                   e.call("aten.lt.Scalar", {i, size.v}, {}, scalar(1, size))});
    Node *term = stride.v == 1 && stride.text().empty()
                     ? wrapped
                     : e.call("aten.mul.Tensor", {wrapped, stride.v}, {}, scalar(1, stride));
    Node *outside = e.call("aten.scalar_tensor.default", {merged.v}, {{"dtype", DTypeLit{DType::I64}}}, scalar(0, merged));
    term = e.call("aten.where.self", {ok, term, outside});
    lin = lin ? e.add(lin, term) : term;
    stride = stride * size;
  }
  L.bshape = lin->type().shape;
  L.index = lin;
  return L;
}

/// [pre..., B..., post...] from [pre..., numel(B), post...].
Shape withBroadcast(const Linearized &L) {
  Shape s = L.pre;
  s.insert(s.end(), L.bshape.begin(), L.bshape.end());
  s.insert(s.end(), L.post.begin(), L.post.end());
  return s;
}

} // namespace

/// index.Tensor(self, indices) -> index_select(self viewed, pos, L.view(-1)).view(result).
Vals index(Emitter &e, Node &n) {
  Linearized L = linearize(e, n);
  Node *flat = e.viewTo(L.index, {product(sizesOf(L.index->type()))});
  Node *picked = e.call("aten.index_select.default", {L.self, L.pos, flat});
  return {e.view(picked, n.types[0].shape, n.types[0].sym)};
}

/// index_put(self, indices, values, accumulate): values broadcast to self[indices]'s shape and
/// viewed as [pre..., numel(B), post...]; along the merged dim with L expanded, scatter_add
/// (accumulate) or scatter.src (a position written twice keeps the last value in index order,
/// as torch's CPU kernel, which documents duplicates without accumulate as undefined; max_unpool
/// with repeated indices relies on it).
Vals indexPut(Emitter &e, Node &n) {
  const auto &ix = std::get<std::vector<Node *>>(n.args.at(1));
  if (ix.size() == 1 && ix[0] && (ix[0]->type().dtype == DType::Bool || ix[0]->type().dtype == DType::U8)) {
    // x[mask] = v with v the same for every masked element (the registry checks that):
    // where(mask viewed [mask..., 1...], v, x); accumulate: x + where(mask, v, 0).
    Node *x = n.tensorArg(0), *v = n.tensorArg(2);
    const Shape &xs = x->type().shape, &ms = ix[0]->type().shape;
    Shape mv = ms;
    mv.resize(xs.size(), 1);
    Node *mask = e.view(e.toDtype(ix[0], DType::Bool), mv);
    Shape rest(xs.begin() + ms.size(), xs.end());
    const Shape &vs = v->type().shape;
    if (vs.size() > rest.size()) v = e.view(v, Shape(vs.end() - rest.size(), vs.end())); // drop leading 1s
    if (n.boolArg(3))
      return {e.add(x, e.call("aten.where.self", {mask, v, e.scalarTensor(0.0, x->type().dtype)}))};
    return {e.call("aten.where.self", {mask, v, x})};
  }
  Linearized L = linearize(e, n);
  Node *values = n.tensorArg(2);
  Shape target = withBroadcast(L);
  // self[indices]'s shape in the permuted frame equals target (broadcast part in place of M).
  if (values->type().shape != target) values = e.call("aten.expand.default", {values, target});
  Shape flatShape = L.pre;
  flatShape.push_back(numelOf(L.bshape));
  flatShape.insert(flatShape.end(), L.post.begin(), L.post.end());
  Node *vflat = e.view(values, flatShape);
  Shape ixShape(flatShape.size(), 1);
  ixShape[L.pos] = numelOf(L.bshape);
  Node *ixv = e.call("aten.expand.default", {e.view(L.index, ixShape), flatShape});
  Node *result;
  if (n.boolArg(3)) {
    result = e.call("aten.scatter_add.default", {L.self, L.pos, ixv, vflat});
  } else {
    result = e.call("aten.scatter.src", {L.self, L.pos, ixv, vflat});
  }
  result = e.view(result, L.permuted);
  if (!L.perm.empty()) {
    std::vector<int64_t> inv(L.perm.size());
    for (size_t k = 0; k < L.perm.size(); ++k) inv[L.perm[k]] = (int64_t)k;
    result = e.permute(result, inv);
  }
  return {result};
}

} // namespace aotc::rules
