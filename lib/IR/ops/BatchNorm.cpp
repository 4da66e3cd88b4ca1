//===- BatchNorm.cpp - _native_batch_norm_legit_functional / _no_training -----===//
//
// What torch.export (ATEN dialect) makes of nn.BatchNorm{1,2}d: in train mode
// _native_batch_norm_legit_functional(input, weight?, bias?, running_mean, running_var,
// training, momentum, eps) -> (out, save_mean, save_rstd, new_running_mean, new_running_var),
// in eval mode _native_batch_norm_legit_no_training(input, weight?, bias?, running_mean,
// running_var, momentum, eps) -> (out, save_mean, save_rstd). input is [N, C, *]; statistics
// are per channel (dim 1) over every other dim, M = numel / C elements each:
//   training: mean, var = biased variance, rstd = 1/sqrt(var + eps), out = (x - mean) rstd w + b,
//             new_running_mean = (1 - momentum) running_mean + momentum mean,
//             new_running_var  = (1 - momentum) running_var + momentum var * M / (M - 1)
//             (aotc's lower: var_sum / (M - 1), as ATen's CPU kernel);
//   otherwise: the running statistics normalize, save_mean/save_rstd are empty ([0]) and the
//             running statistics are returned unchanged (torch/_decomp native_batch_norm_helper).
// weight, bias, running statistics: [C], the input's dtype (ATen's CPU kernel).
//===----------------------------------------------------------------------===//
#include "Ops.h"

