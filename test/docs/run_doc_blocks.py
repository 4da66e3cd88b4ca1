#!/usr/bin/env python3
"""Runs the code blocks of the docs that are marked as runnable (docs/testing.md "Docs whose
code runs"), so a doc example that stops working fails the suite. Python 3 standard library only.

A block is marked by an HTML comment on the line right before its fence:

    <!-- doc-test: GROUP [file=NAME] [torch] [fallback=DIR] -->

Blocks of one GROUP in one file run in document order in one fresh directory:
  file=NAME    the block's text is written to NAME there (a CMakeLists.txt, a main.cpp, ...);
  otherwise    it runs by its fence language: sh/bash/console with `bash -euo pipefail`,
               python with a Python: the torch one when the group has a torch block and torch
               is on, else /usr/bin/python3;
  torch        needs PyTorch: runs only with AOTC_WITH_TORCH=1, else skipped with the reason
               printed (the group's other blocks still run);
  fallback=DIR without torch, the files DIR/generator.json lists (what the block wrote when it
               last ran: e.g. the exported model.pt2, committed with the block as its
               generator) are copied into the group's directory instead of running the block,
               so the blocks after it still run. generator.json records the block's SHA-256, the
               torch version and each file's SHA-256: a block edited since (or a file changed
               by hand) fails until --regenerate-fallbacks reruns the block with torch.
Blocks see: PATH with the installed aotc first; AOTC_PREFIX, an install of the build made once
per run with `cmake --install` (only when some block that runs mentions aotc); AOTC_SRC, the
repository; PYTHONPATH with a copy of python/aotc outside the tree (as `pip install` puts it,
so the package finds aotc on PATH and its libraries in $AOTC_PREFIX/lib, not the build tree);
AOTC_CACHE_DIR in the run's temporary directory. AOTC_BIN, AOTC_RUNTIME_LIB, AOTC_KERNELS_LIB
and AOTC_OMP_LIB are removed: a reader of the docs has none of them.

Usage: run_doc_blocks.py --build BUILD --src SRC [--files A.md ...] [--list]
                         [--regenerate-fallbacks] [--keep]
Prints `doc-blocks: N run, M skipped (why), K failed`; exit 1 when any block failed.
AOTC_DOC_BLOCK_TIMEOUT: seconds per block (default 300).
"""
import argparse
import hashlib
import json
import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import time

DEFAULT_FILES = ["README.md", "docs/quickstart.md", "docs/building.md", "docs/runtime.md", "docs/abi.md",
                 "docs/python.md", "docs/training.md", "docs/distributed.md"]
MARK = re.compile(r"^<!--\s*doc-test:\s*(.*?)\s*-->\s*$")
FENCE = re.compile(r"^(\s*)(`{3,})\s*([\w+-]*)\s*$")
SHELLS = ("sh", "bash", "console", "shell")
PYTHONS = ("python", "py", "python3")
TIMEOUT = int(os.environ.get("AOTC_DOC_BLOCK_TIMEOUT", "300"))
GENERATOR = "generator.json"
USES_AOTC = re.compile(r"aotc", re.IGNORECASE)


class Block:
    def __init__(self, path, line, group, opts, lang, text):
        self.path, self.line, self.group, self.lang, self.text = path, line, group, lang, text
        self.file = opts.get("file")
        self.torch = "torch" in opts
        self.fallback = opts.get("fallback")

    def where(self):
        return f"{self.path}:{self.line}"

    def sha256(self):
        return hashlib.sha256(self.text.encode("utf-8")).hexdigest()


