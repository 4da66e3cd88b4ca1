"""pointwise_join_check.py make IN | check IN OUT [--perturb]: inputs for pointwise_join.fx.txt
and the check of `aotc run`'s outputs against float64 references (|error| <= 2e-6 * (1 + |ref|):
f32 tanh is a rational approximation within 3e-7, docs/stage-codegen.md "Vector math").
tanh(y) feeds 1 + tanh(y) and tanh(y)^2, which meet in one sum: it is computed inside that
sum's kernel, not stored; tanh(mm) feeds two outputs and is stored (merged into the same
kernel). --perturb moves one element of each output first: the negative control, which must
fail. Standard library only."""
import math
import os
import random
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "..", "..", "python"))
from aotc import _safetensors as st  # noqa: E402
from exact import f32  # noqa: E402

R, K, C = 16, 64, 128


def inputs():
    rnd = random.Random(0)
    return {"x": [f32(rnd.uniform(-1, 1)) for _ in range(R * K)], "y": [f32(rnd.uniform(-3, 3)) for _ in range(R * C)],
            "w": [f32(rnd.uniform(-0.3, 0.3)) for _ in range(K * C)]}


def main():
    v = inputs()
    if sys.argv[1] == "make":
        st.write(sys.argv[2], [st.tensor("x", "f32", [R, K], v["x"]), st.tensor("y", "f32", [R, C], v["y"]),
                               st.tensor("w", "f32", [K, C], v["w"])])
        return 0
    x, y, w = v["x"], v["y"], v["w"]
    mm = [sum(x[i * K + k] * w[k * C + j] for k in range(K)) for i in range(R) for j in range(C)]
    t = [math.tanh(a) for a in y]
    refs = [[(1 + a) + (1 - a * a) * m for a, m in zip(t, mm)],
            [1 + math.tanh(m) for m in mm],
            [math.tanh(m) * b for m, b in zip(mm, y)]]
    out = st.read(sys.argv[3]).tensors
    bad = []
    for i, ref in enumerate(refs):
        got = out[f"output_{i}"].tolist()
        if "--perturb" in sys.argv:
            got[7] += 1e-4
        off = [j for j, (g, r) in enumerate(zip(got, ref)) if abs(g - r) > 2e-6 * (1 + abs(r))]
        if len(got) != len(ref) or off:
            bad.append(f"output_{i}: {len(off)} of {len(ref)} elements off (first at {off[:1]})")
    print("pointwise_join_check: " + ("; ".join(bad) if bad else "ok"))
    return 1 if bad else 0


sys.exit(main())
