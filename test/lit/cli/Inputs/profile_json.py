#!/usr/bin/env python3
"""Prints the JSON lines of an AOTC_PROFILE file (docs/profiling.md) as FileCheck-able lines,
with the checks that need arithmetic done here:

    profile PROGRAM owner=OWNER threads=T triad=ok|bad graphs=forward:N,backward:N
    gemm GRAPH OPS m=.. n=.. k=.. batch=.. calls=N flops=ok|bad ceiling=ok|none
    untimed in graphs that ran: none | GRAPH:KERNEL ...
    loops=K bytes=ok|bad time=ok|bad

flops=ok: the row's FLOPs are 2*m*n*k*batch (a GEMM's definition, from its own shape);
bytes=ok: every loop kernel moves > 0 bytes; time=ok: every row has ns > 0 and calls > 0.
"""
import json
import sys

for line in open(sys.argv[1]):
    j = json.loads(line)
    graphs = ",".join(f"{g['graph']}:{g['calls']}" for g in j["graphs"])
    print(f"profile {j['program']} owner={j['owner']} threads={j['threads']} "
          f"triad={'ok' if j['triad_gb_per_s'] > 0 else 'bad'} graphs={graphs}")
    loops = [k for k in j["kernels"] if k["kind"] == "loop"]
    for k in sorted((k for k in j["kernels"] if k["kind"] == "gemm"), key=lambda k: (k["graph"], k["kernel"])):
        m, n, kk, batch = k["shape"]
        flops = "ok" if k["flops"] == 2.0 * m * n * kk * batch else f"bad({k['flops']})"
        ceiling = "ok" if k["ceiling"] is not None and k["ceiling"] > 0 else "none"
        print(f"gemm {k['graph']} {k['ops']} m={m} n={n} k={kk} batch={batch} calls={k['calls']} "
              f"flops={flops} ceiling={ceiling}")
    ran = {g["graph"] for g in j["graphs"]}
    missed = sorted(f"{g}:{k}" for g, k in j["untimed"] if g in ran)
    print(f"untimed in graphs that ran: {' '.join(missed) or 'none'}")
    print(f"loops={len(loops)} bytes={'ok' if all(k['bytes'] > 0 for k in loops) else 'bad'} "
          f"time={'ok' if all(k['ns'] > 0 and k['calls'] > 0 for k in j['kernels']) else 'bad'}")
