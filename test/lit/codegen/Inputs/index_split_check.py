"""index_split_check.py make IN | check IN OUT [--perturb]: inputs for index_split.fx.txt
(seeded pseudo-random) and the check of `aotc run`'s outputs against references computed here
element by element from slice_scatter's / select_scatter's definition (ATen's
TensorShape.cpp): every output is a copy, a product by 0.5 or a sum with 0, all exact in f32,
so the outputs must equal the references bit for bit. --perturb moves one element of each
output first: the negative control, which must fail."""
import os
import random
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "..", "..", "python"))
from aotc import _safetensors as st  # noqa: E402
from exact import bits_mismatch, f32  # noqa: E402

SHAPES = {"q": [16, 6, 8], "k": [16, 8, 6], "v": [16, 6, 8], "r": [64, 5, 7], "s": [64, 7],
          "w": [64, 9], "u": [64, 4], "y": [64, 9], "z": [2, 9]}


def numel(shape):
    n = 1
    for d in shape:
        n *= d
    return n


def inputs():
    rnd = random.Random(0)
    return {name: [f32(rnd.gauss(0, 2)) for _ in range(numel(shape))] for name, shape in SHAPES.items()}


def references(x):
    q, k, v = x["q"], x["k"], x["v"]
    qkv = []
    for b in range(16):
        for i in range(6):
            for j in range(24):
                if j < 8:
                    val = f32(q[(b * 6 + i) * 8 + j] * 0.5)
                elif j < 16:
                    val = k[(b * 8 + (j - 8)) * 6 + i]  # k.permute(0, 2, 1)[b, i, j - 8]
                else:
                    val = v[(b * 6 + i) * 8 + (j - 16)]
                qkv.append(val + 0.0)
    sel = [x["s"][b * 7 + c] if i == 3 else x["r"][(b * 5 + i) * 7 + c]
           for b in range(64) for i in range(5) for c in range(7)]
    # w[:, 1:9:2] = u: columns 1, 3, 5, 7
    stp = [x["u"][i * 4 + (j - 1) // 2] if j in (1, 3, 5, 7) else x["w"][i * 9 + j]
           for i in range(64) for j in range(9)]
    rows = [x["z"][(i - 1) * 9 + j] if 1 <= i < 3 else x["y"][i * 9 + j] for i in range(64) for j in range(9)]
    return {"output_0": qkv, "output_1": sel, "output_2": stp, "output_3": rows}


def main():
    x = inputs()
    if sys.argv[1] == "make":
        st.write(sys.argv[2], [st.tensor(n, "f32", SHAPES[n], x[n]) for n in SHAPES])
        return 0
    out = {name: t.tolist() for name, t in st.read(sys.argv[3]).tensors.items()}
    bad = []
    for name, ref in references(x).items():
        got = out[name]
        if "--perturb" in sys.argv:
            got[len(got) // 2] += 1.0
        miss = bits_mismatch(name, got, ref)
        if miss:
            bad.append(miss)
    print("index_split_check: " + ("; ".join(bad) if bad else "ok"))
    return 1 if bad else 0


sys.exit(main())
