#!/usr/bin/env python3
"""The benchmark of scripts/bench.sh: aotc vs torch eager vs torch.compile, with ceilings.

    bench.py --build BUILD --torch-python PY [--reps 2] [--quick] [--out docs/benchmarks.json]
             [--md docs/benchmarks.md] [--work DIR] [--no-warm-cache]

Stdlib only; torch runs in the case processes (tools/bench/run_case.py under PY). Every
case is its own process, pinned with `taskset -c 0` (1 thread) or `taskset -c 0,1`
(2 threads), with OMP_NUM_THREADS, MKL_NUM_THREADS and OPENBLAS_NUM_THREADS set to the
thread count (logged per case with the affinity and torch's thread counts;
torch.set_num_threads(T), set_num_interop_threads(1)). aotc's runtime pins OpenBLAS to one
thread itself (it splits GEMMs into blocks on its OpenMP threads, docs/abi.md); the
effective value is logged.

Systems (a step = forward, backward, SGD update lr 0.01, zero_grad):
  eager       torch eager (tools/export/models.py, the weights aotc trains)
  compile     torch.compile (Inductor, default mode), compiled in the case's process with a
              fresh TORCHINDUCTOR_CACHE_DIR (cold); compile time = first step - median step.
              In repetition 1, at 1 thread, for the small models, a second process reuses
              that cache dir (warm cache; 1 warm-up step, 25 timed steps).
  aotc-cpp    the aotc object in a shared library driven by aotc::rt::DifferentiableFunction
              (tools/bench/step_driver.cpp, bench_step)
  aotc-py     the same library through python/aotc (aotc.load_module: autograd.Function)
aotc's own compile time: `aotc MODEL -o X.o` wall time (one process, 1 core), per repetition.

Models: mlp (N=64, the committed example) and ln_gelu (N=32, D=64, H=128, committed), and a
larger row of each exported on the fly into BUILD/bench/ (not committed): mlp_large
(N=2048) and ln_gelu_large (N=2048, D=512, H=2048), resnet_train (the zoo's SmallResNet,
tools/export/gen_zoo.py, at widths 16-32-64-128 on a batch of 8 64x64 images, train mode),
and three language models (LM_ROWS: nanogpt_large, gpt2_large, llama_large; 4 layers of
width 256, 8 x 128 tokens, vocabulary 512).

--zoo adds a row per committed zoo fixture (test/fixtures/zoo/<m>: its golden's batch, train
or eval mode as generated; eager and torch.compile build the module with gen_zoo.models()).

Iterations: small models 10 warm-up + 100 timed steps; zoo rows 3 + 20; large rows 2 warm-up + 5 timed
steps (a large step takes 0.1-3 s on this machine; 100 of them per case would not fit a
run of under half an hour). --quick: 2 + 5 and 1 + 2 (smoke test only, marked quick in the JSON).
Order: for each repetition, for each model, for each thread count, the four systems one
after the other (reversed in even repetitions), so systems are interleaved in time.

Ceilings, in each repetition: STREAM triad (bench_stream_triad, 1 and 2 threads, f32,
128 MiB arrays), OpenBLAS sgemm (bench_sgemm) and torch.mm (run_case.py mm) at n=1024 and
at every GEMM shape of the models (M,K,N of the forward and the backward), 1 and 2 threads;
the FX pointwise probe tools/bench/probe_triad.fx.txt (out = b + 3 * c on f32[4096, 8192],
the triad's traffic) compiled by aotc and timed through its forward entry point.

Writes --out (every repetition's raw per-step times, CPU model, versions, git SHA, thread
counts, load average), then renders --md with tools/bench/render.py.
"""
import argparse
import datetime
import json
import os
import platform
import shutil
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(os.path.dirname(HERE))
sys.path.insert(0, os.path.join(REPO, "python"))
_USER_BLOCKTIME = os.environ.get("KMP_BLOCKTIME")
import aotc  # noqa: E402  (torch-free core: build_library)
# The import sets KMP_BLOCKTIME=0 in os.environ for the Python module's own libomp (docs/python.md
# "Threads"); the cases are other processes and must get what their users get: a C++ program's
# libomp default (200 ms), a Python case's module its own setting. Inherited, it made every
# 2-thread aotc C++ case wake its worker by futex after each parallel region (zoo U-Net: 9.2 ms
# per step instead of 3.1 ms; 1 thread 4.7 ms).
if _USER_BLOCKTIME is None:
    os.environ.pop("KMP_BLOCKTIME", None)

