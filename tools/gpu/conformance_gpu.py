#!/usr/bin/env python3
"""The conformance samples (test/conformance, docs/conformance.md) on the CUDA target.

  conformance_gpu.py audit --aotc AOTC [--jobs 2] [--only OP,...] [--per-op N] [--out results.jsonl]
      Here, no GPU: compiles every non-skipped sample with --target=cuda (one arch, sm_90)
      and classifies it: ok, refused (exit 1: the diagnostic must name the op or a reason;
      the CPU target accepts every one of these graphs, so a refusal is a CUDA-only gap) or
      internal (exit 2, a crash or a timeout: a bug; issue 28 part 6 allows none). Exit 1
      when any sample is internal. --per-op N: the first N samples of each op only (ctest
      cuda.conformance_audit uses 1).
  conformance_gpu.py prepare --aotc AOTC --out DIR [--per-op-dtype N] [--jobs 2]
      Here: the first N (2) samples of every (op, dtype), compiled for sm_90 into DIR as
      c<k>.o, with c<k>.in.safetensors (inputs and tangents), c<k>.ref.safetensors (torch's
      float64 references), samples.json and programs.cpp (the table conformance_cuda links;
      tools/gpu/CMakeLists.txt builds it when DIR is build-gpu/conformance).
  conformance_gpu.py device --dir DIR --driver conformance_cuda --work W --results R
      There: runs the driver over every program (starting again after a sample that makes it
      fail), then compares each sample's outputs and gradients with torch's references by
      run_conformance.py's rule and tolerances. Prints one summary line; exit 1 when a sample
      is wrong or failed on the device. Negative control: the first sample is also compared
      with its references perturbed (x 1.01 + 1e-3, written by prepare) and must fail there.

Standard library only.
"""
import argparse
import concurrent.futures as cf
import json
import os
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.join(HERE, "..", "..")
sys.path.insert(0, os.path.join(ROOT, "test", "conformance"))
import run_conformance as rc  # noqa: E402  (compare, Units, write_safetensors, read_safetensors)

ARCH = "sm_90"


def manifest_samples(conf_dir, only):
    m = json.load(open(os.path.join(conf_dir, "manifest.json")))
    out = []
    for sid, s in sorted(m["samples"].items()):
        if s["skip"] or (only and s["op"] not in only):
            continue
        out.append((sid, s))
    return out


TOOLKIT = "/usr/local/cuda"


def compile_cmd(aotc, graph, s, name, obj):
    cmd = [aotc, graph, "--target=cuda", "--cuda-arch", ARCH, "--cuda-toolkit", TOOLKIT, "--name", name, "-o", obj]
    if s["freeze"]:
        cmd.append("--freeze=" + ",".join(s["freeze"]))
    return cmd


def classify(p):
    """(status, message) of a finished aotc compile."""
    if p is None:
        return "internal", "timeout after 300 s"
    if p.returncode == 0:
        return "ok", ""
    msg = rc.error_line(p.stderr)
    if p.returncode == 1:
        return "refused", msg
    if p.returncode < 0:
        return "internal", f"killed by signal {-p.returncode}"
    return "internal", f"exit {p.returncode}: {msg}"


def compile_sample(aotc, units, work, sid, s, name, keep):
    unit = s["op"][len("aten."):]
    _, graphs = units.get(unit)
    os.makedirs(work, exist_ok=True)
    graph = os.path.join(work, name + ".fx.txt")
    with open(graph, "w") as f:
        f.write(graphs[sid])
    obj = os.path.join(work, name + ".o")
    try:
        p = subprocess.run(compile_cmd(aotc, graph, s, name, obj), capture_output=True, text=True, timeout=300)
    except subprocess.TimeoutExpired:
        p = None
    status, msg = classify(p)
    os.unlink(graph)
    if not keep:
        for ext in (".o", ".h", ".weights.safetensors"):
            if os.path.exists(os.path.join(work, name + ext)):
                os.unlink(os.path.join(work, name + ext))
    return {"id": sid, "op": s["op"], "dtype": s["dtype"], "name": name, "status": status, "message": msg}


def audit(args):
    only = set(filter(None, args.only.split(",")))
    samples = manifest_samples(args.conformance_dir, only)
    if args.per_op:
        seen = {}
        samples = [x for x in samples if seen.setdefault(x[1]["op"], []).append(1) or len(seen[x[1]["op"]]) <= args.per_op]
    units = rc.Units(args.conformance_dir)
    work = os.path.abspath(args.work)
    t0 = time.monotonic()
    with cf.ThreadPoolExecutor(max_workers=args.jobs) as ex:
        res = list(ex.map(lambda x: compile_sample(args.aotc, units, work, x[1][0], x[1][1], f"a{x[0]}", False),
                          enumerate(samples)))
    with open(args.out, "w") as f:
        for r in res:
            f.write(json.dumps(r, sort_keys=True) + "\n")
    count = {k: sum(1 for r in res if r["status"] == k) for k in ("ok", "refused", "internal")}
    ops = {}
    for r in res:
        ops.setdefault(r["op"], set()).add(r["status"])
    for r in res:
        if r["status"] != "ok":
            print(f"{r['status'].upper()} {r['id']}: {r['message']}")
    print(f"cuda audit: samples={len(res)} ok={count['ok']} refused={count['refused']} "
          f"internal={count['internal']} ops={len(ops)} ops_all_ok={sum(1 for v in ops.values() if v == {'ok'})} "
          f"({time.monotonic() - t0:.0f} s)")
    return 1 if count["internal"] else 0


