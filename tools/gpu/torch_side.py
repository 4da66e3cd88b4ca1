"""The PyTorch side of scripts/gpu-check.sh on the device machine (docs/cuda.md).

  torch_side.py check-probe NAME ROWS_BIN
      Rebuilds the probe's inputs on the GPU (u(k) of tools/gpu/gpu_common.h), computes the
      probe with torch, and compares output rows 0, 1, R/2 and R-1 with ROWS_BIN (raw f32 from
      probe_cuda): max|aotc - torch| / max(1, max|torch|) <= 1e-5. Exit 0 / 1.
  torch_side.py steps [--budget SECONDS]
      Median CUDA-event time of one training step (zero_grad, forward, backward, SGD lr 0.1) for
      eager, torch.compile and torch.compile(mode="reduce-overhead") on MLP (N=64), LN-GELU
      (N=32, D=64, H=128) and LN-GELU (N=8192, D=1024, H=4096); TF32 off; kernel launches per
      step from torch.profiler. One JSON line per (model, system). Stops starting new cases
      when the budget (default 140 s) is spent and says so.

Needs torch with CUDA (the device has torch 2.11); the models come from tools/export/models.py.
"""
import json
import os
import sys
import time

import torch

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "export"))

ROWS, COLS = 16384, 8192


def uniform(numel, input_index, device):
    """u(k) = ((k * 2654435761 + (i + 1) * 40503) mod 2^32 >> 8) / 2^23 - 1, exactly as in C++."""
    k = torch.arange(numel, dtype=torch.int64, device=device)
    h = (k * 2654435761 + (input_index + 1) * 40503) & 0xFFFFFFFF
    return ((h >> 8).to(torch.float64) / 8388608.0 - 1.0).to(torch.float32)


def check_probe(name, rows_bin):
    dev = torch.device("cuda")
    if name == "probe_chain":
        a, b, c = (uniform(ROWS * COLS, i, dev).view(ROWS, COLS) for i in range(3))
        ref = torch.relu(a * b + c)
    elif name == "probe_ln_gelu":
        x = uniform(ROWS * COLS, 0, dev).view(ROWS, COLS)
        w, bias = uniform(COLS, 1, dev), uniform(COLS, 2, dev)
        ref = torch.nn.functional.gelu(torch.nn.functional.layer_norm(x, [COLS], w, bias, 1e-5))
    else:
        print(f"torch_side: unknown probe {name}")
        return 1
    got = torch.frombuffer(bytearray(open(rows_bin, "rb").read()), dtype=torch.float32).view(4, COLS).to(dev)
    want = ref[[0, 1, ROWS // 2, ROWS - 1]]
    err = ((got - want).abs().max() / max(1.0, want.abs().max().item())).item()
    ok = err <= 1e-5
    print(json.dumps({"probe": name, "max_rel_err_vs_torch": err, "ok": ok}))
    return 0 if ok else 1


def make_case(model, n, d, h, dev):
    import models  # tools/export/models.py

    torch.manual_seed(0)
    if model == "mlp":
        m = models.MLP().to(dev)
        x = torch.randn(n, 784, device=dev)
        y = torch.randint(0, 10, (n,), device=dev)
    else:
        m = models.LnGelu(d, h).to(dev)
        x = torch.randn(n, d, device=dev)
        y = torch.randn(n, h, device=dev)
    return m, x, y


def time_step(step, iters, warmup):
    for _ in range(warmup):
        step()
    torch.cuda.synchronize()
    a, b = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    ms = []
    for _ in range(iters):
        a.record()
        step()
        b.record()
        b.synchronize()
        ms.append(a.elapsed_time(b))
    ms.sort()
    return ms[len(ms) // 2]


def launches(step):
    try:
        from torch.profiler import ProfilerActivity, profile

        with profile(activities=[ProfilerActivity.CUDA]) as prof:
            step()
            torch.cuda.synchronize()
        return sum(1 for e in prof.events() if e.device_type == torch.autograd.DeviceType.CUDA)
    except Exception:  # the profiler is optional here
        return None


def steps(budget):
    torch.backends.cuda.matmul.allow_tf32 = False
    torch.backends.cudnn.allow_tf32 = False
    dev = torch.device("cuda")
    start = time.time()
    cases = [("mlp", 64, 0, 0), ("ln_gelu", 32, 64, 128), ("ln_gelu_large", 8192, 1024, 4096)]
    for name, n, d, h in cases:
        for system in ("eager", "torch.compile", "torch.compile(reduce-overhead)"):
            if time.time() - start > budget:
                print(json.dumps({"model": name, "system": system, "skipped": "time budget spent"}))
                continue
            m, x, y = make_case("mlp" if name == "mlp" else "ln_gelu", n, d, h, dev)
            opt = torch.optim.SGD(m.parameters(), lr=0.1)
            fwd = m
            if system == "torch.compile":
                fwd = torch.compile(m)
            elif system != "eager":
                fwd = torch.compile(m, mode="reduce-overhead")

            def step():
                opt.zero_grad(set_to_none=True)
                loss = fwd(x, y)
                loss.backward()
                opt.step()

            t0 = time.time()
            try:
                ms = time_step(step, 30 if name != "ln_gelu_large" else 10, 5)
                print(json.dumps({"model": name, "system": system, "ms": round(ms, 4),
                                  "launches": launches(step), "setup_s": round(time.time() - t0, 1)}),
                      flush=True)
            except Exception as e:  # report and go on: the table is printed regardless
                print(json.dumps({"model": name, "system": system, "error": str(e)[:200]}), flush=True)
    return 0


def main(argv):
    if len(argv) >= 3 and argv[0] == "check-probe":
        return check_probe(argv[1], argv[2])
    if argv and argv[0] == "steps":
        budget = float(argv[2]) if len(argv) >= 3 and argv[1] == "--budget" else 140.0
        return steps(budget)
    print(__doc__)
    return 2


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
