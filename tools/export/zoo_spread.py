"""Measures torch's own float32 spread for each zoo model (docs/testing.md "How zoo results are
compared"); writes test/fixtures/zoo/<model>/spread.json. Needs torch (tools/export/torch-python.sh).

torch's float32 error against the float64 reference is a noisy yardstick: on knife-edge models
(ReLU and max-pool ties, batch norm over a handful of values) it moves between tensors with any
1-ulp change of the input or of the memory layout. So each tensor is judged against the largest
error of three float32 runs of the same 20 SGD steps, each measured against the golden's float64
reference (ref.*) with the checker's err (gen_zoo.err):
  golden         the golden's torch_err (gen_zoo.py's run, in its process);
  default        the same run again here (thread counts and libraries may round differently);
  channels_last  the module and 4-D inputs in torch.channels_last (models with 4-D inputs and no
                 parameter above rank 4 only:
                 other models have no 4-D tensor and skip it);
  perturbed      every floating input scaled by (1 + 1e-7), about one float32 ulp; a model whose
                 inputs are all integer (token ids) gets its first parameter scaled instead.
spread.json: {"format": "aotc-zoo-spread-1", "torch_version", "runs": {run: {key: err}},
"spread": {key: max over runs}}; keys as torch_err ("loss0", "loss", "grad.<FQN>",
"param_final.<FQN>", "buffer_final.<FQN>").

The module is built as gen_zoo.py builds it and takes the golden's initial values (param.*,
buffer.*) and inputs (input.*), so the spread belongs to the committed golden. Usage: zoo_spread.py [MODEL ...] (default: all).
"""
import copy
import json
import os
import sys

import torch
from safetensors.torch import load_file

import common
import gen_zoo

EPS = 1e-7


def errors(got, golden):
    """gen_zoo.gen's torch_err of one float32 run `got` against the golden's ref.* tensors."""
    out = {}
    ref_loss = golden["ref.loss"]
    G = abs(ref_loss[0].item())
    out["loss0"] = gen_zoo.err(got[0][:1], ref_loss[:1], G)
    out["loss"] = gen_zoo.err(got[0], ref_loss, G)
    for kind, i in (("grad", 1), ("param_final", 2), ("buffer_final", 3)):
        refs = {k[len(f"ref.{kind}."):]: t for k, t in golden.items() if k.startswith(f"ref.{kind}.")}
        floats = [t for t in refs.values() if t.is_floating_point() and t.numel()]
        Gk = max((t.abs().max().item() for t in floats), default=0.0)
        for k, t in refs.items():
            g = got[i][k]
            out[f"{kind}.{k}"] = gen_zoo.err(g, t, Gk) if t.is_floating_point() else float((g != t).any().item())
    return out


def measure(name, make, make_inputs, train, lr, rng_seed=None, keep=()):
    path = os.path.join(gen_zoo.ZOO, name, "golden.safetensors")
    golden = load_file(path)
    torch.manual_seed(0)
    module = make()
    module.train(train)
    # The golden's initial values, not a re-drawn initialisation: the spread belongs to the
    # committed golden whatever the torch/torchvision version draws today.
    names = list(make_inputs())
    inputs = {k: golden[f"input.{k}"] for k in names}
    with torch.no_grad():
        for k, p in module.named_parameters():
            p.copy_(golden[f"param.{k}"])
        for k, b in module.named_buffers():
            b.copy_(golden[f"buffer.{k}"])
    runs = {"default": errors(gen_zoo.run(copy.deepcopy(module), inputs, lr, gen_zoo.STEPS, rng_seed), golden)}
    # channels_last needs every parameter of rank <= 4 (FNO's spectral weights are 5-D).
    if any(v.dim() == 4 and v.is_floating_point() for v in inputs.values()) and \
            all(p.dim() <= 4 for p in module.parameters()):
        m = copy.deepcopy(module).to(memory_format=torch.channels_last)
        cl = {k: (v.contiguous(memory_format=torch.channels_last) if v.dim() == 4 else v) for k, v in inputs.items()}
        runs["channels_last"] = errors(gen_zoo.run(m, cl, lr, gen_zoo.STEPS, rng_seed), golden)
    m = copy.deepcopy(module)
    pert = {k: (v * (1 + EPS) if v.is_floating_point() else v) for k, v in inputs.items()}
    if not any(v.is_floating_point() for v in inputs.values()):
        with torch.no_grad():
            next(iter(m.parameters())).mul_(1 + EPS)
    runs["perturbed"] = errors(gen_zoo.run(m, pert, lr, gen_zoo.STEPS, rng_seed), golden)
    return runs


def main(argv):
    common.setup()
    table = gen_zoo.models()
    names = argv or sorted(d for d in os.listdir(gen_zoo.ZOO) if os.path.isdir(os.path.join(gen_zoo.ZOO, d)))
    for n in names:
        if n not in table:
            sys.exit(f"error: unknown zoo model {n!r} (known: {', '.join(table)})")
        make, make_inputs, train, lr, *opts = table[n]
        o = opts[0] if opts else {}
        runs = measure(n, make, make_inputs, train, lr, o.get("rng_seed"), o.get("keep", ()))
        meta = json.loads(load_file_meta(n)["torch_err"])
        # The golden's own run (torch_err, another process and thread count) is a fourth sample.
        if set(meta) != set(runs["default"]):
            sys.exit(f"error: {n}: the golden's torch_err has other keys than this run")
        runs["golden"] = meta
        spread = {k: max(r[k] for r in runs.values()) for k in runs["default"]}
        doc = {"format": "aotc-zoo-spread-1", "model": n, "torch_version": torch.__version__,
               "perturbation": EPS, "runs": runs, "spread": spread}
        out = os.path.join(gen_zoo.ZOO, n, "spread.json")
        common.write_text(out, json.dumps(doc, indent=1, sort_keys=True) + "\n")
        k = max(spread, key=spread.get)
        print(f"{n}: runs {', '.join(runs)}; largest spread {spread[k]:.3g} ({k}); default's largest "
              f"{max(runs['default'].values()):.3g}", flush=True)


def load_file_meta(name):
    from safetensors import safe_open
    with safe_open(os.path.join(gen_zoo.ZOO, name, "golden.safetensors"), "pt") as f:
        return f.metadata()


if __name__ == "__main__":
    main(sys.argv[1:])
