#!/usr/bin/env python3
"""Fails when a ctest has no TIMEOUT (ctest timeouts.every_test_has_one; cmake/TestTimeouts.cmake).

Reads `ctest --show-only=json-v1` of the build directory (or a saved copy of it, for the
negative control) and lists every test without a positive TIMEOUT property, and the lit
suite's per-test limit from test/lit/lit.site.cfg.py (aotc_lit_timeout; --no-lit: a build
without lit, the thread suite's).

Usage: check_timeouts.py --build-dir DIR [--no-lit] | --json FILE
"""
import argparse
import json
import os
import re
import subprocess
import sys


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    g = ap.add_mutually_exclusive_group(required=True)
    g.add_argument("--build-dir")
    g.add_argument("--json")
    ap.add_argument("--no-lit", action="store_true", help="the build has no lit suite (the thread suite)")
    a = ap.parse_args()
    if a.json:
        data = json.load(open(a.json))
    else:
        out = subprocess.run(["ctest", "--show-only=json-v1"], cwd=a.build_dir, check=True,
                             capture_output=True, text=True, timeout=120).stdout
        data = json.loads(out)
    tests = data.get("tests", [])
    missing, longest = [], (0, "")
    for t in tests:
        props = {p["name"]: p["value"] for p in t.get("properties", [])}
        to = float(props.get("TIMEOUT", 0) or 0)
        if to <= 0:
            missing.append(t["name"])
        longest = max(longest, (to, t["name"]))
    for m in missing:
        print(f"error: ctest '{m}' has no TIMEOUT: call aotc_test_timeouts() in its CMakeLists.txt "
              f"or set one (cmake/TestTimeouts.cmake)")
    status = 1 if missing or not tests else 0
    # The lit suite's own limit (--no-lit: a build without lit, the thread suite's).
    if a.build_dir and not a.no_lit:
        site = os.path.join(a.build_dir, "test", "lit", "lit.site.cfg.py")
        m = re.search(r"aotc_lit_timeout\s*=\s*(\d+)", open(site).read()) if os.path.exists(site) else None
        if not m or int(m.group(1)) <= 0:
            print(f"error: {site} sets no positive aotc_lit_timeout")
            status = 1
        else:
            print(f"lit: {m.group(1)} s per test")
    print(f"timeouts: {len(tests)} tests, {len(missing)} without a TIMEOUT; "
          f"longest {longest[0]:.0f} s ({longest[1]})")
    return status


if __name__ == "__main__":
    sys.exit(main())
