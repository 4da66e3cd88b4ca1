"""column_scatter_check.py make IN | check IN OUT [--perturb]: inputs for column_scatter.fx.txt
(an embedding's gradient: 50 token rows of 128 columns added into 20 target rows, with repeated
targets) and the check of `aotc run`'s output against a reference computed here in f32
arithmetic, each target element summing its tokens in token order (scatter_add's order on
the CPU, which the block schedule keeps), so the output must equal it bit for bit. --perturb
moves one output element first: the negative control, which must fail."""
import os
import random
import struct
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "..", "..", "python"))
from aotc import _safetensors as st  # noqa: E402

T, D, V = 50, 128, 20


def f32(v):
    return struct.unpack("<f", struct.pack("<f", v))[0]


def inputs():
    rnd = random.Random(0)
    g = [f32(rnd.gauss(0, 1)) for _ in range(T * D)]
    idx = [rnd.randrange(V // 2) * 2 for _ in range(T)]  # even rows only: odd rows stay 0
    return g, idx


def main():
    g, idx = inputs()
    if sys.argv[1] == "make":
        st.write(sys.argv[2], [st.tensor("g", "f32", [T, D], g), st.tensor("idx", "i64", [T], idx)])
        return 0
    ref = [0.0] * (V * D)
    for t in range(T):
        for c in range(D):
            ref[idx[t] * D + c] = f32(ref[idx[t] * D + c] + g[t * D + c])
    got = st.read(sys.argv[3]).tensors["output_0"].tolist()
    if "--perturb" in sys.argv:
        got[idx[0] * D + 5] = f32(got[idx[0] * D + 5] * (1 + 2 ** -20))
    wrong = [i for i, (a, b) in enumerate(zip(got, ref)) if struct.pack("<f", a) != struct.pack("<f", b)]
    bad = len(got) != len(ref) or wrong
    print("column_scatter_check: " + (f"{len(wrong)} of {len(ref)} elements differ (first at {wrong[:1]})" if bad else "ok"))
    return 1 if bad else 0


sys.exit(main())
