//===- Decompose.cpp - Composites to Core ATen, before autodiff --------------===//
//
// This file implements stage 3, decompose(Program&). Composite ops that
// torch.export's TRAINING dialect (or a hand-written FX file) may contain are
// rewritten into Core ATen ops, so that autodiff only needs rules for Core ATen.
// Ops with stable derivative rules (gelu, _softmax, _log_softmax,
// native_layer_norm) stay whole here; lower() expands them after autodiff.
//
// The table at the bottom is the whole stage: one entry per op, each a small
// function emitting Core ATen with Emitter (see Rewrite.h). The rules follow
// torch/_decomp/decompositions.py and aten/src/ATen/native/{Linear,LossNLL,
// Loss,Activation,TensorShape}.cpp; each names its source.
// The table runs to a fixed point (a rule may emit another composite, e.g.
// cross_entropy_loss -> nll_loss).
//===----------------------------------------------------------------------===//
#include "Rules.h"

#include "aotc/Decompositions.h"
#include "aotc/Stages.h"

#include <cmath>
#include <limits>
#include <optional>


namespace aotc {
namespace {

using namespace rewrite;
using Vals = std::vector<Node *>;

/// Reduction enum of ATen losses (aten/src/ATen/core/Reduction.h).
enum Reduction : int64_t { None = 0, Mean = 1, Sum = 2 };

int64_t reductionArg(const Node &n, size_t i) {
  int64_t r = n.intArg(i);
  if (r < 0 || r > 2) nodeError(n, "invalid reduction " + std::to_string(r));
  return r;
}

/// linear(input, weight, bias=None): aten/src/ATen/native/Linear.cpp.
/// 2-D input: addmm(bias, x, permute(w)) or mm(x, permute(w)); other ranks are
/// flattened to 2-D and viewed back (_flatten_nd_linear); a bias that is not
/// [out] or [] is added separately.
Vals linear(Emitter &e, Node &n) {
  Node *x = n.tensorArg(0), *w = n.tensorArg(1);
  Node *b = n.isNoneArg(2) ? nullptr : n.tensorArg(2);
  const Shape &xs = x->type().shape, &ws = w->type().shape;
  if (ws.size() != 2) nodeError(n, "linear: only a 2-D weight is supported, got " + shapeStr(ws));
  if (xs.empty()) nodeError(n, "linear: input must have at least one dimension");
  int64_t in = ws[1], out = ws[0];
  Node *wt = e.permute(w, {1, 0});
  Node *x2 = x;
  // The leading dims (run-time sizes among them) flattened into rows.
  std::vector<Size> lead = sizesOf(x->type());
  lead.pop_back();
  Size rows = 1;
  for (const Size &d : lead) rows = rows * d;
  if (xs.back() != in) rows = Size(numelOf(xs) / std::max<int64_t>(in, 1)); // infer's error follows
  if (xs.size() != 2) x2 = e.view(x, {rows.v, in}, {rows.text(), ""});
  bool fuseBias = b && (b->type().shape == Shape{out} || b->type().shape.empty());
  Node *y = fuseBias ? e.call("aten.addmm.default", {b, x2, wt}) : e.call("aten.mm.default", {x2, wt});
  if (xs.size() != 2) {
    std::vector<Size> ys = lead;
    ys.push_back(out);
    y = e.viewTo(y, ys);
  }
  if (b && !fuseBias) y = e.add(y, b);
  return {y};
}

/// layer_norm(input, normalized_shape, weight, bias, eps, cudnn_enable)
///   -> native_layer_norm(...)[0] (aten/src/ATen/native/layer_norm.cpp).
Vals layerNorm(Emitter &e, Node &n) {
  Node *ln = e.call("aten.native_layer_norm.default",
                    {n.args[0], n.args[1], n.args[2], n.args[3], n.args[4]}, {}, n.symArgs);
  return {e.call("getitem", {ln, int64_t(0)})};
}

/// softmax.int / log_softmax.int(self, dim, dtype=None) -> _softmax / _log_softmax
/// (aten/src/ATen/native/SoftMax.cpp: a dtype first converts the input).
Vals softmaxInt(Emitter &e, Node &n, const char *target) {
  Node *x = n.tensorArg(0);
  if (auto dt = dtypeArgOf(n, 2)) x = e.toDtype(x, *dt);
  return {e.call(target, {x, n.args[1], false})};
}

/// nll_loss with class dim 1 (or 0 for a 1-D input): _nll_loss_forward in
/// torch/_decomp/decompositions.py. Returns (output, total_weight).
Vals nllLossForward(Emitter &e, Node &n) {
  Node *self = n.tensorArg(0), *target = n.tensorArg(1);
  Node *weight = n.isNoneArg(2) ? nullptr : n.tensorArg(2);
  int64_t reduction = reductionArg(n, 3), ignore = n.intArg(4);
  const TensorType &st = self->type();
  if (!isFloating(st.dtype)) nodeError(n, "nll_loss: input must be floating");
  if (target->type().dtype != DType::I64) nodeError(n, "nll_loss: target must be int64");
  int64_t nd = st.rank();
  if (nd < 1) nodeError(n, "nll_loss: input must have at least one dimension");
  int64_t cdim = nd < 2 ? 0 : 1;
  Shape tshape = st.shape;
  tshape.erase(tshape.begin() + cdim);
  if (target->type().shape != tshape)
    nodeError(n, "nll_loss: expected target of shape " + shapeStr(tshape) + ", got " +
                     shapeStr(target->type().shape));
  Node *w = nullptr;
  if (weight) {
    if (weight->type().shape != Shape{st.shape[cdim]})
      nodeError(n, "nll_loss: weight must have shape [" + std::to_string(st.shape[cdim]) + "]");
    Shape ws(nd, 1);
    ws[cdim] = st.shape[cdim];
    w = nd > 1 ? e.view(weight, ws) : weight;
    self = e.mul(self, w);
  }
  // safe_target = where(target != ignore_index, target, 0)
  Node *mask = e.call("aten.ne.Scalar", {target, ignore});
  Node *safe = e.call("aten.where.self", {mask, target, e.scalarTensor(int64_t(0), DType::I64)});
  Node *safeU = e.call("aten.unsqueeze.default", {safe, cdim});
  Node *picked = e.call("aten.gather.default", {self, cdim, safeU});
  Node *result = e.neg(e.call("aten.squeeze.dims", {picked, std::vector<int64_t>{cdim}}));
  Node *mask2 = e.call("aten.ne.Scalar", {target, ignore});
  result = e.call("aten.where.self", {mask2, result, e.scalarTensor(0.0, st.dtype)});
  if (reduction == None && nd > 1) {
    Node *tw = e.call("aten.full.default", {std::vector<int64_t>{}, 0.0}, {{"dtype", DTypeLit{st.dtype}}});
    return {result, tw};
  }
  Node *totalWeight;
  if (w) {
    Node *wx = e.call("aten.expand.default", {w, st.shape}, {}, {{1, st.sym}});
    Node *ws = e.call("aten.gather.default", {wx, cdim, safeU});
    ws = e.call("aten.squeeze.dims", {ws, std::vector<int64_t>{cdim}});
    Node *mask3 = e.call("aten.ne.Scalar", {target, ignore});
    ws = e.call("aten.where.self", {mask3, ws, e.scalarTensor(0.0, st.dtype)});
    totalWeight = e.sum(ws, {}, false);
  } else {
    Node *mask3 = e.call("aten.ne.Scalar", {target, ignore});
    totalWeight = e.toDtype(e.sum(mask3, {}, false), st.dtype);
  }
  if (reduction == Sum) result = e.sum(result, {}, false);
  else if (reduction == Mean) result = e.div(e.sum(result, {}, false), totalWeight);
  return {result, totalWeight};
}

/// nll_loss(self, target, weight, reduction, ignore_index) = nll_loss_forward(...)[0].
Vals nllLoss(Emitter &e, Node &n) {
  Node *f = e.call("aten.nll_loss_forward.default", {n.args[0], n.args[1], n.args[2], n.args[3], n.args[4]});
  return {e.call("getitem", {f, int64_t(0)})};
}

/// cross_entropy_loss(self, target, weight, reduction, ignore_index, label_smoothing):
/// aten/src/ATen/native/LossNLL.cpp cross_entropy_loss_symint.
///  * class-index target: nll_loss(_log_softmax(self, class_dim), target, ...);
///    (label smoothing is not supported: a located error);
///  * probability target (floating, same shape): -(logp * target [* weight]).sum(class_dim),
///    mean divides by numel/C.
Vals crossEntropy(Emitter &e, Node &n) {
  Node *self = n.tensorArg(0), *target = n.tensorArg(1);
  const TensorType &st = self->type();
  if (!isFloating(st.dtype)) nodeError(n, "cross_entropy: input must be floating");
  int64_t nd = st.rank();
  if (nd < 1) nodeError(n, "cross_entropy: input must have at least one dimension");
  int64_t cdim = nd == 1 ? 0 : 1;
  int64_t reduction = reductionArg(n, 3);
  double ls = n.scalarArg(5);
  Node *logp = e.call("aten._log_softmax.default", {self, cdim, false});
  if (isFloating(target->type().dtype)) {
    if (target->type().shape != st.shape)
      nodeError(n, "cross_entropy: a probability target must have the input's shape " + shapeStr(st.shape));
    if (ls != 0.0) nodeError(n, "cross_entropy: label_smoothing with probability targets is not supported");
    Node *prod = e.mul(logp, target);
    if (!n.isNoneArg(2)) {
      Shape ws(nd, 1);
      ws[cdim] = st.shape[cdim];
      prod = e.mul(prod, nd > 1 ? e.view(n.tensorArg(2), ws) : n.tensorArg(2));
    }
    if (reduction == None) return {e.neg(e.sum(prod, {cdim}, false))};
    Node *total = e.neg(e.sum(prod, {}, false));
    if (reduction == Sum) return {total};
    if (st.symbolic()) // the count would be folded at the largest sizes
      nodeError(n, "cross_entropy: the mean over probability targets of run-time size " + st.str() +
                       " is not supported yet: compile at one size with --specialize SYMBOL=N (docs/dynamic-shapes.md)");
    return {e.div(total, double(st.numel() / std::max<int64_t>(st.shape[cdim], 1)))};
  }
  Node *nll = e.call("aten.nll_loss.default", {logp, target, n.args[2], reduction, n.args[4]});
  if (ls != 0.0) nodeError(n, "cross_entropy: label_smoothing is not supported");
  return {nll};
}

/// mse_loss(self, target, reduction): (self - target)^2 reduced
/// (torch/_decomp/decompositions.py mse_loss + apply_loss_reduction).
Vals mseLoss(Emitter &e, Node &n) {
  Node *d = e.sub(n.args[0], n.args[1]);
  Node *sq = e.call("aten.pow.Tensor_Scalar", {d, int64_t(2)});
  switch (reductionArg(n, 2)) {
  case Mean: return {e.call("aten.mean.default", {sq})};
  case Sum: return {e.call("aten.sum.default", {sq})};
  default: return {sq};
  }
}

} // namespace

namespace rules {

using namespace rewrite;

/// cat(tensors, dim) (aten/src/ATen/native/TensorShape.cpp cat): each input is
/// written into its range of a zero tensor of the result type with slice_scatter,
/// so autodiff uses slice_scatter's rule (the input's gradient is its slice of
/// grad) and codegen fuses the chain into one pointwise value. Inputs of another
/// dtype are cast first (result_type); legacy skipped inputs (1-d empty) and
/// inputs empty along dim contribute nothing.
Vals cat(Emitter &e, Node &n) {
  const auto &ts = std::get<std::vector<Node *>>(n.args.at(0));
  const TensorType &ot = n.types[0];
  Node *y = e.call("aten.full.default", {ot.shape, int64_t(0)}, {{"dtype", DTypeLit{ot.dtype}}}, {{0, ot.sym}});
  if (ot.shape == Shape{0} && !ot.symbolic()) return {y};
  int64_t dim = wrapDimAt(n, n.intArg(1), ot.rank());
  Size off = 0; // run-time sizes: the offsets are expressions
  for (Node *x : ts) {
    const TensorType &t = x->type();
    if (t.symbolic() ? t.rank() == 1 && t.shape[0] == 0 && t.sym[0].empty() : t.shape == Shape{0} || t.shape[dim] == 0)
      continue;
    Size end = off + sizeOf(t, dim);
    y = e.call("aten.slice_scatter.default", {y, e.toDtype(x, ot.dtype), dim, off.v, end.v, int64_t(1)}, {},
               {{3, {off.text()}}, {4, {end.text()}}});
    off = end;
  }
  return {y};
}

/// split.Tensor(x, split_size, dim) / split_with_sizes(x, sizes, dim) / chunk(x, chunks, dim)
/// -> one slice.Tensor per piece, at the offsets of the result types' sizes along dim
/// (TensorShape.cpp split, split_with_sizes, chunk).
Vals split(Emitter &e, Node &n) {
  Node *x = n.tensorArg(0);
  int64_t dim = wrapDimAt(n, n.intArg(2), x->type().rank());
  // The pieces of a run-time dim: their number would depend on the size (torch.export fixes
  // it with guards; aotc's results are a fixed list).
  if (sizeOf(x->type(), (size_t)dim).e.hasSymbols() || n.symArg(1))
    nodeError(n, "splitting a dim of run-time size " + x->type().dimStr((size_t)dim) +
                     " is not supported yet: compile at one size with --specialize SYMBOL=N (docs/dynamic-shapes.md)");
  Vals r;
  int64_t start = 0;
  for (const TensorType &t : n.types) {
    r.push_back(e.call("aten.slice.Tensor", {x, dim, start, start + t.shape[dim], int64_t(1)}));
    start += t.shape[dim];
  }
  return r;
}

/// unbind.int(x, dim) -> one select.int per index (the other dims may be run-time sizes; the
/// unbound one, whose size is the number of results, may not).
Vals unbind(Emitter &e, Node &n) {
  Node *x = n.tensorArg(0);
  int64_t dim = wrapDimAt(n, n.intArg(1), x->type().rank());
  if (dim < (int64_t)x->type().sym.size() && !x->type().sym[dim].empty())
    nodeError(n, "unbind along a run-time size (" + x->type().sym[dim] +
                     ": the number of results) is not supported: compile at one size with --specialize SYMBOL=N "
                     "(docs/dynamic-shapes.md)");
  Vals r;
  for (size_t k = 0; k < n.types.size(); ++k) r.push_back(e.call("aten.select.int", {x, dim, (int64_t)k}));
  return r;
}

/// silu(x) = x * sigmoid(x) (torch/_decomp/decompositions.py silu).
Vals silu(Emitter &e, Node &n) {
  Node *x = n.tensorArg(0);
  return {e.mul(x, e.call("aten.sigmoid.default", {x}))};
}

/// t(x): permute [1, 0] for 2-D, an identity view for rank < 2.
Vals transposeT(Emitter &e, Node &n) {
  Node *x = n.tensorArg(0);
  if (x->type().rank() < 2) return {e.view(x, x->type().shape, x->type().sym)};
  return {e.permute(x, {1, 0})};
}

/// transpose.int(x, d0, d1) -> permute with d0 and d1 swapped.
Vals transposeInt(Emitter &e, Node &n) {
  Node *x = n.tensorArg(0);
  int64_t r = x->type().rank();
  if (r == 0) return {e.view(x, {})};
  int64_t d0 = wrapDimAt(n, n.intArg(1), r), d1 = wrapDimAt(n, n.intArg(2), r);
  std::vector<int64_t> perm(r);
  for (int64_t i = 0; i < r; ++i) perm[i] = i;
  std::swap(perm[d0], perm[d1]);
  return {e.permute(x, perm)};
}

/// _unsafe_view / reshape(x, shape) -> view(x, shape): aotc values are dense,
/// so a reshape never needs a copy.
Vals toView(Emitter &e, Node &n) { return {e.call("aten.view.default", {n.args[0], n.args[1]}, {}, n.symArgs)}; }

/// clamp(x, min, max), clamp_min(x, min), clamp_max(x, max), hardtanh(x, min_val, max_val)
/// -> where.self with 0-d tensors of the result dtype. The value is torch.clamp's
/// (min(max(x, lo), hi): min > max gives max; NaN in x or a bound gives NaN). The gradient is
/// eager's (torch 2.15, measured): clamp / clamp_min / clamp_max pass it where lo < x < hi
/// strictly, nothing on the bounds and nothing for a NaN x:
///   m = where(x > lo, x, where(x != x, nan, lo)); where(m < hi, m, where(m != m, nan, hi))
/// (the NaN comes from a constant, not from x); hardtanh (hardtanh_backward) passes it where
/// neither x <= min nor x >= max, so a NaN x keeps it:
///   m = where(x <= min, min, x); where(m >= max, max, m).
Vals clampLike(Emitter &e, Node &n) {
  const bool onlyMax = n.target == "aten.clamp_max.default";
  const bool hardtanh = n.target == "aten.hardtanh.default";
  const size_t minArg = onlyMax ? 99 : 1, maxArg = onlyMax ? 1 : 2;
  DType rt = n.types[0].dtype;
  Node *x = e.toDtype(n.tensorArg(0), rt);
  auto bound = [&](size_t i) -> std::optional<Arg> {
    if (i >= n.args.size() || n.isNoneArg(i)) return std::nullopt;
    return n.args[i];
  };
  auto keepStrictly = [&](const char *cmp, Node *v, const Arg &c) {
    Node *other = e.scalarTensor(c, rt);
    if (isFloating(rt))
      other = e.call("aten.where.self", {e.call("aten.ne.Tensor", {v, v}),
                                         e.scalarTensor(std::numeric_limits<double>::quiet_NaN(), rt), other});
    return e.call("aten.where.self", {e.call(std::string("aten.") + cmp + ".Scalar", {v, c}), v, other});
  };
  auto replaceAtOrBeyond = [&](const char *cmp, Node *v, const Arg &c) {
    // A NaN bound makes every element NaN (torch.clamp); le/ge against NaN are always false,
    // ne always true.
    if (std::holds_alternative<double>(c) && std::isnan(std::get<double>(c))) cmp = "ne";
    Node *cond = e.call(std::string("aten.") + cmp + ".Scalar", {v, c});
    return e.call("aten.where.self", {cond, e.scalarTensor(c, rt), v});
  };
  Node *y = x;
  if (auto lo = bound(minArg)) y = hardtanh ? replaceAtOrBeyond("le", y, *lo) : keepStrictly("gt", y, *lo);
  if (auto hi = bound(maxArg)) y = hardtanh ? replaceAtOrBeyond("ge", y, *hi) : keepStrictly("lt", y, *hi);
  if (y == n.tensorArg(0)) y = e.call("aten.clone.default", {y});
  return {y};
}

/// where.ScalarOther(c, x, s) / where.ScalarSelf(c, s, x) / masked_fill.Scalar(x, m, s)
/// -> where.self with the scalar as a 0-d tensor of the result dtype.
Vals whereScalar(Emitter &e, Node &n) {
  DType rt = n.types[0].dtype;
  auto operand = [&](size_t i) -> Node * {
    if (std::holds_alternative<Node *>(n.args[i])) return e.toDtype(n.tensorArg(i), rt);
    return e.scalarTensor(n.args[i], rt);
  };
  if (n.target == "aten.masked_fill.Scalar" || n.target == "aten.masked_fill.Tensor")
    return {e.call("aten.where.self", {n.tensorArg(1), operand(2), operand(0)})};
  return {e.call("aten.where.self", {n.tensorArg(0), operand(1), operand(2)})};
}

/// copy(self, src) -> _to_copy(expand(src, self.shape), dtype=self.dtype) (torch/_refs copy_to:
/// the destination's value does not matter, only its type).
Vals copy(Emitter &e, Node &n) {
  const TensorType &t = n.types[0];
  Node *src = n.tensorArg(1);
  if (src->type().shape != t.shape || src->type().sym != t.sym)
    src = e.call("aten.expand.default", {src, t.shape}, {}, {{1, t.sym}});
  Node *y = e.toDtype(src, t.dtype);
  if (y == n.tensorArg(1)) y = e.call("aten.clone.default", {y});
  return {y};
}

/// ~x: logical_not on bool, else -x - 1 (two's complement; wraps as torch's on INT64_MIN).
static Node *bitwiseNotOf(Emitter &e, Node *x) {
  if (x->type().dtype == DType::Bool) return e.call("aten.logical_not.default", {x});
  return e.call("aten.sub.Scalar", {e.neg(x), int64_t(1)});
}

/// bitwise_not(x) -> logical_not (bool) / sub(neg(x), 1) (integers).
Vals bitwiseNot(Emitter &e, Node &n) { return {bitwiseNotOf(e, n.tensorArg(0))}; }

/// isinf(x) -> eq(abs(x), inf) for floating x; ne(x, x) (all false) otherwise.
Vals isinfRule(Emitter &e, Node &n) {
  Node *x = n.tensorArg(0);
  if (!isFloating(x->type().dtype)) return {e.call("aten.ne.Tensor", {x, x})};
  return {e.call("aten.eq.Scalar", {e.call("aten.abs.default", {x}), std::numeric_limits<double>::infinity()})};
}

/// argmin(x, dim, keepdim) -> argmax of the order reversed: neg for floating x (NaN stays NaN,
/// which argmax picks first, as argmin does), ~x for integers (an order-reversing bijection
/// without overflow; bool is refused by the registry, as torch). Ties keep the first position.
Vals argmin(Emitter &e, Node &n) {
  Node *x = n.tensorArg(0);
  Node *rev = isFloating(x->type().dtype) ? e.neg(x) : bitwiseNotOf(e, x);
  return {e.call("aten.argmax.default", {rev, n.args[1], n.args[2]})};
}

/// square(x) -> pow.Tensor_Scalar(x, 2) (torch/_refs square).
Vals square(Emitter &e, Node &n) {
  return {e.call("aten.pow.Tensor_Scalar", {n.args[0], int64_t(2)})};
}

} // namespace rules

static const std::vector<RuleEntry> &table() {
  using namespace rules;
  // clang-format off
  static const std::vector<RuleEntry> t = {
    {"aten.linear.default",            linear,       "permute(w) + addmm/mm (views for rank != 2)", true},
    {"aten.layer_norm.default",        layerNorm,    "native_layer_norm(...)[0]", true, true},
    {"aten.softmax.int",               [](Emitter &e, Node &n) { return softmaxInt(e, n, "aten._softmax.default"); },
                                                     "_softmax (after _to_copy when dtype is given)", true},
    {"aten.log_softmax.int",           [](Emitter &e, Node &n) { return softmaxInt(e, n, "aten._log_softmax.default"); },
                                                     "_log_softmax (after _to_copy when dtype is given)", true},
    {"aten._safe_softmax.default",     [](Emitter &e, Node &n) {
                                         Node *x = n.tensorArg(0);
                                         if (auto dt = dtypeArgOf(n, 2)) x = e.toDtype(x, *dt);
                                         return Vals{e.call("aotc.safe_softmax.default", {x, n.args[1]})};
                                       },
                                                     "aotc::safe_softmax (after _to_copy when dtype is given), kept through autodiff", true},
    {"aten.cross_entropy_loss.default", crossEntropy, "_log_softmax + nll_loss; probability targets: -sum(logp * target)", true},
    {"aten.nll_loss.default",          nllLoss,      "nll_loss_forward(...)[0]", true},
    {"aten.nll_loss_forward.default",  nllLossForward, "ne/where/unsqueeze/gather/squeeze/neg + sum/div by total weight", true},
    {"aten.mse_loss.default",          mseLoss,      "sub, pow 2, mean/sum", true},
    {"aten.silu.default",              silu,         "x * sigmoid(x)", true},
    {"aten._local_scalar_dense.default", [](Emitter &e, Node &n) {
                                         Node *x = n.tensorArg(0);
                                         return Vals{e.call("aten.detach.default", {e.view(x, {})})};
                                       },
                                                     "detach(view(x, [])): item()'s number as a 0-d tensor, no gradient"},
    {"aten.max.default",               [](Emitter &e, Node &n) {
                                         return Vals{e.call("aten.amax.default", {n.tensorArg(0), std::vector<int64_t>{}, false})};
                                       },
                                                     "amax over every dim", true},
    {"aten.min.default",               [](Emitter &e, Node &n) {
                                         return Vals{e.call("aten.amin.default", {n.tensorArg(0), std::vector<int64_t>{}, false})};
                                       },
                                                     "amin over every dim", true},
    {"aten.unfold.default",            [](Emitter &e, Node &n) {
                                         Node *x = n.tensorArg(0);
                                         const Shape &xs = x->type().shape, &os = n.type().shape;
                                         if (xs.empty()) return Vals{e.call("aten.expand.default", {e.view(x, {1}), os})};
                                         int64_t dim = wrapDimAt(n, n.intArg(1), (int64_t)xs.size());
                                         std::vector<int64_t> st = contiguousStrides(xs);
                                         int64_t inner = st[dim];
                                         st[dim] *= n.intArg(3);
                                         st.push_back(inner);
                                         return Vals{e.call("aten.as_strided.default", {x, os, st, int64_t(0)})};
                                       },
                                                     "as_strided over the dense layout: stride[dim] * step, then stride[dim] for the window"},
    {"aten.var_mean.correction",       [](Emitter &e, Node &n) {
                                         Node *x = n.tensorArg(0);
                                         Node *var = e.call("aten.var.correction", {x, n.args[1]},
                                                            {{"correction", n.args[2]}, {"keepdim", n.args[3]}});
                                         Node *mean = e.call("aten.mean.dim", {x, n.args[1], n.args[3]});
                                         return Vals{var, mean};
                                       },
                                                     "(var.correction, mean.dim) over the same dims", true},
    {"aten.exp2.default",              [](Emitter &e, Node &n) {
                                         Node *x = n.tensorArg(0);
                                         x = e.toDtype(x, n.type().dtype);
                                         return Vals{e.exp(e.mul(x, 0.69314718055994530942))};
                                       },
                                                     "exp(x ln 2) (integers cast to the default float first)", true},
    {"aten.round.decimals",            [](Emitter &e, Node &n) {
                                         Node *x = n.tensorArg(0);
                                         int64_t dec = n.intArg(1);
                                         double p = std::pow(10.0, (double)std::llabs(dec));
                                         if (dec >= 0)
                                           return Vals{e.div(e.call("aten.round.default", {e.mul(x, p)}), p)};
                                         return Vals{e.mul(e.call("aten.round.default", {e.div(x, p)}), p)};
                                       },
                                                     "round(x 10^d) / 10^d; d < 0: round(x / 10^-d) 10^-d", true},
    {"aten.t.default",                 transposeT,   "permute [1, 0]", true},
    {"aten.transpose.int",             transposeInt, "permute with two dims swapped", true},
    {"aten._unsafe_view.default",      toView,       "view", true, true},
    {"aten.reshape.default",           toView,       "view", true, true},
    {"aten.clamp.default",             clampLike,
     "m = where(x > min, x, where(x != x, nan, min)); where(m < max, m, where(m != m, nan, max)): gradient strictly inside, none for NaN x, as eager", true},
    {"aten.hardtanh.default",          clampLike,    "as clamp", true},
    {"aten.clamp_min.default",         clampLike,    "where(x > min, x, where(x != x, nan, min))", true},
    {"aten.clamp_max.default",         clampLike,    "where(x < max, x, where(x != x, nan, max))", true},
    {"aten.cat.default",               cat,          "slice_scatter of each input into zeros", true},
    {"aten.split.Tensor",              split,        "one slice.Tensor per chunk", true},
    {"aten.split_with_sizes.default",  split,        "one slice.Tensor per piece", true},
    {"aten.chunk.default",             split,        "one slice.Tensor per chunk (ceil(size / chunks) each)", true},
    {"aten.unbind.int",                unbind,       "one select.int per index", true},
    {"aten.where.ScalarOther",         whereScalar,  "where.self with a 0-d tensor", true},
    {"aten.where.ScalarSelf",          whereScalar,  "where.self with a 0-d tensor", true},
    {"aten.masked_fill.Scalar",        whereScalar,  "where.self(mask, value, x)", true},
    {"aten.masked_fill.Tensor",        whereScalar,  "where.self(mask, value cast to x's dtype, x)", true},
    {"aten.square.default",            square,       "pow.Tensor_Scalar(x, 2)", true},
    {"aten.bitwise_not.default",       bitwiseNot,   "logical_not (bool); sub(neg(x), 1) (integers)", true},
    {"aten.isinf.default",             isinfRule,      "eq(abs(x), inf); ne(x, x) for integers and bool", true},
    {"aten.argmin.default",            argmin,       "argmax(neg(x)) (floating), argmax(~x) (integers)", true},
    {"aten.index.Tensor",              index,        "index_select of the indexed dims viewed as one, by a linear index", true},
    {"aten.index_put.default",         indexPut,     "scatter_add by a linear index (accumulate), else scatter.src (the last write wins)"},
    {"aten.scaled_dot_product_attention.default", scaledDotProductAttention,
                                                     "bmm(q, k^T) scaled, causal/bool masks by where, float mask added, _softmax (0 for fully masked rows), bmm with v"},
    {"aten._scaled_dot_product_flash_attention_for_cpu.default", flashAttentionForCpu,
                                                     "scaled_dot_product_attention's rule (fewer key/value heads repeated) and a detached logsumexp of the masked scores"},
    {"aten.cumsum.default",            cumsum,       "sum over j of where(j <= i, x expanded along a new dim, 0), after _to_copy to the result dtype"},
    {"aten.cumprod.default", cumprodLike, "prod over j of where(j <= i, x expanded along a new dim, 1), after _to_copy to the result dtype"},
    {"aten.logcumsumexp.default", cumprodLike, "logsumexp over j of where(j <= i, x expanded along a new dim, -inf)"},
    {"aten.cummax.default", cummaxmin, "index = the last j <= i with x[j] == running amax (or both NaN); values = gather(x, dim, index)"},
    {"aten.cummin.default", cummaxmin, "index = the last j <= i with x[j] == running amin (or both NaN); values = gather(x, dim, index)"},
    {"aten.kthvalue.default", orderStatistic, "index = argmax(stable rank == k - 1); values = gather(x, dim, index)"},
    {"aten.median.default", orderStatistic, "median.dim's rule over the flattened input, values only"},
    {"aten.median.dim", orderStatistic, "index = argmax(stable rank == (n - 1) / 2), or the first NaN of a row holding one; values = gather"},
    {"aten.nanmedian.default", orderStatistic, "nanmedian.dim's rule over the flattened input, values only"},
    {"aten.nanmedian.dim", orderStatistic, "index = argmax(stable rank == (count of numbers - 1) / 2) (NaN ranks last); values = gather"},
    {"aten.adaptive_max_pool2d.default", adaptiveMaxPool, "the window taps gathered (index_select of flat positions, -inf outside), the last NaN or first max tap, values = gather by its flat index"},
    {"aten.adaptive_max_pool3d.default", adaptiveMaxPool, "as adaptive_max_pool2d over (D, H, W)"},
    {"aten.copysign.Tensor", copysign, "where(y < 0 or 1/y < 0, -abs(x), abs(x))", true},
    {"aten.copysign.Scalar", copysign, "-abs(x) or abs(x) by the number's sign bit", true},
    {"aten.fmax.default", fmaxFmin, "where(isnan(b), a, where(isnan(a), b, maximum(a, b)))", true},
    {"aten.fmin.default", fmaxFmin, "where(isnan(b), a, where(isnan(a), b, minimum(a, b)))", true},
    {"aten.hypot.default", hypot, "sqrt(a * a + b * b)", true},
    {"aten.ldexp.Tensor", ldexp, "self * pow.Scalar(2, other)", true},
    {"aten.view_copy.default", copyForm, "clone(view)"},
    {"aten._embedding_bag_forward_only.default", embeddingBagForwardOnly, "_embedding_bag (the same results)"},
    {"aten.permute_copy.default", copyForm, "clone(permute)"},
    {"aten.unbind_copy.int", copyForm, "clone of each unbind result"},
    {"aten.as_strided_copy.default", copyForm, "clone(as_strided)"},
    {"aten.narrow_copy.default", copyForm, "clone(slice.Tensor(self, dim, start, start + length))"},
    {"aten.as_strided_scatter.default", asStridedScatter, "index_put of src at the view's flat positions (offset + sum i_k stride_k) into self viewed flat"},
    {"aten.addmv.default", addmv, "alpha * view(mm(mat, vec as a column)) + beta * self (self dropped when beta == 0)"},
    {"aten.addbmm.default", addbmm, "alpha * sum(bmm(batch1, batch2), 0) + beta * self (self dropped when beta == 0)"},
    {"aten._trilinear.default", trilinear, "sum over sumdim of i1 * i2 * i3, each viewed with 1s at its expand dims"},
    {"aten.dist.default", dist, "p-norm of a - b: sqrt(sum d^2), sum |d|, count of d != 0, amax / amin |d|, or pow(sum |d|^p, 1/p)"},
    {"aten.put.default", put, "index_put into self viewed flat (negative indices + numel)"},
    {"aten.empty_permuted.default", emptyPermuted, "full(size, 0) (deterministic, as empty)"},
    {"aten.diagonal.default",          diagonal,     "index.Tensor with aranges on dim1, dim2 (moved last)"},
    {"aten.diagonal_scatter.default",  diagonalScatter, "index_put with aranges on dim1, dim2 (moved last), permuted back"},
    {"aten.index_reduce.default",      indexReduce,  "prod: scatter_reduce.two; mean: scatter_add of sources and counts; amax/amin: extremum of where(index == n, source, -+inf) (and self)"},
    {"aten.multilabel_margin_loss.default", multilabelMarginLoss, "torch's decomposition: targets up to the first -1, gather, clamp(1 - x[y] + x, 0) masked, sums"},
    {"aten.copy.default",              copy,         "_to_copy(expand(src, self's shape), self's dtype)", true},
    {"aten.upsample_nearest2d.vec",    upsampleVec,  "upsample_nearest2d with the output size and scales of compute_output_size", true},
    {"aten.upsample_bilinear2d.vec",   upsampleVec,  "upsample_bilinear2d with the output size and scales of compute_output_size", true},
    {"aten._reshape_alias.default",    reshapeAlias, "view (contiguous strides), else as_strided"},
    {"aten.flip.default",              flip,         "index_select along each flipped dim by L-1-arange(L)", true},
    {"aten.repeat.default",            repeat,       "view [1, s0, 1, s1, ...], expand [r0, s0, ...], view [r0 s0, ...]"},
    {"aten.reflection_pad1d.default",  pad,          "index_select along each padded dim by (L-1) - |(L-1) - |i||, i = arange(-pl, L+pr)"},
    {"aten.reflection_pad2d.default",  pad,          "as reflection_pad1d, per padded dim"},
    {"aten.reflection_pad3d.default",  pad,          "as reflection_pad1d, per padded dim"},
    {"aten.replication_pad1d.default", pad,          "index_select along each padded dim by clamp(arange(-pl, L+pr), 0, L-1)"},
    {"aten.replication_pad2d.default", pad,          "as replication_pad1d, per padded dim"},
    {"aten.replication_pad3d.default", pad,          "as replication_pad1d, per padded dim"},
    {"aten.max.dim",                   maxMinDim,    "argmax(x) + gather of the value at the index (squeezed unless keepdim)"},
    {"aten.min.dim",                   maxMinDim,    "argmax of the order reversed (neg / ~x / logical_not) + gather"},
    {"aten.pow.Scalar",                powScalar,    "pow.Tensor_Tensor(full_like(exponent, base, result dtype), exponent)", true},
    {"aten.div.Tensor_mode",           divMode,      "div; trunc(div); floor: torch's div_floor_floating with fmod, where, floor", true},
    {"aten.div.Scalar_mode",           divMode,      "as div.Tensor_mode", true},
    {"aten.fill.Scalar",               fillScalar,   "full_like(self, value)", true},
    {"aten.empty.memory_format",       emptyLike,    "zeros (uninitialized values are zeros in aotc)"},
    {"aten.empty_strided.default",     emptyLike,    "zeros (values are dense: the strides do not matter)"},
    {"aten.sort.default",              sortOrTopk,   "stable ranks (sum over j of x[j] before x[i], ties by position; NaN last) + scatter.src of values and positions"},
    {"aten.sort.stable",               sortOrTopk,   "as sort"},
    {"aten.topk.default",              sortOrTopk,   "ranks of the descending (largest) / ascending sort; ranks >= k to a spare slot, sliced off"},
    {"aten._cdist_forward.default",    cdistForward, "p-norm over the last dim of x1[.., :, None, :] - x2[.., None, :, :] (one fused reduction)"},
    {"aten._pdist_forward.default",    pdistForward, "p-norm of x[I] - x[J] for the pairs i < j (closed-form I, J from arange)"},
    {"aten.im2col.default",            im2col,       "gather from the zero-padded image at each tap's flat position (from aranges)"},
    {"aten.col2im.default",            col2im,       "scatter_add of the columns into the padded image at the taps' positions, cropped"},
    {"aten.masked_scatter.default",    maskedScatter, "where(mask, index_select(source, scan(mask) - 1), self); scan: log2(N) shifted int64 adds"},
    {"aten.avg_pool3d.default",        pool3d,       "avg_pool2d over (H, W) on [N, C*D, H, W], then over D with a (k, 1) window on [N, C, D, OH*OW]"},
    {"aten._adaptive_avg_pool3d.default", pool3d,    "_adaptive_avg_pool2d over (H, W), then over D"},
    {"aten.max_pool3d_with_indices.default", pool3d, "max_pool2d_with_indices over (H, W), then over D; index d*H*W + the first pass's at d"},
    {"aten.grid_sampler_2d.default",   gridSampler2d, "source coordinates (unnormalize, reflect, clip) and 4 (bilinear) or 1 (nearest) weighted gathers, 0 outside"},
    {"aten._embedding_bag.default",    embeddingBag, "bag = #(offsets <= i) - 1; scatter_add (sum, mean / count) or amax + first position (max) into [B + 1, D]"},
    {"aten.var.dim",                   varDim,       "var.correction(correction = unbiased)", true},
    {"aten.embedding_dense_backward.default", embeddingDenseBackward, "scatter_add of the rows (0 at padding_idx, / count if scale_grad_by_freq) into zeros"},
    {"aten._native_batch_norm_legit.no_stats", batchNormNoStats, "_native_batch_norm_legit_functional with running stats zeros / ones (unread)"},
    {"aten.triangular_solve.default",  triangularSolve, "linalg_solve_triangular of A (transposed: A^T, upper flipped); A expanded and cloned"},
    {"aten.lu_unpack.default",         luUnpack,     "P = aotc.lapack_perm(pivots); L = tril(LU, -1) + I, U = triu(LU), narrowed to min(m, n)"},
    {"aten.linalg_lu.default",         linalgLu,     "linalg_lu_factor_ex + lu_unpack"},
    {"aten.linalg_inv_ex.default",     invEx,        "_linalg_solve_ex(A, I at A's shape)"},
  };
  // clang-format on
  return t;
}

std::vector<std::pair<std::string, std::string>> randomRuleTable(); // Random.cpp

std::vector<std::pair<std::string, std::string>> decomposeTable() {
  std::vector<std::pair<std::string, std::string>> r = randomRuleTable();
  for (const RuleEntry &e : table()) r.push_back({e.target, e.summary});
  return r;
}

void decompose(Program &p) {
  widenIndexInputs(p.forward);
  rules::recomposeSafeSoftmax(p.forward); // before the table rewrites the pattern's ops
  rewrite::applyRules(p.forward, table(), "decompose");
  assignRandomStreams(p); // after the composites: SDPA with dropout_p > 0 emits a dropout
  p.stage = "decompose";
}

} // namespace aotc
