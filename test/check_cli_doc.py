#!/usr/bin/env python3
"""ctest docs.cli_flags: every flag and choice `aotc --help` prints is documented in docs/cli.md.

Reads the help of `aotc` and of each subcommand (CLI11's layout: one option per line,
`  --name TYPE[:{a,b}]`, subcommands under "Subcommands:") and checks that docs/cli.md
names each long flag as `--name` inside backticks (a table row or a usage line), each
subcommand as `aotc NAME`, and each value of a choice list (--emit's stages, --target's
targets, ...) in backticks. Prints every missing entry at once; exit 1 when any is missing.

--drop FLAG removes every mention of FLAG from the doc before checking: the negative
control (docs.cli_flags.negative_control) drops one and must fail.
Usage: check_cli_doc.py AOTC DOC [--drop FLAG]
"""
import argparse
import re
import subprocess
import sys


def help_of(aotc, args):
    r = subprocess.run([aotc] + args + ["--help"], capture_output=True, text=True, timeout=60)
    if r.returncode != 0:
        sys.exit(f"error: {aotc} {' '.join(args)} --help exited {r.returncode}: {r.stderr}")
    return r.stdout


def parse_help(text):
    """(flags, choices, subcommands) of one help text."""
    flags, choices, subs = [], {}, []
    section = None
    for line in text.splitlines():
        if re.match(r"^\S.*:$", line):
            section = line[:-1]
            continue
        if section == "Subcommands":
            m = re.match(r"^  (\w+)\s", line)
            if m:
                subs.append(m.group(1))
            continue
        m = re.match(r"^  (?:-\w,)?(--[\w-]+)(?:\s+(\S+))?", line)
        if not m:
            continue
        flag, typ = m.group(1), m.group(2) or ""
        if flag in ("--help", "--version"):
            continue
        flags.append(flag)
        c = re.search(r":\{([^}]*)\}", typ)
        if c:
            choices[flag] = c.group(1).split(",")
    return flags, choices, subs


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("aotc")
    ap.add_argument("doc")
    ap.add_argument("--drop", help="remove this flag's mentions from the doc first")
    a = ap.parse_args()
    doc = open(a.doc, encoding="utf-8").read()
    if a.drop:
        doc = re.sub(re.escape(a.drop) + r"(?![\w-])", "", doc)
    quoted = " ".join(re.findall(r"`([^`]*)`", doc)) + "\n" + "\n".join(
        re.findall(r"```(?:\w*)\n(.*?)```", doc, re.S))

    missing = []
    flags, choices, subs = parse_help(help_of(a.aotc, []))
    helps = [("aotc", flags, choices)]
    for s in subs:
        f, c, _ = parse_help(help_of(a.aotc, [s]))
        helps.append((f"aotc {s}", f, c))
        if not re.search(rf"\baotc {s}\b", quoted):
            missing.append(f"subcommand `aotc {s}`")
    checked = 0
    for where, fl, ch in helps:
        for f in fl:
            checked += 1
            if not re.search(re.escape(f) + r"(?![\w-])", quoted):
                missing.append(f"{where}: flag `{f}`")
        for f, values in ch.items():
            for v in values:
                checked += 1
                if not re.search(r"(?<![\w-])" + re.escape(v) + r"(?![\w-])", quoted):
                    missing.append(f"{where}: `{f}` value `{v}`")
    for m in missing:
        print(f"{a.doc}: error: not documented: {m}")
    print(f"cli-doc: {checked} flags and values checked in {len(helps)} help texts, {len(missing)} missing")
    return 1 if missing else 0


if __name__ == "__main__":
    sys.exit(main())
