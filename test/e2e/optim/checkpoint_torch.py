"""ctest optim.<case>.checkpoint_torch (--with-torch): tools/aotc_checkpoint.py both ways.

  1. aotc trains 3 steps (optim_driver save) -> A; to-torch -> torch's state dicts;
  2. torch (torch.export.load(PT2).module(), torch.optim of the checkpoint's optimizer, loaded
     from those dicts) and aotc (Trainer::load(A)) each train 2 more steps on the batch:
     losses and parameters must agree (both float32: rel 1e-5 losses, 1e-4 parameters);
  3. torch's state dicts after its 5 steps -> from-torch -> B; aotc resumes from B and torch
     goes on, 1 step each: the same comparison.
A wrong or missing optimizer state (exp_avg, max_exp_avg_sq, momentum, the step count) changes
the next updates by far more than these bounds.
Usage: checkpoint_torch.py DRIVER WEIGHTS FIXTURE PT2 WORKDIR
"""
import json
import os
import subprocess
import sys

import torch
from safetensors import safe_open
from safetensors.torch import load_file

HERE = os.path.dirname(os.path.abspath(__file__))
TOOL = os.path.join(HERE, "..", "..", "..", "tools", "aotc_checkpoint.py")


def aotc_steps(driver, weights, fixture, out, steps, start=None):
    cmd = [driver, "save", weights, fixture, out, str(steps)] + ([start] if start else [])
    p = subprocess.run(cmd, capture_output=True, text=True)
    if p.returncode:
        sys.exit(f"FAIL: {' '.join(cmd)}\n{p.stderr}")
    return [float(l.split()[2]) for l in p.stdout.splitlines() if l.startswith("loss ")]


def tool(*args):
    p = subprocess.run([sys.executable, TOOL, *args], capture_output=True, text=True)
    if p.returncode:
        sys.exit(f"FAIL: aotc_checkpoint.py {' '.join(args)}\n{p.stderr}")
    print(p.stdout.strip())


def rel(a, b):
    return (a - b).abs().max().item() / max(b.abs().max().item(), 1e-30)


def main(driver, weights, fixture, pt2, work):
    os.makedirs(work, exist_ok=True)
    f = lambda n: os.path.join(work, n)  # noqa: E731
    ep = torch.export.load(pt2)
    model = ep.module()
    batch = load_file(fixture)
    users = [s.arg.name for s in ep.graph_signature.input_specs if s.kind.name == "USER_INPUT"]
    inputs = [batch["input." + n] for n in users]

    losses_a = aotc_steps(driver, weights, fixture, f("A.safetensors"), 3)
    tool("to-torch", f("A.safetensors"), "--model", f("A_model.pt"), "--optimizer", f("A_opt.pt"))
    with safe_open(f("A.safetensors"), framework="pt") as ck:
        meta = ck.metadata()
    names = json.loads(meta["param_names"])
    model.load_state_dict(torch.load(f("A_model.pt")), strict=False)
    params = dict(model.named_parameters())
    kind = meta["optimizer"].split(":")[0]
    group = [params[n] for n in names]
    opt = {"sgd": lambda: torch.optim.SGD(group, lr=0.1, momentum=0.9),
           "adam": lambda: torch.optim.Adam(group), "adamw": lambda: torch.optim.AdamW(group)}[kind]()
    opt.load_state_dict(torch.load(f("A_opt.pt")))

    def torch_steps(n):
        out = []
        for _ in range(n):
            opt.zero_grad()
            loss = model(*inputs)
            loss.backward()
            opt.step()
            out.append(loss.item())
        return out

    worst = 0.0

    def compare(what, aotc_losses, torch_losses, ckpt):
        nonlocal worst
        el = max(abs(a - t) / abs(t) for a, t in zip(aotc_losses, torch_losses))
        got = load_file(ckpt)
        ep_ = max(rel(got[n], params[n].detach()) for n in names)
        print(f"{what}: losses aotc {aotc_losses} torch {torch_losses}: rel err {el:.2e}; "
              f"parameters rel err {ep_:.2e}")
        if not (el <= 1e-5 and ep_ <= 1e-4):
            sys.exit(f"FAIL: {what}: aotc and torch disagree after the conversion")
        worst = max(worst, el, ep_)

    losses_t = torch_steps(2)
    losses_c = aotc_steps(driver, weights, fixture, f("C.safetensors"), 2, f("A.safetensors"))
    compare("to-torch (aotc 3 steps, then 2 each)", losses_c, losses_t, f("C.safetensors"))

    torch.save(model.state_dict(), f("B_model.pt"))
    torch.save(opt.state_dict(), f("B_opt.pt"))
    tool("from-torch", "--model", f("B_model.pt"), "--optimizer", f("B_opt.pt"), "--like", f("A.safetensors"),
         "-o", f("B.safetensors"))
    losses_t = torch_steps(1)
    losses_d = aotc_steps(driver, weights, fixture, f("D.safetensors"), 1, f("B.safetensors"))
    compare("from-torch (torch 5 steps, then 1 each)", losses_d, losses_t, f("D.safetensors"))
    print(f"checkpoint_torch: {kind} ok, first losses {losses_a}, worst rel err {worst:.2e}")


if __name__ == "__main__":
    if len(sys.argv) != 6:
        sys.exit(__doc__)
    main(*sys.argv[1:])
