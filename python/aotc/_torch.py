"""The torch layer: an aotc program as an nn.Module whose forward is an autograd.Function.

Imported lazily by `aotc.compile` / `aotc.load_module` (the rest of the package never
imports torch). The module's parameters and buffers are the program's inputs of role
parameter/buffer, registered under their FQNs (nested submodules, so
`named_parameters()` yields `fc1.weight`, ...), initialised from NAME.weights.safetensors;
the remaining (user) inputs are forward's arguments, in placeholder order.

`AotcFunction.apply(runner, *inputs)` (inputs in program order):
  forward:  checks every tensor's dtype, shape, device (cpu), layout and contiguity
            against its descriptor (InputError), copies inputs whose address is not
            64-byte aligned, allocates aligned outputs and the saved area (a uint8
            tensor of saved_bytes), calls the runtime's aotc_rt_forward (libaotc_runtime.so,
            aotc/capi.h, on this thread's function handle); the inputs and the saved area
            are kept in ctx through ctx.save_for_backward (so autograd frees the area
            after the backward unless retain_graph, and modifying an input in place
            before the backward is caught by its version check); integer/bool outputs
            and mutated buffers' new values are marked non-differentiable; an input an
            output updates is saved as a copy (the module writes a buffer's new value back);
            a mutated user input is changed in place (its new value copied into it) and
            marked dirty, so its autograd history continues through the call, as after an
            in-place op in eager, and its later uses' gradient arrives as that output's tangent.
  backward: cotangents of differentiable outputs (zeros for outputs that received
            none, NULL for integer/bool ones and mutated buffers' new values), aotc_rt_backward, and the gradient of every
            input that needs one; None for the others (integer inputs, frozen
            parameters, inputs without requires_grad).
An input that requires grad but whose gradient the program does not compute is an
error at forward time (compile with requires_grad=[name]), never a silent zero.

Without autograd (under torch.no_grad(), or when no input requires grad) forward runs
<name>_eval (aotc_rt_eval) instead: the same outputs, no saved area, no graph; module.eval() keeps autograd
(as eager torch) and stops writing mutated buffers back. The graph is what was exported: a
train-mode export keeps batch statistics and dropout after .eval() (torch.export specializes
on the mode), so for eval behaviour compile the eval-mode export with
share_weights=<the train module> (the same Parameter objects by FQN; docs/python.md).
An object compiled with optimizer=... also has train_step / accumulate and torch.optim-format
optimizer_state_dict / load_optimizer_state_dict (_train.py: a runtime trainer on the module's
tensors, checkpoints converted by _checkpoint.py).
"""
import math
import os
import warnings

import torch

from . import _safetensors
from ._build import build_library
from ._core import ALIGNMENT, STEP_ACCUMULATE, InputError, Program
from ._train import TrainStep

_TORCH_DTYPE = {"f32": torch.float32, "f64": torch.float64, "i64": torch.int64,
                "bool": torch.bool, "i32": torch.int32, "u8": torch.uint8}
_DTYPE_NAME = {v: k for k, v in _TORCH_DTYPE.items()}


def _type_str(t):
    return f"{_DTYPE_NAME.get(t.dtype, str(t.dtype))}[{', '.join(map(str, t.shape))}]"


def aligned_empty(shape, dtype):
    """An uninitialised contiguous CPU tensor whose data pointer is 64-byte aligned."""
    shape = tuple(shape)
    nbytes = math.prod(shape) * torch.empty((), dtype=dtype).element_size()
    raw = torch.empty(nbytes + ALIGNMENT, dtype=torch.uint8)
    off = (-raw.data_ptr()) % ALIGNMENT
    return raw[off:off + nbytes].view(dtype).view(shape)


def _aligned(t):
    """t itself when its data is 64-byte aligned, else an aligned copy."""
    if t.data_ptr() % ALIGNMENT == 0:
        return t
    c = aligned_empty(t.shape, t.dtype)
    c.copy_(t)
    return c