SYSTEMS = ["eager", "compile", "aotc-cpp", "aotc-py"]
LR = 0.01


def gemm_shapes(kind, n, d, h):
    """(M, K, N) of every GEMM of one training step: forward, then backward."""
    if kind == "mlp":  # 784 -> 256 -> 10
        return [(n, 784, 256), (n, 256, 10), (n, 10, 256), (10, n, 256), (256, n, 784)]
    return [(n, d, h), (n, h, h), (h, n, h), (h, n, d)]


def lm_gemms(tokens, d, vocab, projections):
    """(M, K, N) of an LM step's GEMMs: each forward projection d_in -> d_out over `tokens`
    rows, its input gradient and its weight gradient, and the head (d -> vocab)."""
    out = []
    for k, n in projections + [(d, vocab)]:
        for s in ((tokens, k, n), (tokens, n, k), (k, tokens, n)):
            if s not in out:
                out.append(s)
    return out


# The LM rows (tools/export/lm_models.py bench_lm): 4 layers of width 256 over 8 sequences
# of 128 tokens (1,024 tokens a step), vocabulary 512: ~3 M parameters, ~25 GFLOP a step,
# 0.2-1 s on this machine, where the per-step overhead (< 1 ms) is noise.
LM_ROWS = [
    ("nanogpt_large", "nanogpt,vocab=512,block=128,d=256,heads=8,layers=4,batch=8,seq=128",
     "nanoGPT: 8 x 128 tokens, vocab 512, 4 layers, d=256, 8 heads, MLP 1024, tied head",
     [(256, 768), (256, 256), (256, 1024), (1024, 256)]),
    ("gpt2_large", "gpt2,vocab=512,block=128,d=256,heads=8,layers=4,batch=8,seq=128",
     "HF GPT2LMHeadModel (eager attention): 8 x 128 tokens, vocab 512, 4 layers, d=256, 8 heads",
     [(256, 768), (256, 256), (256, 1024), (1024, 256)]),
    ("llama_large", "llama,vocab=512,block=128,d=256,hidden=688,heads=8,kv_heads=4,layers=4,batch=8,seq=128",
     "HF LlamaForCausalLM (eager attention): 8 x 128 tokens, vocab 512, 4 layers, d=256, "
     "8 heads / 4 KV heads, SiLU MLP 688",
     [(256, 256), (256, 128), (256, 688), (688, 256)]),
]


