//===- TestPrograms.h - Small hand-built partitioned programs -------------===//
#pragma once

#include "CodegenTestUtil.h"

namespace cgtest {

inline Node *ph(Graph &g, const std::string &n, TensorType t, InputRole r, bool grad = false,
                const std::string &fqn = "") {
  Node *x = g.addPlaceholder(n, std::move(t), r);
  x->requiresGrad = grad;
  x->fqn = fqn;
  return x;
}

/// loss = sum(relu(x @ w^T + b)), forward + hand-written backward.
/// x f32[N,K] (user input), w f32[M,K] and b f32[M] (parameters).
inline Program linearReluSum(int64_t N = 4, int64_t K = 8, int64_t M = 3) {
  Program p;
  p.stage = "partition";
  p.name = "lin";
  Graph &f = p.forward;
  Node *x = ph(f, "x", T(DType::F32, {N, K}), InputRole::UserInput);
  Node *w = ph(f, "w", T(DType::F32, {M, K}), InputRole::Parameter, true, "fc.weight");
  Node *b = ph(f, "b", T(DType::F32, {M}), InputRole::Parameter, true, "fc.bias");
  Node *wt = buildCall(f, "permute", "aten.permute.default", {w, std::vector<int64_t>{1, 0}}, {});
  Node *mm = buildCall(f, "addmm", "aten.addmm.default", {b, x, wt}, {});
  Node *r = buildCall(f, "relu", "aten.relu.default", {mm}, {});
  Node *s = buildCall(f, "sum", "aten.sum.dim_IntList", {r, std::vector<int64_t>{0, 1}}, {});
  f.setOutputs({s, r});
  p.numForwardOutputs = 1;
  p.saved = {"relu"};
  p.gradOf = {"w", "b"};
  Graph &g = p.backward;
  ph(g, "x", T(DType::F32, {N, K}), InputRole::UserInput);
  ph(g, "w", T(DType::F32, {M, K}), InputRole::Parameter, true, "fc.weight");
  ph(g, "b", T(DType::F32, {M}), InputRole::Parameter, true, "fc.bias");
  Node *xb = g.placeholders()[0];
  Node *rs = ph(g, "relu", T(DType::F32, {N, M}), InputRole::Saved);
  Node *t = ph(g, "tangents_1", T(DType::F32, {}), InputRole::Tangent);
  Node *e = buildCall(g, "expand", "aten.expand.default", {t, std::vector<int64_t>{N, M}}, {});
  Node *gt = buildCall(g, "gt", "aten.gt.Scalar", {rs, 0.0}, {});
  Node *gm = buildCall(g, "mul", "aten.mul.Tensor", {e, gt}, {});
  Node *gmt = buildCall(g, "permute_1", "aten.permute.default", {gm, std::vector<int64_t>{1, 0}}, {});
  Node *gw = buildCall(g, "mm", "aten.mm.default", {gmt, xb}, {});
  Node *gb = buildCall(g, "sum_1", "aten.sum.dim_IntList", {gm, std::vector<int64_t>{0}}, {});
  g.setOutputs({gw, gb});
  return p;
}

/// Cross-entropy written with primitives (log_softmax + nll with ignore_index
/// -100, mean reduction), forward only: x f32[N,C], target i64[N].
inline Program logSoftmaxNll(int64_t N = 6, int64_t C = 5) {
  Program p;
  p.stage = "partition";
  p.name = "ce";
  Graph &f = p.forward;
  Node *x = ph(f, "x", T(DType::F32, {N, C}), InputRole::UserInput);
  Node *tg = ph(f, "target", T(DType::I64, {N}), InputRole::UserInput);
  std::vector<int64_t> d1 = {1};
  Node *amax = buildCall(f, "amax", "aten.amax.default", {x, d1, true}, {});
  Node *sub = buildCall(f, "sub", "aten.sub.Tensor", {x, amax}, {});
  Node *ex = buildCall(f, "exp", "aten.exp.default", {sub}, {});
  Node *s = buildCall(f, "sum", "aten.sum.dim_IntList", {ex, d1, true}, {});
  Node *lg = buildCall(f, "log", "aten.log.default", {s}, {});
  Node *lsm = buildCall(f, "sub_1", "aten.sub.Tensor", {sub, lg}, {});
  Node *ne = buildCall(f, "ne", "aten.ne.Scalar", {tg, int64_t(-100)}, {});
  Node *z = buildCall(f, "scalar_tensor", "aten.scalar_tensor.default", {int64_t(0)},
                      {{"dtype", DTypeLit{DType::I64}}});
  Node *wh = buildCall(f, "where", "aten.where.self", {ne, tg, z}, {});
  Node *un = buildCall(f, "unsqueeze", "aten.unsqueeze.default", {wh, int64_t(1)}, {});
  Node *ga = buildCall(f, "gather", "aten.gather.default", {lsm, int64_t(1), un}, {});
  Node *sq = buildCall(f, "squeeze", "aten.squeeze.dims", {ga, d1}, {});
  Node *ng = buildCall(f, "neg", "aten.neg.default", {sq}, {});
  Node *zf = buildCall(f, "scalar_tensor_1", "aten.scalar_tensor.default", {0.0},
                       {{"dtype", DTypeLit{DType::F32}}});
  Node *w2 = buildCall(f, "where_1", "aten.where.self", {ne, ng, zf}, {});
  Node *ls = buildCall(f, "sum_1", "aten.sum.dim_IntList", {w2, std::vector<int64_t>{}}, {});
  Node *cnt = buildCall(f, "sum_2", "aten.sum.dim_IntList", {ne, std::vector<int64_t>{}}, {});
  Node *cf = buildCall(f, "_to_copy", "aten._to_copy.default", {cnt}, {{"dtype", DTypeLit{DType::F32}}});
  Node *loss = buildCall(f, "div", "aten.div.Tensor", {ls, cf}, {});
  f.setOutputs({loss});
  p.numForwardOutputs = 1;
  return p;
}

} // namespace cgtest
