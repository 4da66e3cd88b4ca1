"""Shared helpers of the fixture generators (tools/export/gen_*.py).

Everything runs in torch eager, float32, one thread, fixed seeds. Stack traces are made
machine independent (sanitize_stack_traces); the .pt2 still differs between runs
(torch writes a random `.data/serialization_id`).
"""
import hashlib
import json
import operator
import os
import re
import sys

import torch

REPO = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))
sys.path.insert(0, os.path.join(REPO, "python"))
from aotc import _safetensors as st  # noqa: E402  (the repo's writer, standard library only)
LR = 0.1
STEPS = 20


def setup():
    torch.set_num_threads(1)
    torch.use_deterministic_algorithms(True)


def rel(path):
    return os.path.relpath(path, REPO)


def export_aten(module, args, keep=()):
    """torch.export.export (TRAINING dialect) then run_decompositions() (ATEN dialect); the ops
    in `keep` (OpOverloads) are left whole (taken out of torch's default decomposition table)."""
    ep_train = torch.export.export(module, args)
    table = None
    if keep:
        table = torch.export.default_decompositions()
        for op in keep:
            table.pop(op, None)
    ep = ep_train.run_decompositions(table)
    assert ep.verifier.dialect == "ATEN", ep.verifier.dialect
    return ep_train, ep


def op_targets(gm):
    """Distinct op targets of a GraphModule as the archive JSON writes them
    (`torch.ops.aten.addmm.default`). operator.getitem is left out: the JSON has no getitem
    nodes (multi-output ops name their outputs directly)."""
    out = set()
    for n in gm.graph.nodes:
        if n.op != "call_function" or n.target is operator.getitem:
            continue
        t = n.target
        if isinstance(t, torch._ops.OpOverload):
            out.add(f"torch.ops.{t.namespace}.{t._opname}.{t._overloadname}")
        else:
            out.add(f"{t.__module__}.{t.__name__}")
    return sorted(out)


def write_text(path, text):
    os.makedirs(os.path.dirname(path), exist_ok=True)
    with open(path, "w") as f:
        f.write(text)
    print("wrote", rel(path))


def fx_text(gm, strides=False):
    return gm.print_readable(print_output=False, include_stride=strides, include_device=strides)


def sanitize_stack_traces(*eps):
    """Makes node stack traces machine independent: the repository prefix and everything up to
    `site-packages/` are dropped (`tools/export/models.py`, `torch/nn/modules/linear.py`)."""
    pat = re.compile(r'File "(?:' + re.escape(REPO + os.sep) + r'|[^"]*site-packages/)')
    for ep in eps:
        for n in ep.graph.nodes:
            st = n.meta.get("stack_trace")
            if st:
                n.meta["stack_trace"] = pat.sub('File "', st)


def save_program(ep, folder, stem, ep_train=None, ops_name="ops.txt"):
    """Writes <stem>.pt2, the op list, <stem>.fx.txt (and <stem>.training.fx.txt of the TRAINING
    dialect program if given). Returns the written file names (relative to folder)."""
    os.makedirs(folder, exist_ok=True)
    torch.export.save(ep, os.path.join(folder, stem + ".pt2"))
    print("wrote", rel(os.path.join(folder, stem + ".pt2")))
    names = [stem + ".pt2", ops_name, stem + ".fx.txt"]
    write_text(os.path.join(folder, ops_name), "".join(t + "\n" for t in op_targets(ep.graph_module)))
    write_text(os.path.join(folder, stem + ".fx.txt"), fx_text(ep.graph_module))
    if ep_train is not None:
        write_text(os.path.join(folder, stem + ".training.fx.txt"), fx_text(ep_train.graph_module))
        names.append(stem + ".training.fx.txt")
    return names


def check_roundtrip(ep, path, args):
    """The saved archive must load back and compute what the in-memory program computes."""
    ep2 = torch.export.load(path)
    a = ep.module()(*args)
    b = ep2.module()(*args)
    assert torch.equal(a, b), (a, b)


def train_golden(module, inputs, extra_grad_inputs=(), steps=STEPS):
    """Plain SGD on the same batch for STEPS steps; returns the golden tensor dict.

    inputs: ordered dict forward-arg name -> tensor. Keys produced: input.<name>,
    param.<FQN> (initial), grad.<FQN> (step 0), grad.<name> for extra_grad_inputs
    (step 0, that input made requires_grad), loss f32[STEPS] (the loss of step k's
    forward, before its update), param_final.<FQN>. Update: p <- p - LR*g in float32.
    Modules with buffers mutate them in forward as usual (buffer_final is the caller's job).
    """
    params = dict(module.named_parameters())
    golden = {f"input.{k}": v.detach().clone().contiguous() for k, v in inputs.items()}
    golden.update({f"buffer.{k}": b.detach().clone() for k, b in module.named_buffers()})
    golden.update({f"param.{k}": p.detach().clone().contiguous() for k, p in params.items()})
    losses = []
    for step in range(steps):
        loss = module(*inputs.values())
        grads = torch.autograd.grad(loss, list(params.values()))
        losses.append(loss.detach().clone())
        if step == 0:
            golden.update({f"grad.{k}": g.detach().clone() for k, g in zip(params, grads)})
            for name in extra_grad_inputs:
                xi = {k: (v.detach().clone().requires_grad_(True) if k == name else v)
                      for k, v in inputs.items()}
                (gx,) = torch.autograd.grad(module(*xi.values()), [xi[name]])
                golden[f"grad.{name}"] = gx.detach().clone()
        with torch.no_grad():
            for p, g in zip(params.values(), grads):
                p.sub_(LR * g)
    golden["loss"] = torch.stack(losses).to(torch.float32)
    golden.update({f"param_final.{k}": p.detach().clone().contiguous() for k, p in params.items()})
    return golden


