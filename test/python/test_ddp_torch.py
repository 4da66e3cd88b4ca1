"""Data parallel from Python (docs/distributed.md): the aotc.compile module under torch's
DistributedDataParallel (gloo, 2 processes on loopback) against one process, and the compiled
train_step under mpirun with aotc.MpiCommunicator (plain and ZeRO-1) against one process
accumulating the same shards. Shard r is the MLP's golden batch changed per rank (x * (1 + 0.05 r), the targets
rolled by 7 r), so the ranks' gradients differ. Needs torch (run_torch_tests.sh) and, for the
second test, mpirun and libaotc_mpi.so (skipped with the reason otherwise).
"""
import os
import shutil
import subprocess
import sys
import unittest

import testutil
from testutil import MLP_GOLDEN, MLP_PT2

import torch

import aotc

CACHE = os.environ.get("AOTC_DDP_CACHE") or testutil.work_dir("ddp-cache")
_DT = {"f32": torch.float32, "i64": torch.int64}
TRAIN = dict(optimizer="adamw:lr=0.001,weight_decay=0.01", grad_accumulation=True, data_parallel=0.01)
# ZeRO-1 on 2 ranks: without clipping the same bits as plain data parallelism.
TRAIN_Z1 = dict(TRAIN, data_parallel="zero1:0.01", world_size=2)
STEPS = 5


def shard(rank):
    g = aotc.read_safetensors(MLP_GOLDEN)
    t = lambda k: torch.frombuffer(bytearray(g[k].data), dtype=_DT[g[k].dtype]).reshape(g[k].shape).clone()  # noqa: E731
    x, y = t("input.x"), t("input.target")
    return x * (1 + 0.05 * rank), torch.roll(y, 7 * rank)


def ddp_worker(rank, world, init_file, out):
    import torch.distributed as dist
    dist.init_process_group("gloo", init_method="file://" + init_file, rank=rank, world_size=world)
    m = aotc.compile(MLP_PT2, cache_dir=CACHE)
    ddp = torch.nn.parallel.DistributedDataParallel(m)
    loss = ddp(*shard(rank))
    loss.backward()
    torch.save({n: p.grad.clone() for n, p in m.named_parameters()}, out)
    dist.destroy_process_group()


def mpi_worker(out):
    comm = aotc.MpiCommunicator()
    for suffix, train in (("", TRAIN), (".z1", TRAIN_Z1)):
        m = aotc.compile(MLP_PT2, cache_dir=CACHE, **train)
        m.set_communicator(comm)
        for _ in range(STEPS):
            m.train_step(*shard(comm.rank))
        if comm.rank == 0:
            torch.save({n: p.detach().clone() for n, p in m.named_parameters()}, out + suffix)
        m.set_communicator(None)
    comm.close()


class DataParallelTest(unittest.TestCase):
    def test_ddp_gloo_matches_one_process(self):
        """DDP's averaged gradients = the mean of one process's gradients on the two shards
        (the aotc module), and = torch eager's on the export (independent of aotc)."""
        work = testutil.work_dir("ddp")
        aotc.compile(MLP_PT2, cache_dir=CACHE)  # build once, before two processes want it
        init = os.path.join(work, "init")
        procs = [subprocess.Popen([sys.executable, __file__, "ddp-worker", str(r), "2", init,
                                   os.path.join(work, f"grads{r}.pt")]) for r in range(2)]
        for p in procs:
            self.assertEqual(p.wait(timeout=300), 0)
        got = [torch.load(os.path.join(work, f"grads{r}.pt")) for r in range(2)]
        one = aotc.compile(MLP_PT2, cache_dir=CACHE)
        ref = torch.export.load(MLP_PT2).module()
        ref.load_state_dict(one.state_dict())
        for r in range(2):
            one(*shard(r)).backward()
            ref(*shard(r)).backward()
        eager = dict(ref.named_parameters())
        for n, p in one.named_parameters():
            mean = p.grad / 2
            for g in got:
                self.assertTrue(torch.equal(g[n], got[0][n]), f"{n}: the ranks' gradients differ")
                err = (g[n] - mean).abs().max().item() / max(mean.abs().max().item(), 1e-30)
                self.assertLessEqual(err, 1e-6, f"{n}: DDP vs one process, relative {err:.3g}")
                err = (g[n] - eager[n].grad / 2).abs().max().item() / max(mean.abs().max().item(), 1e-30)
                self.assertLessEqual(err, 1e-5, f"{n}: DDP vs torch eager, relative {err:.3g}")

    def test_train_step_under_mpirun_is_bit_identical_to_accumulation(self):
        mpirun = shutil.which("mpirun")
        if not mpirun:
            self.skipTest("mpirun not found (Debian: openmpi-bin)")
        if not os.path.isfile(aotc._mpi.mpi_library()):
            self.skipTest(f"{aotc._mpi.mpi_library()} not built (aotc without MPI)")
        work = testutil.work_dir("mpi-py")
        one = aotc.compile(MLP_PT2, cache_dir=CACHE, **TRAIN)
        aotc.compile(MLP_PT2, cache_dir=CACHE, **TRAIN_Z1)  # built here, before two ranks want it
        one.set_hyperparameter("grad_scale", 0.5)
        for _ in range(STEPS):
            one.accumulate(*shard(0))
            one.train_step(*shard(1))
        out = os.path.join(work, "params.pt")
        env = dict(os.environ, OMPI_ALLOW_RUN_AS_ROOT="1", OMPI_ALLOW_RUN_AS_ROOT_CONFIRM="1", OMP_NUM_THREADS="1",
                   AOTC_DDP_CACHE=CACHE)
        r = subprocess.run([mpirun, "--oversubscribe", "--mca", "btl", "self,vader", "--mca", "oob_tcp_if_include",
                            "lo", "-np", "2", sys.executable, __file__, "mpi-worker", out], env=env, timeout=300,
                           capture_output=True, text=True)
        self.assertEqual(r.returncode, 0, r.stdout + r.stderr)
        for suffix in ("", ".z1"):
            got = torch.load(out + suffix)
            for n, p in one.named_parameters():
                self.assertTrue(torch.equal(got[n], p.detach()), f"{n}: 2 ranks{suffix} differ from one process")


if __name__ == "__main__":
    if len(sys.argv) > 1 and sys.argv[1] == "ddp-worker":
        ddp_worker(int(sys.argv[2]), int(sys.argv[3]), sys.argv[4], sys.argv[5])
    elif len(sys.argv) > 1 and sys.argv[1] == "mpi-worker":
        mpi_worker(sys.argv[2])
    else:
        unittest.main()
