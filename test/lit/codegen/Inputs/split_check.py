"""split_check.py make IN | check IN OUT [--drop-last-row]: inputs for split_reductions.fx.txt
(seeded pseudo-random, the extremes of x in its last row, so the last, shorter chunk must be
folded), and the check of `aotc run`'s outputs against float64 references computed here
(math.fsum). --drop-last-row checks against references without x's last row: the negative
control, which must fail."""
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
    x = [f32(r.uniform(-1, 1)) for _ in range(999 * 131)]
    x[998 * 131 + 7], x[998 * 131 + 100] = 3.5, -4.25  # the extremes, in the last row
    y = [r.uniform(-2, 2) for _ in range(1000 * 70)]
    n = [r.randrange(-1000, 1000) for _ in range(300 * 300)]
    return x, y, n


def main():
    x, y, n = inputs()
    if sys.argv[1] == "make":
        st.write(sys.argv[2], [st.tensor("x", "f32", [999, 131], x), st.tensor("y", "f64", [1000, 70], y),
                               st.tensor("n", "i64", [300, 300], n)])
        return 0
    out = {k: t.tolist() for k, t in st.read(sys.argv[3]).tensors.items()}
    if "--drop-last-row" in sys.argv:
        x = x[:998 * 131]
    mean = math.fsum(y) / len(y)
    want = {"output_0": [f32(math.fsum(x))], "output_1": [max(x)], "output_2": [min(x)],
            "output_3": [v - mean for v in y], "output_4": [sum(n)]}
    bad = []
    for k, ref in want.items():
        got = out[k]
        tol = 0 if k == "output_4" else 1e-12 if k == "output_3" else 1e-6
        err = max(abs(g - w) / max(abs(w), 1.0) for g, w in zip(got, ref))
        if len(got) != len(ref) or err > tol:
            bad.append(f"{k}: relative error {err:.3g} > {tol:g}")
    print("split_check: " + ("; ".join(bad) if bad else "ok"))
    return 1 if bad else 0


sys.exit(main())
