#!/usr/bin/env python3
# (Not named profile.py: tools/bench is first on sys.path of run_case.py, and a profile.py there
# would shadow the standard library module cProfile imports.)
"""Where an aotc training step's time goes: a `perf report` of bench_step split by what the
time was spent on, with the generated kernels attributed through `aotc --emit kernels`.

    perf record -o P.data bench_step step libM.so M W.safetensors IN.safetensors 2 10 0.01 o.json
    perf report -i P.data --no-children --sort dso,sym -q --percent-limit 0 > P.txt
    aotc M.pt2 --emit kernels -o M.kernels.txt
    kernel_profile.py --report P.txt --kernels M.kernels.txt --name M [--top 8]

Stdlib only. Categories (docs/benchmarks-lm.md):
  GEMM            OpenBLAS (sgemm kernels and packing) and the library-call kernels' own code
  attention softmax / layer norm / cross-entropy / activation
                  generated kernels by their ops: a forward kernel with amax+exp (and no log)
                  is softmax, with log it is cross-entropy (log_softmax), with rsqrt it is a
                  layer norm or RMSNorm, with tanh/erf/sigmoid an activation; a backward kernel
                  takes the category of the forward kernel that wrote a saved tensor it reads
                  (first of cross-entropy, softmax, layer norm, activation), else its own ops
  layout copies   generated kernels whose only op is copy (views made contiguous)
  other fused     the remaining generated kernels (residual adds, bias, embedding, SGD-free)
  libm            scalar libm calls (expf, logf, ...) from generated code
  memset/memcpy, OS (page faults, scheduler), OpenMP runtime, driver (bench_step: loading,
  the SGD update), other
Fusion crosses these lines (a layer norm's backward fused with the GELU backward is counted
once, by the rule above), so the split is an attribution, not an exact measurement.
"""
import argparse
import re
from collections import defaultdict

PRIORITY = ["cross-entropy", "attention softmax", "layer norm", "activation"]


def parse_kernels(path):
    """{("fwd"|"bwd", k): (ops, reads, writes, is_gemm)}"""
    out, phase = {}, None
    for line in open(path):
        if line.startswith("# forward:"):
            phase = "fwd"
        elif line.startswith("# backward:"):
            phase = "bwd"
        m = re.match(r"kernel k(\d+): (gemm |conv |\w+ )?ops=\[([^\]]*)\] reads=\[([^\]]*)\] writes=\[([^\]]*)\]",
                     line)
        if m and phase:
            split = lambda s: [x.strip() for x in s.split(",") if x.strip()]  # noqa: E731
            out[(phase, int(m.group(1)))] = (set(split(m.group(3))), split(m.group(4)),
                                             split(m.group(5)), (m.group(2) or "").strip() == "gemm")
    return out


def own_category(ops, gemm):
    if gemm:
        return "GEMM"
    if ops <= {"copy"}:
        return "layout copies"
    if "log" in ops and ("amax" in ops or "exp" in ops):
        return "cross-entropy"
    if "amax" in ops and "exp" in ops:
        return "attention softmax"
    if "rsqrt" in ops:
        return "layer norm"
    if ops & {"tanh", "erf", "sigmoid"}:
        return "activation"
    return "other fused"


def classify(kernels):
    cat, producer = {}, {}
    for (phase, k), (ops, reads, writes, gemm) in kernels.items():
        if phase == "fwd":
            cat[(phase, k)] = own_category(ops, gemm)
            for w in writes:
                producer[w] = cat[(phase, k)]
    for (phase, k), (ops, reads, writes, gemm) in kernels.items():
        if phase != "bwd":
            continue
        c = own_category(ops, gemm)
        if c not in ("GEMM", "layout copies"):
            found = [producer[r] for r in reads if producer.get(r) in PRIORITY]
            if found:
                c = min(found, key=PRIORITY.index)
        cat[(phase, k)] = c
    return cat


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--report", required=True)
    ap.add_argument("--kernels", required=True)
    ap.add_argument("--name", required=True)
    ap.add_argument("--top", type=int, default=8)
    a = ap.parse_args()
    kernels = parse_kernels(a.kernels)
    cat = classify(kernels)
    sym_re = re.compile(re.escape(a.name) + r"_(fwd|bwd)_k(\d+)\b")
    totals, per_kernel = defaultdict(float), defaultdict(float)
    for line in open(a.report):
        m = re.match(r"\s*([\d.]+)%\s+(\S+)\s+\[.\]\s+(.*)$", line)
        if not m:
            continue
        pct, dso, sym = float(m.group(1)), m.group(2), m.group(3).strip()
        km = sym_re.search(sym)
        if km:
            key = (km.group(1), int(km.group(2)))
            c = cat.get(key, "other fused")
            per_kernel[key] += pct
        elif dso.startswith("libopenblas"):
            c = "GEMM"
        elif dso.startswith("libm"):
            c = "libm"
        elif sym.startswith(("__memset", "__memcpy", "__memmove")):
            c = "memset/memcpy"
        elif dso.startswith("[kernel"):
            c = "OS"
        elif dso.startswith(("libomp", "libgomp")):
            c = "OpenMP runtime"
        elif dso == "bench_step" or dso.startswith("libaotc"):
            c = "driver"
        else:
            c = "other"
        totals[c] += pct
    print(f"{a.name}: share of samples by category")
    for c, v in sorted(totals.items(), key=lambda kv: -kv[1]):
        print(f"  {c:18s} {v:6.1f} %")
    print(f"top {a.top} generated kernels:")
    for key, v in sorted(per_kernel.items(), key=lambda kv: -kv[1])[:a.top]:
        ops = ",".join(sorted(kernels[key][0])) if key in kernels else "?"
        print(f"  {key[0]} k{key[1]:<4d} {v:5.1f} %  {cat.get(key, '?'):18s} ops={ops}")


if __name__ == "__main__":
    main()
