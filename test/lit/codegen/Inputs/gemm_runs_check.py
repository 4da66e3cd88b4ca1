"""gemm_runs_check.py make IN | check IN OUT [--perturb]: inputs for gemm_runs.fx.txt (two
blocked GEMMs: 1024x768x256 in 8 blocks of 128 rows; 1040x64x128 in 2 blocks of 544 rows, the
last of 496 rows a call of its own) and a check of `aotc run`'s outputs against float64 dot
products at 300 sampled elements of each (|error| <= 1e-5 * sum |a_k b_k|). The lit test also
compares the outputs at 1 and 2 threads byte for byte: one thread makes one call for all of a
GEMM's blocks, two make one each for half of them. --perturb moves one sampled element of each
output first: the negative control, which must fail. Standard library only."""
import os
import random
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "..", "..", "python"))
from aotc import _safetensors as st  # noqa: E402
from exact import f32  # noqa: E402

SHAPES = {"a": [1024, 256], "w": [768, 256], "b": [1040, 128], "v": [128, 64]}


def inputs():
    rnd = random.Random(0)
    return {k: [f32(rnd.uniform(-1, 1)) for _ in range(s[0] * s[1])] for k, s in SHAPES.items()}


def main():
    x = inputs()
    if sys.argv[1] == "make":
        st.write(sys.argv[2], [st.tensor(k, "f32", SHAPES[k], x[k]) for k in SHAPES])
        return 0
    out = st.read(sys.argv[3]).tensors
    rnd = random.Random(1)
    bad = []
    # output_0 = a @ w^T (k = 256); output_1 = b @ v (k = 128).
    cases = (("output_0", 1024, 768, 256, lambda i, k: x["a"][i * 256 + k], lambda k, j: x["w"][j * 256 + k]),
             ("output_1", 1040, 64, 128, lambda i, k: x["b"][i * 128 + k], lambda k, j: x["v"][k * 64 + j]))
    for name, m, n, kk, A, B in cases:
        got = out[name].tolist()
        if len(got) != m * n:
            bad.append(f"{name}: {len(got)} elements, want {m * n}")
            continue
        # Every row of the last block and of a block boundary is among the samples.
        rows = [rnd.randrange(m) for _ in range(296)] + [0, 543, 544, m - 1]
        for s, i in enumerate(rows):
            j = rnd.randrange(n)
            terms = [A(i, k) * B(k, j) for k in range(kk)]
            ref, scale = sum(terms), sum(abs(t) for t in terms)
            g = got[i * n + j]
            if "--perturb" in sys.argv and s == 0:
                g += 1e-3 * scale
            if abs(g - ref) > 1e-5 * scale:
                bad.append(f"{name}[{i}, {j}] = {g}, want {ref}")
                break
    print("gemm_runs_check: " + ("; ".join(bad) if bad else "ok"))
    return 1 if bad else 0


sys.exit(main())