def check_sample(m, got_path, ref_path):
    """Problems of one sample's outputs against its references (empty: pass)."""
    got, _ = rc.read_safetensors(got_path)
    ref, _ = rc.read_safetensors(ref_path)
    return rc.check_outputs(got, ref, m["checks"], *m["tol"])


def prepare(args):
    samples = manifest_samples(args.conformance_dir, set())
    per = {}
    chosen = []
    for sid, s in samples:
        key = (s["op"], s["dtype"])
        if per.get(key, 0) < args.per_op_dtype:
            per[key] = per.get(key, 0) + 1
            chosen.append((sid, s))
    out = os.path.abspath(args.out)
    os.makedirs(out, exist_ok=True)
    units = rc.Units(args.conformance_dir)
    with cf.ThreadPoolExecutor(max_workers=args.jobs) as ex:
        res = list(ex.map(lambda x: compile_sample(args.aotc, units, out, x[1][0], x[1][1], "c%04d" % x[0], True),
                          enumerate(chosen)))
    table, meta = [], {}
    for (sid, s), r in zip(chosen, res):
        name = r["name"]
        if r["status"] != "ok":
            meta[name] = {"id": sid, "op": s["op"], "dtype": s["dtype"], "compile": r["status"],
                          "message": r["message"]}
            continue
        tensors, _ = units.get(s["op"][len("aten."):])
        ins = {i["name"]: tensors[f"{sid}/input.{i['name']}"] for i in s["inputs"]}
        for k, o in enumerate(s["outputs"]):
            if o["tangent"]:
                ins[f"tangent_{k}"] = tensors[f"{sid}/tangent_{k}"]
        rc.write_safetensors(os.path.join(out, name + ".in.safetensors"), ins)
        checks = [(f"output_{k}", f"ref.output_{k}", o["dtype"]) for k, o in enumerate(s["outputs"])]
        checks += [(f"grad_{n}", f"ref.grad_{n}", next(i["dtype"] for i in s["inputs"] if i["name"] == n))
                   for n in s["grads"]]
        rc.write_safetensors(os.path.join(out, name + ".ref.safetensors"),
                             {ref: tensors[f"{sid}/{ref}"] for _, ref, _ in checks})
        if not table and s["dtype"] in ("f32", "f64"):
            # The negative control: the first sample's references scaled by 1.01 and shifted by
            # 1e-3 (so zeros move too); `device` must find this sample wrong against them.
            rc.write_safetensors(os.path.join(out, name + ".ref-perturbed.safetensors"),
                                 {ref: rc.perturbed(tensors[f"{sid}/{ref}"]) for _, ref, _ in checks})
        for ext in (".h", ".weights.safetensors"):
            if os.path.exists(os.path.join(out, name + ext)):
                os.unlink(os.path.join(out, name + ext))
        meta[name] = {"id": sid, "op": s["op"], "dtype": s["dtype"], "compile": "ok", "tol": s["tol"],
                      "checks": checks}
        table.append(name)
    with open(os.path.join(out, "samples.json"), "w") as f:
        json.dump(meta, f, indent=0, sort_keys=True)
    with open(os.path.join(out, "programs.cpp"), "w") as f:
        f.write("// Written by tools/gpu/conformance_gpu.py prepare: the compiled conformance samples.\n")
        f.write('#include "conformance_table.h"\n\nextern "C" {\n')
        f.writelines(f"extern const aotc_cuda_program {n}_program;\n" for n in table)
        f.write("}\n\nnamespace aotc_gpu {\nconst ConformanceEntry kConformance[] = {\n")
        f.writelines(f'    {{"{n}", &{n}_program}},\n' for n in table)
        f.write(f"}};\nconst int kConformanceCount = {len(table)};\n}} // namespace aotc_gpu\n")
    size = sum(os.path.getsize(os.path.join(out, f)) for f in os.listdir(out))
    bad = [m for m in meta.values() if m["compile"] != "ok"]
    for m in bad:
        print(f"{m['compile'].upper()} {m['id']}: {m['message']}")
    print(f"conformance_gpu prepare: {len(table)} of {len(chosen)} samples compiled for {ARCH} "
          f"({len(per)} op/dtype pairs), {size / 1048576:.1f} MiB in {out}")
    return 1 if any(m["compile"] == "internal" for m in bad) else 0