def parse(path, rel):
    """The marked blocks of one markdown file, and the errors of malformed markers."""
    lines = open(path, encoding="utf-8").read().split("\n")
    blocks, errors = [], []
    i = 0
    while i < len(lines):
        m = MARK.match(lines[i])
        if not m:
            i += 1
            continue
        words = m.group(1).split()
        if not words:
            errors.append(f"{rel}:{i + 1}: error: doc-test marker without a group")
            i += 1
            continue
        opts, bad = {}, False
        for w in words[1:]:
            k, eq, v = w.partition("=")
            if k not in ("file", "torch", "fallback") or (k == "torch") == bool(eq) or (eq and not v):
                errors.append(f"{rel}:{i + 1}: error: unknown doc-test option '{w}'")
                bad = True
            opts[k] = v
        f = FENCE.match(lines[i + 1]) if i + 1 < len(lines) else None
        if not f:
            errors.append(f"{rel}:{i + 1}: error: a doc-test marker must be on the line right before a fence")
            i += 1
            continue
        indent, ticks, lang = f.group(1), f.group(2), f.group(3)
        body, j = [], i + 2
        while j < len(lines) and not (lines[j].strip() == ticks and lines[j].startswith(indent)):
            body.append(lines[j][len(indent):] if lines[j].startswith(indent) else lines[j])
            j += 1
        if j == len(lines):
            errors.append(f"{rel}:{i + 2}: error: unterminated code block")
        b = Block(rel, i + 2, words[0], opts, lang, "\n".join(body) + "\n")
        if not b.file and lang not in SHELLS + PYTHONS:
            errors.append(f"{b.where()}: error: a runnable block needs the language sh or python "
                          f"(or file=NAME), got '{lang}'")
            bad = True
        if b.fallback and not b.torch:
            errors.append(f"{b.where()}: error: fallback= is for torch blocks")
            bad = True
        if not bad:
            blocks.append(b)
        i = j + 1
    return blocks, errors


def torch_python(src):
    r = subprocess.run(["bash", os.path.join(src, "tools", "export", "torch-python.sh")], capture_output=True,
                       text=True)
    return r.stdout.strip()


def tail(text, n=25):
    return "\n".join(text.rstrip().split("\n")[-n:])


def run_cmd(cmd, cwd, env):
    """Runs one block in its own process group, so that a timeout ends everything it started."""
    p = subprocess.Popen(cmd, cwd=cwd, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                         stdin=subprocess.DEVNULL, text=True, errors="replace", start_new_session=True)
    try:
        out, _ = p.communicate(timeout=TIMEOUT)
        return p.returncode, out
    except subprocess.TimeoutExpired:
        os.killpg(p.pid, signal.SIGKILL)
        out, _ = p.communicate()
        return 124, (out or "") + f"\n(timed out after {TIMEOUT} s: AOTC_DOC_BLOCK_TIMEOUT)"


def run_block(b, cwd, env, python):
    if b.file:
        dst = os.path.join(cwd, b.file)
        os.makedirs(os.path.dirname(dst), exist_ok=True)
        with open(dst, "w", encoding="utf-8") as f:
            f.write(b.text)
        return 0, ""
    if b.lang in SHELLS:
        return run_cmd(["bash", "-euo", "pipefail", "-c", b.text], cwd, env)
    return run_cmd([python, "-c", b.text], cwd, env)


def snapshot(d):
    """name -> (size, mtime) of the plain files directly in d."""
    out = {}
    for n in os.listdir(d):
        p = os.path.join(d, n)
        if os.path.isfile(p):
            st = os.stat(p)
            out[n] = (st.st_size, st.st_mtime_ns)
    return out


def file_sha256(p):
    with open(p, "rb") as f:
        return hashlib.sha256(f.read()).hexdigest()


