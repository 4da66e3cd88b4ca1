"""Exports the digits example's CNN (examples/digits/, docs/training.md):

  examples/digits/digits.pt2       train mode: (x f32[64,1,8,8], y i64[64]) -> cross-entropy loss
  examples/digits/digits_eval.pt2  eval mode:  x f32[360,1,8,8] -> logits f32[360,10]

Both carry the same initial weights (torch's default initialization, seed 0) under the same
FQNs: the C++ example trains the first with aotc::rt::Trainer and evaluates the test set with
the second through aotc::rt::Evaluator on the trainer's weights. Usage:

  $(bash tools/export/torch-python.sh) tools/export/gen_digits.py
"""
import os

import torch
import torch.nn as nn
import torch.nn.functional as F

import common

OUT = os.path.join(common.REPO, "examples", "digits")
BATCH = 64
TEST = 360


class DigitsCNN(nn.Module):
    """Two 3x3 convolutions (16, 32 channels), a 2x2 max-pool, two linear layers."""

    def __init__(self):
        super().__init__()
        self.conv1 = nn.Conv2d(1, 16, 3, padding=1)
        self.conv2 = nn.Conv2d(16, 32, 3, padding=1)
        self.fc1 = nn.Linear(32 * 4 * 4, 64)
        self.fc2 = nn.Linear(64, 10)

    def logits(self, x):
        x = F.relu(self.conv1(x))
        x = F.max_pool2d(F.relu(self.conv2(x)), 2)
        return self.fc2(F.relu(self.fc1(x.flatten(1))))


class Train(nn.Module):
    def __init__(self, net):
        super().__init__()
        self.net = net

    def forward(self, x, y):
        return F.cross_entropy(self.net.logits(x), y)


class Eval(nn.Module):
    def __init__(self, net):
        super().__init__()
        self.net = net

    def forward(self, x):
        return self.net.logits(x)


def main():
    common.setup()
    torch.manual_seed(0)
    net = DigitsCNN()
    x = torch.rand(BATCH, 1, 8, 8)
    y = torch.randint(0, 10, (BATCH,))
    _, ep = common.export_aten(Train(net).train(), (x, y))
    torch.export.save(ep, os.path.join(OUT, "digits.pt2"))
    _, ep = common.export_aten(Eval(net).eval(), (torch.rand(TEST, 1, 8, 8),))
    torch.export.save(ep, os.path.join(OUT, "digits_eval.pt2"))
    print(f"{common.rel(OUT)}: digits.pt2, digits_eval.pt2 (torch {torch.__version__})")


if __name__ == "__main__":
    main()
