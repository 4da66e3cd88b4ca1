"""The torch-free core: run a program of an aotc object through the runtime's C API.

An object written by `aotc IN -o OUT.o` (docs/abi.md) exports the descriptor
`<name>_program` (`aotc_program` in runtime/include/aotc/abi.h). Linked into a shared
library (`aotc.build_library`) and loaded here with ctypes, it is run by libaotc_runtime.so,
the runtime's shared library, through its stable C API (runtime/include/aotc/capi.h: the
aotc_rt_* functions the C++ classes are made of): the descriptor as JSON
(aotc_rt_program_describe), the ABI check, forward / backward / eval with every tensor checked
(count, dtype, shape, alignment: a message naming the tensor), the train step with its state,
checkpoints, and errors as status codes and messages. The runtime library is loaded once per
process (runtime_library(): $AOTC_RUNTIME_LIB, beside the package, the source tree's build,
beside the aotc binary).

What stays here is Python's: turning Python values (aotc.Tensor, numpy arrays, safetensors
tensors, bytes) into 64-byte aligned buffers, the descriptor as Python objects, one
aotc_rt_function per calling thread, and statuses as exceptions. Standard library only; numpy
arrays are accepted when numpy is installed, never required.
"""
import array
import ctypes
import ctypes.util
import json
import math
import os
import struct
import threading
from collections.abc import Mapping

#: AOTC_ALIGNMENT: every buffer passed to an entry point is aligned to this many bytes.
ALIGNMENT = 64

# aotc_dtype code -> (name, itemsize, memoryview/struct format)
_DTYPES = {0: ("f32", 4, "f"), 1: ("f64", 8, "d"), 2: ("i64", 8, "q"), 3: ("bool", 1, "?"),
           4: ("i32", 4, "i"), 5: ("u8", 1, "B")}
DTYPE_ITEMSIZE = {name: size for (name, size, _) in _DTYPES.values()}
_FORMAT = {name: fmt for (name, _, fmt) in _DTYPES.values()}
_DTYPE_CODE = {name: code for code, (name, _, _) in _DTYPES.items()}
FLOATING = ("f32", "f64")
# aotc_role code -> name
_ROLES = {0: "parameter", 1: "buffer", 2: "user_input", 3: "output", 4: "grad", 5: "constant",
          6: "rng_state"}

#: AOTC_STEP_ACCUMULATE of abi.h (aotc_rt_trainer_step's flags).
STEP_ACCUMULATE = 1
#: aotc_state_kind of abi.h.
STATE_OPTIMIZER, STATE_STEP, STATE_ACCUM, STATE_ACCUM_COUNT, STATE_STATUS, STATE_ZEROS = range(6)
_STATE_KINDS = {"optimizer": 0, "step": 1, "accum": 2, "accum_count": 3, "status": 4, "zeros": 5}

# aotc_rt_status of capi.h.
RT_OK, RT_ERROR_ARGUMENT, RT_ERROR_PROGRAM, RT_ERROR_ABI, RT_ERROR_IO, RT_ERROR_STATE, \
    RT_ERROR_NOMEM, RT_ERROR_INTERNAL, RT_ERROR_NONFINITE = range(9)
# AOTC_RT_NONFINITE_* of capi.h (aotc_rt_trainer_on_nonfinite).
NONFINITE_POLICIES = {"warn": 0, "raise": 1, "skip": 2}


# ---- errors ----------------------------------------------------------------------------

class Error(RuntimeError):
    """Base class of every aotc error raised by this package."""


class AbiError(Error):
    """The library is not an aotc program the runtime can call (symbol, ABI version, an
    invalid descriptor, an entry point the object does not have)."""


class InputError(Error, ValueError):
    """A caller's value does not match the program's descriptor (dtype, shape, count, ...)."""


class NonfiniteError(Error, FloatingPointError):
    """A train step's loss or gradient norm was NaN or infinite, with on_nonfinite='raise'
    (the message names the step, the loss, the gradient norm and whether the update was applied)."""


class AotcError(Error):
    """An entry point returned a non-zero code k.

    Attributes: program, entry ('forward', 'backward', 'eval' or 'train_step'), code (k),
    node_message (errors[k-1], naming the node, e.g. an out-of-range gather index), value
    (the offending value of the failed call; for a library call, its status) and
    library_message (the library's text of a failed call, `context_error(ctx)` of abi.h, e.g.
    why oneDNN refused a convolution; else None). The message is the runtime's.
    """

    def __init__(self, program, entry, code, node_message, value, library_message=None, message=None):
        self.program, self.entry, self.code = program, entry, code
        self.node_message, self.value = node_message, value
        self.library_message = library_message
        super().__init__(message or (f"{program}_{entry} failed with code {code}: {node_message} "
                                     f"(value {value})" + (f": {library_message}" if library_message else "")))


