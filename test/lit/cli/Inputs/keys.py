"""keys.py FILE: prints 'name DTYPE [shape]' per tensor of a safetensors file, sorted
(python/aotc/_safetensors.py reads it)."""
import os
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "..", "..", "python"))
from aotc import _safetensors as st  # noqa: E402

f = st.read(sys.argv[1])
for k in sorted(f.keys()):
    print(k, st._ST_NAME[f[k].dtype], "[" + ", ".join(str(d) for d in f[k].shape) + "]")
