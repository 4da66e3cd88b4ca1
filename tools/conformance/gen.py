#!/usr/bin/env python3
"""Op conformance fixtures from PyTorch's OpInfo samples (docs/conformance.md).

For every overload of aotc's registry (the table in docs/ops.md):
  * samples: OpInfo `sample_inputs('cpu', dtype, requires_grad=True)` of the OpInfos in
    SOURCES (or the hand-written ones of extra_samples.py), float32 and float64, seed SEED
    before each OpInfo, the first CAP (CAP_OF for a few large ones) per op and dtype by index
    (never by outcome);
  * graph: the call's inputs flattened with torch.utils._pytree (tensors -> graph inputs,
    everything else constants), wrapped in a module, torch.export'ed, then
    run_decompositions(default table minus the overload under test); FX text via
    print_readable. A sample whose graph does not contain the overload is dropped (listed in
    the manifest with the targets it had); the manifest records every sample's targets;
  * goldens: torch eager in the sample's dtype and a float64 reference from the same inputs
    (upcast) and the same seeded random cotangents: outputs and input gradients.
    A float32 sample where torch's own result breaks the tolerance against the float64
    reference is skipped as `ill-conditioned`.
Writes test/conformance/ops/<op>.{fx.txt,safetensors} and test/conformance/manifest.json.

Usage: tools/conformance/gen.py [--only aten.add.Tensor,...] [--shard i/n] [--resume]
           [--no-merge | --merge-only]          (with a torch Python; run.sh runs it)
"""
import argparse
import json
import operator
import os
import re
import sys
import warnings
import zlib

import torch
from torch.utils import _pytree as pytree

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.abspath(os.path.join(HERE, "..", ".."))
sys.path.insert(0, HERE)
sys.path.insert(0, os.path.join(REPO, "tools", "export"))
import common  # noqa: E402  (tools/export/common.py)
from extra_samples import EXTRA, REPLAY, TRACE  # noqa: E402

OUT = os.path.join(REPO, "test", "conformance")
SEED = 0
CAP = 12
# Smaller caps where OpInfo's samples are large and repeat one pattern per dim (the fixtures'
# 20 MiB budget, run_conformance.py): slice_scatter's [20, 20, 20] samples go dim 0, 1, 2 with
# three variants each (the first two dims kept), slice's [20, 30, 40] ones three variants of one
# call (two kept, the 1-element case first).
CAP_OF = {"aten.slice_scatter.default": 6, "aten.slice.Tensor": 3}
DTYPES = {"f32": torch.float32, "f64": torch.float64}
TOL = {"f32.pointwise": [1e-5, 1e-6], "f32.reduction": [1e-4, 1e-5],
       "f64.pointwise": [1e-10, 1e-12], "f64.reduction": [1e-10, 1e-12],
       "f32.cephes": [1e-5, 1e-6], "f64.cephes": [1e-5, 1e-7]}
# torch's float64 Bessel functions of the first and second kind (Cephes' rational approximations
# in ATen/native/Math.h) are off by up to ~1e-7 between x = 2 and 8 (a Simpson integral of
# the Bessel integral, test/lit/ops/special.test's reference, agrees with aotc's Boost.Math
# values to 1e-15 there): their float64 goldens are compared at the "cephes" bound.
CEPHES_F64 = {"aten.special_bessel_j0.default", "aten.special_bessel_j1.default",
              "aten.special_bessel_y0.default", "aten.special_bessel_y1.default"}
# Registry categories compared with the looser float32 tolerance (reductions, matmuls, norms,
# softmax and losses are composites; index ops accumulate in their gradients; convolutions
# sum C*KH*KW products).
REDUCTION_CATEGORIES = {"reduction", "matmul", "composite", "index", "conv"}

