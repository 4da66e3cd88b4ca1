#!/usr/bin/env python3
"""Converts aotc checkpoints (aotc::rt::Trainer::save, docs/training.md "Checkpoints") to and
from PyTorch's state dicts. Needs torch and safetensors (the venv of tools/export/setup-venv.sh:
run it with $(bash tools/export/torch-python.sh)).

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

Writes are atomic (a temporary file in the target's directory, then rename). Exit 0 on
success, 1 with "aotc_checkpoint.py: error: ..." on bad input.
"""
import argparse
import json
import os
import sys
import tempfile

import torch
from safetensors import safe_open
from safetensors.torch import save_file

FORMAT = "aotc-checkpoint-1"
PREFIX = "optimizer.state."
#: The keys of torch.optim's SGD / Adam / AdamW param groups that aotc knows.
OPTIM_KEYS = {"lr", "momentum", "dampening", "weight_decay", "nesterov", "betas", "eps", "amsgrad", "maximize",
              "foreach", "capturable", "differentiable", "fused", "decoupled_weight_decay", "params"}


class Error(Exception):
    pass


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
    try:
        with safe_open(path, framework="pt") as f:
            meta = f.metadata() or {}
            tensors = {k: f.get_tensor(k) for k in f.keys()}
    except Exception as e:  # safetensors raises its own types
        raise Error(f"{path}: not a safetensors file ({e})") from None
    if meta.get("format") != FORMAT:
        raise Error(f"{path}: metadata format is {meta.get('format')!r}, not {FORMAT!r} (an aotc checkpoint)")
    return tensors, meta


def to_torch(args):
    tensors, meta = read_ckpt(args.ckpt)
    try:
        names = json.loads(meta["param_names"])
        groups = json.loads(meta["param_groups"])
    except (KeyError, ValueError) as e:
        raise Error(f"{args.ckpt}: metadata param_names / param_groups missing or not JSON ({e})") from None
    model = {k: v for k, v in tensors.items() if not k.startswith(PREFIX)}
    state = {}
    for i, fqn in enumerate(names):
        if fqn not in model:
            raise Error(f"{args.ckpt}: param_names[{i}] '{fqn}' is not a tensor of the checkpoint")
        entry = {k[len(PREFIX) + len(fqn) + 1:]: v for k, v in tensors.items()
                 if k.startswith(f"{PREFIX}{fqn}.") and "." not in k[len(PREFIX) + len(fqn) + 1:]}
        if entry or int(meta.get("step", "0")) > 0:
            state[i] = entry
    for g in groups:
        if "betas" in g:
            g["betas"] = tuple(g["betas"])
    atomic(args.model, lambda tmp: torch.save(model, tmp))
    if args.optimizer:
        atomic(args.optimizer, lambda tmp: torch.save({"state": state, "param_groups": groups}, tmp))
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
    meta = {"format": FORMAT}
    if args.optimizer:
        opt = load_torch(args.optimizer, "optimizer state_dict")
        if not isinstance(opt, dict) or "state" not in opt or "param_groups" not in opt:
            raise Error(f"{args.optimizer}: expected torch.optim's state_dict ('state', 'param_groups')")
        groups = opt["param_groups"]
        if len(groups) != 1:
            raise Error(f"{args.optimizer}: {len(groups)} param groups; an aotc object has one")
        g = dict(groups[0])
        ids = list(g["params"])
        names = g.pop("param_names", None)
        # torch.optim's own keys only (an LR scheduler adds initial_lr, which is no optimizer's).
        g = {k: v for k, v in g.items() if k in OPTIM_KEYS}
        if names is None and like:
            names = json.loads(like[1].get("param_names", "null") or "null")
        if names is None:
            raise Error(f"{args.optimizer}: the parameters' names are unknown: build the optimizer on "
                        f"model.named_parameters() (torch >= 2.6 stores param_names) or pass --like CKPT")
        if len(names) != len(ids):
            raise Error(f"{args.optimizer}: {len(ids)} parameters but {len(names)} names")
        step = 0
        for pid, fqn in zip(ids, names):
            if fqn not in out:
                raise Error(f"{args.optimizer}: parameter '{fqn}' is not in {args.model}")
            for key, v in opt["state"].get(pid, {}).items():
                if not isinstance(v, torch.Tensor):
                    if v is None:
                        continue
                    raise Error(f"{args.optimizer}: state '{key}' of '{fqn}' is a {type(v).__name__}")
                if key == "step":
                    v = v.to(torch.float32).reshape(())
                    step = int(v.item())
                out[f"{PREFIX}{fqn}.{key}"] = v.detach().contiguous().clone()
        if opt["state"] and step == 0:
            step = 1  # SGD keeps no step count; its momentum buffers mean a step was done
        g["params"] = list(range(len(ids)))
        meta.update(param_groups=json.dumps([g]), param_names=json.dumps(list(names)), step=str(step))
    atomic(args.out, lambda tmp: save_file(out, tmp, metadata=meta))
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
