"""block_check.py make IN | check IN OUT [--perturb]: inputs for block_reductions.fx.txt
(seeded pseudo-random, an offset so the variance needs the mean) and the check of `aotc run`'s
outputs against float64 references computed here (math.fsum). --perturb moves one element of
each output by 1e-5 (relative) first: the negative control, which must fail."""
import math
import os
import random
import struct
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "..", "..", "python"))
from aotc import _safetensors as st  # noqa: E402


def f32(v):
    return struct.unpack("<f", struct.pack("<f", v))[0]


def main():
    r = random.Random(0)
    x = [f32(3 + r.gauss(0, 1)) for _ in range(300 * 128)]
    y = [f32(r.uniform(-1, 1)) for _ in range(4 * 50 * 192)]
    if sys.argv[1] == "make":
        st.write(sys.argv[2], [st.tensor("x", "f32", [300, 128], x), st.tensor("y", "f32", [4, 50, 192], y)])
        return 0
    out = {k: t.tolist() for k, t in st.read(sys.argv[3]).tensors.items()}
    cols = [[x[i * 128 + c] for i in range(300)] for c in range(128)]
    mean = [math.fsum(col) / 300 for col in cols]
    mean32 = [f32(m) for m in mean]  # the graph subtracts the f32 mean
    want = {"output_0": mean,
            "output_1": [math.fsum((v - m) ** 2 for v in col) for col, m in zip(cols, mean32)],
            "output_2": [max(col) for col in cols],
            "output_3": [math.fsum(y[i * 192 + c] for i in range(200)) for c in range(192)],
            "output_4": [max(col) + math.log(math.fsum(math.exp(v - max(col)) for v in col)) for col in cols]}
    scale = {"output_0": [abs(m) for m in mean], "output_1": want["output_1"], "output_2": [1.0] * 128,
             "output_3": [math.fsum(abs(y[i * 192 + c]) for i in range(200)) for c in range(192)],
             "output_4": [abs(v) for v in want["output_4"]]}
    bad = []
    for k, ref in want.items():
        got = out[k]
        if "--perturb" in sys.argv:
            got[5] = got[5] * (1 + 1e-5) + 1e-5
        err = max(abs(g - w) / s for g, w, s in zip(got, ref, scale[k]))
        tol = 0.0 if k == "output_2" else 1e-6
        if len(got) != len(ref) or not err <= tol:
            bad.append(f"{k}: relative error {err:.3g} > {tol:g}")
    print("block_check: " + ("; ".join(bad) if bad else "ok"))
    return 1 if bad else 0


sys.exit(main())