# OpInfo sources ("name" or "name:variant_test_name") of each registry overload. Overloads in
# extra_samples.EXTRA use those samples (and these, if listed too).
SOURCES = {
    "aten._log_softmax.default": ["log_softmax"],
    "aten._softmax.default": ["softmax"],
    "aten.abs.default": ["abs"],
    "aten.acos.default": ["acos"],
    "aten.acosh.default": ["acosh"],
    "aten.add.Tensor": ["add"],
    "aten.addmm.default": ["addmm"],
    "aten.amax.default": ["amax"],
    "aten.amin.default": ["amin"],
    "aten.argmin.default": ["argmin"],
    "aten.asin.default": ["asin"],
    "aten.asinh.default": ["asinh"],
    "aten.atan.default": ["atan"],
    "aten.atan2.default": ["atan2"],
    "aten.atanh.default": ["atanh"],
    "aten.bitwise_not.default": ["bitwise_not"],
    "aten.ceil.default": ["ceil"],
    "aten.cosh.default": ["cosh"],
    "aten.cumsum.default": ["cumsum"],
    "aten.diagonal.default": ["diagonal"],
    "aten.diagonal_scatter.default": ["diagonal_scatter"],
    # index_reduce.prod is refused by aotc (no product reduction; docs/stage-decompose.md).
    "aten.floor.default": ["floor"],
    "aten.fmod.Scalar": ["fmod"],
    "aten.fmod.Tensor": ["fmod"],
    "aten.index_reduce.default": ["index_reduce:mean", "index_reduce:amax", "index_reduce:amin", "index_reduce:prod"],
    "aten.isinf.default": ["isinf"],
    "aten.log10.default": ["log10"],
    "aten.log2.default": ["log2"],
    "aten.multilabel_margin_loss.default": ["nn.functional.multilabel_margin_loss"],
    "aten.arange.default": ["arange"],
    "aten.arange.start_step": ["arange"],
    "aten.argmax.default": ["argmax"],
    "aten.bmm.default": ["bmm"],
    "aten.cat.default": ["cat"],
    "aten.clone.default": ["clone"],
    "aten.convolution.default": ["nn.functional.conv1d", "nn.functional.conv2d",
                                 "nn.functional.conv_transpose1d", "nn.functional.conv_transpose2d"],
    "aten.cos.default": ["cos"],
    "aten.max_pool2d_with_indices.default": ["nn.functional.max_pool2d"],
    "aten.as_strided.default": ["as_strided"],
    "aten.remainder.Scalar": ["remainder"],
    "aten.remainder.Tensor": ["remainder"],
    "aten.round.default": ["round"],
    "aten.sinh.default": ["sinh"],
    "aten.tan.default": ["tan"],
    "aten.trunc.default": ["trunc"],
    "aten.upsample_nearest2d.vec": ["nn.functional.interpolate:nearest"],
    "aten.upsample_bilinear2d.vec": ["nn.functional.interpolate:bilinear"],
    "aten.avg_pool2d.default": ["nn.functional.avg_pool2d"],
    "aten.native_group_norm.default": ["nn.functional.group_norm"],
    "aten._adaptive_avg_pool2d.default": ["nn.functional.adaptive_avg_pool2d"],
    "aten.constant_pad_nd.default": ["constant_pad_nd", "nn.functional.pad:constant"],
    "aten.any.dim": ["any"],
    "aten.any.dims": ["any"],
    "aten.any.default": ["any"],
    "aten.all.dim": ["all"],
    "aten.all.dims": ["all"],
    "aten.all.default": ["all"],
    "aten.split_with_sizes.default": ["split_with_sizes"],
    "aten.chunk.default": ["chunk"],
    "aten.unbind.int": ["unbind"],
    "aten.logical_and.default": ["logical_and"],
    "aten.logical_or.default": ["logical_or"],
    "aten.logical_xor.default": ["logical_xor"],
    "aten.masked_fill.Tensor": ["masked_fill"],
    "aten.index_put.default": ["index_put"],
    "aten.cross_entropy_loss.default": ["nn.functional.cross_entropy"],
    "aten.div.Tensor": ["div:no_rounding_mode"],
    "aten.elu.default": ["nn.functional.elu"],
    "aten.embedding.default": ["nn.functional.embedding"],
    "aten.eq.Tensor": ["eq"],
    "aten.erf.default": ["erf"],
    "aten.exp.default": ["exp"],
    "aten.expand.default": ["expand"],
    "aten.expm1.default": ["expm1"],
    "aten.full.default": ["full"],
    "aten.full_like.default": ["full_like"],
    "aten.gather.default": ["gather"],
    "aten.ge.Tensor": ["ge"],
    "aten.gelu.default": ["nn.functional.gelu"],
    "aten.gt.Tensor": ["gt"],
    "aten.hardtanh.default": ["nn.functional.hardtanh"],
    "aten.index_select.default": ["index_select"],
    "aten.isnan.default": ["isnan"],
    "aten.layer_norm.default": ["nn.functional.layer_norm"],
    "aten.le.Tensor": ["le"],
    "aten.leaky_relu.default": ["nn.functional.leaky_relu"],
    "aten.linear.default": ["nn.functional.linear"],
    "aten.log.default": ["log"],
    "aten.log1p.default": ["log1p"],
    "aten.log_softmax.int": ["log_softmax"],
    "aten.logical_not.default": ["logical_not"],
    "aten.logsumexp.default": ["logsumexp"],
    "aten.lt.Tensor": ["lt"],
    "aten.masked_fill.Scalar": ["masked_fill"],
    "aten.maximum.default": ["maximum"],
    "aten.mean.default": ["mean"],
    "aten.mean.dim": ["mean"],
    "aten.minimum.default": ["minimum"],
    "aten.mm.default": ["mm"],
    "aten.mse_loss.default": ["nn.functional.mse_loss"],
    "aten.mul.Tensor": ["mul"],
    "aten.native_layer_norm.default": ["nn.functional.layer_norm"],
    "aten.ne.Tensor": ["ne"],
    "aten.neg.default": ["neg"],
    "aten.nll_loss.default": ["nn.functional.nll_loss"],
    "aten.nll_loss_forward.default": ["nn.functional.nll_loss"],
    "aten.ones.default": ["ones"],
    "aten.ones_like.default": ["ones_like"],
    "aten.permute.default": ["permute"],
    "aten.pow.Tensor_Tensor": ["pow"],
    "aten.reciprocal.default": ["reciprocal"],
    "aten.relu.default": ["nn.functional.relu"],
    "aten.rsqrt.default": ["rsqrt"],
    "aten.scatter_add.default": ["scatter_add"],
    "aten.select.int": ["select"],
    "aten.select_scatter.default": ["select_scatter"],
    "aten.sigmoid.default": ["sigmoid"],
    "aten.sign.default": ["sign"],
    "aten.silu.default": ["nn.functional.silu"],
    "aten.sin.default": ["sin"],
    "aten.slice.Tensor": ["slice"],
    "aten.slice_scatter.default": ["slice_scatter"],
    "aten.softmax.int": ["softmax"],
    "aten.softplus.default": ["nn.functional.softplus"],
    "aten.split.Tensor": ["split"],
    "aten.sqrt.default": ["sqrt"],
    "aten.square.default": ["square"],
    "aten.squeeze.dim": ["squeeze"],
    "aten.squeeze.dims": ["squeeze:multiple"],
    "aten.sub.Tensor": ["sub"],
    "aten.sum.default": ["sum"],
    "aten.sum.dim_IntList": ["sum"],
    "aten.t.default": ["t"],
    "aten.tanh.default": ["tanh"],
    "aten.transpose.int": ["transpose"],
    "aten.tril.default": ["tril"],
    "aten.triu.default": ["triu"],
    "aten.unsqueeze.default": ["unsqueeze"],
    "aten.var.correction": ["var"],
    "aten.view.default": ["view"],
    "aten.where.self": ["where"],
    "aten.zeros.default": ["zeros"],
    "aten.zeros_like.default": ["zeros_like"],
    "aten.clamp.Tensor": ["clamp"],
    "aten.div.Tensor_mode": ["div:trunc_rounding", "div:floor_rounding"],
    "aten.div.Scalar_mode": ["div:trunc_rounding", "div:floor_rounding"],
    "aten.fill.Scalar": ["fill"],
    "aten.flip.default": ["flip", "fliplr", "flipud"],
    "aten.max.dim": ["max:reduction_with_dim"],
    "aten.min.dim": ["min:reduction_with_dim"],
    "aten.pow.Scalar": ["pow"],
    "aten.prod.default": ["prod"],
    "aten.prod.dim_int": ["prod"],
    "aten.reflection_pad1d.default": ["nn.functional.pad:reflect"],
    "aten.reflection_pad2d.default": ["nn.functional.pad:reflect"],
    "aten.reflection_pad3d.default": ["nn.functional.pad:reflect"],
    "aten.replication_pad1d.default": ["nn.functional.pad:replicate", "nn.functional.pad:replicate_negative"],
    "aten.replication_pad2d.default": ["nn.functional.pad:replicate", "nn.functional.pad:replicate_negative"],
    "aten.replication_pad3d.default": ["nn.functional.pad:replicate", "nn.functional.pad:replicate_negative"],
    "aten.repeat.default": ["repeat"],
    "aten.var.dim": ["var:unbiased"],
    "aten.avg_pool3d.default": ["nn.functional.avg_pool3d"],
    "aten._adaptive_avg_pool3d.default": ["nn.functional.adaptive_avg_pool3d"],
    "aten.max_pool3d_with_indices.default": ["nn.functional.max_pool3d"],
    "aten.masked_scatter.default": ["masked_scatter"],
    "aten.im2col.default": ["nn.functional.unfold"],
    "aten._cdist_forward.default": ["cdist"],
    "aten._pdist_forward.default": ["nn.functional.pdist"],
    "aten.sort.default": ["sort"],
    "aten.sort.stable": ["sort"],
    "aten.topk.default": ["topk"],
    "aten.scatter.src": ["scatter"],
    "aten.scatter.value": ["scatter"],
    "aten.scatter_reduce.two": ["scatter_reduce:sum", "scatter_reduce:prod", "scatter_reduce:mean",
                                "scatter_reduce:amax", "scatter_reduce:amin"],
    "aten._native_batch_norm_legit.no_stats": ["nn.functional.batch_norm"],
    # Special functions (lib/IR/ops/Special.cpp).
    "aten.lgamma.default": ["lgamma"],
    "aten.digamma.default": ["digamma"],
    "aten.polygamma.default": ["polygamma:polygamma_n_1", "polygamma:polygamma_n_2", "polygamma:polygamma_n_4"],
    "aten.erfc.default": ["erfc"],
    "aten.erfinv.default": ["erfinv"],
    "aten.special_erfcx.default": ["special.erfcx"],
    "aten.special_ndtri.default": ["special.ndtri"],
    "aten.i0.default": ["i0"],
    "aten.special_i0e.default": ["special.i0e"],
    "aten.special_i1.default": ["special.i1"],
    "aten.special_i1e.default": ["special.i1e"],
    # Linear algebra (docs/linalg.md). eigh and svd have none: their vectors' signs are the
    # LAPACK's (MKL in torch's wheels, OpenBLAS's reference LAPACK in aotc), so a fixture of raw
    # eigenvectors would compare a convention; the OpInfo runner checks them through OpInfo's
    # sign-invariant wrappers.
    "aten.linalg_cholesky_ex.default": ["linalg.cholesky_ex"],
    "aten.linalg_solve_triangular.default": ["linalg.solve_triangular"],
    "aten.triangular_solve.default": ["triangular_solve"],
    "aten.linalg_lu_factor_ex.default": ["linalg.lu_factor_ex"],
    "aten.linalg_lu_solve.default": ["linalg.lu_solve"],
    "aten.lu_unpack.default": ["lu_unpack"],
    "aten.linalg_lu.default": ["linalg.lu"],
    "aten._linalg_solve_ex.default": ["linalg.solve_ex"],
    "aten.linalg_inv_ex.default": ["linalg.inv_ex"],
    "aten._linalg_det.default": ["linalg.det"],
    "aten._linalg_slogdet.default": ["linalg.slogdet"],
    "aten.cholesky_solve.default": ["cholesky_solve"],
    "aten.cholesky_inverse.default": ["cholesky_inverse"],
    "aten.linalg_qr.default": ["linalg.qr"],
    "aten.linalg_pinv.atol_rtol_tensor": ["linalg.pinv"],
    "aten.special_bessel_j0.default": ["special.bessel_j0"],
    "aten.special_bessel_j1.default": ["special.bessel_j1"],
    "aten.special_bessel_y0.default": ["special.bessel_y0"],
    "aten.special_bessel_y1.default": ["special.bessel_y1"],
    "aten.special_modified_bessel_i0.default": ["special.modified_bessel_i0"],
    "aten.special_modified_bessel_i1.default": ["special.modified_bessel_i1"],
    "aten.special_modified_bessel_k0.default": ["special.modified_bessel_k0"],
    "aten.special_modified_bessel_k1.default": ["special.modified_bessel_k1"],
    # Scans and order statistics (lib/IR/ops/Scan.cpp, Sort.cpp).
    "aten.cumprod.default": ["cumprod"],
    "aten.logcumsumexp.default": ["logcumsumexp"],
    "aten.cummax.default": ["cummax"],
    "aten.cummin.default": ["cummin"],
    "aten.kthvalue.default": ["kthvalue"],
    "aten.median.default": ["median"],
    "aten.median.dim": ["median"],
    "aten.nanmedian.default": ["nanmedian"],
    "aten.nanmedian.dim": ["nanmedian"],
    # Non-core composites (lib/IR/ops/NonCore.cpp). as_strided_scatter has none: eager's
    # gradient for self is wrong (docs/opinfo.md), so its goldens would be.
    "aten.copysign.Tensor": ["copysign"],
    "aten.copysign.Scalar": ["copysign"],
    "aten.fmax.default": ["fmax"],
    "aten.fmin.default": ["fmin"],
    "aten.hypot.default": ["hypot"],
    "aten.ldexp.Tensor": ["ldexp"],
    "aten.view_copy.default": ["view_copy"],
    "aten.permute_copy.default": ["permute_copy"],
    "aten.unbind_copy.int": ["unbind_copy"],
    "aten.as_strided_copy.default": ["as_strided_copy"],
    "aten.narrow_copy.default": ["narrow_copy"],
    "aten.addmv.default": ["addmv"],
    "aten.addbmm.default": ["addbmm"],
    "aten._trilinear.default": ["nn.functional.bilinear"],
    "aten.dist.default": ["dist"],
    "aten.put.default": ["put"],
    "aten.adaptive_max_pool2d.default": ["nn.functional.adaptive_max_pool2d"],
    "aten.adaptive_max_pool3d.default": ["nn.functional.adaptive_max_pool3d"],
}

