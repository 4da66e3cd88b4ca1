"""aotc checkpoints <-> torch.optim's state_dict: the one conversion between the flat names of
a checkpoint (runtime/src/Checkpoint.cpp, docs/training.md "Checkpoints") and torch's nested
dicts, used by CompiledModule.optimizer_state_dict / load_optimizer_state_dict (_train.py) and
tools/aotc_checkpoint.py. Needs torch (imported lazily by both).

A checkpoint is a safetensors file (read and written with aotc._safetensors): every parameter
and buffer under its FQN, `optimizer.state.<fqn>.<key>` per parameter (`.step` f32 0-d for
Adam/AdamW), and as __metadata__ format, param_groups (JSON: torch.optim's spelling, one
group), param_names (JSON: the FQN of each index of params), step, hyper, rng, build_id,
optimizer. This module only converts: what a checkpoint must hold for a program (names,
dtypes, shapes, flags, step counts, hyperparameter ranges) is checked by the runtime's
Trainer::restore (aotc_rt_trainer_restore), whose messages name the first mismatch.
"""
import ctypes
import json

import torch

from . import _safetensors
from ._core import InputError

FORMAT = "aotc-checkpoint-1"
PREFIX = "optimizer.state."
#: The keys of torch.optim's SGD / Adam / AdamW param groups that aotc knows.
OPTIM_KEYS = {"lr", "momentum", "dampening", "weight_decay", "nesterov", "betas", "eps", "amsgrad", "maximize",
              "foreach", "capturable", "differentiable", "fused", "decoupled_weight_decay", "params"}

_TORCH_DTYPE = {"f32": torch.float32, "f64": torch.float64, "i64": torch.int64, "bool": torch.bool,
                "i32": torch.int32, "u8": torch.uint8}
_DTYPE_NAME = {v: k for k, v in _TORCH_DTYPE.items()}


class CheckpointError(InputError):
    """A file or dict that cannot be converted; the message starts with what it is."""


# ---- safetensors images <-> torch tensors ------------------------------------------------

def _to_torch(st):
    if st.numel == 0:
        return torch.empty(st.shape, dtype=_TORCH_DTYPE[st.dtype])
    return torch.frombuffer(bytearray(st.data), dtype=_TORCH_DTYPE[st.dtype]).reshape(st.shape)


def _to_st(name, t, what):
    t = t.detach().cpu().resolve_conj().resolve_neg().contiguous()
    dtype = _DTYPE_NAME.get(t.dtype)
    if dtype is None:
        raise CheckpointError(f"{what}: '{name}' is a {t.dtype} tensor; an aotc checkpoint holds "
                              f"{', '.join(str(d) for d in _TORCH_DTYPE.values())}")
    n = t.numel() * t.element_size()
    return _safetensors.StTensor(name, dtype, tuple(t.shape), ctypes.string_at(t.data_ptr(), n) if n else b"")


def parse(data, what):
    """(tensors: name -> torch tensor, in file order; metadata) of a checkpoint held in `data`
    (bytes). CheckpointError when it is no safetensors file or no aotc checkpoint."""
    try:
        f = _safetensors.parse(data, what)
    except _safetensors.SafetensorsError as e:
        raise CheckpointError(f"{what}: not a safetensors file ({e})") from None
    if f.metadata.get("format") != FORMAT:
        raise CheckpointError(f"{what}: metadata format is {f.metadata.get('format')!r}, not {FORMAT!r} "
                              f"(an aotc checkpoint)")
    return {k: _to_torch(v) for k, v in f.tensors.items()}, dict(f.metadata)


def read(path):
    """parse() of the file at `path`."""
    try:
        with open(path, "rb") as f:
            data = f.read()
    except OSError as e:
        raise CheckpointError(f"{path}: not a safetensors file ({e})") from None
    return parse(data, str(path))


def dumps(tensors, metadata, what="checkpoint"):
    """The safetensors bytes of `tensors` (name -> torch tensor, in that order) and `metadata`."""
    return _safetensors.dumps([_to_st(k, v, what) for k, v in tensors.items()], metadata)


def write(path, tensors, metadata):
    """dumps() written to `path` atomically (a temporary file beside it, then rename)."""
    _safetensors.write(path, [_to_st(k, v, str(path)) for k, v in tensors.items()], metadata)


# ---- flat names <-> torch.optim ----------------------------------------------------------

def model_state(tensors):
    """The parameters and buffers of a checkpoint's tensors (everything but optimizer state)."""
    return {k: v for k, v in tensors.items() if not k.startswith(PREFIX)}


