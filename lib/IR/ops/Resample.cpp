//===- Resample.cpp - Upsampling, average pooling and constant padding -----===//
//
// Ops that read each output from a few input positions along H and along W, with weights that
// depend on the output position only (separable resampling):
//   upsample_nearest2d(.vec)      out[o] = x[min(floorf(o * s), I - 1)], s = compute_scales_value:
//                                  1/scale when a scale is given (> 0), else I/O, in float
//                                  (UpSample.h nearest_idx; float even for double tensors);
//   upsample_bilinear2d(.vec)     two taps: src = align_corners ? o s : max((o + 0.5) s - 0.5, 0),
//                                  s = align_corners ? (I - 1)/(O - 1) (0 if O == 1) : as above;
//                                  i0 = min(floor(src), I - 1), i1 = i0 + (i0 < I - 1),
//                                  l1 = clamp(src - i0, 0, 1), l0 = 1 - l1 (UpSampleKernel.cpp);
//   _adaptive_avg_pool2d          window [floor(o I/O), ceil((o + 1) I/O)), the mean over it;
//   avg_pool2d                    window o s - p + [0, k) (zero padding), divided by
//                                  divisor_override, or the window's extent clipped to the padded
//                                  input (count_include_pad) or to the input (AvgPoolKernel.cpp).
// Every input is [N, C, H, W] (or [C, H, W] for the pools); the backward ops are the adjoints
// (each output's gradient times its weight added at its positions). constant_pad_nd(x, pad, v)
// pads (or, negative, crops) the last len(pad)/2 dims, pad = [last_lo, last_hi, prev_lo, ...].
// The .vec forms are decomposed to the .default ones (as ATen's CompositeImplicit kernels);
// lib/Decompose/LowerResample.cpp lowers the rest to index_select / scatter_add / pointwise.
//===----------------------------------------------------------------------===//
#include "Ops.h"

#include "aotc/Pool.h"

#include <optional>

