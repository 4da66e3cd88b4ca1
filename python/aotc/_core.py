"""The torch-free core: load a shared library made from an aotc object and call it.

An object written by `aotc IN -o OUT.o` (docs/abi.md) exports, for a program named
<name>, `<name>_forward`, `<name>_backward` and the descriptor `<name>_program`
(`aotc_program` in runtime/include/aotc/abi.h). Linked into a shared library
(`cc -shared OUT.o -lopenblas -lomp -lm`, see `aotc.build_library`), this module
reads the descriptor through ctypes, checks its ABI version, and runs the entry points
on 64-byte aligned, dense, row-major buffers. Standard library only; numpy arrays are
accepted when numpy is installed, never required.

Semantics follow the C++ runtime (`aotc::rt::DifferentiableFunction`, docs/runtime.md):
inputs are checked against their descriptors, `forward` returns the outputs and a
context owning the saved area, `backward` consumes the context; a missing cotangent is
1 for a 0-d output (a loss) and 0 otherwise; a non-zero return code becomes an
`AotcError` naming the node and the offending value (`errors[k-1]`, and the int64 at
`scratch + error_value_offset` of that call).
"""
import array
import ctypes
import ctypes.util
import math
import os
import struct
import threading
from collections.abc import Mapping

#: AOTC_ABI_VERSION of runtime/include/aotc/abi.h that this module implements.
ABI_VERSION = 9
#: AOTC_ALIGNMENT: every buffer passed to an entry point is aligned to this many bytes.
ALIGNMENT = 64

# aotc_dtype code -> (name, itemsize, memoryview/struct format)
_DTYPES = {0: ("f32", 4, "f"), 1: ("f64", 8, "d"), 2: ("i64", 8, "q"), 3: ("bool", 1, "?"),
           4: ("i32", 4, "i"), 5: ("u8", 1, "B")}
DTYPE_ITEMSIZE = {name: size for (name, size, _) in _DTYPES.values()}
_FORMAT = {name: fmt for (name, _, fmt) in _DTYPES.values()}
FLOATING = ("f32", "f64")
# aotc_role code -> name
_ROLES = {0: "parameter", 1: "buffer", 2: "user_input", 3: "output", 4: "grad", 5: "constant",
          6: "rng_state"}


# ---- the structs of abi.h, field for field --------------------------------------------

class aotc_tensor_desc(ctypes.Structure):
    """Mirror of `aotc_tensor_desc` (abi.h)."""
    _fields_ = [
        ("name", ctypes.c_char_p),
        ("dtype", ctypes.c_int32),
        ("role", ctypes.c_int32),
        ("rank", ctypes.c_int32),
        ("requires_grad", ctypes.c_int32),
        ("shape", ctypes.POINTER(ctypes.c_int64)),
        ("numel", ctypes.c_int64),
        ("bytes", ctypes.c_int64),
        ("updates_input", ctypes.c_int32),
        ("reserved", ctypes.c_int32),
    ]


#: AOTC_ERROR_CONTEXT of abi.h: an entry point was given no context or another program's.
ERROR_CONTEXT = -100

#: int (*)(aotc_context *ctx, const void *const *in, void *const *out, void *saved, void *scratch)
aotc_forward_fn = ctypes.CFUNCTYPE(ctypes.c_int, ctypes.c_void_p, ctypes.POINTER(ctypes.c_void_p),
                                   ctypes.POINTER(ctypes.c_void_p), ctypes.c_void_p,
                                   ctypes.c_void_p)
#: int (*)(aotc_context *ctx, const void *const *in, const void *saved,
#:         const void *const *tangents, void *const *grads, void *scratch)
aotc_backward_fn = ctypes.CFUNCTYPE(ctypes.c_int, ctypes.c_void_p, ctypes.POINTER(ctypes.c_void_p),
                                    ctypes.c_void_p, ctypes.POINTER(ctypes.c_void_p),
                                    ctypes.POINTER(ctypes.c_void_p), ctypes.c_void_p)
#: int (*)(aotc_context *ctx, const void *const *in, void *const *out, void *scratch) (ABI 9)
aotc_eval_fn = ctypes.CFUNCTYPE(ctypes.c_int, ctypes.c_void_p, ctypes.POINTER(ctypes.c_void_p),
                                ctypes.POINTER(ctypes.c_void_p), ctypes.c_void_p)
#: aotc_context *(*)(void)
aotc_context_create_fn = ctypes.CFUNCTYPE(ctypes.c_void_p)
#: void (*)(aotc_context *)
aotc_context_destroy_fn = ctypes.CFUNCTYPE(None, ctypes.c_void_p)
#: const char *(*)(const aotc_context *) (ABI 5: the library's error text)
aotc_context_error_fn = ctypes.CFUNCTYPE(ctypes.c_char_p, ctypes.c_void_p)


class aotc_state_desc(ctypes.Structure):
    """Mirror of `aotc_state_desc` (abi.h, ABI 8): one tensor of the train step's state area."""
    _fields_ = [
        ("name", ctypes.c_char_p),
        ("dtype", ctypes.c_int32),
        ("kind", ctypes.c_int32),
        ("rank", ctypes.c_int32),
        ("param_input", ctypes.c_int32),
        ("shape", ctypes.POINTER(ctypes.c_int64)),
        ("numel", ctypes.c_int64),
        ("bytes", ctypes.c_int64),
        ("offset", ctypes.c_int64),
        ("key", ctypes.c_char_p),
    ]


class aotc_hyper_desc(ctypes.Structure):
    """Mirror of `aotc_hyper_desc` (abi.h, ABI 8): one run-time hyperparameter."""
    _fields_ = [
        ("name", ctypes.c_char_p),
        ("value", ctypes.c_double),
        ("min", ctypes.c_double),
        ("max", ctypes.c_double),
        ("max_open", ctypes.c_int32),
        ("reserved", ctypes.c_int32),
    ]


