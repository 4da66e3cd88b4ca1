"""Writes the capture cases of complex values and item() into test/lit/capture/Inputs/
(docs/complex.md; issue 28):
  complex_ops.pt2     rfft / irfft / fft / ifft / rfft2 / irfft2 / fftn and the ops capture
                      rewrites on complex values (mul, div, add with alpha, sub, abs, angle, exp,
                      conj, real, imag, complex, polar, einsum (bmm), where, sum, mean, roll, flip,
                      cat, stack, to(complex)), a real parameter viewed as complex;
  item.pt2            x.max().item() used as a tensor operand;
  complex_param.pt2   a complex parameter (refused: aotc has no complex dtype in its ABI);
  complex_output.pt2  a complex result (refused);
and <case>.golden.safetensors for the first two: input.*, param.*, and torch's float64 results
as ref.output_0 and ref.grad.<FQN> (float32). Usage: $(tools/export/torch-python.sh)
tools/export/gen_complex_cases.py  (torch 2.15.0)"""
import os

import torch

import common

OUT = os.path.join(common.REPO, "test", "lit", "capture", "Inputs")


class ComplexOps(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.lin = torch.nn.Linear(8, 8)
        self.w = torch.nn.Parameter(torch.randn(8, 5, 2))

    def forward(self, x):
        x = self.lin(x)                                    # [3, 8, 8]
        X = torch.fft.rfft(x, dim=-1)                      # [3, 8, 5]
        W = torch.view_as_complex(self.w)
        Y = (X * W - X / (W + 2) + torch.add(X, W, alpha=0.5)).conj()
        t = [torch.fft.irfft(Y, n=8, dim=-1).pow(2).sum(),
             X.abs().sum() + X.angle().sin().sum() + torch.exp(X * 0.01).real.sum(),
             torch.fft.ifft(torch.fft.fft(x, dim=1) * 2.0 + 1, dim=1, norm="forward").real.pow(2).mean(),
             torch.fft.irfft2(torch.fft.rfft2(x, norm="ortho"), s=(8, 8)).sin().sum(),
             torch.view_as_real(torch.fft.fftn(x, dim=(0, 2))).sin().sum(),
             torch.complex(x, x * 2).mul(W[0, :1]).imag.sum(),
             torch.polar(x.abs() + 1, x).real.sum(),
             torch.einsum("bij,jk->bik", X.transpose(1, 2), W).abs().mean(),
             torch.where(x[..., :5] > 0, X, X * 1j).imag.sum(),
             torch.roll(X, 2, dims=1).flip(2).real.pow(2).sum(),
             torch.cat([X, X.conj()], 1).mean(dim=(0, 1)).real.sum(),
             torch.stack([X, X * X], 0).sum(0).imag.sum(),
             x.to(torch.complex64).mul(X[..., :1]).real.sum()]
        return (sum(t),)


class Item(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.w = torch.nn.Parameter(torch.randn(3))

    def forward(self, x):
        m = x.max().item()
        return (((self.w * x) / m).sum() + m,)


class ComplexParam(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.w = torch.nn.Parameter(torch.randn(5, dtype=torch.cfloat))

    def forward(self, x):
        return (torch.fft.irfft(torch.fft.rfft(x) * self.w, n=8).sum(),)


class ComplexOutput(torch.nn.Module):
    def forward(self, x):
        return (torch.fft.rfft(x),)


def golden(name, module, args):
    common.capture_case(OUT, name, module, args, golden=not isinstance(module, (ComplexParam, ComplexOutput)))


def main():
    torch.manual_seed(0)
    golden("complex_ops", ComplexOps(), (torch.randn(3, 8, 8),))
    golden("item", Item(), (torch.rand(3) + 0.5,))
    golden("complex_param", ComplexParam(), (torch.randn(8),))
    golden("complex_output", ComplexOutput(), (torch.randn(8),))
    for f in sorted(os.listdir(OUT)):
        if f.startswith(("complex_", "item")):
            print(os.path.join(OUT, f), os.path.getsize(os.path.join(OUT, f)), "bytes")


if __name__ == "__main__":
    main()