namespace aotc {
namespace ops {
namespace {

using Types = std::vector<TensorType>;

/// Checks the operands; returns C.
int64_t checkBatchNorm(const Node &n, const char *what, bool stats = true) {
  TensorType x = argType(n, 0);
  if (x.rank() < 2)
    nodeError(n, std::string(what) + ": expected an input with at least 2 dimensions [N, C, *], got " + x.str());
  requireFloating(n, x.dtype, what);
  int64_t C = x.shape[1];
  for (size_t i : {1, 2, 3, 4}) {
    if (!stats && i >= 3) break;
    const Node *t = optTensor(n, i);
    if (!t) {
      if (i >= 3) nodeError(n, std::string(what) + ": running_mean and running_var are required");
      continue;
    }
    if (t->type().shape != Shape{C} || t->type().dtype != x.dtype)
      nodeError(n, std::string(what) + ": expected " + n.op->schema.args[i].name + " of type " +
                       TensorType{x.dtype, {C}}.str() + ", got " + t->type().str());
  }
  return C;
}

struct BnRef {
  RefTensor out, mean, rstd, runMean, runVar;
};

BnRef batchNormRef(const Node &n, const RefArgs &a, bool training, double momentum, double eps) {
  const RefTensor &x = *a[0];
  const RefTensor *w = a[1], *b = a[2], &rm = *a[3], &rv = *a[4];
  int64_t N = x.shape[0], C = x.shape[1], S = N * C ? x.numel() / (N * C) : 0, M = N * S;
  DType dt = n.types[0].dtype;
  BnRef r{RefTensor(dt, x.shape), RefTensor(dt, {training ? C : 0}), RefTensor(dt, {training ? C : 0}),
          RefTensor(dt, {C}), RefTensor(dt, {C})};
  auto at = [&](int64_t i, int64_t c, int64_t s) { return (i * C + c) * S + s; };
  for (int64_t c = 0; c < C; ++c) {
    double mu = 0, var = 0;
    if (training) {
      for (int64_t i = 0; i < N; ++i)
        for (int64_t s = 0; s < S; ++s) mu += x.data[at(i, c, s)];
      mu /= (double)M;
      for (int64_t i = 0; i < N; ++i)
        for (int64_t s = 0; s < S; ++s) var += (x.data[at(i, c, s)] - mu) * (x.data[at(i, c, s)] - mu);
      var /= (double)M;
    } else {
      mu = rm.data[c];
      var = rv.data[c];
    }
    double rs = 1.0 / std::sqrt(var + eps);
    if (training) {
      r.mean.data[c] = mu;
      r.rstd.data[c] = rs;
      r.runMean.data[c] = (1 - momentum) * rm.data[c] + momentum * mu;
      // M == 1: torch divides by zero here too (inf); train-mode batch norm needs M > 1.
      r.runVar.data[c] = (1 - momentum) * rv.data[c] + momentum * var * (double)M / (double)(M - 1);
    } else {
      r.runMean.data[c] = rm.data[c];
      r.runVar.data[c] = rv.data[c];
    }
    for (int64_t i = 0; i < N; ++i)
      for (int64_t s = 0; s < S; ++s) {
        int64_t k = at(i, c, s);
        r.out.data[k] = (x.data[k] - mu) * rs * (w ? w->data[c] : 1.0) + (b ? b->data[c] : 0.0);
      }
  }
  return r;
}

} // namespace

void registerBatchNormOps(OpRegistry &r) {
  {
    OpDef &d = r.add("_native_batch_norm_legit_functional(Tensor input, Tensor? weight, Tensor? bias, "
                     "Tensor running_mean, Tensor running_var, bool training, float momentum, float eps) -> "
                     "(Tensor, Tensor, Tensor, Tensor running_mean_out, Tensor running_var_out)",
                     OpCategory::Composite);
    d.infer = [](const Node &n) -> Types {
      int64_t C = checkBatchNorm(n, "batch_norm");
      TensorType x = argType(n, 0);
      Shape stat = {n.boolArg(5) ? C : 0};
      return {x, {x.dtype, stat}, {x.dtype, stat}, {x.dtype, {C}}, {x.dtype, {C}}};
    };
    d.eval = [](const Node &n, const RefArgs &a, const std::vector<std::vector<const RefTensor *>> &) {
      BnRef b = batchNormRef(n, a, n.boolArg(5), n.scalarArg(6), n.scalarArg(7));
      return std::vector<RefTensor>{b.out, b.mean, b.rstd, b.runMean, b.runVar};
    };
  }
  {
    // The in-place form (running statistics updated in place, `(a!)`): functionalize turns it
    // into _native_batch_norm_legit_functional and writes results 3 and 4 back.
    OpDef &d = r.add("_native_batch_norm_legit(Tensor input, Tensor? weight, Tensor? bias, Tensor(a!) running_mean, "
                     "Tensor(b!) running_var, bool training, float momentum, float eps) -> (Tensor, Tensor, Tensor)",
                     OpCategory::Composite);
    d.infer = [](const Node &n) -> Types {
      int64_t C = checkBatchNorm(n, "batch_norm");
      TensorType x = argType(n, 0);
      Shape stat = {n.boolArg(5) ? C : 0};
      return {x, {x.dtype, stat}, {x.dtype, stat}};
    };
    d.eval = [](const Node &n, const RefArgs &a, const std::vector<std::vector<const RefTensor *>> &) {
      BnRef b = batchNormRef(n, a, n.boolArg(5), n.scalarArg(6), n.scalarArg(7));
      return std::vector<RefTensor>{b.out, b.mean, b.rstd};
    };
  }
  {
    // _native_batch_norm_legit.no_stats(input, weight?, bias?, training, momentum, eps): batch
    // statistics and no running ones (F.batch_norm(x, None, None, training=True), a norm with
    // track_running_stats=False). Without running statistics there is nothing to normalize with
    // in eval mode: training=False is refused, as torch. A composite (decompose: the functional
    // form with scratch running statistics, whose updates nobody reads).
    OpDef &d = r.add("_native_batch_norm_legit.no_stats(Tensor input, Tensor? weight, Tensor? bias, bool training, "
                     "float momentum, float eps) -> (Tensor, Tensor, Tensor)",
                     OpCategory::Composite);
    d.infer = [](const Node &n) -> Types {
      int64_t C = checkBatchNorm(n, "batch_norm", false);
      if (!n.boolArg(3)) nodeError(n, "batch_norm: running_mean must be defined in evaluation mode (training=False "
                                      "without running statistics)");
      TensorType x = argType(n, 0);
      return {x, {x.dtype, {C}}, {x.dtype, {C}}};
    };
    d.eval = [](const Node &n, const RefArgs &a, const std::vector<std::vector<const RefTensor *>> &) {
      int64_t C = a[0]->shape[1];
      RefTensor rm(a[0]->dtype, {C}, 0.0), rv(a[0]->dtype, {C}, 1.0);
      RefArgs withStats = {a[0], a[1], a[2], &rm, &rv};
      BnRef b = batchNormRef(n, withStats, true, n.scalarArg(4), n.scalarArg(5));
      return std::vector<RefTensor>{b.out, b.mean, b.rstd};
    };
  }
  {
    OpDef &d = r.add("_native_batch_norm_legit_no_training(Tensor input, Tensor? weight, Tensor? bias, "
                     "Tensor running_mean, Tensor running_var, float momentum, float eps) -> "
                     "(Tensor, Tensor, Tensor)",
                     OpCategory::Composite);
    d.infer = [](const Node &n) -> Types {
      checkBatchNorm(n, "batch_norm");
      TensorType x = argType(n, 0);
      return {x, {x.dtype, {0}}, {x.dtype, {0}}};
    };
    d.eval = [](const Node &n, const RefArgs &a, const std::vector<std::vector<const RefTensor *>> &) {
      BnRef b = batchNormRef(n, a, false, n.scalarArg(5), n.scalarArg(6));
      return std::vector<RefTensor>{b.out, b.mean, b.rstd};
    };
  }
}

} // namespace ops
} // namespace aotc
