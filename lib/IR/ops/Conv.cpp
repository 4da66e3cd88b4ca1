//===- Conv.cpp - convolution, convolution_backward and the two gradient primitives ---===//
//
// Schemas from native_functions.yaml; shapes by convolutionShape (include/aotc/Conv.h). The
// float64 references are direct loops over the regular geometry (ConvGeometry), written
// independently of the im2col + GEMM path of the runtime library (runtime/kernels), so
// conformance and gradchecks compare two implementations.
//
//  * convolution(input, weight, bias?, stride, padding, dilation, transposed, output_padding,
//    groups): 1-D and 2-D, batched, every stride/padding/dilation/groups, transposed with
//    output_padding; bias [out_channels].
//  * convolution_backward(grad_output, input, weight, bias_sizes?, ..., output_mask) ->
//    (grad_input, grad_weight, grad_bias); a result whose output_mask entry is False is zeros
//    (ATen leaves it undefined). grad_bias has out_channels elements.
//  * aotc::conv_input_grad(grad_output, weight, input_size, stride, padding, dilation, groups)
//    and aotc::conv_weight_grad(grad_output, input, weight_size, stride, padding, dilation,
//    groups): the input and weight gradients of the *regular* convolution; what
//    lib/Decompose/LowerConv.cpp lowers convolution_backward and transposed convolutions to.
//===----------------------------------------------------------------------===//
#include "Ops.h"

#include "aotc/Conv.h"

