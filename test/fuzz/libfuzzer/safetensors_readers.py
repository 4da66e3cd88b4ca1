#!/usr/bin/env python3
"""The two safetensors readers on the same inputs (docs/fuzzing.md).

aotc has one C++ reader (rt::parseSafetensors, runtime/src/Safetensors.cpp) and one Python
reader (python/aotc/_safetensors.py). This script runs both on every file of the given
folders (the fuzz_safetensors corpus and regressions): the C++ verdicts come from the
fuzz_safetensors harness with AOTC_FUZZ_SAFETENSORS_DUMP set. The readers agree on a file
when both reject it, or both accept it with the same tensors (name, dtype, shape, bytes) and
the same metadata. Prints each disagreement; exit status 1 when there is one.

Usage: safetensors_readers.py --harness BIN --python-dir DIR FOLDER...
"""
import argparse
import json
import os
import subprocess
import sys
import tempfile

DTYPE_NAMES = {"f32": "F32", "f64": "F64", "i64": "I64", "bool": "BOOL", "i32": "I32", "u8": "U8"}


def fnv(data):
    h = 1469598103934665603
    for b in data:
        h = ((h ^ b) * 1099511628211) & 0xFFFFFFFFFFFFFFFF
    return str(h)


def python_verdict(st, data):
    try:
        f = st.parse(data, "fuzz.safetensors")
    except st.SafetensorsError:
        return {"ok": False}
    except Exception as e:  # the reader must reject with SafetensorsError, never crash
        return {"ok": "crash", "error": f"{type(e).__name__}: {e}"}
    tensors = sorted([name, DTYPE_NAMES[t.dtype], list(t.shape), fnv(t.data)] for name, t in f.tensors.items())
    return {"ok": True, "tensors": tensors, "metadata": dict(f.metadata)}


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--harness", required=True)
    ap.add_argument("--python-dir", required=True)
    ap.add_argument("folders", nargs="+")
    a = ap.parse_args()
    sys.path.insert(0, a.python_dir)
    from aotc import _safetensors as st  # noqa: E402

    files = sorted(os.path.join(d, f) for d in a.folders if os.path.isdir(d) for f in os.listdir(d))
    with tempfile.TemporaryDirectory() as tmp:
        dump = os.path.join(tmp, "cpp.jsonl")
        env = dict(os.environ, AOTC_FUZZ_SAFETENSORS_DUMP=dump)
        subprocess.run([a.harness, *files], env=env, check=True, stdout=subprocess.DEVNULL,
                       stderr=subprocess.DEVNULL)
        cpp = {}
        with open(dump, encoding="utf-8") as f:
            for line in f:
                j = json.loads(line)
                if j["ok"]:
                    j["tensors"] = sorted(j["tensors"])
                cpp[j.pop("input")] = j
    bad = 0
    for path in files:
        with open(path, "rb") as f:
            data = f.read()
        c, p = cpp.get(fnv(data)), python_verdict(st, data)
        if c is None:
            print(f"{path}: the C++ reader did not run on it")
            bad += 1
        elif c != p:
            print(f"{path}: C++ {json.dumps(c)[:300]}\n    Python {json.dumps(p)[:300]}")
            bad += 1
    print(f"safetensors readers: {len(files)} files, {bad} disagreements")
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
