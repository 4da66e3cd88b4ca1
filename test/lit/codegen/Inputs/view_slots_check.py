"""view_slots_check.py make IN | check IN OUT [--perturb]: inputs (x, w, m and the seven
tangents) for view_slots.fx.txt, and the check of `aotc run`'s outputs and gradients against
references computed here. The outputs that are views of a stored value (a pointwise result, a
transposed clone, a kept-dim sum, a value also returned itself) must equal their f32 references
bit for bit: the values are stored once, in the view's slot, where the codegen used to store
them in a buffer of their own and copy them. The GEMM's output and the gradients are compared
with float64 references (relative 1e-5). --perturb moves one element of each output first: the
negative control, which must fail."""
import os
import random
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "..", "..", "python"))
from aotc import _safetensors as st  # noqa: E402
from exact import bits_mismatch, f32  # noqa: E402

B, T, D, N = 4, 6, 8, 5
OUT_SHAPES = [[B * T, D], [B * T, N], [T, B * D], [B, D], [B, 1, D], [B, D], [B, D]]


def inputs():
    rnd = random.Random(0)
    def vec(n):
        return [f32(rnd.uniform(-1, 1)) for _ in range(n)]
    x, w, m = vec(B * T * D), vec(D), vec(D * N)
    tangents = [vec(B * T * D // 1 if i != 1 else B * T * N) if i < 3 else vec(B * D) for i in range(7)]
    tangents[1] = tangents[1][:B * T * N]
    return x, w, m, tangents


def references(x, w, m, t):
    X = lambda b, s, d: x[(b * T + s) * D + d]
    o0 = [f32(f32(X(b, s, d) * w[d]) + w[d]) for b in range(B) for s in range(T) for d in range(D)]
    o1 = [sum(o0[r * D + d] * m[d * N + n] for d in range(D)) for r in range(B * T) for n in range(N)]
    o2 = [X(b, s, d) for s in range(T) for b in range(B) for d in range(D)]
    o3 = [f32(sum(X(b, s, d) for s in range(T))) for b in range(B) for d in range(D)]
    o4 = [f32(2.0 * v) for v in o3]
    # Gradients (float64): g0 = t0 + t1 m^T is the gradient reaching x * w + w.
    g0 = [t[0][r * D + d] + sum(t[1][r * N + n] * m[d * N + n] for n in range(N)) for r in range(B * T) for d in range(D)]
    gm = [sum(o0[r * D + d] * t[1][r * N + n] for r in range(B * T)) for d in range(D) for n in range(N)]
    gx = [g0[(b * T + s) * D + d] * w[d] + t[2][s * B * D + b * D + d] +
          t[3][b * D + d] + 2.0 * (t[4][b * D + d] + t[5][b * D + d] + t[6][b * D + d])
          for b in range(B) for s in range(T) for d in range(D)]
    gw = [sum(g0[(b * T + s) * D + d] * (X(b, s, d) + 1.0) for b in range(B) for s in range(T)) for d in range(D)]
    return [o0, o1, o2, o3, o4, o4, o4], {"grad_x": gx, "grad_w": gw, "grad_m": gm}


def close(name, got, ref):
    bad = [i for i, (g, r) in enumerate(zip(got, ref)) if abs(g - r) > 1e-5 * max(1.0, abs(r))]
    if len(got) != len(ref) or bad:
        return f"{name}: {len(bad)} of {len(ref)} elements off (first at {bad[:1]}), {len(got)} elements"
    return None


def main():
    x, w, m, t = inputs()
    if sys.argv[1] == "make":
        ts = [st.tensor("x", "f32", [B, T, D], x), st.tensor("w", "f32", [D], w), st.tensor("m", "f32", [D, N], m)]
        ts += [st.tensor(f"tangent_{i}", "f32", OUT_SHAPES[i], t[i]) for i in range(7)]
        st.write(sys.argv[2], ts)
        return 0
    outs, grads = references(x, w, m, t)
    got = st.read(sys.argv[3]).tensors
    perturb = "--perturb" in sys.argv
    bad = []
    for i, ref in enumerate(outs):
        g = got[f"output_{i}"].tolist()
        if perturb:
            g[3] = f32(g[3] * (1 + 2 ** -20)) + 1e-30
        bad.append(close(f"output_{i}", g, ref) if i == 1 else bits_mismatch(f"output_{i}", g, ref))
    for name, ref in grads.items():
        g = got[name].tolist()
        if perturb:
            g[3] += 1e-3
        bad.append(close(name, g, ref))
    bad = [b for b in bad if b]
    print("view_slots_check: " + ("; ".join(bad) if bad else "ok"))
    return 1 if bad else 0


sys.exit(main())