# ---- the C API (capi.h) ----------------------------------------------------------------

class RtTensor(ctypes.Structure):
    """`aotc_rt_tensor` of capi.h: a caller-owned buffer and what it holds."""
    _fields_ = [("data", ctypes.c_void_p), ("dtype", ctypes.c_int32), ("rank", ctypes.c_int32),
                ("shape", ctypes.POINTER(ctypes.c_int64))]


class RtErrorInfo(ctypes.Structure):
    """`aotc_rt_error_info` of capi.h: the calling thread's last error."""
    _fields_ = [("status", ctypes.c_int32), ("entry_code", ctypes.c_int32), ("value", ctypes.c_int64),
                ("message", ctypes.c_char_p), ("entry", ctypes.c_char_p), ("node_message", ctypes.c_char_p),
                ("library_message", ctypes.c_char_p)]


class RtTrainStatus(ctypes.Structure):
    """`aotc_rt_train_status` of capi.h."""
    _fields_ = [("grad_norm", ctypes.c_double), ("steps", ctypes.c_int64), ("nonfinite", ctypes.c_int32),
                ("skipped", ctypes.c_int32), ("accumulating", ctypes.c_int32), ("reserved", ctypes.c_int32)]


_P = ctypes.c_void_p  # a program's address, a handle, a buffer
_T = ctypes.POINTER(RtTensor)
_I, _I32, _I64, _VP = ctypes.c_int, ctypes.c_int32, ctypes.c_int64, ctypes.POINTER(ctypes.c_void_p)
#: name -> (restype, argtypes) of every aotc_rt_* function this package calls.
_PROTOTYPES = {
    "aotc_rt_last_error": (ctypes.c_char_p, []),
    "aotc_rt_last_error_info": (_I, [ctypes.POINTER(RtErrorInfo)]),
    "aotc_rt_abi_version": (ctypes.c_uint32, []),
    "aotc_rt_profile_reset": (None, []),
    "aotc_rt_program_check": (_I, [_P]),
    "aotc_rt_program_describe": (_I, [_P, ctypes.c_char_p, ctypes.c_size_t, ctypes.POINTER(ctypes.c_size_t)]),
    "aotc_rt_function_create": (_I, [_P, _VP]),
    "aotc_rt_function_destroy": (None, [_P]),
    "aotc_rt_forward": (_I, [_P, _T, _I32, _T, _I32, _P, _I64]),
    "aotc_rt_backward": (_I, [_P, _T, _I32, _P, _I64, _T, _I32, _T, _I32]),
    "aotc_rt_eval": (_I, [_P, _T, _I32, _T, _I32]),
    "aotc_rt_function_poison_scratch": (_I, [_P]),
    "aotc_rt_trainer_create": (_I, [_P, _T, _I32, ctypes.c_uint64, _VP]),
    "aotc_rt_trainer_destroy": (None, [_P]),
    "aotc_rt_trainer_input": (_I, [_P, _I32, _VP]),
    "aotc_rt_trainer_bind": (_I, [_P, _I32, _T]),
    "aotc_rt_trainer_output": (_I, [_P, _I32, _VP]),
    "aotc_rt_trainer_step": (_I, [_P, _T, _I32, ctypes.c_uint32, ctypes.POINTER(ctypes.c_double)]),
    "aotc_rt_trainer_set_hyper": (_I, [_P, ctypes.c_char_p, ctypes.c_double]),
    "aotc_rt_trainer_get_hyper": (_I, [_P, ctypes.c_char_p, ctypes.POINTER(ctypes.c_double)]),
    "aotc_rt_trainer_status": (_I, [_P, ctypes.POINTER(RtTrainStatus)]),
    "aotc_rt_trainer_on_nonfinite": (_I, [_P, _I32]),
    "aotc_rt_trainer_nonfinite_count": (_I, [_P, ctypes.POINTER(_I64)]),
    "aotc_rt_trainer_set_comm": (_I, [_P, _P]),
    "aotc_rt_trainer_checkpoint": (_I, [_P, _VP, ctypes.POINTER(_I64)]),
    "aotc_rt_trainer_restore": (_I, [_P, ctypes.c_char_p, _I64, ctypes.c_char_p]),
    "aotc_rt_trainer_save": (_I, [_P, ctypes.c_char_p]),
    "aotc_rt_trainer_load": (_I, [_P, ctypes.c_char_p]),
    "aotc_rt_trainer_poison_scratch": (_I, [_P]),
    "aotc_rt_free": (None, [_P]),
}