#: int (*)(ctx, void *const *in, void *const *out, void *saved, void *state, const double *hyper,
#:         void *scratch, uint32_t flags) (abi.h aotc_train_step_fn, ABI 8)
aotc_train_step_fn = ctypes.CFUNCTYPE(ctypes.c_int, ctypes.c_void_p, ctypes.POINTER(ctypes.c_void_p),
                                      ctypes.POINTER(ctypes.c_void_p), ctypes.c_void_p, ctypes.c_void_p,
                                      ctypes.POINTER(ctypes.c_double), ctypes.c_void_p, ctypes.c_uint32)

#: AOTC_STEP_ACCUMULATE and AOTC_ERROR_NO_ACCUMULATION of abi.h.
STEP_ACCUMULATE = 1
ERROR_NO_ACCUMULATION = -101
#: aotc_state_kind of abi.h.
STATE_OPTIMIZER, STATE_STEP, STATE_ACCUM, STATE_ACCUM_COUNT, STATE_STATUS, STATE_ZEROS = range(6)


class aotc_train(ctypes.Structure):
    """Mirror of `aotc_train` (abi.h, ABI 8): the train step of an object compiled with --optimizer."""
    _fields_ = [
        ("optimizer", ctypes.c_char_p),
        ("config", ctypes.c_char_p),
        ("clip_grad_norm", ctypes.c_double),
        ("skip_nonfinite", ctypes.c_int32),
        ("grad_accumulation", ctypes.c_int32),
        ("reserved", ctypes.c_int32),
        ("num_params", ctypes.c_int32),
        ("param_inputs", ctypes.POINTER(ctypes.c_int32)),
        ("num_state", ctypes.c_int32),
        ("num_hyper", ctypes.c_int32),
        ("state", ctypes.POINTER(aotc_state_desc)),
        ("hyper", ctypes.POINTER(aotc_hyper_desc)),
        ("state_bytes", ctypes.c_int64),
        ("scratch_bytes", ctypes.c_int64),
        ("train_step", aotc_train_step_fn),
    ]


class StateDesc:
    """One tensor of a train step's state area (aotc_state_desc): name ("optimizer.state.<fqn>.
    <key>", "optimizer.step", ...), dtype, kind (STATE_*), shape, numel, nbytes, offset (bytes
    into the state area), param_input (input index of its parameter, -1), key (torch.optim's)."""

    __slots__ = ("name", "dtype", "kind", "shape", "numel", "nbytes", "offset", "param_input", "key")

    def __init__(self, c, what):
        if (not c.name or c.dtype not in _DTYPES or c.rank < 0 or c.offset < 0 or c.bytes < 0
                or (c.rank and not c.shape)):
            raise AbiError(f"{what}: invalid state descriptor")
        self.name = c.name.decode("utf-8")
        self.dtype = _DTYPES[c.dtype][0]
        self.kind, self.param_input = c.kind, c.param_input
        self.shape = tuple(c.shape[i] for i in range(c.rank))
        self.numel, self.nbytes, self.offset = c.numel, c.bytes, c.offset
        self.key = (c.key or b"").decode("utf-8")


class HyperDesc:
    """One run-time hyperparameter (aotc_hyper_desc): name, value (the compiled default) and
    its range [min, max] (max excluded when max_open; no upper bound when max < min)."""

    __slots__ = ("index", "name", "value", "min", "max", "max_open")

    def __init__(self, index, c):
        self.index, self.name, self.value = index, (c.name or b"?").decode("utf-8"), c.value
        self.min, self.max, self.max_open = c.min, c.max, bool(c.max_open)

    def check(self, value):
        """value as float; InputError outside the range (or not finite)."""
        v = float(value)
        hi_ok = self.max < self.min or (v < self.max if self.max_open else v <= self.max)
        if not (math.isfinite(v) and v >= self.min and hi_ok):
            hi = "inf)" if self.max < self.min else f"{self.max}{')' if self.max_open else ']'}"
            raise InputError(f"hyperparameter {self.name} = {v} is outside [{self.min}, {hi}")
        return v


class TrainInfo:
    """program.train of an object compiled with --optimizer (aotc_train, ABI 8): optimizer
    ('sgd', 'adam', 'adamw'), config (the canonical --optimizer text), clip_grad_norm (0: none),
    skip_nonfinite, grad_accumulation (bools), param_inputs (input indices of the updated
    parameters), state (StateDesc list), hyper (HyperDesc list, lr first), state_bytes,
    scratch_bytes."""

    def __init__(self, c, what, num_inputs):
        if not c.optimizer or not c.config:
            raise AbiError(f"{what}: invalid train descriptor")
        self.optimizer = c.optimizer.decode("utf-8")
        self.config = c.config.decode("utf-8")
        self.clip_grad_norm = c.clip_grad_norm
        self.skip_nonfinite, self.grad_accumulation = bool(c.skip_nonfinite), bool(c.grad_accumulation)
        if (c.num_params < 0 or c.num_state < 0 or c.num_hyper < 0 or not c.train_step
                or not c.optimizer or not c.config or c.state_bytes < 0 or c.scratch_bytes < 0
                or (c.num_params and not c.param_inputs) or (c.num_state and not c.state)
                or (c.num_hyper and not c.hyper)):
            raise AbiError(f"{what}: invalid train descriptor")
        self.param_inputs = [c.param_inputs[k] for k in range(c.num_params)]
        self.state = [StateDesc(c.state[k], what) for k in range(c.num_state)]
        self.hyper = [HyperDesc(k, c.hyper[k]) for k in range(c.num_hyper)]
        self.state_bytes, self.scratch_bytes = c.state_bytes, c.scratch_bytes
        if any(not 0 <= i < num_inputs for i in self.param_inputs) or any(
                s.offset + s.nbytes > self.state_bytes or not -1 <= s.param_input < num_inputs
                for s in self.state):
            raise AbiError(f"{what}: invalid train descriptor (an index or offset out of range)")
        self._fn = c.train_step

    def flag(self, key):
        """A structural option of config ("nesterov", "amsgrad", "maximize") as bool."""
        return f",{key}=1" in self.config

    def hyper_desc(self, name):
        for h in self.hyper:
            if h.name == name:
                return h
        raise InputError(f"hyperparameter '{name}' is not compiled into this object "
                         f"({self.config}; has {', '.join(h.name for h in self.hyper)})")


