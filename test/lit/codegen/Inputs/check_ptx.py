"""Checks aotc's CUDA kernels (docs/cuda.md) from `--emit=kernels` and `--emit=ptx` text.

usage: check_ptx.py KERNELS.txt PROGRAM.ptx --name NAME [--ptxas PATH --arch sm_80 --arch sm_90]

Every kernel line with `schedule=[cuda=<mapping> grid=G block=B ...]` must have a PTX `.entry`
(<name>_fwd_kN / <name>_bwd_kN; a split-row kernel also <symbol>_final) and vice versa; every reducing kernel (warp-per-row,
block-per-row, column-block) must contain `shfl.sync.bfly`, the block ones also a barrier; every `vec=4` kernel a 16-byte `ld/st.global.v4`; no `atom.` / `red.` instruction anywhere; a kernel whose
domain has more than 4096 elements must launch more than one block; with --ptxas, the
PTX must assemble for every --arch with 0 spill bytes. Prints one summary line; exit 1
on the first violation (stdlib only).
"""
import argparse
import re
import subprocess
import sys


def fail(msg):
    print(f"check_ptx: FAIL: {msg}")
    sys.exit(1)


def kernels(path, name):
    out, section = {}, None
    for line in open(path):
        m = re.match(r"# (forward|backward): ", line)
        if m:
            section = "fwd" if m.group(1) == "forward" else "bwd"
            continue
        m = re.match(r"kernel (k\d+): .* domain=\[([0-9, ]*)\].* schedule=\[cuda=(\S+) grid=(\d+) block=(\d+)"
                     r"(?: vec=(\d+))?(?: final=(\d+)x(\d+) partials=scratch\+\d+)?\]$", line.rstrip("\n"))
        if m:
            dims = [int(d) for d in m.group(2).split(",") if d.strip()]
            names = set()
            for key in ("reads", "writes"):
                lm = re.search(r" " + key + r"=\[([^\]]*)\]", line)
                names |= {n.strip() for n in lm.group(1).split(",") if n.strip()} if lm else set()
            args = len(names) + (" checked" in line) + (m.group(7) is not None)
            numel = 1
            for d in dims:
                numel *= d
            out[f"{name}_{section}_{m.group(1)}"] = {
                "mapping": m.group(3), "grid": int(m.group(4)), "block": int(m.group(5)), "numel": numel,
                "vec": int(m.group(6) or 1), "line": line.rstrip("\n"), "args": args}
            if m.group(7):  # the second kernel of a split: folds the partials (column-block-final: a
                            # thread per column, no shuffles)
                out[f"{name}_{section}_{m.group(1)}_final"] = {
                    "mapping": m.group(3) + "-final", "grid": int(m.group(7)), "block": int(m.group(8)),
                    "numel": 0, "vec": 1, "line": "(second kernel of " + m.group(1) + ")", "args": args}
    return out