def optimizer_to_torch(tensors, metadata, what):
    """torch.optim's state_dict() ({"state": {i: {"step": ..., "exp_avg": ...}},
    "param_groups": [...]}) of a checkpoint: parameter i is metadata param_names[i], its
    state the tensors optimizer.state.<fqn>.<key>; empty before the first step, as torch's."""
    try:
        names = json.loads(metadata["param_names"])
        groups = json.loads(metadata["param_groups"])
    except (KeyError, ValueError) as e:
        raise CheckpointError(f"{what}: metadata param_names / param_groups missing or not JSON ({e})") from None
    model = model_state(tensors)
    state = {}
    for i, fqn in enumerate(names):
        if fqn not in model:
            raise CheckpointError(f"{what}: param_names[{i}] '{fqn}' is not a tensor of the checkpoint")
        head = f"{PREFIX}{fqn}."
        entry = {k[len(head):]: v for k, v in tensors.items()
                 if k.startswith(head) and "." not in k[len(head):]}
        if "step" in entry:  # torch's order: step first
            entry = {"step": entry.pop("step"), **entry}
        if entry or int(metadata.get("step", "0")) > 0:
            state[i] = entry
    for g in groups:
        if "betas" in g:
            g["betas"] = tuple(g["betas"])
    return {"state": state, "param_groups": groups}


def _json_value(v):
    if isinstance(v, torch.Tensor) and v.numel() == 1:  # a tensor lr (torch.optim allows it)
        return v.item()
    raise TypeError(f"{type(v).__name__} is not JSON serializable")


def optimizer_from_torch(opt, what, model=None, model_what=None, names=None):
    """The flat tensors (optimizer.state.<fqn>.<key> -> tensor) and metadata (param_groups,
    param_names, step) of torch.optim's state_dict `opt`. The parameters' FQNs come from
    param_groups[0]["param_names"] (an optimizer built on named_parameters()), else `names`
    (e.g. a checkpoint's param_names); `model` (names of the model's tensors), when given, must
    hold each. Only torch.optim's own param-group keys are kept (an LR scheduler's initial_lr
    is not). `what` / `model_what` name `opt` / the model in messages."""
    if not isinstance(opt, dict) or "state" not in opt or "param_groups" not in opt:
        raise CheckpointError(f"{what}: expected torch.optim's state_dict ('state', 'param_groups')")
    groups = opt["param_groups"]
    if len(groups) != 1:
        raise CheckpointError(f"{what}: {len(groups)} param groups; an aotc object has one")
    g = dict(groups[0])
    ids = list(g.get("params", []))
    own = g.pop("param_names", None)
    g = {k: v for k, v in g.items() if k in OPTIM_KEYS}
    names = own if own is not None else names
    if names is None:
        raise CheckpointError(f"{what}: the parameters' names are unknown: build the optimizer on "
                              f"model.named_parameters() (torch >= 2.6 stores param_names) or pass --like CKPT")
    if len(names) != len(ids):
        raise CheckpointError(f"{what}: {len(ids)} parameters but {len(names)} names")
    out, step = {}, 0
    for pid, fqn in zip(ids, names):
        if model is not None and fqn not in model:
            raise CheckpointError(f"{what}: parameter '{fqn}' is not in {model_what}")
        for key, v in opt["state"].get(pid, {}).items():
            if not isinstance(v, torch.Tensor):
                if v is None:
                    continue
                raise CheckpointError(f"{what}: state '{key}' of '{fqn}' is a {type(v).__name__}")
            if key == "step":
                v = v.to(torch.float32).reshape(())
                step = int(v.item())
            out[f"{PREFIX}{fqn}.{key}"] = v.detach().contiguous().clone()
    if opt["state"] and step == 0:
        step = 1  # SGD keeps no step count; its momentum buffers mean a step was done
    g["params"] = list(range(len(ids)))
    meta = {"param_groups": json.dumps([g], default=_json_value), "param_names": json.dumps(list(names)),
            "step": str(step)}
    return out, meta


def replace_optimizer(tensors, metadata, opt, what):
    """A checkpoint (tensors, metadata) whose optimizer part is torch.optim's state_dict `opt`:
    the model's tensors, rng, build_id and optimizer kept, the optimizer state, param_groups
    and step replaced, the exact hyperparameters ("hyper") dropped so that the restore takes
    them from param_groups. Returns (tensors, metadata)."""
    names = json.loads(metadata.get("param_names", "null"))
    flat, meta = optimizer_from_torch(opt, what, names=names)
    out = {**model_state(tensors), **flat}
    keep = {k: v for k, v in metadata.items() if k not in ("hyper", "step", "param_groups", "param_names")}
    return out, {**keep, **meta}
