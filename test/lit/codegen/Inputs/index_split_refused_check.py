"""index_split_refused_check.py make IN | check IN OUT [--perturb]: inputs for
index_split_refused.fx.txt (seeded pseudo-random; idx in range) and the check of output_0,
where(arange(6) * 2^62 < 0, slice_scatter(a, b, 1, 2, 5), 0): the products wrap in int64 as in
torch, so only columns 2 and 3 compare true and hold b[:, 0] and b[:, 1]; every other element
is 0. A fold that computed the comparison's range without overflow checks got column 4 wrong.
Exact comparison; --perturb moves one element first (the negative control)."""
import os
import random
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "..", "..", "python"))
from aotc import _safetensors as st  # noqa: E402
from exact import bits_mismatch, f32  # noqa: E402

SHAPES = {"a": [64, 6], "b": [64, 3], "x": [64, 3], "y": [64, 10], "p": [1, 512, 8], "q": [1, 256, 8]}


def main():
    rnd = random.Random(0)
    x = {n: [f32(rnd.gauss(0, 1)) for _ in range(s[0] * s[1] * (s[2] if len(s) > 2 else 1))] for n, s in SHAPES.items()}
    if sys.argv[1] == "make":
        st.write(sys.argv[2], [st.tensor(n, "f32", SHAPES[n], x[n]) for n in SHAPES] +
                 [st.tensor("idx", "i64", [10], [9 - i for i in range(10)])])
        return 0
    wraps = [((j * 2 ** 62 + 2 ** 63) % 2 ** 64 - 2 ** 63) < 0 for j in range(6)]
    ref = [x["b"][i * 3 + j - 2] if wraps[j] else 0.0 for i in range(64) for j in range(6)]
    got = st.read(sys.argv[3]).tensors["output_0"].tolist()
    if "--perturb" in sys.argv:
        got[2] += 1.0
    bad = bits_mismatch("output_0", got, ref)
    print("index_split_refused_check: " + (bad or "ok"))
    return 1 if bad else 0


sys.exit(main())
