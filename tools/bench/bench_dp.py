#!/usr/bin/env python3
"""Data-parallel benchmark: `scripts/bench.sh --distributed` (docs/benchmarks-distributed.md).

The large LM row (nanogpt_large, the same export as bench.py's) and the ResNet row
(resnet_train), exported into WORK by tools/bench/run_case.py (torch), compiled with
--optimizer ... --data-parallel (25 MB buckets, DDP's default) and, for the LM, 2 MB buckets
too; each timed by tools/bench/dp_bench.cpp (bench_dp) in four configurations, interleaved over
ROUNDS rounds (medians):
  r1t1  one rank, one thread (no communicator)
  r1t2  one rank, two threads
  r2t1  two ranks of one thread each (mpirun, --bind-to core), all-reduces overlapped
  r2t1b the same, but every bucket all-reduced blocking after the step (no overlap)
A two-rank step trains on twice the samples of a one-rank step. Then a model of the step time
on N ranks from what was measured (the per-rank compute, the all-reduce latency and bandwidth
of this machine, the share of the bytes hidden behind the backward) and two stated networks.
Stdlib only; torch runs in the export processes.
"""
import argparse
import json
import os
import statistics
import subprocess
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(os.path.dirname(HERE))
sys.path.insert(0, os.path.join(REPO, "python"))
import aotc  # noqa: E402  (python/aotc: build_library)

LM_SPEC = "nanogpt,vocab=512,block=128,d=256,heads=8,layers=4,batch=8,seq=128"
MODELS = [
    # name, export args, aotc flags, what
    ("nanogpt_large", ["--model", "lm", "--spec", LM_SPEC, "--rows", "1024"],
     ["--optimizer=adamw:lr=0.0003,weight_decay=0.1", "--clip-grad-norm=1.0", "--data-parallel"],
     "nanoGPT large (8 x 128 tokens a rank, 4 layers, d=256), AdamW + clip, 25 MB buckets"),
    ("nanogpt_large_b2", None,
     ["--optimizer=adamw:lr=0.0003,weight_decay=0.1", "--clip-grad-norm=1.0", "--data-parallel=2"],
     "the same, 2 MB buckets"),
    ("resnet_train", ["--model", "resnet", "--rows", "8", "--widths", "16,32,64,128", "--image", "64"],
     ["--optimizer=sgd:lr=0.01,momentum=0.9", "--data-parallel"],
     "SmallResNet 16-32-64-128, 8 images 64x64 a rank, train mode (batch norm), SGD momentum, 25 MB buckets"),
]
CONFIGS = ["r1t1", "r1t2", "r2t1", "r2t1b"]
# Networks for the model beyond this machine (stated, not measured): bandwidth B/s, latency s.
NETWORKS = [("10 GbE (TCP)", 1.25e9, 25e-6), ("100 Gb/s InfiniBand", 12.0e9, 2e-6)]


def log(*a):
    print("bench_dp:", *a, file=sys.stderr, flush=True)


def run_config(build, lib, name, weights, inputs, cfg, warmup, iters, out):
    env = dict(os.environ, OMPI_ALLOW_RUN_AS_ROOT="1", OMPI_ALLOW_RUN_AS_ROOT_CONFIRM="1",
               KMP_AFFINITY="granularity=fine,compact", OPENBLAS_NUM_THREADS="1")
    threads = 2 if cfg == "r1t2" else 1
    ranks = 2 if cfg.startswith("r2") else 1
    env["OMP_NUM_THREADS"] = str(threads)
    cmd = ["mpirun", "--oversubscribe", "--mca", "btl", "self,vader", "--mca", "btl_vader_single_copy_mechanism",
           "none", "-np", str(ranks), "--bind-to", "none" if threads > 1 else "core", "-x", "OMP_NUM_THREADS",
           os.path.join(build, "tools", "bench", "bench_dp"), lib, name, weights, inputs, str(warmup), str(iters), out]
    if cfg == "r2t1b":
        cmd.append("--blocking")
    subprocess.run(cmd, env=env, check=True, stdout=subprocess.DEVNULL, timeout=900)
    with open(out) as f:
        return json.load(f)


