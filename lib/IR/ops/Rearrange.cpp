//===- Rearrange.cpp - flip, repeat, reflection and replication padding -------------===//
//
// Composites that move elements without computing on them; decompose rewrites each into
// index_select by a computed index (flip, padding) or view / expand (repeat), so their
// gradients are the primitives' (index_select's is an index_add: a padded element's
// gradient sums over every output it was copied to, as torch's *_pad_backward).
//  * flip(self, dims): TensorTransformations.cpp; dims wrap and must be unique;
//  * repeat(self, repeats): TensorShape.cpp; len(repeats) >= self.dim(), leading dims added;
//  * reflection_pad{1,2,3}d / replication_pad{1,2,3}d(self, padding): ReflectionPad.cpp,
//    ReplicationPadding.cpp; padding is (left, right[, top, bottom[, front, back]]) for the
//    last dims from the last one backward; a batch dim is optional; reflection needs each pad
//    below the dim's size; negative pads crop; every output size must stay positive.
//===----------------------------------------------------------------------===//
#include "Ops.h"

namespace aotc {
namespace ops {
namespace {

using Types = std::vector<TensorType>;

/// The flipped dims of a flip node, wrapped and checked for repeats.
std::vector<bool> flipMask(const Node &n, int64_t rank) {
  std::vector<bool> mask(std::max<int64_t>(rank, 1), false);
  for (int64_t d : n.intListArg(1)) {
    int64_t w = wrapDimOrError(n, d, rank);
    if (mask[w]) nodeError(n, "dim " + std::to_string(w) + " appears multiple times in the list of dims");
    mask[w] = true;
  }
  return mask;
}

Shape repeatShape(const Node &n) {
  const Shape &s = argType(n, 0).shape;
  const std::vector<int64_t> &rep = n.intListArg(1);
  if (rep.size() < s.size())
    nodeError(n, "Number of dimensions of repeat dims can not be smaller than number of dimensions of tensor");
  Shape out(rep.size());
  size_t lead = rep.size() - s.size();
  for (size_t d = 0; d < rep.size(); ++d) {
    if (rep[d] < 0) nodeError(n, "Trying to create tensor with negative dimension " + std::to_string(rep[d]));
    out[d] = rep[d] * (d < lead ? 1 : s[d - lead]);
  }
  return out;
}

/// Checks a padding node (reflection or replication, `dims` padded dims) and gives its shape.
Shape padShape(const Node &n, int64_t dims, bool reflect) {
  const Shape &s = argType(n, 0).shape;
  const std::vector<int64_t> &pad = n.intListArg(1);
  const std::string name = n.target.substr(5, n.target.find('.', 5) - 5); // aten.<name>.default
  if ((int64_t)pad.size() != 2 * dims)
    nodeError(n, name + ": padding size is expected to be " + std::to_string(2 * dims) + ", but got: " +
                     std::to_string(pad.size()));
  int64_t rank = (int64_t)s.size();
  if (rank != dims + 1 && rank != dims + 2)
    nodeError(n, name + ": expected " + std::to_string(dims + 1) + "D or " + std::to_string(dims + 2) +
                     "D input (an optional batch dim), but got " + shapeStr(s));
  Shape out = s;
  for (int64_t k = 0; k < dims; ++k) {
    int64_t d = rank - 1 - k, lo = pad[2 * k], hi = pad[2 * k + 1];
    if (reflect && (lo >= s[d] || hi >= s[d]))
      nodeError(n, name + ": padding size should be less than the corresponding input dimension, but got: "
                          "padding (" + std::to_string(lo) + ", " + std::to_string(hi) + ") at dimension " +
                          std::to_string(d) + " of input " + shapeStr(s));
    out[d] = s[d] + lo + hi;
    if (out[d] < 1 || s[d] == 0)
      nodeError(n, name + ": input " + shapeStr(s) + " is too small for padding " + shapeStr(pad) +
                       ": output size " + std::to_string(out[d]) + " at dimension " + std::to_string(d));
  }
  return out;
}

/// The source index of output position `o` (already shifted by the left pad) along a padded
/// dim of size `len`: mirrored without repeating the edge (reflection) or clamped (replication).
int64_t padSourceIndex(int64_t o, int64_t len, bool reflect) {
  if (reflect) return (len - 1) - std::llabs((len - 1) - std::llabs(o));
  return std::min(std::max<int64_t>(o, 0), len - 1);
}

} // namespace

void registerRearrangeOps(OpRegistry &r) {
  {
    OpDef &d = r.add("flip(Tensor self, int[] dims) -> Tensor", OpCategory::Composite);
    d.infer = [](const Node &n) -> Types {
      TensorType t = argType(n, 0);
      flipMask(n, t.rank());
      return {t};
    };
    setEval(d, [](const Node &n, const RefArgs &a) {
      const RefTensor &x = *a.at(0);
      std::vector<bool> mask = flipMask(n, (int64_t)x.shape.size());
      RefTensor out = x;
      for (int64_t k = 0; k < x.numel(); ++k) {
        std::vector<int64_t> idx = unravel(k, x.shape);
        for (size_t dd = 0; dd < idx.size(); ++dd)
          if (mask[dd]) idx[dd] = x.shape[dd] - 1 - idx[dd];
        out.data[k] = x.data[ravel(idx, x.shape)];
      }
      return out;
    });
  }
  {
    OpDef &d = r.add("repeat(Tensor self, SymInt[] repeats) -> Tensor", OpCategory::Composite);
    d.infer = [](const Node &n) -> Types { return {{argType(n, 0).dtype, repeatShape(n)}}; };
    setEval(d, [](const Node &n, const RefArgs &a) {
      const RefTensor &x = *a.at(0);
      RefTensor out(n.types[0].dtype, n.types[0].shape);
      size_t lead = out.shape.size() - x.shape.size();
      for (int64_t k = 0; k < out.numel(); ++k) {
        std::vector<int64_t> idx = unravel(k, out.shape), src;
        for (size_t dd = lead; dd < idx.size(); ++dd) src.push_back(idx[dd] % x.shape[dd - lead]);
        out.data[k] = x.data[ravel(src, x.shape)];
      }
      return out;
    });
  }
  struct Pad { const char *schema; int64_t dims; bool reflect; };
  for (Pad p : {Pad{"reflection_pad1d(Tensor self, SymInt[2] padding) -> Tensor", 1, true},
                Pad{"reflection_pad2d(Tensor self, SymInt[4] padding) -> Tensor", 2, true},
                Pad{"reflection_pad3d(Tensor self, SymInt[6] padding) -> Tensor", 3, true},
                Pad{"replication_pad1d(Tensor self, SymInt[2] padding) -> Tensor", 1, false},
                Pad{"replication_pad2d(Tensor self, SymInt[4] padding) -> Tensor", 2, false},
                Pad{"replication_pad3d(Tensor self, SymInt[6] padding) -> Tensor", 3, false}}) {
    OpDef &d = r.add(p.schema, OpCategory::Composite);
    d.infer = [p](const Node &n) -> Types { return {{argType(n, 0).dtype, padShape(n, p.dims, p.reflect)}}; };
    setEval(d, [p](const Node &n, const RefArgs &a) {
      const RefTensor &x = *a.at(0);
      const std::vector<int64_t> &pad = n.intListArg(1);
      RefTensor out(n.types[0].dtype, n.types[0].shape);
      int64_t rank = (int64_t)x.shape.size();
      for (int64_t k = 0; k < out.numel(); ++k) {
        std::vector<int64_t> idx = unravel(k, out.shape);
        for (int64_t j = 0; j < p.dims; ++j) {
          int64_t dd = rank - 1 - j;
          idx[dd] = padSourceIndex(idx[dd] - pad[2 * j], x.shape[dd], p.reflect);
        }
        out.data[k] = x.data[ravel(idx, x.shape)];
      }
      return out;
    });
  }
}

} // namespace ops
} // namespace aotc