class aotc_program(ctypes.Structure):
    """Mirror of `aotc_program` (abi.h)."""
    _fields_ = [
        ("abi_version", ctypes.c_uint32),
        ("name", ctypes.c_char_p),
        ("num_inputs", ctypes.c_int32),
        ("inputs", ctypes.POINTER(aotc_tensor_desc)),
        ("num_outputs", ctypes.c_int32),
        ("outputs", ctypes.POINTER(aotc_tensor_desc)),
        ("num_grads", ctypes.c_int32),
        ("grads", ctypes.POINTER(aotc_tensor_desc)),
        ("grad_input_index", ctypes.POINTER(ctypes.c_int32)),
        ("saved_bytes", ctypes.c_int64),
        ("scratch_bytes", ctypes.c_int64),
        ("forward", aotc_forward_fn),
        ("backward", aotc_backward_fn),
        ("num_errors", ctypes.c_int32),
        ("errors", ctypes.POINTER(ctypes.c_char_p)),
        ("error_value_offset", ctypes.c_int64),
        ("build_id", ctypes.c_char_p),
        ("flags", ctypes.c_uint32),
        ("reserved", ctypes.c_uint32),
        ("context_create", aotc_context_create_fn),
        ("context_destroy", aotc_context_destroy_fn),
        ("context_error", aotc_context_error_fn),
        ("train", ctypes.POINTER(aotc_train)),
        ("eval", aotc_eval_fn),
    ]


# ---- errors ----------------------------------------------------------------------------

class Error(RuntimeError):
    """Base class of every aotc error raised by this package."""


class AbiError(Error):
    """The library is not an aotc program this module can call (symbol, ABI version)."""


class InputError(Error, ValueError):
    """A caller's tensor does not match the program's descriptor (dtype, shape, count)."""


class AotcError(Error):
    """An entry point returned a non-zero code k.

    Attributes: program, entry ('forward' or 'backward'), code (k), node_message
    (errors[k-1], naming the node, e.g. an out-of-range gather index), value
    (the int64 at scratch + error_value_offset of the failed call, the offending value; for
    a library call, its status) and library_message (the library's text of a failed call,
    `context_error(ctx)` of abi.h, e.g. why oneDNN refused a convolution; else None).
    """

    def __init__(self, program, entry, code, node_message, value, library_message=None):
        self.program, self.entry, self.code = program, entry, code
        self.node_message, self.value = node_message, value
        self.library_message = library_message
        super().__init__(f"{program}_{entry} failed with code {code}: {node_message} "
                         f"(value {value})" + (f": {library_message}" if library_message else ""))


# ---- aligned buffers and tensors -------------------------------------------------------

class AlignedBuffer:
    """`nbytes` zero-initialized bytes at an address that is a multiple of 64.

    Backed by a bytearray (over-allocated by 64 bytes); `ptr` is the aligned address,
    `memory` a writable memoryview of exactly `nbytes` bytes.
    """

    __slots__ = ("_raw", "_export", "offset", "ptr", "nbytes", "memory")

    def __init__(self, nbytes):
        nbytes = int(nbytes)
        if nbytes < 0:
            raise ValueError(f"negative buffer size {nbytes}")
        self._raw = bytearray(nbytes + ALIGNMENT)
        # from_buffer pins the bytearray (it can no longer be resized, so never moves).
        self._export = ctypes.c_char.from_buffer(self._raw)
        base = ctypes.addressof(self._export)
        self.offset = (-base) % ALIGNMENT
        self.ptr = base + self.offset
        self.nbytes = nbytes
        self.memory = memoryview(self._raw)[self.offset:self.offset + nbytes]


def _check_shape(shape):
    shape = tuple(int(d) for d in shape)
    if any(d < 0 for d in shape):
        raise ValueError(f"negative dimension in shape {list(shape)}")
    return shape


