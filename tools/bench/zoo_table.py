#!/usr/bin/env python3
"""One row per zoo model (test/fixtures/zoo) for closing notes and docs/benchmarks.md: captured
op nodes, kernels of the forward and backward (generated loop kernels / library calls: GEMMs
and convolutions), aotc's compile time (`aotc MODEL.pt2 -o X.o`, wall, 1 process) and the
saved area. Standard library only.

    tools/bench/zoo_table.py [--aotc build/tools/aotc/aotc] [MODEL ...]
"""
import argparse
import os
import re
import subprocess
import sys
import tempfile
import time

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
ZOO = os.path.join(REPO, "test", "fixtures", "zoo")


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--aotc", default=os.path.join(REPO, "build", "tools", "aotc", "aotc"))
    ap.add_argument("models", nargs="*")
    a = ap.parse_args()
    names = a.models or sorted(d for d in os.listdir(ZOO) if os.path.isdir(os.path.join(ZOO, d)))
    print("| model | op nodes | kernels: loops / GEMM / conv | compile s | saved bytes |")
    print("|---|---|---|---|---|")
    with tempfile.TemporaryDirectory() as tmp:
        for m in names:
            pt2 = os.path.join(ZOO, m, m + ".pt2")
            cap, ker = os.path.join(tmp, "cap.txt"), os.path.join(tmp, "k.txt")
            subprocess.run([a.aotc, pt2, "--emit", "capture", "-o", cap], check=True)
            subprocess.run([a.aotc, pt2, "--emit", "kernels", "-o", ker], check=True)
            ops = sum(1 for line in open(cap) if "torch.ops." in line)
            kinds = re.findall(r"^kernel k\d+: (conv \w+|gemm)?", open(ker).read(), re.M)
            conv = sum(1 for k in kinds if k.startswith("conv"))
            gemm = sum(1 for k in kinds if k == "gemm")
            t0 = time.perf_counter()
            subprocess.run([a.aotc, pt2, "-o", os.path.join(tmp, m + ".o")], check=True)
            secs = time.perf_counter() - t0
            saved = re.search(r"Saved area: (\d+) bytes", open(os.path.join(tmp, m + ".h")).read())
            print(f"| {m} | {ops} | {len(kinds) - conv - gemm} / {gemm} / {conv} | {secs:.1f} | "
                  f"{int(saved.group(1)) if saved else 0:,} |", flush=True)


if __name__ == "__main__":
    sys.exit(main())
