"""One torch-side benchmark case, run in its own process by tools/bench/bench.py.

    run_case.py step --system eager|compile|aotc-py --model NAME --threads T
                --warmup W --iters I --lr LR --inputs IN.safetensors --weights W.safetensors
                [--ctor MLP|LnGelu:D,H|SmallResNet:W1,..|zoo:NAME] [--library libNAME.so]
                --out OUT.json
    run_case.py mm --threads T --shapes M,K,N [M,K,N ...] --out OUT.json
    run_case.py export --model mlp|ln_gelu|resnet|lm --rows N [--dim D --hidden H]
                [--widths W1,W2,W3,W4 --image S] [--spec SPEC] --out M.pt2
                --inputs-out IN.safetensors

step: one training step = forward, loss.backward(), SGD update (torch.optim.SGD, lr LR, no
momentum), zero_grad (set_to_none). eager: the tools/export/models.py module with the
weights of WEIGHTS (aotc's NAME.weights.safetensors, the same values aotc trains);
compile: torch.compile(that module) (Inductor, default mode; the optimizer stays eager, as
in a usual torch.compile training loop); aotc-py: aotc.load_module(LIBRARY, WEIGHTS)
(python/aotc: the compiled object as an autograd.Function). User inputs: `input.<name>`
of IN, passed to torch's module by keyword (the names of its forward's parameters). W untimed warm-up steps (the first one compiles for `compile`), then I timed
steps (time.perf_counter, ms). Peak RSS: VmHWM (KiB) after writing "5" to
/proc/self/clear_refs once the warm-up is over. Saved activations: one more step under
torch.autograd.graph.saved_tensors_hooks; bytes = distinct storages among the packed
tensors, leaving out storages of parameters and inputs (what a graph input costs
nothing extra to keep), as docs/partition.md defines saved bytes.

mm: torch.mm(a, b, out=c) at each shape (f32, row-major): one untimed call, then calls
until 0.3 s (5..200 calls); GFLOP/s = 2MNK / t.

export: MLP() with a batch of N, or LnGelu(D, H) at N rows (seed 2), exported as
tools/export does it (torch.export + run_decompositions) to M.pt2, with IN.safetensors
holding the user inputs as input.<name> (x f32[N, 784] + target i64[N] in [0, 10), or
x f32[N, D] + y f32[N, H]); resnet: gen_zoo.py's SmallResNet (torchvision BasicBlocks, train
mode) at WIDTHS on x f32[N, 3, S, S] + target i64[N]; lm: tools/export/lm_models.py's
bench_lm(SPEC) (nanoGPT, HF GPT-2 or HF Llama at SPEC's sizes, seed 2; --rows is unused).

Threads: torch.set_num_threads(T), torch.set_num_interop_threads(1); the OMP/MKL/OPENBLAS
variables are set by the caller and copied into OUT.json with the CPU affinity.
"""
import argparse
import json
import os
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(os.path.dirname(HERE))
THREAD_VARS = ("OMP_NUM_THREADS", "MKL_NUM_THREADS", "OPENBLAS_NUM_THREADS",
               "TORCHINDUCTOR_CACHE_DIR", "TORCHINDUCTOR_COMPILE_THREADS")


def reset_peak_rss():
    with open("/proc/self/clear_refs", "w") as f:
        f.write("5")


def peak_rss_kib():
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith("VmHWM:"):
                return int(line.split()[1])
    return -1


def setup_threads(torch, threads):
    torch.set_num_threads(threads)
    try:
        torch.set_num_interop_threads(1)
    except RuntimeError:  # already set (only possible before any parallel work)
        pass
    return {
        "env": {k: os.environ.get(k) for k in THREAD_VARS},
        "affinity": sorted(os.sched_getaffinity(0)),
        "torch_threads": torch.get_num_threads(),
        "torch_interop_threads": torch.get_num_interop_threads(),
    }


