//===- Fusion.cpp - From a primitive graph to fused kernels ---------------===//
//
// This file implements fuseGraph (Kernels.h). It walks the graph in order and
// keeps, for each node, a *value*: an expression tree over the node's index
// space whose leaves load realized buffers through affine maps.
//  * Views (view, permute, expand, unsqueeze, squeeze, slice, select, ...)
//    rewrite the leaves' maps: they never copy. A reshape that is not
//    expressible on some leaf (torch's computeStride fails) realizes first.
//  * Pointwise ops build bigger trees (inlined into every consumer) unless the
//    node is a graph output, feeds a matmul, is used several times and is not
//    trivial, or is a non-trivial 0-d value read by a larger consumer: then it is
//    *realized*, i.e. stored by a map kernel.
//  * Reductions fold their (inlined) input in a reduce kernel; gather and
//    index_select substitute a bounds-checked data-dependent index into the
//    leaves; the scatter family (scatter_add, scatter, aotc::scatter_combine) is an init
//    kernel plus a sequential accumulation (StoreCombine: add, mul, max, min, set);
//    slice_scatter/select_scatter are pointwise-like values (ViewScatter.cpp).
//  * mm/addmm/bmm become GEMM extern kernels reading realized buffers; a transposed
//    operand (a permute of a contiguous matrix) is a transpose flag (these and the other
//    library calls: FuseLibraryCalls.cpp; the fuser's class: GraphFuser.h).
// KernelMerge.cpp then merges kernels with the same outer domain.
//===----------------------------------------------------------------------===//
#include "GraphFuser.h"

