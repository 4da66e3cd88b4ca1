"""The compiled train step from Python: what CompiledModule.train_step and its optimizer
methods run (objects compiled with aotc --optimizer=..., docs/training.md, docs/python.md).

TrainStep(module) is a runtime trainer (aotc_rt_trainer of aotc/capi.h: the C++
aotc::rt::Trainer) whose weights are the module's own tensors, borrowed in place: the
parameters, buffers, lifted constants and the RNG state (64-byte aligned torch tensors) are
the program's inputs themselves, so after a step `module.state_dict()` is the trained model.
The trainer owns the rest (optimizer state, hyperparameters, saved area, scratch, outputs),
allocated once. A module tensor replaced by another (`p.data = ...`) is rebound
(aotc_rt_trainer_bind) when it is still aligned and contiguous.

optimizer_state_dict() / load_optimizer_state_dict() use torch.optim's format for the one
parameter group the object was compiled with: {"state": {i: {"step": tensor(f32), "exp_avg":
..., ...}}, "param_groups": [{"lr": ..., "betas": (..), ..., "params": [0..n-1]}]}, parameter i
being the i-th entry of program.train.param_inputs (the order of named_parameters()). Both go
through the runtime's checkpoint (aotc_rt_trainer_checkpoint / _restore, runtime/src/
Checkpoint.cpp), converted by _checkpoint.py; the restore validates everything first and
changes nothing on a mismatch (InputError with its message).
"""
import ctypes
import threading

import torch

from . import _checkpoint
from ._core import (NONFINITE_POLICIES, RT_ERROR_ARGUMENT, RT_ERROR_IO, RT_ERROR_STATE, Error, InputError,
                    RtTrainStatus, _table)