_ST_DTYPES = {torch.float32: "f32", torch.float64: "f64", torch.int64: "i64", torch.bool: "bool",
              torch.int32: "i32", torch.int16: "i16", torch.int8: "i8", torch.uint8: "u8"}


def write_safetensors(path, tensors, meta, same=torch.equal):
    """Writes a safetensors file deterministically with the repo's writer (python/aotc/
    _safetensors.py: compact JSON, header padded with spaces to 8 bytes): tensors and data in
    sorted key order, `meta` (never empty: the committed files all start with a "__metadata__")
    as __metadata__ in sorted order; then checks that the safetensors library reads back the same
    metadata, keys and tensors (`same`)."""
    from safetensors import safe_open
    assert meta, "write_safetensors: empty metadata"
    meta = dict(sorted(meta.items()))
    out = []
    for k in sorted(tensors):
        t = tensors[k].detach().contiguous().cpu()
        b = (t.to(torch.uint8) if t.dtype == torch.bool else t).numpy().tobytes()
        out.append(st.tensor(k, _ST_DTYPES[t.dtype], list(t.shape), b))
    st.write(path, out, meta)
    with safe_open(path, "pt") as f:
        assert f.metadata() == meta
        assert sorted(f.keys()) == sorted(tensors)
        for k in tensors:
            assert same(f.get_tensor(k), tensors[k]), k


def save_golden(path, golden, metadata):
    """write_safetensors with the torch version (and, for training goldens, lr/steps/update
    rule) in __metadata__."""
    meta = {"torch_version": torch.__version__}
    if "loss" in golden:
        meta.update({"lr": repr(LR), "steps": str(golden["loss"].numel()),
                     "update": "p <- p - lr*g (float32, same batch every step)"})
    meta.update(metadata)
    write_safetensors(path, golden, meta)
    print("wrote", rel(path))


def write_sha256sums(folder, names):
    """folder/SHA256SUMS in `sha256sum` format for the given generated files (paths relative to folder)."""
    lines = []
    for r in sorted(set(names)):
        with open(os.path.join(folder, r), "rb") as f:
            lines.append(f"{hashlib.sha256(f.read()).hexdigest()}  {r}\n")
    write_text(os.path.join(folder, "SHA256SUMS"), "".join(lines))


def log(*a):
    print(*a, file=sys.stderr)


def check_archive(pt2, ops):
    """Asserts the archive layout aotc relies on and that the JSON's node targets == ops.

    Returns (top folder, member names). Checks: one top folder named after the file stem,
    archive_format == 'pt2', models/model.json in the ATEN dialect, every weight raw
    (use_pickle false) under data/weights/ with the size its tensor_meta implies.
    """
    import zipfile
    with zipfile.ZipFile(pt2) as z:
        names = z.namelist()
        top = names[0].split("/", 1)[0]
        assert top == os.path.splitext(os.path.basename(pt2))[0], top
        assert all(n.startswith(top + "/") for n in names)
        assert z.read(f"{top}/archive_format") == b"pt2"
        model = json.loads(z.read(f"{top}/models/model.json"))
        assert model["verifiers"] == ["ATEN"], model["verifiers"]
        targets = sorted({n["target"] for n in model["graph_module"]["graph"]["nodes"]})
        assert targets == ops, (targets, ops)
        cfg = json.loads(z.read(f"{top}/data/weights/model_weights_config.json"))["config"]
        itemsize = {7: 4, 8: 8, 5: 8, 12: 1}
        for fqn, e in cfg.items():
            assert not e["use_pickle"], fqn
            meta = e["tensor_meta"]
            numel = 1
            for d in meta["sizes"]:
                numel *= d["as_int"]
            info = z.getinfo(f"{top}/data/weights/{e['path_name']}")
            assert info.compress_type == zipfile.ZIP_STORED
            assert info.file_size == numel * itemsize[meta["dtype"]], fqn
    return top, names


DTYPE_ABBR = {torch.float32: "f32", torch.float64: "f64", torch.int64: "i64", torch.bool: "b8"}


def capture_case(out, name, module, args, input_grads=False, golden=True):
    """A capture test case (test/lit/capture/Inputs): <name>.pt2 (exported, decomposed) and,
    when `golden`, <name>.golden.safetensors with input.x, param.<FQN>, torch's float64 loss as
    ref.output_0 and its gradients as ref.grad.<FQN> (and ref.grad.x with `input_grads`)."""
    import copy
    ep = torch.export.export(module, args).run_decompositions()
    torch.export.save(ep, os.path.join(out, name + ".pt2"))
    if not golden:
        return
    m64 = copy.deepcopy(module).double()
    a64 = tuple(a.double().requires_grad_(input_grads) for a in args)
    loss = m64(*a64)[0]
    loss.backward()
    g = {f"input.{n}": a for n, a in zip(["x"], args)}
    g.update({f"param.{k}": p.detach().clone() for k, p in module.named_parameters()})
    g["ref.output_0"] = loss.detach().float().reshape([])
    g.update({f"ref.grad.{k}": p.grad.float() for k, p in m64.named_parameters()})
    if input_grads:
        g.update({f"ref.grad.{n}": a.grad.float() for n, a in zip(["x"], a64)})
    write_safetensors(os.path.join(out, name + ".golden.safetensors"), g,
                      {"torch_version": torch.__version__, "reference": "torch float64"})
