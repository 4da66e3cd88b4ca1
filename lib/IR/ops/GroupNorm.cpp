//===- GroupNorm.cpp - native_group_norm (+ backward), native_batch_norm_backward -===//
//
// native_group_norm(input, weight?, bias?, N, C, HxW, group, eps) -> (out, mean, rstd)
// (nn.GroupNorm through torch.export): input [N, C, *] with HxW = prod(*); the statistics are
// per (n, g) over the D = C/group * HxW elements of group g's channels: mean, biased variance,
// rstd = 1/sqrt(var + eps); out = (x - mean) rstd w[c] + b[c]; mean, rstd [N, group]
// (aten/src/ATen/native/group_norm.cpp, cpu/group_norm_kernel.cpp).
// native_group_norm_backward(grad_out, input, mean, rstd, weight?, N, C, HxW, group,
// output_mask) -> (d_input, d_weight, d_bias): with xhat = (x - mean) rstd and d = g w:
//   d_input = rstd (d - sum_D(d)/D - xhat sum_D(d xhat)/D), d_weight = sum(g xhat), d_bias = sum(g)
// (sums over n and HxW per channel). Results masked off are computed anyway (ATen leaves them
// undefined; nothing may read them).
// native_batch_norm_backward(grad_out, input, weight?, running_mean?, running_var?, save_mean?,
// save_invstd?, train, eps, output_mask): train: the saved statistics and
//   d_input = invstd (d - sum(d)/M - xhat sum(d xhat)/M);
// eval: mean = running_mean, invstd = 1/sqrt(running_var + eps), d_input = d invstd; d_weight =
// sum(g xhat), d_bias = sum(g) per channel (aten/src/ATen/native/Normalization.cpp).
//===----------------------------------------------------------------------===//
#include "Ops.h"

