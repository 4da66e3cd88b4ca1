//===- fake_nccl.cpp - A fake libnccl + libcudart for NcclCommunicator's tests ----===//
//
// libfake_nccl.so stands in for both libraries NcclCommunicator dlopens (AOTC_NCCL_LIB and
// AOTC_CUDART_LIB both point at it), with the real headers' signatures. The ranks of a
// communicator are threads of one process. "Device" memory is host memory from cudaMalloc
// (cudaPointerGetAttributes says device for it, unregistered for anything else). A stream is
// a worker thread running its operations in order; an event completes when the worker reaches
// it. A collective is a rendezvous: the i-th collective of every rank of a communicator meets
// the others' i-th, the last to arrive computes the result for all (sums in rank order:
// a0 + a1 + ...), and each rank's stream stays inside it until then, so an event recorded after
// it is not ready before every rank has started it. ncclCommAbort marks the communicator's
// world aborted: a rank waiting in a collective gets the async error ncclRemoteError and its
// stream stays stuck (what a peer's death looks like). FAKE_NCCL_FAIL_COUNT=N makes a
// collective of N elements fail at once with ncclInvalidArgument.
//===----------------------------------------------------------------------===//
#include <cuda_runtime_api.h>
#include <nccl.h>

#include <condition_variable>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <deque>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <unistd.h>
#include <vector>

struct CUstream_st {
  std::mutex m;
  std::condition_variable cv;
  std::deque<std::function<void()>> q;
  bool busy = false, stop = false;
  std::thread worker;
};
struct CUevent_st {
  std::mutex m;
  bool done = true;
};

namespace {

std::mutex gMem;
std::map<const char *, size_t> gAllocs; // cudaMalloc'ed: base -> bytes

void enqueue(cudaStream_t s, std::function<void()> op) {
  std::lock_guard<std::mutex> l(s->m);
  s->q.push_back(std::move(op));
  s->cv.notify_all();
}

void run(cudaStream_t s) {
  std::unique_lock<std::mutex> l(s->m);
  for (;;) {
    s->cv.wait(l, [&] { return s->stop || !s->q.empty(); });
    if (s->stop) return;
    auto op = std::move(s->q.front());
    s->q.pop_front();
    s->busy = true;
    l.unlock();
    op();
    l.lock();
    s->busy = false;
    s->cv.notify_all();
  }
}

struct World {
  int n = 0;
  std::mutex m;
  std::condition_variable cv;
  bool aborted = false;
  struct Coll {
    int arrived = 0, left = 0;
    bool done = false;
    std::vector<const void *> send;
    std::vector<void *> recv;
  };
  std::map<uint64_t, Coll> colls;
};
std::mutex gWorlds;
std::map<std::string, std::shared_ptr<World>> gWorldOf;

enum class Kind { Allreduce, ReduceScatter, Allgather, Broadcast };

size_t typeSize(ncclDataType_t t) {
  switch (t) {
  case ncclFloat32: return 4;
  case ncclFloat64: case ncclInt64: return 8;
  case ncclUint8: case ncclInt8: return 1;
  default: return 0;
  }
}

template <class T> void sumInto(std::vector<char> &out, const std::vector<const void *> &in, size_t count) {
  T *o = reinterpret_cast<T *>(out.data());
  for (size_t i = 0; i < count; ++i) {
    T acc = static_cast<const T *>(in[0])[i];
    for (size_t r = 1; r < in.size(); ++r) acc += static_cast<const T *>(in[r])[i];
    o[i] = acc;
  }
}

} // namespace

struct ncclComm {
  std::shared_ptr<World> w;
  int rank = 0;
  uint64_t seq = 0;
  ncclResult_t async = ncclSuccess;
};