def device(args):
    meta = json.load(open(os.path.join(args.dir, "samples.json")))
    names = sorted(n for n, m in meta.items() if m["compile"] == "ok")
    os.makedirs(args.work, exist_ok=True)
    failed = {}
    first, t0 = 0, time.monotonic()
    while first < len(names):
        cmd = [args.driver, args.dir, args.work, str(first)]
        try:
            p = subprocess.run(cmd, capture_output=True, text=True, timeout=args.timeout)
            out, err, code = p.stdout, p.stderr, p.returncode
        except subprocess.TimeoutExpired as e:
            out = e.stdout.decode() if isinstance(e.stdout, bytes) else (e.stdout or "")
            err, code = f"timeout after {args.timeout} s", 124
        if code == 77:
            print("conformance_gpu: no CUDA device")
            return 77
        if code == 0:
            break
        started = [l.split() for l in out.splitlines() if l.startswith("start ")]
        k = int(started[-1][1]) if started else first
        failed[names[k]] = f"exit {code}: " + (err.strip().splitlines() or ["?"])[-1][:300]
        first = k + 1
    results = []
    for n in sorted(meta):
        m = meta[n]
        r = {"name": n, "id": m["id"], "op": m["op"], "dtype": m["dtype"]}
        if m["compile"] != "ok":
            r.update(status="compile-" + m["compile"], reason=m["message"])
        elif n in failed:
            r.update(status="device-error", reason=failed[n])
        else:
            path = os.path.join(args.work, n + ".out.safetensors")
            if not os.path.exists(path):
                r.update(status="device-error", reason="no output written")
            else:
                problems = check_sample(m, path, os.path.join(args.dir, n + ".ref.safetensors"))
                r.update(status="wrong" if problems else "pass", reason="; ".join(problems))
                neg = os.path.join(args.dir, n + ".ref-perturbed.safetensors")
                if os.path.exists(neg):
                    caught = check_sample(m, path, neg)
                    print(f"negative control: {m['id']} against its references x 1.01 + 1e-3: "
                          + (f"caught ({caught[0][:120]})" if caught else "NOT CAUGHT"))
                    if not caught:
                        r.update(status="wrong", reason="negative control not caught")
        results.append(r)
    with open(args.results, "w") as f:
        for r in results:
            f.write(json.dumps(r, sort_keys=True) + "\n")
    count = {}
    for r in results:
        count[r["status"]] = count.get(r["status"], 0) + 1
    for r in results:
        if r["status"] != "pass":
            print(f"{r['status'].upper()} {r['id']}: {r.get('reason', '')[:300]}")
    ops = {}
    for r in results:
        ops.setdefault(r["op"], set()).add(r["status"])
    print(f"cuda conformance: samples={len(results)} " + " ".join(f"{k}={v}" for k, v in sorted(count.items())) +
          f" ops={len(ops)} ops_passing={sum(1 for v in ops.values() if v == {'pass'})}"
          f" ({time.monotonic() - t0:.0f} s)")
    # Compile refusals are the audit's business (named, by op); wrong values and device
    # errors fail.
    return 1 if count.get("wrong", 0) or count.get("device-error", 0) else 0


def main():
    global TOOLKIT
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    sub = ap.add_subparsers(dest="cmd", required=True)
    a = sub.add_parser("audit")
    a.add_argument("--aotc", required=True)
    a.add_argument("--conformance-dir", default=os.path.join(ROOT, "test", "conformance"))
    a.add_argument("--jobs", type=int, default=2)
    a.add_argument("--only", default="")
    a.add_argument("--per-op", type=int, default=0)
    a.add_argument("--work", default="cuda-audit-work")
    a.add_argument("--out", default="cuda-audit.jsonl")
    p = sub.add_parser("prepare")
    p.add_argument("--aotc", required=True)
    p.add_argument("--conformance-dir", default=os.path.join(ROOT, "test", "conformance"))
    p.add_argument("--out", required=True)
    p.add_argument("--per-op-dtype", type=int, default=2)
    p.add_argument("--jobs", type=int, default=2)
    d = sub.add_parser("device")
    d.add_argument("--dir", required=True)
    d.add_argument("--driver", required=True)
    d.add_argument("--work", required=True)
    d.add_argument("--results", required=True)
    d.add_argument("--timeout", type=float, default=120)
    for x in (a, p):
        x.add_argument("--cuda-toolkit", default=TOOLKIT)
    args = ap.parse_args()
    TOOLKIT = getattr(args, "cuda_toolkit", TOOLKIT)
    return {"audit": audit, "prepare": prepare, "device": device}[args.cmd](args)


if __name__ == "__main__":
    sys.exit(main())
