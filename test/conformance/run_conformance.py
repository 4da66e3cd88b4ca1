#!/usr/bin/env python3
"""Runs aotc on every conformance sample and compares with PyTorch (standard library only).

For each sample of test/conformance/manifest.json (docs/conformance.md):
  aotc run <its graph> --inputs <its inputs + tangent_<i>> --out <out> [--freeze=...]
then every output and input gradient is compared with the committed float64 reference:
  floating: NaN and +-Inf in the same places; elsewhere |a - r| <= rtol*|r| + atol*max|r|
            ((rtol, atol) from the manifest: f32 pointwise 1e-5/1e-6, f32 reductions,
            matmuls, norms, softmax, losses 1e-4/1e-5, f64 1e-10/1e-12);
  integer and bool results: equal (torch eager's result in the sample's dtype).
Dtypes and shapes must match torch's. A sample fails when aotc exits non-zero (the error is
recorded) or a value is off; skipped samples (manifest `skip`, closed list) are not run.

Writes one JSON line per sample (and per skipped op) to --results; prints the summary line
(summarize.py). With --expected-failures FILE the exit status is 0 iff the failing sample ids
are a subset of the file's list (a new failure fails; fixed samples are reported as
NOW PASSING and dropped from the list by --update-expected, which rewrites it).
--expect-mismatch: every selected sample with a gradient must fail by a wrong value (used
with a deliberately wrong --derivatives rule; empty gradients cannot fail, proving the comparison can fail).

--sample-cap N: only the first N samples of each op, overload and dtype that run (and the
skipped ones before them; summarize.capped): the sanitizer suites' part.

Usage: run_conformance.py --aotc AOTC [--dir test/conformance] [--work-dir W] [--jobs 2]
         [--results results.jsonl] [--only OP,...] [--sample-cap N] [--derivatives FILE]
         [--expected-failures FILE [--update-expected]] [--expect-mismatch] [-v]
"""
import argparse
import array
import concurrent.futures as cf
import json
import math
import os
import re
import shutil
import struct
import subprocess
import sys
import threading
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "..", "tools"))
sys.path.insert(0, HERE)
from check_golden import Malformed, read_safetensors, _st  # noqa: E402  (_st: python/aotc/_safetensors.py)
import summarize  # noqa: E402

_ST = {"f32": ("F32", "f", 4), "f64": ("F64", "d", 8), "i64": ("I64", "q", 8),
       "b8": ("BOOL", "B", 1), "i32": ("I32", "i", 4), "i16": ("I16", "h", 2),
       "i8": ("I8", "b", 1), "u8": ("U8", "B", 1)}
_ST_NAME = {v[0]: k for k, v in _ST.items()}


def write_safetensors(path, tensors):
    """tensors: name -> check_golden Tensor; written in key order (python/aotc/_safetensors.py)."""
    out = []
    for k in sorted(tensors):
        t = tensors[k]
        vals = t.values
        if sys.byteorder == "big":
            vals = array.array(vals.typecode, vals)
            vals.byteswap()
        out.append(_st.tensor(k, {"b8": "bool"}.get(_ST_NAME[t.dtype], _ST_NAME[t.dtype]), t.shape,
                              vals.tobytes()))
    _st.write(path, out)


