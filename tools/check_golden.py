#!/usr/bin/env python3
"""Compare a training result with a PyTorch golden (both safetensors). Standard library only.

Usage: check_golden.py RESULT GOLDEN [--tol 1e-4] [--grad-key-prefix grad.]
                       [--loss-key loss] [--param-key-prefix param_final.]
                       [--extra-grad NAME,...] [--freeze NAME,...]
                       [--no-loss] [--no-param-final] [-v]

GOLDEN (written by tools/export/gen_models.py) holds input.<name>, param.<FQN>,
grad.<FQN> (step 0), grad.<input> (optional), loss f32[S], param_final.<FQN>, and
buffer_final.<FQN> for buffers the model mutates (after S steps).
RESULT holds the same kinds of tensors under configurable key prefixes; e.g. the
example writes loss, grad.<FQN>, param_final.<FQN>, and `aotc run` writes
grad_<name> (--grad-key-prefix grad_ --no-loss --no-param-final).

Errors (g = golden, a = result, per tensor T):
  err(T)            = max|a - g| / max|g|   (absolute max|a - g| when g is all zeros)
  max_rel_grad_err  = max over checked gradients of err(T); checked = grad.<FQN> for
                      every param.<FQN> in GOLDEN (minus --freeze) plus --extra-grad names
  max_rel_loss_err  = max_k |l_k - g_k| / |g_k| over the first len(l) steps
                      (len(l) may be < S, e.g. 1 for a single forward)
  max_rel_param_err = max over param_final.<FQN> of err(T)
  max_rel_buffer_err = max over the golden's buffer_final.<FQN> of err(T) (RESULT must
                      have each; skipped with --no-param-final)
A NaN anywhere counts as an infinite error. Prints one line
  max_rel_grad_err=%.9g max_rel_loss_err=%.9g max_rel_param_err=%.9g max_rel_buffer_err=%.9g
(a skipped check prints 0) and, on failure, the offending tensors on stderr.
Exit: 0 all errors <= tol; 1 an error > tol, or a needed tensor missing / of the wrong
shape; 2 malformed file or bad command line.
"""
import argparse
import array
import json
import math
import os
import sys

# The package's safetensors module, loaded by path: this tool stays standard-library only and
# needs no installed package (tools/ also holds the C++ driver's folder `aotc`).
import importlib.util as _ilu
_spec = _ilu.spec_from_file_location(
    "_aotc_safetensors", os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "python", "aotc",
                                      "_safetensors.py"))
_st = _ilu.module_from_spec(_spec)
_spec.loader.exec_module(_st)

# safetensors dtype -> (array typecode, itemsize). Only what aotc writes / reads.
_DTYPES = {"F64": ("d", 8), "F32": ("f", 4), "I64": ("q", 8), "I32": ("i", 4),
           "I16": ("h", 2), "I8": ("b", 1), "U8": ("B", 1), "BOOL": ("B", 1)}


class Malformed(Exception):
    pass


class Tensor:
    def __init__(self, name, dtype, shape, values):
        self.name, self.dtype, self.shape, self.values = name, dtype, shape, values


def read_safetensors(path):
    """Parses a safetensors file fully, validating it (python/aotc/_safetensors.py, the one
    reader; I16/I8 accepted for conformance samples). Returns (tensors by name, metadata)."""
    try:
        with open(path, "rb") as f:
            data = f.read()
    except OSError as e:
        raise Malformed(f"{path}: cannot read: {e.strerror}")
    try:
        f = _st.parse(data, str(path), extra_dtypes=True)
    except _st.SafetensorsError as e:
        raise Malformed(str(e))
    tensors = {}
    for name, t in f.tensors.items():
        st_name = _st._ST_NAME[t.dtype]
        vals = array.array(_DTYPES[st_name][0])
        vals.frombytes(t.data)
        if sys.byteorder == "big":
            vals.byteswap()
        tensors[name] = Tensor(name, st_name, list(t.shape), vals)
    return tensors, f.metadata


def rel_err(a, g):
    """max|a-g| / max|g| (absolute if g == 0); NaN -> inf."""
    num = den = 0.0
    for x, y in zip(a, g):
        d = abs(x - y)
        if d != d:
            return math.inf
        num = max(num, d)
        den = max(den, abs(y))
    return num / den if den > 0 else num


