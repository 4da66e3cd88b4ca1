"""Exports the charlm example's nanoGPT-style character LM (examples/charlm/, docs/training.md):

  examples/charlm/charlm.pt2       train mode: (idx i64[B,T], target i64[B,T]) -> cross-entropy loss
  examples/charlm/charlm_eval.pt2  eval mode:  idx i64[1,T] -> logits f32[1,T,V]

V = 128 (the bytes of an ASCII text), T = 64, B = 32; 2 pre-LN blocks of width 128 with 4
heads (lm_models.NanoGPT, head tied to the token embedding), dropout 0.1 (the train export
draws its masks from aotc's Philox generator; the eval export has none), nanoGPT's
initialization with seed 0. Both exports carry the same weights under the same FQNs. Usage:

  $(bash tools/export/torch-python.sh) tools/export/gen_charlm.py
"""
import os

import torch
import torch.nn as nn

import common
import lm_models

OUT = os.path.join(common.REPO, "examples", "charlm")
VOCAB, BLOCK, BATCH, WIDTH, HEADS, LAYERS, DROPOUT = 128, 64, 32, 128, 4, 2, 0.1


class Logits(nn.Module):
    """The LM's logits for every position (the greedy sampler reads the last)."""

    def __init__(self, lm):
        super().__init__()
        self.lm = lm

    def forward(self, idx):
        m = self.lm
        x = m.tok(idx) + m.pos(torch.arange(idx.shape[1], device=idx.device))
        for blk in m.blocks:
            x = blk(x)
        return m.head(m.ln(x))


class Loss(nn.Module):
    def __init__(self, lm):
        super().__init__()
        self.lm = lm

    def forward(self, idx, target):
        return self.lm(idx, target)


def main():
    common.setup()
    torch.manual_seed(0)
    lm = lm_models.NanoGPT(vocab=VOCAB, block=BLOCK, d=WIDTH, heads=HEADS, layers=LAYERS, dropout=DROPOUT)
    os.makedirs(OUT, exist_ok=True)
    idx = torch.randint(0, VOCAB, (BATCH, BLOCK))
    _, ep = common.export_aten(Loss(lm).train(), (idx, torch.randint(0, VOCAB, (BATCH, BLOCK))))
    torch.export.save(ep, os.path.join(OUT, "charlm.pt2"))
    _, ep = common.export_aten(Logits(lm).eval(), (torch.randint(0, VOCAB, (1, BLOCK)),))
    torch.export.save(ep, os.path.join(OUT, "charlm_eval.pt2"))
    n = sum(p.numel() for p in lm.parameters())
    print(f"{common.rel(OUT)}: charlm.pt2, charlm_eval.pt2, {n} parameters, dropout {DROPOUT} "
          f"(torch {torch.__version__})")


if __name__ == "__main__":
    main()
