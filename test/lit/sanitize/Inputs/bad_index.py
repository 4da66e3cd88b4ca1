#!/usr/bin/env python3
"""bad_index.py --aotc AOTC --work DIR [--flag F ...] MODEL.fx.txt BAD...

For each BAD value: writes inputs for MODEL (floats in [-1, 1), every i64 index input 0
except its last element, set to BAD), runs `aotc run MODEL --inputs IN --out OUT FLAGS`,
and prints `ok <model> <bad>` when aotc exits 1 naming the indexing node, "index out of
range" and "(value BAD)", and OUT was not written; else `FAIL ...` (exit 1). Under a
sanitizer build with --flag=--sanitize=..., the generated code runs instrumented, so an
access outside its buffers aborts the run instead (also a FAIL). Standard library only
(python/aotc/_safetensors.py writes the inputs)."""
import argparse
import os
import random
import re
import subprocess
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "..", "..", "python"))
from aotc import _safetensors as st  # noqa: E402

ap = argparse.ArgumentParser()
ap.add_argument("--aotc", required=True)
ap.add_argument("--work", required=True)
ap.add_argument("--flag", action="append", default=[])
ap.add_argument("model")
ap.add_argument("bad", nargs="+", type=int)
a = ap.parse_args()

text = open(a.model).read()
sig = re.search(r"def forward\(self, (.*)\):", text).group(1)
inputs = re.findall(r'(\w+): "(\w+)\[([\d, ]*)\]"', sig)
name = os.path.basename(a.model).split(".")[0]
rng = random.Random(0)
failed = False
for bad in a.bad:
    tensors = []
    for n, dt, dims in inputs:
        shape = [int(d) for d in dims.split(",") if d.strip()]
        numel = 1
        for d in shape:
            numel *= d
        if dt == "i64":
            vals = [0] * numel
            vals[-1] = bad
            tensors.append(st.tensor(n, "i64", shape, vals))
        else:
            tensors.append(st.tensor(n, "f32", shape, [rng.uniform(-1, 1) for _ in range(numel)]))
    inp = os.path.join(a.work, f"{name}.{bad}.in.safetensors")
    out = os.path.join(a.work, f"{name}.{bad}.out.safetensors")
    st.write(inp, tensors)
    if os.path.exists(out):
        os.remove(out)
    r = subprocess.run([a.aotc, "run", a.model, "--inputs", inp, "--out", out] + a.flag,
                       capture_output=True, text=True)
    ok = (r.returncode == 1 and "index out of " in r.stderr and f"(value {bad})" in r.stderr
          and not os.path.exists(out))
    first = (r.stderr.strip().splitlines() or [""])[0]
    print(f"{'ok' if ok else 'FAIL'} {name} {bad}" + ("" if ok else f": rc={r.returncode} {first}"))
    failed |= not ok
sys.exit(1 if failed else 0)
