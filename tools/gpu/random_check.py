#!/usr/bin/env python3
"""The CUDA target's random bits against the CPU target's (scripts/gpu-check.sh, docs/cuda.md).

tools/gpu/models/random_check.fx.txt draws dropout (p = 0.3, then tanh and a sum, so the
backward runs), rand_like and bernoulli.p from one rng_state. Both targets compute every
element from include/aotc/Philox.h's definition, so the masks, the uniforms and the
bernoulli draws must be bit-equal on the two targets, and the rest equal to f32 rounding.
It also takes a softmax over rows of 9001 (a block-per-row kernel on the GPU whose input row
is kept in shared memory between its three phases; its backward caches one of two rows), with
a non-uniform cotangent, checked to f32 rounding as well.

  random_check.py inputs OUT.safetensors
      x, w, y (deterministic values in [-1, 1)), tangent_5 (softmax's cotangent), rng_state = {seed, offset} with both high
      words non-zero (seed 0x0123456789ABCDEF, offset 2^32 + 5), so all four counter
      words and both key words are exercised.
  random_check.py compare CPU.safetensors GPU.safetensors
      CPU: `aotc run random_check.fx.txt --inputs IN --out CPU` (made here by prepare);
      GPU: `train_cuda_random_check run IN GPU` (made there). Exit 1 when a bit-equal
      tensor differs in any bit, or another differs by more than 1e-5 relative.

Standard library only (the device machine's python3 and this one's both work).
"""
import importlib.util
import os
import struct
import sys

_here = os.path.dirname(os.path.abspath(__file__))
_spec = importlib.util.spec_from_file_location("_aotc_safetensors",
                                               os.path.join(_here, "..", "..", "python", "aotc", "_safetensors.py"))
_st = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(_st)

ROWS, COLS = 333, 1031
YROWS, YCOLS = 5, 9001
SEED, OFFSET = 0x0123456789ABCDEF, (1 << 32) + 5
# output_<i> of the graph: 0 sum of tanh(dropout), 1 dropout, 2 the mask, 3 rand_like, 4 bernoulli.
BIT_EQUAL = {"output_2": "dropout mask", "output_3": "rand_like", "output_4": "bernoulli.p"}
CLOSE = {"output_0": "sum(tanh(dropout))", "output_1": "dropout", "grad_x": "grad x", "grad_w": "grad w",
         "output_5": "softmax (rows of 9001)", "grad_y": "grad y (softmax backward)"}


def value(k, salt):
    h = (k * 2654435761 + salt * 40503) & 0xFFFFFFFF
    return (h >> 8) / 8388608.0 - 1.0


def make_inputs(path):
    x = [value(k, 1) for k in range(ROWS * COLS)]
    w = [2.0 * value(k, 2) for k in range(COLS)]
    y = [value(k, 3) for k in range(YROWS * YCOLS)]
    ty = [value(k, 4) for k in range(YROWS * YCOLS)]
    rng = [SEED - (1 << 64) if SEED >= 1 << 63 else SEED, OFFSET]
    _st.write(path, [_st.tensor("x", "f32", [ROWS, COLS], x), _st.tensor("w", "f32", [COLS], w),
                     _st.tensor("y", "f32", [YROWS, YCOLS], y), _st.tensor("rng_state", "i64", [2], rng),
                     _st.tensor("tangent_5", "f32", [YROWS, YCOLS], ty)])


def floats(t):
    fmt = {"f32": "f", "f64": "d"}[t.dtype]
    return struct.unpack("<%d%s" % (len(t.data) // struct.calcsize(fmt), fmt), t.data)


def against_numpy(cpu):
    """The CPU's mask and rand_like against tools/export/philox.py (numpy; the device's python3
    has it, this machine's may not): streams 0 (dropout) and 1 (rand_like) of rng_state."""
    try:
        import numpy as np
        spec = importlib.util.spec_from_file_location("_philox", os.path.join(_here, "..", "export", "philox.py"))
        ph = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(ph)
    except ImportError:
        print("numpy reference (tools/export/philox.py): skipped, no numpy")
        return []
    u0 = ph.uniform(SEED, OFFSET, [ROWS, COLS])
    u1 = ph.uniform(SEED, OFFSET + 1, [ROWS, COLS])
    mask = np.frombuffer(cpu["output_2"].data, dtype=np.uint8).reshape(ROWS, COLS) != 0
    rand = np.frombuffer(cpu["output_3"].data, dtype=np.float32).reshape(ROWS, COLS)
    d_mask = int((mask != (u0 > 0.3)).sum())
    d_rand = int((rand.view(np.uint32) != u1.astype(np.float32).view(np.uint32)).sum())
    print(f"numpy reference (tools/export/philox.py): mask {d_mask} differ, rand_like {d_rand} differ")
    return [f"numpy reference: mask {d_mask}, rand_like {d_rand} elements differ"] if d_mask or d_rand else []


def compare(cpu_path, gpu_path):
    cpu, gpu = _st.read(cpu_path).tensors, _st.read(gpu_path).tensors
    bad = []
    for key, what in BIT_EQUAL.items():
        a, b = cpu.get(key), gpu.get(key)
        if a is None or b is None:
            bad.append(f"{key} ({what}) missing")
            continue
        diff = sum(1 for p, q in zip(a.data, b.data) if p != q) + abs(len(a.data) - len(b.data))
        ones = sum(1 for p in a.data if p) if a.dtype == "bool" else None
        print(f"{what}: {len(a.data)} bytes, {diff} differ" + (f" (kept {ones})" if ones is not None else ""))
        if diff:
            bad.append(f"{what}: {diff} bytes differ")
    for key, what in CLOSE.items():
        a, b = cpu.get(key), gpu.get(key)
        if a is None or b is None:
            bad.append(f"{key} ({what}) missing")
            continue
        x, y = floats(a), floats(b)
        num = max((abs(p - q) for p, q in zip(x, y)), default=0.0)
        den = max((abs(p) for p in x), default=0.0) or 1.0
        rel = num / den if num == num else float("inf")
        same = a.data == b.data
        print(f"{what}: max |gpu - cpu| / max |cpu| = {rel:.3g}" + (" (bit-equal)" if same else ""))
        if not rel <= 1e-5:
            bad.append(f"{what}: relative error {rel:.3g} > 1e-5")
    bad += against_numpy(cpu)
    for b in bad:
        print(f"random_check: FAILED: {b}")
    return 1 if bad else 0


if __name__ == "__main__":
    if len(sys.argv) == 3 and sys.argv[1] == "inputs":
        make_inputs(sys.argv[2])
        sys.exit(0)
    if len(sys.argv) == 4 and sys.argv[1] == "compare":
        sys.exit(compare(sys.argv[2], sys.argv[3]))
    print(__doc__, file=sys.stderr)
    sys.exit(2)
