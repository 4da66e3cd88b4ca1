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

/// Advanced indexing (index.Tensor / index_put; TensorAdvancedIndexing.cpp, torch/_meta_registrations
/// index meta): the indexed dims (non-None entries), their broadcast index shape, and the result
/// shape: the broadcast shape replaces the indexed dims where they are adjacent, else goes first.
struct AdvIndex {
  std::vector<int64_t> dims; ///< Indexed dims of self, ascending.
  Shape bshape;              ///< Broadcast shape of the index tensors.
  bool adjacent = true;
  Shape result;
};

AdvIndex advIndex(const Node &n, const TensorType &self, const std::vector<Node *> &ix) {
  if ((int64_t)ix.size() > self.rank())
    nodeError(n, "too many indices for tensor of dimension " + std::to_string(self.rank()) + " (got " +
                       std::to_string(ix.size()) + ")");
  AdvIndex a;
  Shape b;
  bool first = true;
  for (size_t d = 0; d < ix.size(); ++d) {
    if (!ix[d]) continue;
    const TensorType &t = ix[d]->type();
    if (t.dtype == DType::Bool || t.dtype == DType::U8)
      nodeError(n, "indexing with a bool or uint8 mask gives a data-dependent shape; aotc needs static shapes "
                   "(use torch.where or masked_fill instead)");
    if (t.dtype != DType::I64 && t.dtype != DType::I32)
      nodeError(n, std::string("tensors used as indices must be long, int, byte or bool tensors, got ") +
                       dtypeTorchName(t.dtype));
    auto bb = first ? std::optional<Shape>(t.shape) : broadcastShapes(b, t.shape);
    if (!bb) nodeError(n, "shape mismatch: indexing tensors could not be broadcast together with shapes " +
                              shapeStr(b) + ", " + shapeStr(t.shape));
    b = *bb;
    first = false;
    a.dims.push_back((int64_t)d);
  }
  if (a.dims.empty()) nodeError(n, "index: at least one index tensor must be given (all entries are None)");
  for (size_t k = 1; k < a.dims.size(); ++k) a.adjacent &= a.dims[k] == a.dims[k - 1] + 1;
  a.bshape = b;
  Shape rest;
  for (int64_t d = 0; d < self.rank(); ++d)
    if (std::find(a.dims.begin(), a.dims.end(), d) == a.dims.end()) rest.push_back(self.shape[d]);
  if (a.adjacent) {
    a.result.assign(self.shape.begin(), self.shape.begin() + a.dims.front());
    a.result.insert(a.result.end(), b.begin(), b.end());
    a.result.insert(a.result.end(), self.shape.begin() + a.dims.back() + 1, self.shape.end());
  } else {
    a.result = b;
    a.result.insert(a.result.end(), rest.begin(), rest.end());
  }
  return a;
}

/// For each element of the indexed result (row-major over a.result), the flat offset into self;
/// index values are checked (negative ones wrap).
std::vector<int64_t> advOffsets(const Node &n, const AdvIndex &a, const Shape &self,
                                const std::vector<const RefTensor *> &ix) {
  std::vector<int64_t> off(numelOf(a.result));
  int64_t nb = (int64_t)a.bshape.size(), first = a.dims.front();
  std::vector<std::vector<int64_t>> maps;
  for (int64_t d : a.dims) maps.push_back(broadcastIndexMap(ix[d]->shape, a.bshape));
  for (int64_t k = 0; k < (int64_t)off.size(); ++k) {
    std::vector<int64_t> o = unravel(k, a.result);
    // Split the result index into the broadcast part and the kept dims.
    std::vector<int64_t> bpos, kept;
    if (a.adjacent) {
      bpos.assign(o.begin() + first, o.begin() + first + nb);
      kept.assign(o.begin(), o.begin() + first);
      kept.insert(kept.end(), o.begin() + first + nb, o.end());
    } else {
      bpos.assign(o.begin(), o.begin() + nb);
      kept.assign(o.begin() + nb, o.end());
    }
    int64_t bflat = bpos.empty() ? 0 : ravel(bpos, a.bshape);
    std::vector<int64_t> src(self.size());
    size_t kk = 0;
    for (int64_t d = 0; d < (int64_t)self.size(); ++d) {
      auto it = std::find(a.dims.begin(), a.dims.end(), d);
      if (it == a.dims.end()) {
        src[d] = kept[kk++];
        continue;
      }
      size_t j = it - a.dims.begin();
      src[d] = checkedIndex(n, ix[d]->data[maps[j][bflat]], self[d], d);
    }
    off[k] = ravel(src, self);
  }
  return off;
}