def ring_ms(n, size_bytes, bw, alpha):
    """A ring all-reduce of size_bytes on n ranks: 2(n-1)/n of the bytes each way, 2(n-1) steps."""
    return 1e3 * (2 * (n - 1) / n * size_bytes / bw + 2 * (n - 1) * alpha)


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--build", default=os.path.join(REPO, "build"))
    ap.add_argument("--torch-python", required=True)
    ap.add_argument("--work", default=None)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--warmup", type=int, default=2)
    ap.add_argument("--iters", type=int, default=8)
    ap.add_argument("--out", default=os.path.join(REPO, "docs", "benchmarks-distributed.json"))
    ap.add_argument("--md", default=os.path.join(REPO, "docs", "benchmarks-distributed.md"))
    a = ap.parse_args()
    work = a.work or os.path.join(a.build, "bench-dp")
    os.makedirs(work, exist_ok=True)
    aotc_bin = os.path.join(a.build, "tools", "aotc", "aotc")
    libs = {}
    for name, export, flags, _ in MODELS:
        base = name.split("_b")[0] if export is None else name
        pt2 = os.path.join(work, base + ".pt2")
        inputs = os.path.join(work, base + ".inputs.safetensors")
        if export is not None and not (os.path.isfile(pt2) and os.path.isfile(inputs)):
            log("export", name)
            subprocess.run([a.torch_python, os.path.join(HERE, "run_case.py"), "export", *export, "--out", pt2,
                            "--inputs-out", inputs], check=True, env=dict(os.environ, OMP_NUM_THREADS="2"))
        log("compile", name, *flags)
        b = aotc.build_library(pt2, name=base, flags=flags, cache_dir=os.path.join(work, "cache"), aotc_bin=aotc_bin)
        libs[name] = (b.library, base, b.weights, inputs)
    raw = {m[0]: {c: [] for c in CONFIGS} for m in MODELS}
    for r in range(a.rounds):
        for name, *_ in MODELS:
            for cfg in CONFIGS:
                log(f"round {r + 1}/{a.rounds}", name, cfg)
                lib, base, weights, inputs = libs[name]
                raw[name][cfg].append(run_config(a.build, lib, base, weights, inputs, cfg, a.warmup, a.iters,
                                                 os.path.join(work, f"{name}-{cfg}-{r}.json")))
    rows = []
    for name, _, flags, what in MODELS:
        res = raw[name]
        med = {c: statistics.median(statistics.median(j["times_ms"]) for j in res[c]) for c in CONFIGS}
        dp = res["r2t1"]
        size = dp[0]["bytes_per_step"]
        hidden = statistics.median(j["bytes_completed_before_wait_per_step"] / max(size, 1) for j in dp)
        wait = statistics.median(j["wait_ms_per_step"] for j in dp)
        allreduce = statistics.median(j["allreduce_ms"] for j in dp + res["r2t1b"])
        alpha = 1e-6 * statistics.median(j["latency_us"] for j in dp + res["r2t1b"])
        bw = size / max(1e-3 * allreduce - 2 * alpha, 1e-9)  # A(2) = S / BW + 2 alpha
        compute = med["r1t1"]
        model = []
        for net, nbw, nalpha in [("shared memory (as measured here)", bw, alpha)] + NETWORKS:
            for n in (8, 64):
                comm = ring_ms(n, size, nbw, nalpha)
                step = compute + (1 - hidden) * comm
                # Bucket size whose per-bucket latency is <= 10 % of its transfer, at most a quarter of
                # the gradients (so at least 4 buckets overlap the backward), at least 1 MiB.
                bucket = min(max(10 * n * nalpha * nbw, 1 << 20), max(size / 4, 1 << 20))
                model.append({"network": net, "ranks": n, "allreduce_ms": comm, "step_ms": step,
                              "efficiency": compute / step, "bucket_mb": bucket / (1 << 20)})
        rows.append({"name": name, "what": what, "flags": flags, "median_ms": med,
                     "samples_per_step": {"r1t1": 1, "r1t2": 1, "r2t1": 2, "r2t1b": 2},
                     "throughput_vs_r1t1": {c: (2 if c.startswith("r2") else 1) * compute / med[c] for c in CONFIGS},
                     "bytes_per_step": size, "buckets": dp[0]["buckets"], "hidden_fraction": hidden,
                     "wait_ms": wait, "allreduce_ms": allreduce, "latency_us": 1e6 * alpha,
                     "bandwidth_gbs": bw / 1e9,
                     "completed_before_wait": sum(j["completed_before_wait"] for j in dp),
                     "started": sum(j["started"] for j in dp), "model": model, "raw": res})
    out = {"rounds": a.rounds, "warmup": a.warmup, "iters": a.iters, "rows": rows,
           "machine": f"{os.cpu_count()} cores"}
    with open(a.out, "w") as f:
        json.dump(out, f, indent=1)
    with open(a.md, "w") as f:
        f.write(render(out))
    log("wrote", a.out, a.md)


