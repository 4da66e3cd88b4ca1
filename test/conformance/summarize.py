#!/usr/bin/env python3
"""Recomputes the conformance summary from results.jsonl (standard library only).

Prints
  conformance: ops=<N> samples=<M> passed=<P> failed=<F> skipped=<S> ops_passing=<Q> skipped_ops=<K>
where a sample counts for every registry overload its graph contains (`counts_for`),
ops = overloads with at least one sample, ops_passing = those with >= 2 passed samples and
no failed one, skipped_ops = registry overloads skipped as a whole (closed list,
docs/conformance.md). --by-cause lists the failing ops grouped by aotc's error message (or
`wrong value` for numeric mismatches); --ops prints one line per op.

With --manifest (ctest conformance.summary) it also checks the results against the committed
manifest and exits 1 on any problem: every sample and every skipped op of the manifest has
exactly one result, a sample is skipped exactly when the manifest skips it, every status is
pass/fail/skip, and (with --expected-failures) no sample fails that the list does not name.
With --sample-cap N the results are those of `run_conformance.py --sample-cap N` (the first N
samples of each op, overload and dtype that run, the sanitizer suites) and are checked against
that part.

Usage: summarize.py results.jsonl [--by-cause] [--ops]
                    [--manifest DIR [--expected-failures FILE] [--sample-cap N]]
"""
import argparse
import collections
import json
import re
import sys


def summarize(lines):
    samples = [r for r in lines if r["kind"] == "sample"]
    per_op = collections.defaultdict(collections.Counter)
    for r in samples:
        for op in r["counts_for"]:
            per_op[op][r["status"]] += 1
    n = collections.Counter(r["status"] for r in samples)
    passing = sum(1 for c in per_op.values() if c["pass"] >= 2 and c["fail"] == 0)
    skipped_ops = sum(1 for r in lines if r["kind"] == "op" and r["status"] == "skip")
    line = (f"conformance: ops={len(per_op)} samples={len(samples)} passed={n['pass']} "
            f"failed={n['fail']} skipped={n['skip']} ops_passing={passing} "
            f"skipped_ops={skipped_ops}")
    return line, per_op


def cause(r):
    """The failure's cause: aotc's error message with names, shapes and numbers generalized,
    or `wrong value (<which results>)`."""
    if r.get("cause") == "mismatch":
        return "wrong value (" + ", ".join(sorted({p.split(":")[0].rstrip("_0123456789")
                                                    for p in r["reason"].split("; ")})) + ")"
    msg = re.sub(r"node '[^']*'", "node '…'", r["reason"])
    msg = re.sub(r"input '[^']*'", "input '…'", msg)
    msg = re.sub(r"'[^']*' is not a tuple-valued", "'…' is not a tuple-valued", msg)
    msg = re.sub(r"\b(f32|f64|i64|b8)\[[^\]]*\]", "<tensor>", msg)
    return re.sub(r"\[[\d, ]*\]", "[…]", msg)


def capped(samples, cap):
    """The ids of `samples` (manifest.json's "samples") that a run with --sample-cap `cap`
    takes: per op, overload and dtype (the id less its trailing index), the first `cap` that
    the manifest does not skip, by index (a group's indices need not start at 0), and its
    skipped ones before them; every id when `cap` is None (the sanitizer suites run a cap)."""
    if cap is None:
        return set(samples)
    groups = collections.defaultdict(list)
    for sid in samples:
        head, index = sid.rsplit(".", 1)
        groups[head].append((int(index), sid))
    taken = set()
    for members in groups.values():
        ran = 0
        for _, sid in sorted(members):
            if ran == cap:
                break
            taken.add(sid)
            ran += not samples[sid]["skip"]
    return taken


def check(lines, manifest, expected, cap=None):
    """Problems of results `lines` against `manifest` (manifest.json's content); with `cap`,
    against the part of it a --sample-cap `cap` run takes (capped())."""
    problems = []
    seen = collections.Counter(r["id"] for r in lines if r["kind"] == "sample")
    taken = capped(manifest["samples"], cap)
    for sid, s in manifest["samples"].items():
        if sid not in taken:
            continue
        if seen[sid] != 1:
            problems.append(f"sample {sid}: {seen[sid]} results, expected 1")
    for sid in sorted(set(seen) - set(manifest["samples"])):
        problems.append(f"sample {sid}: not in the manifest")
    for sid in sorted(x for x in seen if x in manifest["samples"] and x not in taken):
        problems.append(f"sample {sid}: beyond --sample-cap {cap}")
    skipped_ops = collections.Counter(r["op"] for r in lines if r["kind"] == "op")
    for op, e in manifest["ops"].items():
        if bool(e["skip"]) != (skipped_ops[op] == 1):
            problems.append(f"op {op}: skipped in the manifest: {bool(e['skip'])}, "
                            f"op results: {skipped_ops[op]}")
    for r in lines:
        if r["kind"] != "sample":
            continue
        if r["status"] not in ("pass", "fail", "skip"):
            problems.append(f"sample {r['id']}: unknown status {r['status']!r}")
        s = manifest["samples"].get(r["id"])
        if s is not None and bool(s["skip"]) != (r["status"] == "skip"):
            problems.append(f"sample {r['id']}: status {r['status']}, manifest skip "
                            f"{s['skip']!r}")
        if expected is not None and r["status"] == "fail" and r["id"] not in expected:
            problems.append(f"sample {r['id']}: fails and is not an expected failure: "
                            f"{r.get('reason', '')}")
    return problems


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("results")
    ap.add_argument("--by-cause", action="store_true")
    ap.add_argument("--ops", action="store_true")
    ap.add_argument("--manifest", help="folder with manifest.json: check the results against it")
    ap.add_argument("--expected-failures", help="with --manifest: the allowed failures")
    ap.add_argument("--sample-cap", type=int, default=None,
                    help="with --manifest: the results are of the first N samples of each op, overload and dtype")
    a = ap.parse_args()
    if a.sample_cap is not None and a.sample_cap < 1:
        ap.error("--sample-cap must be at least 1")
    with open(a.results) as f:
        lines = [json.loads(l) for l in f if l.strip()]
    line, per_op = summarize(lines)
    if a.ops:
        for op in sorted(per_op):
            c = per_op[op]
            print(f"{op}: passed={c['pass']} failed={c['fail']} skipped={c['skip']}")
    if a.by_cause:
        groups = collections.defaultdict(lambda: collections.defaultdict(int))
        for r in lines:
            if r["kind"] == "sample" and r["status"] == "fail":
                groups[cause(r)][r["op"]] += 1
        for c in sorted(groups, key=lambda c: -sum(groups[c].values())):
            ops = groups[c]
            print(f"[{sum(ops.values())} samples] {c}\n    " +
                  ", ".join(f"{o[5:]}({k})" for o, k in sorted(ops.items())))
    print(line)
    if a.manifest:
        with open(a.manifest + "/manifest.json") as f:
            manifest = json.load(f)
        expected = None
        if a.expected_failures:
            with open(a.expected_failures) as f:
                expected = {l.split("#")[0].strip() for l in f if l.split("#")[0].strip()}
        problems = check(lines, manifest, expected, a.sample_cap)
        for p in problems:
            print(f"error: {p}")
        print(f"checked against {a.manifest}/manifest.json: {len(problems)} problem"
              f"{'' if len(problems) == 1 else 's'}")
        return 1 if problems else 0
    return 0


if __name__ == "__main__":
    sys.exit(main())
