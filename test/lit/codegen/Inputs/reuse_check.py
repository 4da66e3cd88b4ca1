"""reuse_check.py make IN | check IN OUT [--perturb]: inputs for phase_reuse.fx.txt (seeded
pseudo-random; m masks three columns with -inf) and the check of `aotc run`'s outputs against
float64 references computed here. --perturb moves one output element of each by 1e-5
(relative) first: the negative control, which must fail."""
import math
import os
import random
import struct
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "..", "..", "python"))
from aotc import _safetensors as st  # noqa: E402


def f32(v):
    return struct.unpack("<f", struct.pack("<f", v))[0]


def inputs():
    r = random.Random(0)
    x = [f32(r.gauss(0, 3)) for _ in range(64 * 100)]
    m = [f32(r.uniform(-1, 1)) for _ in range(100)]
    for j in (3, 50, 99):
        m[j] = -math.inf
    y = [r.uniform(-30, 30) for _ in range(8 * 50)]
    return x, m, y


def rows(v, n):
    return [v[i:i + n] for i in range(0, len(v), n)]


def softmax(row):
    mx = max(row)
    e = [math.exp(v - mx) if v != -math.inf else 0.0 for v in row]
    s = math.fsum(e)
    return [v / s for v in e]


def main():
    x, m, y = inputs()
    if sys.argv[1] == "make":
        st.write(sys.argv[2], [st.tensor("x", "f32", [64, 100], x), st.tensor("m", "f32", [100], m),
                               st.tensor("y", "f64", [8, 50], y)])
        return 0
    out = {k: t.tolist() for k, t in st.read(sys.argv[3]).tensors.items()}
    want = {"output_0": [], "output_1": [], "output_2": [], "output_3": []}
    for row in rows(x, 100):
        want["output_0"] += softmax([a + b for a, b in zip(row, m)])
        lse = max(row) + math.log(math.fsum(math.exp(v - max(row)) for v in row))
        want["output_2"] += [v - lse for v in row]
        t = [math.tanh(v) for v in row]
        s = math.fsum(t)
        want["output_3"] += [v / s for v in t]
    for row in rows(y, 50):
        want["output_1"] += softmax(row)
    bad = []
    for k, ref in want.items():
        got = out[k]
        if "--perturb" in sys.argv:
            got[17] = got[17] * (1 + 1e-5) + 1e-5
        # f32 results: a few ulp of the value (tanh: MLIR's approximation, 3e-7 absolute, over a
        # sum of mixed signs: relative to 1 / |sum| where larger);
        # f64: near rounding.
        tol = 1e-12 if k == "output_1" else 1e-5 if k == "output_3" else 2e-6
        scale = [max(abs(w), 1e-3) for w in ref]
        if k == "output_3":
            scale = [max(abs(w), 1.0 / abs(math.fsum(math.tanh(v) for v in rows(x, 100)[i // 100]))) for i, w in enumerate(ref)]
        err = max(abs(g - w) / s for g, w, s in zip(got, ref, scale))
        if len(got) != len(ref) or not err <= tol:
            bad.append(f"{k}: relative error {err:.3g} > {tol:g}")
    print("reuse_check: " + ("; ".join(bad) if bad else "ok"))
    return 1 if bad else 0


sys.exit(main())