def models(work, large, zoo=False):
    ms = [
        {"name": "mlp", "kind": "mlp", "ctor": "MLP", "rows": 64, "size": "N=64, 784-256-10",
         "pt2": os.path.join(REPO, "examples/mlp/mlp.pt2"),
         "inputs": os.path.join(REPO, "examples/mlp/golden.safetensors"),
         "gemms": gemm_shapes("mlp", 64, 0, 0), "large": False},
        {"name": "ln_gelu", "kind": "ln_gelu", "ctor": "LnGelu:64,128", "rows": 32,
         "size": "N=32, D=64, H=128", "pt2": os.path.join(REPO, "test/e2e/ln_gelu/ln_gelu.pt2"),
         "inputs": os.path.join(REPO, "test/e2e/ln_gelu/golden.safetensors"),
         "gemms": gemm_shapes("ln_gelu", 32, 64, 128), "large": False},
    ]
    if large:
        ms += [
            {"name": "mlp_large", "kind": "mlp", "ctor": "MLP", "rows": 2048,
             "size": "N=2048, 784-256-10", "export": ["--model", "mlp", "--rows", "2048"],
             "gemms": gemm_shapes("mlp", 2048, 0, 0), "large": True},
            {"name": "ln_gelu_large", "kind": "ln_gelu", "ctor": "LnGelu:512,2048", "rows": 2048,
             "size": "N=2048, D=512, H=2048",
             "export": ["--model", "ln_gelu", "--rows", "2048", "--dim", "512", "--hidden", "2048"],
             "gemms": gemm_shapes("ln_gelu", 2048, 512, 2048), "large": True},
            # The zoo's SmallResNet at 2x its widths and batch 8: ~40 ms a step, where the
            # convolutions' work dominates the per-step overhead (< 0.2 ms).
            {"name": "resnet_train", "kind": "resnet", "ctor": "SmallResNet:16,32,64,128", "rows": 8,
             "size": "N=8, 3x64x64, BasicBlock widths 16-32-64-128, train mode",
             "export": ["--model", "resnet", "--rows", "8", "--widths", "16,32,64,128", "--image", "64"],
             "gemms": [(8, 128, 10), (8, 10, 128), (10, 8, 128)], "large": True},
        ]
        ms += [{"name": name, "kind": "lm", "ctor": "lm:" + spec, "rows": 1024, "size": size,
                "export": ["--model", "lm", "--spec", spec, "--rows", "1024"],
                "gemms": lm_gemms(1024, 256, 512, proj), "large": True}
               for name, spec, size, proj in LM_ROWS]
    if zoo:
        # Every committed zoo fixture (tools/export/gen_zoo.py), at its golden's batch and mode.
        root = os.path.join(REPO, "test", "fixtures", "zoo")
        for z in sorted(os.listdir(root)):
            ms.append({"name": "zoo_" + z, "kind": "zoo", "ctor": "zoo:" + z, "rows": 0,
                       "size": f"test/fixtures/zoo/{z}", "pt2": os.path.join(root, z, z + ".pt2"),
                       "inputs": os.path.join(root, z, "golden.safetensors"), "gemms": [], "large": "zoo"})
    for m in ms:
        if "export" in m:
            m["pt2"] = os.path.join(work, m["name"] + ".pt2")
            m["inputs"] = os.path.join(work, m["name"] + ".inputs.safetensors")
    return ms


def record_saved_bytes(name):
    """torch.compile's saved bytes from its committed partition record
    (test/fixtures/inductor/<name>/, tools/parity/compare.py definitions), or None."""
    folder = os.path.join(REPO, "test", "fixtures", "inductor", name)
    if not os.path.isdir(folder):
        return None
    sys.path.insert(0, os.path.join(REPO, "tools", "parity"))
    import compare
    table = compare.load_table(os.path.join(REPO, "docs", "partition.md"))
    return compare.torch_side(folder, table)["bytes"]


def log(*a):
    print(f"[bench {time.strftime('%H:%M:%S')}]", *a, flush=True)


def sh(cmd, env=None, capture=True):
    r = subprocess.run(cmd, env=env, capture_output=capture, text=True)
    if r.returncode != 0:
        raise SystemExit(f"bench: command failed (exit {r.returncode}): {' '.join(cmd)}\n"
                         f"{r.stdout or ''}{r.stderr or ''}")
    return r.stdout


# Settings the aotc C++ cases run with (docs/runtime.md "Threads"): libomp binds its threads
# to the pinned cores, one each, else a spinning worker and the main thread can share one core
# (zoo GPT-2, 2 threads: 1.08 ms unbound, 0.276 ms bound). KMP_AFFINITY, read by libomp only,
# not OMP_PROC_BIND: libgomp (loaded with libdnnl) reads that one too and pins the initial
# thread to CPU 0 when it loads, so libomp then bound both threads to CPU 0 (lenet 2 threads
# 0.88 ms vs 0.54). Not for processes with torch: it made eager slower (MLP, 2 threads: 1.17
# vs 0.93 ms) and aotc through the Python module twice as slow (LN-GELU large, 2 threads: 1167
# vs 604 ms; torch's OpenMP runtime binds too).
AOTC_ENV = {"KMP_AFFINITY": "granularity=fine,compact"}


