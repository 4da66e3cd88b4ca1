#!/usr/bin/env python3
"""Stdlib helper for the check_golden lit tests: makes damaged copies of safetensors files.
It spells the format itself on purpose: most of its outputs are malformed (a header length, a
shape or a dtype that lies), which the one writer (python/aotc/_safetensors.py) cannot make.

  st.py perturb IN OUT KEY REL [INDEX]   T[INDEX] += REL * max|T|   (INDEX default 0)
  st.py nan IN OUT KEY [INDEX]           T[INDEX] = NaN
  st.py drop IN OUT KEY                  remove tensor KEY
  st.py rename IN OUT FROM TO            keys FROM<x> -> TO<x> (prefix rename)
  st.py reshape IN OUT KEY D0,D1,..      header shape of KEY changed, data kept (malformed)
  st.py dtype IN OUT KEY DTYPE           header dtype of KEY changed, data kept
  st.py hlen IN OUT N                    header-length field set to N
  st.py truncate IN OUT NBYTES           keep the first NBYTES bytes
  st.py expect-exit CODE CMD...          run CMD (output passed through); exit 0 iff it exits CODE
"""
import json
import struct
import subprocess
import sys


def load(path):
    data = open(path, "rb").read()
    (n,) = struct.unpack("<Q", data[:8])
    return json.loads(data[8:8 + n]), data[8 + n:]


def save(path, header, body):
    h = json.dumps(header, separators=(",", ":")).encode()
    h += b" " * (-len(h) % 8)
    open(path, "wb").write(struct.pack("<Q", len(h)) + h + body)


def floats(header, body, key):
    e = header[key]
    assert e["dtype"] == "F32", e
    b, end = e["data_offsets"]
    return b, list(struct.unpack(f"<{(end - b) // 4}f", body[b:end]))


def main(a):
    cmd = a[0]
    if cmd == "expect-exit":
        rc = subprocess.call(a[2:])
        if rc != int(a[1]):
            print(f"expect-exit: expected exit {a[1]}, got {rc}", file=sys.stderr)
            return 1
        return 0
    src, dst = a[1], a[2]
    if cmd == "truncate":
        open(dst, "wb").write(open(src, "rb").read()[:int(a[3])])
        return 0
    header, body = load(src)
    body = bytearray(body)
    if cmd in ("perturb", "nan"):
        key = a[3]
        b, vals = floats(header, body, key)
        if cmd == "perturb":
            i = int(a[5]) if len(a) > 5 else 0
            vals[i] += float(a[4]) * max(abs(v) for v in vals)
        else:
            i = int(a[4]) if len(a) > 4 else 0
            vals[i] = float("nan")
        struct.pack_into("<f", body, b + 4 * i, vals[i])
    elif cmd == "drop":  # a valid file without the tensor: the others' bytes packed again
        del header[a[3]]
        new, pos = bytearray(), 0
        for k, e in sorted(((k, e) for k, e in header.items() if k != "__metadata__"),
                           key=lambda kv: kv[1]["data_offsets"][0]):
            b0, b1 = e["data_offsets"]
            new += body[b0:b1]
            e["data_offsets"] = [pos, pos + b1 - b0]
            pos += b1 - b0
        body = new
    elif cmd == "rename":
        header = {(a[4] + k[len(a[3]):] if k.startswith(a[3]) else k): v for k, v in header.items()}
    elif cmd == "reshape":
        header[a[3]]["shape"] = [int(d) for d in a[4].split(",")]
    elif cmd == "dtype":
        header[a[3]]["dtype"] = a[4]
    elif cmd == "hlen":
        data = open(src, "rb").read()
        open(dst, "wb").write(struct.pack("<Q", int(a[3])) + data[8:])
        return 0
    else:
        print(f"st.py: unknown command {cmd}", file=sys.stderr)
        return 2
    save(dst, header, bytes(body))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
