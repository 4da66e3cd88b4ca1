"""Writes test/lit/capture/Inputs/empty_params.pt2: a module with two distinct 0-element parameters
(torch.export.save stores both at offset 0 of one payload description) beside a normal one, to
check that capture keeps them apart (issue 28: they must not be merged as tied weights).
Usage: $(tools/export/torch-python.sh) tools/export/gen_empty_params.py  (torch 2.15.0)"""
import os

import torch

import common


class EmptyParams(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.a = torch.nn.Parameter(torch.zeros(0))
        self.b = torch.nn.Parameter(torch.zeros(0))
        self.w = torch.nn.Parameter(torch.arange(3, dtype=torch.float32))

    def forward(self, x):
        return (x * self.w).sum() + torch.linalg.vecdot(self.a, self.b)


def main():
    ep = torch.export.export(EmptyParams(), (torch.ones(3),)).run_decompositions()
    out = os.path.join(common.REPO, "test", "lit", "capture", "Inputs", "empty_params.pt2")
    torch.export.save(ep, out)
    print(out, os.path.getsize(out), "bytes, torch", torch.__version__)


if __name__ == "__main__":
    main()