def _text(b):
    return b.decode("utf-8", "replace") if b else ""


class Runtime:
    """libaotc_runtime.so loaded with ctypes: `rt.<function>` is `aotc_rt_<function>` with its
    argtypes and restype set (capi.h). One per process: see runtime()."""

    def __init__(self, path):
        self.path = path
        self.lib = ctypes.CDLL(path, mode=os.RTLD_NOW | os.RTLD_LOCAL)
        for name, (restype, argtypes) in _PROTOTYPES.items():
            try:
                fn = getattr(self.lib, name)
            except AttributeError:
                raise Error(f"{path}: no function {name}: a libaotc_runtime.so without the C API of "
                            f"aotc/capi.h (an older build?)") from None
            fn.restype, fn.argtypes = restype, argtypes
            setattr(self, name[len("aotc_rt_"):], fn)

    def check(self, status, program=None):
        """Raises the exception of a non-zero aotc_rt_status (message: aotc_rt_last_error())."""
        if status == RT_OK:
            return
        msg = _text(self.last_error()) or f"aotc runtime: status {status}"
        if status == RT_ERROR_ARGUMENT:
            raise InputError(msg)
        if status == RT_ERROR_PROGRAM:
            info = RtErrorInfo()
            self.last_error_info(ctypes.byref(info))
            raise AotcError(program, _text(info.entry), info.entry_code, _text(info.node_message), info.value,
                            _text(info.library_message) or None, message=msg)
        if status == RT_ERROR_ABI:
            raise AbiError(msg)
        if status == RT_ERROR_NOMEM:
            raise MemoryError(msg)
        if status == RT_ERROR_NONFINITE:
            raise NonfiniteError(msg)
        raise Error(msg)  # IO, STATE, INTERNAL


_RUNTIME = None
_RUNTIME_LOCK = threading.Lock()


def runtime():
    """The process's Runtime (libaotc_runtime.so, found by aotc._build.runtime_library and
    loaded at the first call). Raises Error naming the places tried when it is absent."""
    global _RUNTIME
    if _RUNTIME is None:
        with _RUNTIME_LOCK:
            if _RUNTIME is None:
                from ._build import runtime_library
                rt = Runtime(runtime_library())
                with _LIBS_LOCK:
                    _LOADED_LIBS.append(rt.lib)
                _RUNTIME = rt
    return _RUNTIME


def __getattr__(name):
    if name == "ABI_VERSION":  # the runtime's AOTC_ABI_VERSION (minor << 16 | major), loaded lazily
        return runtime().abi_version()
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def _shape_array(shape):
    return (ctypes.c_int64 * max(1, len(shape)))(*shape)


