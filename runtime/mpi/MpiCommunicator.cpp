//===- MpiCommunicator.cpp - abi.h's aotc_comm over MPI ---------------------===//
//
// This file implements MpiCommunicator (aotc/mpi.h). The object's all-reduces are
// MPI_Iallreduce(MPI_IN_PLACE, ..., MPI_SUM), ZeRO-1's reduce-scatters and all-gathers
// MPI_Ireduce_scatter_block and MPI_Iallgather; Open MPI 4.1 does not progress them on its own
// ("OMPI progress: no"), so progress() tests every active request, which the train step calls
// between its kernels. Blocking calls are non-blocking ones waited for with a deadline, so a
// missing rank gives an error, not a hang. Errors are returned (MPI_ERRORS_RETURN on the
// duplicated communicator) with MPI's text.
//===----------------------------------------------------------------------===//
#include "aotc/mpi.h"

#include <chrono>
#include <climits>
#include <cstdlib>
#include <sched.h>

namespace aotc::rt {

namespace {

MpiCommunicator *self(void *p) { return static_cast<MpiCommunicator *>(p); }

/// Elements (bytes for broadcast) per MPI call: MPI counts are int.
constexpr int64_t kPiece = INT_MAX / 2;

std::string mpiError(int code) {
  char text[MPI_MAX_ERROR_STRING];
  int n = 0;
  MPI_Error_string(code, text, &n);
  return std::string(text, (size_t)n);
}

} // namespace

MPI_Datatype MpiCommunicator::mpiType(int32_t dtype) {
  switch (dtype) {
  case AOTC_F32: return MPI_FLOAT;
  case AOTC_F64: return MPI_DOUBLE;
  case AOTC_I64: return MPI_INT64_T;
  default: return MPI_DATATYPE_NULL;
  }
}

MpiCommunicator::MpiCommunicator(MPI_Comm comm) {
  int init = 0;
  MPI_Initialized(&init);
  if (!init) {
    int provided = 0;
    MPI_Init_thread(nullptr, nullptr, MPI_THREAD_FUNNELED, &provided);
    finalize_ = true;
  }
  MPI_Comm_dup(comm, &comm_);
  MPI_Comm_set_errhandler(comm_, MPI_ERRORS_RETURN);
  if (const char *t = std::getenv("AOTC_COMM_TIMEOUT")) {
    double v = std::atof(t);
    if (v > 0) timeout_ = v;
  }
  table_.self = this;
  MPI_Comm_rank(comm_, &table_.rank);
  MPI_Comm_size(comm_, &table_.size);
  table_.allreduce_start = [](void *s, void *buf, int64_t n, int32_t dt, int64_t *req) {
    return self(s)->start(buf, n, dt, req);
  };
  table_.test = [](void *s, int64_t req, int32_t *done) { return self(s)->test(req, done); };
  table_.wait = [](void *s, int64_t req) { return self(s)->wait(req); };
  table_.progress = [](void *s) { self(s)->progress(); };
  table_.broadcast = [](void *s, void *buf, int64_t bytes, int32_t root) { return self(s)->broadcast(buf, bytes, root); };
  table_.allreduce = [](void *s, void *buf, int64_t n, int32_t dt) { return self(s)->allreduce(buf, n, dt); };
  table_.abort = [](void *s, int32_t code, const char *) { MPI_Abort(self(s)->comm_, code); };
  table_.error = [](void *s) { return self(s)->error_.c_str(); };
  table_.reduce_scatter_start = [](void *s, const void *send, void *recv, int64_t n, int32_t dt, int64_t *req) {
    return self(s)->startCollective(Collective::ReduceScatter, send, recv, n, dt, req);
  };
  table_.allgather_start = [](void *s, const void *send, void *recv, int64_t n, int32_t dt, int64_t *req) {
    return self(s)->startCollective(Collective::Allgather, send, recv, n, dt, req);
  };
}

MpiCommunicator::~MpiCommunicator() {
  // Requests still active here belong to a failed step (freeing an active non-blocking
  // collective request is erroneous in MPI): they are left, and so is the communicator then.
  bool inFlight = false;
  for (Request &r : requests_) inFlight |= r.active && !r.done;
  if (comm_ != MPI_COMM_NULL && !inFlight) MPI_Comm_free(&comm_);
  int fin = 0;
  MPI_Finalized(&fin);
  if (finalize_ && !fin) MPI_Finalize();
}

int MpiCommunicator::fail(const std::string &what, int code) {
  error_ = "MPI rank " + std::to_string(table_.rank) + " of " + std::to_string(table_.size) + ": " + what +
           (code == MPI_SUCCESS ? std::string() : ": " + mpiError(code));
  return code == MPI_SUCCESS ? -1 : code;
}

int MpiCommunicator::start(void *buf, int64_t count, int32_t dtype, int64_t *request) {
  return startCollective(Collective::Allreduce, buf, buf, count, dtype, request);
}

int MpiCommunicator::startCollective(Collective what, const void *send, void *buf, int64_t count, int32_t dtype,
                                     int64_t *request) {
  static const char *const kName[] = {"all-reduce", "reduce-scatter", "all-gather"};
  MPI_Datatype t = mpiType(dtype);
  if (t == MPI_DATATYPE_NULL)
    return fail(std::string(kName[(int)what]) + " of dtype " + std::to_string(dtype) + " (not f32, f64, i64)", 0);
  // A reduce-scatter or all-gather is one MPI call: its layout (rank r's count at r x count)
  // cannot be split into pieces the way an in-place all-reduce can.
  if (what != Collective::Allreduce && count > kPiece)
    return fail(std::string(kName[(int)what]) + " of " + std::to_string(count) + " elements a rank (at most " +
                    std::to_string(kPiece) + ")",
                0);
  size_t slot = 0;
  while (slot < requests_.size() && requests_[slot].active) ++slot;
  if (slot == requests_.size()) requests_.emplace_back();
  Request &r = requests_[slot];
  r.parts.clear(); // capacity stays: no allocation once every slot has been used
  r.active = true;
  r.done = false;
  int size = 0;
  MPI_Type_size(t, &size);
  for (int64_t off = 0; off < count || off == 0; off += kPiece) {
    int n = (int)std::min<int64_t>(kPiece, count - off);
    r.parts.push_back(MPI_REQUEST_NULL);
    int rc = what == Collective::ReduceScatter
                 ? MPI_Ireduce_scatter_block(send, buf, n, t, MPI_SUM, comm_, &r.parts.back())
             : what == Collective::Allgather
                 ? MPI_Iallgather(send, n, t, buf, n, t, comm_, &r.parts.back())
                 : MPI_Iallreduce(MPI_IN_PLACE, static_cast<char *>(buf) + off * size, n, t, MPI_SUM, comm_,
                                  &r.parts.back());
    // On failure the slot stays active (never reused: earlier pieces may be in flight).
    if (rc != MPI_SUCCESS)
      return fail(std::string(kName[(int)what]) + " of " + std::to_string(count) + " elements", rc);
    if (count == 0 || what != Collective::Allreduce) break;
  }
  // Each rank's contribution: an all-reduce's count, a reduce-scatter's size x count, an
  // all-gather's count.
  const int64_t bytes = count * size * (what == Collective::ReduceScatter ? table_.size : 1);
  ++stats_.started;
  stats_.bytes += bytes;
  r.bytes = bytes;
  *request = (int64_t)slot;
  return 0;
}

int MpiCommunicator::test(int64_t request, int32_t *done) {
  if (request < 0 || request >= (int64_t)requests_.size() || !requests_[(size_t)request].active)
    return fail("test of an unknown request " + std::to_string(request), 0);
  Request &r = requests_[(size_t)request];
  if (int rc = poll(r)) return rc;
  *done = r.done ? 1 : 0;
  if (r.done) r.active = false;
  return 0;
}

/// Tests an active request not known to be done; one found complete counts as done before
/// its wait (the overlap counters).
int MpiCommunicator::poll(Request &r) {
  if (!r.active || r.done) return 0;
  int flag = 0;
  int rc = MPI_Testall((int)r.parts.size(), r.parts.data(), &flag, MPI_STATUSES_IGNORE);
  if (rc != MPI_SUCCESS) return fail("MPI_Testall", rc);
  if (flag) {
    r.done = true;
    ++stats_.completedBeforeWait;
    stats_.bytesCompletedBeforeWait += r.bytes;
  }
  return 0;
}

void MpiCommunicator::progress() {
  for (Request &r : requests_) poll(r); // an error shows at the request's wait
}

int MpiCommunicator::waitParts(std::vector<MPI_Request> &parts, const std::string &what) {
  const auto t0 = std::chrono::steady_clock::now();
  for (long spins = 0;; ++spins) {
    int flag = 0;
    int rc = MPI_Testall((int)parts.size(), parts.data(), &flag, MPI_STATUSES_IGNORE);
    if (rc != MPI_SUCCESS) return fail(what, rc);
    if (flag) break;
    if ((spins & 1023) == 1023) {
      double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
      if (s > timeout_)
        return fail(what + " did not complete within " + std::to_string((int)timeout_) +
                        " s (AOTC_COMM_TIMEOUT): another rank has died, failed or stopped calling",
                    0);
      sched_yield();
    }
  }
  stats_.waitSeconds += std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  return 0;
}

int MpiCommunicator::wait(int64_t request) {
  if (request < 0 || request >= (int64_t)requests_.size() || !requests_[(size_t)request].active)
    return fail("wait for an unknown request " + std::to_string(request), 0);
  Request &r = requests_[(size_t)request];
  if (!r.done) {
    // A request that failed or timed out stays active: its slot is never reused (its parts
    // may still be in flight); the job is being aborted anyway.
    if (int rc = waitParts(r.parts, "a collective (all-reduce, reduce-scatter or all-gather) of the train step"))
      return rc;
  }
  r.active = false;
  return 0;
}

int MpiCommunicator::broadcast(void *buf, int64_t bytes, int32_t root) {
  std::vector<MPI_Request> parts;
  for (int64_t off = 0; off < bytes; off += kPiece) {
    parts.push_back(MPI_REQUEST_NULL);
    int rc = MPI_Ibcast(static_cast<char *>(buf) + off, (int)std::min<int64_t>(kPiece, bytes - off), MPI_BYTE, root,
                        comm_, &parts.back());
    if (rc != MPI_SUCCESS) return fail("MPI_Ibcast", rc);
  }
  return waitParts(parts, "a broadcast from rank " + std::to_string(root));
}

int MpiCommunicator::allreduce(void *buf, int64_t count, int32_t dtype) {
  MPI_Datatype t = mpiType(dtype);
  if (t == MPI_DATATYPE_NULL || count > INT_MAX) return fail("blocking all-reduce of dtype " + std::to_string(dtype), 0);
  std::vector<MPI_Request> parts(1, MPI_REQUEST_NULL);
  int rc = MPI_Iallreduce(MPI_IN_PLACE, buf, (int)count, t, MPI_SUM, comm_, &parts[0]);
  if (rc != MPI_SUCCESS) return fail("MPI_Iallreduce", rc);
  return waitParts(parts, "a blocking all-reduce");
}

} // namespace aotc::rt
