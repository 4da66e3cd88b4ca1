#!/usr/bin/env python3
"""expect_exit.py CODE CMD ARGS...: runs CMD, forwards its stdout/stderr, and
exits 0 iff CMD exited with exactly CODE (a signal or another code fails, with
the code printed), so a lit test can pin "exit 1 = user error"."""
import subprocess
import sys

want = int(sys.argv[1])
r = subprocess.run(sys.argv[2:])
sys.stdout.flush()
if r.returncode != want:
    print("expect_exit: expected exit code %d, got %d" % (want, r.returncode))
    sys.exit(1)
