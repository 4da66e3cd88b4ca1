#!/usr/bin/env python3
"""The compiler is single-threaded: the reason the thread suite leaves its tests out.

Scans the compiler's sources (lib/, tools/aotc/, include/aotc/ under --root) for a thread of
their own (std::thread, std::jthread, std::async, pthread_create, OpenMP pragmas, LLVM's
thread pools and parallel algorithms) and for an MLIRContext constructed without
MLIRContext::Threading::DISABLED (MLIR's passes would run on a thread pool). Prints each
finding as file:line: and exits 1 if there is one; with --expect N (the negative control)
exits 0 iff there are exactly N. docs/testing.md "Sanitizer suites".
"""
import argparse
import os
import re
import sys

THREADS = re.compile(r"std::(thread|jthread|async)\b|\bpthread_create\b|#\s*pragma\s+omp\b|"
                     r"\bThreadPool\b|\bllvm::parallel\w*|\bparallelFor\w*\b|std::execution::par")
CONTEXT = re.compile(r"\bMLIRContext\s+\w+\s*[({]([^;]*)")


def scan(path):
    found = []
    with open(path, encoding="utf-8", errors="replace") as f:
        for n, line in enumerate(f, 1):
            code = line.split("//", 1)[0]
            m = THREADS.search(code)
            if m:
                found.append(f"{path}:{n}: a thread of the compiler's own ({m.group(0)})")
            m = CONTEXT.search(code)
            if m and "Threading::DISABLED" not in m.group(1):
                found.append(f"{path}:{n}: an MLIRContext without MLIRContext::Threading::DISABLED")
    return found


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--root", required=True, help="the source tree, or a folder of files to scan")
    ap.add_argument("--expect", type=int, default=0, help="the number of findings that passes")
    a = ap.parse_args()
    dirs = [os.path.join(a.root, d) for d in ("lib", "tools/aotc", "include/aotc")]
    dirs = [d for d in dirs if os.path.isdir(d)] or [a.root]
    files = sorted(os.path.join(dp, f) for d in dirs for dp, _, fs in os.walk(d) for f in fs
                   if f.endswith((".cpp", ".h", ".hpp", ".inc")))
    found = [x for p in files for x in scan(p)]
    for x in found:
        print(x)
    print(f"compiler threads: {len(files)} files, {len(found)} findings (expected {a.expect})")
    return 0 if len(found) == a.expect else 1


if __name__ == "__main__":
    sys.exit(main())
