#!/usr/bin/env python3
"""PyTorch's OpInfo database as a test of aotc (issue 28 part 5; docs/opinfo.md).

For every OpInfo of the pinned torch's `op_db` that supports autograd in float32 (548 in
torch 2.15), the first --samples (3) sample inputs (`sample_inputs('cpu', float32,
requires_grad=True)`, seed 0 before each OpInfo), each called as torch's own gradient tests
call it: `output_process_fn_grad(gradcheck_wrapper(op, *inputs, **kwargs))`:
  * the call's tensors become the inputs of a module (tools/conformance/gen.py's Call),
    torch.export'ed and `run_decompositions()`'ed with the default table (what a user gets);
  * references: the same call in float64 on the upcast inputs, outputs and input gradients
    of sum_i <output_i, tangent_i> with seeded random cotangents (so a weighted sum of the
    outputs is the loss);
  * complex results are compared as their view_as_real (aotc's representation: docs/complex.md);
  * aotc: `aotc run` on the exported .pt2 with the float32 inputs and cotangents, outputs
    and gradients compared with the references by the conformance rule
    (test/conformance/run_conformance.py: NaN/inf in the same places, |a - r| <=
    1e-4 |r| + 1e-5 max|r|).
Every case ends as one of:
  pass; wrong (a value or dtype off); refused (aotc exit 1: its message, grouped by cause);
  internal (aotc exit 2, a crash or a timeout); not-exportable (torch.export or
  run_decompositions failed: not aotc's); export-divergent (torch's own autograd on the
  exported program disagrees with eager: the graph aotc gets is not eager's function, e.g.
  a decomposition that loses a subgradient; not judged); ill-conditioned (torch's own float32 result breaks
  the bound against float64: not judged); random (two seeds give different outputs: aotc
  draws its own bits, docs/randomness.md); skipped (an input dtype the test cannot give aotc).
When only gradients disagree with eager's, central differences of eager's float64 forward
(cases up to 512 input elements) decide element by element where they are finite and eager's
gradient is off them; everywhere else aotc must still match eager (judge_by_central_differences).
Such a pass is listed apart in the doc (eager's formula is wrong there: as_strided_scatter's).
Negative control: the first passing case with a non-empty gradient is compared once more with its
gradient references times 1.01 plus 1e-3 and must come out wrong; the run fails otherwise.

Writes --results (one JSON line per case) and, with --doc, docs/opinfo.md (the summary, the
refusals grouped by the op aotc names, every wrong and internal case). Exit 1 when a case is
wrong or internal, or the negative control is not caught.

Usage (a torch Python: tools/export/torch-python.sh):
  run_opinfo.py --aotc build/tools/aotc/aotc [--only NAME,...] [--samples 3] [--jobs 2]
                [--work DIR] [--results FILE] [--doc docs/opinfo.md]
"""
import argparse
import collections
import concurrent.futures as cf
import json
import math
import os
import re
import shutil
import subprocess
import sys
import time
import warnings
import zlib

import torch
from torch.utils import _pytree as pytree

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.abspath(os.path.join(HERE, "..", ".."))
sys.path.insert(0, os.path.join(REPO, "tools", "conformance"))
sys.path.insert(0, os.path.join(REPO, "test", "conformance"))
import gen  # noqa: E402  (Call, run_torch, grads_of, within, graph_targets, _ST_ABBR)
import run_conformance as rc  # noqa: E402  (compare, error_line, read_safetensors)

RTOL, ATOL = 1e-4, 1e-5


