"""Writes the capture cases of dynamic exports into test/lit/capture/Inputs/ (docs/dynamic-shapes.md;
issue 30), each exported with torch.export.Dim and run_decompositions():
  dyn_mlp.pt2   Linear -> BatchNorm1d -> ReLU -> views sized by x.shape[0] -> cat (2*B rows) ->
                slice [1:] (2*B-1 rows) -> Linear -> cross entropy, batch Dim(2..64) shared by x
                and y, and torch._check(B != 13), kept as the export's runtime assert
                (prefer_deferred_runtime_asserts_over_guards);
  dyn_mlp_static37.pt2  the same module exported without Dim at batch 37: a build of it must
                give the same bytes as dyn_mlp.pt2 compiled at s17=37;
  dyn_lm.pt2    a 1-layer nanoGPT (tools/export/lm_models.py: causal SDPA, arange(T) positions),
                batch Dim(1..8) and sequence Dim(2..16) shared by idx and target;
  dyn_ops.pt2   ops whose Core ATen forms aotc's functionalize and decompose rewrite over run-time sizes
                (test/lit/decompose/dynamic.test): layer norm, linear on [B, T, C], split, a
                transpose-bmm-softmax, dropout, an in-place mul_ and a write through a view, cross
                entropy and mse_loss; batch Dim(1..16) shared by x, y and t, sequence Dim(2..12);
  dyn_cnn.pt2   a small CNN over a run-time batch (issue 30 item 5, phase 1): conv 3x3 -> BatchNorm2d
                (statistics over B*H*W) -> ReLU -> max pool -> + avg pool of bilinear + nearest
                upsampling -> conv 3x3 stride 2 -> ReLU -> adaptive
                average pool -> flatten -> Linear -> cross entropy; batch Dim(1..16) shared by x and y;
  dyn_dec.pt2   a decoder block over a run-time batch (issue 30 item 5, phase 1): conv -> GroupNorm(2, 8)
                -> SiLU -> ConvTranspose2d stride 2 -> ReLU -> conv -> mse_loss; batch Dim(1..8)
                shared by x and t;
  dyn_fft.pt2   complex values over a run-time batch (refused for now: test/lit/capture/dynamic.test):
                a complex full, rfft, abs, batch Dim(1..8);
and, for each size the lit tests run, <case>.<size>.golden.safetensors: input.<name>, param.<FQN>,
torch's float64 loss as ref.output_0 and its gradients as ref.grad.<FQN> (float32).
Usage: $(tools/export/torch-python.sh) tools/export/gen_dynamic_cases.py [CASE ...]  (torch 2.15.0;
CASE: mlp, lm, ops, cnn, fft, dec; none: all)"""
import copy
import os
import sys

import torch
import torch.nn as nn
import torch.nn.functional as F
from torch.export import Dim

import common
import lm_models

OUT = os.path.join(common.REPO, "test", "lit", "capture", "Inputs")


class DynMLP(nn.Module):
    def __init__(self):
        super().__init__()
        self.l1, self.bn, self.l2 = nn.Linear(16, 32), nn.BatchNorm1d(32), nn.Linear(32, 4)

    def forward(self, x, y):
        b = x.shape[0]
        torch._check(b != 13)
        h = torch.relu(self.bn(self.l1(x))).reshape(-1, 8, 4).reshape(b, 32)
        h = torch.cat([h, h * 0.5])[1:]
        return (F.cross_entropy(self.l2(h), torch.cat([y, y])[1:]),)


class DynOps(nn.Module):
    def __init__(self):
        super().__init__()
        self.l1, self.ln, self.l2 = nn.Linear(8, 24), nn.LayerNorm(8), nn.Linear(8, 5)
        self.drop = nn.Dropout(0.25)

    def forward(self, x, y, t):
        h = self.l1(self.ln(x))                               # [B, T, 24]
        a, b, c = h.split(8, dim=-1)                          # a static dim split
        s = torch.softmax(a.transpose(1, 2) @ b, dim=-1)      # [B, 8, 8]
        g = self.drop(c).reshape(-1, 8)                       # [B*T, 8]
        g.mul_(2.0)                                           # in place, run-time sizes
        g[:, 0] = 0.0                                         # a write through a view
        ce = F.cross_entropy(self.l2(g), y.reshape(-1))
        return (ce + F.mse_loss(s.sum(-1), t),)


class DynCNN(nn.Module):
    def __init__(self):
        super().__init__()
        self.c1, self.bn, self.c2 = nn.Conv2d(3, 8, 3, padding=1), nn.BatchNorm2d(8), nn.Conv2d(8, 16, 3, stride=2, padding=1)
        self.fc = nn.Linear(16, 10)

    def forward(self, x, y):
        h = F.max_pool2d(torch.relu(self.bn(self.c1(x))), 2)   # [B, 8, 6, 6]
        u = F.interpolate(h, scale_factor=2, mode="bilinear") + F.interpolate(h, scale_factor=2, mode="nearest")
        h = h + F.avg_pool2d(u, 2)                            # upsampling and average pooling
        h = F.adaptive_avg_pool2d(torch.relu(self.c2(h)), 1)  # [B, 16, 1, 1]
        return (F.cross_entropy(self.fc(h.flatten(1)), y),)