class Runner:
    """A loaded Program plus, per input index, the position of its gradient (or None)."""

    def __init__(self, program):
        self.program = program
        self.grad_pos = [None] * len(program.inputs)
        for j, i in enumerate(program.grad_input_index):
            self.grad_pos[i] = j

    def check(self, desc, t, what):
        """Validates a caller tensor against `desc`; returns it, or an aligned copy."""
        p = self.program
        if not isinstance(t, torch.Tensor):
            raise InputError(f"{p.name}: {what} must be a torch.Tensor {desc.type_str}, "
                             f"got {type(t).__name__}")
        if t.dtype != _TORCH_DTYPE[desc.dtype] or tuple(t.shape) != desc.shape:
            note = ""
            if desc.role == "user_input" and t.dtype == _TORCH_DTYPE[desc.dtype] and t.dim() == len(desc.shape):
                note = (" (a user input's sizes were fixed when the model was exported, from the example input "
                        "torch.export saw: export again with an example of this size; dynamic sizes are not "
                        "supported yet)")
            raise InputError(f"{p.name}: {what} must be {desc.type_str}, got {_type_str(t)}{note}")
        if t.device.type != "cpu":
            raise InputError(f"{p.name}: {what} must be on the cpu, got device {t.device}")
        if t.layout != torch.strided:
            raise InputError(f"{p.name}: {what} must be a strided (dense) tensor, got {t.layout}")
        if not t.is_contiguous():
            raise InputError(f"{p.name}: {what} must be contiguous (row-major), got strides "
                             f"{list(t.stride())}; call .contiguous()")
        if t.is_conj() or t.is_neg():
            t = t.resolve_conj().resolve_neg()
        return _aligned(t)


class AotcFunction(torch.autograd.Function):
    """forward(ctx, runner, *inputs) -> outputs; see the module docstring."""

    @staticmethod
    def forward(ctx, runner, *inputs):
        p = runner.program
        if len(inputs) != len(p.inputs):
            raise InputError(f"{p.name}: forward expects {len(p.inputs)} inputs, "
                             f"got {len(inputs)}")
        ready = []
        for d, t in zip(p.inputs, inputs):
            what = f"input '{d.name}' (input {d.index})"
            ready.append(runner.check(d, t, what))
            if ctx.needs_input_grad[1 + d.index] and runner.grad_pos[d.index] is None:
                raise InputError(f"{p.name}: {what} requires grad but the program computes "
                                 f"no gradient for it; compile with requires_grad=['{d.name}'] "
                                 f"or detach it")
        outs = [aligned_empty(d.shape, _TORCH_DTYPE[d.dtype]) for d in p.outputs]
        saved = aligned_empty((p.saved_bytes,), torch.uint8)
        p.call_forward([t.data_ptr() for t in ready], [o.data_ptr() for o in outs],
                       saved.data_ptr())
        ctx.runner = runner
        # The saved area travels with the inputs: autograd frees it after the backward
        # (unless retain_graph) and checks the inputs' versions. An input that an output
        # updates (a batch-norm buffer) is written back after this call, so the backward
        # keeps a copy of the value the forward ran on.
        updated = {d.updates_input for d in p.outputs if d.updates_input >= 0}
        ctx.save_for_backward(*[t.clone() if i in updated else t for i, t in enumerate(ready)],
                              saved)
        # A user input the graph mutates (an activation changed in place) is changed in place
        # here too, as eager does: its new value is written into the caller's tensor, which
        # is returned as that output and marked dirty, so its autograd history continues
        # through this call and a later use sends its gradient back as that output's tangent.
        dirty = []
        for k, d in enumerate(p.outputs):
            if d.updates_input >= 0 and p.inputs[d.updates_input].role == "user_input":
                x = inputs[d.updates_input]
                x.copy_(outs[k])
                outs[k] = x
                dirty.append(x)
        if dirty:
            ctx.mark_dirty(*dirty)
        ctx.mark_non_differentiable(*[o for d, o in zip(p.outputs, outs)
                                      if not d.differentiable])
        return tuple(outs)

    @staticmethod
    @torch.autograd.function.once_differentiable
    def backward(ctx, *grad_outputs):
        runner = ctx.runner
        p = runner.program
        *inputs, saved = [_aligned(t) for t in ctx.saved_tensors]
        tangents, tptrs = [], []
        for d, g in zip(p.outputs, grad_outputs):
            if not d.differentiable:
                tptrs.append(None)
                continue
            if g is None:
                g = torch.zeros(d.shape, dtype=_TORCH_DTYPE[d.dtype])
            g = runner.check(d, g.contiguous(), f"gradient of output '{d.name}' "
                                                f"(output {d.index})")
            tangents.append(g)
            tptrs.append(g.data_ptr())
        grads = [aligned_empty(d.shape, _TORCH_DTYPE[d.dtype]) for d in p.grads]
        p.call_backward([t.data_ptr() for t in inputs], saved.data_ptr(), tptrs,
                        [g.data_ptr() for g in grads])
        result = [None]
        for i, pos in enumerate(runner.grad_pos):
            result.append(grads[pos] if pos is not None and ctx.needs_input_grad[1 + i]
                          else None)
        return tuple(result)


