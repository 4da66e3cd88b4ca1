#!/usr/bin/env python3
"""cmp_but_build_id.py A.o B.o A.h B.h: the two compiles' objects and headers are
byte-identical once each one's build id (from its header's `<name>_BUILD_ID "..."`) is
replaced by the same placeholder. Prints both ids; exit 0 when equal, 1 otherwise."""
import re
import sys


def build_id(header):
    m = re.search(rb'_BUILD_ID "([0-9a-f]{32})"', header)
    if not m:
        sys.exit(f"no build id in the header")
    return m.group(1)


ao, bo, ah, bh = (open(p, "rb").read() for p in sys.argv[1:5])
ia, ib = build_id(ah), build_id(bh)
print("build ids:", ia.decode(), ib.decode())
z = b"X" * 32
ok = ao.replace(ia, z) == bo.replace(ib, z) and ah.replace(ia, z) == bh.replace(ib, z)
print("equal but the build id" if ok else "differ beyond the build id")
sys.exit(0 if ok else 1)
