#!/usr/bin/env python3
"""The check for partition over run-time sizes (docs/dynamic-shapes.md, "Run-time sizes through
partition"): the min-cut is decided once, at the largest sizes, so the partition of a program
specialized at a smaller size may save other tensors than the dynamic partition specialized
there. Their texts may differ; their values may not. For each size this script

  * specializes the dynamic partition text (--start-from=partition --specialize S) and runs it
    (`aotc run`), and runs the export specialized at S (`aotc run IN --specialize S`), on the same
    inputs (seeded uniform floats in [-1, 1), ints in [0, 3), rng_state {1234, 0});
  * prints "bit-identical: S (N tensors)" when both wrote the same outputs and gradients, byte for
    byte; else FAIL with the first tensor that differs (exit 1).

Usage: partition_runs.py AOTC IN DIR [--edit OLD=>NEW] SIZES... (IN: a .pt2, or capture text read
with --start-from=capture; SIZES: --specialize values,
e.g. s48=3,s24=7; --edit: the negative control, a size folded by hand into the partition text).
Standard library only (python/aotc/_safetensors.py writes and reads the tensors)."""
import os
import random
import re
import subprocess
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "..", "..", "python"))
from aotc import _safetensors as st  # noqa: E402


def aotc(binary, *args):
    r = subprocess.run([binary, *args], capture_output=True, text=True, timeout=300)
    if r.returncode != 0:
        sys.exit(f"FAIL: aotc {' '.join(args)} exited {r.returncode}:\n{r.stderr}")
    return r.stdout


def inputs(text, path):
    """Seeded inputs for the forward's placeholders of a static partition text, by the name
    `aotc run --inputs` reads (a parameter's or buffer's FQN, else the placeholder's name)."""
    fqn = dict(re.findall(r"^# aotc: input forward (\w+) role=\w+ fqn=(\S+)", text, re.M))
    sig = re.search(r"def forward\(self, (.*)\):", text).group(1)
    rng = random.Random(0)
    tensors = []
    for name, dt, dims in re.findall(r'(\w+): "(\w+)\[([\d, ]*)\]"', sig):
        shape = [int(d) for d in dims.split(",") if d.strip()]
        numel = 1
        for d in shape:
            numel *= d
        if name == "rng_state":
            tensors.append(st.tensor(name, "i64", shape, [1234, 0]))
        elif dt == "i64":
            tensors.append(st.tensor(fqn.get(name, name), "i64", shape, [rng.randrange(3) for _ in range(numel)]))
        elif dt == "f32":
            tensors.append(st.tensor(fqn.get(name, name), "f32", shape, [rng.uniform(-1, 1) for _ in range(numel)]))
        else:
            sys.exit(f"FAIL: no input generator for {name}: {dt}")
    st.write(path, tensors)


def main():
    binary, src, out = sys.argv[1:4]
    sizes = sys.argv[4:]
    start = ["--start-from=capture"] if not src.endswith(".pt2") else []
    text = aotc(binary, src, *start, "--emit=partition")
    if sizes[:1] == ["--edit"]:
        old, new = sizes[1].split("=>")
        if text.count(old) != 1:
            sys.exit(f"FAIL: --edit: '{old}' is not once in the partition text")
        text, sizes = text.replace(old, new), sizes[2:]
    stem = os.path.join(out, os.path.basename(src))
    with open(stem + ".partition.txt", "w") as f:
        f.write(text)
    for at in sizes:
        static = aotc(binary, stem + ".partition.txt", "--start-from=partition", "--specialize", at, "--emit=partition")
        inputs(static, f"{stem}.{at}.in.st")
        a, b = f"{stem}.{at}.after.st", f"{stem}.{at}.before.st"
        aotc(binary, "run", stem + ".partition.txt", "--start-from=partition", "--specialize", at,
             "--inputs", f"{stem}.{at}.in.st", "--out", a)
        aotc(binary, "run", src, *start, "--specialize", at, "--inputs", f"{stem}.{at}.in.st", "--out", b)
        ta, tb = st.read(a), st.read(b)
        if sorted(ta.keys()) != sorted(tb.keys()):
            sys.exit(f"FAIL: {at}: the runs wrote {sorted(ta.keys())} and {sorted(tb.keys())}")
        for k in sorted(ta.keys()):
            if ta[k].dtype != tb[k].dtype or ta[k].shape != tb[k].shape or bytes(ta[k].data) != bytes(tb[k].data):
                sys.exit(f"FAIL: {at}: '{k}' differs between the specialized partition and the specialized export")
        print(f"bit-identical: {at} ({len(ta.keys())} tensors)")


if __name__ == "__main__":
    main()