def thread_env(threads, extra=None):
    env = dict(os.environ)
    for k in ("OMP_NUM_THREADS", "MKL_NUM_THREADS", "OPENBLAS_NUM_THREADS"):
        env[k] = str(threads)
    env.pop("GOTO_NUM_THREADS", None)
    env["PYTHONPATH"] = os.path.join(REPO, "python")
    env.update(extra or {})
    return env


def pinned(threads, cmd):
    return ["taskset", "-c", "0" if threads == 1 else "0,1"] + cmd


class Bench:
    def __init__(self, a):
        self.a = a
        self.work = os.path.abspath(a.work or os.path.join(a.build, "bench"))
        os.makedirs(self.work, exist_ok=True)
        self.tools = os.path.join(a.build, "tools", "bench")
        self.aotc_bin = os.path.join(a.build, "tools", "aotc", "aotc")
        self.cache = os.path.join(self.work, "aotc-cache")
        self.tmp = tempfile.mkdtemp(prefix="case-", dir=self.work)
        if a.quick:
            self.iters = {False: (2, 5), True: (1, 2), "zoo": (1, 2)}
        else:
            self.iters = {False: (10, 100), True: (2, 5), "zoo": (3, 20)}
        self.models = models(self.work, not a.no_large, a.zoo)
        if a.models:
            self.models = [m for m in self.models if m["name"] in a.models.split(",")]
        self.out = {"meta": {}, "models": [], "cases": [], "aotc_compile": [], "ceilings": []}
        self.n = 0

    def tmpfile(self, stem):
        self.n += 1
        return os.path.join(self.tmp, f"{self.n:03d}-{stem}.json")

    # ---- preparation -------------------------------------------------------------------
    def prepare(self):
        for m in self.models:
            if "export" in m:
                log("export", m["name"])
                sh([self.a.torch_python, os.path.join(HERE, "run_case.py"), "export", *m["export"],
                    "--out", m["pt2"], "--inputs-out", m["inputs"]], env=thread_env(2))
            t0 = time.perf_counter()
            b = aotc.build_library(m["pt2"], name=m["name"], cache_dir=self.cache,
                                   aotc_bin=self.aotc_bin, force=True)
            m["build_s"] = time.perf_counter() - t0
            m["library"], m["weights"] = b.library, b.weights
            m["inductor_record_saved_bytes"] = record_saved_bytes(m["name"])
            self.out["models"].append({k: m[k] for k in ("name", "kind", "size", "rows", "gemms",
                                                          "large", "build_s",
                                                          "inductor_record_saved_bytes")}
                                      | {"pt2": os.path.relpath(m["pt2"], REPO)
                                         if m["large"] is not True else "exported into the build dir"})
        probe = os.path.join(HERE, "probe_triad.fx.txt")
        b = aotc.build_library(probe, name="probe_triad", cache_dir=self.cache,
                               aotc_bin=self.aotc_bin, flags=["--freeze=b,c"])
        self.probe_lib = b.library

    def meta(self):
        def first(cmd):
            try:
                return subprocess.run(cmd, capture_output=True, text=True).stdout.strip()
            except OSError:
                return None
        cpu = None
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("model name"):
                    cpu = line.split(":", 1)[1].strip()
                    break
        tv = first([self.a.torch_python, "-c",
                    "import torch;print(torch.__version__);"
                    "print(torch.backends.mkl.is_available(), torch.backends.mkldnn.is_available())"])
        dirty = first(["git", "-C", REPO, "status", "--porcelain", "--untracked-files=no"])
        self.out["meta"].update({
            "date_utc": datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%d %H:%M"),
            "git_sha": first(["git", "-C", REPO, "rev-parse", "HEAD"]),
            "git_dirty_files": len(dirty.splitlines()) if dirty else 0,
            "cpu_model": cpu, "nproc": os.cpu_count(),
            "flags_avx512f": "avx512f" in open("/proc/cpuinfo").read(),
            "kernel": platform.release(), "python": platform.python_version(),
            "torch": (tv or "?").splitlines()[0],
            "compiler": first(["clang-19", "--version"]).splitlines()[0],
            "openblas": None,  # filled from bench_sgemm's config line
            "threads": [1, 2], "reps": self.a.reps, "quick": self.a.quick,
            "iters": {"small": list(self.iters[False]), "large": list(self.iters[True]),
                      "zoo": list(self.iters["zoo"])},
            "lr": LR, "pinning": {"1": "taskset -c 0", "2": "taskset -c 0,1"}, "aotc_env": AOTC_ENV,
            "loadavg_start": open("/proc/loadavg").read().split()[:3],
        })

    # ---- cases ---------------------------------------------------------------------------
    def run_json(self, cmd, env, path):
        t0 = time.perf_counter()
        sh(cmd, env=env)
        wall = time.perf_counter() - t0
        with open(path) as f:
            d = json.load(f)
        d["wall_s"] = round(wall, 2)
        d["cmd"] = [os.path.relpath(c, REPO) if c.startswith(REPO) else c for c in cmd]
        return d

    def step_case(self, rep, m, system, threads, warm_dir=None):
        warmup, iters = self.iters[m["large"]]
        out = self.tmpfile(f"{m['name']}-{system}-t{threads}")
        extra = {}
        if system == "aotc-cpp":
            extra.update(AOTC_ENV)
        if system == "aotc-cpp":
            cmd = [os.path.join(self.tools, "bench_step"), "step", m["library"], m["name"],
                   m["weights"], m["inputs"], str(warmup), str(iters), str(LR), out]
        else:
            if system == "compile":
                cache = warm_dir or tempfile.mkdtemp(prefix="inductor-", dir=self.work)
                extra["TORCHINDUCTOR_CACHE_DIR"] = cache
                if warm_dir:
                    warmup, iters = 1, max(2, iters // 4)
            cmd = [self.a.torch_python, os.path.join(HERE, "run_case.py"), "step",
                   "--system", system, "--model", m["name"], "--ctor", m["ctor"],
                   "--threads", str(threads), "--warmup", str(warmup), "--iters", str(iters),
                   "--lr", str(LR), "--inputs", m["inputs"], "--weights", m["weights"],
                   "--library", m["library"], "--out", out]
        env = thread_env(threads, extra)
        d = self.run_json(pinned(threads, cmd), env, out)
        d.update(rep=rep, system=system + ("-warm" if warm_dir else ""), model=m["name"],
                 threads=threads, warmup=warmup, iters=iters)
        d.setdefault("env", {k: env.get(k) for k in ("OMP_NUM_THREADS", "MKL_NUM_THREADS",
                                                     "OPENBLAS_NUM_THREADS", *AOTC_ENV)})
        if system == "aotc-cpp":
            d["saved_bytes_header"] = d.pop("saved_bytes")
        times = sorted(d["times_ms"])
        med = times[len(times) // 2] if len(times) % 2 else \
            (times[len(times) // 2 - 1] + times[len(times) // 2]) / 2
        if system == "compile":
            d["compile_s"] = round((d["first_step_ms"] - med) / 1e3, 3)
        log(f"rep {rep} {m['name']:>13} t{threads} {d['system']:>12}: median {med:9.3f} ms"
            f"  first {d['first_step_ms']:9.1f} ms  ({d['wall_s']} s)")
        self.out["cases"].append(d)
        return extra.get("TORCHINDUCTOR_CACHE_DIR")

    def aotc_compile_time(self, rep, m):
        obj = os.path.join(self.tmp, m["name"] + ".o")
        cmd = pinned(1, [self.aotc_bin, m["pt2"], "-o", obj, "--name", m["name"]])
        t0 = time.perf_counter()
        sh(cmd, env=thread_env(1))
        self.out["aotc_compile"].append({"rep": rep, "model": m["name"],
                                         "seconds": round(time.perf_counter() - t0, 3)})

    # ---- ceilings ------------------------------------------------------------------------
    def ceilings(self, rep):
        shapes = [(1024, 1024, 1024)]
        for m in self.models:
            for s in m["gemms"]:
                if tuple(s) not in shapes:
                    shapes.append(tuple(s))
        arg = [f"{m},{k},{n}" for m, k, n in shapes]
        for t in (1, 2):
            d = json.loads(sh(pinned(t, [os.path.join(self.tools, "bench_stream_triad")]),
                              env=thread_env(t)))
            self.out["ceilings"].append(dict(d, rep=rep, kind="triad", threads=t))
            d = json.loads(sh(pinned(t, [os.path.join(self.tools, "bench_sgemm"), *arg]),
                              env=thread_env(t)))
            self.out["meta"]["openblas"] = d.pop("config")
            self.out["ceilings"].append(dict(d, rep=rep, kind="sgemm", threads=t))
            out = self.tmpfile(f"mm-t{t}")
            d = self.run_json(pinned(t, [self.a.torch_python, os.path.join(HERE, "run_case.py"),
                                         "mm", "--threads", str(t), "--shapes", *arg,
                                         "--out", out]), thread_env(t), out)
            self.out["ceilings"].append(dict(d, rep=rep, kind="torch.mm", threads=t))
            out = self.tmpfile(f"probe-t{t}")
            d = self.run_json(pinned(t, [os.path.join(self.tools, "bench_step"), "probe",
                                         self.probe_lib, "probe_triad", "2", "10", out]),
                              thread_env(t), out)
            self.out["ceilings"].append(dict(d, rep=rep, kind="probe", threads=t))
        log(f"rep {rep} ceilings done")

    def run(self):
        t_start = time.perf_counter()
        self.meta()
        self.prepare()
        for rep in range(1, self.a.reps + 1):
            self.ceilings(rep)
            for m in self.models:
                self.aotc_compile_time(rep, m)
                for t in (1, 2):
                    order = SYSTEMS if rep % 2 else SYSTEMS[::-1]
                    for s in order:
                        cache = self.step_case(rep, m, s, t)
                        if (s == "compile" and rep == 1 and t == 1 and not m["large"]
                                and not self.a.no_warm_cache):
                            self.step_case(rep, m, s, t, warm_dir=cache)
                        if cache:
                            shutil.rmtree(cache, ignore_errors=True)
            self.save(t_start)  # after every repetition: a cut-short run keeps what it measured
        shutil.rmtree(self.tmp, ignore_errors=True)
        log(f"wrote {self.a.out} ({self.out['meta']['total_s']} s)")
        sh([sys.executable, os.path.join(HERE, "render.py"), self.a.out, self.a.md], capture=False)
        log(f"wrote {self.a.md}")

    def save(self, t_start):
        if os.path.exists(self.a.notes):
            with open(self.a.notes) as f:
                self.out["notes"] = f.read()
        self.out["meta"]["loadavg_end"] = open("/proc/loadavg").read().split()[:3]
        self.out["meta"]["total_s"] = round(time.perf_counter() - t_start, 1)
        with open(self.a.out, "w") as f:
            json.dump(self.out, f, indent=1, sort_keys=True)
            f.write("\n")


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--build", required=True)
    ap.add_argument("--torch-python", required=True)
    ap.add_argument("--reps", type=int, default=2)
    ap.add_argument("--quick", action="store_true", help="tiny iteration counts (smoke test)")
    ap.add_argument("--no-large", action="store_true", help="skip the larger rows")
    ap.add_argument("--no-warm-cache", action="store_true")
    ap.add_argument("--models", default="", help="comma-separated subset (default: all)")
    ap.add_argument("--zoo", action="store_true",
                    help="also a row per zoo fixture (zoo_<model>: 3 warm-up + 20 timed steps)")
    ap.add_argument("--work", default="")
    ap.add_argument("--notes", default=os.path.join(HERE, "notes.md"),
                    help="analysis text copied into the JSON and rendered at the page's end")
    ap.add_argument("--out", default=os.path.join(REPO, "docs", "benchmarks.json"))
    ap.add_argument("--md", default=os.path.join(REPO, "docs", "benchmarks.md"))
    a = ap.parse_args()
    a.build = os.path.abspath(a.build)
    Bench(a).run()


if __name__ == "__main__":
    main()
