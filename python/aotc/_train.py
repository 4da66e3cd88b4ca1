"""The compiled train step from Python: what CompiledModule.train_step and its optimizer
methods run (objects compiled with aotc --optimizer=..., docs/training.md, docs/python.md).

TrainStep(module) owns what lives from step to step, as aotc::rt::Trainer does in C++: the
state area (optimizer state, step count, accumulators, status; zeroed once), the run-time
hyperparameters (a ctypes double array, lr first), the saved area, the train scratch and the
outputs, all allocated once. The module's parameters and buffers are the program's inputs
themselves (64-byte aligned torch tensors): <name>_train_step updates them in place, so after
a step `module.state_dict()` is the trained model.

optimizer_state_dict() / load_optimizer_state_dict() use torch.optim's format for the one
parameter group the object was compiled with: {"state": {i: {"step": tensor(f32), "exp_avg":
..., ...}}, "param_groups": [{"lr": ..., "betas": (..), ..., "params": [0..n-1]}]}, parameter i
being the i-th entry of program.train.param_inputs (the order of named_parameters()).
"""
import ctypes

import torch

from ._core import (STATE_ACCUM_COUNT, STATE_OPTIMIZER, STATE_STATUS, STATE_STEP, STEP_ACCUMULATE,
                    Error, InputError)