def use_fallback(b, src, cwd):
    """Copies the fallback's files into cwd; an error text when it is missing or stale."""
    d = os.path.join(src, b.fallback)
    regen = (f"regenerate it with torch: AOTC_WITH_TORCH=1 python3 test/docs/run_doc_blocks.py --build build "
             f"--src . --files {b.path} --regenerate-fallbacks")
    try:
        with open(os.path.join(d, GENERATOR), encoding="utf-8") as f:
            gen = json.load(f)
    except (OSError, ValueError) as e:
        return f"fallback {b.fallback}: no readable {GENERATOR} ({e}); {regen}"
    if gen.get("block_sha256") != b.sha256():
        return (f"fallback {b.fallback} was written by another version of this block (it changed since; "
                f"{GENERATOR} records {gen.get('doc')}:{gen.get('line')}); {regen}")
    for name, sha in sorted(gen.get("files", {}).items()):
        p = os.path.join(d, name)
        if not os.path.isfile(p) or file_sha256(p) != sha:
            return f"fallback {b.fallback}: {name} is missing or not what the block wrote; {regen}"
        shutil.copy2(p, os.path.join(cwd, name))
    return None


def regenerate(b, src, cwd, before, torch_py):
    """Copies what block b wrote or changed in cwd into its fallback directory, with generator.json."""
    d = os.path.join(src, b.fallback)
    os.makedirs(d, exist_ok=True)
    after = snapshot(cwd)
    written = sorted(n for n in after if before.get(n) != after[n])
    version = subprocess.run([torch_py, "-c", "import torch; print(torch.__version__)"], capture_output=True,
                             text=True).stdout.strip()
    try:
        with open(os.path.join(d, GENERATOR), encoding="utf-8") as f:
            old = json.load(f).get("files", {})
    except (OSError, ValueError):
        old = {}
    for n in old:
        if n not in written and os.path.isfile(os.path.join(d, n)):
            os.remove(os.path.join(d, n))
    files = {}
    for n in written:
        shutil.copy2(os.path.join(cwd, n), os.path.join(d, n))
        files[n] = file_sha256(os.path.join(d, n))
        print(f"  regenerated {os.path.join(b.fallback, n)} ({os.path.getsize(os.path.join(d, n))} bytes)")
    gen = {"doc": b.path, "line": b.line, "group": b.group, "block_sha256": b.sha256(), "torch": version,
           "files": files}
    with open(os.path.join(d, GENERATOR), "w", encoding="utf-8") as f:
        json.dump(gen, f, indent=2)
        f.write("\n")


