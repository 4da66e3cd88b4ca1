"""Generates the optimizer goldens under test/fixtures/optim/<case>/golden.safetensors
(docs/testing.md "Optimizer goldens"): S steps of torch.optim (single-tensor code, foreach=False)
on a model of the zoo or the MLP example, same batch every step, as the zoo compares results:

  ref.loss f64[S*M]                   the loss of every step (every micro-batch with accumulation)
  ref.param_final.<FQN>               parameters after S steps
  ref.buffer_final.<FQN>              buffers after S steps (batch-norm statistics)
  ref.optim.<state name>              optimizer state after S steps, named as aotc's state area
                                      (optimizer.state.<FQN>.exp_avg, ...)
  input2.<name>                       accumulation cases: the second micro-batch (the first is the
                                      model fixture's input.<name>)

The reference runs in float64 (model, inputs, optimizer state); it is stored rounded to float32
to keep all goldens under 24 MB (the rounding, <= 6e-8 relative, is far below the bounds).
__metadata__: format aotc-optim-1, model, fixture (the .pt2 and golden the inputs and initial
weights come from, relative to the repository), optimizer (the --optimizer text), clip_grad_norm,
micro_batches, steps, torch_version and torch_err (torch's own float32 run measured against the
reference with the checker's err, per tensor). Usage: gen_optim.py [CASE ...] (default: all).
"""
import copy
import json
import os
import sys

import torch
from safetensors.torch import load_file

import common
import gen_zoo
import models

OUT = os.path.join(common.REPO, "test", "fixtures", "optim")
STEPS = 50

# case -> (model, --optimizer text, clip max norm or 0, micro-batches)
CASES = {
    "mlp_sgd": ("mlp", "sgd:lr=0.05,momentum=0.9,nesterov=1,weight_decay=0.0001", 0, 1),
    "mlp_adam": ("mlp", "adam:lr=0.001,weight_decay=0.0001", 0, 1),
    "mlp_adamw_amsgrad": ("mlp", "adamw:lr=0.001,amsgrad=1", 0, 1),
    "mlp_adamw_clip": ("mlp", "adamw:lr=0.001", 0.5, 1),
    "nanogpt_sgd": ("nanogpt", "sgd:lr=0.1,momentum=0.9,dampening=0.1,weight_decay=0.0001", 0, 1),
    "nanogpt_adam": ("nanogpt", "adam:lr=0.003,maximize=0", 0, 1),
    "nanogpt_adamw_clip": ("nanogpt", "adamw:lr=0.003,weight_decay=0.1", 1.0, 1),
    "nanogpt_adamw_accum": ("nanogpt", "adamw:lr=0.003", 0, 2),
    # Batch norm in train mode over a batch of 4 is ill-conditioned in float32 (the zoo's own
    # step-0 gradients differ by up to 29 % from float64): small learning rates keep it calm.
    "resnet_small_train_sgd": ("resnet_small_train", "sgd:lr=0.0001,momentum=0.9", 0, 1),
    "resnet_small_train_adam": ("resnet_small_train", "adam:lr=0.00001", 0, 1),
    "resnet_small_train_adamw": ("resnet_small_train", "adamw:lr=0.00003,weight_decay=0.05", 0, 1),
}


def parse_optimizer(text):
    """The torch.optim class and keyword arguments of an --optimizer text (aotc's keys)."""
    name, _, rest = text.partition(":")
    kv = dict(item.split("=") for item in rest.split(",") if item)
    cls = {"sgd": torch.optim.SGD, "adam": torch.optim.Adam, "adamw": torch.optim.AdamW}[name]
    kw = {"foreach": False}
    betas = [0.9, 0.999]
    for k, v in kv.items():
        if k in ("nesterov", "amsgrad", "maximize"):
            kw[k] = v == "1"
        elif k == "beta1":
            betas[0] = float(v)
        elif k == "beta2":
            betas[1] = float(v)
        else:
            kw[k] = float(v)
    if name != "sgd":
        kw["betas"] = tuple(betas)
    return name, cls, kw


def state_names(name, opt, params):
    """aotc's state-area names of torch's optimizer state: {aotc name: tensor}."""
    out = {}
    for fqn, p in params.items():
        st = opt.state.get(p, {})
        for key in ("momentum_buffer", "exp_avg", "exp_avg_sq", "max_exp_avg_sq"):
            if key in st and st[key] is not None:
                out[f"optimizer.state.{fqn}.{key}"] = st[key].detach().clone()
    return out


def fixture_of(model):
    """(the .pt2, its golden) a model's initial weights and batch come from, repository-relative."""
    if model == "mlp":
        return "examples/mlp/mlp.pt2", "examples/mlp/golden.safetensors"
    return f"test/fixtures/zoo/{model}/{model}.pt2", f"test/fixtures/zoo/{model}/golden.safetensors"


def load_model(model):
    """(module, inputs dict, fixture paths): the initial weights and inputs of the fixture."""
    if model == "mlp":
        golden = os.path.join(common.REPO, "examples", "mlp", "golden.safetensors")
        g = load_file(golden)
        torch.manual_seed(0)
        m = models.MLP()
        m.load_state_dict({k[len("param."):]: v for k, v in g.items() if k.startswith("param.")})
        inputs = {"x": g["input.x"], "target": g["input.target"]}
        return m, inputs, fixture_of(model), True
    make, make_inputs, train, _lr, *_ = gen_zoo.models()[model]
    torch.manual_seed(0)
    m = make()
    m.train(train)
    inputs = make_inputs()
    golden = os.path.join(gen_zoo.ZOO, model, "golden.safetensors")
    g = load_file(golden)
    for k, p in m.named_parameters():
        assert torch.equal(p.detach(), g[f"param.{k}"]), f"{model}: parameter {k} differs from the fixture"
    for k, v in inputs.items():
        assert torch.equal(v, g[f"input.{k}"]), f"{model}: input {k} differs from the fixture"
    return m, inputs, fixture_of(model), train


