#!/usr/bin/env python3
"""compare.py RESULT GOLDEN TOL RKEY=GKEY ...: for each pair, max|r - g| / max(max|g|, 1e-30)
of two F32 tensors with the same number of elements; prints one line per pair and exits 1
when any error exceeds TOL (or a key is missing). Standard library only
(python/aotc/_safetensors.py reads the files)."""
import os
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "..", "..", "python"))
from aotc import _safetensors as st  # noqa: E402


def load(path):
    f = st.read(path)
    return {k: f[k].tolist() for k in f.keys() if f[k].dtype == "f32"}


r, g, tol = load(sys.argv[1]), load(sys.argv[2]), float(sys.argv[3])
bad = 0
for pair in sys.argv[4:]:
    rk, gk = pair.split("=")
    if rk not in r or gk not in g or len(r[rk]) != len(g[gk]):
        print(f"{rk}: missing or of another size than {gk}")
        bad = 1
        continue
    den = max(max(abs(v) for v in g[gk]), 1e-30)
    err = max(abs(a - b) for a, b in zip(r[rk], g[gk])) / den
    print(f"{rk} err={err:.3g}")
    bad |= not (err <= tol)
sys.exit(bad)
