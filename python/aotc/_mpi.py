"""Data parallel from Python: aotc.MpiCommunicator (docs/distributed.md, docs/python.md).

MpiCommunicator() loads libaotc_mpi.so (beside libaotc_runtime.so: $AOTC_MPI_LIB, else
aotc.runtime_library()'s folder) and creates the C++ aotc::rt::MpiCommunicator on
MPI_COMM_WORLD through its C entry (runtime/mpi/MpiC.cpp), initializing MPI unless the process
did already (mpi4py, say). Hand it to a module compiled with data_parallel=True:

    comm = aotc.MpiCommunicator()          # under `mpirun -np N python train.py`
    m = aotc.compile("model.pt2", optimizer="adamw:lr=1e-3", data_parallel=True)
    m.set_communicator(comm)               # collective: plan check, rank 0's state to all
    for x, y in my_shard(comm.rank, comm.size):
        m.train_step(x, y)                 # gradients averaged over the ranks

Torch's own DistributedDataParallel works on the module's forward/backward instead
(test/python/test_ddp_torch.py).
"""
import atexit
import ctypes
import os

from ._build import runtime_library
from ._core import Error


def mpi_library():
    env = os.environ.get("AOTC_MPI_LIB")
    if env:
        return env
    return os.path.join(os.path.dirname(runtime_library()), "libaotc_mpi.so")


class MpiCommunicator:
    """An abi.h aotc_comm over MPI_COMM_WORLD (the C++ aotc::rt::MpiCommunicator)."""

    def __init__(self):
        path = mpi_library()
        if not os.path.isfile(path):
            raise Error(f"{path} not found: aotc was built without MPI (Debian: libopenmpi-dev openmpi-bin), "
                        f"or set AOTC_MPI_LIB")
        # RTLD_GLOBAL: Open MPI loads its components (mca_*.so) later, which resolve against libmpi.
        self._lib = ctypes.CDLL(path, mode=os.RTLD_NOW | os.RTLD_GLOBAL)
        self._lib.aotc_rt_mpi_create.restype = ctypes.c_int
        self._lib.aotc_rt_mpi_create.argtypes = [ctypes.POINTER(ctypes.c_void_p), ctypes.POINTER(ctypes.c_void_p),
                                                 ctypes.POINTER(ctypes.c_char_p)]
        self._lib.aotc_rt_mpi_destroy.argtypes = [ctypes.c_void_p]
        self._lib.aotc_rt_mpi_stats.argtypes = [ctypes.c_void_p, ctypes.POINTER(ctypes.c_int64)]
        h, table, err = ctypes.c_void_p(), ctypes.c_void_p(), ctypes.c_char_p()
        if self._lib.aotc_rt_mpi_create(ctypes.byref(h), ctypes.byref(table), ctypes.byref(err)) != 0:
            raise Error("MPI communicator: " + (err.value or b"?").decode())
        self._handle, self.table = h.value, table.value
        # aotc_comm: {void *self; int32_t rank; int32_t size; ...}
        ints = ctypes.cast(self.table + ctypes.sizeof(ctypes.c_void_p), ctypes.POINTER(ctypes.c_int32))
        self.rank, self.size = ints[0], ints[1]
        atexit.register(self.close)  # MPI_Finalize at exit at the latest (Open MPI reports a missing one)

    def stats(self):
        """{'started', 'completed_before_wait', 'bytes'}: the train step's all-reduces so far."""
        out = (ctypes.c_int64 * 3)()
        self._lib.aotc_rt_mpi_stats(self._handle, out)
        return {"started": out[0], "completed_before_wait": out[1], "bytes": out[2]}

    def close(self):
        """Frees the communicator (MPI_Finalize if it initialized MPI). Modules given it must
        not step after this."""
        h, self._handle = getattr(self, "_handle", None), None
        if h:
            self._lib.aotc_rt_mpi_destroy(h)

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()