class Checker:
    def __init__(self, result, golden, tol):
        self.result, self.golden, self.tol = result, golden, tol
        self.problems = []

    def need(self, key, gkey):
        """The result tensor `key` compared with golden `gkey`: both present, same shape."""
        g = self.golden.get(gkey)
        if g is None:
            self.problems.append(f"golden has no tensor '{gkey}'")
            return None, None
        a = self.result.get(key)
        if a is None:
            self.problems.append(f"result has no tensor '{key}' (golden '{gkey}')")
            return None, g
        return a, g

    def tensor_err(self, key, gkey):
        a, g = self.need(key, gkey)
        if a is None:
            return math.inf
        if a.shape != g.shape:
            self.problems.append(f"'{key}' has shape {a.shape}, golden '{gkey}' {g.shape}")
            return math.inf
        e = rel_err(a.values, g.values)
        if not e <= self.tol:
            self.problems.append(f"'{key}': rel err {e:.9g} > tol {self.tol:g}")
        return e

    def loss_err(self, key):
        a, g = self.need(key, "loss")
        if a is None:
            return math.inf
        n = len(a.values)
        if n == 0 or n > len(g.values) or len(a.shape) > 1:
            self.problems.append(f"'{key}' has shape {a.shape}; expected a scalar or up to "
                                 f"{len(g.values)} steps")
            return math.inf
        worst, at = 0.0, 0
        for k in range(n):
            d, ref = abs(a.values[k] - g.values[k]), abs(g.values[k])
            e = d / ref if ref > 0 else d
            if e != e:
                e = math.inf
            if e > worst:
                worst, at = e, k
        if not worst <= self.tol:
            self.problems.append(f"'{key}'[{at}] = {a.values[at]:.9g}, golden {g.values[at]:.9g}: "
                                 f"rel err {worst:.9g} > tol {self.tol:g}")
        return worst


def split_names(s):
    return [n for n in (s or "").split(",") if n]


# A zoo tensor whose error exceeds this fails whatever torch's own float32 spread, unless its
# model is listed in test/fixtures/zoo/knife_edge.json with the measured reason.
ZOO_CAP = 5e-2


def zoo_bound(floor, e_torch, cap):
    """The bound of one zoo tensor: max(floor, 4 e_torch), capped (zoo_check, test_torch.py)."""
    return min(max(floor, 4 * e_torch), cap)


def zoo_baseline(golden_path, meta):
    """torch's own float32 error per key: the largest of the spread runs (spread.json beside the
    golden, tools/export/zoo_spread.py) where there is one, else the golden's torch_err; and the
    knife-edge reason of the golden's model (None: the cap applies)."""
    base = json.loads(meta.get("torch_err", "{}"))
    folder = os.path.dirname(os.path.abspath(golden_path))
    spread_path = os.path.join(folder, "spread.json")
    if os.path.exists(spread_path):
        with open(spread_path) as f:
            spread = json.load(f)["spread"]
        base = {k: max(v, spread.get(k, 0.0)) for k, v in base.items()}
    knife = None
    knife_path = os.path.join(os.path.dirname(folder), "knife_edge.json")
    if meta.get("format") == "aotc-zoo-1" and os.path.exists(knife_path):
        with open(knife_path) as f:
            knife = json.load(f).get(meta.get("model", ""), {}).get("reason")
    return base, knife


