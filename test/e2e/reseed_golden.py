#!/usr/bin/env python3
"""reseed_golden.py IN OUT SEED: a copy of a zoo golden whose input.rng_state is {SEED, 0}.

The control of the dropout zoo models (test/e2e/CMakeLists.txt): trained from another seed,
aotc draws other masks, and tools/check_golden.py must reject the result against the golden
made with the replayed mask of the fixture's seed. Standard library only.
"""
import json
import struct
import sys

src, dst, seed = sys.argv[1], sys.argv[2], int(sys.argv[3])
b = bytearray(open(src, "rb").read())
n = struct.unpack("<Q", b[:8])[0]
d = json.loads(b[8:8 + n])["input.rng_state"]
assert d["dtype"] == "I64" and d["shape"] == [2], d
start = 8 + n + d["data_offsets"][0]
b[start:start + 16] = struct.pack("<qq", seed, 0)
open(dst, "wb").write(bytes(b))