def render(d):
    s = ["# Data-parallel benchmark (scripts/bench.sh --distributed)", "",
         f"Made by tools/bench/bench_dp.py on this machine ({d['machine']}): {d['rounds']} interleaved rounds, "
         f"{d['warmup']} warm-up + {d['iters']} timed steps each, medians. r1t1: one rank, one thread; r1t2: one "
         "rank, two threads; r2t1: two MPI ranks of one thread (each on its own shard: twice the samples of a "
         "one-rank step), all-reduces overlapped with the backward; r2t1b: the same with every bucket "
         "all-reduced blocking after the step. Throughput: samples per second relative to r1t1. docs/distributed.md "
         "says how the step communicates.", "",
         "| row | r1t1 ms | r1t2 ms | r2t1 ms | r2t1b ms | throughput r1t2 | throughput r2t1 | gradients | buckets | "
         "hidden | wait ms | all-reduce ms |",
         "|---|--:|--:|--:|--:|--:|--:|--:|--:|--:|--:|--:|"]
    for r in d["rows"]:
        m, t = r["median_ms"], r["throughput_vs_r1t1"]
        s.append(f"| {r['name']}: {r['what']} | {m['r1t1']:.1f} | {m['r1t2']:.1f} | {m['r2t1']:.1f} | "
                 f"{m['r2t1b']:.1f} | {t['r1t2']:.2f}x | {t['r2t1']:.2f}x | {r['bytes_per_step'] / 1e6:.1f} MB | "
                 f"{r['buckets']} | {100 * r['hidden_fraction']:.0f} % | {r['wait_ms']:.2f} | {r['allreduce_ms']:.2f} |")
    s += ["", "hidden: the share of the gradient bytes whose all-reduce had completed (found by the progress "
          "calls between backward kernels) before the step waited for it. wait: the time the step spent "
          "waiting for all-reduces (not hidden; it includes the other rank arriving later). all-reduce: a "
          "blocking MPI_Allreduce of the same buckets, the communication's whole cost on this machine.", "",
          "## Model: the step on N ranks", "",
          "step(N) = compute + (1 - hidden) x allreduce(N), compute = the one-rank, one-thread step (each rank "
          "keeps its shard: weak scaling), allreduce(N) = a ring: 2 (N-1)/N x gradient bytes / bandwidth + "
          "2 (N-1) x latency. This machine's latency and bandwidth are measured (a one-element all-reduce; the "
          "2-rank all-reduce of the gradients); the networks' are stated. bucket: the size whose per-bucket "
          "latency is at most 10 % of its transfer (10 N x latency x bandwidth), at least 1 MiB, at most a "
          "quarter of the gradients (so that buckets overlap the backward).", ""]
    for r in d["rows"]:
        s += [f"**{r['name']}** (latency {r['latency_us']:.1f} us, bandwidth {r['bandwidth_gbs']:.2f} GB/s here):", "",
              "| network | ranks | all-reduce ms | step ms | efficiency | bucket MB |", "|---|--:|--:|--:|--:|--:|"]
        for m in r["model"]:
            s.append(f"| {m['network']} | {m['ranks']} | {m['allreduce_ms']:.1f} | {m['step_ms']:.1f} | "
                     f"{100 * m['efficiency']:.0f} % | {m['bucket_mb']:.1f} |")
        s.append("")
    return "\n".join(s)


if __name__ == "__main__":
    main()