namespace aotc {
namespace ops {
namespace {

using Types = std::vector<TensorType>;
using Lists = std::vector<std::vector<const RefTensor *>>;

struct GnDims {
  int64_t N, C, S, G; ///< S = HxW
};

/// Checks native_group_norm(_backward)'s sizes: input at arg 0 (or `inArg`), N, C, HxW, group
/// at `na`.. na+3, weight (optional) at `wa`.
GnDims checkGroupNorm(const Node &n, size_t inArg, size_t na, size_t wa) {
  TensorType x = argType(n, inArg);
  requireFloating(n, x.dtype, "group_norm");
  GnDims g{n.intArg(na), n.intArg(na + 1), n.intArg(na + 2), n.intArg(na + 3)};
  if (x.rank() < 2 || x.shape[0] != g.N || x.shape[1] != g.C || g.N * g.C * g.S != x.numel())
    nodeError(n, "group_norm: input " + x.str() + " does not match N=" + std::to_string(g.N) + ", C=" +
                     std::to_string(g.C) + ", HxW=" + std::to_string(g.S));
  if (g.G <= 0 || g.C % g.G)
    nodeError(n, "Expected number of channels in input to be divisible by num_groups, but got input of shape " +
                     shapeStr(x.shape) + " and num_groups=" + std::to_string(g.G));
  for (size_t i : {wa, wa + 1}) {
    if (i == wa + 1 && inArg == 1) break; // the backward has no bias
    const Node *t = optTensor(n, i);
    if (t && (t->type().shape != Shape{g.C} || t->type().dtype != x.dtype))
      nodeError(n, "group_norm: expected " + n.op->schema.args[i].name + " of type " + TensorType{x.dtype, {g.C}}.str() +
                       ", got " + t->type().str());
  }
  return g;
}

/// Channels [N, C, S] of batch norm's input [N, C, *].
struct BnDims {
  int64_t N, C, S;
  explicit BnDims(const Shape &s) : N(s[0]), C(s[1]), S(N * C ? numelOf(s) / (N * C) : 0) {}
  int64_t at(int64_t i, int64_t c, int64_t s) const { return (i * C + c) * S + s; }
};

} // namespace

void registerGroupNormOps(OpRegistry &r) {
  {
    OpDef &d = r.add("native_group_norm(Tensor input, Tensor? weight, Tensor? bias, SymInt N, SymInt C, "
                     "SymInt HxW, int group, float eps) -> (Tensor, Tensor, Tensor)",
                     OpCategory::Composite);
    d.infer = [](const Node &n) -> Types {
      GnDims g = checkGroupNorm(n, 0, 3, 1);
      TensorType x = argType(n, 0);
      return {x, {x.dtype, {g.N, g.G}}, {x.dtype, {g.N, g.G}}};
    };
    d.eval = [](const Node &n, const RefArgs &a, const Lists &) {
      const RefTensor &x = *a[0];
      const RefTensor *w = a[1], *b = a[2];
      GnDims g{n.intArg(3), n.intArg(4), n.intArg(5), n.intArg(6)};
      double eps = n.scalarArg(7);
      DType dt = n.types[0].dtype;
      RefTensor out(dt, x.shape), mean(dt, {g.N, g.G}), rstd(dt, {g.N, g.G});
      int64_t cg = g.C / g.G, D = cg * g.S;
      for (int64_t i = 0; i < g.N; ++i)
        for (int64_t k = 0; k < g.G; ++k) {
          const double *p = x.data.data() + (i * g.C + k * cg) * g.S;
          double mu = 0, var = 0;
          for (int64_t j = 0; j < D; ++j) mu += p[j];
          mu /= (double)D;
          for (int64_t j = 0; j < D; ++j) var += (p[j] - mu) * (p[j] - mu);
          var /= (double)D;
          double rs = 1.0 / std::sqrt(var + eps);
          mean.data[i * g.G + k] = mu;
          rstd.data[i * g.G + k] = rs;
          for (int64_t j = 0; j < D; ++j) {
            int64_t c = k * cg + j / g.S, o = (i * g.C + k * cg) * g.S + j;
            out.data[o] = (p[j] - mu) * rs * (w ? w->data[c] : 1.0) + (b ? b->data[c] : 0.0);
          }
        }
      return std::vector<RefTensor>{out, mean, rstd};
    };
  }
  {
    OpDef &d = r.add("native_group_norm_backward(Tensor grad_out, Tensor input, Tensor mean, Tensor rstd, "
                     "Tensor? weight, SymInt N, SymInt C, SymInt HxW, int group, bool[3] output_mask) -> "
                     "(Tensor, Tensor, Tensor)",
                     OpCategory::Composite);
    d.infer = [](const Node &n) -> Types {
      GnDims g = checkGroupNorm(n, 1, 5, 4);
      TensorType gt = argType(n, 0), x = argType(n, 1);
      if (gt.shape != x.shape || gt.dtype != x.dtype)
        nodeError(n, "native_group_norm_backward: grad_out " + gt.str() + " does not match input " + x.str());
      for (size_t i : {2, 3})
        if (argType(n, i).shape != Shape{g.N, g.G})
          nodeError(n, "native_group_norm_backward: mean and rstd must be [N, group] = " + shapeStr({g.N, g.G}) +
                           ", got " + argType(n, i).str());
      return {x, {x.dtype, {g.C}}, {x.dtype, {g.C}}};
    };
    d.eval = [](const Node &n, const RefArgs &a, const Lists &) {
      const RefTensor &dy = *a[0], &x = *a[1], &mean = *a[2], &rstd = *a[3];
      const RefTensor *w = a[4];
      GnDims g{n.intArg(5), n.intArg(6), n.intArg(7), n.intArg(8)};
      DType dt = n.types[0].dtype;
      RefTensor dx(dt, x.shape), dw(dt, {g.C}), db(dt, {g.C});
      int64_t cg = g.C / g.G, D = cg * g.S;
      for (int64_t i = 0; i < g.N; ++i)
        for (int64_t k = 0; k < g.G; ++k) {
          int64_t base = (i * g.C + k * cg) * g.S;
          double mu = mean.data[i * g.G + k], rs = rstd.data[i * g.G + k], sd = 0, sdx = 0;
          auto chan = [&](int64_t j) { return k * cg + j / g.S; };
          for (int64_t j = 0; j < D; ++j) {
            double xh = (x.data[base + j] - mu) * rs, gv = dy.data[base + j];
            double dv = gv * (w ? w->data[chan(j)] : 1.0);
            sd += dv, sdx += dv * xh;
            dw.data[chan(j)] += gv * xh;
            db.data[chan(j)] += gv;
          }
          for (int64_t j = 0; j < D; ++j) {
            double xh = (x.data[base + j] - mu) * rs;
            double dv = dy.data[base + j] * (w ? w->data[chan(j)] : 1.0);
            dx.data[base + j] = rs * (dv - sd / (double)D - xh * sdx / (double)D);
          }
        }
      return std::vector<RefTensor>{dx, dw, db};
    };
  }
  {
    OpDef &d = r.add("native_batch_norm_backward(Tensor grad_out, Tensor input, Tensor? weight, "
                     "Tensor? running_mean, Tensor? running_var, Tensor? save_mean, Tensor? save_invstd, "
                     "bool train, float eps, bool[3] output_mask) -> (Tensor, Tensor, Tensor)",
                     OpCategory::Composite);
    d.infer = [](const Node &n) -> Types {
      TensorType gt = argType(n, 0), x = argType(n, 1);
      if (x.rank() < 2) nodeError(n, "native_batch_norm_backward: expected an input [N, C, *], got " + x.str());
      requireFloating(n, x.dtype, "native_batch_norm_backward");
      if (gt.shape != x.shape || gt.dtype != x.dtype)
        nodeError(n, "native_batch_norm_backward: grad_out " + gt.str() + " does not match input " + x.str());
      int64_t C = x.shape[1];
      bool train = n.boolArg(7);
      for (size_t i : {2, 3, 4, 5, 6}) {
        const Node *t = optTensor(n, i);
        bool needed = train ? (i == 5 || i == 6) : (i == 3 || i == 4);
        if (!t && needed)
          nodeError(n, "native_batch_norm_backward: " + n.op->schema.args[i].name + " is required when train=" +
                           (train ? "True" : "False"));
        if (t && (t->type().shape != Shape{C} || t->type().dtype != x.dtype))
          nodeError(n, "native_batch_norm_backward: expected " + n.op->schema.args[i].name + " of type " +
                           TensorType{x.dtype, {C}}.str() + ", got " + t->type().str());
      }
      return {x, {x.dtype, {C}}, {x.dtype, {C}}};
    };
    d.eval = [](const Node &n, const RefArgs &a, const Lists &) {
      const RefTensor &dy = *a[0], &x = *a[1];
      const RefTensor *w = a[2];
      bool train = n.boolArg(7);
      double eps = n.scalarArg(8);
      BnDims b(x.shape);
      DType dt = n.types[0].dtype;
      RefTensor dx(dt, x.shape), dw(dt, {b.C}), db(dt, {b.C});
      double M = (double)(b.N * b.S);
      for (int64_t c = 0; c < b.C; ++c) {
        double mu = train ? a[5]->data[c] : a[3]->data[c];
        double is = train ? a[6]->data[c] : 1.0 / std::sqrt(a[4]->data[c] + eps);
        double wc = w ? w->data[c] : 1.0, sg = 0, sgx = 0;
        for (int64_t i = 0; i < b.N; ++i)
          for (int64_t s = 0; s < b.S; ++s) {
            int64_t k = b.at(i, c, s);
            double xh = (x.data[k] - mu) * is;
            sg += dy.data[k], sgx += dy.data[k] * xh;
          }
        dw.data[c] = sgx;
        db.data[c] = sg;
        for (int64_t i = 0; i < b.N; ++i)
          for (int64_t s = 0; s < b.S; ++s) {
            int64_t k = b.at(i, c, s);
            double xh = (x.data[k] - mu) * is;
            dx.data[k] = train ? is * wc * (dy.data[k] - sg / M - xh * sgx / M) : dy.data[k] * wc * is;
          }
      }
      return std::vector<RefTensor>{dx, dw, db};
    };
  }
}

} // namespace ops
} // namespace aotc
