"""Model definitions for the aotc fixtures (see docs/fixtures.md).

Every module returns a scalar float32 loss; user inputs are plain tensors whose
forward-argument names become the golden keys `input.<name>`.
"""
import torch
import torch.nn as nn
import torch.nn.functional as F


class MLP(nn.Module):
    """784 -> 256 -> 10 classifier; forward(x: f32[N,784], target: i64[N]) -> f32[] mean CE loss."""

    def __init__(self):
        super().__init__()
        self.fc1 = nn.Linear(784, 256)
        self.relu = nn.ReLU()
        self.fc2 = nn.Linear(256, 10)

    def forward(self, x, target):
        return F.cross_entropy(self.fc2(self.relu(self.fc1(x))), target)


class LnGelu(nn.Module):
    """h = fc1(x); out = h + fc2(gelu(layer_norm(h))); loss = mse(out, y).

    x: f32[N,D], y: f32[N,H]; fc1: D->H with bias, fc2: H->H without bias,
    LayerNorm(H, eps=1e-5, elementwise_affine=True), exact (erf) gelu.
    h is used twice, so its gradient accumulates.
    """

    def __init__(self, d=64, h=128):
        super().__init__()
        self.fc1 = nn.Linear(d, h)
        self.ln = nn.LayerNorm(h, eps=1e-5, elementwise_affine=True)
        self.fc2 = nn.Linear(h, h, bias=False)

    def forward(self, x, y):
        h = self.fc1(x)
        out = h + self.fc2(F.gelu(self.ln(h), approximate="none"))
        return F.mse_loss(out, y)


# ---- small fixtures for other stages' tests -------------------------------------------

class Mutation(nn.Module):
    """In-place op on an intermediate (h.mul_) and a buffer mutation (buf.add_).

    forward(x: f32[3,4]) -> f32[]; the ATEN-dialect export turns buf.add_ into a
    BUFFER_MUTATION output.
    """

    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(4, 4)
        self.register_buffer("buf", torch.zeros(4))

    def forward(self, x):
        h = self.fc(x)
        h.mul_(2.0)
        self.buf.add_(1.0)
        return (h * self.buf).sum()


class SoftmaxSilu(nn.Module):
    """Composites softmax.int, silu, transpose.int (and linear) in one small model.

    forward(x: f32[4,6], y: f32[4,5]) -> f32[].
    """

    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(6, 5)
        self.w = nn.Parameter(torch.randn(5, 5) * 0.3)

    def forward(self, x, y):
        h = self.fc(x)
        s = torch.softmax(h, dim=-1)
        g = F.silu(h) @ self.w.transpose(0, 1)
        return ((s * g - y) ** 2).mean()


class ConvMix(nn.Module):
    """Every convolution form in one small model: 2-D with bias, stride 2 + groups, 1x1,
    depthwise with dilation (no bias), ConvTranspose2d with output_padding, Conv1d.

    forward(x: f32[2,3,8,8], y: f32[2,5,64]) -> f32[] (mean squared error).
    """

    def __init__(self):
        super().__init__()
        self.c1 = nn.Conv2d(3, 8, 3, stride=1, padding=1)
        self.c2 = nn.Conv2d(8, 8, 3, stride=2, padding=1, groups=2)
        self.c3 = nn.Conv2d(8, 16, 1)
        self.dw = nn.Conv2d(16, 16, 3, padding=2, dilation=2, groups=16, bias=False)
        self.up = nn.ConvTranspose2d(16, 4, 3, stride=2, padding=1, output_padding=1)
        self.c1d = nn.Conv1d(4, 5, 3, padding=1)

    def forward(self, x, y):
        h = torch.tanh(self.c1(x))
        h = torch.tanh(self.c2(h))
        h = torch.tanh(self.dw(self.c3(h)))
        z = self.c1d(self.up(h).flatten(2))
        return ((z - y) ** 2).mean()


# ---- plain functions traced with make_fx (no functionalization): in-place ops survive ---

def mut_intermediate(x):
    """In-place on an intermediate that is read again later."""
    a = torch.tanh(x)
    a.mul_(2.0)
    a.add_(x)
    return ((a * a).sum(),)


def mut_input(x, w):
    """In-place on an input (x.add_) -> mutated_x output; gradient w.r.t. the original x."""
    x.add_(w)
    y = x * w
    return (y.sum(),)


def mut_view(x):
    """Mutation through views (unsqueeze, permute, slice, select) followed by reads of the base."""
    a = x * 1.5
    a.unsqueeze(0).mul_(2.0)
    a.permute(1, 0).add_(1.0)
    a[:, 1:3].mul_(0.5)
    a.select(0, 1).add_(3.0)
    return ((a * x).sum(),)


def mut_copy(x, out):
    """copy_ into an input."""
    y = torch.sigmoid(x) * 2.0
    out.copy_(y)
    return ((y * x).sum(),)
