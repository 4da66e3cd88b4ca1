#!/usr/bin/env python3
"""Runs two partitions of dropout.fx.txt with `aotc run` and checks them (docs/randomness.md).

Usage: dropout_check.py AOTC WORKDIR TEXT_A TEXT_B
TEXT_A and TEXT_B are --start-from=partition texts of the same program: one saves the mask, one
recomputes it. Both run on the same x and rng_state = {seed, offset}; their outputs and
gradients must be bit-identical, and equal what this script computes on its own: the mask from a
standard-library Philox 4x32-10 (Random123's known answers checked first), the loss
sum(tanh(mask * x / (1 - p))) and the gradient mask * (1 - tanh^2) / (1 - p).
Prints "ok ..." lines; exits 1 on a mismatch.
"""
import math
import os
import struct
import subprocess
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "..", "..", "python"))
from aotc import _safetensors as st  # noqa: E402

P = 0.3
SEED, OFFSET = 0x1234_5678_9ABC, 41
SHAPE = [8, 16]


def philox(c, k):
    m0, m1, w0, w1, mask = 0xD2511F53, 0xCD9E8D57, 0x9E3779B9, 0xBB67AE85, 0xFFFFFFFF
    c, k = list(c), list(k)
    for r in range(10):
        if r:
            k = [(k[0] + w0) & mask, (k[1] + w1) & mask]
        p0, p1 = m0 * c[0], m1 * c[2]
        c = [(p1 >> 32) ^ c[1] ^ k[0], p1 & mask, (p0 >> 32) ^ c[3] ^ k[1], p0 & mask]
    return c


def uniform_f32(seed, offset, i):
    w = philox([i & 0xFFFFFFFF, i >> 32, offset & 0xFFFFFFFF, offset >> 32], [seed & 0xFFFFFFFF, seed >> 32])
    return (w[0] & 0xFFFFFF) * 2.0**-24


def f32(v):
    return struct.unpack("<f", struct.pack("<f", v))[0]


def write_st(path, tensors):
    st.write(path, [st.tensor(name, {"F32": "f32", "I64": "i64"}[dt], shape, vals)
                    for name, (dt, shape, vals) in tensors.items()])


def read_st(path):
    f = st.read(path)
    return {name: f[name].tolist() for name in f.keys()}


def main():
    aotc, work, a, b = sys.argv[1:5]
    kat = philox([0x243F6A88, 0x85A308D3, 0x13198A2E, 0x03707344], [0xA4093822, 0x299F31D0])
    assert kat == [0xD16CFE09, 0x94FDCCEB, 0x5001E420, 0x24126EA1], [hex(x) for x in kat]
    n = SHAPE[0] * SHAPE[1]
    x = [f32(math.sin(0.37 * i) * 2.0) for i in range(n)]
    inputs = os.path.join(work, "in.safetensors")
    write_st(inputs, {"x": ("F32", SHAPE, x), "rng_state": ("I64", [2], [SEED, OFFSET])})
    results = []
    for text in (a, b):
        out = os.path.join(work, os.path.basename(text) + ".out.safetensors")
        subprocess.run([aotc, "run", text, "--start-from=partition", "--inputs", inputs, "--out", out], check=True)
        results.append(read_st(out))
    ok = True
    for key in ("output_0", "output_1", "grad_x"):
        same = results[0][key] == results[1][key]
        ok &= same
        print(("ok" if same else "FAIL"), key, "bit-identical between the two partitions")
    scale = f32(1.0 / (1.0 - P))
    mask = [uniform_f32(SEED, OFFSET, i) > P for i in range(n)]
    kept = sum(mask)
    loss = sum(math.tanh(x[i] * scale) for i in range(n) if mask[i]) + 0.0
    grad = [(1 - math.tanh(x[i] * scale) ** 2) * scale if mask[i] else 0.0 for i in range(n)]
    g = results[0]["grad_x"]
    loss_ok = abs(results[0]["output_0"][0] - loss) <= 1e-5 * max(1.0, abs(loss))
    zeros_ok = all((g[i] == 0.0) == (not mask[i]) for i in range(n))
    grad_ok = max(abs(g[i] - grad[i]) for i in range(n)) <= 1e-5
    state_ok = results[0]["output_1"] == [SEED, OFFSET + 1]
    for good, what in ((loss_ok, "loss equals the Philox-mask reference"),
                       (zeros_ok, f"gradient 0 exactly where dropped ({n - kept} of {n})"),
                       (grad_ok, "gradient equals mask * (1 - tanh^2) / (1 - p)"),
                       (state_ok, "rng_state advanced by one stream")):
        ok &= good
        print(("ok" if good else "FAIL"), what)
    sys.exit(0 if ok else 1)


if __name__ == "__main__":
    main()
