#!/usr/bin/env python3
"""Partition parity: aotc's forward/backward split vs the one torch.compile (Inductor) uses.

    tools/parity/compare.py --aotc build/tools/aotc/aotc [--partitioner min-cut|default]
        [--records test/fixtures/inductor] [--models mlp,ln_gelu] [--table docs/partition.md]
        [--expect-worse] [-v]

Stdlib only. For every record folder <records>/<model>/ (written by capture_inductor.py:
forward.txt, backward.txt, meta.json, SHA256SUMS; the checksums are verified first) it runs
`aotc <meta.aotc_source> --emit=partition --partitioner=P` and applies the SAME definitions
to both partitions (docs/partition.md, "Definitions"):

  saved     backward placeholders other than tangents (aotc: role=saved only; its backward
            also receives the primals, which are graph inputs either way)
  bytes     distinct storages among the saved tensors: each is followed through view ops to
            its base in the forward graph; bases that are forward graph inputs are excluded
            (torch saves inputs and views of them, e.g. permute(weight), for free)
  recomputed  backward call nodes that depend on no tangent (transitively)
  FLOPs     of the recomputed nodes, by op class from the table in docs/partition.md:
            pointwise = output numel, reduction = input numel, view/copy/factory = 0,
            mm = 2mnk, addmm = 2mnk + mn, bmm = 2bmnk, scatter = src numel

A graph is "worse" when aotc saves more bytes OR recomputes more FLOPs than torch. A record
whose meta.json says torch.compile's gradients differ from eager (check.grads_match_eager
false: a torch bug, its partition is not a valid reference) is printed but not compared.
Prints one line per graph, then
  partition-parity: graphs=<N compared> aotc_bytes=<sum> torch_bytes=<sum> worse=<n> \
      aotc_recompute_flops=<sum> torch_recompute_flops=<sum> torch_invalid=<n>
Exit: 0 when worse == 0 (with --expect-worse: when worse > 0), 1 otherwise, 2 on bad input
(checksum mismatch, unparsable graph, op missing from the FLOPs table, aotc failing).
"""
import argparse
import hashlib
import json
import os
import re
import subprocess
import sys

REPO = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))
ITEMSIZE = {"f64": 8, "f32": 4, "f16": 2, "bf16": 2, "i64": 8, "i32": 4, "i16": 2, "i8": 1,
            "u8": 1, "b8": 1}
CLASSES = {"pointwise", "reduction", "view", "copy", "factory", "getitem", "mm", "addmm", "bmm",
           "scatter"}


class ParityError(Exception):
    pass


# ---- FX text -------------------------------------------------------------------------------

class Node:
    def __init__(self, name, kind, target=None, types=None, inputs=()):
        self.name, self.kind, self.target = name, kind, target
        self.types = types      # list of (dtype, shape); None for a tuple-valued node
        self.inputs = list(inputs)


class Graph:
    def __init__(self, name):
        self.name = name
        self.nodes = {}         # name -> Node, in graph order
        self.outputs = []

    def add(self, n):
        if n.name in self.nodes:
            raise ParityError(f"{self.name}: duplicate node '{n.name}'")
        self.nodes[n.name] = n


def parse_type(text, where):
    m = re.match(r"^([a-z]+\d*)\[([^\]]*)\]", text)
    if not m or m.group(1) not in ITEMSIZE:
        raise ParityError(f"{where}: unsupported type annotation '{text}'")
    dims = [int(d) for d in m.group(2).split(",") if d.strip()]
    return (m.group(1), dims)


def numel(t):
    n = 1
    for d in t[1]:
        n *= d
    return n


def nbytes(t):
    return numel(t) * ITEMSIZE[t[0]]


_STRING = re.compile(r"'(?:[^'\\]|\\.)*'|\"(?:[^\"\\]|\\.)*\"")
_IDENT = re.compile(r"(?<![\w.])([A-Za-z_]\w*)(?![\w.(])(?!\s*=(?!=))")
_SIG = re.compile(r"^\s+def (\w+)\(self(.*)\):\s*$")
_PARAM = re.compile(r"(\w+): \"([^\"]*)\"")
_STMT = re.compile(r"^\s+(\w+)(?:: \"([^\"]*)\")? = (.*)$")


def refs(text, graph):
    """Names of the graph's nodes an argument string reads (strings and kwarg names ignored)."""
    return [m.group(1) for m in _IDENT.finditer(_STRING.sub("''", text))
            if m.group(1) in graph.nodes]


