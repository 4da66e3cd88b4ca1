#!/usr/bin/env python3
"""The compiler is single-threaded: the reason the thread suite leaves its tests out.

Scans the compiler's sources (lib/, tools/aotc/, include/aotc/ under --root) for a thread of
their own (std::thread, std::jthread, std::async, pthread_create, OpenMP pragmas, LLVM's
thread pools, task dispatchers and parallel algorithms, ORC's concurrent compilation,
enableMultithreading) and for an MLIRContext made without MLIRContext::Threading::DISABLED
(its default: MLIR's passes would run on a thread pool), default-constructed, by make_unique
or new included. A constructor may span lines. Prints each
finding as file:line: and exits 1 if there is one; with --expect N (the negative control)
exits 0 iff there are exactly N. docs/testing.md "Sanitizer suites".
"""
import argparse
import os
import re
import sys

# A thread of the compiler's own: the standard library's, POSIX's, OpenMP's, LLVM's thread
# pools (DefaultThreadPool, StdThreadPool, ThreadPoolInterface, ...) and parallel algorithms,
# ORC's concurrent compilation.
THREADS = re.compile(r"std::(thread|jthread|async)\b|\bpthread_create\b|#\s*pragma\s+omp\b|"
                     r"\w*ThreadPool\w*|\bllvm::parallel\w*|\bparallelFor\w*\b|std::execution::par|"
                     r"\bsetNumCompileThreads\b|\bsetSupportConcurrentCompilation\b|"
                     r"\w*TaskDispatcher\b|\benableMultithreading\s*\(")
# An MLIRContext made: a named object, a temporary, make_unique/new. Its arguments run to the
# end of the statement (a constructor may span lines).
CONTEXT = re.compile(r"\bMLIRContext\s+\w+\s*(;|[({])|make_unique\s*<\s*(mlir::)?MLIRContext\s*>|"
                     r"\bnew\s+(mlir::)?MLIRContext\b")


def scan(path):
    found = []
    with open(path, encoding="utf-8", errors="replace") as f:
        lines = [l.split("//", 1)[0] for l in f]
    for n, code in enumerate(lines, 1):
        m = THREADS.search(code)
        if m:
            found.append(f"{path}:{n}: a thread of the compiler's own ({m.group(0)})")
        m = CONTEXT.search(code)
        if m:
            statement = "".join(lines[n - 1:n + 5])[m.start():].split(";", 1)[0]
            if "Threading::DISABLED" not in statement:
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
    if not files:
        print(f"error: no C++ sources under {a.root}")
        return 1
    found = [x for p in files for x in scan(p)]
    for x in found:
        print(x)
    print(f"compiler threads: {len(files)} files, {len(found)} findings (expected {a.expect})")
    return 0 if len(found) == a.expect else 1


if __name__ == "__main__":
    sys.exit(main())