namespace {

/// Rank `c->rank`'s part of collective `seq` (on its stream's worker).
void rendezvous(ncclComm *c, uint64_t seq, Kind k, const void *send, void *recv, size_t count, ncclDataType_t t,
                int root) {
  World &w = *c->w;
  std::unique_lock<std::mutex> l(w.m);
  World::Coll &co = w.colls[seq];
  if (co.send.empty()) {
    co.send.assign((size_t)w.n, nullptr);
    co.recv.assign((size_t)w.n, nullptr);
  }
  co.send[(size_t)c->rank] = send;
  co.recv[(size_t)c->rank] = recv;
  if (++co.arrived == w.n) {
    const size_t es = typeSize(t), n = (size_t)w.n;
    std::vector<char> tmp;
    if (k == Kind::Allreduce || k == Kind::ReduceScatter) {
      const size_t total = k == Kind::Allreduce ? count : n * count;
      tmp.resize(total * es);
      if (t == ncclFloat32) sumInto<float>(tmp, co.send, total);
      else if (t == ncclFloat64) sumInto<double>(tmp, co.send, total);
      else sumInto<int64_t>(tmp, co.send, total);
      for (size_t r = 0; r < n; ++r)
        std::memcpy(co.recv[r], tmp.data() + (k == Kind::Allreduce ? 0 : r * count * es), count * es);
    } else if (k == Kind::Allgather) {
      tmp.resize(n * count * es);
      for (size_t r = 0; r < n; ++r) std::memcpy(tmp.data() + r * count * es, co.send[r], count * es);
      for (size_t r = 0; r < n; ++r) std::memcpy(co.recv[r], tmp.data(), tmp.size());
    } else {
      tmp.assign(static_cast<const char *>(co.send[(size_t)root]), static_cast<const char *>(co.send[(size_t)root]) + count * es);
      for (size_t r = 0; r < n; ++r) std::memcpy(co.recv[r], tmp.data(), tmp.size());
    }
    co.done = true;
    w.cv.notify_all();
  }
  w.cv.wait(l, [&] { return co.done || w.aborted; });
  if (!co.done) {
    // A peer aborted: this rank's collective never completes (its stream stays here).
    c->async = ncclRemoteError;
    w.cv.wait(l, [] { return false; });
  }
  if (++co.left == w.n) w.colls.erase(seq);
}

ncclResult_t collective(Kind k, const void *send, void *recv, size_t count, ncclDataType_t t, int root, ncclComm_t comm,
                        cudaStream_t s) {
  if (!comm || !s || typeSize(t) == 0) return ncclInvalidArgument;
  if (const char *f = std::getenv("FAKE_NCCL_FAIL_COUNT"); f && std::strtoull(f, nullptr, 10) == count)
    return ncclInvalidArgument;
  const uint64_t seq = comm->seq++;
  enqueue(s, [=] { rendezvous(comm, seq, k, send, recv, count, t, root); });
  return ncclSuccess;
}

} // namespace