def zoo_check(result, golden, meta, verbose, final=True, golden_path=""):
    """The zoo comparison (docs/testing.md "How zoo results are compared"): the reference is
    torch eager in float64 (ref.*); err(T) = max|T - R| / max(max|R|, 1e-3 G) with G the largest
    |value| among the model's tensors of T's kind (all step-0 gradients; all final parameters;
    all final buffers; for the losses, the step-0 loss). Bounds: the step-0 loss and gradients
    max(1e-4, 4 e_torch), the 20-step losses, parameters and buffers max(1e-3, 4 e_torch), with
    e_torch torch's own float32 error of the same tensor: the largest over the spread runs
    (spread.json: default, channels_last, an input 1e-7 away, and the golden's torch_err), else
    the golden's torch_err. A zoo golden's bound is capped at ZOO_CAP (5e-2) unless its model
    is knife-edge (test/fixtures/zoo/knife_edge.json). Integer
    buffers (num_batches_tracked) must be equal. final=False (--no-param-final: a shorter run,
    the sanitizer suites' 2 steps) checks the losses of the steps run and the step-0 gradients
    only. Returns the exit code."""
    torch_err, knife = zoo_baseline(golden_path, meta)
    cap = ZOO_CAP if meta.get("format") == "aotc-zoo-1" and knife is None else math.inf
    if meta.get("format") == "aotc-zoo-1":
        print(f"knife-edge model ({knife}): bounds not capped" if knife else f"bounds capped at {ZOO_CAP:g}")
    problems, rows = [], {}

    def err(a, r, G):
        den = max(max((abs(x) for x in r), default=0.0), 1e-3 * G)
        num = 0.0
        for x, y in zip(a, r):
            d = abs(x - y)
            if d != d:
                return math.inf
            num = max(num, d)
        return num / den if den > 0 else num

    def check(key, a, r, G, floor, kind):
        if a is None:
            problems.append(f"result has no tensor for '{key}'")
            return
        if len(a.values) != len(r.values) or list(a.shape) != list(r.shape):
            problems.append(f"'{key}': shape {list(a.shape)} vs reference {list(r.shape)}")
            return
        bound = zoo_bound(floor, torch_err.get(key, 0.0), cap)
        if r.dtype in ("I64", "BOOL", "I32", "U8"):
            e = 0.0 if list(a.values) == list(r.values) else math.inf
        else:
            e = err(a.values, r.values, G)
        rows.setdefault(kind, []).append((e / bound if bound else math.inf, key, e, bound))
        if not e <= bound:
            problems.append(f"'{key}': err {e:.3g} > bound {bound:.3g} (torch float32: "
                            f"{torch_err.get(key, 0.0):.3g})")

    ref_loss = golden["ref.loss"]
    loss = result.get("loss")
    G = abs(ref_loss.values[0])
    if loss is not None:
        steps = len(loss.values)
        Tensor0 = type(ref_loss)
        first = Tensor0("loss0", loss.dtype, [1], loss.values[:1])
        check("loss0", first, Tensor0("ref.loss0", ref_loss.dtype, [1], ref_loss.values[:1]), G, 1e-4, "loss")
        if steps > 1:
            check("loss", Tensor0("loss", loss.dtype, [steps], loss.values),
                  Tensor0("ref.loss", ref_loss.dtype, [steps], ref_loss.values[:steps]), G, 1e-3, "loss")
    else:
        problems.append("result has no tensor 'loss'")
    optim = meta.get("format") == "aotc-optim-1"
    kinds = [] if optim else [("grad", 1e-4, "grad.")]
    if final:
        kinds += [("param_final", 1e-3, "param_final."), ("buffer_final", 1e-3, "buffer_final.")]
    if optim:
        kinds.append(("optim", 1e-3, "optim."))
    for kind, floor, prefix in kinds:
        refs = {k[len("ref." + kind) + 1:]: t for k, t in golden.items() if k.startswith(f"ref.{kind}.")}
        # G per kind; optimizer state per state key (exp_avg_sq is ~ exp_avg squared).
        group = (lambda n: n.rsplit(".", 1)[-1]) if kind == "optim" else (lambda n: "")
        Gk = {}
        for name, t in refs.items():
            if t.dtype in ("F32", "F64") and t.values:
                Gk[group(name)] = max(Gk.get(group(name), 0.0), max(abs(x) for x in t.values))
        for name, r in sorted(refs.items()):
            check(f"{kind}.{name}", result.get(prefix + name), r, Gk.get(group(name), 0.0), floor, kind)
    for kind in ("loss", "grad", "param_final", "buffer_final", "optim"):
        if rows.get(kind):
            worst = max(rows[kind])
            print(f"{kind}: {len(rows[kind])} tensors, worst err {worst[2]:.3g} ({worst[1]}, bound "
                  f"{worst[3]:.3g}, {worst[0]:.2f} of it)", flush=True)
    if verbose:
        for kind, rs in rows.items():
            for ratio, key, e, bound in sorted(rs, reverse=True):
                print(f"  {key}: err {e:.3g} bound {bound:.3g}", file=sys.stderr)
    for p in problems:
        print(f"check_golden: FAIL: {p}", file=sys.stderr)
    return 1 if problems else 0