class Tensor:
    """A dense, row-major tensor in a 64-byte aligned buffer (what the entry points take).

    dtype: 'f32', 'f64', 'i64' or 'bool' (1 byte); shape: tuple (() for 0-d).
    `data` (optional): bytes-like of exactly nbytes bytes, or a flat sequence of numel
    numbers. Without it the tensor is zero-filled.
    """

    __slots__ = ("dtype", "shape", "buffer")

    def __init__(self, dtype, shape, data=None):
        if dtype not in DTYPE_ITEMSIZE:
            raise ValueError(f"unknown dtype {dtype!r} (f32, f64, i64, bool)")
        self.dtype, self.shape = dtype, _check_shape(shape)
        self.buffer = AlignedBuffer(self.numel * DTYPE_ITEMSIZE[dtype])
        if data is not None:
            self._fill(data)

    def _fill(self, data):
        if isinstance(data, (bytes, bytearray, memoryview)):
            mv = memoryview(data).cast("B")
            if mv.nbytes != self.nbytes:
                raise ValueError(f"{self.dtype}{list(self.shape)} needs {self.nbytes} bytes, "
                                 f"got {mv.nbytes}")
            self.buffer.memory[:] = mv
            return
        values = list(data)
        if len(values) != self.numel:
            raise ValueError(f"{self.dtype}{list(self.shape)} needs {self.numel} values, "
                             f"got {len(values)}")
        struct.pack_into("<%d%s" % (self.numel, _FORMAT[self.dtype]), self.buffer.memory, 0,
                         *values)

    @property
    def numel(self):
        return math.prod(self.shape)

    @property
    def nbytes(self):
        return self.buffer.nbytes

    @property
    def ptr(self):
        """The aligned address of the first element (an int)."""
        return self.buffer.ptr

    def memoryview(self):
        """A flat, writable memoryview of the elements (format f/d/q/?)."""
        return self.buffer.memory.cast(_FORMAT[self.dtype])

    def tolist(self):
        """The elements as a flat list of Python numbers."""
        return list(struct.unpack_from("<%d%s" % (self.numel, _FORMAT[self.dtype]),
                                       self.buffer.memory, 0))

    def item(self):
        if self.numel != 1:
            raise ValueError(f"item() needs one element, tensor has {self.numel}")
        return self.tolist()[0]

    def tobytes(self):
        return self.buffer.memory.tobytes()

    def numpy(self):
        """A numpy array sharing this tensor's memory (needs numpy)."""
        import numpy as np
        return np.frombuffer(self.buffer.memory, dtype=_NUMPY_DTYPE[self.dtype],
                             count=self.numel).reshape(self.shape)

    def __repr__(self):
        return f"aotc.Tensor({self.dtype}{list(self.shape)})"


_NUMPY_DTYPE = {"f32": "<f4", "f64": "<f8", "i64": "<i8", "bool": "?", "i32": "<i4", "u8": "u1"}


# ---- descriptors -----------------------------------------------------------------------

class TensorDesc:
    """One entry of a program's inputs, outputs or grads (from aotc_tensor_desc).

    name (FQN for parameters/buffers), dtype ('f32'...), role ('parameter', 'buffer',
    'user_input', 'output', 'grad'), shape (tuple), numel, nbytes, requires_grad (bool;
    inputs only), updates_input (outputs only: the index of the input whose new value this
    output is, e.g. batch norm's running_mean; else -1), differentiable (outputs: gets a
    tangent: floating and not a mutated input's new value), index (position in its list).
    """

    __slots__ = ("index", "name", "dtype", "role", "shape", "numel", "nbytes", "requires_grad",
                 "updates_input")

    def __init__(self, index, c, what):
        if c.dtype not in _DTYPES or c.role not in _ROLES or c.rank < 0:
            raise AbiError(f"{what}: invalid descriptor (dtype {c.dtype}, role {c.role}, "
                           f"rank {c.rank})")
        self.index = index
        self.name = c.name.decode("utf-8") if c.name else f"#{index}"
        self.dtype = _DTYPES[c.dtype][0]
        self.role = _ROLES[c.role]
        self.shape = tuple(c.shape[i] for i in range(c.rank))
        self.numel, self.nbytes = c.numel, c.bytes
        self.requires_grad = bool(c.requires_grad)
        self.updates_input = int(c.updates_input)
        if (self.numel != math.prod(self.shape) or
                self.nbytes != self.numel * DTYPE_ITEMSIZE[self.dtype]):
            raise AbiError(f"{what}: descriptor of '{self.name}' is inconsistent "
                           f"(shape {list(self.shape)}, numel {self.numel}, bytes {self.nbytes})")

    @property
    def differentiable(self):
        """Whether backward takes a tangent for this output (abi.h tangents[i])."""
        return self.dtype in FLOATING and self.updates_input < 0

    @property
    def type_str(self):
        """E.g. 'f32[64, 784]' (the notation of aotc's messages)."""
        return f"{self.dtype}[{', '.join(map(str, self.shape))}]"

    def __repr__(self):
        return f"TensorDesc({self.index}: {self.name!r} {self.type_str} {self.role})"


# ---- threads ---------------------------------------------------------------------------

# libomp's threads spin for KMP_BLOCKTIME (default 200 ms) after every parallel region. In a
# Python process torch's own OpenMP pool runs between aotc's entry points (optimizer, autograd),
# and the two spinning pools then share the same cores: the MLP's training step at 2 threads
# took 7.9 ms instead of 1.5 ms. So aotc's threads sleep at once unless the user chose
# otherwise; libomp reads the variable when it initializes, which happens after this import.
os.environ.setdefault("KMP_BLOCKTIME", "0")

_LIBS_LOCK = threading.Lock()
_LOADED_LIBS = []   # CDLL handles of loaded programs (their libomp/OpenBLAS are used)
_RUNTIME_LIBS = {}  # 'omp' / 'openblas' -> CDLL or None


def _runtime_lib(kind):
    """libomp (AOTC_OMP_LIB, else the loader's libomp.so.5, else find_library's) or OpenBLAS, or None."""
    with _LIBS_LOCK:
        if kind in _RUNTIME_LIBS:
            return _RUNTIME_LIBS[kind]
        if kind == "omp":
            cands = [os.environ.get("AOTC_OMP_LIB"), "libomp.so.5",
                     ctypes.util.find_library("omp")]
        else:
            cands = [os.environ.get("AOTC_OPENBLAS_LIB"), ctypes.util.find_library("openblas")]
        lib = None
        for c in cands:
            if not c:
                continue
            try:
                lib = ctypes.CDLL(c, mode=os.RTLD_NOW | os.RTLD_LOCAL)
                break
            except OSError:
                continue
        _RUNTIME_LIBS[kind] = lib
        return lib


def _symbols(name):
    """Distinct functions called `name` reachable from libomp/OpenBLAS and loaded programs."""
    seen, out = set(), []
    with _LIBS_LOCK:
        libs = list(_LOADED_LIBS)
    for lib in [_runtime_lib("omp"), _runtime_lib("openblas")] + libs:
        if lib is None:
            continue
        try:
            fn = getattr(lib, name)
        except AttributeError:
            continue
        addr = ctypes.cast(fn, ctypes.c_void_p).value
        if addr not in seen:
            seen.add(addr)
            out.append(fn)
    return out


