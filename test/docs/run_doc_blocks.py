#!/usr/bin/env python3
"""Runs the code blocks of the docs that are marked as runnable (docs/testing.md "Docs whose
code runs"), so a doc example that stops working fails the suite.

A block is marked by an HTML comment on the line right before its fence:

    <!-- doc-test: GROUP [file=NAME] [torch] [fallback=DIR] -->

Blocks of one GROUP in one file run in document order in one fresh directory:
  file=NAME    the block's text is written to NAME there (a CMakeLists.txt, a main.cpp, ...);
  otherwise    it runs by its fence language: sh/bash/console with `bash -euo pipefail`,
               python with a Python (the torch one for torch blocks, else /usr/bin/python3);
  torch        needs PyTorch: run only with AOTC_WITH_TORCH=1, else skipped (and the rest of
               the group still runs when the block has a fallback);
  fallback=DIR without torch, the files of DIR (relative to the repository) are copied into
               the group's directory instead of running the block: what the block would have
               written (e.g. the exported model.pt2), committed with the block as its generator.
Blocks see: PATH with the installed aotc first, AOTC_PREFIX (an install of the build, made
once per run with `cmake --install`), AOTC_SRC (the repository), PYTHONPATH with the
repository's python/ package.

Usage: run_doc_blocks.py --build BUILD --src SRC [--files A.md ...] [--list]
                         [--regenerate-fallbacks]
Prints `doc-blocks: N run, M skipped (why), K failed`; exit 1 when any block failed.
"""
import argparse
import os
import re
import shutil
import subprocess
import sys
import tempfile

DEFAULT_FILES = ["README.md", "docs/quickstart.md", "docs/building.md", "docs/runtime.md", "docs/abi.md",
                 "docs/python.md", "docs/training.md"]
MARK = re.compile(r"^<!--\s*doc-test:\s*(.*?)\s*-->\s*$")
FENCE = re.compile(r"^(\s*)(`{3,})\s*([\w+-]*)\s*$")
TIMEOUT = int(os.environ.get("AOTC_DOC_BLOCK_TIMEOUT", "300"))


class Block:
    def __init__(self, path, line, group, opts, lang, text):
        self.path, self.line, self.group, self.lang, self.text = path, line, group, lang, text
        self.file = opts.get("file")
        self.torch = "torch" in opts
        self.fallback = opts.get("fallback")

    def where(self):
        return f"{self.path}:{self.line}"


def parse(path, rel):
    """The marked blocks of one markdown file; a marker without a fence after it is an error."""
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
        opts = {}
        for w in words[1:]:
            k, _, v = w.partition("=")
            if k not in ("file", "torch", "fallback") or (k != "torch" and not v):
                errors.append(f"{rel}:{i + 1}: error: unknown doc-test option '{w}'")
            opts[k] = v
        f = FENCE.match(lines[i + 1]) if i + 1 < len(lines) else None
        if not f:
            errors.append(f"{rel}:{i + 1}: error: a doc-test marker must be followed by a fenced block")
            i += 1
            continue
        indent, ticks, lang = f.group(1), f.group(2), f.group(3)
        body, j = [], i + 2
        while j < len(lines) and not (lines[j].strip() == ticks and lines[j].startswith(indent)):
            body.append(lines[j][len(indent):] if lines[j].startswith(indent) else lines[j])
            j += 1
        if j == len(lines):
            errors.append(f"{rel}:{i + 2}: error: unterminated code block")
        blocks.append(Block(rel, i + 2, words[0], opts, lang, "\n".join(body) + "\n"))
        i = j + 1
    return blocks, errors


def torch_python(src):
    r = subprocess.run(["bash", os.path.join(src, "tools", "export", "torch-python.sh")], capture_output=True,
                       text=True)
    return r.stdout.strip()


def install(build, prefix):
    subprocess.run(["cmake", "--install", build, "--prefix", prefix], check=True, stdout=subprocess.DEVNULL)


