"""Writes a safetensors batch for examples/digits/digits.pt2 (x f32[N, 1, 8, 8] = 0.5, y i64[N]
= i % 10) with y[5] = BAD, stdlib only. Usage: digits_batch.py OUT BAD [N (default 64)]"""
import json
import struct
import sys

out, bad = sys.argv[1], int(sys.argv[2])
n = int(sys.argv[3]) if len(sys.argv) > 3 else 64
y = [i % 10 for i in range(n)]
y[5] = bad
blobs = [struct.pack(f"<{n * 64}f", *([0.5] * (n * 64))), struct.pack(f"<{n}q", *y)]
hdr = {"x": {"dtype": "F32", "shape": [n, 1, 8, 8], "data_offsets": [0, len(blobs[0])]},
       "y": {"dtype": "I64", "shape": [n], "data_offsets": [len(blobs[0]), len(blobs[0]) + len(blobs[1])]}}
h = json.dumps(hdr).encode()
h += b" " * (-len(h) % 8)
with open(out, "wb") as f:
    f.write(struct.pack("<Q", len(h)) + h + b"".join(blobs))