class CompiledModule(torch.nn.Module):
    """An aotc program as a module: parameters/buffers by FQN, forward(*user_inputs).

    forward takes the program's user inputs positionally or by name and returns the
    single user output, or a tuple when the program has several; the new values of mutated
    buffers (batch norm's running statistics) are copied into the module's buffers, as the
    eager module updates them in place.
    Attributes: program (aotc.Program), build (aotc.BuildResult or None),
    input_names (user input names, in order).
    """

    def __init__(self, program, weights=None, build=None, share_weights=None):
        super().__init__()
        self._runner = Runner(program)
        self.program = program
        self.build = build
        self._train = None  # TrainStep, made by the first train_step
        self._warned_eval = False
        shared = {}
        if share_weights is not None:
            shared = dict(share_weights.named_parameters())
            shared.update(share_weights.named_buffers())
        values = _safetensors.read(weights) if weights else None
        if values is not None:
            program.check_weights(values.metadata, weights)
        self.input_names = []
        self._param_paths = {}
        for d in program.inputs:
            if d.role == "user_input":
                self.input_names.append(d.name)
                continue
            if d.role == "rng_state":
                # {seed, offset} of aotc's Philox streams (docs/randomness.md): seeded from
                # torch.initial_seed() (so torch.manual_seed before construction decides it),
                # advanced by every forward; manual_seed() resets it.
                self.register_buffer("aotc_rng_state", torch.zeros(2, dtype=torch.int64),
                                     persistent=False)
                self._param_paths[d.index] = (self, "aotc_rng_state")
                self.manual_seed(torch.initial_seed())
                continue
            if d.name in shared and d.role != "constant":  # lifted constants: numbered per export
                t = shared[d.name]
                if t.dtype != _TORCH_DTYPE[d.dtype] or tuple(t.shape) != d.shape:
                    raise InputError(f"{program.name}: {d.role} '{d.name}' is {d.type_str} but the "
                                     f"shared module's is {_type_str(t)}: pair exports of one model")
                owner, leaf = self._owner(d.name)
                if isinstance(t, torch.nn.Parameter):
                    owner.register_parameter(leaf, t)
                else:
                    owner.register_buffer(leaf, t, persistent=d.role != "constant")
                self._param_paths[d.index] = (owner, leaf)
                continue
            if values is None or d.name not in values:
                raise InputError(f"{program.name}: no value for {d.role} '{d.name}' "
                                 f"({d.type_str}) in {weights or '(no weights file)'}")
            st = values[d.name]
            if st.dtype != d.dtype or st.shape != d.shape:
                raise InputError(f"{weights}: '{d.name}' is {st.dtype}{list(st.shape)}, the "
                                 f"program expects {d.type_str}")
            t = aligned_empty(d.shape, _TORCH_DTYPE[d.dtype])
            if t.numel():
                t.view(-1).view(torch.uint8).copy_(torch.frombuffer(bytearray(st.data),
                                                                    dtype=torch.uint8))
            owner, leaf = self._owner(d.name)
            if d.role == "parameter":
                owner.register_parameter(
                    leaf, torch.nn.Parameter(t, requires_grad=d.requires_grad))
            else:  # a lifted constant is a non-persistent buffer (not in state_dict())
                owner.register_buffer(leaf, t, persistent=d.role != "constant")
            self._param_paths[d.index] = (owner, leaf)

    def manual_seed(self, seed):
        """Sets the seed of the program's random ops (dropout, rand, bernoulli) and restarts
        its stream at offset 0; the same seed gives the same bits (docs/randomness.md)."""
        if hasattr(self, "aotc_rng_state"):
            self.aotc_rng_state.copy_(torch.tensor([int(seed) % 2**63, 0], dtype=torch.int64))

    def _owner(self, fqn):
        """The (sub)module that holds `fqn` (created on demand) and the leaf name."""
        *path, leaf = fqn.split(".")
        m = self
        for part in path:
            child = m._modules.get(part)
            if child is None:
                child = torch.nn.Module()
                m.add_module(part, child)
            m = child
        return m, leaf

    def _full_inputs(self, args, kwargs):
        """The program's inputs in order: the module's tensors and the bound user inputs."""
        p = self.program
        if len(args) > len(self.input_names):
            raise InputError(f"{p.name}: forward takes {len(self.input_names)} inputs "
                             f"({', '.join(self.input_names)}), got {len(args)}")
        bound = dict(zip(self.input_names, args))
        for k, v in kwargs.items():
            if k not in self.input_names:
                raise InputError(f"{p.name}: unknown input '{k}' (inputs: "
                                 f"{', '.join(self.input_names)})")
            if k in bound:
                raise InputError(f"{p.name}: input '{k}' given twice")
            bound[k] = v
        missing = [n for n in self.input_names if n not in bound]
        if missing:
            raise InputError(f"{p.name}: missing input '{missing[0]}'")
        full = []
        for d in p.inputs:
            if d.role == "user_input":
                full.append(bound[d.name])
            else:
                owner, leaf = self._param_paths[d.index]
                full.append(getattr(owner, leaf))
        return full

    def _run_eval(self, full):
        """<name>_eval on `full`: outputs only, no saved area, no autograd graph."""
        p = self.program
        ready = [self._runner.check(d, t, f"input '{d.name}' (input {d.index})")
                 for d, t in zip(p.inputs, full)]
        outs = [aligned_empty(d.shape, _TORCH_DTYPE[d.dtype]) for d in p.outputs]
        p.call_eval([t.data_ptr() for t in ready], [o.data_ptr() for o in outs])
        return outs

    def forward(self, *args, **kwargs):
        p = self.program
        full = self._full_inputs(args, kwargs)
        # Without autograd (no_grad / inference_mode, or nothing that requires grad) the
        # eval entry point runs: no saved area, no graph. .eval() alone keeps autograd, as
        # eager torch does (fine-tuning with frozen batch norm); it stops buffer write-back.
        use_eval = p.has_eval and (not torch.is_grad_enabled() or
                                   not any(isinstance(t, torch.Tensor) and t.requires_grad for t in full))
        train_mode_graph = (any(d.updates_input >= 0 for d in p.outputs)
                            or any(d.role == "rng_state" for d in p.inputs))
        if not self.training and not self._warned_eval and train_mode_graph:
            self._warned_eval = True
            warnings.warn(f"{p.name}: eval() runs the graph as exported; this one updates buffers or "
                          f"draws random numbers (a train-mode export): for eval behaviour compile "
                          f"the eval-mode export with share_weights=this module", stacklevel=2)
        outs = self._run_eval(full) if use_eval else AotcFunction.apply(self._runner, *full)
        # Mutated buffers (batch norm's running statistics) are updated in place, as the
        # eager module does in train mode (not after .eval()); only the user outputs are returned.
        user = []
        with torch.no_grad():
            for d, o in zip(p.outputs, outs):
                if d.updates_input < 0:
                    user.append(o)
                    continue
                if p.inputs[d.updates_input].role == "user_input":
                    # A mutated user input: AotcFunction wrote it; the eval path writes it here.
                    if use_eval:
                        full[d.updates_input].copy_(o)
                    continue
                if self.training:
                    owner, leaf = self._param_paths[d.updates_input]
                    getattr(owner, leaf).copy_(o)
        return user[0] if len(user) == 1 else tuple(user)

    # -- the compiled train step (objects compiled with optimizer=...) -------------------
    def _trainer(self):
        if self._train is None:
            self._train = TrainStep(self, _TORCH_DTYPE, aligned_empty)
            if getattr(self, "_on_nonfinite", "warn") != "warn":
                self._train.set_on_nonfinite(self._on_nonfinite)
        return self._train

    @property
    def on_nonfinite(self):
        """What a train_step / accumulate whose loss or gradient norm is NaN or infinite does:
        'warn' (default: one line on stderr for the first, later ones counted), 'raise'
        (aotc.NonfiniteError after the step) or 'skip' (counted silently; needs
        skip_nonfinite=True at compile time, which leaves the parameters untouched)."""
        return getattr(self, "_on_nonfinite", "warn")

    @on_nonfinite.setter
    def on_nonfinite(self, policy):
        self._trainer().set_on_nonfinite(policy)
        self._on_nonfinite = policy

    @property
    def nonfinite_steps(self):
        """Steps and micro-batches so far whose loss or gradient norm was not finite."""
        return self._trainer().nonfinite_count()

    def train_step(self, *args, **kwargs):
        """One training step: forward, backward and the compiled optimizer's update of every
        parameter in place (buffers too: running statistics, the RNG state). Takes the user
        inputs as forward does; returns the loss (output 0) as a 0-d tensor."""
        return self._trainer().run(self._full_inputs(args, kwargs), 0)

    def accumulate(self, *args, **kwargs):
        """One micro-batch (grad_accumulation=True): forward and backward, the gradients added
        to the accumulators; the next train_step updates with their sum. Returns the loss."""
        return self._trainer().run(self._full_inputs(args, kwargs), STEP_ACCUMULATE)

    def set_communicator(self, comm):
        """Data parallel (an object compiled with data_parallel=...): train_step averages the
        gradients over comm's ranks (aotc.MpiCommunicator, or None for one process). Collective:
        every rank calls it; it checks that all ranks run the same plan and copies rank 0's
        parameters, buffers and optimizer state into every rank's module."""
        self._trainer().set_comm(comm.table if comm is not None else None)
        self._comm = comm  # the table must outlive its use

    @property
    def lr(self):
        return self._trainer().get_hyper("lr")

    @lr.setter
    def lr(self, value):
        self._trainer().set_hyper("lr", value)

    def set_hyperparameter(self, name, value):
        """A run-time hyperparameter (program.train.hyper: lr, beta1, ..., max_norm)."""
        self._trainer().set_hyper(name, value)

    def hyperparameters(self):
        return self._trainer().hyperparameters()

    def train_status(self):
        """{'grad_norm', 'nonfinite', 'skipped'} of the last update; 'steps' done so far."""
        t = self._trainer()
        return dict(t.status(), steps=t.steps())

    def optimizer_state_dict(self):
        """torch.optim's state_dict() of the compiled optimizer (one param group; parameter i
        is program.train.param_inputs[i])."""
        return self._trainer().optimizer_state_dict()

    def load_optimizer_state_dict(self, state_dict):
        """Loads a torch.optim state_dict (of the same optimizer on the same parameters)."""
        self._trainer().load_optimizer_state_dict(state_dict)

    def extra_repr(self):
        lib = self.build.library if self.build else self.program.path
        return f"program={self.program.name!r}, inputs={self.input_names}, library={lib!r}"


