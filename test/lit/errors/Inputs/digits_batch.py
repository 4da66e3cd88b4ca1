"""Writes a safetensors batch for examples/digits/digits.pt2 (x f32[64, 1, 8, 8] = 0.5, y i64[64]
= i % 10) with y[5] = BAD, stdlib only. Usage: digits_batch.py OUT BAD"""
import json
import struct
import sys

out, bad = sys.argv[1], int(sys.argv[2])
y = [i % 10 for i in range(64)]
y[5] = bad
blobs = [struct.pack("<4096f", *([0.5] * 4096)), struct.pack("<64q", *y)]
hdr = {"x": {"dtype": "F32", "shape": [64, 1, 8, 8], "data_offsets": [0, len(blobs[0])]},
       "y": {"dtype": "I64", "shape": [64], "data_offsets": [len(blobs[0]), len(blobs[0]) + len(blobs[1])]}}
h = json.dumps(hdr).encode()
h += b" " * (-len(h) % 8)
with open(out, "wb") as f:
    f.write(struct.pack("<Q", len(h)) + h + b"".join(blobs))
