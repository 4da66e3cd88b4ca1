#!/usr/bin/env python3
"""Bounded, deterministic fuzzer for the aotc command line (stdlib only).

Seeds (read from the source tree):
  * the ExportedProgram JSON (models/model.json) inside examples/mlp/mlp.pt2 and
    test/e2e/ln_gelu/ln_gelu.pt2, fed to aotc as plain JSON or repacked into a
    .pt2 zip (whose other members may be mutated too);
  * the FX graph code examples/mlp/mlp.fx.txt and test/e2e/ln_gelu/ln_gelu.fx.txt.

Each case applies 1-3 mutations to one seed: structure-aware ones on the parsed
JSON (delete keys, change value types, swap/rename node and tensor names, change
shapes and dtype enums, truncate strings, duplicate/delete/reorder nodes, change
op targets), line- and token-level ones on FX text (delete/duplicate/swap lines,
change annotations and targets, flip characters), and byte-level ones on any
file (byte flips, truncation). Most cases run `aotc IN --emit=capture`; some run
`--emit=partition`; a few compile fully (`aotc IN -o OUT.o`).

A case passes when aotc exits 0 or 1 within the timeout, and exit 1 comes with
"error:" on stderr. Exit 2 (internal error), a signal, or a timeout is a
failure: the input is saved under <work-dir>/failures/ and its path, command and
stderr are printed. Case i depends only on (seed, i), so `--only i` reproduces it.

Exit status: 0 all cases passed, 1 some case failed, 2 the fuzzer itself could
not run (missing seed, the unmutated seeds do not compile).
"""
import argparse
import concurrent.futures
import io
import json
import os
import random
import shutil
import signal
import subprocess
import sys
import time
import zipfile

# Mutations and modes are picked by these weights.
SEED_KINDS = [("json", 45), ("pt2", 15), ("fx", 40)]
MODES = [("capture", 86), ("partition", 10), ("object", 4)]
# Cases of the deeper modes mostly get one "gentle" mutation that often keeps the
# program valid, so that later stages see mutants too.
GENTLE_FRACTION = 0.7
NEW_NAMES = ["v", "x_1", "_", "t0", "node_with_a_very_long_name_" + "z" * 40, "None", "self",
             "torch", "def", "return", "getitem", "tangents_1", "a.b", "p_fc1_weight"]
DTYPE_ENUMS = [-1, 0, 1, 4, 5, 6, 7, 8, 12, 13, 99, 2**40]
FX_DTYPES = ["f32", "f64", "i64", "b8", "f16", "bf16", "i32", "u8", "c64", "x", ""]
STRANGE_STRINGS = ["", " ", "\x00", "\u00e9\u4e2d", "a" * 300, "{", "]", "\\", "\"",
                   "aten.add.Tensor", "torch.ops.aten.nope.default", "None", "-1", "1e309"]
STRANGE_NUMBERS = [0, -1, 1, 2, 7, 64, -100, 2**31, 2**63 - 1, -2**63, 2**64, 10**30,
                   0.5, -0.0, 1e308, float("inf"), float("nan")]


def weighted(rng, table):
    total = sum(w for _, w in table)
    x = rng.uniform(0, total)
    for item, w in table:
        x -= w
        if x <= 0:
            return item
    return table[-1][0]


# ---------------------------------------------------------------------------
# JSON mutations. `locations` lists every (container, key) pair of the tree.
# ---------------------------------------------------------------------------
def locations(obj):
    """Every (container, key) pair of a JSON tree, parents before children."""
    out = []
    stack = [obj]
    while stack:
        o = stack.pop()
        t = type(o)
        if t is dict:
            for k, v in o.items():
                out.append((o, k))
                if type(v) in (dict, list):
                    stack.append(v)
        elif t is list:
            for i, v in enumerate(o):
                out.append((o, i))
                if type(v) in (dict, list):
                    stack.append(v)
    return out


def random_value(rng, depth=0):
    kind = rng.randrange(7 if depth < 2 else 5)
    if kind == 0:
        return None
    if kind == 1:
        return rng.choice([True, False])
    if kind == 2:
        return rng.choice(STRANGE_NUMBERS)
    if kind == 3:
        return rng.choice(STRANGE_STRINGS)
    if kind == 4:
        return rng.randint(-5, 5)
    if kind == 5:
        return [random_value(rng, depth + 1) for _ in range(rng.randrange(3))]
    return {rng.choice(["name", "as_tensor", "as_int", "arg", "x"]): random_value(rng, depth + 1)}