namespace aotc {
namespace ops {
namespace {

using Types = std::vector<TensorType>;

/// One input position read by one output position, with its weight.
struct Tap {
  int64_t idx;
  double w;
};
using Taps = std::vector<std::vector<Tap>>; // per output position

std::optional<double> optFloat(const Node &n, size_t i) {
  if (n.isNoneArg(i)) return std::nullopt;
  return n.scalarArg(i);
}

Taps nearestTaps(int64_t in, int64_t out, std::optional<double> scale) {
  float s = scale && *scale > 0 ? (float)(1.0 / *scale) : (float)in / (float)out;
  Taps t(out);
  for (int64_t o = 0; o < out; ++o) t[o] = {{std::min((int64_t)std::floor((float)o * s), in - 1), 1.0}};
  return t;
}

Taps linearTaps(int64_t in, int64_t out, bool align, std::optional<double> scale) {
  double s = align ? (out > 1 ? (double)(in - 1) / (double)(out - 1) : 0.0)
                   : (scale && *scale > 0 ? 1.0 / *scale : (double)in / (double)out);
  Taps t(out);
  for (int64_t o = 0; o < out; ++o) {
    double src = align ? s * (double)o : std::max(s * ((double)o + 0.5) - 0.5, 0.0);
    int64_t i0 = std::min((int64_t)std::floor(src), in - 1);
    double l1 = std::min(std::max(src - (double)i0, 0.0), 1.0);
    t[o] = {{i0, 1.0 - l1}, {i0 + (i0 < in - 1 ? 1 : 0), l1}};
  }
  return t;
}

Taps adaptiveTaps(int64_t in, int64_t out) {
  Taps t(out);
  for (int64_t o = 0; o < out; ++o) {
    int64_t a = o * in / out, b = ((o + 1) * in + out - 1) / out;
    for (int64_t i = a; i < b; ++i) t[o].push_back({i, 1.0 / (double)(b - a)});
  }
  return t;
}

/// One dim of avg_pool2d; `divide` says whether this dim carries its share of the divisor.
Taps avgTaps(int64_t in, int64_t out, int64_t k, int64_t s, int64_t p, bool countPad, bool divide) {
  Taps t(out);
  for (int64_t o = 0; o < out; ++o) {
    int64_t a = o * s - p, b = std::min(a + k, in + p);
    int64_t extent = countPad ? b - a : std::min(b, in) - std::max(a, int64_t(0));
    for (int64_t i = std::max(a, int64_t(0)); i < std::min(b, in); ++i)
      t[o].push_back({i, divide ? 1.0 / (double)extent : 1.0});
  }
  return t;
}

/// y[p, oh, ow] = sum over taps of x[p, h, w] (x viewed [P, H, W]), or its adjoint (x = the
/// gradient of y, the result [P, H, W]) when `adjoint`.
RefTensor resampleRef(const RefTensor &x, const Taps &th, const Taps &tw, int64_t H, int64_t W, const Shape &outShape,
                      DType dt, bool adjoint) {
  RefTensor y(dt, outShape);
  int64_t OH = (int64_t)th.size(), OW = (int64_t)tw.size();
  int64_t P = adjoint ? x.numel() / std::max<int64_t>(OH * OW, 1) : x.numel() / std::max<int64_t>(H * W, 1);
  for (int64_t p = 0; p < P; ++p)
    for (int64_t oh = 0; oh < OH; ++oh)
      for (int64_t ow = 0; ow < OW; ++ow)
        for (const Tap &a : th[oh])
          for (const Tap &b : tw[ow]) {
            int64_t i = (p * H + a.idx) * W + b.idx, o = (p * OH + oh) * OW + ow;
            if (adjoint)
              y.data[i] += a.w * b.w * x.data[o];
            else
              y.data[o] += a.w * b.w * x.data[i];
          }
  return y;
}

void require4d(const Node &n, const Shape &s, const char *what) {
  if (s.size() != 4 || numelOf(s) == 0)
    nodeError(n, std::string(what) + ": non-empty 4D data tensor expected but got a tensor with sizes " +
                     shapeStr(s));
}

/// output_size of the upsample ops: two positive ints.
void checkOutputSize(const Node &n, const std::vector<int64_t> &o, const char *what) {
  if (o.size() != 2) nodeError(n, std::string(what) + ": it is expected output_size equals to 2, but got size " +
                                      std::to_string(o.size()));
  if (o[0] <= 0 || o[1] <= 0)
    nodeError(n, std::string(what) + ": Input and output sizes should be greater than 0, but got output (H: " +
                     std::to_string(o[0]) + ", W: " + std::to_string(o[1]) + ")");
}

/// The taps of an upsample node: `bilinear` picks the mode; output_size at arg 1; `next` is the
/// argument after output_size (and input_size): align_corners (bilinear), then scales_h,
/// scales_w; in = the input's H, W.
std::pair<Taps, Taps> upsampleTaps(const Node &n, bool bilinear, int64_t H, int64_t W, size_t next) {
  const std::vector<int64_t> &o = n.intListArg(1);
  if (bilinear) {
    bool ac = n.boolArg(next);
    return {linearTaps(H, o[0], ac, optFloat(n, next + 1)), linearTaps(W, o[1], ac, optFloat(n, next + 2))};
  }
  return {nearestTaps(H, o[0], optFloat(n, next)), nearestTaps(W, o[1], optFloat(n, next + 1))};
}

/// The output size of the .vec forms (compute_output_size in UpSample.cpp).
std::vector<int64_t> vecOutputSize(const Node &n, const Shape &in, size_t osArg, size_t sfArg, const char *what) {
  bool hasSize = !n.isNoneArg(osArg), hasScale = !n.isNoneArg(sfArg);
  if (hasSize == hasScale)
    nodeError(n, std::string(what) + ": must specify exactly one of output_size and scale_factors");
  if (hasSize) return n.intListArg(osArg);
  const auto &sf = std::get<std::vector<double>>(n.args[sfArg]);
  if (sf.size() != 2)
    nodeError(n, std::string(what) + ": scale_factors must have 2 elements, got " + std::to_string(sf.size()));
  return {(int64_t)std::floor((double)in[2] * sf[0]), (int64_t)std::floor((double)in[3] * sf[1])};
}

void registerUpsample(OpRegistry &r, bool bilinear) {
  const char *name = bilinear ? "upsample_bilinear2d" : "upsample_nearest2d";
  std::string ac = bilinear ? "bool align_corners, " : "";
  {
    OpDef &d = r.add(std::string(name) + ".vec(Tensor input, SymInt[]? output_size, " + ac +
                         "float[]? scale_factors) -> Tensor",
                     OpCategory::Composite);
    d.infer = [name, bilinear](const Node &n) -> Types {
      TensorType x = argType(n, 0);
      require4d(n, x.shape, name);
      requireFloating(n, x.dtype, name);
      std::vector<int64_t> o = vecOutputSize(n, x.shape, 1, bilinear ? 3 : 2, name);
      checkOutputSize(n, o, name);
      return {{x.dtype, {x.shape[0], x.shape[1], o[0], o[1]}}};
    };
    setEval(d, [bilinear](const Node &n, const RefArgs &a) {
      const RefTensor &x = *a[0];
      int64_t H = x.shape[2], W = x.shape[3];
      const Shape &os = n.types[0].shape;
      std::optional<double> sh, sw;
      size_t sf = bilinear ? 3 : 2;
      if (!n.isNoneArg(sf)) {
        const auto &v = std::get<std::vector<double>>(n.args[sf]);
        sh = v[0], sw = v[1];
      }
      Taps th = bilinear ? linearTaps(H, os[2], n.boolArg(2), sh) : nearestTaps(H, os[2], sh);
      Taps tw = bilinear ? linearTaps(W, os[3], n.boolArg(2), sw) : nearestTaps(W, os[3], sw);
      return resampleRef(x, th, tw, H, W, os, n.types[0].dtype, false);
    });
  }
  {
    OpDef &d = r.add(std::string(name) + "(Tensor self, SymInt[2] output_size, " + ac +
                         "float? scales_h=None, float? scales_w=None) -> Tensor",
                     OpCategory::Index);
    d.infer = [name](const Node &n) -> Types {
      TensorType x = argType(n, 0);
      require4d(n, x.shape, name);
      requireFloating(n, x.dtype, name);
      const std::vector<int64_t> &o = n.intListArg(1);
      checkOutputSize(n, o, name);
      return {{x.dtype, {x.shape[0], x.shape[1], o[0], o[1]}}};
    };
    setEval(d, [bilinear](const Node &n, const RefArgs &a) {
      const RefTensor &x = *a[0];
      auto [th, tw] = upsampleTaps(n, bilinear, x.shape[2], x.shape[3], 2);
      return resampleRef(x, th, tw, x.shape[2], x.shape[3], n.types[0].shape, n.types[0].dtype, false);
    });
  }
  {
    OpDef &d = r.add(std::string(name) + "_backward(Tensor grad_output, SymInt[2] output_size, SymInt[4] input_size, " +
                         ac + "float? scales_h=None, float? scales_w=None) -> Tensor",
                     OpCategory::Index);
    d.infer = [name](const Node &n) -> Types {
      TensorType g = argType(n, 0);
      const std::vector<int64_t> &o = n.intListArg(1), &in = n.intListArg(2);
      checkOutputSize(n, o, name);
      if (in.size() != 4)
        nodeError(n, std::string(name) + "_backward: input_size must have 4 elements, got " + shapeStr(in));
      require4d(n, in, name);
      Shape want{in[0], in[1], o[0], o[1]};
      if (g.shape != want)
        nodeError(n, std::string(name) + "_backward: expected grad_output of shape " + shapeStr(want) + ", got " +
                         g.str());
      requireFloating(n, g.dtype, name);
      return {{g.dtype, in}};
    };
    setEval(d, [bilinear](const Node &n, const RefArgs &a) {
      const std::vector<int64_t> &in = n.intListArg(2);
      auto [th, tw] = upsampleTaps(n, bilinear, in[2], in[3], 3);
      return resampleRef(*a[0], th, tw, in[2], in[3], in, n.types[0].dtype, true);
    });
  }
}

/// avg_pool2d's geometry; kernel_size at arg `ka`, then stride, padding, ceil_mode.
PoolGeometry avgGeometry(const Node &n, const Shape &in, size_t ka) {
  PoolShapeResult r = avgPool2dShape(in, n.intListArg(ka), n.intListArg(ka + 1), n.intListArg(ka + 2), n.boolArg(ka + 3));
  if (!r.error.empty()) nodeError(n, r.error);
  if (!n.isNoneArg(ka + 5) && n.intArg(ka + 5) == 0) nodeError(n, "avg_pool2d: divisor must be not zero");
  return r.geom;
}

std::pair<Taps, Taps> avgPoolTaps(const Node &n, const PoolGeometry &g, size_t ka) {
  bool countPad = n.boolArg(ka + 4), over = !n.isNoneArg(ka + 5);
  Taps th = avgTaps(g.H, g.OH, g.KH, g.strideH, g.padH, countPad, !over);
  Taps tw = avgTaps(g.W, g.OW, g.KW, g.strideW, g.padW, countPad, !over);
  if (over)
    for (auto &t : tw)
      for (Tap &x : t) x.w = 1.0 / (double)n.intArg(ka + 5);
  return {th, tw};
}

Shape pooledShape(Shape s, int64_t OH, int64_t OW) {
  s[s.size() - 2] = OH;
  s.back() = OW;
  return s;
}

void registerPools(OpRegistry &r) {
  {
    OpDef &d = r.add("avg_pool2d(Tensor self, int[2] kernel_size, int[2] stride=[], int[2] padding=0, "
                     "bool ceil_mode=False, bool count_include_pad=True, int? divisor_override=None) -> Tensor",
                     OpCategory::Reduction);
    d.infer = [](const Node &n) -> Types {
      TensorType x = argType(n, 0);
      requireFloating(n, x.dtype, "avg_pool2d");
      PoolGeometry g = avgGeometry(n, x.shape, 1);
      return {{x.dtype, pooledShape(x.shape, g.OH, g.OW)}};
    };
    setEval(d, [](const Node &n, const RefArgs &a) {
      PoolGeometry g = avgGeometry(n, a[0]->shape, 1);
      auto [th, tw] = avgPoolTaps(n, g, 1);
      return resampleRef(*a[0], th, tw, g.H, g.W, n.types[0].shape, n.types[0].dtype, false);
    });
  }
  {
    OpDef &d = r.add("avg_pool2d_backward(Tensor grad_output, Tensor self, int[2] kernel_size, int[2] stride, "
                     "int[2] padding, bool ceil_mode, bool count_include_pad, int? divisor_override) -> Tensor",
                     OpCategory::Reduction);
    d.infer = [](const Node &n) -> Types {
      TensorType g = argType(n, 0), x = argType(n, 1);
      PoolGeometry geo = avgGeometry(n, x.shape, 2);
      Shape want = pooledShape(x.shape, geo.OH, geo.OW);
      if (g.shape != want)
        nodeError(n, "avg_pool2d_backward: expected grad_output of shape " + shapeStr(want) + ", got " + g.str());
      if (g.dtype != x.dtype) nodeError(n, "avg_pool2d_backward: grad_output and self must have the same dtype");
      return {x};
    };
    setEval(d, [](const Node &n, const RefArgs &a) {
      PoolGeometry g = avgGeometry(n, a[1]->shape, 2);
      auto [th, tw] = avgPoolTaps(n, g, 2);
      return resampleRef(*a[0], th, tw, g.H, g.W, a[1]->shape, n.types[0].dtype, true);
    });
  }
  {
    OpDef &d = r.add("_adaptive_avg_pool2d(Tensor self, SymInt[2] output_size) -> Tensor", OpCategory::Reduction);
    d.infer = [](const Node &n) -> Types {
      TensorType x = argType(n, 0);
      if (x.rank() != 3 && x.rank() != 4)
        nodeError(n, "adaptive_avg_pool2d(): Expected 3D or 4D tensor, but got " + shapeStr(x.shape));
      for (size_t i = 1; i < x.shape.size(); ++i)
        if (x.shape[i] == 0)
          nodeError(n, "adaptive_avg_pool2d(): Expected input to have non-zero size for non-batch dimensions, "
                       "but input has sizes " + shapeStr(x.shape));
      requireFloating(n, x.dtype, "adaptive_avg_pool2d");
      const std::vector<int64_t> &o = n.intListArg(1);
      if (o.size() != 2 || o[0] < 0 || o[1] < 0)
        nodeError(n, "adaptive_avg_pool2d: output_size must be 2 non-negative ints, got " + shapeStr(o));
      return {{x.dtype, pooledShape(x.shape, o[0], o[1])}};
    };
    setEval(d, [](const Node &n, const RefArgs &a) {
      const Shape &s = a[0]->shape, &os = n.types[0].shape;
      int64_t H = s[s.size() - 2], W = s.back();
      return resampleRef(*a[0], adaptiveTaps(H, os[os.size() - 2]), adaptiveTaps(W, os.back()), H, W, os,
                         n.types[0].dtype, false);
    });
  }
  {
    OpDef &d = r.add("_adaptive_avg_pool2d_backward(Tensor grad_output, Tensor self) -> Tensor", OpCategory::Reduction);
    d.infer = [](const Node &n) -> Types {
      TensorType g = argType(n, 0), x = argType(n, 1);
      if ((x.rank() != 3 && x.rank() != 4) || g.rank() != x.rank())
        nodeError(n, "adaptive_avg_pool2d_backward: expected grad_output and self of the same rank 3 or 4, got " +
                         g.str() + " and " + x.str());
      for (int64_t i = 0; i + 2 < x.rank(); ++i)
        if (g.shape[i] != x.shape[i])
          nodeError(n, "adaptive_avg_pool2d_backward: grad_output " + g.str() + " does not match self " + x.str());
      if (g.dtype != x.dtype) nodeError(n, "adaptive_avg_pool2d_backward: grad_output and self must have the same dtype");
      return {x};
    };
    setEval(d, [](const Node &n, const RefArgs &a) {
      const Shape &s = a[1]->shape, &gs = a[0]->shape;
      int64_t H = s[s.size() - 2], W = s.back();
      return resampleRef(*a[0], adaptiveTaps(H, gs[gs.size() - 2]), adaptiveTaps(W, gs.back()), H, W, s,
                         n.types[0].dtype, true);
    });
  }
}

void registerConstantPad(OpRegistry &r) {
  OpDef &d = r.add("constant_pad_nd(Tensor self, SymInt[] pad, Scalar value=0) -> Tensor", OpCategory::Index);
  d.infer = [](const Node &n) -> Types {
    TensorType x = argType(n, 0);
    const std::vector<int64_t> &pad = n.intListArg(1);
    if (pad.size() % 2) nodeError(n, "Length of pad must be even but instead it equals " + std::to_string(pad.size()));
    if ((int64_t)pad.size() > 2 * x.rank())
      nodeError(n, "Length of pad should be no more than twice the number of dimensions of the input. Pad length is " +
                       std::to_string(pad.size()) + " while the input has " + std::to_string(x.rank()) +
                       " dimensions.");
    Shape out = x.shape;
    for (size_t i = 0; i < pad.size() / 2; ++i) {
      int64_t dim = x.rank() - 1 - (int64_t)i;
      out[dim] = x.shape[dim] + pad[2 * i] + pad[2 * i + 1];
      if (out[dim] < 0)
        nodeError(n, "The input size " + std::to_string(x.shape[dim]) + ", plus negative padding " +
                         std::to_string(pad[2 * i]) + " and " + std::to_string(pad[2 * i + 1]) +
                         " resulted in a negative output size, which is invalid. Check dimension " +
                         std::to_string(dim) + " of your input.");
    }
    // The value is converted to the input's dtype as at::full does (c10::checked_convert: a
    // float value pads an integer tensor, truncated; HF's causal-LM loss pads labels with -100.0).
    return {{x.dtype, out}};
  };
  setEval(d, [](const Node &n, const RefArgs &a) {
    const RefTensor &x = *a[0];
    const std::vector<int64_t> &pad = n.intListArg(1);
    const TensorType &ot = n.types[0];
    RefTensor y(ot.dtype, ot.shape);
    double v = castValue(ot.dtype, n.scalarArg(2));
    int64_t R = (int64_t)x.shape.size();
    for (int64_t k = 0; k < y.numel(); ++k) {
      std::vector<int64_t> idx = unravel(k, ot.shape);
      bool inside = true;
      for (size_t i = 0; i < pad.size() / 2; ++i) {
        int64_t dim = R - 1 - (int64_t)i;
        idx[dim] -= pad[2 * i];
        inside &= idx[dim] >= 0 && idx[dim] < x.shape[dim];
      }
      y.data[k] = inside ? x.data[ravel(idx, x.shape)] : v;
    }
    return y;
  });
}

} // namespace

void registerResampleOps(OpRegistry &r) {
  registerUpsample(r, false);
  registerUpsample(r, true);
  registerPools(r);
  registerConstantPad(r);
}

} // namespace ops
} // namespace aotc