# Every dtype a sample may carry: aotc supports f32/f64/i64/bool; others (int32 indices, uint8
# masks) are kept and make the sample fail in aotc (an unsupported argument is a failure).
_ST_ABBR = {torch.float32: "f32", torch.float64: "f64", torch.int64: "i64", torch.bool: "b8",
            torch.int32: "i32", torch.int16: "i16", torch.int8: "i8", torch.uint8: "u8"}


def read_registry():
    """(target, category, mutates) rows of the table in docs/ops.md."""
    rows = []
    for line in open(os.path.join(REPO, "docs", "ops.md")):
        m = re.match(r"\| `(aten\.[^`]+)` \| (\w+) \| (\w+) \| (\w*) \|", line)
        if m:
            rows.append((m.group(1), m.group(2), m.group(4) == "yes"))
    if len(rows) < 50:
        sys.exit(f"error: docs/ops.md lists only {len(rows)} overloads")
    return rows


def overload(target):
    ns, name, ov = target.split(".")
    return getattr(getattr(getattr(torch.ops, ns), name), ov)


def target_name(t):
    return f"{t.namespace}.{t._opname}.{t._overloadname}"


def graph_targets(gm):
    out = set()
    for n in gm.graph.nodes:
        if n.op == "call_function":
            t = n.target
            out.add(target_name(t) if isinstance(t, torch._ops.OpOverload)
                    else f"{t.__module__}.{t.__name__}")
    out.discard("_operator.getitem")
    return sorted(out)