def graph_of(doc):
    try:
        return doc["graph_module"]["graph"]
    except (KeyError, TypeError):
        return None


def nodes_of(doc):
    g = graph_of(doc)
    if isinstance(g, dict) and isinstance(g.get("nodes"), list):
        return g["nodes"]
    return []


def tensor_values_of(doc):
    g = graph_of(doc)
    if isinstance(g, dict) and isinstance(g.get("tensor_values"), dict):
        return g["tensor_values"]
    return {}


def name_refs(doc):
    """Every {"name": str} dict (tensor references and node names live in them)."""
    return [(c, k) for c, k in locations(doc) if k == "name" and isinstance(c[k], str)]


def mut_delete_key(doc, rng):
    locs = [(c, k) for c, k in locations(doc) if isinstance(c, dict)]
    if locs:
        c, k = rng.choice(locs)
        del c[k]


def mut_change_type(doc, rng):
    locs = locations(doc)
    if locs:
        c, k = rng.choice(locs)
        c[k] = random_value(rng)


def mut_swap_names(doc, rng):
    refs = name_refs(doc)
    if len(refs) >= 2:
        (c1, k1), (c2, k2) = rng.sample(refs, 2)
        c1[k1], c2[k2] = c2[k2], c1[k1]


def mut_rename(doc, rng):
    refs = name_refs(doc)
    if refs:
        c, k = rng.choice(refs)
        names = [cc[kk] for cc, kk in refs]
        c[k] = rng.choice(names + ["nonexistent", "", c[k] + "_x"])


def mut_shape(doc, rng):
    tvs = tensor_values_of(doc)
    metas = [v for v in tvs.values() if isinstance(v, dict)]
    if not metas:
        return
    m = rng.choice(metas)
    sizes = m.get("sizes")
    if not isinstance(sizes, list):
        m["sizes"] = random_value(rng)
        return
    op = rng.randrange(5)
    if op == 0 and sizes:
        sizes[rng.randrange(len(sizes))] = {"as_int": rng.choice([0, 1, 2, 3, -1, 10**12, 2**63 - 1])}
    elif op == 1 and sizes:
        del sizes[rng.randrange(len(sizes))]
    elif op == 2:
        sizes.insert(rng.randrange(len(sizes) + 1), {"as_int": rng.choice([1, 2, 64])})
    elif op == 3 and sizes:
        sizes[rng.randrange(len(sizes))] = {"as_expr": {"expr_str": "s0", "hint": {"as_int": 4}}}
    else:
        sizes.extend(sizes * rng.randint(1, 4))  # high rank


def mut_dtype(doc, rng):
    tvs = tensor_values_of(doc)
    metas = [v for v in tvs.values() if isinstance(v, dict)]
    dtype_locs = [(c, k) for c, k in locations(doc) if k in ("dtype", "as_scalar_type")]
    if metas and rng.random() < 0.6:
        rng.choice(metas)["dtype"] = rng.choice(DTYPE_ENUMS)
    elif dtype_locs:
        c, k = rng.choice(dtype_locs)
        c[k] = rng.choice(DTYPE_ENUMS)


def mut_int_arg(doc, rng):
    locs = [(c, k) for c, k in locations(doc)
            if isinstance(c[k], (int, float)) and not isinstance(c[k], bool)]
    if locs:
        c, k = rng.choice(locs)
        c[k] = rng.choice(STRANGE_NUMBERS + [c[k] + 1, c[k] - 1, -c[k]])


def mut_truncate_string(doc, rng):
    locs = [(c, k) for c, k in locations(doc) if isinstance(c[k], str) and c[k]]
    if locs:
        c, k = rng.choice(locs)
        c[k] = c[k][:rng.randrange(len(c[k]))]


def mut_duplicate_node(doc, rng):
    nodes = nodes_of(doc)
    if nodes:
        n = rng.choice(nodes)
        nodes.insert(rng.randrange(len(nodes) + 1), json.loads(json.dumps(n)))