def compare(a, r, rtol, atol):
    """None if a matches reference r, else a reason. a, r: check_golden Tensors."""
    if list(a.shape) != list(r.shape):
        return f"shape {a.shape} != torch's {r.shape}"
    floating = r.dtype in ("F32", "F64")
    if not floating:
        if list(a.values) != list(r.values):
            bad = next(i for i, (x, y) in enumerate(zip(a.values, r.values)) if x != y)
            return f"element {bad}: {a.values[bad]} != {r.values[bad]}"
        return None
    finite = [v for v in r.values if math.isfinite(v)]
    scale = max((abs(v) for v in finite), default=0.0)
    worst, where = 0.0, None
    for i, (x, y) in enumerate(zip(a.values, r.values)):
        if math.isnan(y) or math.isnan(x):
            if not (math.isnan(x) and math.isnan(y)):
                return f"element {i}: {x!r} where torch has {y!r}"
            continue
        if math.isinf(y) or math.isinf(x):
            if x != y:
                return f"element {i}: {x!r} where torch has {y!r}"
            continue
        tol = rtol * abs(y) + atol * scale
        d = abs(x - y)
        if d > tol:
            ratio = d / tol if tol > 0 else math.inf
            if ratio > worst:
                worst, where = ratio, (i, x, y)
    if where is not None:
        i, x, y = where
        return f"element {i}: {x!r} vs {y!r} (error {abs(x - y):.3g} = {worst:.3g} x tolerance)"
    return None


def check_outputs(got, refs, checks, rtol, atol):
    """The problems of aotc's results `got` (name -> Tensor) against `refs` (ref name -> Tensor):
    checks are (result name, ref name, aotc dtype) triples; empty when all match. Also used by
    tools/gpu/conformance_gpu.py and tools/opinfo/run_opinfo.py."""
    problems = []
    for key, ref, dtype in checks:
        if key not in got:
            problems.append(f"{key}: missing in aotc's output")
            continue
        a = got[key]
        if _ST_NAME.get(a.dtype) != dtype:
            problems.append(f"{key}: dtype {a.dtype} != torch's {dtype}")
            continue
        why = compare(a, refs[ref], rtol, atol)
        if why:
            problems.append(f"{key}: {why}")
    return problems


def perturbed(t):
    """A copy of Tensor t with floating values times 1.01 plus 1e-3 (so zeros move too): the
    negative controls' wrong reference."""
    if t.dtype not in ("F32", "F64"):
        return t
    return type(t)(t.name, t.dtype, t.shape, type(t.values)(t.values.typecode, (v * 1.01 + 1e-3 for v in t.values)))


class Units:
    """Lazily loaded per-op fixtures: graph sections and tensors."""

    def __init__(self, folder):
        self.folder, self.cache, self.lock = folder, {}, threading.Lock()

    def get(self, unit):
        with self.lock:
            if unit not in self.cache:
                base = os.path.join(self.folder, "ops", unit)
                tensors, _ = read_safetensors(base + ".safetensors")
                graphs, cur = {}, None
                for line in open(base + ".fx.txt"):
                    m = re.match(r"# ==== sample: (\S+)", line)
                    if m:
                        cur = m.group(1)
                        graphs[cur] = []
                    elif cur is not None:
                        graphs[cur].append(line)
                self.cache[unit] = (tensors, {k: "".join(v) for k, v in graphs.items()})
            return self.cache[unit]


def error_line(stderr):
    """The aotc diagnostic without its file:line:col prefix."""
    for line in stderr.splitlines():
        if "error:" in line:
            return line[line.index("error:"):].strip()
    lines = [l for l in stderr.splitlines() if l.strip()]
    return lines[-1].strip() if lines else "(no message)"