def load_module(library, weights=None, name=None):
    """A CompiledModule from an existing shared library (and its weights file)."""
    return CompiledModule(Program(library, name), weights)


def compile(path, *, name=None, requires_grad=None, freeze=None, specialize=None, partitioner=None,
            optimizer=None, clip_grad_norm=None, skip_nonfinite=False, grad_accumulation=False,
            data_parallel=None, world_size=None, on_nonfinite="warn", share_weights=None, derivatives=(), flags=(), cache_dir=None, aotc_bin=None, force=False):
    """Compiles `path` with aotc (cached, see aotc.build_library) and returns a
    CompiledModule. requires_grad / freeze: names for --requires-grad / --freeze;
    specialize: {symbol or 'input:dim': size} for a dynamic export (torch.export.Dim), compiled
    at that size (--specialize, docs/dynamic-shapes.md);
    partitioner: 'min-cut' (aotc's default) or 'default'; optimizer: an --optimizer text
    ('adamw:lr=1e-3,weight_decay=0.01'), with clip_grad_norm / skip_nonfinite /
    grad_accumulation, gives the module train_step; data_parallel: True (25 MB buckets) or a
    bucket size in MB compiles the step for set_communicator (--data-parallel, docs/
    distributed.md), 'zero1' or 'zero1:MB' with world_size=N shards the optimizer state over
    exactly N ranks (ZeRO-1, --world-size); on_nonfinite: 'warn', 'raise' or
    'skip' (CompiledModule.on_nonfinite); share_weights: a module (e.g. the
    train-mode export's) whose parameters and buffers this one uses, by FQN;
    derivatives: extra rule files; flags: further aotc flags. Raises CompileError with
    aotc's message on bad input."""
    fl = list(flags)
    if optimizer:
        fl.append(f"--optimizer={optimizer}")
    if clip_grad_norm is not None:
        fl.append(f"--clip-grad-norm={clip_grad_norm!r}")
    if skip_nonfinite:
        fl.append("--skip-nonfinite")
    if grad_accumulation:
        fl.append("--grad-accumulation")
    if data_parallel is True:
        fl.append("--data-parallel")
    elif data_parallel is not None and data_parallel is not False:
        fl.append(f"--data-parallel={data_parallel}")  # aotc checks the value (MB > 0, zero1[:MB])
    if world_size is not None:
        fl.append(f"--world-size={int(world_size)}")
    if requires_grad:
        fl.append("--requires-grad=" + ",".join(requires_grad))
    if freeze:
        fl.append("--freeze=" + ",".join(freeze))
    if specialize:
        fl.append("--specialize=" + ",".join(f"{k}={int(v)}" for k, v in sorted(specialize.items())))
    if partitioner:
        fl.append(f"--partitioner={partitioner}")
    b = build_library(path, name=name, flags=fl, derivatives=derivatives, cache_dir=cache_dir,
                      aotc_bin=aotc_bin, force=force)
    m = CompiledModule(Program(b.library, b.name), b.weights, build=b, share_weights=share_weights)
    if on_nonfinite != "warn":
        m.on_nonfinite = on_nonfinite
    return m