def call_args(rhs, where):
    """'torch.ops.aten.mm.default(a, b);  a = None' -> ('aten.mm.default', 'a, b')."""
    m = re.match(r"torch\.ops\.([\w.]+)\(", rhs)
    if not m:
        raise ParityError(f"{where}: cannot parse '{rhs}'")
    depth, start = 0, m.end() - 1
    for i in range(start, len(rhs)):
        c = rhs[i]
        if c in "([":
            depth += 1
        elif c in ")]":
            depth -= 1
            if depth == 0:
                return m.group(1), rhs[start + 1:i]
    raise ParityError(f"{where}: unbalanced parentheses in '{rhs}'")


def parse_methods(text, path):
    """Every `def <name>(self, ...)` method of a print_readable text -> {name: Graph}."""
    graphs, g = {}, None
    for lineno, line in enumerate(text.splitlines(), 1):
        where = f"{path}:{lineno}"
        if not line.strip() or line.lstrip().startswith("#"):
            continue
        m = _SIG.match(line)
        if m:
            g = Graph(f"{path}:{m.group(1)}")
            graphs[m.group(1)] = g
            for pm in _PARAM.finditer(m.group(2)):
                g.add(Node(pm.group(1), "placeholder", types=[parse_type(pm.group(2), where)]))
            continue
        if g is None:
            continue
        s = line.strip()
        if s.startswith("return"):
            g.outputs = refs(s[len("return"):], g)
            g = None
            continue
        m = _STMT.match(line)
        if not m:
            raise ParityError(f"{where}: cannot parse '{s}'")
        name, annot, rhs = m.groups()
        types = [parse_type(annot, where)] if annot else None
        gi = re.match(r"^(\w+)\[(\d+)\]\s*(;|$)", rhs)
        if gi:
            if gi.group(1) not in g.nodes:
                raise ParityError(f"{where}: '{gi.group(1)}' is not defined")
            g.add(Node(name, "call", "getitem", types, [gi.group(1)]))
            continue
        target, args = call_args(rhs, where)
        g.add(Node(name, "call", target, types, refs(args, g)))
    return graphs


# ---- FLOPs table (docs/partition.md) -----------------------------------------------------

def load_table(path):
    """The rows between <!-- flops-table --> and <!-- /flops-table -->: `| class | FLOPs | ops |`,
    ops in backticks (`aten.add`, `prims.iota`, `getitem`). Returns {op packet: class}."""
    with open(path) as f:
        text = f.read()
    m = re.search(r"<!-- flops-table -->(.*?)<!-- /flops-table -->", text, re.S)
    if not m:
        raise ParityError(f"{path}: no <!-- flops-table --> section")
    table = {}
    for row in m.group(1).splitlines():
        cells = [c.strip() for c in row.strip().strip("|").split("|")]
        if len(cells) != 3 or cells[0] in ("class", "") or set(cells[0]) <= {"-", ":"}:
            continue
        cls = cells[0].strip("`")
        if cls not in CLASSES:
            raise ParityError(f"{path}: unknown op class '{cls}'")
        for op in re.findall(r"`([\w.]+)`", cells[2]):
            if op in table:
                raise ParityError(f"{path}: op '{op}' listed twice")
            table[op] = cls
    return table


def packet(target):
    """'aten.add.Tensor' -> 'aten.add'; 'getitem' -> 'getitem'."""
    parts = target.split(".")
    return ".".join(parts[:2]) if len(parts) >= 3 else target


def op_class(node, table, where):
    cls = table.get(packet(node.target))
    if cls is None:
        raise ParityError(f"{where}: op '{node.target}' (node '{node.name}') is not in the FLOPs "
                          f"table of docs/partition.md")
    return cls


def flops(node, graph, table, where):
    cls = op_class(node, table, where)
    if cls in ("view", "copy", "factory", "getitem"):
        return 0
    out = node.types[0] if node.types else None
    ins = [graph.nodes[i] for i in node.inputs]

    def arg_type(i):
        if i >= len(ins) or not ins[i].types:
            raise ParityError(f"{where}: '{node.name}' ({node.target}) lacks tensor argument {i}")
        return ins[i].types[0]

    if cls == "pointwise":
        if out is None:
            raise ParityError(f"{where}: pointwise '{node.name}' has no result type")
        return numel(out)
    if cls == "reduction":
        return numel(arg_type(0))
    if cls == "scatter":          # scatter_add(self, dim, index, src): one add per src element
        return numel(arg_type(2))
    if cls == "mm":
        return 2 * numel(out) * arg_type(0)[1][-1]
    if cls == "bmm":
        return 2 * numel(out) * arg_type(0)[1][-1]
    if cls == "addmm":            # addmm(bias, mat1, mat2) = bias + mat1 @ mat2
        return 2 * numel(out) * arg_type(1)[1][-1] + numel(out)
    raise AssertionError(cls)


