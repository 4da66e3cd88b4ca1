//===- Composite.cpp - linear, layer norm, softmax family, losses, backward ops -===//
//
// Ops that Decompose splits before autodiff (linear, layer_norm, softmax.int,
// log_softmax.int, cross_entropy_loss, nll_loss*, mse_loss) or that keep a rule
// and are lowered after it (_softmax, _log_softmax, native_layer_norm and the
// backward ops). Formulas and shapes:
//  * native_layer_norm: aten/src/ATen/native/layer_norm.cpp; mean/rstd have the
//    input's leading dims and size 1 in every normalized dim; var is biased;
//    rstd = 1/sqrt(var + eps).
//  * native_layer_norm_backward: aten/src/ATen/native/cpu/layer_norm_kernel.cpp:
//    dx = rstd * (g - mean(g) - xhat * mean(g * xhat)) with g = dy * w; dw = sum(dy * xhat);
//    db = sum(dy). Results masked off by output_mask are still computed here
//    (ATen leaves them undefined; nothing may read them).
//  * _softmax_backward_data: dx = y * (dy - sum(dy * y)); _log_softmax_backward_data:
//    dx = dy - exp(y) * sum(dy) (aten/src/ATen/native/SoftMax.cpp).
//  * nll_loss_forward: aten/src/ATen/native/LossNLL.cpp (reduction None=0, Mean=1,
//    Sum=2; ignore_index rows weigh 0; mean divides by the total weight;
//    total_weight is 0 for reduction none).
//  * gelu_backward: aten/src/ATen/native/cpu/Activation.cpp GeluBackwardKernelImpl.
//===----------------------------------------------------------------------===//
#include "Ops.h"