def cases_of(info, samples):
    """(case id, callable, args, kwargs) of the OpInfo's first `samples` float32 samples."""
    torch.manual_seed(0)
    name = info.name + (f".{info.variant_test_name}" if info.variant_test_name else "")
    out = []
    try:
        it = info.sample_inputs("cpu", torch.float32, requires_grad=True)
        for k, s in enumerate(it):
            if k >= samples:
                break
            op, wrap, post = info.get_op(), info.gradcheck_wrapper, s.output_process_fn_grad
            # Complex results are compared as their view_as_real (aotc's representation,
            # docs/complex.md; the gradient of the pairs is torch's complex gradient).
            fn = (lambda op, wrap, post: lambda *a, **kw: pytree.tree_map(
                lambda t: torch.view_as_real(t.resolve_conj()) if isinstance(t, torch.Tensor) and t.is_complex() else t,
                post(wrap(op, *a, **kw))))(op, wrap, post)
            fn.__name__ = info.name
            out.append((f"{name}[{k}]", fn, (s.input, *s.args), dict(s.kwargs)))
    except Exception as e:  # a sample generator that fails on this torch build
        out.append((f"{name}[samples]", None, str(e)[:200], None))
    return out


# Ops whose values come from a generator: aotc draws its own (Philox) bits, so their cases are
# not compared (docs/randomness.md; conformance replays them instead).
RANDOM = re.compile(r"aten\.(rand|randn|randint|randperm|bernoulli|native_dropout|normal|uniform|multinomial|"
                    r"poisson|exponential|geometric|cauchy|log_normal)[._]")


def export(fn, spec, leaves, tidx, tensors):
    """FX text, the user inputs' placeholder names, the graph's targets, and the lifted
    constants / parameters / buffers as {placeholder name: value} (inputs aotc gets frozen)."""
    ep = torch.export.export(gen.Call(fn, spec, leaves, tidx), tuple(t.detach() for t in tensors))
    ep = ep.run_decompositions()
    lifted = {}
    for s in ep.graph_signature.input_specs:
        if s.kind.name in ("USER_INPUT", "TOKEN"):  # TOKEN: effect ordering (with_effects), no value
            continue
        if s.kind.name not in ("CONSTANT_TENSOR", "PARAMETER", "BUFFER"):
            raise ValueError(f"graph has an input of kind {s.kind.name}")
        lifted[s.arg.name] = (ep.constants.get(s.target) if s.target in ep.constants else ep.state_dict[s.target])
    text = ep.graph_module.print_readable(print_output=False)
    lines = [l for l in text.splitlines() if l.strip() and not l.strip().startswith("#")]
    return ("\n".join(lines) + "\n", list(ep.graph_signature.user_inputs), gen.graph_targets(ep.graph_module),
            lifted, ep)


def export_divergence(ep, tensors, tangents, outs32, grads32, names):
    """Why torch's own autograd on the exported program disagrees with eager (float32, the
    conformance bound), or None: then the graph aotc receives already differs from eager, as
    where a decomposition loses a subgradient (linalg.norm at 0: pow(sum(x^2), 0.5))."""
    try:
        ins = [t.detach().clone().requires_grad_(t.requires_grad) for t in tensors]
        outs = [x for x in pytree.tree_leaves(ep.module()(*ins)) if isinstance(x, torch.Tensor)]
    except Exception:
        return None  # the exported module does not run in eager: nothing to say
    if len(outs) != len(outs32):
        return f"torch's exported graph returns {len(outs)} tensors where eager returns {len(outs32)}"
    for i, (a, b) in enumerate(zip(outs, outs32)):
        if a.shape != b.shape or a.dtype != b.dtype:
            return (f"torch's exported graph returns {a.dtype} {list(a.shape)} as output_{i} where eager returns "
                    f"{b.dtype} {list(b.shape)}")
        if a.is_floating_point() and not gen.within(a.detach(), b.detach(), RTOL, ATOL):
            return f"torch's exported graph gives another output_{i} than eager"
    try:
        grads = gen.grads_of(ins, outs, [None if t is None else t.float() for t in tangents])
    except Exception:
        return None
    for n, a, b in zip(names, grads, grads32):
        if a is not None and b is not None and not gen.within(a.detach(), b.detach(), RTOL, ATOL):
            return f"torch's autograd on its exported graph gives another grad_{n} than eager"
    return None