def run_sample(args, units, sid, s):
    unit = s["op"][len("aten."):]
    tensors, graphs = units.get(unit)
    work = os.path.join(args.work_dir, sid)
    os.makedirs(work, exist_ok=True)
    graph = os.path.join(work, "graph.fx.txt")
    with open(graph, "w") as f:
        f.write(graphs[sid])
    ins = {}
    for inp in s["inputs"]:
        ins[inp["name"]] = tensors[f"{sid}/input.{inp['name']}"]
    for i, o in enumerate(s["outputs"]):
        if o["tangent"]:
            ins[f"tangent_{i}"] = tensors[f"{sid}/tangent_{i}"]
    write_safetensors(os.path.join(work, "in.safetensors"), ins)
    out = os.path.join(work, "out.safetensors")
    cmd = [args.aotc, "run", graph, "--inputs", os.path.join(work, "in.safetensors"),
           "--out", out]
    if s["freeze"]:
        cmd.append("--freeze=" + ",".join(s["freeze"]))
    for d in args.derivatives:
        cmd += ["--derivatives", d]
    t0 = time.monotonic()
    try:
        p = subprocess.run(cmd, capture_output=True, text=True, timeout=args.timeout)
        rc, stderr = p.returncode, p.stderr
    except subprocess.TimeoutExpired:
        rc, stderr = None, ""
    res = {"kind": "sample", "id": sid, "op": s["op"], "dtype": s["dtype"],
           "counts_for": s["counts_for"], "seconds": round(time.monotonic() - t0, 3),
           "command": " ".join(cmd)}
    if rc is None:
        res.update(status="fail", cause="aotc", reason=f"timeout after {args.timeout} s")
        return res
    if rc < 0:
        res.update(status="fail", cause="aotc", reason=f"crash: killed by signal {-rc}")
        return res
    if rc != 0:
        res.update(status="fail", cause="aotc", reason=f"exit {rc}: {error_line(stderr)}")
        return res
    try:
        got, _ = read_safetensors(out)
    except Malformed as e:
        res.update(status="fail", cause="aotc", reason=f"unreadable output: {e}")
        return res
    rtol, atol = s["tol"]
    checks = [(f"output_{i}", f"ref.output_{i}", o["dtype"]) for i, o in enumerate(s["outputs"])]
    checks += [(f"grad_{n}", f"ref.grad_{n}",
                next(i["dtype"] for i in s["inputs"] if i["name"] == n)) for n in s["grads"]]
    problems = check_outputs(got, {ref: tensors[f"{sid}/{ref}"] for _, ref, _ in checks}, checks, rtol, atol)
    if problems:
        res.update(status="fail", cause="mismatch", reason="; ".join(problems))
    else:
        res.update(status="pass")
        shutil.rmtree(work, ignore_errors=True)
    return res


