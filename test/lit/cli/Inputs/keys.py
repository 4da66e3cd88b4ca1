"""keys.py FILE: prints 'name DTYPE [shape]' per tensor of a safetensors file, sorted."""
import json
import struct
import sys

data = open(sys.argv[1], "rb").read()
(n,) = struct.unpack("<Q", data[:8])
header = json.loads(data[8:8 + n])
header.pop("__metadata__", None)
for k in sorted(header):
    print(k, header[k]["dtype"], "[" + ", ".join(str(d) for d in header[k]["shape"]) + "]")