FD_MAX_ELEMS = 512  # central differences only for cases this small (2 forwards per element)


def central_differences(fn, spec, leaves, tidx, tensors, tangents, k, eps=1e-6):
    """d/d tensors[k] of sum_i <out_i, tangent_i>, by central differences of eager's float64
    forward: the arbiter when aotc's gradient and eager's disagree (eager's own formula can be
    wrong, e.g. as_strided_scatter's)."""
    base = [t.detach().to(torch.float64) if t.is_floating_point() else t.detach() for t in tensors]

    def loss(ts):
        with torch.no_grad():  # cast: a sample's dtype=torch.float32 argument becomes float64 too
            _, outs = gen.run_torch(fn, spec, leaves, tidx, ts, torch.float64, torch.float32)
        return sum(float((o.to(torch.float64) * tg).sum()) for o, tg in zip(outs, tangents) if tg is not None)

    g = torch.zeros_like(base[k])
    flat = g.view(-1)
    for j in range(base[k].numel()):
        ts = [t.clone() for t in base]
        ts[k].view(-1)[j] += eps
        up = loss(ts)
        ts[k].view(-1)[j] -= 2 * eps
        flat[j] = (up - loss(ts)) / (2 * eps)
    return g


def prepare(cid, fn, args, kwargs, work):
    """Exports one case and writes its graph, inputs and references; a result dict when the
    case ends here (not exportable, ill-conditioned, random, skipped), else None."""
    base = {"id": cid, "opinfo": cid.rsplit("[", 1)[0]}
    leaves, spec = pytree.tree_flatten((tuple(args), dict(kwargs)))
    tidx = [i for i, l in enumerate(leaves) if isinstance(l, torch.Tensor)]
    tensors = [leaves[i].detach().clone(memory_format=torch.contiguous_format)
               .requires_grad_(leaves[i].requires_grad) for i in tidx]
    bad = sorted({str(t.dtype) for t in tensors if t.dtype not in gen._ST_ABBR or t.is_complex()})
    if bad:
        return {**base, "status": "skipped", "reason": f"input dtype {', '.join(bad)}"}
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        try:
            torch.manual_seed(1)
            _, o1 = gen.run_torch(fn, spec, leaves, tidx, tensors, None, torch.float32)
            torch.manual_seed(2)
            _, o2 = gen.run_torch(fn, spec, leaves, tidx, tensors, None, torch.float32)
        except Exception as e:
            return {**base, "status": "not-exportable", "reason": f"eager failed: {type(e).__name__}: {str(e)[:150]}"}
        odd = sorted({str(o.dtype) for o in o1 if o.dtype not in gen._ST_ABBR or o.is_complex()})
        if odd:
            return {**base, "status": "skipped", "reason": f"output dtype {', '.join(odd)}"}
        if len(o1) != len(o2) or not all(torch.equal(a.nan_to_num(7.0), b.nan_to_num(7.0)) for a, b in zip(o1, o2)):
            return {**base, "status": "random", "reason": "two seeds give different outputs"}
        try:
            text, names, targets, lifted, ep = export(fn, spec, leaves, tidx, tensors)
        except Exception as e:
            msg = str(e).strip().split("\n")[0][:200]
            return {**base, "status": "not-exportable", "reason": f"{type(e).__name__}: {msg}"}
        drawn = [t for t in targets if RANDOM.match(t)]
        if drawn:
            return {**base, "status": "random", "reason": f"draws random numbers ({', '.join(drawn)})"}
        ins, outs = gen.run_torch(fn, spec, leaves, tidx, tensors, None, torch.float32)
        g = torch.Generator().manual_seed(zlib.crc32(cid.encode()))
        tangents = [torch.randn(o.shape, generator=g, dtype=torch.float64) if o.is_floating_point() else None
                    for o in outs]
        grads32 = gen.grads_of(ins, outs, [None if t is None else t.float() for t in tangents])
        ins64, outs64 = gen.run_torch(fn, spec, leaves, tidx, tensors, torch.float64, torch.float32)
        grads64 = gen.grads_of(ins64, outs64, tangents)
        why = export_divergence(ep, tensors, tangents, outs, grads32, names)
    if why:
        return {**base, "status": "export-divergent", "reason": why}
    differentiable = any(o.requires_grad for o in outs)
    st, freeze, checks = {}, [], []
    for n, t, g32 in zip(names, tensors, grads32):
        st[f"input.{n}"] = t.detach()
        if t.is_floating_point():
            if g32 is None or not differentiable:
                freeze.append(n)
            else:
                checks.append((f"grad_{n}", f"ref.grad_{n}", "f32"))
    for n, v in lifted.items():
        bad = v.dtype not in gen._ST_ABBR
        if bad:
            return {**base, "status": "skipped", "reason": f"lifted constant {n} of dtype {v.dtype}"}
        st[f"input.{n}"] = v.detach()
        if v.is_floating_point():
            freeze.append(n)
    for i, (o, o64, tg) in enumerate(zip(outs, outs64, tangents)):
        checks.append((f"output_{i}", f"ref.output_{i}", gen._ST_ABBR[o.dtype]))
        st[f"ref.output_{i}"] = (o64 if o.is_floating_point() else o).detach()
        if tg is not None:
            st[f"tangent_{i}"] = tg.to(o.dtype)
    checked = [c for c, _, _ in checks]
    small = sum(t.numel() for t in tensors if t.is_floating_point()) <= FD_MAX_ELEMS
    for k, (n, g64) in enumerate(zip(names, grads64)):
        if f"grad_{n}" in checked:
            st[f"ref.grad_{n}"] = g64.detach()
            if small:
                with warnings.catch_warnings():
                    warnings.simplefilter("ignore")
                    st[f"fd.grad_{n}"] = central_differences(fn, spec, leaves, tidx, tensors, tangents, k)
    for i, (o, r) in enumerate(zip(outs, outs64)):
        if o.is_floating_point() and not gen.within(o.detach(), r.detach(), RTOL, ATOL):
            return {**base, "status": "ill-conditioned", "reason": f"torch's float32 output_{i} breaks the bound"}
    for n, a, r in zip(names, grads32, grads64):
        if f"grad_{n}" in [c for c, _, _ in checks] and not gen.within(a.detach(), r.detach(), RTOL, ATOL):
            return {**base, "status": "ill-conditioned", "reason": f"torch's float32 grad_{n} breaks the bound"}
    os.makedirs(work, exist_ok=True)
    with open(os.path.join(work, "graph.fx.txt"), "w") as f:  # for reading; aotc gets the .pt2
        f.write(text)
    torch.export.save(ep, os.path.join(work, "graph.pt2"))
    gen.common.write_safetensors(os.path.join(work, "case.safetensors"),
                                 {k: v.contiguous() for k, v in st.items()}, {"case": cid},
                                 same=lambda a, b: torch.equal(a.nan_to_num(7.0), b.nan_to_num(7.0)))
    with open(os.path.join(work, "case.json"), "w") as f:
        json.dump({**base, "freeze": freeze, "checks": checks, "targets": targets,
                   "call": gen.describe(fn, args, kwargs)}, f)
    return None