class TrainStep:
    """The persistent buffers of one module's train step (see the module docstring)."""

    def __init__(self, module, torch_dtype, aligned_empty):
        p = module.program
        t = p.train
        if t is None:
            raise Error(f"{p.name}: the object has no train step: compile with "
                        f"optimizer='adamw:lr=1e-3' (aotc --optimizer)")
        self.module, self.program, self.train = module, p, t
        self.state = aligned_empty((max(1, t.state_bytes),), torch.uint8).zero_()
        self.hyper = (ctypes.c_double * max(1, len(t.hyper)))(*[h.value for h in t.hyper])
        self.saved = aligned_empty((max(1, p.saved_bytes),), torch.uint8)
        self.scratch = aligned_empty((max(1, t.scratch_bytes),), torch.uint8)
        self.outputs = [aligned_empty(d.shape, torch_dtype[d.dtype]) for d in p.outputs]
        self._out_ptrs = [o.data_ptr() for o in self.outputs]
        self._dtype = torch_dtype

    # -- state views ---------------------------------------------------------------------
    def view(self, s):
        """The state tensor `s` (a StateDesc) as a torch view into the state area."""
        return self.state[s.offset:s.offset + s.nbytes].view(self._dtype[s.dtype]).view(s.shape)

    def _find(self, kind, name=None):
        for s in self.train.state:
            if s.kind == kind and (name is None or s.name == name):
                return s
        return None

    def steps(self):
        s = self._find(STATE_STEP)
        return int(self.view(s).item()) if s else 0

    def status(self):
        """{'grad_norm': float, 'nonfinite': bool, 'skipped': bool} of the last update."""
        g, n = self._find(STATE_STATUS, "status.grad_norm"), self._find(STATE_STATUS, "status.nonfinite")
        nonfinite = bool(self.view(n).item()) if n else False
        return {"grad_norm": float(self.view(g).item()) if g else 0.0, "nonfinite": nonfinite,
                "skipped": nonfinite and self.train.skip_nonfinite}

    # -- the step ------------------------------------------------------------------------
    def run(self, full, flags):
        """One call of train_step on the program-order inputs `full` (parameters and buffers
        are the module's own tensors, updated in place). Returns the loss (a 0-d tensor)."""
        p, runner = self.program, self.module._runner
        if flags & STEP_ACCUMULATE and not self.train.grad_accumulation:
            raise Error(f"{p.name}: accumulate() needs an object compiled with grad_accumulation=True "
                        f"(aotc --grad-accumulation)")
        ptrs, kept = [], []  # kept: aligned copies of user inputs, alive through the call
        for d, t in zip(p.inputs, full):
            ready = runner.check(d, t, f"input '{d.name}' (input {d.index})")
            if d.role != "user_input" and ready.data_ptr() != t.data_ptr():
                raise InputError(f"{p.name}: {d.role} '{d.name}' is no longer a 64-byte aligned "
                                 f"contiguous tensor; train_step updates it in place")
            ptrs.append(ready.data_ptr())
            kept.append(ready)
        with torch.no_grad():
            p.call_train_step(ptrs, self._out_ptrs, self.saved.data_ptr(), self.state.data_ptr(),
                              self.hyper, self.scratch.data_ptr(), flags)
        # Written behind torch's back: bump the version counters, so an autograd graph saved
        # before this step refuses to backpropagate through the changed values.
        bump = getattr(torch.autograd.graph, "increment_version", None)
        if bump is not None:
            for d, t in zip(p.inputs, full):
                if d.role != "user_input" and isinstance(t, torch.Tensor):
                    bump(t)
        return self.outputs[0].detach().clone()

    # -- hyperparameters -----------------------------------------------------------------
    def set_hyper(self, name, value):
        h = self.train.hyper_desc(name)
        self.hyper[h.index] = h.check(value)

    def get_hyper(self, name):
        return self.hyper[self.train.hyper_desc(name).index]

    def hyperparameters(self):
        return {h.name: self.hyper[h.index] for h in self.train.hyper}

    # -- torch.optim's state_dict --------------------------------------------------------
    def _adam(self):
        return self.train.optimizer != "sgd"

    def param_group(self):
        """torch.optim's param_groups[0] for the compiled optimizer and current hyperparameters."""
        t, hy = self.train, self.hyperparameters()
        g = {"lr": hy.get("lr", 0.0)}
        if self._adam():
            g.update(betas=(hy.get("beta1", 0.9), hy.get("beta2", 0.999)), eps=hy.get("eps", 1e-8),
                     weight_decay=hy.get("weight_decay", 0.0), amsgrad=t.flag("amsgrad"), foreach=None,
                     maximize=t.flag("maximize"), capturable=False, differentiable=False, fused=None,
                     decoupled_weight_decay=t.optimizer == "adamw")
        else:
            g.update(momentum=hy.get("momentum", 0.0), dampening=hy.get("dampening", 0.0),
                     weight_decay=hy.get("weight_decay", 0.0), nesterov=t.flag("nesterov"),
                     maximize=t.flag("maximize"), foreach=None, differentiable=False, fused=None)
        g["params"] = list(range(len(t.param_inputs)))
        return g

    def optimizer_state_dict(self):
        t, n = self.train, self.steps()
        state = {}
        if n > 0:  # torch's state is empty before the first step
            for k, i in enumerate(t.param_inputs):
                entry = {"step": torch.tensor(float(n), dtype=torch.float32)} if self._adam() else {}
                for s in t.state:
                    if s.kind == STATE_OPTIMIZER and s.param_input == i:
                        entry[s.key] = self.view(s).clone()
                state[k] = entry
        return {"state": state, "param_groups": [self.param_group()]}

    def load_optimizer_state_dict(self, sd):
        """Validates everything, then replaces the state and the hyperparameters; InputError
        naming the first mismatch (nothing changed then)."""
        p, t = self.program, self.train
        name = p.name
        if self.accumulating():
            raise InputError(f"{name}: cannot load an optimizer state in the middle of a gradient "
                             f"accumulation (call train_step first)")
        try:
            groups, state = sd["param_groups"], sd["state"]
        except (KeyError, TypeError):
            raise InputError(f"{name}: an optimizer state_dict has 'state' and 'param_groups'") from None
        if len(groups) != 1:
            raise InputError(f"{name}: the object was compiled for one parameter group, the state_dict "
                             f"has {len(groups)}")
        g = groups[0]
        ids = list(g.get("params", []))
        if len(ids) != len(t.param_inputs):
            raise InputError(f"{name}: param_groups[0] has {len(ids)} parameters, the object updates "
                             f"{len(t.param_inputs)}")
        for flag in ("nesterov", "amsgrad", "maximize"):
            if flag in g and bool(g[flag]) != t.flag(flag):
                raise InputError(f"{name}: param_groups[0] has {flag}={g[flag]} but the object was "
                                 f"compiled with {t.config}")
        if self._adam() and "decoupled_weight_decay" in g and \
                bool(g["decoupled_weight_decay"]) != (t.optimizer == "adamw"):
            raise InputError(f"{name}: param_groups[0] has decoupled_weight_decay="
                             f"{g['decoupled_weight_decay']} (torch's {'AdamW' if g['decoupled_weight_decay'] else 'Adam'}) "
                             f"but the object was compiled with {t.config}")
        hyper = {k: float(v) for k, v in g.items()
                 if k in ("lr", "momentum", "dampening", "weight_decay", "eps")}
        if "betas" in g:
            hyper["beta1"], hyper["beta2"] = float(g["betas"][0]), float(g["betas"][1])
        names = {h.name for h in t.hyper}
        for k, v in hyper.items():
            if k not in names and v != 0:
                raise InputError(f"{name}: hyperparameter {k} = {v} is not compiled into this object "
                                 f"({t.config})")
            if k in names:
                t.hyper_desc(k).check(v)
        # The per-parameter state: every key the object keeps, with its shape; one step count.
        copies, step = [], None
        for k, i in enumerate(t.param_inputs):
            fqn = p.inputs[i].name
            entry = state.get(ids[k], {}) if state else {}
            for s in t.state:
                if s.kind != STATE_OPTIMIZER or s.param_input != i or not state:
                    continue
                v = entry.get(s.key)
                if not isinstance(v, torch.Tensor) or tuple(v.shape) != s.shape:
                    got = "missing" if v is None else (f"{list(v.shape)}" if isinstance(v, torch.Tensor) else type(v).__name__)
                    raise InputError(f"{name}: state of parameter {ids[k]} ('{fqn}'): '{s.key}' must be "
                                     f"{s.dtype}{list(s.shape)}, got {got}")
                copies.append((s, v))
            if state and self._adam():
                st = entry.get("step")
                if st is None:
                    raise InputError(f"{name}: state of parameter {ids[k]} ('{fqn}') has no 'step'")
                st = float(st)
                if step is not None and st != step:
                    raise InputError(f"{name}: the step counts of the parameters differ ({step} and {st} "
                                     f"for '{fqn}')")
                step = st
        if step is None:
            step = 1.0 if state else 0.0  # SGD's momentum buffers exist: not the first step
        # Apply.
        with torch.no_grad():
            self.state.zero_()
            for s, v in copies:
                self.view(s).copy_(v.to(self._dtype[s.dtype]))
            s = self._find(STATE_STEP)
            if s:
                self.view(s).fill_(step)
        for k, v in hyper.items():
            if k in names:
                self.set_hyper(k, v)

    def accumulating(self):
        s = self._find(STATE_ACCUM_COUNT)
        return bool(s) and float(self.view(s).item()) != 0
