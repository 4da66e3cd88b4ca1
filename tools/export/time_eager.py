"""Times one training step of the fixture models in torch eager (reference numbers).

Usage: AOTC_TORCH_PYTHON=... python tools/export/time_eager.py THREADS [ITERS]
A step here is forward + backward (the same work aotc's `train_driver bench`
times: no optimizer update, gradients overwritten via set_to_none).
Prints one line per model: `<model>: eager forward+backward per step: median X ms, min Y ms`.
Run it pinned (taskset) with OMP_NUM_THREADS=THREADS to compare with aotc.
"""
import statistics
import sys
import time

import torch

sys.path.insert(0, __file__.rsplit("/", 1)[0])
from models import MLP, LnGelu  # noqa: E402


def bench(name, model, inputs, iters):
    times = []
    for k in range(iters + 10):
        t0 = time.perf_counter()
        loss = model(*inputs)
        loss.backward()
        t1 = time.perf_counter()
        for p in model.parameters():
            p.grad = None
        if k >= 10:
            times.append((t1 - t0) * 1e3)
    print(f"{name}: eager forward+backward per step: median {statistics.median(times):.3f} ms, "
          f"min {min(times):.3f} ms ({iters} steps, {torch.get_num_threads()} threads)")


def main():
    threads = int(sys.argv[1])
    iters = int(sys.argv[2]) if len(sys.argv) > 2 else 200
    torch.set_num_threads(threads)
    torch.set_num_interop_threads(1)
    torch.manual_seed(0)
    bench("mlp", MLP(), (torch.randn(64, 784), torch.randint(0, 10, (64,))), iters)
    bench("ln_gelu", LnGelu(), (torch.randn(32, 64), torch.randn(32, 128)), iters)


if __name__ == "__main__":
    main()
