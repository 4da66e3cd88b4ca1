//===- mpi.h - An aotc_comm over MPI for data-parallel training --*- C++ -*-===//
//
// aotc::rt::MpiCommunicator fills abi.h's aotc_comm table from MPI (library aotc::mpi, built
// when CMake finds MPI; Debian's Open MPI 4.1 here). A data-parallel program (compiled with
// --data-parallel, docs/distributed.md):
//
//   #include "aotc/mpi.h"
//   aotc::rt::MpiCommunicator comm;                 // MPI_Init_thread unless already done
//   aotc::rt::Trainer trainer(model_program, weights);
//   trainer.setCommunicator(comm.table());           // fingerprint check, rank 0's state to all
//   for (...) trainer.step({&myShardX, &myShardY});  // gradients averaged over the ranks
//
// and `mpirun -np N ./train` (docs/distributed.md has the command lines for one machine and a
// cluster). A blocking wait gives up after timeoutSeconds() (AOTC_COMM_TIMEOUT in seconds,
// default 300) with an error naming the operation, so a rank that died or stopped calling
// never makes the others hang; the Trainer then aborts the job (MPI_Abort).
//===----------------------------------------------------------------------===//
#pragma once

#include "aotc/abi.h"

#include <mpi.h>

#include <cstdint>
#include <string>
#include <vector>

namespace aotc::rt {

class MpiCommunicator {
public:
  /// Uses `comm` (MPI_COMM_WORLD by default; duplicated, so the caller's own traffic never
  /// matches aotc's). Calls MPI_Init_thread(MPI_THREAD_FUNNELED) when MPI is not initialized
  /// yet, and then MPI_Finalize in the destructor.
  explicit MpiCommunicator(MPI_Comm comm = MPI_COMM_WORLD);
  ~MpiCommunicator();
  MpiCommunicator(const MpiCommunicator &) = delete;
  MpiCommunicator &operator=(const MpiCommunicator &) = delete;

  /// The table to give Trainer::setCommunicator (or abi.h aotc_train::set_comm); it points at
  /// this object, which must outlive its use.
  const aotc_comm *table() const { return &table_; }
  int rank() const { return table_.rank; }
  int size() const { return table_.size; }
  /// Seconds a blocking wait polls before it fails (AOTC_COMM_TIMEOUT, default 300).
  double timeoutSeconds() const { return timeout_; }
  void setTimeoutSeconds(double s) { timeout_ = s; }

  /// Counters since construction: all-reduces started by the train step, and those of them
  /// that progress() found complete before the step waited for them (the overlap).
  struct Stats {
    int64_t started = 0, completedBeforeWait = 0;
    int64_t bytes = 0;         ///< Bytes all-reduced (each rank's contribution).
    int64_t bytesCompletedBeforeWait = 0; ///< Of those, in all-reduces done before their wait.
    double waitSeconds = 0;    ///< Time spent in wait() (communication not hidden).
  };
  const Stats &stats() const { return stats_; }

private:
  struct Request {
    std::vector<MPI_Request> parts; ///< MPI counts are int: a long array goes in pieces.
    bool active = false, done = false;
    int64_t bytes = 0;
  };
  enum class Collective { Allreduce, ReduceScatter, Allgather };
  int start(void *buf, int64_t count, int32_t dtype, int64_t *request);
  int startCollective(Collective what, const void *send, void *buf, int64_t count, int32_t dtype, int64_t *request);
  int test(int64_t request, int32_t *done);
  int wait(int64_t request);
  void progress();
  int broadcast(void *buf, int64_t bytes, int32_t root);
  int allreduce(void *buf, int64_t count, int32_t dtype);
  int poll(Request &r);
  int fail(const std::string &what, int code);
  int waitParts(std::vector<MPI_Request> &parts, const std::string &what);
  static MPI_Datatype mpiType(int32_t dtype);

  aotc_comm table_{};
  MPI_Comm comm_ = MPI_COMM_NULL;
  bool finalize_ = false;
  double timeout_ = 300;
  std::vector<Request> requests_;
  std::string error_;
  Stats stats_;
};

} // namespace aotc::rt