extern "C" {

// ---- CUDA runtime -------------------------------------------------------------------------
cudaError_t cudaSetDevice(int) { return cudaSuccess; }
cudaError_t cudaStreamCreateWithFlags(cudaStream_t *s, unsigned int) {
  *s = new CUstream_st;
  (*s)->worker = std::thread(run, *s);
  return cudaSuccess;
}
cudaError_t cudaStreamSynchronize(cudaStream_t s) {
  std::unique_lock<std::mutex> l(s->m);
  s->cv.wait(l, [&] { return s->q.empty() && !s->busy; });
  return cudaSuccess;
}
cudaError_t cudaStreamDestroy(cudaStream_t s) {
  {
    std::lock_guard<std::mutex> l(s->m);
    s->stop = true;
    s->cv.notify_all();
  }
  bool stuck;
  {
    std::lock_guard<std::mutex> l(s->m);
    stuck = s->busy;
  }
  // A worker stuck in an aborted collective cannot be joined: leave it and its stream (the
  // test process ends).
  if (stuck) {
    s->worker.detach();
    return cudaSuccess;
  }
  s->worker.join();
  delete s;
  return cudaSuccess;
}
cudaError_t cudaEventCreateWithFlags(cudaEvent_t *e, unsigned int) {
  *e = new CUevent_st;
  return cudaSuccess;
}
cudaError_t cudaEventDestroy(cudaEvent_t e) {
  delete e;
  return cudaSuccess;
}
cudaError_t cudaEventRecord(cudaEvent_t e, cudaStream_t s) {
  {
    std::lock_guard<std::mutex> l(e->m);
    e->done = false;
  }
  enqueue(s, [e] {
    std::lock_guard<std::mutex> l(e->m);
    e->done = true;
  });
  return cudaSuccess;
}
cudaError_t cudaEventQuery(cudaEvent_t e) {
  std::lock_guard<std::mutex> l(e->m);
  return e->done ? cudaSuccess : cudaErrorNotReady;
}
cudaError_t cudaMalloc(void **p, size_t bytes) {
  *p = std::aligned_alloc(256, (bytes + 255) / 256 * 256 + 256);
  std::lock_guard<std::mutex> l(gMem);
  gAllocs[static_cast<const char *>(*p)] = bytes;
  return cudaSuccess;
}
cudaError_t cudaFree(void *p) {
  {
    std::lock_guard<std::mutex> l(gMem);
    gAllocs.erase(static_cast<const char *>(p));
  }
  std::free(p);
  return cudaSuccess;
}
cudaError_t cudaMemcpyAsync(void *dst, const void *src, size_t bytes, enum cudaMemcpyKind, cudaStream_t s) {
  enqueue(s, [=] { std::memcpy(dst, src, bytes); });
  return cudaSuccess;
}
cudaError_t cudaPointerGetAttributes(struct cudaPointerAttributes *a, const void *p) {
  std::memset(a, 0, sizeof *a);
  a->type = cudaMemoryTypeUnregistered;
  std::lock_guard<std::mutex> l(gMem);
  auto it = gAllocs.upper_bound(static_cast<const char *>(p));
  if (it != gAllocs.begin()) {
    --it;
    if (static_cast<const char *>(p) < it->first + it->second) a->type = cudaMemoryTypeDevice;
  }
  return cudaSuccess;
}
const char *cudaGetErrorString(cudaError_t e) {
  return e == cudaSuccess ? "no error (fake)" : e == cudaErrorNotReady ? "device not ready (fake)" : "error (fake)";
}

// ---- NCCL ----------------------------------------------------------------------------------
ncclResult_t ncclGetUniqueId(ncclUniqueId *id) {
  static int counter = 0;
  std::memset(id->internal, 0, sizeof id->internal);
  std::snprintf(id->internal, sizeof id->internal, "fake-nccl-%d-%d", (int)getpid(), ++counter);
  return ncclSuccess;
}
ncclResult_t ncclCommInitRank(ncclComm_t *comm, int nranks, ncclUniqueId id, int rank) {
  if (nranks < 1 || rank < 0 || rank >= nranks) return ncclInvalidArgument;
  std::lock_guard<std::mutex> l(gWorlds);
  std::shared_ptr<World> &w = gWorldOf[std::string(id.internal, sizeof id.internal)];
  if (!w) {
    w = std::make_shared<World>();
    w->n = nranks;
  }
  if (w->n != nranks) return ncclInvalidUsage;
  *comm = new ncclComm{w, rank, 0, ncclSuccess};
  return ncclSuccess;
}
ncclResult_t ncclCommDestroy(ncclComm_t comm) {
  delete comm;
  return ncclSuccess;
}
ncclResult_t ncclCommAbort(ncclComm_t comm) {
  World &w = *comm->w;
  std::lock_guard<std::mutex> l(w.m);
  w.aborted = true;
  w.cv.notify_all();
  return ncclSuccess; // the comm stays allocated: a stuck worker may still hold it
}
ncclResult_t ncclCommGetAsyncError(ncclComm_t comm, ncclResult_t *r) {
  std::lock_guard<std::mutex> l(comm->w->m);
  *r = comm->async;
  return ncclSuccess;
}
ncclResult_t ncclAllReduce(const void *send, void *recv, size_t count, ncclDataType_t t, ncclRedOp_t op, ncclComm_t comm,
                           cudaStream_t s) {
  return op != ncclSum ? ncclInvalidArgument : collective(Kind::Allreduce, send, recv, count, t, 0, comm, s);
}
ncclResult_t ncclReduceScatter(const void *send, void *recv, size_t count, ncclDataType_t t, ncclRedOp_t op,
                               ncclComm_t comm, cudaStream_t s) {
  return op != ncclSum ? ncclInvalidArgument : collective(Kind::ReduceScatter, send, recv, count, t, 0, comm, s);
}
ncclResult_t ncclAllGather(const void *send, void *recv, size_t count, ncclDataType_t t, ncclComm_t comm, cudaStream_t s) {
  return collective(Kind::Allgather, send, recv, count, t, 0, comm, s);
}
ncclResult_t ncclBroadcast(const void *send, void *recv, size_t count, ncclDataType_t t, int root, ncclComm_t comm,
                           cudaStream_t s) {
  return collective(Kind::Broadcast, send, recv, count, t, root, comm, s);
}
const char *ncclGetErrorString(ncclResult_t r) {
  switch (r) {
  case ncclSuccess: return "no error (fake)";
  case ncclInvalidArgument: return "invalid argument (fake)";
  case ncclRemoteError: return "remote process exited or there was a network error (fake)";
  default: return "error (fake)";
  }
}

} // extern "C"
