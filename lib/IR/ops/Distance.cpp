//===- Distance.cpp - _cdist_forward, _pdist_forward ---------------------------------===//
//
// p-norm distances (Distance.cpp of ATen): _cdist_forward(x1 [*, P, M], x2 [*, R, M], p,
// compute_mode) -> [*, P, R] (batch dims broadcast) and _pdist_forward(x [N, M], p) ->
// [N (N - 1) / 2], the rows i < j in row-major order. p >= 0: p = 0 counts the differing
// coordinates, p = inf is the largest |difference|. compute_mode only picks torch's algorithm for
// p = 2 (a GEMM form above 25 rows); aotc sums the squared differences directly. Both decompose
// (lib/Decompose/DecomposeDistance.cpp) with torch's backward conventions at zero differences.
//===----------------------------------------------------------------------===//
#include "Ops.h"

namespace aotc {
namespace ops {
namespace {

using Types = std::vector<TensorType>;

double pNorm(const std::vector<double> &d, double p) {
  double s = 0;
  if (p == 0) {
    for (double v : d) s += v != 0;
    return s;
  }
  if (std::isinf(p)) {
    for (double v : d) s = std::isnan(v) || std::isnan(s) ? NAN : std::max(s, std::fabs(v));
    return s;
  }
  for (double v : d) s += std::pow(std::fabs(v), p);
  return std::pow(s, 1.0 / p);
}

void checkP(const Node &n, size_t i, const char *what) {
  double p = n.scalarArg(i);
  if (!(p >= 0)) nodeError(n, std::string(what) + " only supports non-negative p values, got " + argStr(n.args[i]));
}

} // namespace

void registerDistanceOps(OpRegistry &r) {
  {
    OpDef &d = r.add("_cdist_forward(Tensor x1, Tensor x2, float p, int? compute_mode) -> Tensor", OpCategory::Composite);
    d.infer = [](const Node &n) -> Types {
      TensorType a = argType(n, 0), b = argType(n, 1);
      requireFloating(n, a.dtype, "cdist");
      if (a.dtype != b.dtype) nodeError(n, "cdist: x1 and x2 must have the same dtype");
      if (a.rank() < 2 || b.rank() < 2) nodeError(n, "cdist only supports at least 2D tensors, X1 got: " + a.str());
      if (a.shape.back() != b.shape.back())
        nodeError(n, "X1 and X2 must have the same number of columns. X1: " + std::to_string(a.shape.back()) +
                         " X2: " + std::to_string(b.shape.back()));
      checkP(n, 2, "cdist");
      if (!n.isNoneArg(3) && (n.intArg(3) < 0 || n.intArg(3) > 2))
        nodeError(n, "cdist: possible modes are 0, 1, 2, got " + std::to_string(n.intArg(3)));
      Shape ba(a.shape.begin(), a.shape.end() - 2), bb(b.shape.begin(), b.shape.end() - 2);
      auto batch = broadcastShapes(ba, bb);
      if (!batch) nodeError(n, "cdist: batch shapes " + shapeStr(ba) + " and " + shapeStr(bb) + " do not broadcast");
      Shape out = *batch;
      out.push_back(a.shape[a.rank() - 2]);
      out.push_back(b.shape[b.rank() - 2]);
      return {{a.dtype, out}};
    };
    setEval(d, [](const Node &n, const RefArgs &a) {
      const RefTensor &x = *a.at(0), &y = *a.at(1);
      RefTensor out(n.types[0].dtype, n.types[0].shape);
      int64_t M = x.shape.back(), P = out.shape[out.shape.size() - 2], R = out.shape.back();
      Shape batch(out.shape.begin(), out.shape.end() - 2), xs = x.shape, ys = y.shape;
      Shape xb(xs.begin(), xs.end() - 2), yb(ys.begin(), ys.end() - 2);
      auto xmap = broadcastIndexMap(xb, batch), ymap = broadcastIndexMap(yb, batch);
      std::vector<double> diff(M);
      for (int64_t bi = 0; bi < numelOf(batch); ++bi)
        for (int64_t i = 0; i < P; ++i)
          for (int64_t j = 0; j < R; ++j) {
            for (int64_t m = 0; m < M; ++m)
              diff[m] = x.data[(xmap[bi] * P + i) * M + m] - y.data[(ymap[bi] * R + j) * M + m];
            out.data[(bi * P + i) * R + j] = pNorm(diff, n.scalarArg(2));
          }
      return out;
    });
  }
  {
    OpDef &d = r.add("_pdist_forward(Tensor self, float p=2) -> Tensor", OpCategory::Composite);
    d.infer = [](const Node &n) -> Types {
      TensorType a = argType(n, 0);
      requireFloating(n, a.dtype, "pdist");
      if (a.rank() != 2) nodeError(n, "pdist only supports 2D tensors, got: " + std::to_string(a.rank()) + "D");
      checkP(n, 1, "pdist");
      int64_t N = a.shape[0];
      return {{a.dtype, {N * (N - 1) / 2}}};
    };
    setEval(d, [](const Node &n, const RefArgs &a) {
      const RefTensor &x = *a.at(0);
      RefTensor out(n.types[0].dtype, n.types[0].shape);
      int64_t N = x.shape[0], M = x.shape[1], k = 0;
      std::vector<double> diff(M);
      for (int64_t i = 0; i < N; ++i)
        for (int64_t j = i + 1; j < N; ++j, ++k) {
          for (int64_t m = 0; m < M; ++m) diff[m] = x.data[i * M + m] - x.data[j * M + m];
          out.data[k] = pNorm(diff, n.scalarArg(1));
        }
      return out;
    });
  }
}

} // namespace ops
} // namespace aotc