namespace aotc {
namespace fusion {

/// The table entry of a call node's target (nodeError when codegen cannot lower it).
const OpLowering &loweringOf(const Node &n) {
  const OpLowering *l = findLowering(n.target);
  if (!l) nodeError(n, "codegen: unsupported op '" + n.target + "' (not a primitive; was the graph lowered?)");
  return *l;
}

/// Views, reshapes, aliases and clones: their value is their input's, re-indexed.
bool isViewTarget(const std::string &t) {
  const OpLowering *l = findLowering(t);
  if (!l) return false;
  switch (l->kind) {
  case LoweringKind::View: case LoweringKind::Reshape: case LoweringKind::Alias: case LoweringKind::Clone:
    return true;
  default:
    return false;
  }
}

/// computeStride (aten/src/ATen/TensorUtils.cpp): strides of a view of a tensor
/// with (oldShape, oldStride) as newShape, or nullopt when not expressible.
std::optional<Dims> computeStride(const Dims &oldShape, const Dims &oldStride, const Dims &newShape) {
  Dims ns(newShape.size(), Dim(0));
  if (oldShape.empty() || numelOf(oldShape).is(0)) return ns; // all coefficients 0
  int64_t viewD = (int64_t)newShape.size() - 1;
  Dim chunkBase = oldStride.back();
  Dim tensorNumel = 1, viewNumel = 1;
  for (int64_t td = (int64_t)oldShape.size() - 1; td >= 0; --td) {
    tensorNumel *= oldShape[td];
    if (td == 0 || (oldShape[td - 1] != 1 && oldStride[td - 1] != tensorNumel * chunkBase)) {
      while (viewD >= 0 && (viewNumel.ref() < tensorNumel.ref() || newShape[viewD] == 1)) {
        ns[viewD] = viewNumel * chunkBase;
        viewNumel *= newShape[viewD];
        --viewD;
      }
      if (viewNumel != tensorNumel) return std::nullopt;
      if (td > 0) {
        chunkBase = oldStride[td - 1];
        tensorNumel = 1;
        viewNumel = 1;
      }
    }
  }
  if (viewD != -1) return std::nullopt;
  return ns;
}

ERef GraphFuser::operand(const Node &n, size_t i, const Shape &out, DType t) {
  AOTC_ASSERT(i < n.args.size(), "codegen: node '" + n.name + "' lacks argument " +
                                     std::to_string(i));
  if (auto *p = std::get_if<Node *>(&n.args[i])) {
    Val &v = val(*p);
    ERef e = v.e;
    if (v.type.shape != out) e = applyIndexMap(e, IndexMap::broadcast(v.type.shape, out));
    return mkCast(e, t);
  }
  return mkConstArg(t, n, i);
}

void GraphFuser::maybeRealize(const Node *n, Val &v) {
  bool mustStore = outSlots_.count(n) > 0;
  // A GEMM behind a view that is a graph output reads that output's slot (the attention
  // output's transpose, saved and read by the projection GEMM): n need not be stored too.
  std::vector<Node *> eff;
  effectiveUsers(n, eff, true);
  bool feedsMatmul = false;
  for (Node *u : eff) feedsMatmul = feedsMatmul || readsBuffers(u);
  int cost = exprCost(v.e);
  // A gather / index_select reading n as its data evaluates n only at the
  // gathered elements: inlining costs a few recomputations, not a pass, so such
  // users do not make n "shared" (MLP: log_softmax feeds exp over the row and a
  // gather of one element per row; no [N, C] buffer between the two kernels).
  size_t full = 0;
  for (Node *u : eff) {
    const OpLowering *l = findLowering(*u);
    bool picks = l && (l->kind == LoweringKind::Gather || l->kind == LoweringKind::IndexSelect) &&
                 readsAsData(u, n);
    full += picks ? 0 : 1;
  }
  bool shared = eff.size() > 1 && full > 1 && cost > 2 && !joinsPointwise(n);
  bool unfused = !opts_.fuse && cost > 0;
  // A 0-d value that is not trivial (an optimizer's bias corrections: pow, sqrt, div of
  // hyperparameters) is computed once into a scalar rather than once per element of a
  // larger consumer (the ZeRO-1 update over one flat shard: 66 -> 3 ms a step).
  bool scalarIntoLoop = false;
  if (numelOf(v.type.shape) == 1 && cost > 2)
    for (Node *u : eff) scalarIntoLoop = scalarIntoLoop || (u->isCall() && numelOf(u->type().shape) > 1);
  if (mustStore || feedsMatmul || shared || cost > 48 || unfused || scalarIntoLoop)
    v = realizeInto(v, homeFor(n, "", true));
}

void GraphFuser::defineNode(const Node *n) {
  if (!n->isCall()) return;
  if (n->target == "getitem") nodeError(*n, "codegen: multi-result ops must be lowered before codegen");
  const OpLowering &l = loweringOf(*n);
  switch (l.kind) {
  case LoweringKind::Pointwise: return definePointwise(n, l.pointwise);
  case LoweringKind::View:
  case LoweringKind::Reshape:
  case LoweringKind::Alias:
  case LoweringKind::Clone: return defineView(n, l);
  case LoweringKind::Reduction: return defineReduction(n, l);
  case LoweringKind::Matmul: return defineMatmul(n, l);
  case LoweringKind::Gather: return defineGather(n);
  case LoweringKind::IndexSelect: return defineIndexSelect(n);
  case LoweringKind::Scatter: return defineScatter(n);
  case LoweringKind::ViewScatter: return defineViewScatter(n);
  case LoweringKind::Conv: return defineConv(n, l);
  case LoweringKind::Fft: return defineFft(n);
  case LoweringKind::Linalg: return defineLinalg(n, l);
  }
}

void GraphFuser::definePointwise(const Node *n, PointwiseRule rule) {
  const TensorType &ot = n->type();
  const Dims od = dimsOf(ot);
  PointwiseArgs args{*n, od, ot.dtype,
                     [&](size_t i, DType t) { return operand(*n, i, ot.shape, t); }};
  ERef e = rule(args);
  Val v;
  v.type = ot;
  v.e = mkCast(e, ot.dtype);
  if (e->op != ScalarOp::Const) {
    for (auto &a : n->args)
      if (auto *p = std::get_if<Node *>(&a))
        for (auto &o : val(*p).ops) v.ops.push_back(o);
    v.ops.push_back(opBase(n->target));
  }
  maybeRealize(n, v);
  vals_[n] = std::move(v);
}

void GraphFuser::defineView(const Node *n, const OpLowering &l) {
  if (auto it = preRealized_.find(n); it != preRealized_.end()) {
    vals_[n] = loadOf(it->second);
    return;
  }
  Node *src = n->tensorArg(0);
  Val in = val(src);
  const Dims os = dimsOf(in.type), ns = dimsOf(n->type());
  Val v;
  v.type = n->type();
  v.ops = in.ops;
  if (l.kind == LoweringKind::Alias || l.kind == LoweringKind::Clone) {
    v.e = in.e;
    v.home = in.home;
    if (l.kind == LoweringKind::Clone) {
      vals_[n] = v;
      maybeRealize(n, vals_[n]);
      return;
    }
  } else if (l.kind == LoweringKind::View) {
    v.e = applyIndexMap(in.e, l.view(*n, os, ns));
  } else {
    // view / _unsafe_view / reshape: re-stride each leaf (computeStride), else realize.
    auto reshape = [&](const ERef &e) {
      return mapAddrs(e, [&](EAddr &a) {
        auto st = computeStride(os, a.coef, ns);
        if (!st) return false;
        a.coef = *st;
        return true;
      });
    };
    if (numelOf(refShape(os)) != numelOf(refShape(ns))) nodeError(*n, "codegen: view changes the number of elements");
    if (numelOf(os) != numelOf(ns))
      nodeError(*n, "codegen: a view over run-time sizes whose element counts aotc cannot prove equal (" +
                        numelOf(os).str() + " and " + numelOf(ns).str() + "); give the sizes with --specialize "
                        "(docs/dynamic-shapes.md)");
    ERef e = reshape(in.e);
    if (!e) {
      // A dense copy first; into n's own output slot when it has one (the same row-major
      // bytes), which then needs no second copy.
      const bool intoSlot = outSlots_.count(n) > 0;
      int buf = intoSlot ? homeFor(n) : claimViewSlot(n);
      Val r2 = realizeInto(in, buf >= 0 ? buf : addBuffer(src->name + "_contig", in.type));
      e = reshape(r2.e);
      v.ops.clear();
      if (intoSlot) {
        v.e = e;
        vals_[n] = std::move(v);
        return;
      }
    }
    v.e = e;
  }
  if (!v.e && (anySymbolic(os) || anySymbolic(ns)))
    nodeError(*n, "codegen: a view over run-time sizes that aotc cannot express as strides (" + dimsStr(os) +
                      " as " + dimsStr(ns) + "); give the sizes with --specialize (docs/dynamic-shapes.md)");
  if (!v.e) internalError("codegen: view rewrite failed for '" + n->name + "'");
  if (outSlots_.count(n)) v = realizeInto(v, homeFor(n));
  vals_[n] = std::move(v);
}

void GraphFuser::defineReduction(const Node *n, const OpLowering &l) {
  Node *src = n->tensorArg(0);
  Val in = val(src);
  const Dims S = dimsOf(in.type);
  int r = (int)S.size();
  std::string b = opBase(n->target);
  std::vector<bool> mask(r, false);
  bool all = true;
  if (n->args.size() > 1 && !n->isNoneArg(1)) {
    if (auto *dims = std::get_if<std::vector<int64_t>>(&n->args[1])) {
      all = dims->empty();
      for (int64_t d : *dims) {
        int64_t w = wrapDimOrError(*n, d, r);
        if (r > 0) mask[w] = true;
      }
    } else if (std::holds_alternative<int64_t>(n->args[1])) {
      all = false;
      int64_t w = wrapDimOrError(*n, n->intArg(1), r);
      if (r > 0) mask[w] = true;
    }
  }
  if (all) mask.assign(r, true);
  const TensorType &ot = n->type();
  bool keep = (int)ot.shape.size() == r && r > 0;
  // Domain: kept dims (outer) then reduced dims (inner).
  Dims outer, inner;
  std::vector<int> pos(r);
  for (int d = 0; d < r; ++d)
    if (!mask[d]) {
      pos[d] = (int)outer.size();
      outer.push_back(S[d]);
    }
  for (int d = 0; d < r; ++d)
    if (mask[d]) {
      pos[d] = (int)outer.size() + (int)inner.size();
      inner.push_back(S[d]);
    }
  int nd = (int)outer.size() + (int)inner.size();
  ERef body = applyIndexMap(in.e, IndexMap::select(pos, nd));
  TKernel k;
  k.outer = outer;
  TPhase p;
  p.inner = inner;
  TReduction red;
  red.reg = 0;
  DType od = ot.dtype;
  DType vt = in.type.dtype;
  red.kind = l.reduce;
  if (l.reduce == ReduceKind::Sum || l.reduce == ReduceKind::Prod) {
    red.accType = isFloating(od) ? DType::F64 : DType::I64;
    // sum(x, dtype=torch.bool) is sum(x.to(torch.bool)): 0.5 counts as True, not as
    // the 0 that a direct float -> i64 accumulator cast would give (libFuzzer find).
    red.value = mkCast(od == DType::Bool && vt != DType::Bool ? mkCast(body, DType::Bool) : body,
                       red.accType);
  } else { // max, min, argmax
    red.accType = vt == DType::Bool ? DType::I64 : vt;
    red.value = mkCast(body, red.accType);
  }
  k.regs.push_back(l.reduce == ReduceKind::ArgMax ? DType::I64 : (l.mean ? red.accType : od));
  ERef result = mkReg(k.regs[0], 0);
  if (l.mean) {
    result = mkOp(ScalarOp::Div, red.accType, {result, mkSizeConst(red.accType, numelOf(inner))});
  }
  p.reds.push_back(red);
  int home = homeFor(n, "", true);
  TStore st;
  st.addr.buffer = home;
  auto strides = contiguousStrides(dimsOf(ot));
  st.addr.coef.assign(nd, Dim(0));
  for (int d = 0, o = 0; d < r; ++d)
    if (!mask[d]) {
      st.addr.coef[o++] = keep ? strides[d] : strides[pos[d]];
    }
  st.value = mkCast(result, od);
  p.stores.push_back(st);
  k.phases.push_back(std::move(p));
  k.ops = in.ops;
  k.ops.push_back(b);
  ks_.push_back(std::move(k));
  vals_[n] = loadAs(home, ot);
}
void GraphFuser::defineGather(const Node *n) {
  Node *src = n->tensorArg(0);
  Val in = val(src);
  int r = (int)in.type.shape.size();
  int64_t w = wrapDimOrError(*n, n->intArg(1), r);
  int64_t dim = r == 0 ? 0 : w;
  Node *idxNode = n->tensorArg(2);
  Val idx = val(idxNode);
  const Shape &os = n->type().shape;
  ERef ie = mkCast(idx.e, DType::I64);
  Dim bound = r == 0 ? Dim(1) : dimsOf(in.type)[dim];
  int err = newError(*n, "index out of bounds for dimension " + std::to_string(dim) +
                             " with size " + bound.str());
  Val v;
  v.type = n->type();
  v.ops = in.ops;
  for (auto &o : idx.ops) v.ops.push_back(o);
  v.ops.push_back("gather");
  if (numelOf(os) == 0) {
    // An empty index may have another rank than the input (formats.md "Dtypes"): nothing
    // is read, and the address map below would index the output's coefficients by the
    // input's dims (libFuzzer find: heap-buffer-overflow for a [0] index of a 2-d input).
    v.e = mkConst(v.type.dtype, 0.0);
    maybeRealize(n, v);
    vals_[n] = std::move(v);
    return;
  }
  v.e = mapAddrs(in.e, [&](EAddr &a) {
    Dims nc(os.size(), Dim(0));
    EDyn d;
    d.value = ie;
    d.bound = bound;
    d.error = err;
    for (int k = 0; k < r; ++k) {
      if (k == dim) d.stride = a.coef[k];
      else nc[k] = a.coef[k];
    }
    a.coef = std::move(nc);
    a.dyn.push_back(d);
    return true;
  });
  if (r == 0) { // gather on a 0-d tensor: only index 0 is valid
    v.e = in.e;
  }
  maybeRealize(n, v);
  vals_[n] = std::move(v);
}

void GraphFuser::defineIndexSelect(const Node *n) {
  Node *src = n->tensorArg(0);
  Val in = val(src);
  int r = (int)in.type.shape.size();
  int64_t dim = wrapDimOrError(*n, n->intArg(1), r);
  Val idx = val(n->tensorArg(2));
  const Shape &os = n->type().shape;
  int nr = (int)os.size();
  // index var 0 = out var dim (a 0-d self gives a 0-d result: the index's one element).
  std::vector<int> ipos(idx.type.shape.size(), nr == 0 ? -1 : (int)dim);
  ERef ie = mkCast(applyIndexMap(idx.e, IndexMap::select(ipos, nr)), DType::I64);
  Dim bound = r == 0 ? Dim(1) : dimsOf(in.type)[dim];
  int err = newError(*n, "index out of range for dimension " + std::to_string(dim) +
                             " with size " + bound.str());
  Val v;
  v.type = n->type();
  v.ops = in.ops;
  v.ops.push_back("index_select");
  v.e = mapAddrs(in.e, [&](EAddr &a) {
    EDyn d;
    d.value = ie;
    d.bound = bound;
    d.error = err;
    if (r > 0) {
      d.stride = a.coef[dim];
      a.coef[dim] = 0;
    }
    a.dyn.push_back(d);
    return true;
  });
  maybeRealize(n, v);
  vals_[n] = std::move(v);
}

void GraphFuser::defineScatter(const Node *n) {
  StoreCombine combine = StoreCombine::Add;
  if (n->target == "aten.scatter.src" || n->target == "aten.scatter.value") {
    combine = StoreCombine::Set;
  } else if (n->target == "aotc.scatter_combine.default") {
    const std::string &red = std::get<std::string>(n->args.at(4));
    combine = red == "prod" ? StoreCombine::Mul : red == "amax" ? StoreCombine::Max
              : red == "amin" ? StoreCombine::Min : StoreCombine::Add;
  }
  const std::string what = opBase(n->target);
  Val self = val(n->tensorArg(0));
  int r = (int)self.type.shape.size();
  int64_t w = wrapDimOrError(*n, n->intArg(1), r);
  int64_t dim = r == 0 ? 0 : w;
  Node *idxNode = n->tensorArg(2);
  Val idx = val(idxNode);
  const bool scalarValue = n->target == "aten.scatter.value";
  Val src = scalarValue ? Val{} : val(n->tensorArg(3));
  const Dims I = dimsOf(idx.type);
  int home = homeFor(n);
  // 1. out = self (a map kernel, mergeable).
  Val init = self;
  realizeInto(init, home, what);
  if (numelOf(I).is(0)) {
    vals_[n] = loadOf(home);
    return;
  }
  // 2. Sequential accumulation along `dim`, parallel over the other index dims.
  int ir = (int)I.size();
  std::vector<int> pos(ir);
  Dims outer;
  for (int d = 0; d < ir; ++d)
    if (d != dim) {
      pos[d] = (int)outer.size();
      outer.push_back(I[d]);
    }
  if (ir > 0) pos[dim] = ir - 1;
  IndexMap m = IndexMap::select(pos, ir);
  TKernel k;
  k.noMerge = true;
  k.outer = outer;
  TPhase p;
  if (ir > 0) p.inner = {I[dim]};
  const Dims selfDims = dimsOf(self.type);
  auto strides = contiguousStrides(selfDims);
  TStore st;
  st.accumulate = true;
  st.combine = combine;
  st.addr.buffer = home;
  st.addr.coef.assign(ir, Dim(0));
  EDyn d;
  d.value = mkCast(applyIndexMap(idx.e, m), DType::I64);
  d.bound = r == 0 ? Dim(1) : selfDims[dim];
  d.stride = r == 0 ? Dim(0) : strides[dim];
  d.error = newError(*n, "index out of bounds for dimension " + std::to_string(dim) +
                             " with size " + d.bound.str());
  for (int e = 0; e < ir; ++e)
    if (e != dim) st.addr.coef[pos[e]] = strides[e];
  st.addr.dyn.push_back(d);
  if (scalarValue) {
    st.value = mkConstArg(self.type.dtype, *n, 3);
  } else {
    if (src.type.shape.size() != I.size())
      nodeError(*n, "codegen: " + what + " src and index must have the same rank");
    st.value = mkCast(applyIndexMap(src.e, m), self.type.dtype);
  }
  p.stores.push_back(st);
  k.phases.push_back(std::move(p));
  k.ops = src.ops;
  for (auto &o : idx.ops) k.ops.push_back(o);
  k.ops.push_back(what);
  ks_.push_back(std::move(k));
  vals_[n] = loadOf(home);
}

/// slice_scatter / select_scatter: a pointwise-like value (ViewScatter.cpp),
/// inlined into consumers and realized by the usual rules.
void GraphFuser::defineViewScatter(const Node *n) {
  const Val &self = val(n->tensorArg(0));
  const Val &src = val(n->tensorArg(1));
  Val v;
  v.type = n->type();
  v.e = viewScatterValue(*n, self.e, src.e, dimsOf(v.type));
  v.ops = self.ops;
  for (auto &o : src.ops) v.ops.push_back(o);
  v.ops.push_back(opBase(n->target));
  maybeRealize(n, v);
  vals_[n] = std::move(v);
}

void GraphFuser::run() {
  users_.clear();
  for (auto &[k, v] : g_.users()) users_[k] = v;
  auto outs = g_.outputs();
  AOTC_ASSERT(outs.size() == out_.size(), "codegen: output binding count mismatch");
  claimed_.assign(outs.size(), false);
  for (size_t k = 0; k < outs.size(); ++k) outSlots_[outs[k]].push_back((int)k);
  auto phs = g_.placeholders();
  AOTC_ASSERT(phs.size() == in_.size(), "codegen: input binding count mismatch");
  for (size_t i = 0; i < phs.size(); ++i) vals_[phs[i]] = loadOf(in_[i]);
  for (auto &up : g_.nodes()) order_[up.get()] = (int)order_.size();
  for (auto &up : g_.nodes()) defineNode(up.get());
  // Outputs not yet stored in their slot: copy (or compute) them there.
  for (size_t k = 0; k < outs.size(); ++k) {
    if (claimed_[k]) continue;
    Val v = val(outs[k]);
    v.ops.clear();
    realizeInto(v, out_[k]);
    claimed_[k] = true;
  }
  if (opts_.fuse) mergeKernels(ks_, kg_.buffers);
  int id = 0;
  for (auto &k : ks_) {
    if (k.dead) continue;
    // Pure map kernels of rank >= 2: cut where index comparisons change (IndexSplit.cpp),
    // else the last dim becomes the sequential inner loop.
    const bool split = opts_.fuse && opts_.splitIndexSets && splitIndexSets(k);
    if (!split && k.kind == Kernel::Kind::Loop && k.phases.size() == 1 && !k.phases[0].isReduce() &&
        k.phases[0].inner.empty() && k.outer.size() >= 2 && !k.noMerge) {
      k.phases[0].inner = {k.outer.back()};
      k.outer.pop_back();
    }
    kg_.kernels.push_back(flattenKernel(k, "k" + std::to_string(id++)));
  }
  planScratch(kg_, opts_.checkedArena ? kArenaRedzone : 0);
}
} // namespace fusion

void fuseGraph(const Graph &g, KernelGraph &kg, const std::vector<int> &inputBuffers,
               const std::vector<int> &outputBuffers, const FusionOptions &opts) {
  fusion::GraphFuser f(g, kg, inputBuffers, outputBuffers, opts);
  f.run();
}

} // namespace aotc