def second_batch(inputs):
    """Another batch of the same shapes and value ranges (deterministic)."""
    gen = torch.Generator().manual_seed(1)
    out = {}
    for k, v in inputs.items():
        if v.is_floating_point():
            out[k] = torch.randn(v.shape, generator=gen, dtype=v.dtype)
        else:
            hi = int(v.max().item()) + 1
            out[k] = torch.randint(0, max(hi, 1), v.shape, generator=gen, dtype=v.dtype)
    return out


def run(module, batches, opt_text, clip, steps):
    name, cls, kw = parse_optimizer(opt_text)
    params = dict(module.named_parameters())
    opt = cls(list(params.values()), **kw)
    losses = []
    for _ in range(steps):
        for b in batches:
            loss = module(*b.values())
            loss.backward()
            losses.append(loss.detach().clone())
        if clip:
            torch.nn.utils.clip_grad_norm_(list(params.values()), clip, foreach=False)
        opt.step()
        opt.zero_grad(set_to_none=True)
    return (torch.stack(losses), {k: p.detach().clone() for k, p in params.items()},
            {k: b.detach().clone() for k, b in module.named_buffers()}, state_names(name, opt, params))


def gen(case):
    model, opt_text, clip, micro = CASES[case]
    module, inputs, fixture, _train = load_model(model)
    batches = [inputs] + ([second_batch(inputs)] if micro == 2 else [])
    m64 = copy.deepcopy(module).double()
    b64 = [{k: (v.double() if v.is_floating_point() else v) for k, v in b.items()} for b in batches]
    ref = run(m64, b64, opt_text, clip, STEPS)
    got = run(copy.deepcopy(module), batches, opt_text, clip, STEPS)
    golden, torch_err = {}, {}
    G = abs(ref[0][0].item())
    golden["ref.loss"] = ref[0].double()
    torch_err["loss0"] = gen_zoo.err(got[0][:1], ref[0][:1], G)
    torch_err["loss"] = gen_zoo.err(got[0], ref[0], G)
    for kind, i in (("param_final", 1), ("buffer_final", 2), ("optim", 3)):
        tensors = ref[i]
        groups = {}
        for k, t in tensors.items():
            groups.setdefault(k.rsplit(".", 1)[-1] if kind == "optim" else "", []).append(t)
        for k, t in tensors.items():
            floats = [x for x in groups[k.rsplit(".", 1)[-1] if kind == "optim" else ""] if x.is_floating_point()]
            Gk = max((x.abs().max().item() for x in floats if x.numel()), default=0.0)
            golden[f"ref.{kind}.{k}"] = t.float() if t.is_floating_point() else t.clone()
            torch_err[f"{kind}.{k}"] = gen_zoo.err(got[i][k], t, Gk) if t.is_floating_point() else \
                float((got[i][k] != t).any().item())
    if micro == 2:
        golden.update({f"input2.{k}": v.clone() for k, v in batches[1].items()})
    meta = {"format": "aotc-optim-1", "model": model, "aotc_flags": " ".join(case_flags(case)), "fixture": fixture[0], "fixture_golden": fixture[1],
            "optimizer": opt_text, "clip_grad_norm": repr(float(clip)), "micro_batches": str(micro),
            "steps": str(STEPS), "torch_version": torch.__version__,
            "torch_err": json.dumps(torch_err, sort_keys=True),
            "update": "torch.optim (foreach=False) on the same batch every step; reference in float64, "
                      "stored as float32"}
    folder = os.path.join(OUT, case)
    os.makedirs(folder, exist_ok=True)
    common.write_safetensors(os.path.join(folder, "golden.safetensors"), golden, meta)
    common.write_sha256sums(folder, ["golden.safetensors"])
    size = os.path.getsize(os.path.join(folder, "golden.safetensors"))
    worst = max(torch_err.items(), key=lambda kv: kv[1])
    print(f"{case}: {size} bytes, ref loss {ref[0][0].item():.6g} -> {ref[0][-1].item():.6g}, "
          f"torch f32 worst err {worst[1]:.3g} ({worst[0]})")


def case_flags(case):
    model, opt_text, clip, micro = CASES[case]
    flags = [f"--optimizer={opt_text}"]
    if clip:
        flags.append(f"--clip-grad-norm={clip!r}")
    if micro > 1:
        flags.append("--grad-accumulation")
    return flags


def write_cases():
    """test/fixtures/optim/cases.txt, read by test/e2e/optim/CMakeLists.txt: one line per case,
    `<case> <model .pt2> <fixture golden> <aotc flags...>`."""
    lines = ["# Generated by tools/export/gen_optim.py: <case> <pt2> <fixture golden> <aotc flags...>"]
    for case in CASES:
        lines.append(" ".join([case, *fixture_of(CASES[case][0])] + case_flags(case)))
    common.write_text(os.path.join(OUT, "cases.txt"), "\n".join(lines) + "\n")


def main(argv):
    common.setup()
    write_cases()
    names = argv or list(CASES)
    for n in names:
        if n not in CASES:
            sys.exit(f"error: unknown case {n!r} (known: {', '.join(CASES)})")
        gen(n)


if __name__ == "__main__":
    main(sys.argv[1:])