class ExportFailed(Exception):
    pass


class Call(torch.nn.Module):
    """forward(*tensors) = fn(*args, **kwargs) with the tensor leaves replaced by the inputs;
    returns the tensor leaves of the result as a tuple."""

    def __init__(self, fn, spec, leaves, tidx):
        super().__init__()
        self.fn, self.spec, self.leaves, self.tidx = fn, spec, leaves, tidx

    def forward(self, *tensors):
        leaves = list(self.leaves)
        for i, t in zip(self.tidx, tensors):
            leaves[i] = t
        args, kwargs = pytree.tree_unflatten(leaves, self.spec)
        return tuple(x for x in pytree.tree_leaves(self.fn(*args, **kwargs))
                     if isinstance(x, torch.Tensor))


def describe(fn, args, kwargs):
    def d(x):
        if isinstance(x, torch.Tensor):
            return f"{_ST_ABBR.get(x.dtype, x.dtype)}{list(x.shape)}"
        if isinstance(x, (list, tuple)):
            return "[" + ", ".join(d(y) for y in x) + "]"
        return repr(x)
    name = getattr(fn, "__name__", None) or str(fn)
    parts = [d(a) for a in args] + [f"{k}={d(v)}" for k, v in kwargs.items()]
    return f"{name}({', '.join(parts)})"


