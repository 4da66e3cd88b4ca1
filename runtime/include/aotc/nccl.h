//===- nccl.h - An aotc_comm over NCCL for data-parallel training on GPUs -*- C++ -*-===//
//
// aotc::rt::NcclCommunicator fills abi.h's aotc_comm table from NCCL (library aotc::nccl,
// built with the CUDA toolkit; docs/distributed.md "NCCL"). Nothing is linked: libnccl.so.2
// (the nvidia-nccl-cu12 wheel's nvidia/nccl/lib, or the toolkit's) and the CUDA runtime
// (libcudart.so) are dlopen'ed when a communicator is made, so a program that never makes one
// never needs either. Every collective runs on one CUDA stream of the communicator's own;
// a CUDA event recorded after it is what test() queries and wait() waits for (with the
// AOTC_COMM_TIMEOUT deadline, checking ncclCommGetAsyncError), and progress() has nothing to
// drive (NCCL progresses on the GPU by itself). Device buffers are reduced in place; a host
// buffer (the runtime's broadcasts, the fingerprint, a CPU train step's buckets) is staged
// through a device buffer (copies on the same stream).
//
//   // rank 0 makes the id and hands it to the others (MPI_Bcast, a file, the launcher's store):
//   aotc::rt::NcclUniqueId id = rank == 0 ? aotc::rt::NcclCommunicator::uniqueId() : received;
//   aotc::rt::NcclCommunicator comm(rank, size, id, /*device=*/local_rank);
//   trainer.setCommunicator(comm.table());
//
// This machine has no GPU: the class is tested against a fake libnccl/libcudart
// (test/nccl/), which runs the ranks as threads of one process (docs/distributed.md).
//===----------------------------------------------------------------------===//
#pragma once

#include "aotc/abi.h"

#include <cstdint>
#include <memory>
#include <string>

namespace aotc::rt {

/// nccl.h's ncclUniqueId: 128 opaque bytes rank 0 makes and every rank passes to its
/// communicator.
struct NcclUniqueId {
  char bytes[128];
};

class NcclCommunicator {
public:
  /// The libraries: $AOTC_NCCL_LIB (when set, only it) else libnccl.so.2, $AOTC_CUDART_LIB
  /// else the first of libcudart.so, .so.13, .so.12 that loads; loaded once per process. std::runtime_error naming what failed to load or
  /// which call failed (with NCCL's / CUDA's text).
  static NcclUniqueId uniqueId();
  /// ncclCommInitRank on `device` (cudaSetDevice first; -1: the current device).
  NcclCommunicator(int rank, int size, const NcclUniqueId &id, int device = -1);
  ~NcclCommunicator();
  NcclCommunicator(const NcclCommunicator &) = delete;
  NcclCommunicator &operator=(const NcclCommunicator &) = delete;

  /// The table to give Trainer::setCommunicator; it points at this object.
  const aotc_comm *table() const;
  int rank() const;
  int size() const;
  /// Seconds a wait polls before it fails (AOTC_COMM_TIMEOUT, default 300).
  void setTimeoutSeconds(double s);

  /// Collectives started, and those found complete by test()/progress() before their wait.
  struct Stats {
    int64_t started = 0, completedBeforeWait = 0, bytes = 0;
  };
  Stats stats() const;

  struct Impl;

private:
  std::unique_ptr<Impl> impl_;
};

} // namespace aotc::rt
