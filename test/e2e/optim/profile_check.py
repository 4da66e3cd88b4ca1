#!/usr/bin/env python3
"""AOTC_PROFILE on a linked program (docs/profiling.md): a compiled train step trained by
aotc::rt::Trainer, run three times by its driver's golden mode:

  1. without AOTC_PROFILE: no report on stderr (the negative control of 3);
  2. AOTC_PROFILE=FILE: the result is byte-identical to 1 (timing changes nothing), one JSON
     line whose forward, backward and update graphs each ran once per step (the step count is
     the golden's ref.loss length, independent of the profile), every kernel of them with
     exactly that many calls and ns > 0, every GEMM's FLOPs 2*m*n*k*batch of its own shape;
  3. AOTC_PROFILE=1: the text report on stderr names the program, the Trainer and the steps.

    profile_check.py GOLDEN OUTDIR -- DRIVER golden WEIGHTS FIXTURE GOLDEN
"""
import json
import os
import struct
import subprocess
import sys


def fail(msg):
    print("profile_check: FAIL: " + msg)
    sys.exit(1)


def main():
    sep = sys.argv.index("--")
    golden, outdir = sys.argv[1:sep]
    cmd = sys.argv[sep + 1:]
    with open(golden, "rb") as f:
        header = json.loads(f.read(struct.unpack("<Q", f.read(8))[0]))
    steps = header["ref.loss"]["shape"][0]
    os.makedirs(outdir, exist_ok=True)
    env = {k: v for k, v in os.environ.items() if k != "AOTC_PROFILE"}
    env["AOTC_PROFILE_TRIAD_MIB"] = "4"  # a small triad: seconds under a sanitizer otherwise

    def run(name, profile):
        e = dict(env)
        if profile is not None:
            e["AOTC_PROFILE"] = profile
        out = os.path.join(outdir, name + ".safetensors")
        r = subprocess.run(cmd + [out], env=e, capture_output=True, text=True, timeout=300)
        if r.returncode != 0:
            fail(f"{name}: the driver exited {r.returncode}:\n{r.stdout}{r.stderr}")
        return open(out, "rb").read(), r.stderr

    plain, err = run("plain", None)
    if "aotc profile" in err:
        fail("a report without AOTC_PROFILE")
    jpath = os.path.join(outdir, "profile.json")
    if os.path.exists(jpath):
        os.remove(jpath)
    profiled, err = run("json", jpath)
    if profiled != plain:
        fail("the profiled run's result differs from the plain run's")
    if "aotc profile" in err:
        fail("AOTC_PROFILE=FILE also printed a text report")
    lines = [json.loads(l) for l in open(jpath)]
    trainer = [j for j in lines if j["owner"] == "Trainer"]
    if len(trainer) != 1:
        fail(f"{len(trainer)} Trainer profiles in {jpath}, want 1")
    j = trainer[0]
    graphs = {g["graph"]: g["calls"] for g in j["graphs"]}
    if graphs != {"forward": steps, "backward": steps, "update": steps}:
        fail(f"graphs {graphs}, want forward, backward and update with {steps} calls each")
    missed = [f"{g} {k}" for g, k in j["untimed"] if g in graphs]
    if missed:
        fail(f"kernels of graphs that ran were never timed: {missed}")
    gemms = 0
    for k in j["kernels"]:
        name = f"{k['graph']} {k['kernel']} ({k['kind']} {k['ops']})"
        if k["calls"] != steps or k["ns"] <= 0:
            fail(f"{name}: {k['calls']} calls, {k['ns']} ns; want {steps} calls and a time")
        if k["kind"] == "gemm":
            m, n, kk, batch = k["shape"]
            gemms += 1
            if k["flops"] != 2.0 * m * n * kk * batch:
                fail(f"{name}: {k['flops']} FLOPs for [{m} {n} {kk} {batch}]")
    if gemms == 0:
        fail("no GEMM kernel in the profile")
    _, err = run("text", "1")
    want = [f"aotc profile: {j['program']} (Trainer)", f"forward: {steps} calls", f"update: {steps} calls"]
    for w in want:
        if w not in err:
            fail(f"the text report lacks '{w}':\n{err}")
    print(f"profile_check: ok: {steps} steps, {len(j['kernels'])} kernels, {gemms} GEMMs, same bytes with and "
          f"without the profile")


if __name__ == "__main__":
    main()
