//===- Pool3d.cpp - avg_pool3d, _adaptive_avg_pool3d, max_pool3d_with_indices -------===//
//
// 3-D pooling over the last three dims of [N, C, D, H, W] or [C, D, H, W] (AveragePool3d.cpp,
// AdaptiveAveragePooling3d.cpp, DilatedMaxPool3d.cpp). Every window is a box, so each op is two
// 2-D ones (lib/Decompose/DecomposePool3d.cpp): over (H, W) with the planes [N, C·D], then over
// D with a (k, 1) window on [N, C, D, OH·OW]. The shape checks are the 2-D ones applied that way
// (ATen's messages, per pair of dims); the references below compute the 3-D windows directly.
//  * avg_pool3d: the sum over the window's valid elements divided by divisor_override, or by the
//    window extent clipped to the padded input (count_include_pad) or to the input;
//  * _adaptive_avg_pool3d: window [floor(o I/O), ceil((o + 1) I/O)) per dim, the mean;
//  * max_pool3d_with_indices: the first maximum in (d, h, w) order (a NaN replaces it: the last
//    NaN wins, as ATen's `val > max || isnan(val)`); indices flat in D·H·W.
//===----------------------------------------------------------------------===//
#include "Ops.h"

#include "aotc/Pool.h"

namespace aotc {
namespace ops {
namespace {

using Types = std::vector<TensorType>;

/// The geometry of a 3-D pool node (avg_pool3d or max_pool3d_with_indices), checked: kernel,
/// stride, padding, dilation and sizes as (D, H, W).
struct Pool3d {
  std::vector<int64_t> k, s, p, d, in, out;
  bool ceil = false;
};

/// kernel / stride / padding / dilation of a 3-D pool `op`: 1 or 3 ints (stride [] = kernel).
std::vector<int64_t> triple(const Node &n, size_t i, const char *op, const char *what,
                            std::optional<std::vector<int64_t>> dflt) {
  std::vector<int64_t> v = n.intListArg(i);
  if (v.empty() && dflt) return *dflt;
  if (v.size() == 1) return {v[0], v[0], v[0]};
  if (v.size() != 3)
    nodeError(n, std::string(op) + ": " + what + " must either be a single int, or a tuple of three ints");
  return v;
}

Pool3d pool3dOf(const Node &n, bool isMax) {
  const char *op = isMax ? "max_pool3d" : "avg_pool3d";
  TensorType t = argType(n, 0);
  if (t.rank() != 4 && t.rank() != 5)
    nodeError(n, std::string(op) + ": non-empty 4D or 5D (batch mode) tensor expected for input, got " + t.str());
  requireFloating(n, t.dtype, op);
  Pool3d p;
  p.k = triple(n, 1, op, "kernel_size", std::nullopt);
  p.s = triple(n, 2, op, "stride", p.k);
  p.p = triple(n, 3, op, "padding", std::nullopt);
  p.d = isMax ? triple(n, 4, op, "dilation", std::nullopt) : std::vector<int64_t>{1, 1, 1};
  p.ceil = n.boolArg(isMax ? 5 : 4);
  int64_t r = t.rank();
  p.in = {t.shape[r - 3], t.shape[r - 2], t.shape[r - 1]};
  // (H, W) as a 2-D pool, D as a (k, 1) one: ATen's checks and output sizes for each.
  Shape hw = {1, 1, p.in[1], p.in[2]}, dd = {1, 1, p.in[0], 1};
  PoolShapeResult a = isMax ? maxPool2dShape(hw, {p.k[1], p.k[2]}, {p.s[1], p.s[2]}, {p.p[1], p.p[2]}, {p.d[1], p.d[2]}, p.ceil)
                            : avgPool2dShape(hw, {p.k[1], p.k[2]}, {p.s[1], p.s[2]}, {p.p[1], p.p[2]}, p.ceil);
  if (!a.error.empty()) nodeError(n, a.error);
  PoolShapeResult b = isMax ? maxPool2dShape(dd, {p.k[0], 1}, {p.s[0], 1}, {p.p[0], 0}, {p.d[0], 1}, p.ceil)
                            : avgPool2dShape(dd, {p.k[0], 1}, {p.s[0], 1}, {p.p[0], 0}, p.ceil);
  if (!b.error.empty()) nodeError(n, b.error);
  p.out = {b.geom.OH, a.geom.OH, a.geom.OW};
  if (!isMax && !n.isNoneArg(6) && n.intArg(6) == 0) nodeError(n, "avg_pool3d: divisor must be not zero");
  return p;
}

Shape pooled(Shape s, const std::vector<int64_t> &o) {
  size_t r = s.size();
  s[r - 3] = o[0], s[r - 2] = o[1], s[r - 1] = o[2];
  return s;
}

/// Calls f(plane, out flat, in flat list) for every output position of a box pool whose window
/// along dim j starts at start(j, o) and spans len(j, o) positions with step dil[j].
template <class Start, class Len, class F>
void forEachBox(int64_t planes, const std::vector<int64_t> &in, const std::vector<int64_t> &out,
                const std::vector<int64_t> &dil, Start start, Len len, F f) {
  std::vector<int64_t> taps;
  for (int64_t pl = 0; pl < planes; ++pl)
    for (int64_t od = 0; od < out[0]; ++od)
      for (int64_t oh = 0; oh < out[1]; ++oh)
        for (int64_t ow = 0; ow < out[2]; ++ow) {
          taps.clear();
          int64_t o3[3] = {od, oh, ow};
          int64_t a[3], l[3];
          for (int j = 0; j < 3; ++j) a[j] = start(j, o3[j]), l[j] = len(j, o3[j]);
          for (int64_t i = 0; i < l[0]; ++i)
            for (int64_t jh = 0; jh < l[1]; ++jh)
              for (int64_t jw = 0; jw < l[2]; ++jw) {
                int64_t d = a[0] + i * dil[0], h = a[1] + jh * dil[1], w = a[2] + jw * dil[2];
                if (d < 0 || d >= in[0] || h < 0 || h >= in[1] || w < 0 || w >= in[2]) continue;
                taps.push_back((d * in[1] + h) * in[2] + w);
              }
          f(pl, ((pl * out[0] + od) * out[1] + oh) * out[2] + ow, o3, taps);
        }
}

} // namespace

void registerPool3dOps(OpRegistry &r) {
  {
    OpDef &d = r.add("avg_pool3d(Tensor self, int[3] kernel_size, int[3] stride=[], int[3] padding=0, "
                     "bool ceil_mode=False, bool count_include_pad=True, int? divisor_override=None) -> Tensor",
                     OpCategory::Composite);
    d.infer = [](const Node &n) -> Types {
      Pool3d p = pool3dOf(n, false);
      return {{argType(n, 0).dtype, pooled(argType(n, 0).shape, p.out)}};
    };
    setEval(d, [](const Node &n, const RefArgs &a) {
      const RefTensor &x = *a.at(0);
      Pool3d p = pool3dOf(n, false);
      bool countPad = n.boolArg(5);
      std::optional<int64_t> over;
      if (!n.isNoneArg(6)) over = n.intArg(6);
      RefTensor out(n.types[0].dtype, n.types[0].shape, 0.0);
      int64_t planes = x.numel() / (p.in[0] * p.in[1] * p.in[2]), vol = p.in[0] * p.in[1] * p.in[2];
      forEachBox(planes, p.in, p.out, p.d, [&](int j, int64_t o) { return o * p.s[j] - p.p[j]; },
                 [&](int j, int64_t) { return p.k[j]; },
                 [&](int64_t pl, int64_t o, const int64_t *o3, const std::vector<int64_t> &taps) {
                   double s = 0;
                   for (int64_t t : taps) s += x.data[pl * vol + t];
                   double div = 1;
                   for (int j = 0; j < 3; ++j) {
                     int64_t st = o3[j] * p.s[j] - p.p[j], en = std::min(st + p.k[j], p.in[j] + p.p[j]);
                     div *= countPad ? en - st : std::min(en, p.in[j]) - std::max(st, int64_t(0));
                   }
                   out.data[o] = s / (over ? (double)*over : div);
                 });
      return out;
    });
  }
  {
    OpDef &d = r.add("_adaptive_avg_pool3d(Tensor self, SymInt[3] output_size) -> Tensor", OpCategory::Composite);
    d.infer = [](const Node &n) -> Types {
      TensorType x = argType(n, 0);
      if (x.rank() != 4 && x.rank() != 5)
        nodeError(n, "adaptive_avg_pool3d(): Expected 4D or 5D tensor, but got " + shapeStr(x.shape));
      for (int64_t i = 1; i < x.rank(); ++i)
        if (x.shape[i] == 0)
          nodeError(n, "adaptive_avg_pool3d(): Expected input to have non-zero size for non-batch dimensions, "
                       "but input has sizes " + shapeStr(x.shape));
      requireFloating(n, x.dtype, "adaptive_avg_pool3d");
      const std::vector<int64_t> &o = n.intListArg(1);
      if (o.size() != 3 || o[0] < 0 || o[1] < 0 || o[2] < 0)
        nodeError(n, "adaptive_avg_pool3d: output_size must be 3 non-negative ints, got " + shapeStr(o));
      return {{x.dtype, pooled(x.shape, o)}};
    };
    setEval(d, [](const Node &n, const RefArgs &a) {
      const RefTensor &x = *a.at(0);
      size_t r = x.shape.size();
      std::vector<int64_t> in = {x.shape[r - 3], x.shape[r - 2], x.shape[r - 1]}, o = n.intListArg(1);
      int64_t vol = in[0] * in[1] * in[2], planes = x.numel() / vol;
      RefTensor out(n.types[0].dtype, n.types[0].shape, 0.0);
      forEachBox(planes, in, o, {1, 1, 1}, [&](int j, int64_t oo) { return oo * in[j] / o[j]; },
                 [&](int j, int64_t oo) { return ((oo + 1) * in[j] + o[j] - 1) / o[j] - oo * in[j] / o[j]; },
                 [&](int64_t pl, int64_t oi, const int64_t *, const std::vector<int64_t> &taps) {
                   double s = 0;
                   for (int64_t t : taps) s += x.data[pl * vol + t];
                   out.data[oi] = s / (double)taps.size();
                 });
      return out;
    });
  }
  {
    OpDef &d = r.add("max_pool3d_with_indices(Tensor self, int[3] kernel_size, int[3] stride=[], int[3] padding=0, "
                     "int[3] dilation=1, bool ceil_mode=False) -> (Tensor, Tensor)",
                     OpCategory::Composite);
    d.infer = [](const Node &n) -> Types {
      Pool3d p = pool3dOf(n, true);
      Shape s = pooled(argType(n, 0).shape, p.out);
      return {{argType(n, 0).dtype, s}, {DType::I64, s}};
    };
    d.eval = [](const Node &n, const RefArgs &a, const std::vector<std::vector<const RefTensor *>> &) {
      const RefTensor &x = *a.at(0);
      Pool3d p = pool3dOf(n, true);
      RefTensor out(n.types[0].dtype, n.types[0].shape), idx(DType::I64, n.types[1].shape);
      int64_t vol = p.in[0] * p.in[1] * p.in[2], planes = x.numel() / vol;
      forEachBox(planes, p.in, p.out, p.d, [&](int j, int64_t o) { return o * p.s[j] - p.p[j]; },
                 [&](int j, int64_t) { return p.k[j]; },
                 [&](int64_t pl, int64_t o, const int64_t *, const std::vector<int64_t> &taps) {
                   double best = -INFINITY;
                   int64_t at = taps.empty() ? 0 : taps[0];
                   for (int64_t t : taps) {
                     double v = x.data[pl * vol + t];
                     if (v > best || std::isnan(v)) best = v, at = t;
                   }
                   out.data[o] = best, idx.data[o] = (double)at;
                 });
      return std::vector<RefTensor>{out, idx};
    };
  }
}

} // namespace ops
} // namespace aotc