def build_module(torch, ctor):
    sys.path.insert(0, os.path.join(REPO, "tools", "export"))
    from models import MLP, LnGelu
    if ctor == "MLP":
        return MLP()
    if ctor.startswith("LnGelu:"):
        d, h = (int(v) for v in ctor.split(":", 1)[1].split(","))
        return LnGelu(d, h)
    if ctor.startswith("zoo:"):  # a zoo fixture's module (gen_zoo.models(): factory, inputs, train, lr)
        from gen_zoo import models
        make, _, train, *_ = models()[ctor[4:]]
        module = make()
        module.train(train)
        return module
    if ctor.startswith("lm:"):  # tools/export/lm_models.py bench_lm (nanogpt, gpt2, llama)
        from lm_models import bench_lm
        module, _ = bench_lm(ctor[3:])
        return module
    if ctor.startswith("SmallResNet:"):  # tools/export/gen_zoo.py (train mode: batch statistics)
        from gen_zoo import SmallResNet
        return SmallResNet(widths=tuple(int(v) for v in ctor.split(":", 1)[1].split(",")))
    raise SystemExit(f"run_case: unknown --ctor {ctor}")


def saved_bytes(torch, run_step, exclude):
    """Distinct storages packed by autograd during one step, minus `exclude` storages."""
    storages = {}

    def pack(t):
        s = t.untyped_storage()
        if s.data_ptr() not in exclude:
            storages[s.data_ptr()] = s.nbytes()
        return t

    with torch.autograd.graph.saved_tensors_hooks(pack, lambda t: t):
        run_step()
    return sum(storages.values()), len(storages)


def step_case(a):
    import torch
    from safetensors.torch import load_file
    info = setup_threads(torch, a.threads)
    torch.manual_seed(0)
    data = load_file(a.inputs)
    if a.system == "aotc-py":
        sys.path.insert(0, os.path.join(REPO, "python"))
        import aotc
        model = aotc.load_module(a.library, a.weights)
        aotc.set_num_threads(a.threads)
        info["aotc_omp_threads"] = aotc.get_num_threads()
        names = model.input_names
    else:
        model = build_module(torch, a.ctor)
        sd = load_file(a.weights)
        missing, unexpected = model.load_state_dict(sd, strict=False)
        # aotc's weights file holds a tied tensor once (nanoGPT's head.weight is tok.weight)
        state = model.state_dict(keep_vars=True)
        loaded = {id(state[k]) for k in sd if k in state}
        untied = [k for k in missing if id(state[k]) not in loaded]
        # and torch.export's lifted constants (HF's `...lifted_tensor_0`) and non-persistent
        # buffers (Llama's rotary inv_freq, made by the constructor), which no state_dict has
        buffers = dict(model.named_buffers())
        unexpected = [k for k in unexpected
                      if not k.rsplit(".", 1)[-1].startswith("lifted_tensor_") and k not in buffers]
        if unexpected or untied:
            raise SystemExit(f"run_case: weights do not fit the module: missing {untied}, "
                             f"unexpected {unexpected}")
        # forward's parameters by name (x/target, idx/target, input_ids/labels/attention_mask)
        import inspect
        names = list(inspect.signature(model.forward).parameters)
    # clone(): torch's allocator aligns to 64 bytes (safetensors buffers need not be)
    kw = {n: data["input." + n].clone() for n in names if "input." + n in data}
    inputs = list(kw.values())
    fn = torch.compile(model) if a.system == "compile" else model
    opt = torch.optim.SGD(model.parameters(), lr=a.lr)

    def run_step():
        loss = fn(*inputs) if a.system == "aotc-py" else fn(**kw)
        loss.backward()
        opt.step()
        opt.zero_grad(set_to_none=True)
        return loss

    times = []
    first = None
    for k in range(a.warmup + a.iters):
        if k == a.warmup:
            reset_peak_rss()
        t0 = time.perf_counter()
        run_step()
        t = (time.perf_counter() - t0) * 1e3
        if k == 0:
            first = t
        if k >= a.warmup:
            times.append(t)
    rss = peak_rss_kib()
    exclude = {p.untyped_storage().data_ptr() for p in model.parameters()}
    exclude |= {t.untyped_storage().data_ptr() for t in inputs}
    sbytes, scount = saved_bytes(torch, run_step, exclude)
    out = dict(info, system=a.system, model=a.model, threads=a.threads, warmup=a.warmup,
               iters=a.iters, lr=a.lr, times_ms=[round(t, 4) for t in times],
               first_step_ms=round(first, 3), rss_hwm_kib=rss, saved_bytes_hooks=sbytes,
               saved_storages_hooks=scount, torch_version=torch.__version__)
    if a.system == "aotc-py":
        out["saved_bytes_header"] = model.program.saved_bytes if hasattr(model, "program") else None
    with open(a.out, "w") as f:
        json.dump(out, f)


