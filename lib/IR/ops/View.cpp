//===- View.cpp - View and layout ops (view, permute, expand, slice, ...) -----===//
//
// Shape rules follow the meta functions in torch/_refs/__init__.py and
// aten/src/ATen/InferSize.h (view's -1), ExpandUtils.h (expand),
// TensorShape.cpp (slice's clamping, select's bounds, split, cat). The
// reference evaluator materializes every view as a fresh row-major copy.
//===----------------------------------------------------------------------===//
#include "Ops.h"

#include <functional>
#include <limits>

namespace aotc {
namespace ops {
namespace {

using Types = std::vector<TensorType>;

/// Result of shape `out` whose element at multi-index i is in.data[src(i)].
RefTensor gatherBy(const TensorType &out, const RefTensor &in,
                   const std::function<int64_t(std::vector<int64_t> &)> &src) {
  RefTensor r(out.dtype, out.shape);
  for (int64_t k = 0; k < r.numel(); ++k) {
    std::vector<int64_t> idx = unravel(k, out.shape);
    r.data[k] = in.data[src(idx)];
  }
  return r;
}

/// The pieces of a split of `t` along `dim` with the given sizes.
std::vector<TensorType> splitTypes(const TensorType &t, int64_t dim, const std::vector<int64_t> &sizes) {
  std::vector<TensorType> out;
  for (int64_t s : sizes) {
    TensorType p = t;
    p.shape[dim] = s;
    out.push_back(p);
  }
  return out;
}

/// The evaluator of the splits (split.Tensor, split_with_sizes, chunk: dim is argument 2, already
/// checked): consecutive ranges along dim, of the sizes of the node's result types.
std::vector<RefTensor> splitEval(const Node &n, const RefArgs &a, const std::vector<std::vector<const RefTensor *>> &) {
  const RefTensor &in = *a.at(0);
  int64_t dim = *wrapDim(n.intArg(2), (int64_t)in.shape.size());
  std::vector<RefTensor> out;
  int64_t off = 0;
  for (const TensorType &t : n.types) {
    out.push_back(gatherBy(t, in, [&](std::vector<int64_t> &o) {
      o[dim] += off;
      return ravel(o, in.shape);
    }));
    off += t.shape[dim];
  }
  return out;
}

/// at::infer_size: resolves one -1 and checks the element count.
Shape inferViewShape(const Node &n, const Shape &in, std::vector<int64_t> size) {
  int64_t numel = numelOf(in), known = 1, infer = -1;
  for (size_t i = 0; i < size.size(); ++i) {
    if (size[i] == -1) {
      if (infer >= 0) nodeError(n, "only one dimension can be inferred");
      infer = (int64_t)i;
    } else if (size[i] < 0) {
      nodeError(n, "invalid shape dimension " + std::to_string(size[i]));
    } else {
      known *= size[i];
    }
  }
  if (infer >= 0 && known != 0 && numel % known == 0) size[infer] = numel / known;
  if (numelOf(size) != numel || (infer >= 0 && known == 0))
    nodeError(n, "shape '" + shapeStr(n.intListArg(1)) + "' is invalid for input of size " + std::to_string(numel));
  return size;
}

RefTensor reshapeEval(const Node &n, const RefArgs &a) {
  RefTensor r = *a.at(0);
  r.shape = n.types[0].shape;
  r.dtype = n.types[0].dtype;
  return r;
}

Shape permuteShape(const Node &n, const Shape &in, const std::vector<int64_t> &dims) {
  if (dims.size() != in.size())
    nodeError(n, "permute: number of dims (" + std::to_string(dims.size()) + ") does not match the rank " +
                     std::to_string(in.size()));
  std::vector<bool> seen(in.size(), false);
  Shape out;
  for (int64_t d : dims) {
    int64_t w = wrapDimOrError(n, d, (int64_t)in.size());
    if (seen[w]) nodeError(n, "permute: repeated dim " + std::to_string(w));
    seen[w] = true;
    out.push_back(in[w]);
  }
  return out;
}

RefTensor permuteEval(const Node &n, const RefTensor &in, std::vector<int64_t> perm) {
  int64_t rank = (int64_t)in.shape.size();
  for (auto &p : perm) p = *wrapDim(p, rank);
  std::vector<int64_t> inIdx(rank);
  return gatherBy(n.types[0], in, [&](std::vector<int64_t> &o) {
    for (int64_t d = 0; d < rank; ++d) inIdx[perm[d]] = o[d];
    return ravel(inIdx, in.shape);
  });
}

SliceRange sliceRange(const Node &n) { return aotc::sliceRange(n, argType(n, 0).shape, 1, "slice()"); }

/// as_strided(self, size = arg 1, stride = arg 2, offset) over self's dense row-major layout.
TensorType asStridedType(const Node &n, int64_t off) {
  TensorType t = argType(n, 0);
  const std::vector<int64_t> &size = n.intListArg(1), &stride = n.intListArg(2);
  if (size.size() != stride.size())
    nodeError(n, "mismatch in length of strides and shape (" + std::to_string(size.size()) + " vs " +
                     std::to_string(stride.size()) + ")");
  int64_t last = off;
  bool empty = false;
  for (size_t i = 0; i < size.size(); ++i) {
    if (size[i] < 0) nodeError(n, "as_strided: negative size " + std::to_string(size[i]));
    if (stride[i] < 0) nodeError(n, "as_strided: negative strides are not supported");
    empty |= size[i] == 0;
    if (size[i] > 0) last += (size[i] - 1) * stride[i];
  }
  if (off < 0) nodeError(n, "Tensor: invalid storage offset " + std::to_string(off));
  if (!empty && last >= t.numel())
    nodeError(n, "setStorage: sizes " + shapeStr(size) + ", strides " + shapeStr(stride) + ", storage offset " +
                     std::to_string(off) + " read element " + std::to_string(last) + " of the input's " +
                     std::to_string(t.numel()) + " (aotc's as_strided views the input's own dense layout)");
  return {t.dtype, size};
}

RefTensor asStridedRef(const Node &n, const RefTensor &in, int64_t off) {
  const std::vector<int64_t> &stride = n.intListArg(2);
  return gatherBy(n.types[0], in, [&](std::vector<int64_t> &o) {
    int64_t k = off;
    for (size_t i = 0; i < o.size(); ++i) k += o[i] * stride[i];
    return k;
  });
}

} // namespace

void registerViewOps(OpRegistry &r) {
  for (const char *s : {"view(Tensor(a) self, SymInt[] size) -> Tensor(a)",
                        "_unsafe_view(Tensor self, SymInt[] size) -> Tensor",
                        "reshape(Tensor(a) self, SymInt[] shape) -> Tensor(a)"}) {
    OpDef &d = r.add(s, OpCategory::View);
    const std::string name = d.schema.name;
    d.primitive = name != "reshape";   // reshape decomposes to view (or clone + view)
    d.writeThrough = name != "_unsafe_view";
    d.infer = [](const Node &n) -> Types {
      TensorType t = argType(n, 0);
      return {{t.dtype, inferViewShape(n, t.shape, n.intListArg(1))}};
    };
    setEval(d, reshapeEval);
  }
  {
    OpDef &d = r.add("alias(Tensor(a) self) -> Tensor(a)", OpCategory::View);
    d.writeThrough = true;
    d.infer = [](const Node &n) -> Types { return {argType(n, 0)}; };
    setEval(d, reshapeEval);
  }
  {
    // _local_scalar_dense (Tensor.item()): the single element of self, as a Python number in
    // torch; a 0-d tensor of self's dtype in aotc (capture reads the symbol as a tensor
    // argument), no gradient. Decomposed to detach(view(self, [])).
    OpDef &d = r.add("_local_scalar_dense(Tensor self) -> Scalar", OpCategory::Composite);
    d.infer = [](const Node &n) -> Types {
      TensorType t = argType(n, 0);
      if (t.numel() != 1)
        nodeError(n, "a Tensor with " + std::to_string(t.numel()) + " elements cannot be converted to Scalar");
      return {{t.dtype, {}}};
    };
    d.nonDifferentiable = true;
    setEval(d, reshapeEval);
  }
  {
    // detach: alias's value, and no gradient flows through it (lowered as alias).
    OpDef &d = r.add("detach(Tensor(a) self) -> Tensor(a)", OpCategory::View);
    d.writeThrough = true;
    d.infer = [](const Node &n) -> Types { return {argType(n, 0)}; };
    d.nonDifferentiable = true;
    setEval(d, reshapeEval);
  }
  {
    OpDef &d = r.add("permute(Tensor(a) self, int[] dims) -> Tensor(a)", OpCategory::View);
    d.primitive = true;
    d.writeThrough = true;
    d.infer = [](const Node &n) -> Types {
      TensorType t = argType(n, 0);
      return {{t.dtype, permuteShape(n, t.shape, n.intListArg(1))}};
    };
    setEval(d, [](const Node &n, const RefArgs &a) { return permuteEval(n, *a.at(0), n.intListArg(1)); });
  }
  {
    // t(): rank <= 2, transposes dims 0 and 1.
    OpDef &d = r.add("t(Tensor(a) self) -> Tensor(a)", OpCategory::View);
    d.writeThrough = true;
    d.infer = [](const Node &n) -> Types {
      TensorType t = argType(n, 0);
      if (t.rank() > 2) nodeError(n, "t() expects a tensor with <= 2 dimensions, but self is " +
                                         std::to_string(t.rank()) + "D");
      if (t.rank() == 2) std::swap(t.shape[0], t.shape[1]);
      return {t};
    };
    setEval(d, [](const Node &n, const RefArgs &a) {
      if (a.at(0)->shape.size() < 2) return reshapeEval(n, a);
      return permuteEval(n, *a.at(0), {1, 0});
    });
  }
  {
    OpDef &d = r.add("transpose.int(Tensor(a) self, int dim0, int dim1) -> Tensor(a)", OpCategory::View);
    d.writeThrough = true;
    d.infer = [](const Node &n) -> Types {
      TensorType t = argType(n, 0);
      int64_t a = wrapDimOrError(n, n.intArg(1), t.rank()), b = wrapDimOrError(n, n.intArg(2), t.rank());
      if (t.rank() > 0) std::swap(t.shape[a], t.shape[b]);
      return {t};
    };
    setEval(d, [](const Node &n, const RefArgs &a) {
      int64_t rank = (int64_t)a.at(0)->shape.size();
      if (rank == 0) return reshapeEval(n, a);
      std::vector<int64_t> perm(rank);
      for (int64_t i = 0; i < rank; ++i) perm[i] = i;
      std::swap(perm[*wrapDim(n.intArg(1), rank)], perm[*wrapDim(n.intArg(2), rank)]);
      return permuteEval(n, *a.at(0), perm);
    });
  }
  {
    // expand: sizes may add leading dims; -1 keeps a dim; only size-1 dims grow.
    OpDef &d = r.add("expand(Tensor(a) self, SymInt[] size, *, bool implicit=False) -> Tensor(a)", OpCategory::View);
    d.primitive = true;
    d.infer = [](const Node &n) -> Types {
      TensorType t = argType(n, 0);
      const auto &size = n.intListArg(1);
      if (size.size() < t.shape.size())
        nodeError(n, "expand: the number of sizes provided (" + std::to_string(size.size()) +
                         ") must be greater or equal to the number of dimensions in the tensor (" +
                         std::to_string(t.rank()) + ")");
      size_t lead = size.size() - t.shape.size();
      Shape out(size.size());
      for (size_t i = 0; i < size.size(); ++i) {
        if (i < lead) {
          if (size[i] < 0) nodeError(n, "expand: -1 is not allowed in a leading, non-existing dimension");
          out[i] = size[i];
          continue;
        }
        int64_t cur = t.shape[i - lead];
        int64_t want = size[i] == -1 ? cur : size[i];
        if (cur != want && cur != 1)
          nodeError(n, "expand: the expanded size of the tensor (" + std::to_string(want) +
                           ") must match the existing size (" + std::to_string(cur) + ") at non-singleton dimension " +
                           std::to_string(i) + ".  Target sizes: " + shapeStr(size) + ".  Tensor sizes: " +
                           shapeStr(t.shape));
        out[i] = want;
      }
      return {{t.dtype, out}};
    };
    setEval(d, [](const Node &n, const RefArgs &a) {
      const RefTensor &in = *a.at(0);
      RefTensor o(n.types[0].dtype, n.types[0].shape);
      auto map = broadcastIndexMap(in.shape, o.shape);
      for (int64_t k = 0; k < o.numel(); ++k) o.data[k] = in.data[map[k]];
      return o;
    });
  }
  {
    OpDef &d = r.add("unsqueeze(Tensor(a) self, int dim) -> Tensor(a)", OpCategory::View);
    d.primitive = true;
    d.writeThrough = true;
    d.infer = [](const Node &n) -> Types {
      TensorType t = argType(n, 0);
      int64_t dim = wrapDimOrError(n, n.intArg(1), t.rank() + 1);
      t.shape.insert(t.shape.begin() + dim, 1);
      return {t};
    };
    setEval(d, reshapeEval);
  }
  {
    OpDef &d = r.add("squeeze.dim(Tensor(a) self, int dim) -> Tensor(a)", OpCategory::View);
    d.writeThrough = true;
    d.infer = [](const Node &n) -> Types {
      TensorType t = argType(n, 0);
      int64_t dim = wrapDimOrError(n, n.intArg(1), t.rank());
      if (t.rank() > 0 && t.shape[dim] == 1) t.shape.erase(t.shape.begin() + dim);
      return {t};
    };
    setEval(d, reshapeEval);
  }
  {
    OpDef &d = r.add("squeeze.dims(Tensor(a) self, int[] dim) -> Tensor(a)", OpCategory::View);
    d.primitive = true;
    d.writeThrough = true;
    d.infer = [](const Node &n) -> Types {
      TensorType t = argType(n, 0);
      std::vector<bool> mask(t.rank(), false);
      for (int64_t dd : n.intListArg(1)) {
        int64_t w = wrapDimOrError(n, dd, t.rank());
        if (t.rank() > 0) mask[w] = true;
      }
      Shape out;
      for (int64_t i = 0; i < t.rank(); ++i)
        if (!(mask[i] && t.shape[i] == 1)) out.push_back(t.shape[i]);
      return {{t.dtype, out}};
    };
    setEval(d, reshapeEval);
  }
  {
    OpDef &d = r.add("slice.Tensor(Tensor(a) self, int dim=0, SymInt? start=None, SymInt? end=None, SymInt step=1) -> Tensor(a)",
                     OpCategory::View);
    d.primitive = true;
    d.writeThrough = true;
    d.infer = [](const Node &n) -> Types {
      TensorType t = argType(n, 0);
      SliceRange s = sliceRange(n);
      t.shape[s.dim] = s.len;
      return {t};
    };
    setEval(d, [](const Node &n, const RefArgs &a) {
      const RefTensor &in = *a.at(0);
      SliceRange s = sliceRange(n);
      return gatherBy(n.types[0], in, [&](std::vector<int64_t> &o) {
        o[s.dim] = s.start + o[s.dim] * s.step;
        return ravel(o, in.shape);
      });
    });
  }
  {
    // as_strided over the input's own dense row-major layout (a functional graph has no other
    // storage: the view the exporter takes of a fresh tensor); every element read must lie in it.
    OpDef &d = r.add("as_strided(Tensor(a) self, SymInt[] size, SymInt[] stride, SymInt? storage_offset=None) -> "
                     "Tensor(a)",
                     OpCategory::View);
    d.primitive = true;
    d.infer = [](const Node &n) -> Types { return {asStridedType(n, n.isNoneArg(3) ? 0 : n.intArg(3))}; };
    setEval(d, [](const Node &n, const RefArgs &a) { return asStridedRef(n, *a.at(0), n.isNoneArg(3) ? 0 : n.intArg(3)); });
  }
  {
    // unfold(self, dimension, size, step): every window of `size` elements `step` apart along
    // `dimension`, as a new last dim (torch: [.., (n - size) / step + 1 at dimension, .., size]);
    // a 0-d self is [size] with size <= 1. Decompose: as_strided over self's dense layout.
    OpDef &d = r.add("unfold(Tensor(a) self, int dimension, int size, int step) -> Tensor(a)", OpCategory::Composite);
    d.infer = [](const Node &n) -> Types {
      TensorType t = argType(n, 0);
      int64_t size = n.intArg(2), step = n.intArg(3);
      if (step <= 0) nodeError(n, "unfold(): step is " + std::to_string(step) + " but must be > 0");
      if (size < 0) nodeError(n, "unfold(): size is " + std::to_string(size) + " but must be >= 0");
      if (t.rank() == 0) {
        if (size > 1) nodeError(n, "unfold(): maximum size for tensor at dimension 0 is 1 but size is " + std::to_string(size));
        return {{t.dtype, {size}}};
      }
      int64_t dim = wrapDimOrError(n, n.intArg(1), t.rank());
      if (size > t.shape[dim])
        nodeError(n, "unfold(): maximum size for tensor at dimension " + std::to_string(dim) + " is " +
                         std::to_string(t.shape[dim]) + " but size is " + std::to_string(size));
      Shape s = t.shape;
      s[dim] = (t.shape[dim] - size) / step + 1;
      s.push_back(size);
      return {{t.dtype, s}};
    };
    setEval(d, [](const Node &n, const RefArgs &a) {
      const RefTensor &x = *a.at(0);
      const Shape &os = n.types[0].shape;
      RefTensor out(n.types[0].dtype, os);
      if (x.shape.empty()) {
        for (int64_t k = 0; k < out.numel(); ++k) out.data[k] = x.data[0];
        return out;
      }
      int64_t dim = wrapDimOrError(n, n.intArg(1), (int64_t)x.shape.size()), step = n.intArg(3);
      std::vector<int64_t> idx(os.size());
      for (int64_t k = 0; k < out.numel(); ++k) {
        int64_t rem = k;
        for (size_t d = os.size(); d-- > 0;) idx[d] = rem % os[d], rem /= os[d];
        std::vector<int64_t> src(idx.begin(), idx.end() - 1);
        src[dim] = idx[dim] * step + idx.back();
        out.data[k] = x.data[x.offset(src)];
      }
      return out;
    });
  }
  {
    // _reshape_alias (older exports' reshape of a contiguous tensor): as_strided at offset 0;
    // decompose makes it a view (or, strides not contiguous, an as_strided).
    OpDef &d = r.add("_reshape_alias(Tensor(a) self, SymInt[] size, SymInt[] stride) -> Tensor(a)", OpCategory::Composite);
    d.infer = [](const Node &n) -> Types { return {asStridedType(n, 0)}; };
    setEval(d, [](const Node &n, const RefArgs &a) { return asStridedRef(n, *a.at(0), 0); });
  }
  {
    OpDef &d = r.add("select.int(Tensor(a) self, int dim, SymInt index) -> Tensor(a)", OpCategory::View);
    d.primitive = true;
    d.writeThrough = true;
    d.infer = [](const Node &n) -> Types {
      TensorType t = argType(n, 0);
      if (t.rank() == 0) nodeError(n, "select() cannot be applied to a 0-dim tensor");
      int64_t dim = wrapDimOrError(n, n.intArg(1), t.rank());
      int64_t idx = n.intArg(2), size = t.shape[dim];
      if (idx < -size || idx >= size)
        nodeError(n, "select(): index " + std::to_string(idx) + " out of range for tensor of size " +
                         shapeStr(t.shape) + " at dimension " + std::to_string(dim));
      t.shape.erase(t.shape.begin() + dim);
      return {t};
    };
    setEval(d, [](const Node &n, const RefArgs &a) {
      const RefTensor &in = *a.at(0);
      int64_t dim = *wrapDim(n.intArg(1), (int64_t)in.shape.size());
      int64_t idx = n.intArg(2);
      if (idx < 0) idx += in.shape[dim];
      return gatherBy(n.types[0], in, [&](std::vector<int64_t> &o) {
        o.insert(o.begin() + dim, idx);
        return ravel(o, in.shape);
      });
    });
  }
  {
    // split.Tensor: chunks of split_size along dim, the last possibly smaller.
    OpDef &d = r.add("split.Tensor(Tensor(a -> *) self, SymInt split_size, int dim=0) -> Tensor(a)[]", OpCategory::View);
    d.infer = [](const Node &n) -> Types {
      TensorType t = argType(n, 0);
      if (t.rank() == 0) nodeError(n, "split expects at least a 1-dimensional tensor");
      int64_t dim = wrapDimOrError(n, n.intArg(2), t.rank());
      int64_t sz = n.intArg(1), size = t.shape[dim];
      if (sz < 0 || (sz == 0 && size != 0)) nodeError(n, "split_size can only be 0 if dimension size is 0");
      int64_t chunks = sz == 0 ? 1 : std::max<int64_t>((size + sz - 1) / sz, 1);
      std::vector<int64_t> sizes;
      for (int64_t c = 0; c < chunks; ++c) sizes.push_back(std::min(sz, size - c * sz));
      return splitTypes(t, dim, sizes);
    };
    d.eval = splitEval;
  }
  {
    // split_with_sizes: the sizes must cover the dim exactly (TensorShape.cpp split_with_sizes).
    OpDef &d = r.add("split_with_sizes(Tensor(a -> *) self, SymInt[] split_sizes, int dim=0) -> Tensor(a)[]",
                     OpCategory::View);
    d.infer = [](const Node &n) -> Types {
      TensorType t = argType(n, 0);
      if (t.rank() == 0) nodeError(n, "split_with_sizes expects at least a 1-dimensional tensor");
      int64_t dim = wrapDimOrError(n, n.intArg(2), t.rank());
      std::vector<int64_t> sizes = n.intListArg(1);
      int64_t total = 0;
      for (int64_t s : sizes) {
        if (s < 0)
          nodeError(n, "split_with_sizes expects split_sizes have only non-negative entries, but got split_sizes=" +
                           shapeStr(sizes));
        total += s;
      }
      if (total != t.shape[dim])
        nodeError(n, "split_with_sizes expects split_sizes to sum exactly to " + std::to_string(t.shape[dim]) +
                         " (input tensor's size at dimension " + std::to_string(dim) + "), but got split_sizes=" +
                         shapeStr(sizes));
      if (sizes.empty()) nodeError(n, "split_with_sizes with no sizes gives no tensors (an empty list result)");
      return splitTypes(t, dim, sizes);
    };
    d.eval = splitEval;
  }
  {
    // chunk: split_size = ceil(size / chunks), so there may be fewer than `chunks` pieces; an empty
    // dim gives `chunks` empty pieces (TensorShape.cpp chunk).
    OpDef &d = r.add("chunk(Tensor(a -> *) self, int chunks, int dim=0) -> Tensor(a)[]", OpCategory::View);
    d.infer = [](const Node &n) -> Types {
      TensorType t = argType(n, 0);
      if (t.rank() == 0) nodeError(n, "chunk expects at least a 1-dimensional tensor");
      int64_t chunks = n.intArg(1);
      if (chunks <= 0) nodeError(n, "chunk expects `chunks` to be greater than 0, got: " + std::to_string(chunks));
      int64_t dim = wrapDimOrError(n, n.intArg(2), t.rank());
      int64_t size = t.shape[dim], step = (size + chunks - 1) / chunks;
      std::vector<int64_t> sizes;
      if (size == 0) sizes.assign(chunks, 0);
      for (int64_t off = 0; off < size; off += step) sizes.push_back(std::min(step, size - off));
      return splitTypes(t, dim, sizes);
    };
    d.eval = splitEval;
  }
  {
    // unbind: one select per index along dim.
    OpDef &d = r.add("unbind.int(Tensor(a -> *) self, int dim=0) -> Tensor(a)[]", OpCategory::View);
    d.infer = [](const Node &n) -> Types {
      TensorType t = argType(n, 0);
      if (t.rank() == 0) nodeError(n, "Dimension specified as 0 but tensor has no dimensions");
      int64_t dim = wrapDimOrError(n, n.intArg(1), t.rank());
      if (t.shape[dim] == 0)
        nodeError(n, "unbind over a dimension of size 0 gives no tensors (an empty list result is not supported)");
      TensorType p = t;
      p.shape.erase(p.shape.begin() + dim);
      return Types(t.shape[dim], p);
    };
    d.eval = [](const Node &n, const RefArgs &a, const std::vector<std::vector<const RefTensor *>> &) {
      const RefTensor &in = *a.at(0);
      int64_t dim = *wrapDim(n.intArg(1), (int64_t)in.shape.size());
      std::vector<RefTensor> out;
      for (size_t c = 0; c < n.types.size(); ++c)
        out.push_back(gatherBy(n.types[c], in, [&](std::vector<int64_t> &o) {
          o.insert(o.begin() + dim, (int64_t)c);
          return ravel(o, in.shape);
        }));
      return out;
    };
  }
  {
    // cat: same rank, equal sizes except at dim; dtype = result_type of the inputs.
    // Legacy: 1-d empty tensors are skipped (TensorShape.cpp should_skip).
    OpDef &d = r.add("cat(Tensor[] tensors, int dim=0) -> Tensor", OpCategory::Other);
    d.infer = [](const Node &n) -> Types {
      const auto &ts = std::get<std::vector<Node *>>(n.args.at(0));
      if (ts.empty()) nodeError(n, "torch.cat(): expected a non-empty list of Tensors");
      std::optional<TensorType> ref;
      DType dt = ts[0]->type().dtype;
      for (Node *x : ts) {
        const TensorType &t = x->type();
        dt = promoteTypes(dt, t.dtype);
        if (t.shape == Shape{0}) continue;
        if (!ref) {
          ref = t;
          if (t.rank() == 0) nodeError(n, "zero-dimensional tensor cannot be concatenated");
          continue;
        }
        int64_t dim = wrapDimOrError(n, n.intArg(1), ref->rank());
        if (t.rank() != ref->rank())
          nodeError(n, "tensors must have same number of dimensions: got " + std::to_string(ref->rank()) +
                           " and " + std::to_string(t.rank()));
        for (int64_t i = 0; i < t.rank(); ++i)
          if (i != dim && t.shape[i] != ref->shape[i])
            nodeError(n, "sizes of tensors must match except in dimension " + std::to_string(dim));
        ref->shape[dim] += t.shape[dim];
      }
      if (!ref) return {{dt, {0}}};
      wrapDimOrError(n, n.intArg(1), ref->rank());
      return {{dt, ref->shape}};
    };
    d.eval = [](const Node &n, const RefArgs &, const std::vector<std::vector<const RefTensor *>> &lists) {
      const TensorType &ot = n.types[0];
      RefTensor out(ot.dtype, ot.shape);
      if (ot.shape == Shape{0}) return std::vector<RefTensor>{out};
      int64_t dim = *wrapDim(n.intArg(1), (int64_t)ot.shape.size());
      int64_t base = 0;
      for (const RefTensor *x : lists.at(0)) {
        if (x->shape == Shape{0}) continue;
        for (int64_t k = 0; k < x->numel(); ++k) {
          std::vector<int64_t> idx = unravel(k, x->shape);
          idx[dim] += base;
          out.data[ravel(idx, ot.shape)] = castValue(ot.dtype, x->data[k]);
        }
        base += x->shape[dim];
      }
      return std::vector<RefTensor>{out};
    };
  }
}

} // namespace ops

SliceRange sliceRange(const Node &n, const Shape &shape, size_t dimArg, const std::string &opName) {
  if (shape.empty()) nodeError(n, opName + " cannot be applied to a 0-dim tensor");
  int64_t dim = ops::wrapDimOrError(n, n.intArg(dimArg), (int64_t)shape.size());
  int64_t size = shape[dim];
  int64_t start = n.isNoneArg(dimArg + 1) ? 0 : n.intArg(dimArg + 1);
  int64_t end = n.isNoneArg(dimArg + 2) ? std::numeric_limits<int64_t>::max() : n.intArg(dimArg + 2);
  int64_t step = n.intArg(dimArg + 3);
  if (step <= 0) nodeError(n, "slice step must be positive");
  if (start < 0) start += size;
  if (end < 0) end += size;
  start = std::clamp<int64_t>(start, 0, size);
  end = std::clamp<int64_t>(end, start, size);
  return {dim, start, (end - start + step - 1) / step, step};
}

} // namespace aotc