def mut_delete_node(doc, rng):
    nodes = nodes_of(doc)
    if nodes:
        del nodes[rng.randrange(len(nodes))]


def mut_reorder_nodes(doc, rng):
    nodes = nodes_of(doc)
    if len(nodes) >= 2:
        i, j = rng.sample(range(len(nodes)), 2)
        nodes[i], nodes[j] = nodes[j], nodes[i]


def mut_target(doc, rng):
    nodes = [n for n in nodes_of(doc) if isinstance(n, dict)]
    if nodes:
        targets = [n.get("target") for n in nodes if isinstance(n.get("target"), str)]
        rng.choice(nodes)["target"] = rng.choice(
            targets + ["torch.ops.aten.nope.default", "aten.relu", "torch.ops.aten.add_.Tensor",
                       "torch.ops.higher_order.cond", "<built-in function getitem>",
                       "torch.ops.aten.sym_size.int"])


def mut_cycle(doc, rng):
    """Makes an input of an early node read the output of a later node."""
    nodes = [n for n in nodes_of(doc) if isinstance(n, dict)]
    if len(nodes) < 2:
        return
    i, j = sorted(rng.sample(range(len(nodes)), 2))
    refs = [(c, k) for c, k in locations(nodes[i].get("inputs")) if k == "name" and isinstance(c[k], str)
            and isinstance(c, dict) and len(c) == 1]
    later = [c[k] for c, k in name_refs(nodes[j].get("outputs"))]
    if refs and later:
        c, k = rng.choice(refs)
        c[k] = rng.choice(later)


def mut_list_shrink(doc, rng):
    locs = [(c, k) for c, k in locations(doc) if isinstance(c[k], list) and c[k]]
    if locs:
        c, k = rng.choice(locs)
        lst = c[k]
        if rng.random() < 0.5:
            del lst[rng.randrange(len(lst))]
        else:
            lst.append(json.loads(json.dumps(rng.choice(lst))))


def mut_consistent_rename(doc, rng):
    """Renames one tensor everywhere (references, node outputs, tensor_values keys)."""
    refs = name_refs(doc)
    if not refs:
        return
    c0, k0 = rng.choice(refs)
    old, new = c0[k0], rng.choice(NEW_NAMES)

    def walk(o):
        if isinstance(o, dict):
            for k in list(o.keys()):
                v = o.pop(k)
                o[new if k == old else k] = walk(v)
            return o
        if isinstance(o, list):
            return [walk(v) for v in o]
        return new if o == old else o
    walk(doc)


def mut_scalar_arg(doc, rng):
    """Changes a scalar/int-list argument of a node (dims, scalars, flags)."""
    locs = []
    for n in nodes_of(doc):
        if isinstance(n, dict) and isinstance(n.get("inputs"), list):
            for a in n["inputs"]:
                arg = a.get("arg") if isinstance(a, dict) else None
                if isinstance(arg, dict) and len(arg) == 1:
                    k = next(iter(arg))
                    if k in ("as_int", "as_float", "as_ints", "as_bool", "as_scalar_type"):
                        locs.append(arg)
    if not locs:
        return
    arg = rng.choice(locs)
    k = next(iter(arg))
    if k == "as_ints":
        v = list(arg[k])
        op = rng.randrange(3)
        if op == 0 and len(v) >= 2:
            v.reverse()
        elif op == 1 and v:
            v[rng.randrange(len(v))] = rng.choice([-1, -2, 0, 1, 2, 5, 2**40])
        else:
            v = v[:-1] if v else [0]
        arg[k] = v
    elif k == "as_bool":
        arg[k] = not arg[k]
    elif k == "as_scalar_type":
        arg[k] = rng.choice(DTYPE_ENUMS)
    else:
        arg[k] = rng.choice([0, 1, 3, -1, -100, 0.5, 1e-5, 1e300, "Infinity", "NaN"])


def mut_drop_metadata(doc, rng):
    nodes = [n for n in nodes_of(doc) if isinstance(n, dict)]
    if nodes:
        n = rng.choice(nodes)
        if rng.random() < 0.5:
            n.pop("metadata", None)
        else:
            n["metadata"] = {"stack_trace": rng.choice(STRANGE_STRINGS)}


