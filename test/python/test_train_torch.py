"""The compiled train step and the eval path from Python (python/aotc/_train.py, _torch.py),
against torch.optim and torch's own modules (torch.export.load(pt2).module(), the same
weights). Bounds: both sides float32, losses rel 1e-5, parameters and optimizer state
max|a - e| / max|e| <= 1e-4. Needs torch: run_torch_tests.sh (scripts/test.sh --with-torch).
"""
import copy
import os
import unittest
from unittest import mock

import testutil
from testutil import MLP_GOLDEN, MLP_PT2

import torch

import aotc
from aotc._core import Program

DIGITS = os.path.join(testutil.SRC_ROOT, "examples", "digits")
CACHE = testutil.work_dir("train-cache")
_DT = {"f32": torch.float32, "i64": torch.int64}


def rel(a, e):
    a, e = a.detach().double(), e.detach().double()
    den = e.abs().max().item()
    return (a - e).abs().max().item() / den if den > 0 else (a - e).abs().max().item()


def golden_batch():
    g = aotc.read_safetensors(MLP_GOLDEN)
    t = lambda k: torch.frombuffer(bytearray(g[k].data), dtype=_DT[g[k].dtype]).reshape(g[k].shape).clone()  # noqa: E731
    return t("input.x"), t("input.target")


def reference(pt2, module, opt_cls, **kw):
    """torch's module of the export with `module`'s current weights, and its optimizer on the
    parameters in program.train.param_inputs order."""
    ref = torch.export.load(pt2).module()
    ref.load_state_dict(module.state_dict())
    p = module.program
    params = dict(ref.named_parameters())
    return ref, opt_cls([params[p.inputs[i].name] for i in p.train.param_inputs], **kw)


def torch_steps(ref, opt, inputs, n):
    out = []
    for _ in range(n):
        opt.zero_grad()
        loss = ref(*inputs)
        loss.backward()
        opt.step()
        out.append(loss.item())
    return out