FD_RTOL, FD_ATOL = 1e-3, 1e-4  # central differences in float64 carry ~1e-9 of noise


def judge_by_central_differences(got, refs, checks):
    """When only gradients disagree with eager's: element by element, central differences of
    eager's float64 forward (fd.grad_*) decide where they are finite and eager's gradient is off
    them (eager's formula is wrong there: as_strided_scatter's); everywhere else aotc must still
    match eager at the normal bound, and NaN never passes against a number. Returns the reason
    when aotc's gradients pass that way (with at least one element decided by the differences),
    else None."""
    decided = []
    for key, ref, _ in checks:
        if not key.startswith("grad_"):
            continue
        fd = refs.get("fd." + key)
        if fd is None or key not in got:
            return None
        a, e, f = list(got[key].values), list(refs[ref].values), list(fd.values)
        fmax = max([abs(v) for v in f if math.isfinite(v)], default=0.0)
        emax = max([abs(v) for v in e if math.isfinite(v)], default=0.0)
        for i, (ai, ei, fi) in enumerate(zip(a, e, f)):
            if math.isfinite(fi) and not (math.isfinite(ei) and abs(ei - fi) <= FD_RTOL * abs(fi) + FD_ATOL * fmax):
                if not (math.isfinite(ai) and abs(ai - fi) <= FD_RTOL * abs(fi) + FD_ATOL * fmax):
                    return None
                decided.append(f"{key}[{i}]: eager {ei:.6g}, differences {fi:.6g}, aotc {ai:.6g}")
            elif math.isnan(ei):
                if not math.isnan(ai):
                    return None
            elif math.isinf(ei) or math.isinf(ai):
                if ai != ei:
                    return None
            elif abs(ai - ei) > RTOL * abs(ei) + ATOL * emax:
                return None
    if not decided:
        return None
    return ("eager's gradient disagrees with central differences of its own forward at " + str(len(decided)) +
            " elements, where aotc's matches them (" + "; ".join(decided[:3]) + "); elsewhere aotc matches eager")