namespace aotc {
namespace ops {
namespace {

using Types = std::vector<TensorType>;
using Lists = std::vector<std::vector<const RefTensor *>>;


int64_t reductionArg(const Node &n, size_t i) {
  int64_t r = n.intArg(i);
  if (r < 0 || r > 2) nodeError(n, "reduction must be 0 (none), 1 (mean) or 2 (sum), got " + std::to_string(r));
  return r;
}

//===-- softmax family ---------------------------------------------------===//

/// softmax (log=false) or log_softmax of `x` along `dim` into dtype `dt`.
/// softmax / log_softmax along `dim`; `safe`: a row whose every value is -inf gives 0 (torch's
/// _safe_softmax) instead of NaN.
RefTensor softmaxRef(const RefTensor &x, int64_t dim, DType dt, bool log, bool safe = false) {
  RefTensor out(dt, x.shape);
  int64_t d = x.shape.empty() ? 0 : dim;
  Along a(x.shape, d);
  for (int64_t o = 0; o < a.outer; ++o)
    for (int64_t i = 0; i < a.inner; ++i) {
      bool allMasked = safe;
      for (int64_t j = 0; allMasked && j < a.len; ++j) allMasked = x.data[a.at(o, j, i)] == -INFINITY;
      if (allMasked) {
        for (int64_t j = 0; j < a.len; ++j) out.data[a.at(o, j, i)] = 0.0;
        continue;
      }
      double m = -INFINITY;
      for (int64_t j = 0; j < a.len; ++j) m = std::max(m, x.data[a.at(o, j, i)]);
      double s = 0;
      for (int64_t j = 0; j < a.len; ++j) s += std::exp(x.data[a.at(o, j, i)] - m);
      for (int64_t j = 0; j < a.len; ++j) {
        double v = x.data[a.at(o, j, i)] - m;
        out.data[a.at(o, j, i)] = log ? v - std::log(s) : std::exp(v) / s;
      }
    }
  return out;
}

void softmaxOp(OpRegistry &r, const char *schema, bool log, bool hasDtype, bool safe = false) {
  OpDef &d = r.add(schema, OpCategory::Composite);
  d.infer = [hasDtype](const Node &n) -> Types {
    TensorType t = argType(n, 0);
    wrapDimOrError(n, n.intArg(1), t.rank());
    if (hasDtype) t.dtype = dtypeArg(n, 2).value_or(t.dtype);
    requireFloating(n, t.dtype, "softmax");
    return {t};
  };
  setEval(d, [log, safe](const Node &n, const RefArgs &a) {
    const RefTensor &x = *a.at(0);
    return softmaxRef(x, *wrapDim(n.intArg(1), (int64_t)x.shape.size()), n.types[0].dtype, log, safe);
  });
}

void softmaxBackwardOp(OpRegistry &r, const char *schema, bool log) {
  OpDef &d = r.add(schema, OpCategory::Composite);
  d.infer = [](const Node &n) -> Types {
    TensorType g = argType(n, 0), y = argType(n, 1);
    if (g.shape != y.shape) nodeError(n, "grad_output " + g.str() + " and output " + y.str() + " differ in shape");
    wrapDimOrError(n, n.intArg(2), g.rank());
    DType dt = std::get<DTypeLit>(n.args.at(3)).dtype;
    requireFloating(n, dt, "softmax backward");
    return {{dt, g.shape}};
  };
  setEval(d, [log](const Node &n, const RefArgs &a) {
    const RefTensor &g = *a.at(0), &y = *a.at(1);
    RefTensor out(n.types[0].dtype, g.shape);
    Along al(g.shape, g.shape.empty() ? 0 : *wrapDim(n.intArg(2), (int64_t)g.shape.size()));
    for (int64_t o = 0; o < al.outer; ++o)
      for (int64_t i = 0; i < al.inner; ++i) {
        double s = 0;
        for (int64_t j = 0; j < al.len; ++j) {
          int64_t k = al.at(o, j, i);
          s += log ? g.data[k] : g.data[k] * y.data[k];
        }
        for (int64_t j = 0; j < al.len; ++j) {
          int64_t k = al.at(o, j, i);
          out.data[k] = log ? g.data[k] - std::exp(y.data[k]) * s : y.data[k] * (g.data[k] - s);
        }
      }
    return out;
  });
}

//===-- layer norm ---------------------------------------------------------===//

/// Checks normalized_shape against the input; returns (M rows, N normalized elements).
std::pair<int64_t, int64_t> layerNormDims(const Node &n, const TensorType &in, const Shape &ns, const Node *w,
                                          const Node *b) {
  if (ns.empty()) nodeError(n, "layer_norm: normalized_shape must have at least one dimension");
  int64_t k = (int64_t)ns.size(), axis = in.rank() - k;
  if (axis < 0 || !std::equal(ns.begin(), ns.end(), in.shape.begin() + axis)) {
    std::string exp = "[*";
    for (int64_t s : ns) exp += ", " + std::to_string(s);
    nodeError(n, "Given normalized_shape=" + shapeStr(ns) + ", expected input with shape " + exp +
                     "], but got input of size" + shapeStr(in.shape));
  }
  for (const Node *p : {w, b})
    if (p && p->type().shape != ns)
      nodeError(n, "layer_norm: weight/bias '" + p->name + "' has shape " + shapeStr(p->type().shape) +
                       ", expected " + shapeStr(ns));
  requireFloating(n, in.dtype, "layer_norm");
  // ATen's layer_norm kernels take weight/bias of the input's dtype (libFuzzer find: an
  // i64 weight made the backward's grad_weight i64, which the lower rule computed in f32).
  for (const Node *p : {w, b})
    if (p && p->type().dtype != in.dtype)
      nodeError(n, "layer_norm: expected weight/bias '" + p->name + "' of dtype " + dtypeTorchName(in.dtype) +
                       ", got " + p->type().str());
  int64_t N = numelOf(ns);
  return {N ? in.numel() / N : 0, N};
}

/// Forward: out, mean (M), rstd (M).
void layerNormRef(const RefTensor &x, const RefTensor *w, const RefTensor *b, int64_t M, int64_t N, double eps,
                  RefTensor &out, RefTensor &mean, RefTensor &rstd) {
  for (int64_t m = 0; m < M; ++m) {
    const double *row = &x.data[m * N];
    double mu = 0, var = 0;
    for (int64_t j = 0; j < N; ++j) mu += row[j];
    mu /= (double)N;
    for (int64_t j = 0; j < N; ++j) var += (row[j] - mu) * (row[j] - mu);
    var /= (double)N;
    double rs = 1.0 / std::sqrt(var + eps);
    mean.data[m] = mu;
    rstd.data[m] = rs;
    for (int64_t j = 0; j < N; ++j)
      out.data[m * N + j] = (row[j] - mu) * rs * (w ? w->data[j] : 1.0) + (b ? b->data[j] : 0.0);
  }
}

Types nativeLayerNormInfer(const Node &n) {
  TensorType in = argType(n, 0);
  const Shape &ns = n.intListArg(1);
  layerNormDims(n, in, ns, optTensor(n, 2), optTensor(n, 3));
  Shape stat(in.shape.begin(), in.shape.end() - ns.size());
  stat.resize(in.shape.size(), 1);
  return {in, {in.dtype, stat}, {in.dtype, stat}};
}

//===-- losses -------------------------------------------------------------===//

/// Checks (self [C] | [N, C] | [N, C, d1, ...], target [] | [N] | [N, d1, ...]) of nll_loss
/// (the class dim is 1, or 0 for a 1-D input: LossNLL.cpp / nll_loss_nd); returns
/// (number of class vectors, classes).
std::pair<int64_t, int64_t> nllDims(const Node &n, const TensorType &x, const TensorType &t, const Node *w) {
  if (x.rank() < 1) nodeError(n, "nll_loss expects an input with at least 1 dimension, got " + x.str());
  requireFloating(n, x.dtype, "nll_loss");
  if (t.dtype != DType::I64) nodeError(n, std::string("nll_loss expects int64 targets, got ") + dtypeTorchName(t.dtype));
  int64_t cdim = x.rank() == 1 ? 0 : 1;
  Shape ts = x.shape;
  ts.erase(ts.begin() + cdim);
  if (t.shape != ts) nodeError(n, "nll_loss: target " + t.str() + " does not match input " + x.str());
  int64_t C = x.shape[cdim];
  if (w && w->type().shape != Shape{C})
    nodeError(n, "nll_loss: weight must have shape [" + std::to_string(C) + "], got " + w->type().str());
  return {numelOf(ts), C};
}

/// Returns (output, total_weight) of nll_loss_forward on log-probabilities `lp`.
std::pair<RefTensor, RefTensor> nllRef(const Node &n, const RefTensor &lp, const RefTensor &tgt, const RefTensor *w,
                                       int64_t reduction, int64_t ignore, const TensorType &outT) {
  // Class dim 1 (0 for 1-D); S = elements per class vector after it (1 for <= 2-D).
  int64_t cdim = lp.shape.size() == 1 ? 0 : 1, C = lp.shape[cdim];
  int64_t S = 1;
  for (size_t d = cdim + 1; d < lp.shape.size(); ++d) S *= lp.shape[d];
  int64_t B = (int64_t)tgt.data.size();
  RefTensor out(outT.dtype, outT.shape), tw(outT.dtype, {});
  double sum = 0, wsum = 0;
  for (int64_t b = 0; b < B; ++b) {
    int64_t t = (int64_t)tgt.data[b];
    double l = 0, wt = 0;
    if (t != ignore) {
      if (t < 0 || t >= C)
        nodeError(n, "target " + std::to_string(t) + " is out of bounds for " + std::to_string(C) + " classes");
      wt = w ? w->data[t] : 1.0;
      l = -wt * lp.data[(b / S) * C * S + t * S + b % S];
    }
    if (reduction == 0) out.data[b] = l;
    sum += l;
    wsum += wt;
  }
  if (reduction == 1) out.data[0] = sum / wsum;
  if (reduction == 2) out.data[0] = sum;
  tw.data[0] = reduction == 0 ? 0.0 : wsum;
  return {out, tw};
}

/// Result shape of nll_loss / cross_entropy: [] when reduced, else the input without its
/// class dim (1, or 0 for a 1-D input).
Shape lossShape(const TensorType &x, int64_t reduction) {
  if (reduction != 0 || x.rank() < 2) return {};
  Shape s = x.shape;
  s.erase(s.begin() + 1);
  return s;
}

double geluGrad(double x, const std::string &approx) {
  if (approx == "tanh") {
    const double kBeta = M_SQRT2 * M_2_SQRTPI * 0.5, kKappa = 0.044715;
    double inner = kBeta * (x + kKappa * x * x * x), th = std::tanh(inner);
    return 0.5 * (1 + th) + 0.5 * x * (1 - th * th) * kBeta * (1 + 3 * kKappa * x * x);
  }
  double cdf = 0.5 * (1 + std::erf(x * M_SQRT1_2));
  double pdf = std::exp(-0.5 * x * x) * M_2_SQRTPI * M_SQRT1_2 * 0.5;
  return cdf + x * pdf;
}

} // namespace

void registerCompositeOps(OpRegistry &r) {
  {
    // linear(x, W, b) = x @ W^T + b; x [*, in], W [out, in], b [out].
    OpDef &d = r.add("linear(Tensor input, Tensor weight, Tensor? bias=None) -> Tensor", OpCategory::Composite);
    d.infer = [](const Node &n) -> Types {
      TensorType x = argType(n, 0), w = argType(n, 1);
      if (x.rank() < 1 || w.rank() != 2 || x.shape.back() != w.shape[1])
        nodeError(n, "linear: input " + x.str() + " and weight " + w.str() + " are incompatible");
      if (x.dtype != w.dtype) nodeError(n, "linear: input and weight dtypes differ");
      Shape out = x.shape;
      out.back() = w.shape[0];
      if (const Node *b = optTensor(n, 2)) {
        auto bs = broadcastShapes(b->type().shape, out);
        if (!bs || *bs != out) nodeError(n, "linear: bias " + b->type().str() + " does not broadcast to " + shapeStr(out));
      }
      return {{x.dtype, out}};
    };
    setEval(d, [](const Node &n, const RefArgs &a) {
      const RefTensor &x = *a.at(0), &w = *a.at(1);
      const RefTensor *b = a.at(2);
      RefTensor out(n.types[0].dtype, n.types[0].shape);
      int64_t O = w.shape[0], I = w.shape[1], M = I ? x.numel() / I : 0;
      std::vector<int64_t> bmap;
      if (b) bmap = broadcastIndexMap(b->shape, out.shape);
      for (int64_t m = 0; m < M; ++m)
        for (int64_t o = 0; o < O; ++o) {
          double s = 0;
          for (int64_t i = 0; i < I; ++i) s += x.data[m * I + i] * w.data[o * I + i];
          out.data[m * O + o] = s + (b ? b->data[bmap[m * O + o]] : 0.0);
        }
      return out;
    });
  }
  {
    OpDef &d = r.add("layer_norm(Tensor input, SymInt[] normalized_shape, Tensor? weight=None, Tensor? bias=None, "
                     "float eps=1e-05, bool cudnn_enable=True) -> Tensor",
                     OpCategory::Composite);
    d.infer = [](const Node &n) -> Types { return {nativeLayerNormInfer(n)[0]}; };
    setEval(d, [](const Node &n, const RefArgs &a) {
      const RefTensor &x = *a.at(0);
      int64_t N = numelOf(n.intListArg(1)), M = N ? x.numel() / N : 0;
      RefTensor out(n.types[0].dtype, x.shape), mean(DType::F64, {M}), rstd(DType::F64, {M});
      layerNormRef(x, a.at(2), a.at(3), M, N, n.scalarArg(4), out, mean, rstd);
      return out;
    });
  }
  {
    OpDef &d = r.add("native_layer_norm(Tensor input, SymInt[] normalized_shape, Tensor? weight, Tensor? bias, "
                     "float eps) -> (Tensor, Tensor, Tensor)",
                     OpCategory::Composite);
    d.infer = nativeLayerNormInfer;
    d.eval = [](const Node &n, const RefArgs &a, const Lists &) {
      const RefTensor &x = *a.at(0);
      int64_t N = numelOf(n.intListArg(1)), M = N ? x.numel() / N : 0;
      RefTensor out(n.types[0].dtype, x.shape), mean(n.types[1].dtype, n.types[1].shape),
          rstd(n.types[2].dtype, n.types[2].shape);
      layerNormRef(x, a.at(2), a.at(3), M, N, n.scalarArg(4), out, mean, rstd);
      return std::vector<RefTensor>{out, mean, rstd};
    };
  }
  {
    OpDef &d = r.add("native_layer_norm_backward(Tensor grad_out, Tensor input, SymInt[] normalized_shape, "
                     "Tensor mean, Tensor rstd, Tensor? weight, Tensor? bias, bool[3] output_mask) -> "
                     "(Tensor, Tensor, Tensor)",
                     OpCategory::Composite);
    d.infer = [](const Node &n) -> Types {
      TensorType g = argType(n, 0), in = argType(n, 1);
      const Shape &ns = n.intListArg(2);
      const Node *w = optTensor(n, 5), *b = optTensor(n, 6);
      auto [M, N] = layerNormDims(n, in, ns, w, b);
      if (g.shape != in.shape) nodeError(n, "grad_out " + g.str() + " does not match input " + in.str());
      for (size_t i : {3, 4})
        if (argType(n, i).numel() != M)
          nodeError(n, "mean/rstd must have " + std::to_string(M) + " elements, got " + argType(n, i).str());
      TensorType wt = w ? w->type() : TensorType{in.dtype, ns};
      TensorType bt = b ? b->type() : TensorType{in.dtype, ns};
      return {in, wt, bt};
    };
    d.eval = [](const Node &n, const RefArgs &a, const Lists &) {
      const RefTensor &dy = *a.at(0), &x = *a.at(1), &mean = *a.at(3), &rstd = *a.at(4);
      const RefTensor *w = a.at(5);
      int64_t N = numelOf(n.intListArg(2)), M = N ? x.numel() / N : 0;
      RefTensor dx(n.types[0].dtype, n.types[0].shape), dw(n.types[1].dtype, n.types[1].shape),
          db(n.types[2].dtype, n.types[2].shape);
      for (int64_t m = 0; m < M; ++m) {
        double mg = 0, mgx = 0;
        for (int64_t j = 0; j < N; ++j) {
          int64_t k = m * N + j;
          double xh = (x.data[k] - mean.data[m]) * rstd.data[m];
          double g = dy.data[k] * (w ? w->data[j] : 1.0);
          mg += g;
          mgx += g * xh;
          dw.data[j] += dy.data[k] * xh;
          db.data[j] += dy.data[k];
        }
        mg /= (double)N;
        mgx /= (double)N;
        for (int64_t j = 0; j < N; ++j) {
          int64_t k = m * N + j;
          double xh = (x.data[k] - mean.data[m]) * rstd.data[m];
          double g = dy.data[k] * (w ? w->data[j] : 1.0);
          dx.data[k] = rstd.data[m] * (g - mg - xh * mgx);
        }
      }
      return std::vector<RefTensor>{dx, dw, db};
    };
  }
  softmaxOp(r, "softmax.int(Tensor self, int dim, ScalarType? dtype=None) -> Tensor", false, true);
  softmaxOp(r, "log_softmax.int(Tensor self, int dim, ScalarType? dtype=None) -> Tensor", true, true);
  softmaxOp(r, "_softmax(Tensor self, int dim, bool half_to_float) -> Tensor", false, false);
  softmaxOp(r, "_log_softmax(Tensor self, int dim, bool half_to_float) -> Tensor", true, false);
  // torch's _safe_softmax (what SDPA's math path uses): 0 for a row whose every score is -inf.
  // Decompose turns it (and the where(all(x == -inf), 0, _softmax(x)) that torch's own
  // decomposition leaves) into aotc::safe_softmax, which keeps its derivative through autodiff
  // (one saved tensor, the output, for both its backward and the next bmm's).
  softmaxOp(r, "_safe_softmax(Tensor self, int dim, ScalarType? dtype=None) -> Tensor", false, true, true);
  softmaxOp(r, "aotc::safe_softmax(Tensor self, int dim) -> Tensor", false, false, true);
  softmaxBackwardOp(r, "_softmax_backward_data(Tensor grad_output, Tensor output, int dim, ScalarType input_dtype) -> Tensor",
                    false);
  softmaxBackwardOp(
      r, "_log_softmax_backward_data(Tensor grad_output, Tensor output, int dim, ScalarType input_dtype) -> Tensor", true);
  {
    OpDef &d = r.add("nll_loss_forward(Tensor self, Tensor target, Tensor? weight, int reduction, SymInt ignore_index) "
                     "-> (Tensor output, Tensor total_weight)",
                     OpCategory::Composite);
    d.infer = [](const Node &n) -> Types {
      TensorType x = argType(n, 0);
      nllDims(n, x, argType(n, 1), optTensor(n, 2));
      return {{x.dtype, lossShape(x, reductionArg(n, 3))}, {x.dtype, {}}};
    };
    d.eval = [](const Node &n, const RefArgs &a, const Lists &) {
      auto [o, tw] = nllRef(n, *a.at(0), *a.at(1), a.at(2), n.intArg(3), n.intArg(4), n.types[0]);
      return std::vector<RefTensor>{o, tw};
    };
  }
  {
    OpDef &d = r.add("nll_loss(Tensor self, Tensor target, Tensor? weight=None, int reduction=Mean, "
                     "SymInt ignore_index=-100) -> Tensor",
                     OpCategory::Composite);
    d.infer = [](const Node &n) -> Types {
      TensorType x = argType(n, 0);
      nllDims(n, x, argType(n, 1), optTensor(n, 2));
      return {{x.dtype, lossShape(x, reductionArg(n, 3))}};
    };
    setEval(d, [](const Node &n, const RefArgs &a) {
      return nllRef(n, *a.at(0), *a.at(1), a.at(2), n.intArg(3), n.intArg(4), n.types[0]).first;
    });
  }
  {
    // cross_entropy = nll_loss(log_softmax(x, class dim)) for class-index targets;
    // for probability targets (same shape as x): -sum_c w_c * p_c * log_softmax_c,
    // mean over the batch (torch/nn/functional.py, LossNLL.cpp cross_entropy).
    OpDef &d = r.add("cross_entropy_loss(Tensor self, Tensor target, Tensor? weight=None, int reduction=Mean, "
                     "SymInt ignore_index=-100, float label_smoothing=0.0) -> Tensor",
                     OpCategory::Composite);
    d.infer = [](const Node &n) -> Types {
      TensorType x = argType(n, 0), t = argType(n, 1);
      int64_t red = reductionArg(n, 3);
      if (isFloating(t.dtype)) {
        if (t.shape != x.shape || t.dtype != x.dtype)
          nodeError(n, "cross_entropy: probability target " + t.str() + " must match input " + x.str());
        if (x.rank() < 1) nodeError(n, "cross_entropy expects an input with at least 1 dimension, got " + x.str());
        int64_t C = x.shape[x.rank() == 1 ? 0 : 1];
        if (const Node *w = optTensor(n, 2); w && w->type().shape != Shape{C})
          nodeError(n, "cross_entropy: weight must have shape [" + std::to_string(C) + "]");
      } else {
        nllDims(n, x, t, optTensor(n, 2));
        if (n.scalarArg(5) != 0.0)
          nodeError(n, "cross_entropy: label_smoothing with class-index targets is not supported yet");
      }
      return {{x.dtype, lossShape(x, red)}};
    };
    setEval(d, [](const Node &n, const RefArgs &a) {
      const RefTensor &x = *a.at(0), &t = *a.at(1);
      const RefTensor *w = a.at(2);
      int64_t cdim = x.shape.size() >= 2 ? 1 : 0;
      RefTensor lp = softmaxRef(x, cdim, DType::F64, true);
      if (!isFloating(t.dtype)) return nllRef(n, lp, t, w, n.intArg(3), n.intArg(4), n.types[0]).first;
      int64_t C = x.shape[cdim], S = 1;
      for (size_t d = cdim + 1; d < x.shape.size(); ++d) S *= x.shape[d];
      int64_t B = numelOf(x.shape) / std::max<int64_t>(C, 1);
      double eps = n.scalarArg(5), sum = 0;
      RefTensor out(n.types[0].dtype, n.types[0].shape);
      for (int64_t b = 0; b < B; ++b) {
        double l = 0;
        for (int64_t c = 0; c < C; ++c) {
          int64_t k = (b / S) * C * S + c * S + b % S;
          double p = t.data[k] * (1 - eps) + eps / (double)C;
          l -= (w ? w->data[c] : 1.0) * p * lp.data[k];
        }
        if (n.intArg(3) == 0) out.data[b] = l;
        sum += l;
      }
      if (n.intArg(3) == 1) out.data[0] = sum / (double)B;
      if (n.intArg(3) == 2) out.data[0] = sum;
      return out;
    });
  }
  {
    // aten/src/ATen/native/LossMultiLabelMargin.cpp: per frame (a row of [N, C], or the whole
    // [C] / 0-d input), the targets are target[j] up to the first -1; the loss is
    // sum over those j and the non-target classes i of max(0, 1 - (x[y_j] - x[i])), over C.
    OpDef &d = r.add("multilabel_margin_loss(Tensor self, Tensor target, int reduction=Mean) -> Tensor",
                     OpCategory::Composite);
    d.infer = [](const Node &n) -> Types {
      TensorType x = argType(n, 0), t = argType(n, 1);
      requireFloating(n, x.dtype, "multilabel_margin_loss");
      if (x.rank() > 2)
        nodeError(n, "multilabel_margin_loss: expected a 0-d, 1-d or 2-d input, got " + x.str());
      if (t.dtype != DType::I64 || t.shape != x.shape)
        nodeError(n, "multilabel_margin_loss: inconsistent target: expected an int64 tensor of the input's shape " +
                         shapeStr(x.shape) + ", got " + t.str());
      bool none = reductionArg(n, 2) == 0;
      return {{x.dtype, none && x.rank() == 2 ? Shape{x.shape[0]} : Shape{}}};
    };
    setEval(d, [](const Node &n, const RefArgs &a) {
      const RefTensor &x = *a.at(0), &t = *a.at(1);
      int64_t frames = x.shape.size() == 2 ? x.shape[0] : 1, C = x.shape.empty() ? 1 : x.shape.back();
      RefTensor out(n.types[0].dtype, n.types[0].shape);
      double total = 0;
      for (int64_t f = 0; f < frames; ++f) {
        const double *xr = &x.data[f * C], *tr = &t.data[f * C];
        std::vector<bool> isTarget(C, false);
        int64_t valid = 0;
        for (; valid < C && tr[valid] != -1; ++valid) {
          int64_t y = (int64_t)tr[valid];
          if (y < 0 || y >= C) nodeError(n, "multilabel_margin_loss: target " + std::to_string(y) + " is out of range");
          isTarget[y] = true;
        }
        double s = 0;
        for (int64_t j = 0; j < valid; ++j)
          for (int64_t i = 0; i < C; ++i)
            if (!isTarget[i]) s += std::max(0.0, 1.0 - (xr[(int64_t)tr[j]] - xr[i]));
        s /= (double)C;
        if (out.numel() == frames && n.intArg(2) == 0) out.data[f] = s;
        total += s;
      }
      int64_t red = n.intArg(2);
      if (red != 0 || out.shape.empty()) out.data[0] = red == 1 ? total / (double)frames : total;
      return out;
    });
  }
  {
    OpDef &d = r.add("mse_loss(Tensor self, Tensor target, int reduction=Mean) -> Tensor", OpCategory::Composite);
    d.infer = [](const Node &n) -> Types {
      Shape s = broadcastArgs(n, {0, 1});
      DType dt = resultType(n, {0, 1});
      requireFloating(n, dt, "mse_loss");
      return {{dt, reductionArg(n, 2) == 0 ? s : Shape{}}};
    };
    setEval(d, [](const Node &n, const RefArgs &a) {
      Shape s = broadcastArgs(n, {0, 1});
      Val x = valArg(n, a, 0, s), y = valArg(n, a, 1, s);
      int64_t red = n.intArg(2), N = numelOf(s);
      RefTensor out(n.types[0].dtype, n.types[0].shape);
      double sum = 0;
      for (int64_t k = 0; k < N; ++k) {
        double dv = x.at(k) - y.at(k);
        if (red == 0) out.data[k] = dv * dv;
        sum += dv * dv;
      }
      if (red == 1) out.data[0] = sum / (double)N;
      if (red == 2) out.data[0] = sum;
      return out;
    });
  }
  {
    OpDef &d = r.add("gelu_backward(Tensor grad_output, Tensor self, *, str approximate='none') -> Tensor",
                     OpCategory::Composite);
    d.infer = [](const Node &n) -> Types {
      const std::string &ap = std::get<std::string>(n.args.at(2));
      if (ap != "none" && ap != "tanh") nodeError(n, "approximate must be 'none' or 'tanh', got '" + ap + "'");
      DType dt = resultType(n, {0, 1});
      requireFloating(n, dt, "gelu_backward");
      return {{dt, broadcastArgs(n, {0, 1})}};
    };
    setEval(d, [](const Node &n, const RefArgs &a) {
      std::string ap = std::get<std::string>(n.args[2]);
      return mapArgs(n, a, {0, 1}, [&](const double *v) { return v[0] * geluGrad(v[1], ap); });
    });
  }
  {
    // threshold_backward(g, x, t) = x <= t ? 0 : g (relu's backward with t = 0).
    OpDef &d = r.add("threshold_backward(Tensor grad_output, Tensor self, Scalar threshold) -> Tensor",
                     OpCategory::Composite);
    d.infer = [](const Node &n) -> Types { return {{resultType(n, {0, 1}), broadcastArgs(n, {0, 1})}}; };
    setEval(d, [](const Node &n, const RefArgs &a) {
      double t = n.scalarArg(2);
      return mapArgs(n, a, {0, 1}, [t](const double *v) { return v[1] <= t ? 0.0 : v[0]; });
    });
  }
}

} // namespace ops
} // namespace aotc