def mm_case(a):
    import torch
    info = setup_threads(torch, a.threads)
    rows = []
    for s in a.shapes:
        m, k, n = (int(v) for v in s.split(","))
        x = torch.randn(m, k)
        y = torch.randn(k, n)
        c = torch.empty(m, n)
        torch.mm(x, y, out=c)
        ts = []
        start = time.perf_counter()
        while len(ts) < 200 and (len(ts) < 5 or time.perf_counter() - start < 0.3):
            t0 = time.perf_counter()
            torch.mm(x, y, out=c)
            ts.append(time.perf_counter() - t0)
        flops = 2.0 * m * n * k
        rows.append({"m": m, "k": k, "n": n, "flops": flops,
                     "gflops": [round(flops / t / 1e9, 3) for t in ts]})
    with open(a.out, "w") as f:
        json.dump(dict(info, threads=a.threads, shapes=rows, torch_version=torch.__version__,
                       blas=torch.__config__.show().count("mkl") and "MKL" or "other"), f)


def export_case(a):
    import torch
    from safetensors.torch import save_file
    sys.path.insert(0, os.path.join(REPO, "tools", "export"))
    import common
    from models import MLP, LnGelu
    torch.manual_seed(2)
    if a.model == "lm":
        from lm_models import bench_lm
        module, inputs = bench_lm(a.spec)
    elif a.model == "mlp":
        module = MLP()
        inputs = {"x": torch.randn(a.rows, 784), "target": torch.randint(0, 10, (a.rows,))}
    elif a.model == "resnet":
        from gen_zoo import SmallResNet
        module = SmallResNet(widths=tuple(int(v) for v in a.widths.split(",")))
        inputs = {"x": torch.randn(a.rows, 3, a.image, a.image), "target": torch.randint(0, 10, (a.rows,))}
    else:
        module = LnGelu(a.dim, a.hidden)
        inputs = {"x": torch.randn(a.rows, a.dim), "y": torch.randn(a.rows, a.hidden)}
    _, ep = common.export_aten(module, tuple(inputs.values()))
    os.makedirs(os.path.dirname(os.path.abspath(a.out)), exist_ok=True)
    torch.export.save(ep, a.out)
    save_file({"input." + k: v for k, v in inputs.items()}, a.inputs_out)


def main():
    ap = argparse.ArgumentParser()
    sub = ap.add_subparsers(dest="cmd", required=True)
    s = sub.add_parser("step")
    s.add_argument("--system", required=True, choices=["eager", "compile", "aotc-py"])
    s.add_argument("--model", required=True)
    s.add_argument("--ctor", default="")
    s.add_argument("--threads", type=int, required=True)
    s.add_argument("--warmup", type=int, default=10)
    s.add_argument("--iters", type=int, default=100)
    s.add_argument("--lr", type=float, default=0.01)
    s.add_argument("--inputs", required=True)
    s.add_argument("--weights", required=True)
    s.add_argument("--library", default="")
    s.add_argument("--out", required=True)
    m = sub.add_parser("mm")
    m.add_argument("--threads", type=int, required=True)
    m.add_argument("--shapes", nargs="+", required=True)
    m.add_argument("--out", required=True)
    e = sub.add_parser("export")
    e.add_argument("--model", required=True, choices=["mlp", "ln_gelu", "resnet", "lm"])
    e.add_argument("--spec", default="", help="lm: lm_models.bench_lm's SPEC")
    e.add_argument("--widths", default="16,32,64,128", help="resnet: the four stages' widths")
    e.add_argument("--image", type=int, default=64, help="resnet: image height and width")
    e.add_argument("--rows", type=int, required=True)
    e.add_argument("--dim", type=int, default=0)
    e.add_argument("--hidden", type=int, default=0)
    e.add_argument("--out", required=True)
    e.add_argument("--inputs-out", required=True)
    a = ap.parse_args()
    {"step": step_case, "mm": mm_case, "export": export_case}[a.cmd](a)


if __name__ == "__main__":
    main()