def run_aotc(aotc, work, timeout):
    meta = json.load(open(os.path.join(work, "case.json")))
    res = {k: meta[k] for k in ("id", "opinfo", "targets", "call")}
    tensors, _ = rc.read_safetensors(os.path.join(work, "case.safetensors"))
    ins = {k: v for k, v in tensors.items() if not k.startswith("ref.")}
    rc.write_safetensors(os.path.join(work, "in.safetensors"), ins)
    cmd = [aotc, "run", os.path.join(work, "graph.pt2"), "--inputs", os.path.join(work, "in.safetensors"),
           "--out", os.path.join(work, "out.safetensors")]
    if meta["freeze"]:
        cmd.append("--freeze=" + ",".join(meta["freeze"]))
    # A .pt2's user inputs get no gradient by default: ask for the checked ones.
    wanted = [c[len("grad_"):] for c, _, _ in meta["checks"] if c.startswith("grad_")]
    if wanted:
        cmd.append("--requires-grad=" + ",".join(wanted))
    res["command"] = " ".join(cmd)
    try:
        p = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout)
    except subprocess.TimeoutExpired:
        return {**res, "status": "internal", "reason": f"timeout after {timeout} s"}
    if p.returncode == 1:
        return {**res, "status": "refused", "reason": rc.error_line(p.stderr)}
    if p.returncode != 0:
        why = f"killed by signal {-p.returncode}" if p.returncode < 0 else f"exit {p.returncode}: {rc.error_line(p.stderr)}"
        return {**res, "status": "internal", "reason": why}
    got, _ = rc.read_safetensors(os.path.join(work, "out.safetensors"))
    problems = rc.check_outputs(got, tensors, meta["checks"], RTOL, ATOL)
    res.update(checks=meta["checks"], work=work)
    if problems and all(p.startswith("grad_") for p in problems):
        arbiter = judge_by_central_differences(got, tensors, meta["checks"])
        if arbiter:
            return {**res, "status": "pass", "eager_grad_wrong": True, "reason": arbiter}
    return {**res, "status": "wrong" if problems else "pass", "reason": "; ".join(problems)}


def refused_op(reason):
    """The op aotc's refusal names, for grouping (else the message's start)."""
    m = re.search(r"\(((?:aten|aotc|prims|_operator)\.[\w.]+)\)", reason)
    if m:
        return m.group(1)
    m = re.search(r"'((?:aten|aotc)\.[\w.]+)'", reason)
    return m.group(1) if m else reason[:80]