/// index_put's indices when they are one bool (or uint8) mask: that mask's node, else nullptr.
const Node *boolMaskIndex(const Node &n) {
  const auto &ix = std::get<std::vector<Node *>>(n.args.at(1));
  if (ix.size() != 1 || !ix[0]) return nullptr;
  DType dt = ix[0]->type().dtype;
  return dt == DType::Bool || dt == DType::U8 ? ix[0] : nullptr;
}

} // namespace

void registerIndexOps(OpRegistry &r) {
  {
    OpDef &d = r.add("gather(Tensor self, int dim, Tensor index, *, bool sparse_grad=False) -> Tensor", OpCategory::Index);
    d.primitive = true;
    d.recomputable = true; // torch's default_recomputable_ops lists gather
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
  // The scatter family (TensorAdvancedIndexing.cpp): scatter_add, scatter (overwrite; the last
  // write along dim wins, as torch's CPU loop), scatter_reduce (sum, prod, mean, amax, amin,
  // include_self) and aotc::scatter_combine (scatter_reduce's prod / amax / amin with self
  // included: what lower makes of scatter_reduce). All primitives but scatter_reduce, which keeps
  // torch's gradient rule and is lowered after autodiff.
  struct ScatterDef { const char *schema; bool primitive; };
  for (ScatterDef sd :
       {ScatterDef{"scatter_add(Tensor self, int dim, Tensor index, Tensor src) -> Tensor", true},
        ScatterDef{"scatter.src(Tensor self, int dim, Tensor index, Tensor src) -> Tensor", true},
        ScatterDef{"scatter.value(Tensor self, int dim, Tensor index, Scalar value) -> Tensor", true},
        ScatterDef{"scatter_reduce.two(Tensor self, int dim, Tensor index, Tensor src, str reduce, *, "
                   "bool include_self=True) -> Tensor", false},
        ScatterDef{"aotc::scatter_combine(Tensor self, int dim, Tensor index, Tensor src, str reduce) -> Tensor", true}}) {
    OpDef &d = r.add(sd.schema, sd.primitive ? OpCategory::Index : OpCategory::Composite);
    d.primitive = sd.primitive;
    d.indexArgs = {2};
    const std::string name = d.target().substr(d.target().find('.') + 1, d.target().rfind('.') - d.target().find('.') - 1);
    const bool hasSrc = d.target() != "aten.scatter.value";
    const bool reduces = d.target() == "aten.scatter_reduce.two" || d.target() == "aotc.scatter_combine.default";
    if (d.target() == "aotc.scatter_combine.default") d.nonDifferentiable = true; // emitted after autodiff only
    d.infer = [name, hasSrc, reduces](const Node &n) -> Types {
      TensorType s = argType(n, 0), ix = argType(n, 2);
      TensorType src = hasSrc ? argType(n, 3) : ix;
      const std::string what = name + "()";
      requireIndex(n, ix, what.c_str(), true);
      int64_t dim = wrapDimOrError(n, n.intArg(1), s.rank());
      if (hasSrc && src.dtype != s.dtype) nodeError(n, what + ": expected self and src to have the same dtype");
      if (reduces) {
        const std::string &red = std::get<std::string>(n.args.at(4));
        bool ok = red == "sum" || red == "prod" || red == "mean" || red == "amax" || red == "amin";
        if (!ok) nodeError(n, what + ": reduce argument must be either sum, prod, mean, amax or amin, got " + red);
        if (s.dtype == DType::Bool) nodeError(n, what + ": bool tensors are not supported (as torch's CPU kernel)");
        if (red == "mean" && !isFloating(s.dtype))
          nodeError(n, what + ": reduce 'mean' on integer tensors is not supported yet (a floor division, whose "
                              "division by zero must raise)");
      }
      if (ix.numel() != 0) {
        if (ensure1(ix) != ensure1(s) || (hasSrc && ensure1(src) != ensure1(s)))
          nodeError(n, what + ": index, self and src must have the same number of dimensions");
        for (int64_t i = 0; i < ensure1(s); ++i)
          if ((i != dim && sizeAt(ix, i) > sizeAt(s, i)) || (hasSrc && sizeAt(ix, i) > sizeAt(src, i)))
            nodeError(n, what + ": expected index " + shapeStr(ix.shape) + " to be smaller than self " +
                             shapeStr(s.shape) + " apart from dimension " + std::to_string(dim) +
                             (hasSrc ? " and to be smaller size than src " + shapeStr(src.shape) : std::string()));
      }
      return {s};
    };
    setEval(d, [hasSrc, reduces](const Node &n, const RefArgs &a) {
      const RefTensor &s = *a.at(0), &ix = *a.at(2);
      const RefTensor *src = hasSrc ? a.at(3) : nullptr;
      std::string red = n.target == "aten.scatter_add.default" ? "sum" : reduces ? std::get<std::string>(n.args[4]) : "set";
      bool includeSelf = n.target != "aten.scatter_reduce.two" || n.boolArg(5);
      RefTensor out = s;
      std::vector<double> count(s.numel(), includeSelf ? 1.0 : 0.0);
      std::vector<bool> touched(s.numel(), false);
      int64_t rank = (int64_t)s.shape.size();
      int64_t dim = rank == 0 ? 0 : *wrapDim(n.intArg(1), rank);
      for (int64_t k = 0; k < ix.numel(); ++k) {
        std::vector<int64_t> idx = unravel(k, ix.shape);
        double v = src ? src->data[rank == 0 ? 0 : ravel(idx, src->shape)] : n.scalarArg(3);
        int64_t t;
        if (rank == 0) {
          checkedIndex(n, ix.data[k], 1, 0);
          t = 0;
        } else {
          idx[dim] = checkedIndex(n, ix.data[k], s.shape[dim], dim);
          t = ravel(idx, s.shape);
        }
        double &o = out.data[t];
        if (!includeSelf && !touched[t]) // the first value replaces self's
          o = red == "prod" ? 1.0 : red == "amax" ? -INFINITY : red == "amin" ? INFINITY : 0.0;
        touched[t] = true;
        count[t] += 1;
        if (red == "set") o = v;
        else if (red == "sum" || red == "mean") o += v;
        else if (red == "prod") o *= v;
        else if (red == "amax") o = std::isnan(o) || std::isnan(v) ? NAN : std::max(o, v);
        else o = std::isnan(o) || std::isnan(v) ? NAN : std::min(o, v);
      }
      if (red == "mean")
        for (int64_t t = 0; t < out.numel(); ++t) out.data[t] /= std::max(count[t], 1.0);
      for (double &v : out.data) v = castValue(out.dtype, v);
      return out;
    });
  }
  {
    OpDef &d = r.add("index_select(Tensor self, int dim, Tensor index) -> Tensor", OpCategory::Index);
    d.primitive = true;
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
  {
    // embedding_dense_backward(grad_output [*, D], indices [*], num_weights, padding_idx,
    // scale_grad_by_freq) -> [num_weights, D]: each row of grad_output summed into the row its
    // index names; positions whose index is padding_idx add nothing; scale_grad_by_freq divides
    // by the index's count (Embedding.cpp). A composite (decompose: scatter_add).
    OpDef &d = r.add("embedding_dense_backward(Tensor grad_output, Tensor indices, SymInt num_weights, "
                     "SymInt padding_idx, bool scale_grad_by_freq) -> Tensor",
                     OpCategory::Composite);
    d.indexArgs = {1};
    d.infer = [](const Node &n) -> Types {
      TensorType g = argType(n, 0), ix = argType(n, 1);
      requireIndex(n, ix, "embedding_dense_backward()");
      requireFloating(n, g.dtype, "embedding_dense_backward(): grad_output");
      Shape want = ix.shape;
      want.push_back(g.rank() ? g.shape.back() : 0);
      if (g.rank() == 0 || g.shape != want)
        nodeError(n, "embedding_dense_backward(): grad_output " + g.str() + " must be the indices' shape " +
                         shapeStr(ix.shape) + " plus the embedding dim");
      if (n.intArg(2) < 0) nodeError(n, "embedding_dense_backward(): num_weights must be >= 0");
      return {{g.dtype, {n.intArg(2), g.shape.back()}}};
    };
    setEval(d, [](const Node &n, const RefArgs &a) {
      const RefTensor &g = *a.at(0), &ix = *a.at(1);
      int64_t D = g.shape.back(), W = n.intArg(2), pad = n.intArg(3);
      RefTensor out(n.types[0].dtype, n.types[0].shape, 0.0);
      std::vector<double> count(W, 0.0);
      for (int64_t k = 0; k < ix.numel(); ++k) count[checkedIndex(n, ix.data[k], W, 0)] += 1;
      for (int64_t k = 0; k < ix.numel(); ++k) {
        int64_t row = checkedIndex(n, ix.data[k], W, 0);
        if (row == pad) continue;
        double scale = n.boolArg(4) ? 1.0 / count[row] : 1.0;
        for (int64_t j = 0; j < D; ++j) out.data[row * D + j] += g.data[k * D + j] * scale;
      }
      return out;
    });
  }
  {
    // masked_scatter(self, mask, source): self (broadcast with mask) where mask is false; where it
    // is true, source's elements in row-major order (TensorAdvancedIndexing.cpp). A composite.
    OpDef &d = r.add("masked_scatter(Tensor self, Tensor mask, Tensor source) -> Tensor", OpCategory::Composite);
    d.infer = [](const Node &n) -> Types {
      TensorType s = argType(n, 0), m = argType(n, 1), src = argType(n, 2);
      if (m.dtype != DType::Bool) nodeError(n, "masked_scatter_ only supports boolean masks, but got mask with dtype " +
                                                   std::string(dtypeTorchName(m.dtype)));
      if (src.dtype != s.dtype)
        nodeError(n, std::string("masked_scatter: expected self and source to have same dtypes but got ") +
                         dtypeTorchName(s.dtype) + " and " + dtypeTorchName(src.dtype));
      return {{s.dtype, broadcastArgs(n, {0, 1})}};
    };
    setEval(d, [](const Node &n, const RefArgs &a) {
      const RefTensor &src = *a.at(2);
      int64_t k = 0;
      return mapArgs(n, a, {0, 1}, [&](const double *x) {
        if (x[1] == 0) return x[0];
        if (k >= src.numel())
          nodeError(n, "masked_scatter: expected source to have at least as many elements as ones in mask (" +
                           std::to_string(src.numel()) + ")");
        return src.data[k++];
      });
    });
  }
  {
    // index.Tensor: advanced indexing by integer tensors (None entries keep their dim).
    OpDef &d = r.add("index.Tensor(Tensor self, Tensor?[] indices) -> Tensor", OpCategory::Index);
    d.recomputable = true; // in torch's default_recomputable_ops (decomposed before the partitioner)
    d.indexArgs = {1};
    d.infer = [](const Node &n) -> Types {
      TensorType s = argType(n, 0);
      const auto &ix = std::get<std::vector<Node *>>(n.args.at(1));
      return {{s.dtype, advIndex(n, s, ix).result}};
    };
    d.eval = [](const Node &n, const RefArgs &a, const std::vector<std::vector<const RefTensor *>> &lists) {
      const RefTensor &s = *a.at(0);
      AdvIndex ai = advIndex(n, argType(n, 0), std::get<std::vector<Node *>>(n.args.at(1)));
      std::vector<int64_t> off = advOffsets(n, ai, s.shape, lists.at(1));
      RefTensor out(n.types[0].dtype, n.types[0].shape);
      for (size_t k = 0; k < off.size(); ++k) out.data[k] = s.data[off[k]];
      return std::vector<RefTensor>{out};
    };
  }
  {
    // index_put: self with self[indices] = values (accumulate: +=). values broadcast to the shape of
    // self[indices]. Without accumulate, duplicate indices are undefined behaviour in torch; aotc
    // then sums the values written to one position (docs/stage-decompose.md, index_put).
    OpDef &d = r.add("index_put(Tensor self, Tensor?[] indices, Tensor values, bool accumulate=False) -> Tensor",
                     OpCategory::Index);
    d.indexArgs = {1};
    d.infer = [](const Node &n) -> Types {
      TensorType s = argType(n, 0), v = argType(n, 2);
      if (const Node *m = boolMaskIndex(n)) { // x[mask] = v with v not depending on the count
        if (v.dtype != s.dtype) nodeError(n, "Index put requires the source and destination dtypes match");
        const Shape &ms = m->type().shape;
        if ((int64_t)ms.size() > s.rank() || !std::equal(ms.begin(), ms.end(), s.shape.begin()))
          nodeError(n, "The shape of the mask " + shapeStr(ms) + " at index 0 does not match the shape of the "
                       "indexed tensor " + shapeStr(s.shape));
        Shape one{1};
        one.insert(one.end(), s.shape.begin() + ms.size(), s.shape.end());
        auto b = broadcastShapes(one, v.shape);
        if (!b || *b != one)
          nodeError(n, "index_put with a bool mask: values of shape " + shapeStr(v.shape) +
                           " must broadcast to every masked element's " + shapeStr(Shape(one.begin() + 1, one.end())) +
                           " (values whose shape depends on the number of True elements are not supported)");
        return {s};
      }
      AdvIndex ai = advIndex(n, s, std::get<std::vector<Node *>>(n.args.at(1)));
      if (v.dtype != s.dtype)
        nodeError(n, std::string("Index put requires the source and destination dtypes match, got ") +
                         dtypeTorchName(s.dtype) + " for the destination and " + dtypeTorchName(v.dtype) +
                         " for the source.");
      auto b = broadcastShapes(ai.result, v.shape);
      if (!b || *b != ai.result)
        nodeError(n, "shape mismatch: value tensor of shape " + shapeStr(v.shape) +
                         " cannot be broadcast to indexing result of shape " + shapeStr(ai.result));
      return {s};
    };
    d.eval = [](const Node &n, const RefArgs &a, const std::vector<std::vector<const RefTensor *>> &lists) {
      const RefTensor &s = *a.at(0), &v = *a.at(2);
      if (boolMaskIndex(n)) {
        const RefTensor &m = *lists.at(1).at(0);
        int64_t inner = s.numel() / std::max<int64_t>(m.numel(), 1);
        Shape rest(s.shape.begin() + m.shape.size(), s.shape.end());
        std::vector<int64_t> vmap = broadcastIndexMap(v.shape, rest);
        RefTensor out = s;
        for (int64_t k = 0; k < m.numel(); ++k)
          if (m.data[k] != 0)
            for (int64_t i = 0; i < inner; ++i)
              out.data[k * inner + i] = (n.boolArg(3) ? out.data[k * inner + i] : 0.0) + v.data[vmap[i]];
        for (double &x : out.data) x = castValue(out.dtype, x);
        return std::vector<RefTensor>{out};
      }
      AdvIndex ai = advIndex(n, argType(n, 0), std::get<std::vector<Node *>>(n.args.at(1)));
      std::vector<int64_t> off = advOffsets(n, ai, s.shape, lists.at(1));
      std::vector<int64_t> vmap = broadcastIndexMap(v.shape, ai.result);
      RefTensor out = s;
      bool acc = n.boolArg(3);
      std::vector<bool> hit(s.numel(), false);
      for (size_t k = 0; k < off.size(); ++k) {
        double &dst = out.data[off[k]];
        dst = (acc || hit[off[k]]) ? dst + v.data[vmap[k]] : v.data[vmap[k]];
        hit[off[k]] = true;
      }
      for (double &x : out.data) x = castValue(out.dtype, x);
      return std::vector<RefTensor>{out};
    };
  }
}

} // namespace ops
} // namespace aotc
