"""ctest kernels.conv_in_torch_process (label torch): libaotc_kernels' f32 convolutions in a
process that imported torch, where libdnnl's OpenMP calls bind to torch's libgomp
(docs/python.md "Threads"). Each role of an n=8 c=k=64 16x16 3x3 convolution (8 batch chunks)
must give the same bytes as in a process without torch at 1 thread, and start no more than
one thread (libomp's worker) at 2: oneDNN runs inline in aotc's chunks in both runtimes
(ConvDnnl.c setThreads). Before that, torch's process gave other bytes for the forward and
started three threads (a libgomp pool under each libomp worker).

  conv_in_torch_process.py LIBAOTC_KERNELS        (runs itself in child processes)
"""
import ctypes
import hashlib
import os
import subprocess
import sys


def child(lib, with_torch):
    if with_torch:
        import torch
        torch.set_num_threads(int(os.environ["OMP_NUM_THREADS"]))
    import numpy as np

    class Desc(ctypes.Structure):
        _fields_ = [(n, ctypes.c_int32) for n in ("dtype", "role")] + [(n, ctypes.c_int64) for n in (
            "n", "c", "k", "groups", "h", "w", "oh", "ow", "kh", "kw", "stride_h", "stride_w", "pad_h",
            "pad_w", "dil_h", "dil_w")]
    k = ctypes.CDLL(lib)
    k.aotc_kernels_state_create.restype = ctypes.c_void_p
    k.aotc_conv.argtypes = [ctypes.c_void_p, ctypes.POINTER(Desc)] + [ctypes.c_void_p] * 4
    s = k.aotc_kernels_state_create()
    out = []
    for role in (0, 1, 2):  # AOTC_CONV_FORWARD, INPUT_GRAD, WEIGHT_GRAD; dtype 0 = AOTC_F32
        d = Desc(0, role, 8, 64, 64, 1, 16, 16, 16, 16, 3, 3, 1, 1, 1, 1, 1, 1)
        rng = np.random.default_rng(role)
        x = rng.standard_normal((8, 64, 16, 16), dtype=np.float32)
        w = rng.standard_normal((64, 64, 3, 3), dtype=np.float32)
        y = rng.standard_normal((8, 64, 16, 16), dtype=np.float32)
        a, b = {0: (x, w), 1: (y, w), 2: (y, x)}[role]
        c = np.zeros((8, 64, 16, 16) if role < 2 else (64, 64, 3, 3), np.float32)
        before = len(os.listdir("/proc/self/task"))
        rc = k.aotc_conv(s, ctypes.byref(d), a.ctypes.data, b.ctypes.data, c.ctypes.data, None)
        if rc != 0:
            raise SystemExit(f"aotc_conv role {role} returned {rc}")
        out.append((hashlib.sha1(c.tobytes()).hexdigest()[:16], len(os.listdir("/proc/self/task")) - before))
    print(repr(out))


def run(lib, with_torch, threads):
    env = dict(os.environ, OMP_NUM_THREADS=str(threads))
    r = subprocess.run([sys.executable, __file__, "--child", lib, "torch" if with_torch else "plain"],
                       env=env, capture_output=True, text=True, timeout=300)
    if r.returncode != 0:
        raise SystemExit(f"child failed ({r.returncode}): {r.stdout}{r.stderr}")
    return eval(r.stdout.strip().splitlines()[-1])


def main():
    if sys.argv[1] == "--child":
        child(sys.argv[2], sys.argv[3] == "torch")
        return
    lib = sys.argv[1]
    want = run(lib, False, 1)
    bad = 0
    for threads in (1, 2):
        got = run(lib, True, threads)
        for role, ((h, started), (hw, _)) in enumerate(zip(got, want)):
            ok = h == hw and started <= 1
            bad += not ok
            print(f"torch process, {threads} thread(s), role {role}: hash {h} (without torch at 1 thread: {hw}), "
                  f"{started} thread(s) started: {'ok' if ok else 'FAIL'}")
    sys.exit(1 if bad else 0)


if __name__ == "__main__":
    main()
