#!/usr/bin/env python3
"""Converts aotc checkpoints (aotc::rt::Trainer::save, docs/training.md "Checkpoints") to and
from PyTorch's state dicts. Needs torch (the venv of tools/export/setup-venv.sh: run it with
$(bash tools/export/torch-python.sh)) and the repository's python/aotc (found beside this file).

  aotc_checkpoint.py to-torch CKPT --model MODEL.pt [--optimizer OPTIM.pt]
      MODEL.pt: torch.save of the model's state_dict() (parameters and buffers by FQN);
      OPTIM.pt: torch.save of torch.optim's state_dict() ({"state": {i: {...}}, "param_groups":
      [...]}), parameter i being the checkpoint's param_names[i]. Load them with
      model.load_state_dict(torch.load(MODEL.pt)) and optimizer.load_state_dict(...), the
      optimizer built on the parameters in the same order (model.parameters()).
  aotc_checkpoint.py from-torch --model MODEL.pt [--optimizer OPTIM.pt] [--like CKPT] -o OUT
      The reverse: OUT is a checkpoint Trainer::load reads. The optimizer's parameter names come
      from its param_groups[0]["param_names"] (torch.optim built on named_parameters()), else
      from --like (any checkpoint the aotc program wrote, e.g. Trainer::save before the first
      step); without either it is an error saying so. With --like, model entries it does not
      have that share storage with one it has (tied weights: lm_head.weight = wte.weight) are
      dropped; any other is an error. Only torch.optim's own param-group keys are kept (an LR
      scheduler's initial_lr is not).

The conversion between the checkpoint's flat names and torch.optim's nested dict is
python/aotc/_checkpoint.py (also what CompiledModule.optimizer_state_dict uses), the
safetensors I/O python/aotc/_safetensors.py; what a checkpoint must hold for a program is
checked when Trainer::load reads it (runtime/src/Checkpoint.cpp). Writes are atomic (a temporary
file in the target's directory, then rename). Exit 0 on success, 1 with
"aotc_checkpoint.py: error: ..." on bad input.
"""
import argparse
import json
import os
import sys
import tempfile

import torch

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "python"))
from aotc import _checkpoint  # noqa: E402  (the repository's package: python/aotc)
from aotc._checkpoint import PREFIX, CheckpointError  # noqa: E402


Error = CheckpointError


def atomic(path, write):
    """Calls write(tmp) on a temporary file beside `path`, then renames it to `path`."""
    d = os.path.dirname(os.path.abspath(path))
    fd, tmp = tempfile.mkstemp(prefix=os.path.basename(path) + ".tmp", dir=d)
    os.close(fd)
    try:
        write(tmp)
        umask = os.umask(0)
        os.umask(umask)
        os.chmod(tmp, 0o666 & ~umask)  # as a plain open() would create it (mkstemp makes 0600)
        os.replace(tmp, path)
    except BaseException:
        os.unlink(tmp)
        raise


def read_ckpt(path):
    return _checkpoint.read(path)


def to_torch(args):
    tensors, meta = read_ckpt(args.ckpt)
    opt = _checkpoint.optimizer_to_torch(tensors, meta, args.ckpt)
    model = _checkpoint.model_state(tensors)
    state = opt["state"]
    atomic(args.model, lambda tmp: torch.save(model, tmp))
    if args.optimizer:
        atomic(args.optimizer, lambda tmp: torch.save(opt, tmp))
    print(f"{args.ckpt}: {len(model)} model tensors -> {args.model}"
          + (f", optimizer state of {len(state)} parameters (step {meta.get('step', '0')}) -> {args.optimizer}"
             if args.optimizer else ""))


def load_torch(path, what):
    try:
        return torch.load(path, map_location="cpu", weights_only=True)
    except Exception as e:
        raise Error(f"{path}: cannot read the {what} ({e})") from None


def from_torch(args):
    model = load_torch(args.model, "model state_dict")
    if not isinstance(model, dict) or not all(isinstance(v, torch.Tensor) for v in model.values()):
        raise Error(f"{args.model}: expected a state_dict (a dict of tensors)")
    like = read_ckpt(args.like)[0:2] if args.like else None
    if like:
        have = {k for k in like[0] if not k.startswith(PREFIX)}
        for k in sorted(set(model) - have):
            v = model[k]
            alias = next((h for h in have if h in model and model[h].data_ptr() == v.data_ptr()
                          and model[h].shape == v.shape), None)
            if alias is None:
                raise Error(f"{args.model}: '{k}' is not a tensor of {args.like} (another model?)")
            del model[k]  # tied to `alias`: the program has it once
    out = {k: v.detach().contiguous().clone() for k, v in model.items()}
    meta = {"format": _checkpoint.FORMAT}
    if args.optimizer:
        opt = load_torch(args.optimizer, "optimizer state_dict")
        names = None
        if like:
            names = json.loads(like[1].get("param_names", "null") or "null")
        flat, opt_meta = _checkpoint.optimizer_from_torch(opt, args.optimizer, model=out, model_what=args.model,
                                                          names=names)
        out.update(flat)
        meta.update(opt_meta)
    _checkpoint.write(args.out, out, meta)
    print(f"{args.model}: {len(out)} tensors -> {args.out}")


def main(argv=None):
    ap = argparse.ArgumentParser(prog="aotc_checkpoint.py", description=__doc__.split("\n\n")[0])
    sub = ap.add_subparsers(dest="cmd", required=True)
    a = sub.add_parser("to-torch", help="an aotc checkpoint -> torch state dicts")
    a.add_argument("ckpt")
    a.add_argument("--model", required=True)
    a.add_argument("--optimizer")
    a.set_defaults(fn=to_torch)
    b = sub.add_parser("from-torch", help="torch state dicts -> an aotc checkpoint")
    b.add_argument("--model", required=True)
    b.add_argument("--optimizer")
    b.add_argument("--like")
    b.add_argument("-o", "--out", required=True)
    b.set_defaults(fn=from_torch)
    args = ap.parse_args(argv)
    try:
        args.fn(args)
    except Error as e:
        print(f"aotc_checkpoint.py: error: {e}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