def mut_requires_grad(doc, rng):
    metas = [v for v in tensor_values_of(doc).values() if isinstance(v, dict)]
    if metas:
        m = rng.choice(metas)
        m["requires_grad"] = not m.get("requires_grad", False)


GENTLE_JSON_MUTATIONS = [
    (mut_consistent_rename, 10), (mut_scalar_arg, 10), (mut_drop_metadata, 3),
    (mut_requires_grad, 3),
]

JSON_MUTATIONS = GENTLE_JSON_MUTATIONS + [
    (mut_delete_key, 10), (mut_change_type, 12), (mut_swap_names, 8), (mut_rename, 8),
    (mut_shape, 12), (mut_dtype, 8), (mut_int_arg, 8), (mut_truncate_string, 5),
    (mut_duplicate_node, 5), (mut_delete_node, 5), (mut_reorder_nodes, 5), (mut_target, 6),
    (mut_cycle, 4), (mut_list_shrink, 6),
]


# ---------------------------------------------------------------------------
# Byte-level mutations (any file).
# ---------------------------------------------------------------------------
def byte_flips(data, rng):
    b = bytearray(data)
    if not b:
        return bytes(b)
    for _ in range(rng.randint(1, 8)):
        i = rng.randrange(len(b))
        b[i] = rng.choice([b[i] ^ (1 << rng.randrange(8)), rng.randrange(256), ord('"'),
                           ord('{'), ord('}'), ord(','), 0])
    return bytes(b)


def truncate(data, rng):
    return data[:rng.randrange(len(data) + 1)] if data else data


def mutate_bytes(data, rng):
    return byte_flips(data, rng) if rng.random() < 0.6 else truncate(data, rng)


def mutate_json_text(text, rng, gentle=False):
    doc = json.loads(text)
    if gentle:
        weighted(rng, GENTLE_JSON_MUTATIONS)(doc, rng)
        return json.dumps(doc, allow_nan=True).encode()
    for _ in range(rng.randint(1, 3)):
        weighted(rng, JSON_MUTATIONS)(doc, rng)
    # allow_nan: NaN/Infinity literals are invalid JSON, which aotc must reject cleanly.
    out = json.dumps(doc, allow_nan=True).encode()
    if rng.random() < 0.12:
        out = mutate_bytes(out, rng)
    return out


# ---------------------------------------------------------------------------
# FX text mutations.
# ---------------------------------------------------------------------------
def fx_change_annotation(lines, rng):
    idx = [i for i, l in enumerate(lines) if '"' in l and "[" in l]
    if not idx:
        return
    i = rng.choice(idx)
    l = lines[i]
    starts = [p for p in range(len(l)) if l[p] == '"']
    if len(starts) < 2:
        return
    k = rng.randrange(len(starts) - 1)
    a, b = starts[k], starts[k + 1]
    dims = ", ".join(str(rng.choice([0, 1, 2, 10, 64, 256, -1, 2**40, "s0"]))
                     for _ in range(rng.randrange(5)))
    ann = rng.choice([f"{rng.choice(FX_DTYPES)}[{dims}]", "f32[", "f32]", "Sym(s0)", "", "f32[64, 10"])
    lines[i] = l[:a + 1] + ann + l[b:]


def fx_change_target(lines, rng):
    idx = [i for i, l in enumerate(lines) if "torch.ops." in l]
    if not idx:
        return
    i = rng.choice(idx)
    targets = [l.split("torch.ops.")[1].split("(")[0] for l in lines if "torch.ops." in l]
    new = rng.choice(targets + ["aten.nope.default", "aten.relu", "aten.add_.Tensor", "aten", ""])
    head, rest = lines[i].split("torch.ops.", 1)
    tail = rest[rest.find("("):] if "(" in rest else ""
    lines[i] = head + "torch.ops." + new + tail


def fx_change_number(lines, rng):
    import re
    idx = [i for i, l in enumerate(lines) if re.search(r"\d", l)]
    if not idx:
        return
    i = rng.choice(idx)
    ms = list(re.finditer(r"-?\d+", lines[i]))
    m = rng.choice(ms)
    val = str(rng.choice(STRANGE_NUMBERS + [2**70, "1.5", "True", "None"]))
    lines[i] = lines[i][:m.start()] + val + lines[i][m.end():]