def _set_blas_threads(n):
    fns = _symbols("openblas_set_num_threads")
    for fn in fns:
        fn.argtypes, fn.restype = [ctypes.c_int], None
        fn(int(n))
    return bool(fns)


def set_num_threads(n, blas_threads=1):
    """Sets the threads of the compiled code: libomp's `omp_set_num_threads(n)` and
    OpenBLAS's `openblas_set_num_threads(blas_threads)` (when OpenBLAS is present).

    The generated code parallelizes every loop and every GEMM itself on the OpenMP
    threads (each GEMM is split into fixed blocks, one single-threaded BLAS call per
    block, docs/abi.md), so results are bit-identical for any n. OpenBLAS is therefore
    kept at 1 thread by default: more BLAS threads inside the OpenMP loop only
    oversubscribe the cores (and may change the last bits). Returns a dict of what was
    set: {'omp': n, 'openblas': blas_threads or None when OpenBLAS is absent}.
    Raises Error when libomp cannot be found (set AOTC_OMP_LIB).
    """
    n, blas_threads = int(n), int(blas_threads)
    if n < 1 or blas_threads < 1:
        raise ValueError(f"thread counts must be >= 1, got {n} and {blas_threads}")
    fns = _symbols("omp_set_num_threads")
    if not fns:
        raise Error("libomp not found: set AOTC_OMP_LIB to LLVM's libomp.so")
    for fn in fns:
        fn.argtypes, fn.restype = [ctypes.c_int], None
        fn(n)
    return {"omp": n, "openblas": blas_threads if _set_blas_threads(blas_threads) else None}


def get_num_threads():
    """libomp's omp_get_max_threads(): the OpenMP threads the entry points will use."""
    fns = _symbols("omp_get_max_threads")
    if not fns:
        raise Error("libomp not found: set AOTC_OMP_LIB to LLVM's libomp.so")
    fns[0].restype = ctypes.c_int
    return fns[0]()


# ---- programs --------------------------------------------------------------------------

def _default_name(path):
    base = os.path.basename(os.fspath(path))
    if base.startswith("lib"):
        base = base[3:]
    return base.split(".", 1)[0]


class SavedState:
    """What a forward leaves for its backward (autograd's "ctx"): the saved area and the inputs.

    The inputs are referenced (not copied): they must stay alive and unchanged until
    `Program.backward(state)`, which consumes it. Not the ABI context (abi.h's
    aotc_context: library state a Program keeps, one per thread, created once).
    """

    __slots__ = ("saved", "inputs", "in_ptrs", "outputs", "consumed")

    def __init__(self, saved, inputs, in_ptrs, outputs):
        self.saved, self.inputs, self.in_ptrs, self.outputs = saved, inputs, in_ptrs, outputs
        self.consumed = False


#: The name of SavedState before ABI 3 (kept for callers written against it).
Context = SavedState


class _OwnedContext:
    """One aotc_context, destroyed with this object (kept in a threading.local, so when its
    thread ends or its Program is collected). The library stays loaded (_LOADED_LIBS)."""

    __slots__ = ("ptr", "_destroy")

    def __init__(self, create, destroy, name):
        self.ptr = create()
        if not self.ptr:
            raise MemoryError(f"{name}_context_create returned NULL")
        self._destroy = destroy

    def __del__(self):
        if self.ptr:
            self._destroy(self.ptr)
            self.ptr = None