# ---- the definitions, applied to one partition ----------------------------------------------

def storage_base(name, fw, table, where):
    """Follows view ops (class 'view') in the forward graph to the node owning the storage."""
    n = fw.nodes.get(name)
    if n is None:
        raise ParityError(f"{where}: saved tensor '{name}' is not a forward node")
    seen = set()
    while n.kind == "call" and op_class(n, table, where) == "view":
        if n.name in seen or not n.inputs:
            raise ParityError(f"{where}: view '{n.name}' has no base")
        seen.add(n.name)
        n = fw.nodes[n.inputs[0]]
    return n


def measure(fw, bw, saved, tangents, table, where):
    """Saved list, storage bytes, recomputed nodes and their FLOPs of one partition."""
    bases, excluded = {}, []
    for s in saved:
        base = storage_base(s, fw, table, where)
        if base.kind == "placeholder":
            excluded.append(s)
        elif base.types is None:
            raise ParityError(f"{where}: saved '{s}' is a view of tuple-valued '{base.name}'")
        else:
            bases.setdefault(base.name, nbytes(base.types[0]))
    tangent_dep = set(tangents)
    recomputed = []
    for n in bw.nodes.values():
        if n.kind != "call":
            continue
        if any(i in tangent_dep for i in n.inputs):
            tangent_dep.add(n.name)
        else:
            recomputed.append(n)
    rflops = sum(flops(n, bw, table, where) for n in recomputed)
    return {"saved": list(saved), "excluded": excluded, "bases": bases,
            "bytes": sum(bases.values()), "recomputed": [n.name for n in recomputed],
            "flops": rflops}


def check_sums(folder):
    path = os.path.join(folder, "SHA256SUMS")
    if not os.path.exists(path):
        raise ParityError(f"{path}: missing")
    with open(path) as f:
        for line in f:
            digest, fname = line.rstrip("\n").split("  ", 1)
            with open(os.path.join(folder, fname), "rb") as g:
                if hashlib.sha256(g.read()).hexdigest() != digest:
                    raise ParityError(f"{folder}/{fname}: SHA-256 differs from SHA256SUMS")


def torch_side(folder, table):
    check_sums(folder)
    graphs = {}
    for part in ("forward", "backward"):
        path = os.path.join(folder, part + ".txt")
        with open(path) as f:
            methods = parse_methods(f.read(), os.path.relpath(path, REPO))
        if list(methods) != ["forward"]:
            raise ParityError(f"{path}: expected one 'def forward' graph")
        graphs[part] = methods["forward"]
    fw, bw = graphs["forward"], graphs["backward"]
    phs = [n.name for n in bw.nodes.values() if n.kind == "placeholder"]
    tangents = [p for p in phs if p.startswith("tangents_")]
    saved = [p for p in phs if not p.startswith("tangents_")]
    return measure(fw, bw, saved, tangents, table, os.path.relpath(folder, REPO))


def aotc_side(text, where, table):
    roles = {}
    for m in re.finditer(r"^# aotc: input backward (\w+) role=(\w+)", text, re.M):
        roles[m.group(1)] = m.group(2)
    methods = parse_methods(text, where)
    if set(methods) != {"forward", "backward"}:
        raise ParityError(f"{where}: expected aotc --emit=partition text (forward + backward)")
    fw, bw = methods["forward"], methods["backward"]
    phs = [n.name for n in bw.nodes.values() if n.kind == "placeholder"]
    for p in phs:
        if p not in roles:
            raise ParityError(f"{where}: backward placeholder '{p}' has no '# aotc: input' role")
    saved = [p for p in phs if roles[p] == "saved"]
    tangents = [p for p in phs if roles[p] == "tangent"]
    return measure(fw, bw, saved, tangents, table, where)


