"""The torch-free core (python/aotc/_core.py, _build.py) on the MLP and LN-GELU goldens.

Run by ctest (python.core) with the environment of test/python/CMakeLists.txt:
AOTC_TEST_MLP_LIB (libmlp.so built by CMake), AOTC_TEST_DLOPEN_CHECK, AOTC_BIN.
Standalone (`python3 -m unittest test_core` here) it builds what it needs with
$AOTC_BIN, or skips with the reason.
"""
import array
import ctypes
import json
import math
import os
import re
import shutil
import struct
import subprocess
import sys
import threading
import unittest

import testutil
from testutil import LG_GOLDEN, LG_PT2, MLP_GOLDEN, MLP_PT2, env_path, golden_inputs, rel_err

import aotc
from aotc import _core

try:
    import numpy
except ImportError:
    numpy = None

LR32 = struct.unpack("<f", struct.pack("<f", 0.1))[0]  # torch's (float)0.1


def _aotc_available():
    try:
        aotc.find_aotc()
        return True
    except aotc.Error:
        return False


def mlp_library():
    """libmlp.so from CMake, else built with aotc into a work dir, else None."""
    lib = env_path("AOTC_TEST_MLP_LIB")
    if lib:
        return lib
    if not _aotc_available():
        return None
    return aotc.build_library(MLP_PT2, cache_dir=testutil.work_dir("mlp-cache")).library


def run_step(program, inputs):
    outs, ctx = program.forward(inputs)
    return outs, program.backward(ctx)


def sgd_train(test, program, golden, steps=20):
    """`steps` SGD steps (p <- p - 0.1 g in float32) on the golden batch; returns the
    losses and the final parameters (name -> flat list)."""
    inputs = {n: aotc.Tensor(v.dtype, v.shape, v.data)
              for n, v in golden_inputs(program, golden).items()}
    losses = []
    for _ in range(steps):
        outs, grads = run_step(program, inputs)
        losses.append(outs[0].item())
        for d, g in zip(program.grads, grads):
            if numpy is not None:  # the same float32 update, vectorized
                p = inputs[d.name].numpy()
                p -= numpy.float32(LR32) * g.numpy()
                continue
            p = inputs[d.name].memoryview()
            new = array.array("f", [a - LR32 * b for a, b in zip(p.tolist(), g.tolist())])
            p[:] = memoryview(new)
    return losses, {d.name: inputs[d.name].tolist() for d in program.grads}


