#!/usr/bin/env python3
"""reseed_golden.py IN OUT SEED: a copy of a zoo golden whose input.rng_state is {SEED, 0}.

The control of the dropout zoo models (test/e2e/CMakeLists.txt): trained from another seed,
aotc draws other masks, and tools/check_golden.py must reject the result against the golden
made with the replayed mask of the fixture's seed. Standard library only
(python/aotc/_safetensors.py reads and writes).
"""
import os
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "python"))
from aotc import _safetensors as st  # noqa: E402

src, dst, seed = sys.argv[1], sys.argv[2], int(sys.argv[3])
f = st.read(src)
d = f["input.rng_state"]
assert d.dtype == "i64" and d.shape == (2,), d
f.tensors["input.rng_state"] = st.tensor("input.rng_state", "i64", [2], [seed, 0])
st.write(dst, f.tensors, f.metadata)