def run_block(b, cwd, env, torch_py):
    if b.file:
        dst = os.path.join(cwd, b.file)
        os.makedirs(os.path.dirname(dst) or cwd, exist_ok=True)
        with open(dst, "w", encoding="utf-8") as f:
            f.write(b.text)
        return 0, ""
    if b.lang in ("sh", "bash", "console", "shell"):
        cmd = ["bash", "-euo", "pipefail", "-c", b.text]
    elif b.lang in ("python", "py", "python3"):
        cmd = [torch_py if b.torch else "/usr/bin/python3", "-c", b.text]
    else:
        return 1, f"a runnable block needs a language (sh or python), got '{b.lang}'"
    try:
        r = subprocess.run(cmd, cwd=cwd, env=env, capture_output=True, text=True, timeout=TIMEOUT)
    except subprocess.TimeoutExpired as e:
        out = (e.stdout or b"").decode("utf-8", "replace") if isinstance(e.stdout, bytes) else (e.stdout or "")
        return 124, out + f"\n(timed out after {TIMEOUT} s)"
    return r.returncode, r.stdout + r.stderr


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--build", required=True)
    ap.add_argument("--src", required=True)
    ap.add_argument("--files", nargs="*")
    ap.add_argument("--list", action="store_true")
    ap.add_argument("--regenerate-fallbacks", action="store_true",
                    help="run the torch blocks that have a fallback and copy what they wrote into it")
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
            print(f"{rel} {g}: " + ", ".join(f"{b.line}{' ' + b.file if b.file else ''}"
                                             f"{' torch' if b.torch else ''}" for b in bs))
        return 1 if errors else 0

    with_torch = os.environ.get("AOTC_WITH_TORCH") == "1" or a.regenerate_fallbacks
    torch_py = torch_python(src)
    if with_torch and not os.access(torch_py, os.X_OK):
        print(f"error: torch blocks need the torch python ({torch_py}): run tools/export/setup-venv.sh")
        return 1
    ran = skipped = failed = 0
    why = set()
    tmp = tempfile.mkdtemp(prefix="aotc-doc-blocks-")
    try:
        prefix = os.path.join(tmp, "prefix")
        install(build, prefix)
        env = dict(os.environ)
        env.update(AOTC_PREFIX=prefix, AOTC_SRC=src, PATH=os.path.join(prefix, "bin") + os.pathsep + env["PATH"],
                   PYTHONPATH=os.path.join(src, "python") + os.pathsep + env.get("PYTHONPATH", ""),
                   AOTC_CACHE_DIR=os.path.join(tmp, "cache"))
        for var in ("AOTC_BIN", "AOTC_RUNTIME_LIB", "AOTC_KERNELS_LIB"):
            env.pop(var, None)  # the docs' user has none of these: the installed prefix is found
        for n, ((rel, g), bs) in enumerate(groups.items()):
            cwd = os.path.join(tmp, f"g{n}-{g}")
            os.makedirs(cwd)
            for b in bs:
                if b.torch and not with_torch:
                    if b.fallback:
                        shutil.copytree(os.path.join(src, b.fallback), cwd, dirs_exist_ok=True)
                        print(f"{b.where()}: [{g}] torch block: used {b.fallback} (no AOTC_WITH_TORCH=1)")
                    else:
                        print(f"{b.where()}: [{g}] skipped: needs torch (AOTC_WITH_TORCH=1)")
                    skipped += 1
                    why.add("torch")
                    continue
                before = set(os.listdir(cwd))
                rc, out = run_block(b, cwd, env, torch_py)
                if rc != 0:
                    failed += 1
                    tail = "\n".join(out.rstrip().split("\n")[-25:])
                    print(f"{b.where()}: error: [{g}] block failed (exit {rc}):\n{tail}")
                    break  # the rest of the group builds on this block
                ran += 1
                print(f"{b.where()}: [{g}] ok" + (f" (wrote {b.file})" if b.file else ""))
                if a.regenerate_fallbacks and b.torch and b.fallback:
                    dst = os.path.join(src, b.fallback)
                    for f in sorted(set(os.listdir(cwd)) - before):
                        shutil.copy2(os.path.join(cwd, f), os.path.join(dst, f))
                        print(f"  regenerated {os.path.join(b.fallback, f)}")
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    reason = f" ({', '.join(sorted(why))})" if why else ""
    print(f"doc-blocks: {ran} run, {skipped} skipped{reason}, {failed + len(errors)} failed")
    return 1 if failed or errors else 0


if __name__ == "__main__":
    sys.exit(main())
