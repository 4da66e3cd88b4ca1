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
//    operand (a permute of a contiguous matrix) is a transpose flag.
// KernelMerge.cpp then merges kernels with the same outer domain.
//===----------------------------------------------------------------------===//
#include "OpLowering.h"

#include "aotc/Conv.h"

#include "aotc/Diagnostics.h"
#include "aotc/Fft.h"
#include "aotc/OpRegistry.h"

#include <algorithm>
#include <unordered_map>

namespace aotc {
namespace fusion {
namespace {

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
std::optional<std::vector<int64_t>> computeStride(const Shape &oldShape,
                                                  const std::vector<int64_t> &oldStride,
                                                  const Shape &newShape) {
  std::vector<int64_t> ns(newShape.size(), 0);
  if (numelOf(oldShape) == 0 || oldShape.empty()) return ns; // all coefficients 0
  int64_t viewD = (int64_t)newShape.size() - 1;
  int64_t chunkBase = oldStride.back();
  int64_t tensorNumel = 1, viewNumel = 1;
  for (int64_t td = (int64_t)oldShape.size() - 1; td >= 0; --td) {
    tensorNumel *= oldShape[td];
    if (td == 0 || (oldShape[td - 1] != 1 && oldStride[td - 1] != tensorNumel * chunkBase)) {
      while (viewD >= 0 && (viewNumel < tensorNumel || newShape[viewD] == 1)) {
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

struct Val {
  TensorType type;
  ERef e;
  std::vector<std::string> ops; ///< Ops inlined into e (not yet in a kernel).
  int home = -1;                ///< Buffer when e is exactly a dense load of it.
};

class GraphFuser {
public:
  GraphFuser(const Graph &g, KernelGraph &kg, const std::vector<int> &in,
             const std::vector<int> &out, const FusionOptions &opts)
      : g_(g), kg_(kg), in_(in), out_(out), opts_(opts) {}

  void run();

private:
  const Graph &g_;
  KernelGraph &kg_;
  const std::vector<int> &in_, &out_;
  const FusionOptions &opts_;
  std::unordered_map<const Node *, Val> vals_;
  std::unordered_map<const Node *, std::vector<Node *>> users_;
  std::unordered_map<const Node *, std::vector<int>> outSlots_;
  std::vector<bool> claimed_;
  std::vector<TKernel> ks_;
  /// Views whose value a GEMM already wrote densely into their output slot.
  std::unordered_map<const Node *, int> preRealized_;

  Val &val(const Node *n) {
    auto it = vals_.find(n);
    AOTC_ASSERT(it != vals_.end(), "codegen: no value for node '" + n->name + "'");
    return it->second;
  }

  int addBuffer(const std::string &name, const TensorType &t) {
    Buffer b;
    b.name = name;
    b.type = t;
    b.kind = BufferKind::Scratch;
    kg_.buffers.push_back(b);
    return (int)kg_.buffers.size() - 1;
  }

  Val loadOf(int buffer) {
    Val v;
    v.type = kg_.buffers[buffer].type;
    EAddr a;
    a.buffer = buffer;
    a.coef = contiguousStrides(v.type.shape);
    v.e = mkLoad(v.type.dtype, std::move(a));
    v.home = buffer;
    return v;
  }

  int newError(const Node &n, const std::string &what) {
    // The user's op and line first (Node::userOp, the stack_trace's innermost frame), then
    // the node the check is in: "in cross_entropy (model.py:17): node 'gather' (...): ...".
    std::string where = userContext(n);
    kg_.errors.push_back((where.empty() ? "" : where + ": ") + "node '" + n.name + "' (" + n.target + "): " + what);
    return (int)kg_.errors.size() - 1;
  }

  /// The buffer a realized node should live in: its (first unclaimed) output slot, else
  /// (viaView: for a caller whose buffer will hold exactly n's value, densely) the slot of a
  /// reshape of n (viewSlotUser), else scratch. Read it back with loadAs(home, n's type).
  int homeFor(const Node *n, const std::string &suffix = "", bool viaView = false) {
    auto it = outSlots_.find(n);
    if (it != outSlots_.end() && suffix.empty())
      for (int k : it->second)
        if (!claimed_[k]) {
          claimed_[k] = true;
          return out_[k];
        }
    if (viaView && suffix.empty())
      if (int b = claimViewSlot(n); b >= 0) return b;
    return addBuffer(n->name + suffix, n->types.empty() ? TensorType{} : n->type());
  }

  /// The slot of viewSlotUser(n), claimed (that view's value is then the slot's contents),
  /// or -1.
  int claimViewSlot(const Node *n) {
    if (const Node *u = viewSlotUser(n))
      for (int k : outSlots_[u])
        if (!claimed_[k]) {
          claimed_[k] = true;
          preRealized_[u] = out_[k];
          return out_[k];
        }
    return -1;
  }

  /// A chain of view / reshape / _unsafe_view / alias / clone users of n (each of the same
  /// dtype and element count as n, so n's dense row-major bytes are its value) ending at a
  /// node with an unclaimed output slot: n stored there needs no copy into that slot (the
  /// forward's saved `view` of a layer norm or GELU output, read by the next GEMM).
  const Node *viewSlotUser(const Node *n) {
    for (Node *u : users_[n]) {
      if (!u->isCall() || u->types.size() != 1 || preRealized_.count(u) || u->tensorArg(0) != n) continue;
      const OpLowering *l = findLowering(*u);
      if (!l) continue;
      const TensorType &ut = u->type(), &nt = n->type();
      // expand to the same shape (export's expand before a bmm's view) is the identity too.
      bool identity = false;
      if (l->kind == LoweringKind::View && ut.shape == nt.shape) {
        IndexMap m = l->view(*u, nt.shape, ut.shape), id = IndexMap::identity((int)nt.shape.size());
        identity = m.m == id.m && m.c == id.c && m.newRank == id.newRank;
      }
      if (l->kind != LoweringKind::Reshape && l->kind != LoweringKind::Alias && l->kind != LoweringKind::Clone &&
          !identity)
        continue;
      if (ut.dtype != nt.dtype || ut.numel() != nt.numel()) continue;
      if (auto it = outSlots_.find(u); it != outSlots_.end())
        for (int k : it->second)
          if (!claimed_[k]) return u;
      if (const Node *w = viewSlotUser(u)) return w;
    }
    return nullptr;
  }

  /// `buffer` read densely as a value of type t (t's element count, the buffer's dtype).
  Val loadAs(int buffer, const TensorType &t) {
    Val v;
    v.type = TensorType{kg_.buffers[buffer].type.dtype, t.shape};
    AOTC_ASSERT(v.type.numel() == kg_.buffers[buffer].type.numel(),
                "codegen: buffer '" + kg_.buffers[buffer].name + "' read with another element count");
    EAddr a;
    a.buffer = buffer;
    a.coef = contiguousStrides(v.type.shape);
    v.e = mkLoad(v.type.dtype, std::move(a));
    v.home = buffer;
    return v;
  }

  /// Stores v densely into `buffer` with a map kernel; returns the loaded value.
  Val realizeInto(Val v, int buffer, const std::string &opName = "") {
    TKernel k;
    k.outer = v.type.shape;
    TPhase p;
    TStore s;
    s.addr.buffer = buffer;
    s.addr.coef = contiguousStrides(v.type.shape);
    s.value = mkCast(v.e, kg_.buffers[buffer].type.dtype);
    p.stores.push_back(s);
    k.phases.push_back(std::move(p));
    k.ops = v.ops;
    if (k.ops.empty()) k.ops.push_back(opName.empty() ? "copy" : opName);
    ks_.push_back(std::move(k));
    return loadAs(buffer, v.type);
  }

  /// Non-view users, looking through views; with stopAtSlots, a view that is a graph output
  /// is a user itself (it is stored in its slot, and its own users read it from there).
  void effectiveUsers(const Node *n, std::vector<Node *> &out, bool stopAtSlots = false) {
    for (Node *u : users_[n]) {
      if (u->isCall() && isViewTarget(u->target) && !(stopAtSlots && outSlots_.count(u)))
        effectiveUsers(u, out, stopAtSlots);
      else out.push_back(u);
    }
  }

  /// True when u's data argument (arg 0) is n or a chain of views of n, and
  /// its other tensor arguments (the index) do not depend on n through views.
  bool readsAsData(const Node *u, const Node *n) {
    auto viewOf = [&](const Node *a) {
      while (a != n && a->isCall() && isViewTarget(a->target)) a = a->tensorArg(0);
      return a == n;
    };
    if (!viewOf(u->tensorArg(0))) return false;
    for (size_t i = 1; i < u->args.size(); ++i)
      if (auto *p = std::get_if<Node *>(&u->args[i]); p && viewOf(*p)) return false;
    return true;
  }

  bool isMatmul(const Node *n) {
    const OpLowering *l = findLowering(*n);
    return l && l->kind == LoweringKind::Matmul;
  }
  /// A library call that reads its operands from dense buffers (GEMMs, convolutions).
  bool readsBuffers(const Node *n) {
    const OpLowering *l = findLowering(*n);
    return l && (l->kind == LoweringKind::Matmul || l->kind == LoweringKind::Conv || l->kind == LoweringKind::Fft ||
                 l->kind == LoweringKind::Linalg);
  }

  void defineNode(const Node *n);
  void definePointwise(const Node *n, PointwiseRule rule);
  void defineView(const Node *n, const OpLowering &l);
  void defineReduction(const Node *n, const OpLowering &l);
  void defineMatmul(const Node *n, const OpLowering &l);
  void defineGather(const Node *n);
  void defineIndexSelect(const Node *n);
  void defineScatter(const Node *n);
  void defineViewScatter(const Node *n);
  void defineConv(const Node *n, const OpLowering &l);
  void defineFft(const Node *n);
  void defineLinalg(const Node *n, const OpLowering &l);
  /// (buffer, element offset) of a dense row-major copy of arg's value (arg's own home when
  /// it already is one).
  std::pair<int, int64_t> denseOperand(Node *arg);
  void maybeRealize(const Node *n, Val &v);

  ERef operand(const Node &n, size_t i, const Shape &out, DType t);
  struct BlasOperand {
    int buffer;
    int64_t offset, ld, batchStride;
    bool trans;
  };
  BlasOperand blasOperand(const Node &n, Node *arg, int rank);
};

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
  bool shared = eff.size() > 1 && full > 1 && cost > 2;
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
  PointwiseArgs args{*n, ot.shape, ot.dtype,
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
  const Shape &os = in.type.shape;
  const Shape &ns = n->type().shape;
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
    if (numelOf(os) != numelOf(ns)) nodeError(*n, "codegen: view changes the number of elements");
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
  if (!v.e) internalError("codegen: view rewrite failed for '" + n->name + "'");
  if (outSlots_.count(n)) v = realizeInto(v, homeFor(n));
  vals_[n] = std::move(v);
}

void GraphFuser::defineReduction(const Node *n, const OpLowering &l) {
  Node *src = n->tensorArg(0);
  Val in = val(src);
  const Shape &S = in.type.shape;
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
  Shape outer, inner;
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
    int64_t cnt = numelOf(inner);
    result = mkOp(ScalarOp::Div, red.accType, {result, mkConst(red.accType, (double)cnt)});
  }
  p.reds.push_back(red);
  int home = homeFor(n, "", true);
  TStore st;
  st.addr.buffer = home;
  auto strides = contiguousStrides(ot.shape);
  st.addr.coef.assign(nd, 0);
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

GraphFuser::BlasOperand GraphFuser::blasOperand(const Node &n, Node *arg, int rank) {
  Val v = val(arg);
  const Shape &S = v.type.shape;
  auto fits = [&](const Val &x, BlasOperand &o) {
    if (x.e->op != ScalarOp::Load || !x.e->addr.dyn.empty()) return false;
    const EAddr &a = x.e->addr;
    int64_t rows = S[rank - 2], cols = S[rank - 1];
    int64_t s0 = a.coef[rank - 2], s1 = a.coef[rank - 1];
    o.buffer = a.buffer;
    o.offset = a.offset;
    o.batchStride = rank == 3 ? a.coef[0] : 0;
    if ((s1 == 1 || cols == 1) && (rows == 1 || s0 >= std::max<int64_t>(cols, 1))) {
      o.trans = false;
      o.ld = rows == 1 ? std::max<int64_t>(cols, 1) : s0;
      return true;
    }
    if ((s0 == 1 || rows == 1) && (cols == 1 || s1 >= std::max<int64_t>(rows, 1))) {
      o.trans = true;
      o.ld = cols == 1 ? std::max<int64_t>(rows, 1) : s1;
      return true;
    }
    return false;
  };
  BlasOperand o{};
  if (v.type.dtype == DType::F32 || v.type.dtype == DType::F64) {
    if (fits(v, o)) return o;
  }
  Val r = realizeInto(v, addBuffer(arg->name + "_contig", v.type));
  vals_[arg] = r;
  bool ok = fits(r, o);
  AOTC_ASSERT(ok, "codegen: contiguous operand not BLAS-compatible");
  return o;
}

void GraphFuser::defineMatmul(const Node *n, const OpLowering &l) {
  std::string b = opBase(n->target);
  const TensorType &ot = n->type();
  if (!isFloating(ot.dtype)) nodeError(*n, "codegen: matmul needs f32 or f64 operands");
  bool add = l.bias;
  bool batched = l.batched;
  int rank = batched ? 3 : 2;
  Node *A = n->tensorArg(add ? 1 : 0);
  Node *B = n->tensorArg(add ? 2 : 1);
  if (A->type().dtype != ot.dtype || B->type().dtype != ot.dtype)
    nodeError(*n, "codegen: matmul operands must have the result's dtype");
  if (numelOf(A->type().shape) == 0 || numelOf(B->type().shape) == 0) {
    // An empty product (k = 0, or an empty result): C = beta * bias for addmm (the bias is
    // ignored when beta = 0, as BLAS), else zeros. No GEMM is called.
    Val v;
    v.type = ot;
    double beta = add && n->args.size() > 3 && !n->isNoneArg(3) ? n->scalarArg(3) : 1.0;
    if (add && beta != 0.0) {
      v.e = operand(*n, 0, ot.shape, ot.dtype);
      if (beta != 1.0) v.e = mkOp(ScalarOp::Mul, ot.dtype, {v.e, mkConst(ot.dtype, beta)});
      v.ops = val(n->tensorArg(0)).ops;
    } else {
      v.e = mkConst(ot.dtype, 0.0);
    }
    v.ops.push_back(b);
    maybeRealize(n, v);
    vals_[n] = std::move(v);
    return;
  }
  BlasOperand oa = blasOperand(*n, A, rank);
  BlasOperand ob = blasOperand(*n, B, rank);
  // mm whose only user is a transpose that is a graph output (a weight
  // gradient): compute C^T = op(B)^T op(A)^T straight into that output.
  const Node *tu = nullptr;
  if (!add && !batched && !outSlots_.count(n) && users_[n].size() == 1) {
    const Node *u = users_[n][0];
    const OpLowering *ul = findLowering(*u);
    bool transpose = false;
    if (ul && ul->kind == LoweringKind::View) {
      IndexMap m = ul->view(*u, ot.shape, u->type().shape);
      transpose = m.newRank == 2 && m.m == std::vector<std::vector<int64_t>>{{0, 1}, {1, 0}} &&
                  m.c == std::vector<int64_t>{0, 0};
    }
    if (transpose && outSlots_.count(u))
      for (int k : outSlots_[u])
        if (!claimed_[k]) tu = u;
  }
  int home = tu ? homeFor(tu) : homeFor(n);
  if (tu) {
    preRealized_[tu] = home;
    std::swap(oa, ob);
    oa.trans = !oa.trans;
    ob.trans = !ob.trans;
  }
  TKernel k;
  k.kind = Kernel::Kind::Extern;
  k.noMerge = true;
  GemmDesc gd;
  gd.dtype = ot.dtype;
  gd.a = oa.buffer;
  gd.b = ob.buffer;
  gd.c = home;
  gd.transA = oa.trans;
  gd.transB = ob.trans;
  gd.lda = oa.ld;
  gd.ldb = ob.ld;
  gd.offA = oa.offset;
  gd.offB = ob.offset;
  const Shape &as = A->type().shape;
  gd.m = as[rank - 2];
  gd.k = as[rank - 1];
  gd.n = ot.shape[rank - 1];
  if (tu) std::swap(gd.m, gd.n);
  gd.ldc = std::max<int64_t>(gd.n, 1);
  gd.batch = batched ? ot.shape[0] : 1;
  gd.strideA = oa.batchStride;
  gd.strideB = ob.batchStride;
  gd.strideC = gd.m * gd.n;
  gd.alpha = 1.0;
  gd.beta = 0.0;
  k.outer = ot.shape;
  // addmm: C = beta*bias + alpha*op(A)op(B). When the result only feeds
  // generated kernels (no graph output, no other GEMM), the GEMM runs with
  // beta=0 and `+ beta*bias` becomes part of the value its consumers inline
  // (bias+relu is one map kernel, the logits' bias joins the log_softmax row
  // kernel): no pass over C just to broadcast the bias. Otherwise the bias is
  // broadcast into C by the GEMM extern kernel's init phase and BLAS runs with beta=1.
  std::optional<ERef> deferredBias;
  std::vector<std::string> biasOps;
  if (add) {
    double beta = n->args.size() > 3 && !n->isNoneArg(3) ? n->scalarArg(3) : 1.0;
    double alpha = n->args.size() > 4 && !n->isNoneArg(4) ? n->scalarArg(4) : 1.0;
    gd.alpha = alpha;
    bool defer = false;
    if (beta != 0.0 && opts_.fuse && !outSlots_.count(n)) {
      std::vector<Node *> eff;
      effectiveUsers(n, eff);
      defer = !eff.empty();
      for (Node *u : eff) defer = defer && !isMatmul(u);
    }
    if (defer) {
      ERef bias = operand(*n, 0, ot.shape, ot.dtype);
      if (beta != 1.0) bias = mkOp(ScalarOp::Mul, ot.dtype, {bias, mkConst(ot.dtype, beta)});
      deferredBias = bias;
      biasOps = val(n->tensorArg(0)).ops;
      biasOps.push_back("bias_add");
    } else if (beta != 0.0) {
      gd.beta = 1.0;
      TPhase p;
      TStore st;
      st.addr.buffer = home;
      st.addr.coef = contiguousStrides(ot.shape);
      ERef bias = operand(*n, 0, ot.shape, ot.dtype);
      if (beta != 1.0) bias = mkOp(ScalarOp::Mul, ot.dtype, {bias, mkConst(ot.dtype, beta)});
      st.value = bias;
      p.stores.push_back(st);
      k.phases.push_back(std::move(p));
      for (auto &o : val(n->tensorArg(0)).ops) k.ops.push_back(o);
    }
  }
  k.call = gemmCall(gd);
  k.ops.push_back(b);
  ks_.push_back(std::move(k));
  vals_[n] = loadOf(home);
  if (deferredBias) {
    Val &v = vals_[n];
    v.e = mkOp(ScalarOp::Add, ot.dtype, {v.e, *deferredBias});
    v.home = -1;
    v.ops = biasOps;
  }
  if (tu) { // n[i][j] = home[j][i]
    Val v;
    v.type = ot;
    EAddr a;
    a.buffer = home;
    a.coef = {1, ot.shape[0]};
    v.e = mkLoad(ot.dtype, std::move(a));
    vals_[n] = v;
  }
}

std::pair<int, int64_t> GraphFuser::denseOperand(Node *arg) {
  Val v = val(arg);
  if (v.e->op == ScalarOp::Load && v.e->addr.dyn.empty() && v.e->addr.coef == contiguousStrides(v.type.shape) &&
      v.e->type == kg_.buffers[v.e->addr.buffer].type.dtype)
    return {v.e->addr.buffer, v.e->addr.offset};
  Val r = realizeInto(v, addBuffer(arg->name + "_contig", v.type));
  vals_[arg] = r;
  return {r.home, 0};
}

/// A convolution primitive (lowered: regular, no bias): one ExternFn::Conv call on dense
/// operands into the node's home; f64 gets an im2col workspace in the arena (f32 runs in
/// oneDNN, whose scratchpad belongs to the ABI context's library state). The call can fail
/// (oneDNN refusing the geometry, out of memory): its error entry names the node.
void GraphFuser::defineConv(const Node *n, const OpLowering &l) {
  const TensorType &ot = n->type();
  if (!isFloating(ot.dtype)) nodeError(*n, "codegen: convolution needs f32 or f64 operands");
  Node *A = n->tensorArg(0), *B = n->tensorArg(1);
  Shape x, w, y;
  ConvParams p;
  switch (l.conv) {
  case ConvDesc::Role::Forward: {
    if (!n->isNoneArg(2) || n->boolArg(6))
      internalError("codegen: convolution '" + n->name + "' was not lowered (bias or transposed)");
    ConvShapeResult r = convolutionShape(A->type().shape, B->type().shape, n->intListArg(3), n->intListArg(4),
                                         n->intListArg(5), false, {}, n->intArg(8));
    x = A->type().shape, w = B->type().shape, y = ot.shape, p = r.params;
    break;
  }
  case ConvDesc::Role::InputGrad:
  case ConvDesc::Role::WeightGrad: {
    bool in = l.conv == ConvDesc::Role::InputGrad;
    x = in ? ot.shape : B->type().shape;
    w = in ? B->type().shape : ot.shape;
    y = A->type().shape;
    ConvShapeResult r = convolutionShape(x, w, n->intListArg(3), n->intListArg(4), n->intListArg(5), false, {},
                                         n->intArg(6));
    p = r.params;
    break;
  }
  }
  ConvDesc d;
  d.role = l.conv;
  d.dtype = ot.dtype;
  d.geom = regularGeometry(x, w, y, p);
  Val v;
  v.type = ot;
  v.ops = {opBase(n->target)};
  if (numelOf(ot.shape) == 0 || numelOf(A->type().shape) == 0 || numelOf(B->type().shape) == 0) {
    v.e = mkConst(ot.dtype, 0.0); // nothing to sum: zeros (an empty output needs no kernel)
    maybeRealize(n, v);
    vals_[n] = std::move(v);
    return;
  }
  for (Node *op : {A, B})
    if (op->type().dtype != ot.dtype) nodeError(*n, "codegen: convolution operands must have the result's dtype");
  std::tie(d.a, d.offA) = denseOperand(A);
  std::tie(d.b, d.offB) = denseOperand(B);
  d.c = homeFor(n);
  TKernel k;
  k.kind = Kernel::Kind::Extern;
  k.noMerge = true;
  k.outer = ot.shape;
  d.error = newError(*n, "the convolution failed in libaotc_kernels (the value is aotc_conv's status, "
                         "aotc/kernels.h; the ABI context's error text says why)");
  k.call = convCall(d);
  const ConvGeometry &g = d.geom;
  bool direct = g.KH == 1 && g.KW == 1 && g.strideH == 1 && g.strideW == 1 && g.padH == 0 && g.padW == 0;
  // aotc_conv_workspace_elems (aotc/kernels.h): f64 only, the column matrices of every batch entry.
  if (d.dtype == DType::F64 && !direct)
    k.call.workspace =
        addBuffer(n->name + "_cols", {ot.dtype, {g.N, g.C / g.groups * g.KH * g.KW, g.OH * g.OW}});
  k.ops = v.ops;
  ks_.push_back(std::move(k));
  vals_[n] = loadOf(d.c);
  vals_[n].ops = v.ops;
}

/// A transform (lib/IR/ops/Fft.cpp): one ExternFn::Fft call from a dense operand into the
/// node's home. Complex values are view_as_real pairs: the descriptor's shape is the logical one.
/// An empty tensor computes nothing (zeros; the op's shape function refuses an empty signal).
void GraphFuser::defineFft(const Node *n) {
  const TensorType &ot = n->type();
  Node *X = n->tensorArg(0);
  const TensorType &xt = X->type();
  FftDesc d;
  d.dtype = ot.dtype;
  if (n->target == "aten._fft_r2c.default") {
    d.kind = FftDesc::Kind::R2C;
    d.shape = xt.shape;
    d.onesided = n->boolArg(3);
  } else if (n->target == "aten._fft_c2r.default") {
    d.kind = FftDesc::Kind::C2R;
    d.shape = ot.shape;
  } else {
    d.kind = FftDesc::Kind::C2C;
    d.forward = n->boolArg(3);
    d.shape = Shape(ot.shape.begin(), ot.shape.end() - 1);
  }
  for (int64_t a : n->intListArg(1))
    d.axes.push_back(a < 0 ? a + (int64_t)d.shape.size() : a); // checked by the op's shape function
  d.scale = fftScale(n->intArg(2), d.shape, d.axes);
  if (xt.dtype != ot.dtype) nodeError(*n, "codegen: an FFT's operand must have the result's dtype");
  if ((int64_t)d.shape.size() > 16) nodeError(*n, "codegen: FFTs of more than 16 dims are not supported");
  Val v;
  v.type = ot;
  v.ops = {opBase(n->target)};
  if (numelOf(ot.shape) == 0 || numelOf(xt.shape) == 0) {
    v.e = mkConst(ot.dtype, 0.0);
    maybeRealize(n, v);
    vals_[n] = std::move(v);
    return;
  }
  std::tie(d.in, d.offIn) = denseOperand(X);
  d.out = homeFor(n);
  TKernel k;
  k.kind = Kernel::Kind::Extern;
  k.noMerge = true;
  k.outer = ot.shape;
  d.error = newError(*n, "the FFT failed in libaotc_kernels (the value is aotc_fft's status, aotc/kernels.h)");
  k.call = fftCall(d);
  k.ops = v.ops;
  ks_.push_back(std::move(k));
  vals_[n] = loadOf(d.out);
  vals_[n].ops = v.ops;
}

/// A linalg library call (lib/IR/ops/Linalg.cpp's aotc::lapack_*): one ExternFn::Linalg call from
/// dense operands (same batch dims; LuSolve's and Perm's pivots int64) into the node's home,
/// which holds each matrix's packed results (runtime/include/aotc/kernels.h). A call with no
/// matrix or an empty result computes nothing (an empty factorization leaves zeros: info 0).
void GraphFuser::defineLinalg(const Node *n, const OpLowering &l) {
  using K = LinalgDesc::Kind;
  const TensorType &ot = n->type();
  LinalgDesc d = linalgDescOf(*n, l);
  Val v;
  v.type = ot;
  v.ops = {opBase(n->target)};
  if (numelOf(ot.shape) == 0 || d.batch == 0) {
    v.e = mkConst(ot.dtype, 0.0);
    maybeRealize(n, v);
    vals_[n] = std::move(v);
    return;
  }
  std::vector<Node *> operands;
  for (size_t i = 0; i < n->args.size(); ++i)
    if (auto *p = std::get_if<Node *>(&n->args[i]); p && *p) operands.push_back(*p);
  if (d.kind == K::Perm) operands = {n->tensorArg(0)}; // LU gave the sizes only
  int *bufs[3] = {&d.a, &d.b, &d.c};
  int64_t *offs[3] = {&d.offA, &d.offB, &d.offC};
  for (size_t i = 0; i < operands.size(); ++i) {
    // Perm reads only its pivots, in slot b (kernels.h).
    size_t slot = d.kind == K::Perm ? 1 : i;
    std::tie(*bufs[slot], *offs[slot]) = denseOperand(operands[i]);
  }
  d.out = homeFor(n);
  TKernel k;
  k.kind = Kernel::Kind::Extern;
  k.noMerge = true;
  k.outer = ot.shape;
  d.error = newError(*n, linalgErrorText(d));
  k.call = linalgCall(d);
  k.ops = v.ops;
  ks_.push_back(std::move(k));
  vals_[n] = loadOf(d.out);
  vals_[n].ops = v.ops;
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
  int64_t bound = r == 0 ? 1 : in.type.shape[dim];
  int err = newError(*n, "index out of bounds for dimension " + std::to_string(dim) +
                             " with size " + std::to_string(bound));
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
    std::vector<int64_t> nc(os.size(), 0);
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
  int64_t bound = r == 0 ? 1 : in.type.shape[dim];
  int err = newError(*n, "index out of range for dimension " + std::to_string(dim) +
                             " with size " + std::to_string(bound));
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
  const Shape &I = idx.type.shape;
  int home = homeFor(n);
  // 1. out = self (a map kernel, mergeable).
  Val init = self;
  realizeInto(init, home, what);
  if (numelOf(I) == 0) {
    vals_[n] = loadOf(home);
    return;
  }
  // 2. Sequential accumulation along `dim`, parallel over the other index dims.
  int ir = (int)I.size();
  std::vector<int> pos(ir);
  Shape outer;
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
  auto strides = contiguousStrides(self.type.shape);
  TStore st;
  st.accumulate = true;
  st.combine = combine;
  st.addr.buffer = home;
  st.addr.coef.assign(ir, 0);
  EDyn d;
  d.value = mkCast(applyIndexMap(idx.e, m), DType::I64);
  d.bound = r == 0 ? 1 : self.type.shape[dim];
  d.stride = r == 0 ? 0 : strides[dim];
  d.error = newError(*n, "index out of bounds for dimension " + std::to_string(dim) +
                             " with size " + std::to_string(d.bound));
  for (int e = 0; e < ir; ++e)
    if (e != dim) st.addr.coef[pos[e]] = strides[e];
  st.addr.dyn.push_back(d);
  if (scalarValue) {
    st.value = mkConst(self.type.dtype, n->scalarArg(3));
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
  v.e = viewScatterValue(*n, self.e, src.e, v.type.shape);
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

} // namespace
} // namespace fusion

void fuseGraph(const Graph &g, KernelGraph &kg, const std::vector<int> &inputBuffers,
               const std::vector<int> &outputBuffers, const FusionOptions &opts) {
  fusion::GraphFuser f(g, kg, inputBuffers, outputBuffers, opts);
  f.run();
}

} // namespace aotc
