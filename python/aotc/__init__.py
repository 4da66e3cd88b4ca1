"""aotc from Python: compiled training steps run by libaotc_runtime.so (its C API, aotc/capi.h,
through ctypes), as programs or torch modules.

Torch-free (standard library; numpy optional):
  Program(lib, name=None)      load a shared library made from an aotc object; forward /
                               backward on aligned buffers (aotc.Tensor, numpy arrays, bytes)
  build_library(path, ...)     run aotc on a .pt2 / JSON / FX text and link a cached
                               libNAME.so (content-hashed; $AOTC_CACHE_DIR)
  set_num_threads(n)           libomp threads (and OpenBLAS pinned to 1, see its docstring)
  reset_profiles()             zero the AOTC_PROFILE counters after warm-up (docs/profiling.md)
  read_safetensors(path)       a validating safetensors reader
  MpiCommunicator()            MPI_COMM_WORLD as an aotc_comm (libaotc_mpi.so; data parallel)
With torch (imported on first use):
  compile(path, ...)           an nn.Module: parameters by FQN, forward = autograd.Function
  load_module(lib, weights)    the same from an existing library

See docs/python.md.
"""
from ._core import (ALIGNMENT, AbiError, AlignedBuffer, AotcError, Context, Error, SavedState,
                    InputError, NonfiniteError, Program, Tensor, TensorDesc, get_num_threads, load,
                    reset_profiles, set_num_threads)
from ._build import (BuildResult, CompileError, build_library, c_name, default_cache_dir, find_aotc,
                     runtime_library)
from ._safetensors import SafetensorsError, read as read_safetensors
from ._mpi import MpiCommunicator

__all__ = [
    "ABI_VERSION", "ALIGNMENT", "AbiError", "AlignedBuffer", "AotcError", "BuildResult",
    "CompileError", "Context", "Error", "MpiCommunicator", "SavedState", "InputError", "NonfiniteError", "Program",
    "SafetensorsError", "Tensor",
    "TensorDesc", "build_library", "c_name", "compile", "default_cache_dir", "find_aotc",
    "get_num_threads", "load", "load_module", "read_safetensors", "reset_profiles", "runtime_library",
    "set_num_threads",
]


def compile(path, **kwargs):
    """Compiles a model with aotc and returns a torch nn.Module (needs torch); see
    aotc._torch.compile for the keyword arguments."""
    from ._torch import compile as _compile
    return _compile(path, **kwargs)


def load_module(library, weights=None, name=None):
    """A torch nn.Module from an existing library and weights file (needs torch)."""
    from ._torch import load_module as _load_module
    return _load_module(library, weights, name)


def __getattr__(name):
    if name == "ABI_VERSION":  # AOTC_ABI_VERSION of the runtime (aotc_rt_abi_version): loads it
        from . import _core
        return _core.ABI_VERSION
    if name in ("CompiledModule", "AotcFunction"):
        from . import _torch
        return getattr(_torch, name)
    raise AttributeError(f"module 'aotc' has no attribute {name!r}")