class TrainStepTest(unittest.TestCase):
    def compile(self, **kw):
        return aotc.compile(MLP_PT2, cache_dir=CACHE, **kw)

    def assert_same_model(self, m, ref):
        for n, p in ref.named_parameters():
            self.assertLessEqual(rel(dict(m.named_parameters())[n], p), 1e-4, n)

    def assert_same_optimizer_state(self, got, want):
        self.assertEqual(sorted(got["state"]), sorted(want["state"]))
        for k, entry in want["state"].items():
            self.assertEqual(sorted(got["state"][k]), sorted(entry))
            for key, v in entry.items():
                if key == "step":
                    self.assertEqual(float(got["state"][k][key]), float(v))
                    self.assertEqual(got["state"][k][key].dtype, torch.float32)
                else:
                    self.assertLessEqual(rel(got["state"][k][key], v), 1e-4, f"{k}.{key}")
        g, w = got["param_groups"][0], want["param_groups"][0]
        for key, v in w.items():
            if key in g:
                self.assertEqual(g[key] if not isinstance(v, tuple) else tuple(g[key]), v, key)

    def test_adamw_amsgrad_matches_torch_optim(self):
        m = self.compile(optimizer="adamw:lr=0.001,weight_decay=0.05,amsgrad=1")
        ref, opt = reference(MLP_PT2, m, torch.optim.AdamW, lr=0.001, weight_decay=0.05, amsgrad=True)
        ref64 = copy.deepcopy(ref).double()
        p64 = dict(ref64.named_parameters())
        opt64 = torch.optim.AdamW([p64[m.program.inputs[i].name] for i in m.program.train.param_inputs], lr=0.001,
                                  weight_decay=0.05, amsgrad=True)
        x, t = golden_batch()
        got = [m.train_step(x, t).item() for _ in range(5)]
        want = torch_steps(ref, opt, (x, t), 5)
        torch_steps(ref64, opt64, (x.double(), t), 5)
        for a, e in zip(got, want):
            self.assertLessEqual(abs(a - e) / abs(e), 1e-5, (got, want))
        # Parameters against torch's float64 run. Adam's first step moves a weight by
        # lr * g / (|g| + eps): where g cancels to about eps, the float32 GEMM's rounding decides
        # much of that step, so the bound follows how far torch's own float32 run lands from
        # float64 (10x it, at least 1e-4). Measured on fc1.weight: torch float32 3.6e-5; aotc
        # 5e-5 with OpenBLAS's Haswell sgemm kernel (AMD hosts), 2.5e-4 with its AVX-512 SkylakeX
        # kernel (an Intel host; the gradients themselves agree to 2e-7 there).
        p32 = dict(ref.named_parameters())
        for n, p in m.named_parameters():
            bound = max(1e-4, 10 * rel(p32[n].double(), p64[n]))
            self.assertLessEqual(rel(p.double(), p64[n]), bound, n)
        self.assert_same_optimizer_state(m.optimizer_state_dict(), opt.state_dict())
        self.assertEqual(m.train_status()["steps"], 5)

    def test_sgd_state_dict_round_trip_continues_as_torch(self):
        m = self.compile(optimizer="sgd:lr=0.05,momentum=0.9,nesterov=1")
        ref, opt = reference(MLP_PT2, m, torch.optim.SGD, lr=0.05, momentum=0.9, nesterov=True)
        x, t = golden_batch()
        self.assertEqual(m.optimizer_state_dict()["state"], {})  # torch's is empty before a step
        torch_steps(ref, opt, (x, t), 3)
        # aotc takes over torch's model and optimizer after 3 steps; both go on for 2.
        m.load_state_dict(ref.state_dict())
        m.load_optimizer_state_dict(opt.state_dict())
        got = [m.train_step(x, t).item() for _ in range(2)]
        want = torch_steps(ref, opt, (x, t), 2)
        for a, e in zip(got, want):
            self.assertLessEqual(abs(a - e) / abs(e), 1e-5, (got, want))
        self.assert_same_model(m, ref)
        self.assert_same_optimizer_state(m.optimizer_state_dict(), opt.state_dict())

    def test_mismatched_optimizer_state_is_refused(self):
        m = self.compile(optimizer="adam:lr=0.001")
        ref, opt = reference(MLP_PT2, m, torch.optim.Adam, lr=0.001, amsgrad=True)
        torch_steps(ref, opt, golden_batch(), 1)
        # The runtime's restore names the first mismatch: the amsgrad state tensor the object
        # does not keep (or, for a state without one, the flag).
        with self.assertRaisesRegex(aotc.InputError, "max_exp_avg_sq|amsgrad=True"):
            m.load_optimizer_state_dict(opt.state_dict())
        sd = opt.state_dict()
        for entry in sd["state"].values():
            entry.pop("max_exp_avg_sq")
        with self.assertRaisesRegex(aotc.InputError, "amsgrad=True"):
            m.load_optimizer_state_dict(sd)
        self.assertEqual(m.train_status()["steps"], 0)

    def test_wrong_optimizer_states_are_refused_by_the_runtime(self):
        # The runtime's restore (runtime/src/Checkpoint.cpp) validates the converted state_dict:
        # each refusal names what is wrong, and nothing changes.
        m = self.compile(optimizer="adamw:lr=0.001")
        x, t = golden_batch()
        m.train_step(x, t)
        before = m.optimizer_state_dict()
        params = {n: p.detach().clone() for n, p in m.named_parameters()}

        def refused(sd, pattern):
            with self.assertRaisesRegex(aotc.InputError, pattern):
                m.load_optimizer_state_dict(sd)
            self.assert_same_optimizer_state(m.optimizer_state_dict(), before)
            self.assertEqual(m.hyperparameters()["lr"], 0.001)
            for n, p in m.named_parameters():
                self.assertTrue(torch.equal(p, params[n]), n)

        def edited(fn):
            sd = m.optimizer_state_dict()
            fn(sd)
            return sd
        refused(edited(lambda sd: sd["state"][1].update(exp_avg=torch.zeros(255))),
                r"optimizer.state.fc1.bias.exp_avg.*f32\[255\]")
        refused(edited(lambda sd: sd["state"][2].pop("exp_avg_sq")), r"no tensor 'optimizer.state.fc2.weight.exp_avg_sq'")
        refused(edited(lambda sd: sd["state"][3].update(step=torch.tensor(7.0))), "step counts")
        refused(edited(lambda sd: sd["param_groups"][0].update(lr=-1.0)), r"lr = -1")
        refused(edited(lambda sd: sd["param_groups"][0].update(amsgrad=True)), "amsgrad=True")
        refused(edited(lambda sd: sd["param_groups"][0].update(decoupled_weight_decay=False)),
                "decoupled_weight_decay")
        refused(edited(lambda sd: sd["param_groups"].append(dict(sd["param_groups"][0]))), "2 param groups")
        refused(edited(lambda sd: sd["param_groups"][0].update(params=[0, 1, 2])), "3 parameters but 4 names")
        refused({"state": {}}, "param_groups")
        # A state_dict of the compiled optimizer's own shape loads (itself: nothing changes).
        m.load_optimizer_state_dict(before)
        self.assert_same_optimizer_state(m.optimizer_state_dict(), before)
        self.assertEqual(m.train_status()["steps"], 1)

    def test_optimizer_state_names_match_the_descriptor(self):
        # Python's view of the state (program.train.state) and the runtime's checkpoint agree.
        m = self.compile(optimizer="adam:lr=0.001,amsgrad=1")
        m.train_step(*golden_batch())
        p, sd = m.program, m.optimizer_state_dict()
        for k, i in enumerate(p.train.param_inputs):
            keys = [s.key for s in p.train.state if s.kind == aotc._core.STATE_OPTIMIZER and s.param_input == i]
            self.assertEqual(sorted(sd["state"][k]), sorted(keys + ["step"]), p.inputs[i].name)
            for s in p.train.state:
                if s.kind == aotc._core.STATE_OPTIMIZER and s.param_input == i:
                    self.assertEqual(tuple(sd["state"][k][s.key].shape), s.shape, s.name)
        self.assertEqual([h.name for h in p.train.hyper][0], "lr")
        self.assertEqual(set(m.hyperparameters()), {h.name for h in p.train.hyper})

    def test_replaced_parameter_is_rebound_or_refused(self):
        m = self.compile(optimizer="sgd:lr=0.1,momentum=0.9")
        ref = self.compile(optimizer="sgd:lr=0.1,momentum=0.9")
        x, t = golden_batch()
        # Another aligned, contiguous tensor: the trainer updates it in place from now on.
        m.train_step(x, t)
        new = aotc._torch.aligned_empty(m.fc2.bias.shape, torch.float32)
        new.copy_(m.fc2.bias.detach())
        m.fc2.bias.data = new
        m.train_step(x, t)
        ref.train_step(x, t)
        ref.train_step(x, t)
        self.assertEqual(m.fc2.bias.data_ptr(), new.data_ptr())
        self.assertTrue(torch.equal(m.fc2.bias, ref.fc2.bias))
        self.assertTrue(torch.equal(m.fc1.weight, ref.fc1.weight))
        # The checkpoint reads the module's current tensors too (rebound first).
        newer = aotc._torch.aligned_empty(m.fc2.bias.shape, torch.float32)
        newer.fill_(0.5)
        m.fc2.bias.data = newer
        del new
        self.assertEqual(m.optimizer_state_dict()["state"].keys(), {0, 1, 2, 3})
        m.load_optimizer_state_dict(m.optimizer_state_dict())
        self.assertTrue(torch.equal(m.fc2.bias, torch.full_like(newer, 0.5)))
        # An unaligned one is refused (train_step writes the module's tensor in place).
        big = torch.empty(m.fc2.bias.numel() + 1)
        m.fc2.bias.data = big[1:]
        with self.assertRaisesRegex(aotc.InputError, "no longer a 64-byte aligned"):
            m.train_step(x, t)

    def test_no_load_in_the_middle_of_an_accumulation(self):
        m = self.compile(optimizer="sgd:lr=0.1,momentum=0.9", grad_accumulation=True)
        x, t = golden_batch()
        m.train_step(x, t)
        sd = m.optimizer_state_dict()
        before = m.fc1.weight.detach().clone()
        m.accumulate(x, t)  # gradients into the accumulators, nothing updated
        self.assertTrue(torch.equal(m.fc1.weight, before))
        self.assertEqual(m.train_status()["steps"], 1)
        with self.assertRaisesRegex(aotc.InputError, "gradient accumulation"):
            m.load_optimizer_state_dict(sd)
        m.train_step(x, t)  # the update with both micro-batches' gradients
        self.assertEqual(m.train_status()["steps"], 2)
        m.load_optimizer_state_dict(sd)
        self.assertEqual(m.train_status()["steps"], 1)

    # Plain SGD keeps no optimizer state: its checkpoint is a step count without state tensors
    # (the runtime refused its own such checkpoint before; ctest optim.mlp_sgd_plain.resume_*).
    def test_plain_sgd_state_dict_round_trip(self):
        m = self.compile(optimizer="sgd:lr=0.1")
        ref, opt = reference(MLP_PT2, m, torch.optim.SGD, lr=0.1)
        x, t = golden_batch()
        torch_steps(ref, opt, (x, t), 1)
        m.train_step(x, t)
        m.load_optimizer_state_dict(m.optimizer_state_dict())
        self.assertEqual(m.train_status()["steps"], 1)
        sd = opt.state_dict()  # torch 2.15's SGD without momentum keeps no per-parameter state
        m.load_optimizer_state_dict(sd)
        self.assertEqual(m.train_status()["steps"], 1 if sd["state"] else 0)

    def test_run_time_hyperparameters_are_checked(self):
        m = self.compile(optimizer="adamw:lr=0.001,weight_decay=0.01")
        with self.assertRaisesRegex(aotc.InputError, "momentum"):
            m.set_hyperparameter("momentum", 0.9)
        with self.assertRaisesRegex(aotc.InputError, "beta2"):
            m.set_hyperparameter("beta2", 1.0)  # [0, 1)
        m.set_hyperparameter("beta2", 0.99)
        self.assertEqual(m.hyperparameters()["beta2"], 0.99)
        with self.assertRaises(aotc.Error):
            m.accumulate(*golden_batch())  # compiled without grad_accumulation

    def test_nonfinite_steps_warn_raise_or_skip(self):
        x, t = golden_batch()
        bad = torch.full_like(x, float("nan"))
        m = self.compile(optimizer="sgd:lr=0.1")
        self.assertEqual(m.on_nonfinite, "warn")
        m.train_step(bad, t)  # warned once on stderr (the C++ trainer), counted
        m.train_step(bad, t)
        self.assertEqual(m.nonfinite_steps, 2)
        m.on_nonfinite = "raise"
        with self.assertRaisesRegex(aotc.NonfiniteError, r"call 3 \(a step\): the loss is nan.*update was applied"):
            m.train_step(bad, t)
        with self.assertRaisesRegex(aotc.InputError, "--skip-nonfinite"):
            m.on_nonfinite = "skip"  # only the compiled step can leave the parameters untouched
        with self.assertRaises(ValueError):
            m.on_nonfinite = "ignore"
        s = self.compile(optimizer="sgd:lr=0.1", skip_nonfinite=True, on_nonfinite="skip")
        before = {n: p.detach().clone() for n, p in s.named_parameters()}
        s.train_step(bad, t)
        self.assertEqual(s.nonfinite_steps, 1)
        for n, p in s.named_parameters():
            self.assertTrue(torch.equal(p, before[n]), n)

    def test_learning_rate_is_a_run_time_value(self):
        m = self.compile(optimizer="sgd:lr=0.1")
        x, t = golden_batch()
        m.lr = 0.0
        before = {n: p.detach().clone() for n, p in m.named_parameters()}
        m.train_step(x, t)
        for n, p in m.named_parameters():
            self.assertTrue(torch.equal(p, before[n]), n)  # lr 0: nothing moves
        m.lr = 0.1
        m.train_step(x, t)
        self.assertFalse(torch.equal(m.fc1.weight, before["fc1.weight"]))
        with self.assertRaisesRegex(aotc.InputError, r"lr = -1(\.0*)? is outside"):
            m.lr = -1
        with self.assertRaises(aotc.Error):
            self.compile().train_step(x, t)  # no --optimizer