def export_graph(fn, spec, leaves, tidx, tensors, target):
    """FX text (comments and blank lines dropped), placeholder names, targets."""
    if target in TRACE:
        # A one-node FX graph: torch.export would rewrite this overload.
        g = torch.fx.Graph()
        phs = [g.placeholder(f"args_{i}") for i in range(len(tensors))]
        lv = list(leaves)
        for i, p in zip(tidx, phs):
            lv[i] = p
        args, kwargs = pytree.tree_unflatten(lv, spec)
        node = g.call_function(fn, tuple(args), kwargs)
        vals = list(leaves)
        for i, p, t in zip(tidx, phs, tensors):
            p.meta["val"] = vals[i] = t.detach()
        a2, k2 = pytree.tree_unflatten(vals, spec)
        node.meta["val"] = fn(*a2, **k2)
        if isinstance(node.meta["val"], (list, tuple)):  # a list result (chunk): one getitem each
            items = []
            for k, v in enumerate(node.meta["val"]):
                gi = g.call_function(operator.getitem, (node, k))
                gi.meta["val"] = v
                items.append(gi)
            g.output(tuple(items))
        else:
            g.output((node,))
        gm = torch.fx.GraphModule(torch.nn.Module(), g)
        names = [p.name for p in phs]
    else:
        ep = torch.export.export(Call(fn, spec, leaves, tidx),
                                 tuple(t.detach() for t in tensors))
        table = torch.export.default_decompositions()
        ov = overload(target)
        if ov in table:
            del table[ov]
        ep = ep.run_decompositions(table)
        kinds = {s.kind.name for s in ep.graph_signature.input_specs}
        if kinds - {"USER_INPUT"}:
            raise ValueError(f"graph has non-user inputs {sorted(kinds)}")
        gm = ep.graph_module
        names = list(ep.graph_signature.user_inputs)
    text = gm.print_readable(print_output=False)
    lines = [l for l in text.splitlines() if l.strip() and not l.strip().startswith("#")]
    return "\n".join(lines) + "\n", names, graph_targets(gm)