def fx_rename_token(lines, rng):
    import re
    names = sorted({m for l in lines for m in re.findall(r"\b[a-z_][a-z_0-9]*\b", l)})
    if len(names) < 2:
        return
    a, b = rng.sample(names, 2)
    i = rng.randrange(len(lines))
    lines[i] = re.sub(r"\b%s\b" % re.escape(a), b, lines[i], count=rng.randint(1, 2))


def fx_flip_chars(lines, rng):
    i = rng.randrange(len(lines))
    l = list(lines[i])
    for _ in range(rng.randint(1, 4)):
        c = rng.choice(list("()[]{},:=\"'#.; \t\\x0") + ["\x00", "\u00e9"])
        p = rng.randrange(len(l) + 1)
        op = rng.randrange(3)
        if op == 0 and l and p < len(l):
            l[p] = c
        elif op == 1:
            l.insert(p, c)
        elif l and p < len(l):
            del l[p]
    lines[i] = "".join(l)


def fx_delete_line(lines, rng):
    if len(lines) > 1:
        del lines[rng.randrange(len(lines))]


def fx_duplicate_line(lines, rng):
    i = rng.randrange(len(lines))
    lines.insert(rng.randrange(len(lines) + 1), lines[i])


def fx_swap_lines(lines, rng):
    if len(lines) >= 2:
        i, j = rng.sample(range(len(lines)), 2)
        lines[i], lines[j] = lines[j], lines[i]


def fx_indent(lines, rng):
    i = rng.randrange(len(lines))
    lines[i] = rng.choice(["", " ", "\t", "            "]) + lines[i].lstrip()


def fx_consistent_rename(lines, rng):
    import re
    names = sorted({m for l in lines if "torch.ops." in l or "def forward" in l
                    for m in re.findall(r"\b([a-z_][a-z_0-9]*)\b(?=:)", l)})
    if not names:
        return
    old, new = rng.choice(names), rng.choice(NEW_NAMES)
    pat = re.compile(r"\b%s\b" % re.escape(old))
    lines[:] = [pat.sub(new, l) for l in lines]


def fx_scalar_arg(lines, rng):
    import re
    idx = [i for i, l in enumerate(lines) if "torch.ops." in l and re.search(r"[(,] ?-?\d", l)]
    if not idx:
        return
    i = rng.choice(idx)
    ms = list(re.finditer(r"(?<=[(,\[ ])-?\d+(\.\d+)?(?=[,)\]])", lines[i]))
    if ms:
        m = rng.choice(ms)
        val = rng.choice(["0", "1", "-1", "3", "-100", "0.5", "True", "None", "-2", "2"])
        lines[i] = lines[i][:m.start()] + val + lines[i][m.end():]


def fx_drop_trailer(lines, rng):
    """Deletes comments or the `;  x = None` trailers (both optional in FX code)."""
    if rng.random() < 0.5:
        lines[:] = [l for l in lines if not l.lstrip().startswith("#")]
    else:
        lines[:] = [l.split(";")[0] if "torch.ops." in l else l for l in lines]


GENTLE_FX_MUTATIONS = [(fx_consistent_rename, 10), (fx_scalar_arg, 10), (fx_drop_trailer, 4)]

FX_MUTATIONS = GENTLE_FX_MUTATIONS + [
    (fx_change_annotation, 14), (fx_change_target, 10), (fx_change_number, 12),
    (fx_rename_token, 10), (fx_flip_chars, 14), (fx_delete_line, 10),
    (fx_duplicate_line, 8), (fx_swap_lines, 8), (fx_indent, 4),
]


def mutate_fx_text(data, rng, gentle=False):
    lines = data.decode("utf-8").split("\n")
    if gentle:
        weighted(rng, GENTLE_FX_MUTATIONS)(lines, rng)
        return "\n".join(lines).encode("utf-8")
    for _ in range(rng.randint(1, 3)):
        weighted(rng, FX_MUTATIONS)(lines, rng)
    out = "\n".join(lines).encode("utf-8")
    if rng.random() < 0.12:
        out = mutate_bytes(out, rng)
    return out