class EvalTest(unittest.TestCase):
    def test_no_grad_runs_the_eval_entry_point(self):
        m = aotc.compile(MLP_PT2, cache_dir=CACHE)
        x, t = golden_batch()
        with_grad = m(x, t)
        self.assertIsNotNone(with_grad.grad_fn)
        calls = []
        real = Program.call_eval
        with mock.patch.object(Program, "call_eval", lambda self, *a: calls.append(1) or real(self, *a)):
            with torch.no_grad():
                a = m(x, t)
            m.eval()
            b = m(x, t)            # eval() alone keeps autograd, as eager torch
            m.requires_grad_(False)
            c = m(x, t)            # nothing requires grad: eval
            m.requires_grad_(True)
            m.train()
        self.assertEqual(len(calls), 2)
        self.assertIsNotNone(b.grad_fn)
        self.assertIsNone(c.grad_fn)
        for v in (a, b, c):
            self.assertEqual(v.item(), with_grad.item())

    def test_train_step_invalidates_older_graphs(self):
        m = aotc.compile(MLP_PT2, cache_dir=CACHE, optimizer="sgd:lr=0.1")
        x, t = golden_batch()
        loss = m(x, t)
        m.train_step(x, t)
        if hasattr(torch.autograd.graph, "increment_version"):
            with self.assertRaisesRegex(RuntimeError, "modified by an inplace operation"):
                loss.backward()

    def test_eval_export_shares_the_train_modules_weights(self):
        m = aotc.compile(os.path.join(DIGITS, "digits.pt2"), cache_dir=CACHE, optimizer="adamw:lr=0.003")
        ev = aotc.compile(os.path.join(DIGITS, "digits_eval.pt2"), cache_dir=CACHE, share_weights=m)
        self.assertIs(ev.net.fc1.weight, m.net.fc1.weight)
        torch.manual_seed(0)
        x = torch.rand(64, 1, 8, 8)
        y = torch.randint(0, 10, (64,))
        for _ in range(3):
            m.train_step(x, y)
        test = torch.rand(*ev.program.inputs[ev.program.input_index(ev.input_names[0])].shape)
        ref = torch.export.load(os.path.join(DIGITS, "digits_eval.pt2")).module()
        ref.load_state_dict(m.state_dict())
        with torch.no_grad():
            self.assertLessEqual(rel(ev(test), ref(test)), 1e-5)


if __name__ == "__main__":
    unittest.main()