def run_torch(fn, spec, leaves, tidx, tensors, cast, sample_dtype):
    """Calls fn on copies of `tensors`; with cast (a float dtype) floating tensors and the
    sample dtype's `dtype=` constants are converted to it. Returns (inputs, outputs)."""
    ins = []
    for t in tensors:
        c = t.detach().clone()
        if cast is not None and c.is_floating_point():
            c = c.to(cast)
        ins.append(c.requires_grad_(t.requires_grad))
    lv = list(leaves)
    for i, t in zip(tidx, ins):
        lv[i] = t
    if cast is not None:
        lv = [cast if l is sample_dtype else l for l in lv]
    args, kwargs = pytree.tree_unflatten(lv, spec)
    outs = [x for x in pytree.tree_leaves(fn(*args, **kwargs)) if isinstance(x, torch.Tensor)]
    return ins, outs


def ill_conditioned(outs32, grads32, outs64, grads64, names, grads, tol):
    """Why torch's own float32 results break the bound against the float64 ones, or None."""
    for i, (o, r) in enumerate(zip(outs32, outs64)):
        if o.is_floating_point() and not within(o.detach(), r.detach(), *tol):
            return f"ill-conditioned: torch's float32 output_{i} breaks the bound"
    for n, g, r in zip(names, grads32, grads64):
        if n in grads and not within(g.detach(), r.detach(), *tol):
            return f"ill-conditioned: torch's float32 grad_{n} breaks the bound"
    return None


def grads_of(ins, outs, tangents):
    """Input gradients of sum_i <out_i, tangent_i> (zeros where unused); None per input that
    does not require grad."""
    pairs = [(o, t) for o, t in zip(outs, tangents) if t is not None and o.requires_grad]
    req = [i for i, x in enumerate(ins) if x.requires_grad]
    res = [None] * len(ins)
    if not pairs or not req:
        return res
    gs = torch.autograd.grad([o for o, _ in pairs], [ins[i] for i in req],
                             [t.to(o.dtype) for o, t in pairs], allow_unused=True)
    for i, g in zip(req, gs):
        res[i] = torch.zeros_like(ins[i]) if g is None else g
    return res


def within(a, r, rtol, atol):
    """The conformance bound (docs/conformance.md); a, r tensors of the same shape."""
    if a.shape != r.shape:
        return False
    if not (a.is_floating_point() or r.is_floating_point()):
        return bool(torch.equal(a, r))
    a, r = a.double(), r.double()
    fa, fr = torch.isfinite(a), torch.isfinite(r)
    if not torch.equal(fa, fr) or not torch.equal(torch.isnan(a), torch.isnan(r)):
        return False
    if not torch.equal(a[~fa & ~torch.isnan(a)], r[~fr & ~torch.isnan(r)]):
        return False
    if not fr.any():
        return True
    a, r = a[fr], r[fr]
    scale = r.abs().max()
    return bool(((a - r).abs() <= rtol * r.abs() + atol * scale).all())


def opinfo_samples(name, dtype):
    from torch.testing._internal.common_methods_invocations import op_db
    base, _, variant = name.partition(":")
    infos = [o for o in op_db if o.name == base and o.variant_test_name == variant]
    if len(infos) != 1:
        sys.exit(f"error: OpInfo '{name}' not found (or ambiguous)")
    info = infos[0]
    if dtype not in info.supported_dtypes("cpu"):
        return []
    torch.manual_seed(SEED)
    samples = list(info.sample_inputs("cpu", dtype, requires_grad=True))
    return [(info.op, (s.input, *s.args), dict(s.kwargs)) for s in samples]


def extra_samples(target, dtype):
    torch.manual_seed(SEED)

    def make(shape, requires_grad=True, **kw):
        return torch.testing.make_tensor(shape, dtype=dtype, device="cpu",
                                         requires_grad=requires_grad, **kw)
    return EXTRA[target](dtype, make)


