"""Writes the capture cases of the linalg ops into test/lit/capture/Inputs/ (docs/linalg.md;
issue 28):
  linalg_model.pt2     a model built on torch.linalg: a Gram matrix of its activations
                       (Cholesky, a triangular solve, slogdet, eigvalsh, solve, inv, det), a QR-
                       orthogonalized parameter, svdvals and linalg.lu of the activations;
                       torch.linalg.cholesky / solve / inv export their error checks as
                       with_effects(_linalg_check_errors) on an effect token;
  linalg_check.pt2     torch.linalg.cholesky(x) of a user input (the check_errors path);
and <case>.golden.safetensors: input.*, param.*, and torch's float64 loss and gradients as
ref.output_0 and ref.grad.<FQN> (float32). Usage: $(tools/export/torch-python.sh)
tools/export/gen_linalg_cases.py  (torch 2.15.0)"""
import os

import torch

import common

OUT = os.path.join(common.REPO, "test", "lit", "capture", "Inputs")


class LinalgModel(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.lin = torch.nn.Linear(6, 6)
        self.v = torch.nn.Parameter(torch.randn(6, 4))

    def forward(self, x):
        h = torch.tanh(self.lin(x))                                  # [5, 6]
        A = h.mT @ h / 5 + torch.eye(6)                              # symmetric positive-definite
        L = torch.linalg.cholesky(A)
        z = torch.linalg.solve_triangular(L, h.mT, upper=False)     # [6, 5]
        q, r = torch.linalg.qr(self.v)                               # [6, 4], [4, 4]
        P, Lu, U = torch.linalg.lu(h)                                # [5, 5], [5, 5], [5, 6]
        t = [z.pow(2).sum(),
             torch.linalg.slogdet(A)[1],
             torch.linalg.eigvalsh(A).max(),
             torch.linalg.solve(A, self.v).sum(),
             torch.linalg.inv(A).diagonal().sum(),
             torch.linalg.det(A / 2),
             (q * torch.arange(4.0)).sum() + r.diagonal().abs().sum(),
             torch.linalg.svdvals(h).sum(),
             (P @ Lu @ U).pow(2).sum() + U.diagonal().abs().sum()]
        return (sum(t),)


class LinalgCheck(torch.nn.Module):
    def forward(self, x):
        return (torch.linalg.cholesky(x).sum(),)


def golden(name, module, args):
    common.capture_case(OUT, name, module, args, input_grads=name == "linalg_check")


def main():
    torch.manual_seed(0)
    golden("linalg_model", LinalgModel(), (torch.randn(5, 6),))
    b = torch.randn(4, 4)
    golden("linalg_check", LinalgCheck(), (b @ b.mT + torch.eye(4),))
    # Not positive-definite (eigenvalues 3 and -1): torch raises, aotc's entry point fails.
    common.write_safetensors(os.path.join(OUT, "linalg_check.bad.safetensors"),
                             {"input.x": torch.tensor([[1.0, 2, 0, 0], [2, 1, 0, 0], [0, 0, 1, 0], [0, 0, 0, 1]])},
                             {"torch_version": torch.__version__})
    for f in sorted(os.listdir(OUT)):
        if f.startswith("linalg_"):
            print(os.path.join(OUT, f), os.path.getsize(os.path.join(OUT, f)), "bytes")


if __name__ == "__main__":
    main()