namespace aotc {
namespace ops {
namespace {

using Types = std::vector<TensorType>;

void sameFloating(const Node &n, const std::vector<size_t> &idx, const char *what) {
  DType dt = argType(n, idx[0]).dtype;
  requireFloating(n, dt, what);
  for (size_t i : idx)
    if (argType(n, i).dtype != dt)
      nodeError(n, std::string(what) + ": expected all tensors to have dtype " + dtypeTorchName(dt) + ", got " +
                       argType(n, i).str() + " for argument '" + n.op->schema.args[i].name + "'");
}

/// convolutionShape of a node whose args are (.., input at ia, weight at wa, stride at sa, ...).
ConvShapeResult shapeOf(const Node &n, const Shape &input, const Shape &weight, size_t sa, bool withTransposed) {
  const std::vector<int64_t> &stride = n.intListArg(sa), &padding = n.intListArg(sa + 1),
                             &dilation = n.intListArg(sa + 2);
  bool transposed = withTransposed ? n.boolArg(sa + 3) : false;
  std::vector<int64_t> outPad = withTransposed ? n.intListArg(sa + 4) : std::vector<int64_t>{};
  int64_t groups = n.intArg(withTransposed ? sa + 5 : sa + 3);
  ConvShapeResult r = convolutionShape(input, weight, stride, padding, dilation, transposed, outPad, groups);
  if (!r.error.empty()) nodeError(n, r.error);
  return r;
}

// x [N, C, H, W], w [K, C/g, KH, KW], y [N, K, OH, OW] (1-D: H = OH = KH = 1).
int64_t xAt(const ConvGeometry &g, int64_t n, int64_t c, int64_t h, int64_t w) {
  return ((n * g.C + c) * g.H + h) * g.W + w;
}
int64_t wAt(const ConvGeometry &g, int64_t k, int64_t c, int64_t i, int64_t j) {
  return ((k * (g.C / g.groups) + c) * g.KH + i) * g.KW + j;
}
int64_t yAt(const ConvGeometry &g, int64_t n, int64_t k, int64_t h, int64_t w) {
  return ((n * g.K + k) * g.OH + h) * g.OW + w;
}

/// Calls f(n, k, c (input channel), c within the group, oh, ow, i, j, input h, input w) for every
/// product term of the regular convolution whose input position lies inside the input.
template <class F> void forEachTerm(const ConvGeometry &g, F f) {
  int64_t Cg = g.C / g.groups, Kg = g.K / g.groups;
  for (int64_t n = 0; n < g.N; ++n)
    for (int64_t k = 0; k < g.K; ++k) {
      int64_t grp = k / Kg;
      for (int64_t cl = 0; cl < Cg; ++cl) {
        int64_t c = grp * Cg + cl;
        for (int64_t oh = 0; oh < g.OH; ++oh)
          for (int64_t ow = 0; ow < g.OW; ++ow)
            for (int64_t i = 0; i < g.KH; ++i) {
              int64_t h = oh * g.strideH - g.padH + i * g.dilH;
              if (h < 0 || h >= g.H) continue;
              for (int64_t j = 0; j < g.KW; ++j) {
                int64_t w = ow * g.strideW - g.padW + j * g.dilW;
                if (w < 0 || w >= g.W) continue;
                f(n, k, c, cl, oh, ow, i, j, h, w);
              }
            }
      }
    }
}

/// The three primitives are the same sum of products x * w = y read three ways: `out` (X, W or Y)
/// accumulates the product of the other two operands a and b (in X, W, Y order).
enum Slot { X = 0, W = 1, Y = 2 };
RefTensor convTermsRef(const ConvGeometry &g, Slot out, const RefTensor &a, const RefTensor &b, DType dt) {
  RefTensor r(dt, out == X ? g.inputShape() : out == W ? g.weightShape() : g.outputShape());
  const RefTensor *operand[3] = {nullptr, nullptr, nullptr};
  int k = 0;
  for (Slot s : {X, W, Y})
    if (s != out) operand[s] = k++ == 0 ? &a : &b;
  forEachTerm(g, [&](int64_t n, int64_t kk, int64_t c, int64_t cl, int64_t oh, int64_t ow, int64_t i, int64_t j,
                     int64_t h, int64_t ww) {
    int64_t at[3] = {xAt(g, n, c, h, ww), wAt(g, kk, cl, i, j), yAt(g, n, kk, oh, ow)};
    double prod = 1;
    for (Slot s : {X, W, Y})
      if (s != out) prod *= operand[s]->data[at[s]];
    r.data[at[out]] += prod;
  });
  return r;
}

RefTensor convForwardRef(const ConvGeometry &g, const RefTensor &x, const RefTensor &w, DType dt) {
  return convTermsRef(g, Y, x, w, dt);
}
RefTensor convInputGradRef(const ConvGeometry &g, const RefTensor &dy, const RefTensor &w, DType dt) {
  return convTermsRef(g, X, w, dy, dt);
}
RefTensor convWeightGradRef(const ConvGeometry &g, const RefTensor &dy, const RefTensor &x, DType dt) {
  return convTermsRef(g, W, x, dy, dt);
}

/// Per-channel sums of dy over batch and space: the bias gradient.
RefTensor biasGradRef(const RefTensor &dy, DType dt) {
  int64_t N = dy.shape[0], K = dy.shape[1], S = N * K ? dy.numel() / (N * K) : 0;
  RefTensor db(dt, {K});
  for (int64_t n = 0; n < N; ++n)
    for (int64_t k = 0; k < K; ++k)
      for (int64_t s = 0; s < S; ++s) db.data[k] += dy.data[(n * K + k) * S + s];
  return db;
}

/// The regular geometry of a gradient primitive: from the x-shape, the w-shape and the y-shape.
ConvGeometry primitiveGeometry(const Node &n, const Shape &x, const Shape &w, const Shape &y, size_t sa) {
  ConvParams p;
  p.stride = n.intListArg(sa);
  p.padding = n.intListArg(sa + 1);
  p.dilation = n.intListArg(sa + 2);
  p.groups = n.intArg(sa + 3);
  size_t sr = x.size() - 2;
  for (auto *v : {&p.stride, &p.padding, &p.dilation})
    if (v->size() == 1) v->assign(sr, (*v)[0]);
  return regularGeometry(x, w, y, p);
}

/// Infers a gradient primitive: `given` (grad_output) must be what the regular convolution of
/// the x-shape `x` and the w-shape `w` produces.
void checkPrimitive(const Node &n, const Shape &x, const Shape &w, const Shape &dy, size_t sa) {
  ConvShapeResult r = shapeOf(n, x, w, sa, false);
  if (r.output != dy)
    nodeError(n, "grad_output " + shapeStr(dy) + " is not the output shape " + shapeStr(r.output) +
                     " of the convolution of " + shapeStr(x) + " with weight " + shapeStr(w));
}

} // namespace

void registerConvOps(OpRegistry &r) {
  {
    OpDef &d = r.add("convolution(Tensor input, Tensor weight, Tensor? bias, SymInt[] stride, SymInt[] padding, "
                     "SymInt[] dilation, bool transposed, SymInt[] output_padding, SymInt groups) -> Tensor",
                     OpCategory::Conv);
    d.primitive = true;
    d.infer = [](const Node &n) -> Types {
      TensorType x = argType(n, 0), w = argType(n, 1);
      ConvShapeResult s = shapeOf(n, x.shape, w.shape, 3, true);
      std::vector<size_t> idx = {0, 1};
      if (const Node *b = optTensor(n, 2)) {
        idx.push_back(2);
        if (b->type().shape != Shape{s.output[1]})
          nodeError(n, "Given weight of size " + shapeStr(w.shape) + ", expected bias to be 1-dimensional with " +
                           std::to_string(s.output[1]) + " elements, but got bias of size " +
                           shapeStr(b->type().shape) + " instead");
      }
      sameFloating(n, idx, "convolution");
      return {{x.dtype, s.output}};
    };
    setEval(d, [](const Node &n, const RefArgs &a) {
      const RefTensor &x = *a[0], &w = *a[1];
      ConvShapeResult s = shapeOf(n, x.shape, w.shape, 3, true);
      ConvGeometry g = regularGeometry(x.shape, w.shape, s.output, s.params);
      RefTensor y = s.params.transposed ? convInputGradRef(g, x, w, n.types[0].dtype)
                                        : convForwardRef(g, x, w, n.types[0].dtype);
      if (const RefTensor *b = a[2]) {
        int64_t K = y.shape[1], S = y.numel() / std::max<int64_t>(1, y.shape[0] * K);
        for (int64_t i = 0; i < y.numel(); ++i) y.data[i] += b->data[(i / S) % K];
      }
      return y;
    });
  }
  {
    OpDef &d = r.add("convolution_backward(Tensor grad_output, Tensor input, Tensor weight, SymInt[]? bias_sizes, "
                     "SymInt[] stride, SymInt[] padding, SymInt[] dilation, bool transposed, "
                     "SymInt[] output_padding, SymInt groups, bool[3] output_mask) -> (Tensor, Tensor, Tensor)",
                     OpCategory::Conv);
    d.infer = [](const Node &n) -> Types {
      TensorType dy = argType(n, 0), x = argType(n, 1), w = argType(n, 2);
      ConvShapeResult s = shapeOf(n, x.shape, w.shape, 4, true);
      if (dy.shape != s.output)
        nodeError(n, "grad_output " + dy.str() + " does not match the convolution's output shape " +
                         shapeStr(s.output));
      sameFloating(n, {0, 1, 2}, "convolution_backward");
      if (!n.isNoneArg(3) && n.intListArg(3) != std::vector<int64_t>{s.output[1]})
        nodeError(n, "bias_sizes must be [" + std::to_string(s.output[1]) + "]");
      return {x, w, {x.dtype, {s.output[1]}}};
    };
    d.eval = [](const Node &n, const RefArgs &a, const std::vector<std::vector<const RefTensor *>> &) {
      const RefTensor &dy = *a[0], &x = *a[1], &w = *a[2];
      ConvShapeResult s = shapeOf(n, x.shape, w.shape, 4, true);
      ConvGeometry g = regularGeometry(x.shape, w.shape, s.output, s.params);
      DType dt = n.types[0].dtype;
      const std::vector<bool> &mask = std::get<std::vector<bool>>(n.args[10]);
      // Transposed: the op's input is the regular convolution's output (and vice versa).
      RefTensor gi = !mask[0] ? RefTensor(dt, x.shape)
                     : s.params.transposed ? convForwardRef(g, dy, w, dt)
                                           : convInputGradRef(g, dy, w, dt);
      RefTensor gw = !mask[1] ? RefTensor(dt, w.shape)
                     : s.params.transposed ? convWeightGradRef(g, x, dy, dt)
                                           : convWeightGradRef(g, dy, x, dt);
      RefTensor gb = mask[2] ? biasGradRef(dy, dt) : RefTensor(dt, {s.output[1]});
      return std::vector<RefTensor>{gi, gw, gb};
    };
  }
  {
    OpDef &d = r.add("aotc::conv_input_grad(Tensor grad_output, Tensor weight, SymInt[] input_size, "
                     "SymInt[] stride, SymInt[] padding, SymInt[] dilation, SymInt groups) -> Tensor",
                     OpCategory::Conv);
    d.primitive = true;
    d.infer = [](const Node &n) -> Types {
      TensorType dy = argType(n, 0), w = argType(n, 1);
      Shape x = n.intListArg(2);
      checkPrimitive(n, x, w.shape, dy.shape, 3);
      sameFloating(n, {0, 1}, "conv_input_grad");
      return {{dy.dtype, x}};
    };
    setEval(d, [](const Node &n, const RefArgs &a) {
      ConvGeometry g = primitiveGeometry(n, n.intListArg(2), a[1]->shape, a[0]->shape, 3);
      return convInputGradRef(g, *a[0], *a[1], n.types[0].dtype);
    });
  }
  {
    OpDef &d = r.add("aotc::conv_weight_grad(Tensor grad_output, Tensor input, SymInt[] weight_size, "
                     "SymInt[] stride, SymInt[] padding, SymInt[] dilation, SymInt groups) -> Tensor",
                     OpCategory::Conv);
    d.primitive = true;
    d.infer = [](const Node &n) -> Types {
      TensorType dy = argType(n, 0), x = argType(n, 1);
      Shape w = n.intListArg(2);
      checkPrimitive(n, x.shape, w, dy.shape, 3);
      sameFloating(n, {0, 1}, "conv_weight_grad");
      return {{dy.dtype, w}};
    };
    setEval(d, [](const Node &n, const RefArgs &a) {
      ConvGeometry g = primitiveGeometry(n, a[1]->shape, n.intListArg(2), a[0]->shape, 3);
      return convWeightGradRef(g, *a[0], *a[1], n.types[0].dtype);
    });
  }
}

} // namespace ops
} // namespace aotc