class TrainStep:
    """A runtime trainer on one module's tensors (see the module docstring)."""

    def __init__(self, module, torch_dtype, aligned_empty):
        p = module.program
        t = p.train
        if t is None:
            raise Error(f"{p.name}: the object has no train step: compile with "
                        f"optimizer='adamw:lr=1e-3' (aotc --optimizer)")
        self.module, self.program, self.train = module, p, t
        self._dtype = torch_dtype
        self._rt = p._rt
        self._lock = threading.Lock()  # a trainer serves one thread at a time
        self._user = [d for d in p.inputs if d.role == "user_input"]
        # input index -> an alias of the tensor the trainer has (keeps its storage alive after
        # the module replaced it, until the next call rebinds)
        self._bound = {}
        entries = []
        for d in p.inputs:
            if d.role == "user_input":
                entries.append((None,) + d._rt)
                continue
            w = self._weight(d, self._module_tensor(d))
            self._bound[d.index] = w.detach()
            entries.append((w.data_ptr(),) + d._rt)
        h = ctypes.c_void_p()
        self._check(self._rt.trainer_create(p.address, _table(entries), len(entries), 0, ctypes.byref(h)))
        self._ptr = h.value
        self._user_table = _table([(None,) + d._rt for d in self._user])

    def __del__(self):
        ptr, self._ptr = getattr(self, "_ptr", None), None
        if ptr:
            try:
                self._rt.trainer_destroy(ptr)
            except Exception:  # interpreter shutdown
                pass

    def _check(self, status):
        self._rt.check(status, self.program.name)

    def _module_tensor(self, d):
        owner, leaf = self.module._param_paths[d.index]
        return getattr(owner, leaf)

    def _weight(self, d, t):
        """The module's tensor for input `d`, checked as any input (dtype, shape, device,
        contiguity); InputError when it is not 64-byte aligned (it is updated in place)."""
        ready = self.module._runner.check(d, t, f"input '{d.name}' (input {d.index})")
        if ready.data_ptr() != t.data_ptr():
            raise InputError(f"{self.program.name}: {d.role} '{d.name}' is no longer a 64-byte aligned "
                             f"contiguous tensor; train_step updates it in place")
        return t

    def _rebind(self, d, t):
        """Points the trainer's input `d` at the module's tensor `t` if it holds another one
        now (under the lock)."""
        w = self._weight(d, t)
        if w.data_ptr() != self._bound[d.index].data_ptr():
            one = _table([(w.data_ptr(),) + d._rt])
            self._check(self._rt.trainer_bind(self._ptr, d.index, one))
            self._bound[d.index] = w.detach()

    def _sync(self):
        for d in self.program.inputs:
            if d.role != "user_input":
                self._rebind(d, self._module_tensor(d))

    # -- the step ------------------------------------------------------------------------
    def run(self, full, flags):
        """One aotc_rt_trainer_step on the program-order inputs `full` (the user inputs are
        passed; parameters and buffers are the module's own tensors, updated in place, rebound
        when the module holds another tensor now). Returns the loss (a 0-d tensor)."""
        p, runner = self.program, self.module._runner
        kept = []  # aligned copies of user inputs, alive through the call
        with self._lock:
            for d, t in zip(p.inputs, full):
                if d.role == "user_input":
                    ready = runner.check(d, t, f"input '{d.name}' (input {d.index})")
                    kept.append(ready)
                    continue
                self._rebind(d, t)
            table = self._user_table
            for e, ready, d in zip(table, kept, self._user):
                e.data = ready.data_ptr()
            with torch.no_grad():
                self._check(self._rt.trainer_step(self._ptr, table, len(kept), flags, None))
            out = ctypes.c_void_p()
            self._check(self._rt.trainer_output(self._ptr, 0, ctypes.byref(out)))
            d = p.outputs[0]
            loss = torch.empty(d.shape, dtype=self._dtype[d.dtype])
            ctypes.memmove(loss.data_ptr(), out.value, d.nbytes)
        # Written behind torch's back: bump the version counters, so an autograd graph saved
        # before this step refuses to backpropagate through the changed values.
        bump = getattr(torch.autograd.graph, "increment_version", None)
        if bump is not None:
            for d, t in zip(p.inputs, full):
                if d.role != "user_input" and isinstance(t, torch.Tensor):
                    bump(t)
        return loss

    # -- status and hyperparameters ------------------------------------------------------
    def _status(self):
        s = RtTrainStatus()
        self._check(self._rt.trainer_status(self._ptr, ctypes.byref(s)))
        return s

    def steps(self):
        return int(self._status().steps)

    def status(self):
        """{'grad_norm': float, 'nonfinite': bool, 'skipped': bool} of the last update."""
        s = self._status()
        return {"grad_norm": float(s.grad_norm), "nonfinite": bool(s.nonfinite), "skipped": bool(s.skipped)}

    def set_on_nonfinite(self, policy):
        """'warn' (default), 'raise' or 'skip' (trainer.h Trainer::OnNonfinite)."""
        if policy not in NONFINITE_POLICIES:
            raise ValueError(f"on_nonfinite must be one of {sorted(NONFINITE_POLICIES)}, got {policy!r}")
        self._check(self._rt.trainer_on_nonfinite(self._ptr, NONFINITE_POLICIES[policy]))

    def set_comm(self, table):
        """aotc_rt_trainer_set_comm: an abi.h aotc_comm's address (MpiCommunicator.table), or None."""
        with self._lock:
            self._sync()
            self._check(self._rt.trainer_set_comm(self._ptr, table))

    def nonfinite_count(self):
        n = ctypes.c_int64()
        self._check(self._rt.trainer_nonfinite_count(self._ptr, ctypes.byref(n)))
        return n.value

    def accumulating(self):
        return bool(self._status().accumulating)

    def set_hyper(self, name, value):
        """InputError for a name the object does not have or a value outside its range."""
        with self._lock:
            self._check(self._rt.trainer_set_hyper(self._ptr, str(name).encode(), float(value)))

    def get_hyper(self, name):
        v = ctypes.c_double()
        self._check(self._rt.trainer_get_hyper(self._ptr, str(name).encode(), ctypes.byref(v)))
        return v.value

    def hyperparameters(self):
        return {h.name: self.get_hyper(h.name) for h in self.train.hyper}

    # -- checkpoints and torch.optim's state_dict ----------------------------------------
    def checkpoint(self):
        """The runtime's checkpoint (torch's names, docs/training.md "Checkpoints") as bytes."""
        data, size = ctypes.c_void_p(), ctypes.c_int64()
        with self._lock:
            self._sync()
            self._check(self._rt.trainer_checkpoint(self._ptr, ctypes.byref(data), ctypes.byref(size)))
        try:
            return ctypes.string_at(data.value, size.value)
        finally:
            self._rt.free(data.value)

    def restore(self, image, what):
        """aotc_rt_trainer_restore of a checkpoint image (bytes): validated first, nothing changed
        on a mismatch (InputError naming it, `what` in front)."""
        with self._lock:
            self._sync()
            status = self._rt.trainer_restore(self._ptr, image, len(image), what.encode())
        # ARGUMENT, IO (not a checkpoint of this program), STATE (in the middle of a gradient
        # accumulation): the caller's state_dict is refused.
        if status in (RT_ERROR_ARGUMENT, RT_ERROR_IO, RT_ERROR_STATE):
            raise InputError(self._rt.last_error().decode("utf-8", "replace"))
        self._check(status)

    def optimizer_state_dict(self):
        what = f"{self.program.name}: checkpoint"
        tensors, meta = _checkpoint.parse(self.checkpoint(), what)
        return _checkpoint.optimizer_to_torch(tensors, meta, what)

    def load_optimizer_state_dict(self, sd):
        """Replaces the optimizer state and hyperparameters with torch.optim's state_dict `sd`
        (the checkpoint's optimizer part, restored by the runtime: InputError naming the first
        mismatch, nothing changed then)."""
        what = f"{self.program.name}: optimizer state_dict"
        tensors, meta = _checkpoint.parse(self.checkpoint(), f"{self.program.name}: checkpoint")
        tensors, meta = _checkpoint.replace_optimizer(tensors, meta, sd, what)
        self.restore(_checkpoint.dumps(tensors, meta, what), what)

    def poison_scratch(self):
        """Test hook: the saved area and the train scratch filled with 0xFF (NaN)."""
        self._check(self._rt.trainer_poison_scratch(self._ptr))