class Program:
    """An aotc program in a shared library: `Program(path, name=None)`.

    `name` defaults to the file name without a leading 'lib' up to the first '.'
    (libmlp.so -> mlp). Reads `<name>_program`, checks `abi_version == ABI_VERSION`,
    and pins OpenBLAS to one thread as the C++ runtime does (see set_num_threads).

    Attributes: name, path, abi_version, inputs / outputs / grads (lists of TensorDesc),
    grad_input_index (list of ints), saved_bytes, scratch_bytes, errors (list of str).
    One Program owns one scratch arena; calls without an explicit scratch serialize on
    a lock, so a Program may be shared between threads. It owns one ABI context per
    thread that calls it (`<name>_context_create`, made at the thread's first call and
    destroyed when that thread ends or the Program is collected).
    Raises OSError (cannot load) or AbiError (no descriptor, other ABI version).
    """

    def __init__(self, path, name=None):
        self.path = os.fspath(path)
        name = name or _default_name(path)
        self._lib = ctypes.CDLL(os.path.abspath(self.path), mode=os.RTLD_NOW | os.RTLD_LOCAL)
        sym = f"{name}_program"
        try:
            version = ctypes.c_uint32.in_dll(self._lib, sym).value
        except ValueError:
            raise AbiError(f"{self.path}: no symbol '{sym}' (a library linked from "
                           f"`aotc ... --name {name}` exports it)") from None
        if version != ABI_VERSION:
            raise AbiError(f"program '{name}' in {self.path} has ABI version {version}, "
                           f"this module expects {ABI_VERSION} (recompile it with this aotc)")
        c = aotc_program.in_dll(self._lib, sym)
        self._c = c
        self.abi_version = version
        self.name = c.name.decode("utf-8") if c.name else name
        what = f"{self.path}: {sym}"
        for count, ptr in ((c.num_inputs, c.inputs), (c.num_outputs, c.outputs),
                           (c.num_grads, c.grads), (c.num_errors, c.errors)):
            if count < 0 or (count > 0 and not ptr):
                raise AbiError(f"{what}: invalid descriptor (count {count}, null table)")
        if c.num_grads > 0 and not c.grad_input_index:
            raise AbiError(f"{what}: invalid descriptor (no grad_input_index)")
        if (c.saved_bytes < 0 or c.scratch_bytes < 0 or not c.forward or not c.backward
                or not c.context_create or not c.context_destroy):
            raise AbiError(f"{what}: invalid descriptor (sizes or entry points)")
        self.inputs = [TensorDesc(i, c.inputs[i], what) for i in range(c.num_inputs)]
        self.outputs = [TensorDesc(i, c.outputs[i], what) for i in range(c.num_outputs)]
        self.grads = [TensorDesc(j, c.grads[j], what) for j in range(c.num_grads)]
        self.grad_input_index = [c.grad_input_index[j] for j in range(c.num_grads)]
        for j, i in enumerate(self.grad_input_index):
            if not 0 <= i < len(self.inputs):
                raise AbiError(f"{what}: grad {j} refers to input {i} of {len(self.inputs)}")
        self.saved_bytes, self.scratch_bytes = c.saved_bytes, c.scratch_bytes
        self.error_value_offset = c.error_value_offset
        if c.num_errors > 0 and not 0 <= c.error_value_offset <= c.scratch_bytes - 8:
            raise AbiError(f"{what}: invalid descriptor (error_value_offset "
                           f"{c.error_value_offset} outside the scratch arena)")
        self.build_id = (c.build_id or b"").decode("ascii", "replace")
        self.flags = c.flags
        self.errors = [(c.errors[k] or b"").decode("utf-8", "replace")
                       for k in range(c.num_errors)]
        self._forward, self._backward = c.forward, c.backward
        #: TrainInfo of an object compiled with --optimizer, else None (ABI 8).
        self.train = TrainInfo(c.train.contents, what, c.num_inputs) if c.train else None
        self._eval = c.eval if c.eval else None  # <name>_eval (ABI 9); None for CUDA objects
        self._train_scratch = None
        self._context_create, self._context_destroy = c.context_create, c.context_destroy
        self._context_error = c.context_error if c.context_error else None
        self._contexts = threading.local()  # .ctx: this thread's _OwnedContext
        self._scratch = AlignedBuffer(self.scratch_bytes)
        self._lock = threading.Lock()
        with _LIBS_LOCK:
            _LOADED_LIBS.append(self._lib)
        _set_blas_threads(1)

    # -- lookup ------------------------------------------------------------------------
    def input_index(self, name):
        """Position of the input called `name` (FQN for parameters), -1 when absent."""
        return next((d.index for d in self.inputs if d.name == name), -1)

    def grad_index(self, name):
        """Position in `grads` of the gradient of input `name`, -1 when absent."""
        return next((d.index for d in self.grads if d.name == name), -1)

    def error_value(self, scratch_ptr=None):
        """The offending value of the last failed call that used scratch arena
        `scratch_ptr` (None: this Program's own arena): the int64 at
        scratch + error_value_offset (per call, abi.h)."""
        if self.error_value_offset < 0:
            return 0
        base = self._scratch.ptr if scratch_ptr is None else scratch_ptr
        return ctypes.c_int64.from_address(base + self.error_value_offset).value

    def check_weights(self, metadata, path):
        """Raises InputError when a weights file's metadata carries another aotc run's
        build id ("aotc.build_id"); a file without one is accepted."""
        got = metadata.get("aotc.build_id")
        # Without an id (a checkpoint written by safetensors.torch...): names, dtypes and
        # shapes are still checked by the caller.
        if got is not None and got != self.build_id:
            raise InputError(f"{path} is from aotc build {got or '(none)'} but {self.path}'s "
                             f"{self.name}_program is build {self.build_id}: use the object "
                             f"and weights of one aotc run")

    def __repr__(self):
        return (f"aotc.Program({self.name!r}: {len(self.inputs)} inputs, "
                f"{len(self.outputs)} outputs, {len(self.grads)} grads)")

    # -- the ABI context -----------------------------------------------------------------
    def context(self):
        """This thread's ABI context (the address of an aotc_context), made on first use.
        It is destroyed when the thread ends or the Program goes away, whichever is first."""
        owned = getattr(self._contexts, "ctx", None)
        if owned is None:
            owned = _OwnedContext(self._context_create, self._context_destroy, self.name)
            self._contexts.ctx = owned
        return owned.ptr

    # -- raw entry points ----------------------------------------------------------------
    def _check_rc(self, entry, rc, scratch_ptr=None):
        if rc == 0:
            return
        msg = (self.errors[rc - 1] if 0 < rc <= len(self.errors)
               else "AOTC_ERROR_CONTEXT: no context or another program's" if rc == ERROR_CONTEXT
               else f"unknown error code (the program lists {len(self.errors)})")
        value = 0 if rc == ERROR_CONTEXT else self.error_value(scratch_ptr)  # no value was written
        why = None
        if 0 < rc <= len(self.errors) and self._context_error:  # a library call's text (ABI 5)
            text = self._context_error(self.context())
            why = text.decode("utf-8", "replace") if text else None
        raise AotcError(self.name, entry, rc, msg, value, why)

    def call_forward(self, in_ptrs, out_ptrs, saved_ptr, scratch_ptr=None):
        """`<name>_forward` on raw addresses (ints; every buffer 64-byte aligned and of
        its descriptor's size). scratch_ptr None: this Program's arena, under its lock.
        Raises AotcError on a non-zero return code."""
        ins = (ctypes.c_void_p * max(1, len(in_ptrs)))(*in_ptrs)
        outs = (ctypes.c_void_p * max(1, len(out_ptrs)))(*out_ptrs)
        if scratch_ptr is None:
            with self._lock:  # the error value is read from the arena under the lock
                self._check_rc("forward", self._forward(self.context(), ins, outs, saved_ptr,
                                                        self._scratch.ptr))
        else:
            self._check_rc("forward", self._forward(self.context(), ins, outs, saved_ptr, scratch_ptr),
                           scratch_ptr)

    def call_backward(self, in_ptrs, saved_ptr, tangent_ptrs, grad_ptrs, scratch_ptr=None):
        """`<name>_backward` on raw addresses; tangent_ptrs entries may be None (NULL) for
        non-floating outputs. Raises AotcError on a non-zero return code."""
        ins = (ctypes.c_void_p * max(1, len(in_ptrs)))(*in_ptrs)
        tans = (ctypes.c_void_p * max(1, len(tangent_ptrs)))(*tangent_ptrs)
        grads = (ctypes.c_void_p * max(1, len(grad_ptrs)))(*grad_ptrs)
        if scratch_ptr is None:
            with self._lock:
                self._check_rc("backward", self._backward(self.context(), ins, saved_ptr, tans, grads,
                                                          self._scratch.ptr))
        else:
            self._check_rc("backward",
                           self._backward(self.context(), ins, saved_ptr, tans, grads, scratch_ptr),
                           scratch_ptr)

    @property
    def has_eval(self):
        """Whether the object has <name>_eval (every CPU object since ABI 9)."""
        return self._eval is not None

    def call_eval(self, in_ptrs, out_ptrs, scratch_ptr=None):
        """`<name>_eval` (the forward without a saved area) on raw addresses. Raises Error when
        the object has none, AotcError on a non-zero return code."""
        if self._eval is None:
            raise Error(f"{self.name}: the object has no eval entry point (a CUDA object's)")
        ins = (ctypes.c_void_p * max(1, len(in_ptrs)))(*in_ptrs)
        outs = (ctypes.c_void_p * max(1, len(out_ptrs)))(*out_ptrs)
        if scratch_ptr is None:
            with self._lock:
                self._check_rc("eval", self._eval(self.context(), ins, outs, self._scratch.ptr))
        else:
            self._check_rc("eval", self._eval(self.context(), ins, outs, scratch_ptr), scratch_ptr)

    def call_train_step(self, in_ptrs, out_ptrs, saved_ptr, state_ptr, hyper, scratch_ptr, flags=0):
        """`<name>_train_step` on raw addresses (abi.h): in_ptrs' parameters, buffers and
        RNG state are updated in place; state_ptr is train.state_bytes (zeroed before the first
        step), hyper a ctypes c_double array of len(train.hyper), scratch_ptr
        train.scratch_bytes. Raises Error (no train step), AotcError (non-zero code)."""
        if self.train is None:
            raise Error(f"{self.name}: the object has no train step (compile with --optimizer=...)")
        ins = (ctypes.c_void_p * max(1, len(in_ptrs)))(*in_ptrs)
        outs = (ctypes.c_void_p * max(1, len(out_ptrs)))(*out_ptrs)
        rc = self.train._fn(self.context(), ins, outs, saved_ptr, state_ptr, hyper, scratch_ptr, flags)
        if rc == ERROR_NO_ACCUMULATION:
            raise Error(f"{self.name}: accumulate needs an object compiled with --grad-accumulation")
        self._check_rc("train_step", rc, scratch_ptr)

    # -- checked calls -----------------------------------------------------------------
    def _as_tensor(self, value, desc, what):
        """(object to keep alive, aligned address) for a caller value matching `desc`."""
        want = desc.type_str
        if isinstance(value, Tensor):
            if value.dtype != desc.dtype or value.shape != desc.shape:
                raise InputError(f"{self.name}: {what} must be {want}, got "
                                 f"{value.dtype}[{', '.join(map(str, value.shape))}]")
            return value, value.ptr
        if _is_numpy(value):
            got = _numpy_dtype_name(value)
            if got != desc.dtype or tuple(value.shape) != desc.shape:
                raise InputError(f"{self.name}: {what} must be {want}, got "
                                 f"{got}[{', '.join(map(str, value.shape))}]")
            if value.flags["C_CONTIGUOUS"] and value.ctypes.data % ALIGNMENT == 0:
                return value, value.ctypes.data
            return self._copy_in(memoryview(value.tobytes()), desc)
        if hasattr(value, "dtype") and hasattr(value, "data") and hasattr(value, "shape"):
            # a safetensors tensor (StTensor): bytes + dtype + shape
            if value.dtype != desc.dtype or tuple(value.shape) != desc.shape:
                raise InputError(f"{self.name}: {what} must be {want}, got "
                                 f"{value.dtype}[{', '.join(map(str, value.shape))}]")
            return self._copy_in(memoryview(value.data), desc)
        if isinstance(value, (bytes, bytearray, memoryview, array.array)):
            mv = memoryview(value).cast("B")
            if mv.nbytes != desc.nbytes:
                raise InputError(f"{self.name}: {what} must be {want} ({desc.nbytes} bytes), "
                                 f"got {mv.nbytes} bytes")
            return self._copy_in(mv, desc)
        raise InputError(f"{self.name}: {what} must be {want}; got a {type(value).__name__} "
                         f"(pass an aotc.Tensor, a numpy array or bytes)")

    @staticmethod
    def _copy_in(mv, desc):
        t = Tensor(desc.dtype, desc.shape, mv)
        return t, t.ptr

    def _bind_inputs(self, inputs):
        if isinstance(inputs, Mapping):
            unknown = sorted(set(inputs) - {d.name for d in self.inputs})
            if unknown:
                raise InputError(f"{self.name}: unknown input(s) {', '.join(unknown)}")
            missing = [d for d in self.inputs if d.name not in inputs]
            if missing:
                d = missing[0]
                raise InputError(f"{self.name}: missing input '{d.name}' ({d.type_str})")
            inputs = [inputs[d.name] for d in self.inputs]
        inputs = list(inputs)
        if len(inputs) != len(self.inputs):
            raise InputError(f"{self.name}: forward expects {len(self.inputs)} inputs, "
                             f"got {len(inputs)}")
        kept, ptrs = [], []
        for d, v in zip(self.inputs, inputs):
            obj, ptr = self._as_tensor(v, d, f"input '{d.name}' (input {d.index})")
            kept.append(obj)
            ptrs.append(ptr)
        return kept, ptrs

    def forward(self, inputs):
        """Runs the forward. `inputs`: a sequence in `self.inputs` order, or a mapping by
        name (FQN for parameters); each an aotc.Tensor, a numpy array, a safetensors
        tensor or bytes of the right size (unaligned / non-contiguous ones are copied).
        Returns (outputs: list of Tensor, state: SavedState). Raises InputError, AotcError."""
        kept, ptrs = self._bind_inputs(inputs)
        outs = [Tensor(d.dtype, d.shape) for d in self.outputs]
        saved = AlignedBuffer(self.saved_bytes)
        self.call_forward(ptrs, [o.ptr for o in outs], saved.ptr)
        return outs, SavedState(saved, kept, ptrs, outs)

    def eval(self, inputs):
        """Runs <name>_eval: the outputs of forward() without a saved area (nothing to
        differentiate). `inputs` as for forward(). Returns the list of output Tensors."""
        kept, ptrs = self._bind_inputs(inputs)
        outs = [Tensor(d.dtype, d.shape) for d in self.outputs]
        self.call_eval(ptrs, [o.ptr for o in outs])
        return outs

    def backward(self, ctx, tangents=None):
        """Runs the backward of the forward that produced `ctx` (consumed).

        tangents: None, or one entry per output: None (1 for a 0-d floating output,
        zeros for other differentiable outputs, NULL for integer/bool outputs and for the
        new values of mutated inputs) or a value of the output's dtype and shape. Returns one Tensor per `self.grads` entry (the
        gradient of input grad_input_index[j])."""
        if not isinstance(ctx, SavedState) or ctx.consumed:
            raise InputError(f"{self.name}: backward needs a saved state from forward() that was "
                             f"not consumed yet")
        tangents = list(tangents) if tangents is not None else [None] * len(self.outputs)
        if len(tangents) != len(self.outputs):
            raise InputError(f"{self.name}: backward expects {len(self.outputs)} output "
                             f"gradients, got {len(tangents)}")
        kept, tptrs = [], []
        for d, t in zip(self.outputs, tangents):
            if not d.differentiable:
                if t is not None:
                    raise InputError(f"{self.name}: output '{d.name}' (output {d.index}) is not "
                                     f"differentiable; pass None as its gradient")
                tptrs.append(None)
                continue
            if t is None:
                t = Tensor(d.dtype, d.shape, [1.0] if d.shape == () else None)
            obj, ptr = self._as_tensor(t, d, f"gradient of output '{d.name}' (output {d.index})")
            kept.append(obj)
            tptrs.append(ptr)
        grads = [Tensor(d.dtype, d.shape) for d in self.grads]
        self.call_backward(ctx.in_ptrs, ctx.saved.ptr, tptrs, [g.ptr for g in grads])
        ctx.consumed = True
        ctx.saved = ctx.inputs = ctx.in_ptrs = None
        return grads


    def write_back(self, inputs, outputs):
        """Copies the new values of mutated inputs (outputs whose `updates_input` is k:
        batch norm's running statistics) into inputs[k], as PyTorch's in-place buffer update
        would. Call it after the backward (which reads the values the forward ran on).
        `inputs`: the forward's inputs (sequence or mapping by name); each updated one must
        be a writable aotc.Tensor or numpy array. `outputs`: forward's outputs. Returns the
        number of inputs written."""
        if isinstance(inputs, Mapping):
            inputs = [inputs.get(d.name) for d in self.inputs]
        inputs, outputs = list(inputs), list(outputs)
        if len(inputs) != len(self.inputs) or len(outputs) != len(self.outputs):
            raise InputError(f"{self.name}: write_back needs {len(self.inputs)} inputs and "
                             f"{len(self.outputs)} outputs, got {len(inputs)} and {len(outputs)}")
        written = 0
        for d in self.outputs:
            if d.updates_input < 0:
                continue
            dst_desc = self.inputs[d.updates_input]
            what = f"{dst_desc.role} '{dst_desc.name}' (input {dst_desc.index})"
            dst, src = inputs[d.updates_input], outputs[d.index]
            _, src_ptr = self._as_tensor(src, d, f"output '{d.name}' (output {d.index})")
            if isinstance(dst, Tensor):
                self._as_tensor(dst, dst_desc, what)
                view = dst.buffer.memory
            elif _is_numpy(dst) and dst.flags["C_CONTIGUOUS"] and dst.flags["WRITEABLE"]:
                self._as_tensor(dst, dst_desc, what)
                view = memoryview(dst.reshape(-1).view("u1"))
            else:
                raise InputError(f"{self.name}: {what} gets a new value but is not writable "
                                 f"(pass a writable aotc.Tensor or C-contiguous numpy array)")
            if d.nbytes:
                view[:d.nbytes] = memoryview((ctypes.c_ubyte * d.nbytes).from_address(src_ptr)).cast("B")
            written += 1
        return written


def load(path, name=None):
    """Program(path, name): see Program."""
    return Program(path, name)


def _is_numpy(value):
    t = type(value)
    return t.__module__ == "numpy" and t.__name__ == "ndarray"


def _numpy_dtype_name(arr):
    dt = arr.dtype
    if dt.kind == "b":
        return "bool"
    if dt.byteorder == ">" or (dt.byteorder == "=" and struct.pack("=i", 1)[0] == 0):
        return f"big-endian {dt.name}"
    return {"float32": "f32", "float64": "f64", "int64": "i64", "int32": "i32",
            "uint8": "u8"}.get(dt.name, dt.name)
