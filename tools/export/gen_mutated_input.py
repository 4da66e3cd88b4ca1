"""Writes test/lit/capture/Inputs/mutated_input.pt2, its golden and its bare inputs (issue 28 part 3): a module that
reads a user input, then mutates it in place (PT #93363's pattern), exported with the mutation as a
user_input_mutation output. With x requiring grad, the new value of x takes a cotangent: the golden's
ref.grad.x is torch's gradient of out + <x after the call, T> with respect to x, computed on an
activation (x = leaf * 1), so the gradient through the mutation (2 T) is in it; ref.grad.x_no_tangent
is the same without the later use (T = 0, what `aotc run` does without tangent_1).
Usage: $(tools/export/torch-python.sh) tools/export/gen_mutated_input.py  (torch 2.15.0)"""
import os

import torch

import common

OUT = os.path.join(common.REPO, "test", "lit", "capture", "Inputs")


class MutatesInput(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.w = torch.nn.Parameter(torch.linspace(-1, 1, 4))

    def forward(self, x):
        y = (x + self.w).sin().sum()
        x.mul_(2)
        return y


def main():
    torch.manual_seed(0)
    m = MutatesInput()
    x = torch.randn(3, 4)
    ep = torch.export.export(m, (x.clone(),)).run_decompositions()
    torch.export.save(ep, os.path.join(OUT, "mutated_input.pt2"))
    T = torch.randn(3, 4)
    g = {"input.x": x.clone(), "param.w": m.w.detach().clone(), "tangent_0": torch.tensor(1.0), "tangent_1": T}
    for key, tangent in (("ref.grad.x", T), ("ref.grad.x_no_tangent", torch.zeros(3, 4))):
        leaf = x.double().requires_grad_()
        a = leaf * 1
        out = m.double()(a)
        (out + (a * tangent.double()).sum()).backward()
        g[key] = leaf.grad.float()
        if key == "ref.grad.x":
            g["ref.output_0"] = out.detach().float()
            g["ref.output_1"] = a.detach().float()
            g["ref.grad.w"] = m.w.grad.float()
        m.float().zero_grad()
    common.write_safetensors(os.path.join(OUT, "mutated_input.golden.safetensors"), g,
                             {"torch_version": torch.__version__, "reference": "torch float64"})
    # The inputs alone (no tangents: aotc run's defaults, 1 for the loss and 0 for the new x).
    common.write_safetensors(os.path.join(OUT, "mutated_input.inputs.safetensors"),
                             {k: g[k] for k in ("input.x", "param.w")}, {"torch_version": torch.__version__})
    print(os.path.join(OUT, "mutated_input.pt2"), torch.__version__)


if __name__ == "__main__":
    main()