def entries(ptx):
    """.entry name -> body text (up to the next .entry)."""
    parts = re.split(r"^\.visible \.entry (\w+)\(", ptx, flags=re.M)
    return {parts[i]: parts[i + 1] for i in range(1, len(parts) - 1, 2)}


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("kernels")
    ap.add_argument("ptx")
    ap.add_argument("--name", required=True)
    ap.add_argument("--ptxas")
    ap.add_argument("--arch", action="append", default=[])
    ap.add_argument("--report", type=int, default=0,
                    help="also print the N largest kernels (by domain elements) with ptxas's registers "
                         "and shared memory per --arch")
    a = ap.parse_args()
    ks = kernels(a.kernels, a.name)
    ptx = open(a.ptx).read()
    if not ptx.startswith(".version"):
        fail("PTX does not start with its .version line")
    if "\0" in ptx:
        fail("PTX contains a NUL byte")
    es = entries(ptx)
    if set(ks) != set(es):
        fail(f"kernels {sorted(ks)} != PTX entries {sorted(es)}")
    # Also predicated ones (`@%p1 red.global.add.f32 ...`, the usual form of a guarded store).
    bad = re.findall(r"^\s*(?:@!?%\w+\s+)?((?:atom|red)\.\S+)", ptx, flags=re.M)
    if bad:
        fail(f"atomic instructions: {sorted(set(bad))}")
    # The host passes, per kernel, one pointer per distinct buffer read or written, then the
    # error word when `checked`, then the partials of a split: the .entry must take as many.
    for sym, k in ks.items():
        params = len(re.findall(r"\.param\s+\.\w+\s+\w+_param_\d+", es[sym].split(")", 1)[0]))
        if params != k["args"]:
            fail(f"{sym}: the PTX entry takes {params} parameters, the host passes {k['args']}")
    # Every butterfly shuffle spans the whole warp: clamp 31 and member mask -1 (all 32 lanes
    # execute it; a narrower width leaves lanes out of the mask, which PTX leaves undefined).
    for m in re.finditer(r"shfl\.sync\.bfly\.b32\s+[^,]+,\s*[^,]+,\s*[^,]+,\s*([^,]+),\s*([^;]+);", ptx):
        if m.group(1).strip() != "31" or m.group(2).strip() not in ("-1", "0xffffffff", "0xFFFFFFFF"):
            fail(f"shuffle with clamp {m.group(1).strip()} and member mask {m.group(2).strip()}: {m.group(0)}")
    warps = vec = 0
    for sym, k in ks.items():
        if k["vec"] == 4:
            vec += 1
            if not re.search(r"\b(ld|st)\.global\.v4\.(f32|b32|u32|s32)", es[sym]):
                fail(f"{sym}: vec=4 but no 16-byte ld/st.global.v4")
        if k["mapping"] in ("warp-per-row", "block-per-row", "column-block", "split-row", "split-row-final"):
            warps += 1
            if "shfl.sync.bfly" not in es[sym]:
                fail(f"{sym}: a reduction kernel without shfl.sync.bfly")
        if k["mapping"] in ("block-per-row", "column-block", "split-row", "split-row-final") and not re.search(r"\bbar\.sync\b|\bbarrier\.sync\b", es[sym]):
            fail(f"{sym}: a block reduction without a barrier")
        if k["numel"] > 4096 and k["grid"] <= 1:
            fail(f"{sym}: {k['numel']} elements in a single block")
    spills = 0
    usage = {}  # (kernel, arch) -> "R regs, S B smem"
    for arch in a.arch:
        r = subprocess.run([a.ptxas, f"-arch={arch}", "-O3", "-v", a.ptx, "-o", "/dev/null"],
                           capture_output=True, text=True)
        if r.returncode != 0:
            fail(f"ptxas -arch={arch}: {r.stderr.strip()}")
        for m in re.finditer(r"(\d+) bytes spill stores, (\d+) bytes spill loads", r.stderr):
            spills += int(m.group(1)) + int(m.group(2))
        for m in re.finditer(r"Compiling entry function '(\w+)' for '\w+'.*?Used (\d+) registers(?:, used \d+ barriers)?"
                             r"(?:, (\d+) bytes smem)?", r.stderr, flags=re.S):
            usage[(m.group(1), arch)] = f"{m.group(2)} regs, {m.group(3) or 0} B smem"
        if spills:
            fail(f"ptxas -arch={arch}: {spills} spill bytes")
    if a.report:
        for sym in sorted(ks, key=lambda s: (-ks[s]["numel"], s))[:a.report]:
            print(f"{sym}: {ks[sym]['line']}")
            for arch in a.arch:
                print(f"    {arch}: {usage.get((sym, arch), '?')}")
    print(f"check_ptx: ok kernels={len(ks)} reducing={warps} vec4={vec} archs={','.join(a.arch) or 'none'} "
          f"spill_bytes={spills}")


if __name__ == "__main__":
    main()