# ---------------------------------------------------------------------------
# .pt2 repacking.
# ---------------------------------------------------------------------------
def repack_pt2(seed, rng, gentle=False):
    """A .pt2 with a mutated model.json, or with other members mutated/removed."""
    members = seed["members"]
    prefix = seed["prefix"]
    model_path = prefix + "models/model.json"
    out = {}
    choice = rng.random()
    for name, data in members:
        out[name] = data
    if choice < 0.6 or gentle:
        out[model_path] = mutate_json_text(members_dict(seed)[model_path], rng, gentle)
    elif choice < 0.75:
        victim = rng.choice([n for n, _ in members])
        if rng.random() < 0.5:
            del out[victim]
        else:
            data = out[victim]
            if victim.endswith(".json"):
                try:
                    out[victim] = mutate_json_text(data, rng)
                except ValueError:
                    out[victim] = mutate_bytes(data, rng)
            else:
                out[victim] = mutate_bytes(data, rng)
    elif choice < 0.85:
        cfg = prefix + "data/weights/model_weights_config.json"
        out[cfg] = mutate_json_text(out[cfg], rng)
    else:
        # Small weight files: a shape change in the config must be caught.
        wpaths = [n for n, _ in members if "/data/weights/weight_" in n]
        w = rng.choice(wpaths)
        out[w] = out[w][:rng.randrange(len(out[w]) + 1)]
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w", zipfile.ZIP_STORED) as z:
        for name in (n for n, _ in members if n in out):
            z.writestr(name, out[name])
    data = buf.getvalue()
    if rng.random() < 0.1 and not gentle:
        data = mutate_bytes(data, rng)
    return data


def members_dict(seed):
    return dict(seed["members"])


# ---------------------------------------------------------------------------
# Cases.
# ---------------------------------------------------------------------------
def load_seeds(src_root):
    seeds = []
    for rel in ("examples/mlp/mlp.pt2", "test/e2e/ln_gelu/ln_gelu.pt2"):
        with zipfile.ZipFile(os.path.join(src_root, rel)) as z:
            members = [(i.filename, z.read(i.filename)) for i in z.infolist()]
        model = [n for n, _ in members if n.endswith("models/model.json")][0]
        seeds.append({"name": os.path.basename(rel).split(".")[0], "members": members,
                      "prefix": model[:-len("models/model.json")], "json": dict(members)[model]})
    fx = []
    for rel in ("examples/mlp/mlp.fx.txt", "test/e2e/ln_gelu/ln_gelu.fx.txt"):
        with open(os.path.join(src_root, rel), "rb") as f:
            fx.append(f.read())
    return seeds, fx


def make_case_mode(index, base_seed):
    """The mode of case `index` (the same draws as make_case)."""
    rng = random.Random(base_seed * 1_000_003 + index)
    weighted(rng, SEED_KINDS)
    return weighted(rng, MODES)


def make_case(index, base_seed, seeds, fx):
    """(kind, mode, bytes) of case `index`; a function of (base_seed, index) only."""
    rng = random.Random(base_seed * 1_000_003 + index)
    kind = weighted(rng, SEED_KINDS)
    mode = weighted(rng, MODES)
    # The MLP seed is the main one; LN-GELU adds layer_norm/gelu/mse ops.
    which = 0 if rng.random() < 0.7 else 1
    gentle = mode != "capture" and rng.random() < GENTLE_FRACTION
    if kind == "json":
        data = mutate_json_text(seeds[which]["json"], rng, gentle)
    elif kind == "pt2":
        data = repack_pt2(seeds[which], rng, gentle)
    else:
        data = mutate_fx_text(fx[which], rng, gentle)
    return kind, mode, data


EXT = {"json": ".json", "pt2": ".pt2", "fx": ".fx.txt"}


def command(aotc, path, mode, out_obj):
    if mode == "capture":
        return [aotc, path, "--emit=capture", "-o", out_obj + ".txt"]
    if mode == "partition":
        return [aotc, path, "--emit=partition", "-o", out_obj + ".txt"]
    return [aotc, path, "-o", out_obj]


