"""safe_softmax_check.py make IN | check IN OUT [--perturb]: inputs for safe_softmax_rows.fx.txt
(seeded pseudo-random, with -inf entries: x[0, 1, :] is all -inf, so is x[2, :, 3], and a few
single entries) and the check of `aotc run`'s outputs against float64 references of torch's
_safe_softmax computed here: 0 on a slice whose every value is -inf (exactly), else
exp(x - max) / sum, 2e-6 relative. --perturb moves one element of each output first: the
negative control, which must fail."""
import math
import os
import random
import struct
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "..", "..", "python"))
from aotc import _safetensors as st  # noqa: E402

B, R, C = 3, 4, 5


def f32(v):
    return struct.unpack("<f", struct.pack("<f", v))[0]


def inputs():
    rnd = random.Random(0)
    x = [f32(rnd.gauss(0, 3)) for _ in range(B * R * C)]
    for c in range(C):
        x[(0 * R + 1) * C + c] = -math.inf  # a row along dim -1
    for r in range(R):
        x[(2 * R + r) * C + 3] = -math.inf  # a column along dim 1
    for i in (7, 22, 41):
        x[i] = -math.inf
    return x


def safe_softmax(vals):
    if all(v == -math.inf for v in vals):
        return [0.0] * len(vals)
    m = max(vals)
    e = [math.exp(v - m) for v in vals]
    s = math.fsum(e)
    return [v / s for v in e]


def references(x):
    at = lambda b, r, c: (b * R + r) * C + c  # noqa: E731
    out0, out1 = [0.0] * len(x), [0.0] * len(x)
    for b in range(B):
        for r in range(R):
            for c, v in enumerate(safe_softmax([x[at(b, r, c)] for c in range(C)])):
                out0[at(b, r, c)] = v
        for c in range(C):
            for r, v in enumerate(safe_softmax([x[at(b, r, c)] for r in range(R)])):
                out1[at(b, r, c)] = v
    return {"output_0": out0, "output_1": out1}


def main():
    x = inputs()
    if sys.argv[1] == "make":
        st.write(sys.argv[2], [st.tensor("x", "f32", [B, R, C], x)])
        return 0
    out = {name: t.tolist() for name, t in st.read(sys.argv[3]).tensors.items()}
    bad = []
    for name, ref in references(x).items():
        got = out[name]
        if "--perturb" in sys.argv:
            got[len(got) // 2 + 1] += 1e-4
        for i, (g, w) in enumerate(zip(got, ref)):
            ok = g == 0.0 if w == 0.0 else abs(g - w) <= 2e-6 * max(abs(w), 1e-3)
            if not ok:
                bad.append(f"{name}[{i}] = {g!r}, want {w!r}")
                break
    print("safe_softmax_check: " + ("; ".join(bad) if bad else "ok"))
    return 1 if bad else 0


sys.exit(main())
