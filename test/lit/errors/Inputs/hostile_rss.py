#!/usr/bin/env python3
"""hostile_rss.py --aotc AOTC --work DIR --limit-mb N: hostile inputs that declare far
more data than they hold; each must be a user error (exit 1, `error:`) whose process's
peak RSS stays under N MiB. Prints `ok <case> exit=1 rss=<MiB>` per case (`FAIL ...` and
exit 1 otherwise). Standard library only; it spells the safetensors format itself on purpose:
its files lie about their sizes, which the one writer (python/aotc/_safetensors.py) cannot make."""
import argparse
import json
import os
import struct
import subprocess
import sys
import zipfile

ap = argparse.ArgumentParser()
ap.add_argument("--aotc", required=True)
ap.add_argument("--work", required=True)
ap.add_argument("--src-root", required=True)
ap.add_argument("--limit-mb", type=float, required=True)
a = ap.parse_args()
w = a.work


def write(name, data):
    p = os.path.join(w, name)
    with open(p, "wb" if isinstance(data, bytes) else "w") as f:
        f.write(data)
    return p


def safetensors(header):
    h = json.dumps(header).encode()
    h += b" " * (-len(h) % 8)
    return struct.pack("<Q", len(h)) + h


cases = []
# 1. FX text, a few dozen bytes, declaring a 10^12-element input.
fx = write("huge.fx.txt", 'class M(torch.nn.Module):\n    def forward(self, x: "f32[1000000000000]"):\n'
           '        relu: "f32[1000000000000]" = torch.ops.aten.relu.default(x)\n        return (relu,)\n')
cases.append(("fx_1e12_elements", [a.aotc, fx, "-o", os.path.join(w, "fx.o")]))
# 2. A shape whose element count overflows int64.
fx2 = write("overflow.fx.txt", 'class M(torch.nn.Module):\n    def forward(self, x: "f32[4294967296, 4294967296]"):\n'
            '        relu: "f32[4294967296, 4294967296]" = torch.ops.aten.relu.default(x)\n        return (relu,)\n')
cases.append(("fx_numel_overflow", [a.aotc, fx2, "--emit=capture"]))
# 3. `aotc run --inputs` with a safetensors header claiming a 10^12-element tensor in 100 bytes.
small = write("small.fx.txt", 'class M(torch.nn.Module):\n    def forward(self, x: "f32[4]"):\n'
              '        relu: "f32[4]" = torch.ops.aten.relu.default(x)\n        return (relu,)\n')
st = write("huge.safetensors", safetensors({"x": {"dtype": "F32", "shape": [1000000000000],
                                                 "data_offsets": [0, 4000000000000]}}) + b"\0" * 16)
cases.append(("safetensors_1e12_elements", [a.aotc, "run", small, "--inputs", st, "--out",
                                            os.path.join(w, "out.safetensors")]))
# 4. A .pt2 whose model.json member declares 4 GiB in its zip headers but holds a few bytes.
src = os.path.join(a.src_root, "examples", "mlp", "mlp.pt2")
zin = zipfile.ZipFile(src)
pt2 = os.path.join(w, "liar.pt2")
with zipfile.ZipFile(pt2, "w", zipfile.ZIP_STORED) as zout:
    for info in zin.infolist():
        zout.writestr(info.filename, zin.read(info.filename))
raw = bytearray(open(pt2, "rb").read())
# Patch every "uncompressed size" of the model.json entry (local header offset 22, central 24).
name = next(i.filename for i in zin.infolist() if i.filename.endswith("models/model.json")).encode()
pos = 0
while True:
    pos = raw.find(name, pos)
    if pos < 0:
        break
    if raw[pos - 30:pos - 26] == b"PK\x03\x04":
        struct.pack_into("<I", raw, pos - 30 + 22, 0xFFFFFFF0)
    elif raw[pos - 46:pos - 42] == b"PK\x01\x02":
        struct.pack_into("<I", raw, pos - 46 + 24, 0xFFFFFFF0)
    pos += 1
open(pt2, "wb").write(bytes(raw))
cases.append(("pt2_member_claims_4GiB", [a.aotc, pt2, "--emit=capture"]))
# 5. A JSON program whose input claims 2^40 elements (--max-tensor-bytes).
doc = json.loads(zin.read(name.decode()))
for v in doc["graph_module"]["graph"]["tensor_values"].values():
    v["sizes"] = [{"as_int": 1 << 20}, {"as_int": 1 << 20}]
    break
js = write("huge.json", json.dumps(doc))
cases.append(("json_2e40_elements", [a.aotc, js, "--emit=capture"]))

failed = False
for name, cmd in cases:
    with open(os.path.join(w, name + ".err"), "w") as err:
        p = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=err)
        _, status, ru = os.wait4(p.pid, 0)
    rc = os.waitstatus_to_exitcode(status)
    rss = ru.ru_maxrss / 1024.0  # KiB on Linux
    msg = open(os.path.join(w, name + ".err")).read()
    ok = rc == 1 and "error:" in msg and rss < a.limit_mb
    print(f"{'ok' if ok else 'FAIL'} {name} exit={rc} rss={'%.0f' % rss if ok else '%.1f' % rss}"
          + ("" if ok else f" MiB: {msg.strip()[:300]}"))
    failed |= not ok
sys.exit(1 if failed else 0)
