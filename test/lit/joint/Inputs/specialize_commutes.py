"""The two checks a stage that carries run-time sizes must pass (docs/dynamic-shapes.md, "Run-time
sizes through functionalize and decompose"):
  * its text reads back byte-identically (--start-from=STAGE --emit=STAGE);
  * specialize after the stage == the stage after specialize: the stage's text given sizes with
    --start-from=STAGE --specialize is byte-identical to the stage run on the input specialized at
    those sizes. A size folded to its largest value (a type or an argument) shows as a difference.
Usage: specialize_commutes.py AOTC INPUT STAGE DIR [--edit OLD=>NEW] SIZES... (INPUT: a .pt2, or
capture text read with --start-from=capture; SIZES: --specialize values, e.g. s17=2 or s48=3,s24=7;
--edit: the negative control, a size folded by hand into the stage's text). Prints one line per
check; exits 1 on the first that fails, with the first differing lines."""
import difflib
import os
import subprocess
import sys


def aotc(binary, *args):
    r = subprocess.run([binary, *args], capture_output=True, text=True, timeout=120)
    if r.returncode != 0:
        sys.exit(f"FAIL: aotc {' '.join(args)} exited {r.returncode}:\n{r.stderr}")
    return r.stdout


def same(what, a, b):
    if a == b:
        print(f"same: {what}")
        return
    diff = list(difflib.unified_diff(a.splitlines(), b.splitlines(), "specialized after", "specialized before", lineterm="", n=0))
    sys.exit(f"FAIL: {what} differ:\n" + "\n".join(diff[:12]))


def main():
    binary, src, stage, out = sys.argv[1:5]
    sizes = sys.argv[5:]
    start = ["--start-from=capture"] if not src.endswith(".pt2") else []
    text = aotc(binary, src, *start, f"--emit={stage}")
    if sizes[:1] == ["--edit"]:
        old, new = sizes[1].split("=>")
        if text.count(old) != 1:
            sys.exit(f"FAIL: --edit: '{old}' is not once in the {stage} text")
        text, sizes = text.replace(old, new), sizes[2:]
    path = os.path.join(out, f"{os.path.basename(src)}.{stage}.txt")
    with open(path, "w") as f:
        f.write(text)
    same(f"{stage} text reads back", text, aotc(binary, path, f"--start-from={stage}", f"--emit={stage}"))
    for at in sizes:
        after = aotc(binary, path, f"--start-from={stage}", "--specialize", at, f"--emit={stage}")
        before = aotc(binary, src, *start, "--specialize", at, f"--emit={stage}")
        same(f"{stage} at {at}", after, before)


if __name__ == "__main__":
    main()