def _table(entries):
    """An aotc_rt_tensor array from (data address or None, dtype code, shape array, rank)."""
    arr = (RtTensor * max(1, len(entries)))()
    for t, (ptr, dtype, shape, rank) in zip(arr, entries):
        t.data, t.dtype, t.shape, t.rank = ptr, dtype, shape, rank
    return arr


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

    dtype: 'f32', 'f64', 'i64', 'bool' (1 byte), 'i32' or 'u8'; shape: tuple (() for 0-d).
    `data` (optional): bytes-like of exactly nbytes bytes, or a flat sequence of numel
    numbers. Without it the tensor is zero-filled.
    """

    __slots__ = ("dtype", "shape", "buffer")

    def __init__(self, dtype, shape, data=None):
        if dtype not in DTYPE_ITEMSIZE:
            raise ValueError(f"unknown dtype {dtype!r} (f32, f64, i64, bool, i32, u8)")
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
        """A flat, writable memoryview of the elements (format f/d/q/?/i/B)."""
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


# ---- descriptors (from aotc_rt_program_describe's JSON) --------------------------------

def _dtype_name(v):
    return _DTYPES[v][0] if isinstance(v, int) and v in _DTYPES else str(v)


def _role_name(v):
    return _ROLES.get(v, str(v)) if isinstance(v, int) else str(v)


def _number(v, default):
    """A JSON number; null (how JSON writes inf and NaN) is `default`."""
    return default if v is None else float(v)


class TensorDesc:
    """One entry of a program's inputs, outputs or grads (aotc_tensor_desc).

    name (FQN for parameters/buffers), dtype ('f32'...), role ('parameter', 'buffer',
    'user_input', 'output', 'grad', 'constant', 'rng_state'), shape (tuple), numel, nbytes,
    requires_grad (bool; inputs: gets a gradient; outputs: a mutated input's new value that
    takes a tangent), updates_input (outputs only: the index of the input whose new value this
    output is, e.g. batch norm's running_mean; else -1), differentiable (outputs: gets a
    tangent: floating and not a mutated buffer's new value), index (position in its list).
    """

    __slots__ = ("index", "name", "dtype", "role", "shape", "numel", "nbytes", "requires_grad",
                 "updates_input", "_rt")

    def __init__(self, index, d):
        self.index = index
        self.name = d["name"]
        self.dtype = _dtype_name(d["dtype"])
        self.role = _role_name(d["role"])
        self.shape = tuple(int(x) for x in d["shape"])
        self.numel = int(d.get("numel", math.prod(self.shape)))
        self.nbytes = int(d["bytes"])
        self.requires_grad = bool(d.get("requires_grad", False))
        self.updates_input = int(d.get("updates_input", -1))
        # (dtype code, shape array, rank) of an aotc_rt_tensor described by this entry
        self._rt = (_DTYPE_CODE.get(self.dtype, -1), _shape_array(self.shape), len(self.shape))

    @property
    def differentiable(self):
        """Whether backward takes a tangent for this output (abi.h aotc_output_takes_tangent:
        floating, and for a mutated input's new value an input that requires grad)."""
        return self.dtype in FLOATING and (self.updates_input < 0 or bool(self.requires_grad))

    @property
    def type_str(self):
        """E.g. 'f32[64, 784]' (the notation of aotc's messages)."""
        return f"{self.dtype}[{', '.join(map(str, self.shape))}]"

    def __repr__(self):
        return f"TensorDesc({self.index}: {self.name!r} {self.type_str} {self.role})"


class StateDesc:
    """One tensor of a train step's state area (aotc_state_desc): name ("optimizer.state.<fqn>.
    <key>", "optimizer.step", ...), dtype, kind (STATE_*), shape, numel, nbytes, offset (bytes
    into the state area), param_input (input index of its parameter, -1), key (torch.optim's)."""

    __slots__ = ("name", "dtype", "kind", "shape", "numel", "nbytes", "offset", "param_input", "key")

    def __init__(self, d):
        self.name = d["name"]
        self.dtype = _dtype_name(d["dtype"])
        k = d["kind"]
        self.kind = _STATE_KINDS.get(k, k) if isinstance(k, str) else int(k)
        self.shape = tuple(int(x) for x in d["shape"])
        self.numel = math.prod(self.shape)
        self.nbytes, self.offset = int(d["bytes"]), int(d["offset"])
        self.param_input = int(d.get("param_input", -1))
        self.key = d.get("key") or ""

    def __repr__(self):
        return f"StateDesc({self.name!r} {self.dtype}{list(self.shape)})"


class HyperDesc:
    """One run-time hyperparameter (aotc_hyper_desc): name, value (the compiled default) and
    its range [min, max] (max excluded when max_open; no upper bound when max < min). The
    runtime checks the range (aotc_rt_trainer_set_hyper)."""

    __slots__ = ("index", "name", "value", "min", "max", "max_open")

    def __init__(self, index, d):
        self.index, self.name, self.value = index, d["name"], _number(d["value"], math.nan)
        self.min, self.max = _number(d.get("min"), -math.inf), _number(d.get("max"), -math.inf)
        self.max_open = bool(d.get("max_open", False))

    def __repr__(self):
        return f"HyperDesc({self.name!r} = {self.value})"


class TrainInfo:
    """program.train of an object compiled with --optimizer (aotc_train): optimizer ('sgd',
    'adam', 'adamw'), config (the canonical --optimizer text), clip_grad_norm (0: none),
    skip_nonfinite, grad_accumulation (bools), param_inputs (input indices of the updated
    parameters), state (StateDesc list), hyper (HyperDesc list, lr first), state_bytes,
    scratch_bytes."""

    def __init__(self, d):
        self.optimizer, self.config = d["optimizer"], d["config"]
        self.clip_grad_norm = _number(d.get("clip_grad_norm"), 0.0)
        self.skip_nonfinite = bool(d.get("skip_nonfinite", False))
        self.grad_accumulation = bool(d.get("grad_accumulation", False))
        self.param_inputs = [int(i) for i in d["param_inputs"]]
        self.state = [StateDesc(s) for s in d.get("state", [])]
        self.hyper = [HyperDesc(k, h) for k, h in enumerate(d.get("hyper", []))]
        self.state_bytes, self.scratch_bytes = int(d["state_bytes"]), int(d["scratch_bytes"])

    def flag(self, key):
        """A structural option of config ("nesterov", "amsgrad", "maximize") as bool."""
        return f",{key}=1" in self.config


# ---- threads ---------------------------------------------------------------------------

# libomp's threads spin for KMP_BLOCKTIME (default 200 ms) after every parallel region. In a
# Python process torch's own OpenMP pool runs between aotc's entry points (optimizer, autograd),
# and the two spinning pools then share the same cores: the MLP's training step at 2 threads
# took 7.9 ms instead of 1.5 ms. So aotc's threads sleep at once unless the user chose
# otherwise; libomp reads the variable when it initializes, which happens after this import.
os.environ.setdefault("KMP_BLOCKTIME", "0")

_LIBS_LOCK = threading.Lock()
_LOADED_LIBS = []   # CDLL handles of loaded programs and the runtime (their libomp/OpenBLAS are used)
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


def reset_profiles():
    """Zeroes the kernel profile counters of every live profiled context (AOTC_PROFILE,
    docs/profiling.md): call it after warm-up steps so that the reports leave them out, while no
    step runs on another thread (the counters are added to unlocked)."""
    runtime().profile_reset()


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
    aotc_context: library state of the runtime's function handle, one per thread).
    """

    __slots__ = ("saved", "inputs", "in_table", "outputs", "consumed")

    def __init__(self, saved, inputs, in_table, outputs):
        self.saved, self.inputs, self.in_table, self.outputs = saved, inputs, in_table, outputs
        self.consumed = False


#: The name of SavedState before ABI 3 (kept for callers written against it).
Context = SavedState


class _Function:
    """This thread's aotc_rt_function of a Program (its ABI context and scratch arena) with the
    aotc_rt_tensor tables of the raw calls (descriptor dtype and shape, data set per call).
    Destroyed with this object: when its thread ends or its Program is collected."""

    __slots__ = ("ptr", "_rt", "ins", "outs", "tans", "grads", "__weakref__")

    def __init__(self, rt, program):
        h = ctypes.c_void_p()
        rt.check(rt.function_create(program.address, ctypes.byref(h)), program.name)
        self.ptr, self._rt = h.value, rt
        self.ins = _table([(None,) + d._rt for d in program.inputs])
        self.outs = _table([(None,) + d._rt for d in program.outputs])
        self.tans = _table([(None,) + d._rt for d in program.outputs])
        self.grads = _table([(None,) + d._rt for d in program.grads])

    def __del__(self):
        ptr, self.ptr = self.ptr, None
        if ptr:
            try:
                self._rt.function_destroy(ptr)
            except Exception:  # interpreter shutdown
                pass


def _set_data(table, ptrs, descs=None):
    """The aotc_rt_tensor table of a raw call: `table` (the descriptors' dtypes and shapes) with
    the data addresses `ptrs` (None stays NULL: the runtime accepts it for a 0-byte tensor, as
    torch's empty tensors have), or, when the count differs from the descriptors', a new table of
    len(ptrs) entries (the runtime then refuses the count)."""
    if descs is not None and len(ptrs) != len(descs):
        extra = [(-1, None, 0)] * max(0, len(ptrs) - len(descs))
        return _table([(p,) + r for p, r in zip(ptrs, [d._rt for d in descs] + extra)])
    for t, p in zip(table, ptrs):
        t.data = p
    return table


class Program:
    """An aotc program in a shared library: `Program(path, name=None)`.

    `name` defaults to the file name without a leading 'lib' up to the first '.'
    (libmlp.so -> mlp). Finds `<name>_program`, has the runtime check it
    (aotc_rt_program_check: ABI major version, a valid descriptor) and reads it
    (aotc_rt_program_describe).

    Attributes: name, path, address (of `<name>_program`), abi_version, inputs / outputs /
    grads (lists of TensorDesc), grad_input_index (list of ints), saved_bytes, scratch_bytes,
    errors (list of str), build_id, flags, has_eval, train (TrainInfo or None).
    Each thread that calls a Program gets its own runtime function handle (aotc_rt_function:
    an ABI context and a scratch arena), made at its first call and destroyed when the thread
    ends or the Program is collected; so a Program (and a compiled module) may be shared
    between threads, which run concurrently. ctypes releases the GIL during calls.
    Raises OSError (cannot load), AbiError (no descriptor, other ABI version), Error (no
    libaotc_runtime.so).
    """

    def __init__(self, path, name=None):
        self.path = os.fspath(path)
        name = name or _default_name(path)
        self._lib = ctypes.CDLL(os.path.abspath(self.path), mode=os.RTLD_NOW | os.RTLD_LOCAL)
        sym = f"{name}_program"
        try:
            self.address = ctypes.addressof(ctypes.c_char.in_dll(self._lib, sym))
        except ValueError:
            raise AbiError(f"{self.path}: no symbol '{sym}' (a library linked from "
                           f"`aotc ... --name {name}` exports it)") from None
        rt = self._rt = runtime()
        self.name = name
        rt.check(rt.program_check(self.address), name)
        d = json.loads(self._describe())
        self.description = d  #: the descriptor as JSON (docs/abi.md "The descriptor as JSON")
        self.name = d.get("name") or name
        self.abi_version = int(d["abi_version"])
        self.inputs = [TensorDesc(i, x) for i, x in enumerate(d["inputs"])]
        self.outputs = [TensorDesc(i, x) for i, x in enumerate(d["outputs"])]
        self.grads = [TensorDesc(j, x) for j, x in enumerate(d["grads"])]
        self.grad_input_index = [int(i) for i in d["grad_input_index"]]
        self.saved_bytes, self.scratch_bytes = int(d["saved_bytes"]), int(d["scratch_bytes"])
        self.build_id = d.get("build_id") or ""
        self.flags = int(d.get("flags", 0))
        self.errors = list(d.get("errors", []))
        self.has_eval = bool(d.get("has_eval", False))  #: <name>_eval (every CPU object since ABI 9)
        #: TrainInfo of an object compiled with --optimizer, else None.
        self.train = TrainInfo(d["train"]) if d.get("train") else None
        self._functions = threading.local()  # .fn: this thread's _Function
        with _LIBS_LOCK:
            _LOADED_LIBS.append(self._lib)  # never unloaded: handles may outlive the Program
        _set_blas_threads(1)

    def _describe(self):
        rt, need = self._rt, ctypes.c_size_t(0)
        cap = 1 << 16
        while True:
            buf = ctypes.create_string_buffer(cap)
            status = rt.program_describe(self.address, buf, cap, ctypes.byref(need))
            if status == RT_ERROR_ARGUMENT and need.value > cap:
                cap = need.value
                continue
            rt.check(status, self.name)
            return buf.value.decode("utf-8")

    # -- lookup ------------------------------------------------------------------------
    def input_index(self, name):
        """Position of the input called `name` (FQN for parameters), -1 when absent."""
        return next((d.index for d in self.inputs if d.name == name), -1)

    def grad_index(self, name):
        """Position in `grads` of the gradient of input `name`, -1 when absent."""
        return next((d.index for d in self.grads if d.name == name), -1)

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

    # -- the runtime's function handle, one per thread ---------------------------------
    def function(self):
        """This thread's runtime function handle (aotc_rt_function: one ABI context and one
        scratch arena; `.ptr` its address), made at the thread's first call. It is destroyed
        when the thread ends or the Program goes away, whichever is first."""
        fn = getattr(self._functions, "fn", None)
        if fn is None:
            fn = self._functions.fn = _Function(self._rt, self)
        return fn

    def poison_scratch(self):
        """Test hook: fills this thread's scratch arena with 0xFF bytes (NaN); a call must give
        the same bits after it (aotc_rt_function_poison_scratch)."""
        self._rt.check(self._rt.function_poison_scratch(self.function().ptr), self.name)

    def _saved(self, saved_ptr):
        return (saved_ptr or None, self.saved_bytes) if self.saved_bytes else (None, 0)

    # -- raw entry points (the descriptor's dtypes and shapes) -------------------------
    def call_forward(self, in_ptrs, out_ptrs, saved_ptr):
        """aotc_rt_forward on raw addresses (ints; each buffer 64-byte aligned and of its
        descriptor's dtype and shape, which the caller has checked; saved_ptr: saved_bytes
        bytes). Raises InputError (counts, NULL, alignment), AotcError (a non-zero code)."""
        fn = self.function()
        ins = _set_data(fn.ins, in_ptrs, self.inputs)
        outs = _set_data(fn.outs, out_ptrs, self.outputs)
        self._rt.check(self._rt.forward(fn.ptr, ins, len(in_ptrs), outs, len(out_ptrs),
                                        *self._saved(saved_ptr)), self.name)

    def call_backward(self, in_ptrs, saved_ptr, tangent_ptrs, grad_ptrs):
        """aotc_rt_backward on raw addresses; a tangent_ptrs entry None is the default
        cotangent (1 for a 0-d output, zeros otherwise; None for non-differentiable outputs).
        Raises AotcError on a non-zero code."""
        fn = self.function()
        ins = _set_data(fn.ins, in_ptrs, self.inputs)
        tans = _set_data(fn.tans, tangent_ptrs) if len(tangent_ptrs) <= len(self.outputs) else \
            _set_data(None, tangent_ptrs, self.outputs)
        grads = _set_data(fn.grads, grad_ptrs, self.grads)
        self._rt.check(self._rt.backward(fn.ptr, ins, len(in_ptrs), *self._saved(saved_ptr), tans,
                                         len(tangent_ptrs), grads, len(grad_ptrs)), self.name)

    def call_eval(self, in_ptrs, out_ptrs):
        """aotc_rt_eval (the forward without a saved area) on raw addresses. Raises AbiError
        when the object has no eval entry point, AotcError on a non-zero code."""
        fn = self.function()
        ins = _set_data(fn.ins, in_ptrs, self.inputs)
        outs = _set_data(fn.outs, out_ptrs, self.outputs)
        self._rt.check(self._rt.eval(fn.ptr, ins, len(in_ptrs), outs, len(out_ptrs)), self.name)

    # -- checked calls (each value's own dtype and shape: the runtime checks them) ------
    def _as_rt(self, value, desc, what):
        """(object to keep alive, (address, dtype code, shape array, rank)) for a caller value.
        The runtime compares dtype and shape with `desc`; here only what it cannot see: a
        Python object that is no tensor, bytes of the wrong size, a dtype it has no code for."""
        if isinstance(value, Tensor):
            return value, (value.ptr, _DTYPE_CODE[value.dtype], _shape_array(value.shape), len(value.shape))
        dtype = shape = data = None
        if _is_numpy(value):
            dtype, shape = _numpy_dtype_name(value), tuple(value.shape)
            if dtype in _DTYPE_CODE and value.flags["C_CONTIGUOUS"] and value.ctypes.data % ALIGNMENT == 0:
                return value, (value.ctypes.data, _DTYPE_CODE[dtype], _shape_array(shape), len(shape))
            data = memoryview(value.tobytes()) if dtype in _DTYPE_CODE else None
        elif hasattr(value, "dtype") and hasattr(value, "data") and hasattr(value, "shape"):
            dtype, shape, data = value.dtype, tuple(value.shape), memoryview(value.data)  # a safetensors tensor
        elif isinstance(value, (bytes, bytearray, memoryview, array.array)):
            mv = memoryview(value).cast("B")
            if mv.nbytes != desc.nbytes:
                raise InputError(f"{self.name}: {what} must be {desc.type_str} ({desc.nbytes} bytes), "
                                 f"got {mv.nbytes} bytes")
            dtype, shape, data = desc.dtype, desc.shape, mv
        else:
            raise InputError(f"{self.name}: {what} must be {desc.type_str}; got a {type(value).__name__} "
                             f"(pass an aotc.Tensor, a numpy array or bytes)")
        if dtype not in _DTYPE_CODE:
            raise InputError(f"{self.name}: {what} must be {desc.type_str}, got "
                             f"{dtype}[{', '.join(map(str, shape))}]")
        t = Tensor(dtype, shape, data)
        return t, (t.ptr, _DTYPE_CODE[dtype], _shape_array(shape), len(shape))

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
        kept, entries = [], []
        for k, v in enumerate(inputs):
            if k >= len(self.inputs):  # too many: the runtime names the count
                entries.append((None, -1, None, 0))
                continue
            d = self.inputs[k]
            obj, entry = self._as_rt(v, d, f"input '{d.name}' (input {d.index})")
            kept.append(obj)
            entries.append(entry)
        return kept, _table(entries), len(entries)

    def forward(self, inputs):
        """Runs the forward. `inputs`: a sequence in `self.inputs` order, or a mapping by
        name (FQN for parameters); each an aotc.Tensor, a numpy array, a safetensors
        tensor or bytes of the right size (unaligned / non-contiguous ones are copied).
        Returns (outputs: list of Tensor, state: SavedState). Raises InputError, AotcError."""
        kept, ins, n = self._bind_inputs(inputs)
        outs = [Tensor(d.dtype, d.shape) for d in self.outputs]
        out_table = _table([(o.ptr,) + d._rt for o, d in zip(outs, self.outputs)])
        saved = AlignedBuffer(self.saved_bytes)
        self._rt.check(self._rt.forward(self.function().ptr, ins, n, out_table, len(outs),
                                        *self._saved(saved.ptr)), self.name)
        return outs, SavedState(saved, kept, (ins, n), outs)

    def eval(self, inputs):
        """Runs <name>_eval: the outputs of forward() without a saved area (nothing to
        differentiate). `inputs` as for forward(). Returns the list of output Tensors."""
        kept, ins, n = self._bind_inputs(inputs)
        outs = [Tensor(d.dtype, d.shape) for d in self.outputs]
        out_table = _table([(o.ptr,) + d._rt for o, d in zip(outs, self.outputs)])
        self._rt.check(self._rt.eval(self.function().ptr, ins, n, out_table, len(outs)), self.name)
        return outs

    def backward(self, ctx, tangents=None):
        """Runs the backward of the forward that produced `ctx` (consumed).

        tangents: None, or up to one entry per output: None (1 for a 0-d floating output,
        zeros for other differentiable outputs; integer/bool outputs and the new values of
        mutated inputs take None) or a value of the output's dtype and shape. Returns one
        Tensor per `self.grads` entry (the gradient of input grad_input_index[j])."""
        if not isinstance(ctx, SavedState) or ctx.consumed:
            raise InputError(f"{self.name}: backward needs a saved state from forward() that was "
                             f"not consumed yet")
        tangents = list(tangents) if tangents is not None else []
        kept, entries = [], []
        for k, t in enumerate(tangents):
            d = self.outputs[k] if k < len(self.outputs) else None
            if t is None or d is None:
                entries.append((None,) + (d._rt if d else (-1, None, 0)))
                continue
            obj, entry = self._as_rt(t, d, f"gradient of output '{d.name}' (output {d.index})")
            kept.append(obj)
            entries.append(entry)
        grads = [Tensor(d.dtype, d.shape) for d in self.grads]
        grad_table = _table([(g.ptr,) + d._rt for g, d in zip(grads, self.grads)])
        ins, n = ctx.in_table
        self._rt.check(self._rt.backward(self.function().ptr, ins, n, *self._saved(ctx.saved.ptr),
                                         _table(entries), len(entries), grad_table, len(grads)), self.name)
        ctx.consumed = True
        ctx.saved = ctx.inputs = ctx.in_table = None
        return grads

    def write_back(self, inputs, outputs):
        """Copies the new values of mutated inputs (outputs whose `updates_input` is k:
        batch norm's running statistics) into inputs[k], as PyTorch's in-place buffer update
        would. Call it after the backward (which reads the values the forward ran on).
        `inputs`: the forward's inputs (sequence or mapping by name); each updated one must
        be a writable aotc.Tensor or numpy array of its descriptor's dtype and shape.
        `outputs`: forward's outputs (aotc.Tensor). Returns the number of inputs written."""
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
            if isinstance(dst, Tensor):
                got, view = (dst.dtype, dst.shape), dst.buffer.memory
            elif _is_numpy(dst) and dst.flags["C_CONTIGUOUS"] and dst.flags["WRITEABLE"]:
                got, view = (_numpy_dtype_name(dst), tuple(dst.shape)), memoryview(dst.reshape(-1).view("u1"))
            else:
                raise InputError(f"{self.name}: {what} gets a new value but is not writable "
                                 f"(pass a writable aotc.Tensor or C-contiguous numpy array)")
            if got != (dst_desc.dtype, dst_desc.shape):
                raise InputError(f"{self.name}: {what} must be {dst_desc.type_str}, got "
                                 f"{got[0]}[{', '.join(map(str, got[1]))}]")
            if isinstance(src, Tensor):
                src_got, src_mem = (src.dtype, src.shape), src.buffer.memory
            elif _is_numpy(src):
                src_got, src_mem = (_numpy_dtype_name(src), tuple(src.shape)), memoryview(src.tobytes())
            else:
                src_got = src_mem = None
            if src_got != (d.dtype, d.shape):
                raise InputError(f"{self.name}: output '{d.name}' (output {d.index}) must be an "
                                 f"aotc.Tensor or numpy array {d.type_str}")
            view[:d.nbytes] = src_mem
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