def python_package(src, dst):
    """python/aotc copied outside the tree, as `pip install` puts it: the package then finds aotc
    on PATH and its libraries beside it, not the build tree next to python/."""
    shutil.copytree(os.path.join(src, "python", "aotc"), os.path.join(dst, "aotc"),
                    ignore=shutil.ignore_patterns("__pycache__", "*.pyc"))
    return dst


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--build", required=True, help="the build directory to install (cmake --install)")
    ap.add_argument("--src", required=True, help="the repository root")
    ap.add_argument("--files", nargs="*", help="markdown files (relative to --src); default: the user docs")
    ap.add_argument("--list", action="store_true", help="list the marked blocks, run nothing")
    ap.add_argument("--regenerate-fallbacks", action="store_true",
                    help="run the torch blocks that have a fallback= and store what they wrote there")
    ap.add_argument("--keep", action="store_true", help="keep the temporary directory (its path is printed)")
    a = ap.parse_args()
    src, build = os.path.abspath(a.src), os.path.abspath(a.build)
    files = a.files or DEFAULT_FILES
    groups, errors = {}, []
    for rel in files:
        path = rel if os.path.isabs(rel) else os.path.join(src, rel)
        blocks, errs = parse(path, rel)
        errors += errs
        for b in blocks:
            groups.setdefault((rel, b.group), []).append(b)
    for e in errors:
        print(e)
    if a.list:
        for (rel, g), bs in groups.items():
            print(f"{rel} [{g}]: " + ", ".join(
                f"{b.line}{' ' + b.file if b.file else ' ' + b.lang}{' torch' if b.torch else ''}"
                f"{' fallback=' + b.fallback if b.fallback else ''}" for b in bs))
        print(f"doc-blocks: {sum(map(len, groups.values()))} marked in {len(groups)} groups")
        return 1 if errors else 0

    with_torch = os.environ.get("AOTC_WITH_TORCH") == "1" or a.regenerate_fallbacks
    torch_py = torch_python(src)
    if with_torch and not os.access(torch_py, os.X_OK):
        print(f"error: torch blocks need the torch python ({torch_py}): run tools/export/setup-venv.sh")
        return 1
    ran = skipped = failed = 0
    why = set()
    tmp = tempfile.mkdtemp(prefix="aotc-doc-blocks-")
    prefix = os.path.join(tmp, "prefix")
    env = dict(os.environ)
    for var in ("AOTC_BIN", "AOTC_RUNTIME_LIB", "AOTC_KERNELS_LIB", "AOTC_OMP_LIB", "AOTC_PREFIX"):
        env.pop(var, None)  # the docs' reader has none of these: the installed prefix is found
    env.update(AOTC_PREFIX=prefix, AOTC_SRC=src, PATH=os.path.join(prefix, "bin") + os.pathsep + env["PATH"],
               PYTHONPATH=os.path.join(tmp, "site") + (os.pathsep + env["PYTHONPATH"] if env.get("PYTHONPATH")
                                                         else ""),
               AOTC_CACHE_DIR=os.path.join(tmp, "cache"), PYTHONDONTWRITEBYTECODE="1")
    installed = False
    t0 = time.monotonic()
    try:
        for n, ((rel, g), bs) in enumerate(groups.items()):
            cwd = os.path.join(tmp, f"g{n}-{g}")
            os.makedirs(cwd)
            torch_group = with_torch and any(b.torch for b in bs)
            python = torch_py if torch_group else "/usr/bin/python3"
            runs = [b for b in bs if not (b.torch and not with_torch)]
            if not installed and any(USES_AOTC.search(b.text) for b in runs):
                t = time.monotonic()
                r = subprocess.run(["cmake", "--install", build, "--prefix", prefix], capture_output=True, text=True)
                if r.returncode != 0:
                    print(f"error: cmake --install {build} --prefix {prefix} failed:\n{tail(r.stdout + r.stderr)}")
                    return 1
                python_package(src, os.path.join(tmp, "site"))
                installed = True
                print(f"installed {build} into $AOTC_PREFIX={prefix} ({time.monotonic() - t:.1f} s)")
            for b in bs:
                if b.torch and not with_torch:
                    if b.fallback:
                        err = use_fallback(b, src, cwd)
                        if err:
                            failed += 1
                            print(f"{b.where()}: error: [{g}] {err}")
                            break
                    skipped += 1
                    why.add("torch")
                    if b.fallback:
                        print(f"{b.where()}: [{g}] torch block skipped (no AOTC_WITH_TORCH=1): "
                              f"used its fallback {b.fallback}")
                    else:
                        print(f"{b.where()}: [{g}] skipped: needs torch (AOTC_WITH_TORCH=1)")
                    continue
                before = snapshot(cwd)
                t = time.monotonic()
                rc, out = run_block(b, cwd, env, python)
                if rc != 0:
                    failed += 1
                    print(f"{b.where()}: error: [{g}] block failed (exit {rc}) in {cwd}"
                          f"{'' if a.keep else ' (--keep keeps it)'}; its output's end:\n"
                          f"{tail(out)}")
                    break  # the rest of the group builds on this block
                ran += 1
                print(f"{b.where()}: [{g}] ok" + (f" (wrote {b.file})" if b.file else f" ({time.monotonic() - t:.1f} s)"))
                if a.regenerate_fallbacks and b.torch and b.fallback:
                    regenerate(b, src, cwd, before, torch_py)
    finally:
        if a.keep:
            print(f"kept {tmp}")
        else:
            shutil.rmtree(tmp, ignore_errors=True)
    reason = f" ({', '.join(sorted(why))})" if why else ""
    print(f"({time.monotonic() - t0:.0f} s)")
    print(f"doc-blocks: {ran} run, {skipped} skipped{reason}, {failed + len(errors)} failed")
    return 1 if failed or errors else 0


if __name__ == "__main__":
    sys.exit(main())