def run_limited(cmd, timeout):
    """(exit code or "timeout", stderr). The child gets its own process group,
    killed as a whole on timeout, so no grandchild keeps the stderr pipe open."""
    p = subprocess.Popen(cmd, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                         stderr=subprocess.PIPE, start_new_session=True)
    try:
        _, err = p.communicate(timeout=timeout)
        rc = p.returncode
    except subprocess.TimeoutExpired:
        try:
            os.killpg(p.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
        _, err = p.communicate()
        rc = "timeout"
    return rc, err.decode("utf-8", "replace")


def run_case(args, index, seeds, fx):
    """Builds and runs case `index`; returns its result dict ("problem" set on failure)."""
    kind, mode, data = make_case(index, args.seed, seeds, fx)
    wdir = os.path.join(args.work_dir, "cases", "w%d" % (index % max(args.jobs, 1)))
    os.makedirs(wdir, exist_ok=True)
    path = os.path.join(wdir, "case_%05d%s" % (index, EXT[kind]))
    with open(path, "wb") as f:
        f.write(data)
    out_obj = os.path.join(wdir, "case_%05d.o" % index)
    cmd = command(args.aotc, path, mode, out_obj)
    t0 = time.monotonic()
    rc, err = run_limited(cmd, args.timeout)
    secs = time.monotonic() - t0
    problem = None
    if rc == "timeout":
        problem = "timed out after %gs" % args.timeout
    elif rc < 0:
        problem = "killed by signal %d" % -rc
    elif rc not in (0, 1):
        problem = "exit code %d" % rc
    elif rc == 1 and "error:" not in err:
        problem = "exit code 1 without 'error:' on stderr"
    for f in os.listdir(wdir):
        if f.startswith("case_%05d" % index):
            os.remove(os.path.join(wdir, f))
    res = {"index": index, "kind": kind, "mode": mode, "rc": rc, "secs": secs, "problem": problem,
           "stderr": err, "first_line": err.strip().split("\n")[0] if err.strip() else ""}
    if problem:
        fdir = os.path.join(args.work_dir, "failures")
        os.makedirs(fdir, exist_ok=True)
        saved = os.path.join(fdir, "case_%05d%s" % (index, EXT[kind]))
        with open(saved, "wb") as f:
            f.write(data)
        res["saved"] = saved
        res["cmd"] = " ".join(command(args.aotc, saved, mode, os.path.join(fdir, "out.o")))
    return res


def seed_check(args, seeds, fx):
    """Runs every unmutated seed in every mode. Returns {mode: [failure text]}.

    A mode in which a seed fails is not fuzzed (every mutant would fail for the
    same reason); the run reports the seed's failure and fails.
    """
    wdir = os.path.join(args.work_dir, "seeds")
    os.makedirs(wdir, exist_ok=True)
    inputs = []
    for s in seeds:
        inputs.append((s["name"] + ".json", s["json"]))
        buf = io.BytesIO()
        with zipfile.ZipFile(buf, "w", zipfile.ZIP_STORED) as z:
            for n, d in s["members"]:
                z.writestr(n, d)
        inputs.append((s["name"] + ".pt2", buf.getvalue()))
    for i, d in enumerate(fx):
        inputs.append((seeds[i]["name"] + ".fx.txt", d))
    bad = {}
    for name, data in inputs:
        path = os.path.join(wdir, name)
        with open(path, "wb") as f:
            f.write(data)
        for mode, _ in MODES:
            cmd = command(args.aotc, path, mode, os.path.join(wdir, "seed.o"))
            rc, err = run_limited(cmd, max(args.timeout, 60))
            if rc != 0:
                bad.setdefault(mode, []).append(
                    "unmutated seed %s fails (exit %s): %s\n%s"
                    % (path, rc, " ".join(cmd), "\n".join("    " + l for l in err.rstrip().split("\n"))))
    return bad


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--aotc", required=True, help="the aotc executable")
    ap.add_argument("--src-root", required=True, help="the aotc source tree (for the seeds)")
    ap.add_argument("--work-dir", required=True, help="scratch dir; failures/ is kept there")
    ap.add_argument("--cases", type=int, default=2000)
    ap.add_argument("--seed", type=int, default=20240601)
    ap.add_argument("--timeout", type=float, default=10.0, help="seconds per case")
    ap.add_argument("--jobs", type=int, default=2)
    ap.add_argument("--only", type=int, action="append", help="run just this case (repeatable)")
    ap.add_argument("--dump", help="write the inputs of --only cases into this dir and stop")
    ap.add_argument("-v", "--verbose", action="store_true", help="one line per case")
    args = ap.parse_args()
    args.aotc = os.path.abspath(args.aotc)
    args.work_dir = os.path.abspath(args.work_dir)

    try:
        seeds, fx = load_seeds(args.src_root)
    except (OSError, zipfile.BadZipFile, IndexError) as e:
        print("fuzz: cannot read the seeds: %s" % e, file=sys.stderr)
        return 2
    shutil.rmtree(os.path.join(args.work_dir, "failures"), ignore_errors=True)
    shutil.rmtree(os.path.join(args.work_dir, "cases"), ignore_errors=True)
    os.makedirs(args.work_dir, exist_ok=True)

    indices = args.only if args.only else list(range(args.cases))
    if args.dump:
        os.makedirs(args.dump, exist_ok=True)
        for i in indices:
            kind, mode, data = make_case(i, args.seed, seeds, fx)
            path = os.path.join(args.dump, "case_%05d%s" % (i, EXT[kind]))
            with open(path, "wb") as f:
                f.write(data)
            print("%s  (mode %s)" % (path, mode))
        return 0
    bad_modes = seed_check(args, seeds, fx)
    for mode, msgs in sorted(bad_modes.items()):
        print("FAIL mode %s is not fuzzed: the unmutated seeds do not pass it:\n%s"
              % (mode, "\n".join(msgs)))
    if "capture" in bad_modes:
        return 2
    skipped = [i for i in indices if make_case_mode(i, args.seed) in bad_modes]
    skipped_set = set(skipped)
    indices = [i for i in indices if i not in skipped_set]

    t0 = time.monotonic()
    results = []
    with concurrent.futures.ThreadPoolExecutor(max_workers=max(args.jobs, 1)) as pool:
        futures = [pool.submit(run_case, args, i, seeds, fx) for i in indices]
        for fut in futures:
            r = fut.result()
            results.append(r)
            if args.verbose:
                print("case %5d %-4s %-9s rc=%-7s %.2fs %s"
                      % (r["index"], r["kind"], r["mode"], r["rc"], r["secs"], r["first_line"][:120]))
    elapsed = time.monotonic() - t0

    failures = [r for r in results if r["problem"]]
    for r in failures:
        print("FAIL case %d (%s input, mode %s): %s\n  input:   %s\n  command: %s\n  stderr:\n%s"
              % (r["index"], r["kind"], r["mode"], r["problem"], r["saved"], r["cmd"],
                 "\n".join("    " + l for l in r["stderr"].rstrip().split("\n")[-20:])))
    # Summary: outcomes per input kind and mode, so a fuzzer that only ever hits
    # the first parse error shows up as "0 accepted".
    print("fuzz: %d cases in %.1fs (seed %d, timeout %gs, %d jobs)"
          % (len(results), elapsed, args.seed, args.timeout, args.jobs))
    for kind in EXT:
        for mode, _ in MODES:
            rs = [r for r in results if r["kind"] == kind and r["mode"] == mode]
            if rs:
                print("  %-4s %-9s %5d cases: %5d exit 0, %5d exit 1, %d failed, slowest %.2fs"
                      % (kind, mode, len(rs), sum(r["rc"] == 0 for r in rs),
                         sum(r["rc"] == 1 for r in rs), sum(bool(r["problem"]) for r in rs),
                         max(r["secs"] for r in rs)))
    if skipped:
        print("fuzz: %d cases of modes %s skipped because the unmutated seeds fail there"
              % (len(skipped), ", ".join(sorted(bad_modes))))
    if failures or bad_modes:
        print("fuzz: FAILED: %d of %d cases failed (inputs saved under %s); %d modes fail on "
              "the unmutated seeds" % (len(failures), len(results),
                                       os.path.join(args.work_dir, "failures"), len(bad_modes)))
        return 1
    shutil.rmtree(os.path.join(args.work_dir, "cases"), ignore_errors=True)
    print("fuzz: all %d cases passed" % len(results))
    return 0


if __name__ == "__main__":
    sys.exit(main())
