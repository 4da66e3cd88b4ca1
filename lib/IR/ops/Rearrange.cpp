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
//    below the dim's size; negative pads crop; every output size must stay positive;
//  * im2col(self [N, C, H, W], kernel, dilation, padding, stride) -> [N, C kh kw, L] (F.unfold)
//    and its adjoint col2im(self [N, C kh kw, L], output_size, ...) -> [N, C, H, W] (F.fold,
//    overlapping blocks summed); Im2Col.cpp / Col2Im.cpp; the batch dim is optional.
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

/// The blocks geometry of im2col / col2im: (H, W) the image, the 2-element lists at args
/// k, k+1, k+2, k+3 (kernel, dilation, padding, stride), Lh x Lw blocks.
struct Blocks {
  int64_t H, W, kh, kw, dh, dw, ph, pw, sh, sw, Lh, Lw;
};
Blocks blocksOf(const Node &n, int64_t H, int64_t W, size_t k, const char *what) {
  auto two = [&](size_t i, const char *name) {
    const std::vector<int64_t> &v = n.intListArg(i);
    if (v.size() != 2) nodeError(n, std::string(what) + ": " + name + " must have 2 elements, got " + shapeStr(v));
    return v;
  };
  auto ks = two(k, "kernel_size"), di = two(k + 1, "dilation"), pa = two(k + 2, "padding"), st = two(k + 3, "stride");
  Blocks b{H, W, ks[0], ks[1], di[0], di[1], pa[0], pa[1], st[0], st[1], 0, 0};
  if (b.kh <= 0 || b.kw <= 0) nodeError(n, std::string(what) + ": kernel size should be greater than zero");
  if (b.dh <= 0 || b.dw <= 0) nodeError(n, std::string(what) + ": dilation should be greater than zero");
  if (b.ph < 0 || b.pw < 0) nodeError(n, std::string(what) + ": padding should be non-negative");
  if (b.sh <= 0 || b.sw <= 0) nodeError(n, std::string(what) + ": stride should be greater than zero");
  b.Lh = (H + 2 * b.ph - b.dh * (b.kh - 1) - 1) / b.sh + 1;
  b.Lw = (W + 2 * b.pw - b.dw * (b.kw - 1) - 1) / b.sw + 1;
  if (H + 2 * b.ph - b.dh * (b.kh - 1) - 1 < 0 || W + 2 * b.pw - b.dw * (b.kw - 1) - 1 < 0 || b.Lh < 1 || b.Lw < 1)
    nodeError(n, std::string(what) + ": the calculated shape of the array of sliding blocks is non-positive "
                                     "(image " + std::to_string(H) + " x " + std::to_string(W) + ")");
  return b;
}

