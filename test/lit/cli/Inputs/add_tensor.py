"""add_tensor.py IN OUT NAME VALUE: copies safetensors IN to OUT adding a 0-d F32
tensor NAME = VALUE (python/aotc/_safetensors.py reads and writes)."""
import os
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "..", "..", "python"))
from aotc import _safetensors as st  # noqa: E402

src, dst, name, value = sys.argv[1], sys.argv[2], sys.argv[3], float(sys.argv[4])
f = st.read(src)
st.write(dst, [*f.tensors.values(), st.tensor(name, "f32", [], [value])], f.metadata)