def gen_sample(sid, target, dt, call, tol_class_of):
    """Exports one sample and computes its goldens: (manifest entry, tensors, graph text)."""
    fn, args, kwargs = call
    dtype = DTYPES[dt]
    leaves, spec = pytree.tree_flatten((tuple(args), dict(kwargs)))
    tidx = [i for i, l in enumerate(leaves) if isinstance(l, torch.Tensor)]
    tensors = [leaves[i].detach().clone(memory_format=torch.contiguous_format)
               .requires_grad_(leaves[i].requires_grad) for i in tidx]
    try:
        text, names, targets = export_graph(fn, spec, leaves, tidx, tensors, target)
    except Exception as e:  # torch.export refused the call
        msg = str(e).strip().split("\n")[0][:300]
        raise ExportFailed(f"torch.export failed: {type(e).__name__}: {msg}") from e
    if target not in targets:
        raise LookupError(f"graph lacks {target}: has {targets}")
    assert len(names) == len(tensors), (names, len(tensors))
    # A random op's values are aotc's Philox draws (extra_samples.REPLAY), not torch's.
    values = REPLAY[target](dtype) if target in REPLAY else fn
    ins, outs = run_torch(values, spec, leaves, tidx, tensors, None, dtype)
    gen = torch.Generator().manual_seed(zlib.crc32(sid.encode()))
    tangents = [torch.randn(o.shape, generator=gen, dtype=torch.float64).to(o.dtype)
                if o.is_floating_point() else None for o in outs]
    eager_grads = grads_of(ins, outs, tangents)
    differentiable = any(o.requires_grad for o in outs)
    cast_tangents = lambda d: [None if t is None else t.to(d) for t in tangents]  # noqa: E731
    if dt == "f32":
        ins64, outs64 = run_torch(values, spec, leaves, tidx, tensors, torch.float64, dtype)
        ref_grads = grads_of(ins64, outs64, cast_tangents(torch.float64))
        outs32, grads32 = outs, eager_grads
    else:
        outs64, ref_grads = outs, eager_grads
        # The same inputs rounded to float32 in torch: tells an ill-conditioned sample.
        ins32, outs32 = run_torch(values, spec, leaves, tidx, tensors, torch.float32, dtype)
        grads32 = grads_of(ins32, outs32, cast_tangents(torch.float32))
    cls = "reduction" if any(tol_class_of.get(t) == "reduction" for t in targets) else "pointwise"
    if target in CEPHES_F64:
        cls = "cephes"
    rtol, atol = TOL[f"{dt}.{cls}"]
    st = {}
    inputs_meta, freeze, grads = [], [], []
    for n, t, g in zip(names, tensors, eager_grads):
        st[f"{sid}/input.{n}"] = t.detach()
        inputs_meta.append({"name": n, "dtype": _ST_ABBR[t.dtype], "shape": list(t.shape)})
        if t.is_floating_point():
            if g is None or not differentiable:
                freeze.append(n)
            else:
                grads.append(n)
    outputs_meta = []
    for i, (o, o64, tg) in enumerate(zip(outs, outs64, tangents)):
        floating = o.is_floating_point()
        st[f"{sid}/ref.output_{i}"] = (o64 if floating else o).detach()
        if tg is not None:
            st[f"{sid}/tangent_{i}"] = tg
        if dt == "f32" and floating:
            st[f"{sid}/eager.output_{i}"] = o.detach()
        outputs_meta.append({"dtype": _ST_ABBR[o.dtype], "shape": list(o.shape),
                             "tangent": tg is not None})
    for n, g, g64 in zip(names, eager_grads, ref_grads):
        if n in grads:
            st[f"{sid}/ref.grad_{n}"] = g64.detach()
            if dt == "f32":
                st[f"{sid}/eager.grad_{n}"] = g.detach()
    skip = ill_conditioned(outs32, grads32, outs64, ref_grads, names, grads, TOL[f"f32.{cls}"])
    entry = {"op": target, "dtype": dt, "call": describe(fn, args, kwargs), "targets": targets,
             "inputs": inputs_meta, "freeze": freeze, "grads": grads, "outputs": outputs_meta,
             "tol": [rtol, atol], "tol_class": cls, "skip": skip}
    return entry, {k: v.contiguous() for k, v in st.items()}, f"# ==== sample: {sid}\n{text}"


def save_safetensors(path, tensors, metadata):
    """common.write_safetensors with the torch version in __metadata__; NaNs compare equal in
    the read-back check (samples may contain them)."""
    common.write_safetensors(path, tensors, {"torch_version": torch.__version__, **metadata},
                             same=lambda a, b: torch.equal(a.nan_to_num(7.0), b.nan_to_num(7.0)))