def why_refused(op, msg):
    """The why column: aotc's refusals by name carry their reason (lib/IR/ops/Refused.cpp, the
    one home of those reasons, shown in docs/ops.md); other refusals say why themselves."""
    if "unsupported op" in msg:
        return "refused by name: the reason is in the message and docs/ops.md"
    if "unknown op" in msg:
        return "UNLISTED: neither registered nor in aotc's refusal table (lib/IR/ops/Refused.cpp)"
    return "the message says why"


def write_doc(path, results, infos, seconds):
    by = collections.Counter(r["status"] for r in results)
    per = collections.defaultdict(set)
    for r in results:
        per[r["opinfo"]].add(r["status"])
    judged = [o for o, s in per.items() if s & {"pass", "wrong", "refused", "internal"}]
    full = [o for o in judged if per[o] <= {"pass", "ill-conditioned", "random"} and "pass" in per[o]]
    lines = ["# PyTorch's OpInfo database against aotc", "",
             "Generated by `tools/opinfo/run_opinfo.py --doc docs/opinfo.md` (torch "
             f"{torch.__version__}; how it builds and judges a case: the script's docstring). "
             "Regenerate after a change to the registry, a decomposition or a derivative rule.", "",
             f"OpInfos with autograd in float32: {infos}; cases (first 3 samples each): {len(results)}; "
             f"{seconds:.0f} s on a 2-core machine (with other work running).", "",
             "| status | cases |", "|---|---|"]
    for k in ("pass", "wrong", "refused", "internal", "export-divergent", "ill-conditioned", "random",
              "not-exportable", "skipped"):
        lines.append(f"| {k} | {by.get(k, 0)} |")
    lines += ["", f"OpInfos judged (at least one case reached aotc): {len(judged)}; every judged case passing: "
              f"{len(full)}.", ""]
    groups = collections.defaultdict(list)
    for r in results:
        if r["status"] == "refused":
            groups[refused_op(r["reason"])].append(r)
    lines += ["## Refused, by the op aotc names", "",
              "Each refusal is aotc's own message. `unsupported op` is a refusal by name, with its "
              "reason (lib/IR/ops/Refused.cpp; the tables \"Core ATen coverage\" and \"Refused outside "
              "Core ATen\" of [ops.md](ops.md)); `unknown op` would be an op in neither the registry nor "
              "that table (a gap: the why column says UNLISTED). Other messages give their reason "
              "themselves.", "",
              "| op | cases | OpInfos | why | message (first) |", "|---|---|---|---|---|"]
    for op, rs in sorted(groups.items(), key=lambda kv: (-len(kv[1]), kv[0])):
        names = sorted({r["opinfo"] for r in rs})
        shown = ", ".join(names[:6]) + (f", … ({len(names)})" if len(names) > 6 else "")
        msg = rs[0]["reason"].replace("|", "\\|")[:240]
        lines.append(f"| `{op}` | {len(rs)} | {shown} | {why_refused(op, rs[0]['reason'])} | {msg} |")
    for status in ("wrong", "internal"):
        rs = [r for r in results if r["status"] == status]
        lines += ["", f"## {status.capitalize()} ({len(rs)})", ""]
        for r in rs:
            lines.append(f"- `{r['id']}` {r.get('call', '')}: {r['reason'][:300]}")
        if not rs:
            lines.append("None.")
    rs = [r for r in results if r.get("eager_grad_wrong")]
    lines += ["", f"## Passing against central differences, where eager's gradient is wrong ({len(rs)})", "",
              "Only the gradients disagreed with eager's, and central differences of eager's own float64 forward "
              "agree with aotc and not with eager (counted as pass):", ""]
    for r in rs:
        lines.append(f"- `{r['id']}` {r.get('call', '')}: {r['reason'][:300]}")
    if not rs:
        lines.append("None.")
    with open(path, "w") as f:
        f.write("\n".join(lines) + "\n")


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--aotc", required=True)
    ap.add_argument("--only", default="")
    ap.add_argument("--samples", type=int, default=3)
    ap.add_argument("--jobs", type=int, default=2)
    ap.add_argument("--timeout", type=float, default=120)
    ap.add_argument("--work", default=os.path.join(os.getcwd(), "opinfo-work"))
    ap.add_argument("--results", default=None)
    ap.add_argument("--doc", default=None)
    args = ap.parse_args()
    from torch.testing._internal.common_methods_invocations import op_db
    only = set(filter(None, args.only.split(",")))
    infos = [o for o in op_db if o.supports_autograd and torch.float32 in o.supported_dtypes("cpu")
             and (not only or o.name in only)]
    work = os.path.abspath(args.work)
    shutil.rmtree(work, ignore_errors=True)
    os.makedirs(work)
    results_path = args.results or os.path.join(work, "results.jsonl")
    t0 = time.monotonic()
    results, pending = [], []
    with cf.ThreadPoolExecutor(max_workers=args.jobs) as ex:
        n = 0
        for info in infos:
            for cid, fn, a, kw in cases_of(info, args.samples):
                if fn is None:
                    results.append({"id": cid, "opinfo": cid.rsplit("[", 1)[0], "status": "not-exportable",
                                    "reason": f"sample_inputs failed: {a}"})
                    continue
                d = os.path.join(work, f"{n:05d}")
                n += 1
                try:
                    done = prepare(cid, fn, a, kw, d)
                except Exception as e:  # the harness itself (a torch call outside export)
                    done = {"id": cid, "opinfo": cid.rsplit("[", 1)[0], "status": "not-exportable",
                            "reason": f"harness: {type(e).__name__}: {str(e)[:150]}"}
                if done:
                    results.append(done)
                else:
                    pending.append(ex.submit(run_aotc, args.aotc, d, args.timeout))
        for f in pending:
            results.append(f.result())
    results.sort(key=lambda r: r["id"])
    control = "no passing case with a gradient"
    caught = False
    for r in results:
        if r["status"] == "pass" and not r.get("eager_grad_wrong") and any(c.startswith("grad_") for c, _, _ in r["checks"]):
            got, _ = rc.read_safetensors(os.path.join(r["work"], "out.safetensors"))
            ref, _ = rc.read_safetensors(os.path.join(r["work"], "case.safetensors"))
            if not any(len(ref[k].values) for k in ref if k.startswith("ref.grad_")):
                continue  # empty gradients cannot be perturbed
            wrong = {k: rc.perturbed(v) if k.startswith("ref.grad_") else v for k, v in ref.items()}
            probs = rc.check_outputs(got, wrong, r["checks"], RTOL, ATOL)
            caught = bool(probs)
            control = f"{r['id']}: gradients against references x 1.01 + 1e-3: " + \
                      (f"caught ({probs[0][:100]})" if caught else "NOT CAUGHT")
            break
    with open(results_path, "w") as f:
        for r in results:
            f.write(json.dumps(r, sort_keys=True) + "\n")
    secs = time.monotonic() - t0
    if args.doc:
        write_doc(args.doc, results, len(infos), secs)
    by = collections.Counter(r["status"] for r in results)
    for r in results:
        if r["status"] in ("wrong", "internal"):
            print(f"{r['status'].upper()} {r['id']}: {r['reason'][:300]}")
    print(f"negative control: {control}")
    print(f"opinfo: opinfos={len(infos)} cases={len(results)} " +
          " ".join(f"{k}={by[k]}" for k in sorted(by)) + f" ({secs:.0f} s)")
    return 1 if by.get("wrong") or by.get("internal") or not caught else 0


if __name__ == "__main__":
    sys.exit(main())