def main(argv):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                 formatter_class=argparse.RawDescriptionHelpFormatter,
                                 epilog="\n".join(__doc__.split("\n")[2:]))
    ap.add_argument("result")
    ap.add_argument("golden")
    ap.add_argument("--tol", type=float, default=1e-4)
    ap.add_argument("--grad-key-prefix", default="grad.",
                    help="prefix of gradient keys in RESULT (golden: grad.)")
    ap.add_argument("--loss-key", default="loss", help="loss key in RESULT (golden: loss)")
    ap.add_argument("--param-key-prefix", default="param_final.",
                    help="prefix of final-parameter keys in RESULT (golden: param_final.)")
    ap.add_argument("--extra-grad", action="append", default=[],
                    help="also check the gradient of these (comma-separated) golden grad.<name>")
    ap.add_argument("--freeze", action="append", default=[],
                    help="parameters without a gradient in RESULT (comma-separated)")
    ap.add_argument("--no-loss", action="store_true")
    ap.add_argument("--no-param-final", action="store_true")
    ap.add_argument("-v", "--verbose", action="store_true", help="per-tensor errors on stderr")
    try:
        args = ap.parse_args(argv)
    except SystemExit as e:
        return 0 if e.code == 0 else 2
    if not (args.tol >= 0):
        print("check_golden: error: --tol must be >= 0", file=sys.stderr)
        return 2
    try:
        result, _ = read_safetensors(args.result)
        golden, gmeta = read_safetensors(args.golden)
    except Malformed as e:
        print(f"check_golden: error: {e}", file=sys.stderr)
        return 2
    if gmeta.get("format") in ("aotc-zoo-1", "aotc-optim-1"):
        if "ref.loss" not in golden:
            print(f"check_golden: error: {args.golden}: zoo golden without ref.loss", file=sys.stderr)
            return 2
        return zoo_check(result, golden, gmeta, args.verbose, final=not args.no_param_final,
                         golden_path=args.golden)

    params = sorted(k[len("param."):] for k in golden if k.startswith("param."))
    if not params:
        print(f"check_golden: error: {args.golden}: no param.<FQN> tensors; not a golden file",
              file=sys.stderr)
        return 2
    frozen = {n for s in args.freeze for n in split_names(s)}
    extra = [n for s in args.extra_grad for n in split_names(s)]
    unknown = sorted(frozen - set(params))
    if unknown:
        print(f"check_golden: error: --freeze names unknown parameters: {', '.join(unknown)}",
              file=sys.stderr)
        return 2

    c = Checker(result, golden, args.tol)
    per = {}
    for name in [p for p in params if p not in frozen] + extra:
        per["grad " + name] = c.tensor_err(args.grad_key_prefix + name, "grad." + name)
    grad_err = max(per.values(), default=0.0)
    loss_err = 0.0 if args.no_loss else c.loss_err(args.loss_key)
    param_err = 0.0
    if not args.no_param_final:
        for name in params:
            per["param_final " + name] = e = c.tensor_err(args.param_key_prefix + name,
                                                         "param_final." + name)
            param_err = max(param_err, e)
    # Buffers the golden has final values of (a mutated buffer: batch norm's statistics).
    buffer_err = 0.0
    if not args.no_param_final:
        for name in sorted(k[len("buffer_final."):] for k in golden if k.startswith("buffer_final.")):
            per["buffer_final " + name] = e = c.tensor_err("buffer_final." + name,
                                                          "buffer_final." + name)
            buffer_err = max(buffer_err, e)
    print(f"max_rel_grad_err={grad_err:.9g} max_rel_loss_err={loss_err:.9g} "
          f"max_rel_param_err={param_err:.9g} max_rel_buffer_err={buffer_err:.9g}", flush=True)
    if args.verbose:
        for k, e in per.items():
            print(f"  {k}: {e:.9g}", file=sys.stderr)
    if c.problems:
        for p in c.problems:
            print(f"check_golden: FAIL: {p}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