class DynDecoder(nn.Module):
    """A decoder block over a run-time batch: conv -> GroupNorm (statistics per sample and
    group) -> SiLU -> ConvTranspose2d stride 2 -> ReLU -> conv -> mse_loss."""

    def __init__(self):
        super().__init__()
        self.c1, self.gn = nn.Conv2d(3, 8, 3, padding=1), nn.GroupNorm(2, 8)
        self.up, self.c2 = nn.ConvTranspose2d(8, 4, 2, stride=2), nn.Conv2d(4, 3, 3, padding=1)

    def forward(self, x, t):
        h = torch.relu(self.up(F.silu(self.gn(self.c1(x)))))   # [B, 4, 12, 12]
        return (F.mse_loss(self.c2(h), t),)


class DynFft(nn.Module):
    def forward(self, x):
        z = torch.full((x.shape[0], 5), 1.0, dtype=torch.complex64)
        return ((torch.fft.rfft(x) + z).abs().sum(),)


def golden(name, tag, module, names, args):
    m64 = copy.deepcopy(module).double()
    a64 = tuple(a.double() if a.is_floating_point() else a for a in args)
    loss = m64(*a64)
    loss = loss[0] if isinstance(loss, tuple) else loss
    loss.backward()
    g = {f"input.{n}": a for n, a in zip(names, args)}
    g.update({f"param.{k}": p.detach().clone() for k, p in module.named_parameters()})
    g.update({f"buffer.{k}": b.detach().clone() for k, b in module.named_buffers()})
    g["ref.output_0"] = loss.detach().float().reshape([])
    g.update({f"ref.grad.{k}": p.grad.float() for k, p in m64.named_parameters()})
    path = os.path.join(OUT, f"{name}.{tag}.golden.safetensors")
    common.write_safetensors(path, g, {"torch_version": torch.__version__, "reference": "torch float64"})


def export(name, module, args, dynamic_shapes, **kw):
    ep = torch.export.export(module, args, dynamic_shapes=dynamic_shapes, **kw).run_decompositions()
    print(name, ep.range_constraints)
    torch.export.save(ep, os.path.join(OUT, name + ".pt2"))


def main():
    common.setup()
    cases = sys.argv[1:] or ["mlp", "lm", "ops", "cnn", "fft", "dec"]
    if "dec" in cases:
        gen_dec()
    if "mlp" in cases:
        gen_mlp()
    if "lm" in cases:
        gen_lm()
    if "ops" in cases:
        torch.manual_seed(0)
        B, T = Dim("batch", min=1, max=16), Dim("seq", min=2, max=12)
        export("dyn_ops", DynOps().train(), (torch.randn(4, 6, 8), torch.randint(0, 5, (4, 6)), torch.randn(4, 8)),
               {"x": {0: B, 1: T}, "y": {0: B, 1: T}, "t": {0: B}})
    if "cnn" in cases:
        gen_cnn()
    if "fft" in cases:
        export("dyn_fft", DynFft(), (torch.randn(4, 8),), {"x": {0: Dim("batch", min=1, max=8)}})
    for f in sorted(os.listdir(OUT)):
        if f.startswith("dyn_"):
            print(os.path.join(OUT, f), os.path.getsize(os.path.join(OUT, f)), "bytes")


def gen_mlp():
    torch.manual_seed(0)
    mlp = DynMLP().train()
    B = Dim("batch", min=2, max=64)
    export("dyn_mlp", mlp, (torch.randn(8, 16), torch.randint(0, 4, (8,))), {"x": {0: B}, "y": {0: B}},
           prefer_deferred_runtime_asserts_over_guards=True)
    for b in (2, 37, 64):
        args = (torch.randn(b, 16), torch.randint(0, 4, (b,)))
        golden("dyn_mlp", f"b{b}", mlp, ["x", "y"], args)
        if b == 37:
            torch.export.save(torch.export.export(mlp, args).run_decompositions(),
                              os.path.join(OUT, "dyn_mlp_static37.pt2"))


def gen_cnn():
    torch.manual_seed(0)
    cnn = DynCNN().train()
    B = Dim("batch", min=1, max=16)
    export("dyn_cnn", cnn, (torch.randn(4, 3, 12, 12), torch.randint(0, 10, (4,))), {"x": {0: B}, "y": {0: B}})
    for b in (1, 5, 16):
        golden("dyn_cnn", f"b{b}", cnn, ["x", "y"], (torch.randn(b, 3, 12, 12), torch.randint(0, 10, (b,))))


def gen_dec():
    torch.manual_seed(0)
    dec = DynDecoder().train()
    B = Dim("batch", min=1, max=8)
    export("dyn_dec", dec, (torch.randn(4, 3, 6, 6), torch.randn(4, 3, 12, 12)), {"x": {0: B}, "t": {0: B}})
    for b in (1, 3, 8):
        golden("dyn_dec", f"b{b}", dec, ["x", "t"], (torch.randn(b, 3, 6, 6), torch.randn(b, 3, 12, 12)))


def gen_lm():
    lm = lm_models.NanoGPT(vocab=32, block=16, d=16, heads=2, layers=1).train()
    Bl, T = Dim("batch", min=1, max=8), Dim("seq", min=2, max=16)
    tok = lambda b, t: torch.randint(0, 32, (b, t))
    export("dyn_lm", lm, (tok(4, 8), tok(4, 8)), {"idx": {0: Bl, 1: T}, "target": {0: Bl, 1: T}})
    for b, t in ((1, 2), (3, 7), (8, 16)):
        golden("dyn_lm", f"b{b}t{t}", lm, ["idx", "target"], (tok(b, t), tok(b, t)))


if __name__ == "__main__":
    main()