def read_list(path):
    if not os.path.exists(path):
        return set()
    return {l.split("#")[0].strip() for l in open(path) if l.split("#")[0].strip()}


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--aotc", required=True)
    ap.add_argument("--dir", default=HERE, help="folder with manifest.json and ops/")
    ap.add_argument("--work-dir", default=None)
    ap.add_argument("--jobs", type=int, default=2)
    ap.add_argument("--timeout", type=float, default=120)
    ap.add_argument("--results", default=None)
    ap.add_argument("--only", default="", help="comma-separated ops under test")
    ap.add_argument("--sample-cap", type=int, default=None,
                    help="run only the first N samples of each op, overload and dtype (the sanitizer suites)")
    ap.add_argument("--derivatives", action="append", default=[])
    ap.add_argument("--expected-failures", default=None)
    ap.add_argument("--update-expected", action="store_true")
    ap.add_argument("--expect-mismatch", action="store_true")
    ap.add_argument("-v", "--verbose", action="store_true")
    args = ap.parse_args()
    if args.sample_cap is not None and args.sample_cap < 1:
        ap.error("--sample-cap must be at least 1")
    if args.update_expected and (args.sample_cap is not None or args.only):
        ap.error("--update-expected rewrites the whole list: run every sample (no --only, no --sample-cap)")
    args.work_dir = os.path.abspath(args.work_dir or os.path.join(os.getcwd(), "conformance-work"))
    args.results = args.results or os.path.join(args.work_dir, "results.jsonl")
    shutil.rmtree(args.work_dir, ignore_errors=True)
    os.makedirs(args.work_dir)
    manifest = json.load(open(os.path.join(args.dir, "manifest.json")))
    size = sum(os.path.getsize(os.path.join(r, f)) for r, _, fs in os.walk(args.dir) for f in fs
               if r.endswith("ops") or f == "manifest.json")
    if size > 20 * 1024 * 1024:
        print(f"error: conformance fixtures take {size} bytes (limit 20 MiB)")
        return 1
    only = set(filter(None, args.only.split(",")))
    ops = manifest["ops"]
    lines, todo = [], []
    for op, e in ops.items():
        if only and op not in only:
            continue
        if e["skip"]:
            lines.append({"kind": "op", "op": op, "status": "skip", "reason": e["skip"]})
    taken = summarize.capped(manifest["samples"], args.sample_cap)
    for sid, s in manifest["samples"].items():
        if (only and s["op"] not in only) or sid not in taken:
            continue
        s["counts_for"] = [t for t in s["targets"] if t in ops]
        if s["skip"]:
            lines.append({"kind": "sample", "id": sid, "op": s["op"], "dtype": s["dtype"],
                          "counts_for": s["counts_for"], "status": "skip", "reason": s["skip"]})
        else:
            todo.append((sid, s))
    units = Units(args.dir)
    t0 = time.monotonic()
    with cf.ThreadPoolExecutor(max_workers=args.jobs) as ex:
        for res in ex.map(lambda x: run_sample(args, units, *x), todo):
            lines.append(res)
            if args.verbose or (res["status"] == "fail" and not args.expected_failures):
                print(f"{res['status'].upper()} {res['id']}: {res.get('reason', '')}")
    lines.sort(key=lambda r: (r["kind"], r.get("id", r["op"])))
    with open(args.results, "w") as f:
        for r in lines:
            f.write(json.dumps(r, sort_keys=True) + "\n")
    print(f"ran {len(todo)} samples in {time.monotonic() - t0:.1f} s; results: {args.results}")
    line, _ = summarize.summarize(lines)
    status = 0
    failing = {r["id"] for r in lines if r["kind"] == "sample" and r["status"] == "fail"}
    if args.expect_mismatch:
        def numel(shape):
            n = 1
            for d in shape:
                n *= d
            return n
        with_grad = [sid for sid, s in todo
                     if any(numel(i["shape"]) for i in s["inputs"] if i["name"] in s["grads"])]
        missed = [sid for sid in with_grad if sid not in failing]
        not_value = [r["id"] for r in lines if r.get("cause") == "aotc"]
        if not with_grad or missed or not_value:
            print(f"error: expected every sample with a gradient to fail by a wrong value; "
                  f"passed: {missed}; aotc errors: {not_value}")
            status = 1
        else:
            print(f"ok: all {len(with_grad)} samples with a gradient fail by a wrong value")
    if args.expected_failures:
        known = read_list(args.expected_failures)
        if only:
            known = {k for k in known if manifest["samples"].get(k, {}).get("op") in only}
        if args.sample_cap is not None:
            known = {k for k in known if k in taken}
        if args.update_expected:
            with open(args.expected_failures, "w") as f:
                f.write("# Conformance samples expected to fail (test/conformance/run_conformance.py\n"
                        "# --update-expected rewrites it). The ctest fails on any new failure;\n"
                        "# samples that start passing are reported; shrink this list to zero.\n")
                f.write("".join(f"{k}\n" for k in sorted(failing)))
            print(f"wrote {args.expected_failures} ({len(failing)} ids)")
        else:
            by_id = {r["id"]: r for r in lines if r["kind"] == "sample"}
            new = sorted(failing - known)
            fixed = sorted(known - failing)
            for k in new:
                print(f"NEW FAILURE {k}: {by_id[k].get('reason')}\n    {by_id[k].get('command')}")
            for k in fixed:
                why = "not in the manifest" if k not in by_id else by_id[k]["status"]
                print(f"NOW PASSING {k} ({why}): ratchet with --update-expected")
            # Only a new failure fails the test: work that fixes samples must not
            # break CI before the list is rewritten (the list only ever shrinks).
            if new:
                status = 1
            print(f"expected failures: {len(known)}; new: {len(new)}; now passing: {len(fixed)}")
    print(line)
    return status


if __name__ == "__main__":
    sys.exit(main())