class MlpSharedLibrary(unittest.TestCase):
    """libmlp.so: the MLP object linked into a shared library."""

    @classmethod
    def setUpClass(cls):
        lib = mlp_library()
        if lib is None:
            raise unittest.SkipTest("no libmlp.so (AOTC_TEST_MLP_LIB) and no aotc (AOTC_BIN)")
        cls.lib = lib
        cls.p = aotc.Program(lib)
        cls.golden = aotc.read_safetensors(MLP_GOLDEN)

    def test_core_never_imports_torch(self):
        code = ("import sys, aotc; p = aotc.Program(sys.argv[1]); "
                "o, c = p.forward({d.name: aotc.Tensor(d.dtype, d.shape) for d in p.inputs}); "
                "p.backward(c); aotc.set_num_threads(1); "
                "assert 'torch' not in sys.modules and 'numpy' not in sys.modules, 'imported'")
        env = dict(os.environ, PYTHONPATH=os.path.join(testutil.SRC_ROOT, "python"))
        subprocess.run([sys.executable, "-c", code, self.lib], check=True, env=env)

    def test_constants_match_c(self):
        # ABI_VERSION is the runtime's (aotc_rt_abi_version: minor << 16 | major), the same as
        # abi.h's AOTC_ABI_VERSION that the C loader was compiled with.
        with open(os.path.join(testutil.SRC_ROOT, "runtime", "include", "aotc", "abi.h")) as f:
            h = f.read()
        major = int(re.search(r"#define AOTC_ABI_MAJOR (\d+)", h).group(1))
        minor = int(re.search(r"#define AOTC_ABI_MINOR (\d+)", h).group(1))
        self.assertEqual(aotc.ABI_VERSION, minor << 16 | major)  # 9 today (major 9, minor 0)
        exe = env_path("AOTC_TEST_DLOPEN_CHECK")
        if not exe:
            self.skipTest("AOTC_TEST_DLOPEN_CHECK not set (the C layout printer)")
        p = subprocess.run([exe, "--layout"], capture_output=True, text=True)
        if p.returncode != 0:
            self.skipTest(f"dlopen_check --layout: {p.stderr.strip()}")
        c = json.loads(p.stdout)
        self.assertEqual(c["AOTC_ABI_VERSION"], aotc.ABI_VERSION)
        self.assertEqual(c["AOTC_ALIGNMENT"], aotc.ALIGNMENT)

    def test_descriptor_matches_dlopen_check(self):
        # The descriptor as the runtime's JSON gives it to Python (aotc_rt_program_describe) and
        # as the C loader reads the struct itself: every tensor's name, dtype, shape, role,
        # requires_grad, numel and bytes, and grad_input_index.
        exe = env_path("AOTC_TEST_DLOPEN_CHECK")
        if not exe:
            self.skipTest("AOTC_TEST_DLOPEN_CHECK not set (the C loader)")
        out = subprocess.run([exe, self.lib, "mlp"], check=True, capture_output=True, text=True).stdout
        p = self.p
        want = []
        for kind, descs in (("in", p.inputs), ("out", p.outputs), ("grad", p.grads)):
            for d in descs:
                want.append(f"{kind}[{d.index}] {d.name} {d.type_str} {d.role} requires_grad="
                            f"{int(d.requires_grad)} numel={d.numel} bytes={d.nbytes}")
        got = [l for l in out.splitlines() if l.split("[", 1)[0] in ("in", "out", "grad") and "=" in l
               and " requires_grad=" in l]
        self.assertEqual(got, want)
        gi = [int(l.rsplit(" ", 1)[1]) for l in out.splitlines() if " of input " in l]
        self.assertEqual(gi, p.grad_input_index)
        head = next(l for l in out.splitlines() if l.startswith("program "))
        self.assertIn(f"program {p.name} abi_version={p.abi_version} inputs={len(p.inputs)} "
                      f"outputs={len(p.outputs)} grads={len(p.grads)} saved_bytes={p.saved_bytes} "
                      f"scratch_bytes={p.scratch_bytes} errors={len(p.errors)}", head)

    def test_descriptor_matches_golden(self):
        p, g = self.p, self.golden
        self.assertEqual((p.name, p.abi_version), ("mlp", aotc.ABI_VERSION))
        self.assertEqual([d.name for d in p.inputs],
                         ["fc1.weight", "fc1.bias", "fc2.weight", "fc2.bias", "x", "target"])
        for d in p.inputs:
            key = ("param." if d.role == "parameter" else "input.") + d.name
            self.assertEqual((d.dtype, d.shape), (g[key].dtype, g[key].shape), d.name)
            self.assertEqual(d.nbytes, len(g[key].data), d.name)
            self.assertEqual(d.numel, math.prod(d.shape))
            self.assertEqual(d.requires_grad, d.role == "parameter", d.name)
        self.assertEqual([d.role for d in p.inputs], ["parameter"] * 4 + ["user_input"] * 2)
        self.assertEqual([(d.dtype, d.shape, d.role) for d in p.outputs], [("f32", (), "output")])
        self.assertEqual([d.name for d in p.grads], [d.name for d in p.inputs[:4]])
        self.assertEqual(p.grad_input_index, [0, 1, 2, 3])
        self.assertTrue(all(d.role == "grad" for d in p.grads))
        self.assertGreater(p.saved_bytes, 0)
        self.assertGreater(p.scratch_bytes, 0)
        self.assertTrue(any("gather" in e for e in p.errors), p.errors)
        self.assertEqual(p.input_index("x"), 4)
        self.assertEqual(p.grad_index("fc2.bias"), 3)
        self.assertEqual(p.input_index("nope"), -1)

    def test_golden_step0(self):
        p, g = self.p, self.golden
        outs, grads = run_step(p, golden_inputs(p, g))
        loss_err = abs(outs[0].item() - g["loss"].tolist()[0]) / abs(g["loss"].tolist()[0])
        errs = {d.name: rel_err(t.tolist(), g["grad." + d.name].tolist())
                for d, t in zip(p.grads, grads)}
        print(f"\nmlp core step 0: loss rel err {loss_err:.3g}, grad rel errs "
              + ", ".join(f"{k} {v:.3g}" for k, v in errs.items()), file=sys.stderr)
        self.assertLessEqual(loss_err, 1e-5)
        for name, e in errs.items():
            self.assertLessEqual(e, 1e-5, name)

    @unittest.skipIf(numpy is None, "numpy is not installed: 20 MLP steps in pure Python are "
                     "slow (e2e.mlp.train covers them; LN-GELU's are checked here)")
    def test_sgd_20_steps(self):
        p, g = self.p, self.golden
        losses, final = sgd_train(self, p, g)
        gl = g["loss"].tolist()
        loss_err = max(abs(a - b) / abs(b) for a, b in zip(losses, gl))
        perr = max(rel_err(final[n], g["param_final." + n].tolist()) for n in final)
        print(f"\nmlp core 20 SGD steps: max loss rel err {loss_err:.3g}, param_final rel err "
              f"{perr:.3g}", file=sys.stderr)
        self.assertLess(losses[-1], losses[0])
        self.assertLessEqual(loss_err, 1e-4)
        self.assertLessEqual(perr, 1e-4)

    def test_profile_counts_the_calls_after_reset(self):
        # AOTC_PROFILE=FILE (docs/profiling.md): read when a context is made, one JSON line when
        # it is freed; aotc.reset_profiles() leaves the warm-up call out.
        path = os.path.join(testutil.work_dir("profile"), "p.json")
        if os.path.exists(path):
            os.remove(path)
        old = os.environ.get("AOTC_PROFILE")
        os.environ["AOTC_PROFILE"] = path
        os.environ["AOTC_PROFILE_TRIAD_MIB"] = "4"  # seconds under a sanitizer otherwise
        try:
            p = aotc.Program(self.lib, "mlp")
            inputs = golden_inputs(p, self.golden)
            ref = [t.tobytes() for t in run_step(p, inputs)[1]]
            aotc.reset_profiles()
            for _ in range(3):
                self.assertEqual([t.tobytes() for t in run_step(p, inputs)[1]], ref)
            del p
            import gc
            gc.collect()
        finally:
            os.environ.pop("AOTC_PROFILE_TRIAD_MIB", None)
            if old is None:
                os.environ.pop("AOTC_PROFILE", None)
            else:
                os.environ["AOTC_PROFILE"] = old
        with open(path) as f:
            lines = [json.loads(line) for line in f]
        self.assertEqual(len(lines), 1)
        self.assertEqual([(g["graph"], g["calls"]) for g in lines[0]["graphs"]], [("forward", 3), ("backward", 3)])
        gemms = [k for k in lines[0]["kernels"] if k["kind"] == "gemm" and k["graph"] == "forward"]
        self.assertEqual(sorted(k["shape"][:3] for k in gemms), [[64, 10, 256], [64, 256, 784]])

    def test_two_contexts_backwards_in_reverse_order(self):
        p, g = self.p, self.golden
        a = golden_inputs(p, g)
        b = dict(a, target=aotc.Tensor("i64", (64,), [(t + 3) % 10 for t in g["input.target"].tolist()]))
        ref_a = [t.tobytes() for t in run_step(p, a)[1]]
        ref_b = [t.tobytes() for t in run_step(p, b)[1]]
        self.assertNotEqual(ref_a, ref_b)
        _, ctx_a = p.forward(a)
        _, ctx_b = p.forward(b)
        p.poison_scratch()  # NaN scratch between calls
        got_b = [t.tobytes() for t in p.backward(ctx_b)]
        p.poison_scratch()
        got_a = [t.tobytes() for t in p.backward(ctx_a)]
        self.assertEqual(got_a, ref_a)
        self.assertEqual(got_b, ref_b)
        with self.assertRaisesRegex(aotc.InputError, "not consumed yet"):
            p.backward(ctx_a)

    def test_function_handle_per_thread_created_once(self):
        # One runtime function (aotc_rt_function: an ABI context and a scratch arena) per
        # thread, made at its first call.
        p = self.p
        ins = golden_inputs(p, self.golden)
        run_step(p, ins)
        fn = p.function().ptr
        self.assertTrue(fn)
        run_step(p, ins)
        self.assertEqual(p.function().ptr, fn)  # created once, not per call
        other = []

        def in_thread():
            other.append([t.tobytes() for t in run_step(p, ins)[1]])
            other.append(p.function().ptr)
        t = threading.Thread(target=in_thread)
        t.start()
        t.join()
        self.assertNotEqual(other[1], fn)  # another thread gets its own
        self.assertEqual(other[0], [t.tobytes() for t in run_step(p, ins)[1]])
        # The object's entry point given no context refuses to run (AOTC_ERROR_CONTEXT of abi.h),
        # called through its exported symbol (the descriptor's, python.shared_lib.dlopen_mlp).
        fwd = p._lib.mlp_forward
        fwd.restype, fwd.argtypes = ctypes.c_int, [ctypes.c_void_p] * 5
        null = (ctypes.c_void_p * 1)()
        self.assertEqual(fwd(None, null, null, None, None), -100)

    def test_threads_run_concurrently(self):
        # Four threads on one Program (a handle each, no lock): the same bits as one thread.
        p = self.p
        ins = golden_inputs(p, self.golden)
        ref = [t.tobytes() for t in run_step(p, ins)[1]]
        results, errors = [], []

        def work():
            try:
                for _ in range(3):
                    results.append([t.tobytes() for t in run_step(p, ins)[1]])
            except Exception as e:  # reported below
                errors.append(e)
        threads = [threading.Thread(target=work) for _ in range(4)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        self.assertEqual(errors, [])
        self.assertEqual(results, [ref] * 12)

    def test_threads_bit_identical(self):
        p, g = self.p, self.golden
        results = []
        for n in (1, 2):
            self.assertEqual(aotc.set_num_threads(n)["omp"], n)
            self.assertEqual(aotc.get_num_threads(), n)
            outs, grads = run_step(p, golden_inputs(p, g))
            results.append([t.tobytes() for t in outs + grads])
        self.assertEqual(results[0], results[1])
        # The libomp set is the one the loaded library uses (one instance in the process).
        self.assertEqual(len(_core._symbols("omp_set_num_threads")), 1)
        with self.assertRaises(ValueError):
            aotc.set_num_threads(0)

    def test_input_errors(self):
        p, g = self.p, self.golden
        ins = golden_inputs(p, g)
        with self.assertRaisesRegex(aotc.InputError, r"forward expects 6 inputs, got 5"):
            p.forward([ins[d.name] for d in p.inputs][:5])
        bad = dict(ins, x=aotc.Tensor("f64", (64, 784)))
        with self.assertRaisesRegex(aotc.InputError,
                                    r"input 'x' \(input 4\) must be f32\[64, 784\], got f64\[64, 784\]"):
            p.forward(bad)
        bad = dict(ins, x=aotc.Tensor("f32", (64, 783)))
        with self.assertRaisesRegex(aotc.InputError, r"got f32\[64, 783\]"):
            p.forward(bad)
        with self.assertRaisesRegex(aotc.InputError, r"must be i64\[64\] \(512 bytes\), got 511"):
            p.forward(dict(ins, target=b"\0" * 511))
        with self.assertRaisesRegex(aotc.InputError, r"missing input 'target' \(i64\[64\]\)"):
            p.forward({k: v for k, v in ins.items() if k != "target"})
        with self.assertRaisesRegex(aotc.InputError, r"unknown input\(s\) y"):
            p.forward(dict(ins, y=ins["x"]))
        with self.assertRaisesRegex(aotc.InputError, r"got a list"):
            p.forward(dict(ins, target=[0] * 64))
        _, ctx = p.forward(ins)
        with self.assertRaisesRegex(aotc.InputError, r"gradient of output 'div' \(output 0\) "
                                                     r"must be f32\[\], got f64\[\]"):
            p.backward(ctx, [aotc.Tensor("f64", ())])

    def test_raw_calls_are_checked(self):
        # call_forward (addresses, the descriptor's dtypes and shapes): the runtime still
        # checks counts, NULL and alignment, naming the tensor.
        p, g = self.p, self.golden
        ins = [aotc.Tensor(v.dtype, v.shape, v.data) for v in golden_inputs(p, g).values()]
        outs = [aotc.Tensor(d.dtype, d.shape) for d in p.outputs]
        saved = aotc.AlignedBuffer(p.saved_bytes)
        ptrs = [t.ptr for t in ins]
        p.call_forward(ptrs, [o.ptr for o in outs], saved.ptr)
        loss = outs[0].item()
        with self.assertRaisesRegex(aotc.InputError, r"input 'x' \(input 4\).*align"):
            p.call_forward(ptrs[:4] + [ptrs[4] + 4] + ptrs[5:], [o.ptr for o in outs], saved.ptr)
        with self.assertRaisesRegex(aotc.InputError, r"input 'target' \(input 5\)"):
            p.call_forward(ptrs[:5] + [None], [o.ptr for o in outs], saved.ptr)
        with self.assertRaisesRegex(aotc.InputError, r"\b6\b.*\b5\b"):
            p.call_forward(ptrs[:5], [o.ptr for o in outs], saved.ptr)
        grads = [aotc.Tensor(d.dtype, d.shape) for d in p.grads]
        p.call_backward(ptrs, saved.ptr, [None], [t.ptr for t in grads])  # default cotangent 1
        ref = run_step(p, golden_inputs(p, g))
        self.assertEqual(loss, ref[0][0].item())
        self.assertEqual([t.tobytes() for t in grads], [t.tobytes() for t in ref[1]])

    def test_out_of_range_index_names_node_and_value(self):
        p, g = self.p, self.golden
        tgt = g["input.target"].tolist()
        tgt[17] = 10
        ins = dict(golden_inputs(p, g), target=aotc.Tensor("i64", (64,), tgt))
        with self.assertRaises(aotc.AotcError) as cm:
            p.forward(ins)
        e = cm.exception
        self.assertEqual((e.entry, e.code, e.value), ("forward", 1, 10))
        self.assertIn("node 'gather'", e.node_message)
        self.assertIn("mlp_forward failed with code 1", str(e))
        self.assertIn("(value 10)", str(e))
        tgt[17] = -1
        with self.assertRaisesRegex(aotc.AotcError, r"gather.*\(value -1\)"):
            p.forward(dict(ins, target=aotc.Tensor("i64", (64,), tgt)))

    def test_bytes_and_unaligned_inputs_are_copied(self):
        p, g = self.p, self.golden
        ins = golden_inputs(p, g)
        ref = [t.tobytes() for t in run_step(p, ins)[1]]
        raw = bytearray(len(g["input.x"].data) + 1)
        raw[1:] = g["input.x"].data
        unaligned = memoryview(raw)[1:]  # 1 byte off any alignment
        got = [t.tobytes() for t in run_step(p, dict(ins, x=unaligned))[1]]
        self.assertEqual(got, ref)
        got = [t.tobytes() for t in run_step(
            p, dict(ins, target=array.array("q", g["input.target"].tolist())))[1]]
        self.assertEqual(got, ref)

    @unittest.skipIf(numpy is None, "numpy is not installed (optional)")
    def test_numpy_inputs(self):
        p, g = self.p, self.golden
        ins = golden_inputs(p, g)
        ref_out, ref = run_step(p, ins)
        ref = [t.tobytes() for t in ref]
        arrs = {k: aotc.Tensor(v.dtype, v.shape, v.data).numpy() for k, v in ins.items()}
        self.assertEqual(arrs["x"].ctypes.data % 64, 0)
        got = [t.tobytes() for t in run_step(p, arrs)[1]]
        self.assertEqual(got, ref)
        big = numpy.zeros(64 * 784 + 1, dtype=numpy.float32)
        big[1:] = arrs["x"].reshape(-1)
        mis = big[1:].reshape(64, 784)           # misaligned by 4 bytes: copied
        fortran = numpy.asfortranarray(arrs["x"])  # not C-contiguous: copied
        for x in (mis, fortran):
            outs, grads = run_step(p, dict(arrs, x=x))
            self.assertEqual([t.tobytes() for t in grads], ref)
        self.assertEqual(outs[0].numpy().shape, ())
        self.assertEqual(float(outs[0].numpy()), ref_out[0].item())
        with self.assertRaisesRegex(aotc.InputError, r"must be i64\[64\], got i32\[64\]"):
            p.forward(dict(arrs, target=arrs["target"].astype(numpy.int32)))

    def test_dlopen_check_on_zero_weights(self):
        exe = env_path("AOTC_TEST_DLOPEN_CHECK")
        if not exe:
            self.skipTest("AOTC_TEST_DLOPEN_CHECK not set (the C loader)")
        out = subprocess.run([exe, self.lib, "mlp"], check=True, capture_output=True,
                             text=True).stdout
        vals = dict(line.split("=", 1) for line in out.splitlines() if line.startswith("out["))
        # All-zero weights: logits 0, softmax 1/10 everywhere, CE = ln 10; targets 0, so
        # d loss / d fc2.bias = softmax - onehot(0) averaged = [-0.9, 0.1, ...].
        self.assertAlmostEqual(float(vals["out[0]"]), math.log(10), delta=1e-6)
        line = next(l for l in out.splitlines() if l.startswith("grad[3] sum="))
        first = float(line.split("first=")[1])
        self.assertAlmostEqual(first, -0.9, delta=1e-6)
        self.assertIn("in[0] fc1.weight f32[256, 784] parameter requires_grad=1", out)


def _cc():
    return shutil.which("cc") or shutil.which("clang-19")


FAKE_C = r"""
#include <stdint.h>
#include "aotc/abi.h"
#include <stdlib.h>
int fake_contexts = 0; /* live contexts: the test checks that Program frees its own */
static aotc_context *create(void) { ++fake_contexts; return (aotc_context *)malloc(8); }
static void destroy(aotc_context *c) { fake_contexts -= c != 0; free(c); }
static int fwd(aotc_context *c, const void *const *i, void *const *o, void *s, void *t) {
  return c ? 0 : AOTC_ERROR_CONTEXT;
}
static int bwd(aotc_context *c, const void *const *i, const void *s, const void *const *t,
               void *const *g, void *x) { return c ? 0 : AOTC_ERROR_CONTEXT; }
const aotc_program fake_program = {VERSION, "fake", 0, 0, 0, 0, 0, 0, 0, 0, 0, fwd, bwd, 0, 0,
                                   -1, "00000000000000000000000000000000", 0, 0, create, destroy};
"""


@unittest.skipIf(_cc() is None, "no C compiler to build the fake libraries")
class AbiChecks(unittest.TestCase):
    def _fake(self, version):
        d = testutil.work_dir("fake")
        src = os.path.join(d, "fake.c")
        with open(src, "w") as f:
            f.write(FAKE_C.replace("VERSION", str(version)))
        lib = os.path.join(d, f"libfake{version}.so")
        subprocess.run([_cc(), "-shared", "-fPIC", "-o", lib, src, "-I",
                        os.path.join(testutil.SRC_ROOT, "runtime", "include")], check=True)
        return lib

    def test_capi_struct_layout_matches_c(self):
        # The three structs of aotc/capi.h that ctypes spells (RtTensor, RtErrorInfo,
        # RtTrainStatus) against the C compiler's offsetof/sizeof.
        cc = _cc()
        d = testutil.work_dir("capi-layout")
        structs = {"aotc_rt_tensor": _core.RtTensor, "aotc_rt_error_info": _core.RtErrorInfo,
                   "aotc_rt_train_status": _core.RtTrainStatus}
        lines = []
        for cname, cls in structs.items():
            lines.append(f'printf("{cname} sizeof %zu\\n", sizeof({cname}));')
            for f, _ in cls._fields_:
                lines.append(f'printf("{cname}.{f} %zu %zu\\n", offsetof({cname}, {f}), '
                             f'sizeof((({cname} *)0)->{f}));')
        src = os.path.join(d, "layout.c")
        with open(src, "w") as fh:
            fh.write("#include <stddef.h>\n#include <stdio.h>\n#include \"aotc/capi.h\"\n"
                     "int main(void) {\n" + "\n".join(lines) + "\nreturn 0;\n}\n")
        exe = os.path.join(d, "layout")
        subprocess.run([cc, "-o", exe, src, "-I", os.path.join(testutil.SRC_ROOT, "runtime", "include")],
                       check=True)
        c = subprocess.run([exe], check=True, capture_output=True, text=True).stdout.splitlines()
        want = []
        for cname, cls in structs.items():
            want.append(f"{cname} sizeof {ctypes.sizeof(cls)}")
            want += [f"{cname}.{f} {getattr(cls, f).offset} {getattr(cls, f).size}" for f, _ in cls._fields_]
        self.assertEqual(c, want)

    def test_other_abi_version_is_refused(self):
        # The runtime checks (aotc_rt_program_check): another major version is refused with its
        # message; a newer minor version of the same major (compatible additions) runs.
        major = aotc.ABI_VERSION & 0xFFFF
        with self.assertRaisesRegex(aotc.AbiError, r"program 'fake' has ABI version 1\b.*"
                                                   rf"major version {major}\b"):
            aotc.Program(self._fake(1), "fake")
        with self.assertRaisesRegex(aotc.AbiError, rf"program 'fake' has ABI version {major + 1}\b"):
            aotc.Program(self._fake(major + 1), "fake")
        p = aotc.Program(self._fake((3 << 16) | major), "fake")
        self.assertEqual(p.abi_version, (3 << 16) | major)
        self.assertEqual(p.forward([])[0], [])

    def test_missing_symbol(self):
        lib = self._fake(aotc.ABI_VERSION)
        with self.assertRaisesRegex(aotc.AbiError, r"no symbol 'other_program'"):
            aotc.Program(lib, "other")
        v = aotc.ABI_VERSION
        with self.assertRaisesRegex(aotc.AbiError, rf"no symbol 'fake{v}_program'"):
            aotc.Program(lib)  # libfake5.so -> default name 'fake5'
        p = aotc.Program(lib, "fake")
        self.assertEqual((p.name, len(p.inputs)), ("fake", 0))

    def test_missing_runtime_library_names_the_places_tried(self):
        # A copy of the package outside the source tree, no aotc binary: Program() says where it
        # looked for libaotc_runtime.so.
        d = testutil.work_dir("pkgcopy")
        shutil.copytree(os.path.join(testutil.SRC_ROOT, "python", "aotc"), os.path.join(d, "aotc"),
                        ignore=shutil.ignore_patterns("__pycache__", "lib", "bin"))
        env = {k: v for k, v in os.environ.items() if k not in ("AOTC_RUNTIME_LIB", "AOTC_BIN")}
        env.update(PYTHONPATH=d, AOTC_BIN=os.path.join(d, "no-aotc"))
        code = ("import sys, aotc\ntry:\n    aotc.Program(sys.argv[1], 'fake')\n"
                "except aotc.Error as e:\n    print(e)\n")
        out = subprocess.run([sys.executable, "-c", code, self._fake(9)], env=env, check=True,
                             capture_output=True, text=True).stdout
        self.assertIn("libaotc_runtime.so not found: set AOTC_RUNTIME_LIB", out)
        self.assertIn(os.path.join(d, "aotc", "lib", "libaotc_runtime.so"), out)
        env["AOTC_RUNTIME_LIB"] = os.path.join(d, "missing.so")
        out = subprocess.run([sys.executable, "-c", code, self._fake(9)], env=env, check=True,
                             capture_output=True, text=True).stdout
        self.assertIn(f"AOTC_RUNTIME_LIB={d}/missing.so is not a file", out)

    def test_current_version_empty_program_runs_and_frees_its_context(self):
        p = aotc.Program(self._fake(aotc.ABI_VERSION), "fake")
        live = ctypes.c_int.in_dll(p._lib, "fake_contexts")
        outs, state = p.forward([])
        self.assertEqual((outs, p.backward(state)), ([], []))
        self.assertEqual(live.value, 1)  # one context for this thread, made once
        p.forward([])
        self.assertEqual(live.value, 1)
        t = threading.Thread(target=lambda: p.forward([]))
        t.start()
        t.join()
        self.assertEqual(live.value, 1)  # the thread's own context went with the thread
        del p
        import gc
        gc.collect()
        self.assertEqual(live.value, 0)

    def test_library_error_text_is_reported(self):
        # ABI 5: a failed library call (a convolution) returns its node's code and the
        # context's error text (context_error) says why; AotcError carries both.
        d = testutil.work_dir("fake_liberr")
        src = os.path.join(d, "liberr.c")
        with open(src, "w") as f:
            f.write((FAKE_C.replace("fake_program", "unused_program") + FAKE_LIBERR_C)
                    .replace("VERSION_NOW", str(aotc.ABI_VERSION))
                    .replace("VERSION", str(aotc.ABI_VERSION)))
        lib = os.path.join(d, "libliberr.so")
        subprocess.run([_cc(), "-shared", "-fPIC", "-o", lib, src, "-I",
                        os.path.join(testutil.SRC_ROOT, "runtime", "include")], check=True)
        p = aotc.Program(lib, "liberr")
        with self.assertRaises(aotc.AotcError) as cm:
            p.forward([])
        e = cm.exception
        self.assertEqual((e.code, e.value), (1, 3))
        self.assertEqual(e.library_message, "oneDNN: dnnl_primitive_create returned unimplemented")
        self.assertIn("libaotc_kernels (value 3): oneDNN: dnnl_primitive_create", str(e))


FAKE_LIBERR_C = r"""
static int fail_fwd(aotc_context *c, const void *const *i, void *const *o, void *s, void *t) {
  ((int64_t *)t)[0] = 1; ((int64_t *)t)[1] = 3; return 1;
}
static const char *why(const aotc_context *c) {
  return c ? "oneDNN: dnnl_primitive_create returned unimplemented" : 0;
}
static const char *const errs[] = {"node 'convolution' (aten.convolution.default): the convolution "
                                   "failed in libaotc_kernels"};
const aotc_program liberr_program = {VERSION_NOW, "liberr", 0, 0, 0, 0, 0, 0, 0, 0, 64, fail_fwd, bwd,
                                     1, errs, 8, "00000000000000000000000000000000", 0, 0, create,
                                     destroy, why};
"""


@unittest.skipUnless(_aotc_available(), "no aotc executable (set AOTC_BIN)")
class BuildLibrary(unittest.TestCase):
    """aotc.build_library: aotc + cc -shared, cached by content hash."""

    def test_cache_and_ln_gelu_golden(self):
        cache = testutil.work_dir("cache")
        b1 = aotc.build_library(LG_PT2, cache_dir=cache)
        b2 = aotc.build_library(LG_PT2, cache_dir=cache)
        self.assertFalse(b1.cached)
        self.assertTrue(b2.cached)
        self.assertEqual(b1.library, b2.library)
        bx = aotc.build_library(LG_PT2, cache_dir=cache, flags=["--requires-grad=x"])
        self.assertFalse(bx.cached)
        self.assertNotEqual(bx.key, b1.key)
        self.assertEqual(sorted(e for e in os.listdir(cache)), sorted(
            [os.path.basename(b1.directory), os.path.basename(bx.directory)]))
        with open(os.path.join(bx.directory, "build.json")) as f:
            rec = json.load(f)
        # No --cpu flag: the library is for this machine (--cpu=host), and the CPU's feature
        # flags are part of the key; an explicit --cpu is kept as given.
        self.assertEqual(rec["flags"], ["--requires-grad=x", "--cpu=host"])
        self.assertTrue(rec["host_cpu"])
        bm = aotc.build_library(LG_PT2, cache_dir=cache, flags=["--cpu=x86-64-v2"])
        with open(os.path.join(bm.directory, "build.json")) as f:
            recm = json.load(f)
        self.assertEqual(recm["flags"], ["--cpu=x86-64-v2"])
        self.assertNotIn("host_cpu", recm)
        self.assertNotEqual(bm.key, b1.key)
        shutil.rmtree(bm.directory)

        g = aotc.read_safetensors(LG_GOLDEN)
        p = aotc.Program(bx.library, bx.name)
        self.assertEqual(p.name, "ln_gelu")
        self.assertEqual(p.inputs[p.input_index("x")].requires_grad, True)
        outs, grads = run_step(p, golden_inputs(p, g))
        loss_err = abs(outs[0].item() - g["loss"].tolist()[0]) / abs(g["loss"].tolist()[0])
        errs = {d.name: rel_err(t.tolist(), g["grad." + d.name].tolist())
                for d, t in zip(p.grads, grads)}
        self.assertIn("x", errs)
        print(f"\nln_gelu core step 0: loss rel err {loss_err:.3g}, grad rel errs "
              + ", ".join(f"{k} {v:.3g}" for k, v in errs.items()), file=sys.stderr)
        self.assertLessEqual(loss_err, 1e-5)
        for name, e in errs.items():
            self.assertLessEqual(e, 1e-5, name)
        losses, final = sgd_train(self, aotc.Program(b1.library, b1.name), g)
        gl = g["loss"].tolist()
        self.assertLessEqual(max(abs(a - b) / abs(b) for a, b in zip(losses, gl)), 1e-4)
        for n, v in final.items():
            self.assertLessEqual(rel_err(v, g["param_final." + n].tolist()), 1e-4, n)

    def test_mutated_buffer_is_marked_and_written_back(self):
        # buf.add_(1) in the forward (test/fixtures/mutation): the output that updates the
        # buffer names it, gets no tangent, and write_back gives the golden's buffer_final.
        pt2 = os.path.join(testutil.SRC_ROOT, "test", "fixtures", "mutation", "mutation.pt2")
        g = aotc.read_safetensors(os.path.join(os.path.dirname(pt2), "golden.safetensors"))
        b = aotc.build_library(pt2, cache_dir=testutil.work_dir("cache"))
        p = aotc.Program(b.library, b.name)
        buf = p.input_index("buf")
        self.assertEqual([d.updates_input for d in p.outputs], [-1, buf])
        self.assertEqual([d.differentiable for d in p.outputs], [True, False])
        self.assertEqual(p.inputs[buf].role, "buffer")
        inputs = [aotc.Tensor(v.dtype, v.shape, v.data) for v in golden_inputs(p, g).values()]
        outs, state = p.forward(inputs)
        with self.assertRaisesRegex(aotc.InputError, r"output 'add' \(output 1\) .*not "
                                                     r"differentiable"):
            p.backward(state, [None, outs[1]])
        grads = p.backward(state)
        for d, t in zip(p.grads, grads):
            self.assertLessEqual(rel_err(t.tolist(), g["grad." + d.name].tolist()), 1e-5, d.name)
        self.assertEqual(inputs[buf].tolist(), g["buffer.buf"].tolist())  # not written yet
        self.assertEqual(p.write_back(inputs, outs), 1)
        self.assertEqual(inputs[buf].tolist(), g["buffer_final.buf"].tolist())
        with self.assertRaisesRegex(aotc.InputError, r"buffer 'buf' \(input 2\) gets a new "
                                                     r"value but is not writable"):
            p.write_back([bytes(t.nbytes) for t in inputs], outs)

    def test_weights_are_the_archive_values(self):
        b = aotc.build_library(MLP_PT2, cache_dir=testutil.work_dir("cache"))
        w, g = aotc.read_safetensors(b.weights), aotc.read_safetensors(MLP_GOLDEN)
        self.assertEqual(sorted(w.keys()), sorted(k[6:] for k in g.keys() if k.startswith("param.")))
        for k in w.keys():
            self.assertEqual(w[k].data, g["param." + k].data, k)

    def test_aotc_error_is_reported_and_nothing_cached(self):
        d = testutil.work_dir("bad")
        bad = os.path.join(d, "bad.json")
        with open(bad, "w") as f:
            f.write("{ not json")
        cache = os.path.join(d, "cache")
        with self.assertRaises(aotc.CompileError) as cm:
            aotc.build_library(bad, cache_dir=cache)
        self.assertEqual(cm.exception.returncode, 1)
        self.assertIn("error:", cm.exception.stderr)
        self.assertEqual(os.listdir(cache), [])
        with self.assertRaises(FileNotFoundError):
            aotc.build_library(os.path.join(d, "missing.pt2"), cache_dir=cache)

    def test_c_name(self):
        self.assertEqual(aotc.c_name("/a/my-model.v1.pt2"), "my_model")
        self.assertEqual(aotc.c_name("9lives.pt2"), "_9lives")


if __name__ == "__main__":
    unittest.main()
