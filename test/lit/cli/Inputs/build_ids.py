#!/usr/bin/env python3
"""build_ids.py OBJ HDR WEIGHTS: prints `build id <id> in object, header and weights` when
the header's <name>_BUILD_ID, the weights' "aotc.build_id" metadata and a 32-hex string in
the object agree; exit 1 otherwise (python/aotc/_safetensors.py reads the weights)."""
import os
import re
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "..", "..", "python"))
from aotc import _safetensors as st  # noqa: E402

obj, hdr = (open(p, "rb").read() for p in sys.argv[1:3])
m = re.search(rb'_BUILD_ID "([0-9a-f]{32})"', hdr)
if not m:
    sys.exit("no <name>_BUILD_ID in the header")
hid = m.group(1)
wid = st.read(sys.argv[3]).metadata.get("aotc.build_id", "").encode()
if wid != hid:
    sys.exit(f"weights build id {wid!r} != header {hid!r}")
if hid + b"\0" not in obj:
    sys.exit("the object does not hold the header's build id")
print(f"build id {hid.decode()} in object, header and weights")