def gen_op(target, category, mutates, tol_class_of):
    """Samples, fixture files and manifest fragment of one registry overload."""
    op = {"category": category, "tol_class": tol_class_of[target], "sources": [],
          "skip": None, "samples": [], "dropped": []}
    samples = {}
    if mutates:
        op["skip"] = ("in-place variant: torch.export never emits in-place overloads "
                      "(the functional overload is tested)")
        return op, samples
    sources = (["extra"] if target in EXTRA else []) + SOURCES.get(target, [])
    if not sources:
        sys.exit(f"error: no samples for registry overload {target}: add it to SOURCES or "
                 f"extra_samples.EXTRA")
    op["sources"] = sources
    unit = target[len("aten."):]
    tensors, texts = {}, []
    for dt, dtype in DTYPES.items():
        calls = []
        for src in sources:
            got = extra_samples(target, dtype) if src == "extra" else opinfo_samples(src, dtype)
            calls += [(src, i, c) for i, c in enumerate(got)]
        for k, (src, i, call) in enumerate(calls[:CAP_OF.get(target, CAP)]):
            sid = f"{unit}.{dt}.{k}"
            try:
                entry, st, text = gen_sample(sid, target, dt, call, tol_class_of)
            except LookupError as e:
                op["dropped"].append({"dtype": dt, "source": f"{src}[{i}]", "reason": str(e)})
                continue
            except ExportFailed as e:  # recorded in the manifest, never silent
                op["dropped"].append({"dtype": dt, "source": f"{src}[{i}]", "reason": str(e)})
                continue
            entry["source"] = f"{src}[{i}]"
            samples[sid] = entry
            op["samples"].append(sid)
            tensors.update(st)
            texts.append(text)
    base = os.path.join(OUT, "ops", unit)
    for ext in (".safetensors", ".fx.txt"):
        if os.path.exists(base + ext):
            os.remove(base + ext)
    if tensors:
        save_safetensors(base + ".safetensors", tensors, {"op": target, "seed": str(SEED)})
        with open(base + ".fx.txt", "w") as f:
            f.write("".join(texts))
    return op, samples


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--only", default="", help="comma-separated overloads to (re)generate")
    ap.add_argument("--shard", default="0/1", help="i/n: generate every n-th overload from i")
    ap.add_argument("--resume", action="store_true", help="keep fragments already generated")
    ap.add_argument("--no-merge", action="store_true", help="do not write manifest.json")
    ap.add_argument("--merge-only", action="store_true", help="only merge the fragments")
    ap.add_argument("--update", action="store_true",
                    help="with --only: merge the new fragments into the committed manifest.json "
                         "(the other overloads keep their entries)")
    ap.add_argument("--cache-dir", default=os.path.join(REPO, "build-conformance-gen"),
                    help="per-op manifest fragments (merged into manifest.json)")
    a = ap.parse_args()
    warnings.filterwarnings("ignore")
    torch.set_num_threads(1)
    registry = read_registry()
    tol_class_of = {t: ("reduction" if c in REDUCTION_CATEGORIES else "pointwise")
                    for t, c, _ in registry}
    only = set(filter(None, a.only.split(",")))
    unknown = only - {t for t, _, _ in registry}
    if unknown:
        sys.exit(f"error: not registry overloads: {sorted(unknown)}")
    shard, nshards = map(int, a.shard.split("/"))
    os.makedirs(os.path.join(OUT, "ops"), exist_ok=True)
    os.makedirs(a.cache_dir, exist_ok=True)
    for k, (target, category, mutates) in enumerate(registry):
        if a.merge_only or (only and target not in only) or k % nshards != shard:
            continue
        frag = os.path.join(a.cache_dir, target + ".json")
        if a.resume and os.path.exists(frag):
            continue
        op, samples = gen_op(target, category, mutates, tol_class_of)
        with open(frag, "w") as f:
            json.dump({"op": op, "samples": samples}, f)
        print(f"{target}: {len(op['samples'])} samples, {len(op['dropped'])} dropped",
              file=sys.stderr, flush=True)
    if a.no_merge:
        return
    manifest = {"torch_version": torch.__version__, "seed": SEED, "cap": CAP,
                "tolerances": TOL, "ops": {}, "samples": {}}
    if a.update:
        old = json.load(open(os.path.join(OUT, "manifest.json")))
        if old.get("torch_version") != torch.__version__:
            sys.exit(f"error: manifest.json was made with torch {old.get('torch_version')}, this is "
                     f"{torch.__version__}: regenerate everything")
        manifest["ops"], manifest["samples"] = old["ops"], old["samples"]
        for target in only:
            for sid in manifest["ops"].get(target, {}).get("samples", []):
                manifest["samples"].pop(sid, None)
            manifest["ops"].pop(target, None)
        registry = [r for r in registry if r[0] in only]
    missing = []
    for target, _, _ in registry:
        frag = os.path.join(a.cache_dir, target + ".json")
        if not os.path.exists(frag):
            missing.append(target)
            continue
        d = json.load(open(frag))
        manifest["ops"][target] = d["op"]
        manifest["samples"].update(d["samples"])
    if missing:
        sys.exit(f"error: no fragment for {missing}: generate them first (manifest not written)")
    manifest["samples"] = dict(sorted(manifest["samples"].items()))
    if a.update:  # the order of a full merge: registry (docs/ops.md) order
        order = {t: i for i, (t, _, _) in enumerate(read_registry())}
        manifest["ops"] = dict(sorted(manifest["ops"].items(), key=lambda kv: order.get(kv[0], 1 << 30)))
    mpath = os.path.join(OUT, "manifest.json")
    with open(mpath, "w") as f:
        json.dump(manifest, f, indent=1)
        f.write("\n")
    print("wrote", os.path.relpath(mpath, REPO))


if __name__ == "__main__":
    main()