/// Visits (c, ki, kj, bh, bw) with the padded-away pixels skipped: f(column row, column, h, w).
template <class F> void forEachTap(const Blocks &b, int64_t C, F f) {
  for (int64_t c = 0; c < C; ++c)
    for (int64_t ki = 0; ki < b.kh; ++ki)
      for (int64_t kj = 0; kj < b.kw; ++kj)
        for (int64_t bh = 0; bh < b.Lh; ++bh)
          for (int64_t bw = 0; bw < b.Lw; ++bw) {
            int64_t h = bh * b.sh - b.ph + ki * b.dh, w = bw * b.sw - b.pw + kj * b.dw;
            if (h < 0 || h >= b.H || w < 0 || w >= b.W) continue;
            f((c * b.kh + ki) * b.kw + kj, bh * b.Lw + bw, c * b.H * b.W + h * b.W + w);
          }
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
  {
    OpDef &d = r.add("im2col(Tensor self, int[2] kernel_size, int[2] dilation, int[2] padding, int[2] stride) -> Tensor",
                     OpCategory::Composite);
    d.infer = [](const Node &n) -> Types {
      TensorType t = argType(n, 0);
      if (t.rank() != 3 && t.rank() != 4) nodeError(n, "im2col: expected a 3-D or 4-D input, got " + t.str());
      int64_t r = t.rank();
      Blocks b = blocksOf(n, t.shape[r - 2], t.shape[r - 1], 1, "im2col");
      Shape out = {t.shape[r - 3] * b.kh * b.kw, b.Lh * b.Lw};
      if (r == 4) out.insert(out.begin(), t.shape[0]);
      return {{t.dtype, out}};
    };
    setEval(d, [](const Node &n, const RefArgs &a) {
      const RefTensor &x = *a.at(0);
      int64_t r = (int64_t)x.shape.size(), N = r == 4 ? x.shape[0] : 1, C = x.shape[r - 3];
      Blocks b = blocksOf(n, x.shape[r - 2], x.shape[r - 1], 1, "im2col");
      RefTensor out(n.types[0].dtype, n.types[0].shape, 0.0);
      int64_t rows = C * b.kh * b.kw, L = b.Lh * b.Lw;
      for (int64_t i = 0; i < N; ++i)
        forEachTap(b, C, [&](int64_t row, int64_t col, int64_t px) {
          out.data[(i * rows + row) * L + col] = x.data[i * C * b.H * b.W + px];
        });
      return out;
    });
  }
  {
    OpDef &d = r.add("col2im(Tensor self, SymInt[2] output_size, int[2] kernel_size, int[2] dilation, int[2] padding, "
                     "int[2] stride) -> Tensor",
                     OpCategory::Composite);
    d.infer = [](const Node &n) -> Types {
      TensorType t = argType(n, 0);
      if (t.rank() != 2 && t.rank() != 3) nodeError(n, "col2im: expected a 2-D or 3-D input, got " + t.str());
      const std::vector<int64_t> &os = n.intListArg(1);
      if (os.size() != 2) nodeError(n, "col2im: output_size must have 2 elements, got " + shapeStr(os));
      Blocks b = blocksOf(n, os[0], os[1], 2, "col2im");
      int64_t r = t.rank(), rows = t.shape[r - 2];
      if (rows == 0 || t.shape[r - 1] == 0)
        nodeError(n, "col2im: expected non-empty 2D or 3D input tensor (apart from an empty batch), got " + t.str());
      if (rows % (b.kh * b.kw) != 0)
        nodeError(n, "col2im: expected size of input's dimension " + std::to_string(r - 2) +
                         " to be divisible by the product of kernel_size, but got input.size(" + std::to_string(r - 2) +
                         ")=" + std::to_string(rows) + " and kernel_size=(" + std::to_string(b.kh) + ", " +
                         std::to_string(b.kw) + ")");
      if (t.shape[r - 1] != b.Lh * b.Lw)
        nodeError(n, "col2im: given output_size=(" + std::to_string(os[0]) + ", " + std::to_string(os[1]) +
                         "), expected size of input's dimension " + std::to_string(r - 1) +
                         " to match the calculated number of sliding blocks " + std::to_string(b.Lh) + " * " +
                         std::to_string(b.Lw) + " = " + std::to_string(b.Lh * b.Lw) + ", but got input.size(" +
                         std::to_string(r - 1) + ")=" + std::to_string(t.shape[r - 1]));
      Shape out = {rows / (b.kh * b.kw), os[0], os[1]};
      if (r == 3) out.insert(out.begin(), t.shape[0]);
      return {{t.dtype, out}};
    };
    setEval(d, [](const Node &n, const RefArgs &a) {
      const RefTensor &x = *a.at(0);
      const std::vector<int64_t> &os = n.intListArg(1);
      int64_t r = (int64_t)x.shape.size(), N = r == 3 ? x.shape[0] : 1;
      Blocks b = blocksOf(n, os[0], os[1], 2, "col2im");
      int64_t rows = x.shape[r - 2], C = rows / (b.kh * b.kw), L = b.Lh * b.Lw;
      RefTensor out(n.types[0].dtype, n.types[0].shape, 0.0);
      for (int64_t i = 0; i < N; ++i)
        forEachTap(b, C, [&](int64_t row, int64_t col, int64_t px) {
          out.data[i * C * b.H * b.W + px] += x.data[(i * rows + row) * L + col];
        });
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
