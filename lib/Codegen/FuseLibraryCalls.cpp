//===- FuseLibraryCalls.cpp - Library calls as extern kernels -------------===//
//
// This file implements the GraphFuser (GraphFuser.h) methods for the ops a library runs:
// mm/addmm/bmm as GEMM extern kernels reading realized buffers (a transposed operand, a
// permute of a contiguous matrix, is a transpose flag; addmm's bias deferred into its
// consumers or broadcast into C), convolutions (oneDNN), FFTs (PocketFFT) and linalg calls
// (LAPACK), each with the dense operands it needs.
//===----------------------------------------------------------------------===//
#include "GraphFuser.h"

#include "aotc/SymExpr.h"

namespace aotc::fusion {

/// A library call's kernel over the node's output domain: extern, never merged.
static TKernel externKernel(const TensorType &out) {
  TKernel k;
  k.kind = Kernel::Kind::Extern;
  k.noMerge = true;
  k.outer = dimsOf(out);
  return k;
}

/// a >= b for every run-time size in its range (SymExpr::atLeastForSizes over the symbols'
/// minimums). A pair the rule cannot decide counts as false: the caller copies the operand.
static bool atLeast(const Dim &a, const Dim &b, const std::map<std::string, int64_t> &minimums) {
  if (a == b) return true;
  if (!a.symbolic() && !b.symbolic()) return a.ref() >= b.ref();
  return a.toExpr().atLeastForSizes(b.toExpr(), minimums);
}

/// max(d, 1): a leading dimension. A run-time size that may be 0 (`s17 - 1` at s17 = 1) becomes
/// the expression Max(1, d).
static Dim atLeastOne(const Dim &d, const std::map<std::string, int64_t> &minimums) {
  if (!d.symbolic()) return Dim(std::max<int64_t>(d.ref(), 1));
  if (atLeast(d, Dim(1), minimums)) return d;
  return Dim::expr(SymExpr::binary(SymExpr::Op::Max, SymExpr::integer(1), d.toExpr()), std::max<int64_t>(d.ref(), 1));
}

/// The library calls other than GEMMs take constant sizes so far: a node over run-time sizes
/// is an error naming it (docs/dynamic-shapes.md "Still refused").
static void refuseRuntimeSizes(const Node &n, const char *what) {
  if (n.runtimeSized())
    nodeError(n, std::string("codegen: ") + what + " over run-time sizes is not supported yet; give the sizes with "
                 "--specialize (docs/dynamic-shapes.md)");
}

GraphFuser::BlasOperand GraphFuser::blasOperand(const Node &n, Node *arg, int rank) {
  Val v = val(arg);
  const Dims S = dimsOf(v.type);
  const std::map<std::string, int64_t> &mins = opts_.sizeMinimums;
  auto fits = [&](const Val &x, BlasOperand &o) {
    if (x.e->op != ScalarOp::Load || !x.e->addr.dyn.empty()) return false;
    const EAddr &a = x.e->addr;
    Dim rows = S[rank - 2], cols = S[rank - 1];
    Dim s0 = a.coef[rank - 2], s1 = a.coef[rank - 1];
    o.buffer = a.buffer;
    o.offset = a.offset;
    o.batchStride = rank == 3 ? a.coef[0] : Dim(0);
    if ((s1 == 1 || cols == 1) && (rows == 1 || atLeast(s0, atLeastOne(cols, mins), mins))) {
      o.trans = false;
      o.ld = rows == 1 ? atLeastOne(cols, mins) : s0;
      return true;
    }
    if ((s0 == 1 || rows == 1) && (cols == 1 || atLeast(s1, atLeastOne(rows, mins), mins))) {
      o.trans = true;
      o.ld = cols == 1 ? atLeastOne(rows, mins) : s1;
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
  if (add) {
    refuseRuntimeArg(*n, 3); // beta
    refuseRuntimeArg(*n, 4); // alpha
  }
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
      IndexMap m = ul->view(*u, dimsOf(ot), dimsOf(u->type()));
      transpose = m.newRank == 2 && m.m == std::vector<std::vector<int64_t>>{{0, 1}, {1, 0}} &&
                  m.c == Dims{0, 0};
    }
    if (transpose && freeSlot(u) >= 0) tu = u;
  }
  int home = tu ? homeFor(tu) : homeFor(n);
  if (tu) {
    preRealized_[tu] = home;
    std::swap(oa, ob);
    oa.trans = !oa.trans;
    ob.trans = !ob.trans;
  }
  TKernel k = externKernel(ot);
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
  const Dims as = dimsOf(A->type()), os = dimsOf(ot);
  gd.m = as[rank - 2];
  gd.k = as[rank - 1];
  gd.n = os[rank - 1];
  if (tu) std::swap(gd.m, gd.n);
  gd.ldc = atLeastOne(gd.n, opts_.sizeMinimums);
  gd.batch = batched ? os[0] : Dim(1);
  gd.strideA = oa.batchStride;
  gd.strideB = ob.batchStride;
  gd.strideC = gd.m * gd.n;
  gd.alpha = 1.0;
  gd.beta = 0.0;
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
      st.addr.coef = contiguousStrides(os);
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
    a.coef = {Dim(1), os[0]};
    v.e = mkLoad(ot.dtype, std::move(a));
    vals_[n] = v;
  }
}

std::pair<int, int64_t> GraphFuser::denseOperand(Node *arg) {
  Val v = val(arg);
  if (v.e->op == ScalarOp::Load && v.e->addr.dyn.empty() && v.e->addr.coef == contiguousStrides(dimsOf(v.type)) &&
      v.e->type == kg_.buffers[v.e->addr.buffer].type.dtype && !v.e->addr.offset.symbolic())
    return {v.e->addr.buffer, v.e->addr.offset.ref()};
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
  // A run-time batch (dim 0 of the activations and the output): the library call gets N per
  // call; every other run-time size is refused.
  const bool weightGrad = l.conv == ConvDesc::Role::WeightGrad;
  auto batched = [&](const Node *t) { return t == A || (t == B && weightGrad) || (t == n && !weightGrad); };
  for (const Node *t : {(const Node *)A, (const Node *)B, (const Node *)n}) {
    const Dims d = dimsOf(t->type());
    for (size_t i = 0; i < d.size(); ++i)
      if (d[i].symbolic() && (i != 0 || !batched(t)))
        nodeError(*n, "codegen: a convolution over a run-time size other than the batch is not supported yet (" +
                          t->name + " dim " + std::to_string(i) + " is " + d[i].str() +
                          "); give the sizes with --specialize (docs/dynamic-shapes.md)");
  }
  for (size_t i = 3; i < n->args.size(); ++i)
    if (n->symArg(i)) nodeError(*n, "codegen: a convolution's argument " + std::to_string(i) + " is a run-time size");
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
  d.batch = dimsOf(l.conv == ConvDesc::Role::WeightGrad ? A->type() : ot)[0];
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
  TKernel k = externKernel(ot);
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
  refuseRuntimeSizes(*n, "an FFT");
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
  TKernel k = externKernel(ot);
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
  refuseRuntimeSizes(*n, "a linear-algebra call");
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
  TKernel k = externKernel(ot);
  d.error = newError(*n, linalgErrorText(d));
  k.call = linalgCall(d);
  k.ops = v.ops;
  ks_.push_back(std::move(k));
  vals_[n] = loadOf(d.out);
  vals_[n].ops = v.ops;
}

} // namespace aotc::fusion
