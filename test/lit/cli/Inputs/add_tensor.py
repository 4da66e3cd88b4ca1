"""add_tensor.py IN OUT NAME VALUE: copies safetensors IN to OUT adding a 0-d F32
tensor NAME = VALUE. Standard library only."""
import json
import struct
import sys

src, dst, name, value = sys.argv[1], sys.argv[2], sys.argv[3], float(sys.argv[4])
data = open(src, "rb").read()
(n,) = struct.unpack("<Q", data[:8])
header = json.loads(data[8:8 + n])
body = data[8 + n:]
end = max((v["data_offsets"][1] for k, v in header.items() if k != "__metadata__"), default=0)
header[name] = {"dtype": "F32", "shape": [], "data_offsets": [end, end + 4]}
h = json.dumps(header).encode()
h += b" " * ((8 - len(h) % 8) % 8)
open(dst, "wb").write(struct.pack("<Q", len(h)) + h + body[:end] + struct.pack("<f", value))
