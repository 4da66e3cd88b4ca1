"""column_scatter_check.py make IN | check IN OUT [--perturb]: inputs for column_scatter.fx.txt
(an embedding's gradient: 300 token rows of 128 columns added into 20 target rows, with
repeated targets; and a scatter (last writer wins) with a target row per element) and the check
of `aotc run`'s outputs against references computed here, each target element taking its
tokens in token order (f32 sums for scatter_add; the last token for scatter): the CPU's order,
which the block schedule keeps, so the outputs must equal them bit for bit. --perturb moves
one element of each output first: the negative control, which must fail."""
import os
import random
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "..", "..", "python"))
from aotc import _safetensors as st  # noqa: E402
from exact import bits_mismatch, f32  # noqa: E402

T, D, V = 300, 128, 20


def inputs():
    rnd = random.Random(0)
    g = [f32(rnd.gauss(0, 1)) for _ in range(T * D)]
    idx = [rnd.randrange(V // 2) * 2 for _ in range(T)]  # even rows only: odd rows stay 0
    sidx = [rnd.randrange(V) for _ in range(T * D)]
    return g, idx, sidx


def main():
    g, idx, sidx = inputs()
    if sys.argv[1] == "make":
        st.write(sys.argv[2], [st.tensor("g", "f32", [T, D], g), st.tensor("idx", "i64", [T], idx),
                               st.tensor("sidx", "i64", [T, D], sidx)])
        return 0
    added, last = [0.0] * (V * D), [0.0] * (V * D)
    for t in range(T):
        for c in range(D):
            added[idx[t] * D + c] = f32(added[idx[t] * D + c] + g[t * D + c])
            last[sidx[t * D + c] * D + c] = g[t * D + c]
    out = st.read(sys.argv[3]).tensors
    bad = []
    for name, ref in (("output_0", added), ("output_1", last)):
        got = out[name].tolist()
        if "--perturb" in sys.argv:
            got[idx[0] * D + 5] = f32(got[idx[0] * D + 5] * (1 + 2 ** -20)) + 1e-30
        miss = bits_mismatch(name, got, ref)
        if miss:
            bad.append(miss)
    print("column_scatter_check: " + ("; ".join(bad) if bad else "ok"))
    return 1 if bad else 0


sys.exit(main())