def run_aotc(aotc, source, partitioner):
    cmd = [aotc, os.path.join(REPO, source), "--emit=partition", f"--partitioner={partitioner}"]
    r = subprocess.run(cmd, capture_output=True, text=True)
    if r.returncode != 0:
        raise ParityError(f"{' '.join(cmd)} failed (exit {r.returncode}):\n{r.stderr}")
    return r.stdout


def describe(side, m):
    lines = [f"  {side}: saved {len(m['saved'])} ({', '.join(m['saved']) or '-'})"]
    if m["excluded"]:
        lines.append(f"    graph inputs or their views (0 bytes): {', '.join(m['excluded'])}")
    lines.append("    storages: " + (", ".join(f"{k}={v}" for k, v in m["bases"].items()) or "-"))
    lines.append(f"    recomputed {len(m['recomputed'])} ({', '.join(m['recomputed']) or '-'})"
                 f" = {m['flops']} FLOPs")
    return lines


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--aotc", required=True, help="path of the aotc binary")
    ap.add_argument("--partitioner", default="min-cut", choices=["min-cut", "default"])
    ap.add_argument("--records", default=os.path.join(REPO, "test", "fixtures", "inductor"))
    ap.add_argument("--models", default="", help="comma-separated subset (default: all records)")
    ap.add_argument("--table", default=os.path.join(REPO, "docs", "partition.md"))
    ap.add_argument("--expect-worse", action="store_true",
                    help="succeed only if aotc loses on at least one graph")
    ap.add_argument("-v", "--verbose", action="store_true", help="print both saved sets")
    a = ap.parse_args(argv)
    try:
        table = load_table(a.table)
        names = sorted(d for d in os.listdir(a.records)
                       if os.path.isdir(os.path.join(a.records, d)))
        if a.models:
            want = a.models.split(",")
            missing = [m for m in want if m not in names]
            if missing:
                raise ParityError(f"no record for model(s) {', '.join(missing)} in {a.records}")
            names = want
        if not names:
            raise ParityError(f"no records in {a.records}")
        tot = {"aotc_bytes": 0, "torch_bytes": 0, "aotc_flops": 0, "torch_flops": 0}
        worse, invalid = [], []
        for name in names:
            folder = os.path.join(a.records, name)
            with open(os.path.join(folder, "meta.json")) as f:
                meta = json.load(f)
            t = torch_side(folder, table)
            text = run_aotc(a.aotc, meta["aotc_source"], a.partitioner)
            o = aotc_side(text, f"aotc {meta['aotc_source']}", table)
            check = meta.get("check", {})
            if check.get("grads_match_eager") is False:
                invalid.append(name)
                print(f"{name} [{a.partitioner}]: aotc bytes={o['bytes']} flops={o['flops']}  "
                      f"torch bytes={t['bytes']} flops={t['flops']}  not compared: torch.compile's "
                      f"gradients differ from eager ({check.get('torch_bug') or 'no reason given'})")
                if a.verbose:
                    print("\n".join(describe("aotc", o) + describe("torch", t)))
                continue
            why = [k for k in ("bytes", "flops") if o[k] > t[k]]
            if why:
                worse.append(name)
            tot["aotc_bytes"] += o["bytes"]
            tot["torch_bytes"] += t["bytes"]
            tot["aotc_flops"] += o["flops"]
            tot["torch_flops"] += t["flops"]
            verdict = "WORSE (" + ", ".join(why) + ")" if why else "ok"
            print(f"{name} [{a.partitioner}]: aotc bytes={o['bytes']} flops={o['flops']}  "
                  f"torch bytes={t['bytes']} flops={t['flops']}  {verdict}")
            if a.verbose or why:
                print("\n".join(describe("aotc", o) + describe("torch", t)))
    except (ParityError, OSError, ValueError, KeyError) as e:
        print(f"compare.py: error: {e}", file=sys.stderr)
        return 2
    print(f"partition-parity: graphs={len(names) - len(invalid)} aotc_bytes={tot['aotc_bytes']} "
          f"torch_bytes={tot['torch_bytes']} worse={len(worse)} "
          f"aotc_recompute_flops={tot['aotc_flops']} torch_recompute_flops={tot['torch_flops']} "
          f"torch_invalid={len(invalid)}")
    ok = (len(worse) > 0) if a.expect_worse else (len(worse) == 0)
    if not ok:
        print("compare.py: " + (f"aotc loses on {', '.join(worse)}" if worse else
                                "--expect-worse: aotc loses on no graph"), file=sys.stderr)
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
