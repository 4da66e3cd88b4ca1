//===- NcclCommunicator.cpp - abi.h's aotc_comm over NCCL, dlopen'ed ---------===//
//
// This file implements NcclCommunicator (aotc/nccl.h). nccl.h and cuda_runtime_api.h give the
// types and the functions' signatures only (decltype): the functions themselves come from
// dlopen/dlsym, so the library links neither. One request = one collective on the
// communicator's stream plus the event recorded after it (and, for a host buffer, the copies
// to and from a device staging buffer before and after it, on the same stream).
//===----------------------------------------------------------------------===//
#include "aotc/nccl.h"

#include <cuda_runtime_api.h>
#include <nccl.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <dlfcn.h>
#include <sched.h>
#include <stdexcept>
#include <vector>

namespace aotc::rt {

namespace {

/// dlsym'ed entry points, typed from the real headers.
#define AOTC_NCCL_FNS(X)                                                                                   \
  X(ncclGetUniqueId) X(ncclCommInitRank) X(ncclCommDestroy) X(ncclCommAbort) X(ncclCommGetAsyncError)    \
  X(ncclAllReduce) X(ncclReduceScatter) X(ncclAllGather) X(ncclBroadcast) X(ncclGetErrorString)
#define AOTC_CUDART_FNS(X)                                                                                 \
  X(cudaSetDevice) X(cudaStreamCreateWithFlags) X(cudaStreamDestroy) X(cudaStreamSynchronize)             \
  X(cudaEventCreateWithFlags) X(cudaEventRecord) X(cudaEventQuery) X(cudaEventDestroy)                    \
  X(cudaFree) X(cudaMemcpyAsync) X(cudaPointerGetAttributes) X(cudaGetErrorString)

struct Api {
#define AOTC_FIELD(f) decltype(&::f) f = nullptr;
  AOTC_NCCL_FNS(AOTC_FIELD)
  AOTC_CUDART_FNS(AOTC_FIELD)
#undef AOTC_FIELD
  cudaError_t (*cudaMalloc)(void **, size_t) = nullptr; // overloaded in C++: the C one
};

/// $env when set (only it), else the first of `names` that loads.
void *openFirst(const char *env, std::initializer_list<const char *> names, std::string &tried) {
  std::vector<std::string> list;
  if (const char *e = std::getenv(env); e && *e) list.push_back(e);
  else
    for (const char *n : names) list.push_back(n);
  for (const std::string &n : list) {
    if (void *h = dlopen(n.c_str(), RTLD_NOW | RTLD_LOCAL)) return h;
    tried += (tried.empty() ? "" : "; ") + n + ": " + dlerror();
  }
  return nullptr;
}

/// The process's one copy of the API (loaded on first use; the libraries stay loaded).
const Api &api() {
  static const Api a = [] {
    Api x;
    std::string tried;
    void *nccl = openFirst("AOTC_NCCL_LIB", {"libnccl.so.2"}, tried);
    if (!nccl)
      throw std::runtime_error("NCCL communicator: cannot load NCCL (" + tried +
                               "); set AOTC_NCCL_LIB to libnccl.so.2 (pip's nvidia-nccl-cu12: "
                               "site-packages/nvidia/nccl/lib/libnccl.so.2)");
    tried.clear();
    void *cudart = openFirst("AOTC_CUDART_LIB", {"libcudart.so", "libcudart.so.13", "libcudart.so.12"}, tried);
    if (!cudart)
      throw std::runtime_error("NCCL communicator: cannot load the CUDA runtime (" + tried +
                               "); set AOTC_CUDART_LIB to libcudart.so.N");
    auto sym = [](void *h, const char *name, const char *lib) {
      void *p = dlsym(h, name);
      if (!p) throw std::runtime_error(std::string("NCCL communicator: ") + lib + " has no " + name);
      return p;
    };
#define AOTC_LOAD_NCCL(f) x.f = reinterpret_cast<decltype(x.f)>(sym(nccl, #f, "libnccl"));
#define AOTC_LOAD_CUDART(f) x.f = reinterpret_cast<decltype(x.f)>(sym(cudart, #f, "libcudart"));
    AOTC_NCCL_FNS(AOTC_LOAD_NCCL)
    AOTC_CUDART_FNS(AOTC_LOAD_CUDART)
    AOTC_LOAD_CUDART(cudaMalloc)
#undef AOTC_LOAD_NCCL
#undef AOTC_LOAD_CUDART
    return x;
  }();
  return a;
}

bool ncclType(int32_t dtype, ncclDataType_t &t, int64_t &size) {
  switch (dtype) {
  case AOTC_F32: t = ncclFloat32, size = 4; return true;
  case AOTC_F64: t = ncclFloat64, size = 8; return true;
  case AOTC_I64: t = ncclInt64, size = 8; return true;
  default: return false;
  }
}

enum class Kind { Allreduce, ReduceScatter, Allgather, Broadcast };
const char *kindName(Kind k) {
  static const char *const n[] = {"all-reduce", "reduce-scatter", "all-gather", "broadcast"};
  return n[(int)k];
}
const char *ncclCall(Kind k) {
  static const char *const n[] = {"ncclAllReduce", "ncclReduceScatter", "ncclAllGather", "ncclBroadcast"};
  return n[(int)k];
}

} // namespace

struct NcclCommunicator::Impl {
  const Api &a = api();
  aotc_comm table{};
  ncclComm_t comm = nullptr;
  cudaStream_t stream = nullptr;
  double timeout = 300;
  std::string error;
  Stats stats;
  struct Request {
    cudaEvent_t event = nullptr;
    bool active = false, done = false;
    void *staging = nullptr; // device buffer of a host request (kept for reuse)
    size_t stagingBytes = 0;
  };
  std::vector<Request> requests;

  int fail(const std::string &what) {
    error = "NCCL rank " + std::to_string(table.rank) + " of " + std::to_string(table.size) + ": " + what;
    return -1;
  }
  int cudaFail(const char *call, cudaError_t e) { return fail(std::string(call) + ": " + a.cudaGetErrorString(e)); }
  int ncclFail(const char *call, ncclResult_t r) { return fail(std::string(call) + ": " + a.ncclGetErrorString(r)); }

  bool onDevice(const void *p) {
    cudaPointerAttributes at{};
    if (a.cudaPointerGetAttributes(&at, p) != cudaSuccess) return false;
    return at.type == cudaMemoryTypeDevice || at.type == cudaMemoryTypeManaged;
  }

  /// Enqueues the collective (send/recv may be host memory: staged), then its event.
  int start(Kind k, const void *send, void *recv, int64_t count, int32_t dtype, int32_t root, int64_t *request) {
    ncclDataType_t t;
    int64_t esize = 1;
    if (k == Kind::Broadcast) t = ncclUint8;
    else if (!ncclType(dtype, t, esize))
      return fail(std::string(kindName(k)) + " of dtype " + std::to_string(dtype) + " (not f32, f64, i64)");
    if (count < 0) return fail(std::string(kindName(k)) + " of " + std::to_string(count) + " elements");
    size_t slot = 0;
    while (slot < requests.size() && requests[slot].active) ++slot;
    if (slot == requests.size()) requests.emplace_back();
    Request &r = requests[slot];
    if (!r.event)
      if (cudaError_t e = a.cudaEventCreateWithFlags(&r.event, cudaEventDisableTiming)) return cudaFail("cudaEventCreateWithFlags", e);
    const int64_t n = table.size;
    // Elements read from send and written to recv.
    const int64_t in = k == Kind::ReduceScatter ? n * count : count, out = k == Kind::Allgather ? n * count : count;
    const bool host = !onDevice(send) || !onDevice(recv);
    const void *dsend = send;
    void *drecv = recv;
    if (host) {
      // Staging: [input | output] in one device buffer, copies on the stream.
      const size_t need = (size_t)((in + out) * esize);
      if (r.stagingBytes < need) {
        // Earlier copies into the old buffer (a start that failed after them) finish first.
        if (r.staging) {
          a.cudaStreamSynchronize(stream);
          a.cudaFree(r.staging);
        }
        r.staging = nullptr;
        r.stagingBytes = 0;
        if (cudaError_t e = a.cudaMalloc(&r.staging, need)) return cudaFail("cudaMalloc (staging)", e);
        r.stagingBytes = need;
      }
      dsend = r.staging;
      drecv = static_cast<char *>(r.staging) + in * esize;
      if (cudaError_t e = a.cudaMemcpyAsync(r.staging, send, (size_t)(in * esize), cudaMemcpyDefault, stream))
        return cudaFail("cudaMemcpyAsync (to the device)", e);
    }
    ncclResult_t rc = ncclSuccess;
    switch (k) {
    case Kind::Allreduce: rc = a.ncclAllReduce(dsend, drecv, (size_t)count, t, ncclSum, comm, stream); break;
    case Kind::ReduceScatter: rc = a.ncclReduceScatter(dsend, drecv, (size_t)count, t, ncclSum, comm, stream); break;
    case Kind::Allgather: rc = a.ncclAllGather(dsend, drecv, (size_t)count, t, comm, stream); break;
    case Kind::Broadcast: rc = a.ncclBroadcast(dsend, drecv, (size_t)count, t, root, comm, stream); break;
    }
    if (rc != ncclSuccess) {
      // The copy already queued reads the caller's buffer: let it finish while that lives.
      if (host) a.cudaStreamSynchronize(stream);
      return ncclFail(ncclCall(k), rc);
    }
    if (host)
      if (cudaError_t e = a.cudaMemcpyAsync(recv, drecv, (size_t)(out * esize), cudaMemcpyDefault, stream))
        return cudaFail("cudaMemcpyAsync (to the host)", e);
    if (cudaError_t e = a.cudaEventRecord(r.event, stream)) return cudaFail("cudaEventRecord", e);
    r.active = true;
    r.done = false;
    ++stats.started;
    stats.bytes += in * esize;
    *request = (int64_t)slot;
    return 0;
  }

  Request *find(int64_t request, const char *what) {
    if (request < 0 || request >= (int64_t)requests.size() || !requests[(size_t)request].active) {
      fail(std::string(what) + " of an unknown request " + std::to_string(request));
      return nullptr;
    }
    return &requests[(size_t)request];
  }

  /// 1 done, 0 not yet, -1 error.
  int poll(Request &r) {
    if (r.done) return 1;
    cudaError_t e = a.cudaEventQuery(r.event);
    if (e == cudaErrorNotReady) {
      ncclResult_t async = ncclSuccess;
      if (a.ncclCommGetAsyncError(comm, &async) == ncclSuccess && async != ncclSuccess && async != ncclInProgress)
        return ncclFail("ncclCommGetAsyncError", async);
      return 0;
    }
    if (e != cudaSuccess) return cudaFail("cudaEventQuery", e);
    r.done = true;
    ++stats.completedBeforeWait;
    return 1;
  }

  int test(int64_t request, int32_t *done) {
    Request *r = find(request, "test");
    if (!r) return -1;
    int p = poll(*r);
    if (p < 0) return -1;
    *done = p;
    if (p) r->active = false;
    return 0;
  }

  int wait(int64_t request) {
    Request *r = find(request, "wait");
    if (!r) return -1;
    const bool before = r->done;
    const auto t0 = std::chrono::steady_clock::now();
    for (long spins = 0;; ++spins) {
      int p = poll(*r);
      if (p < 0) return -1;
      if (p) break;
      if ((spins & 255) == 255) {
        if (std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count() > timeout)
          return fail("a collective of the train step did not complete within " + std::to_string((int)timeout) +
                      " s (AOTC_COMM_TIMEOUT): another rank has died, failed or stopped calling");
        sched_yield();
      }
    }
    if (!before) --stats.completedBeforeWait; // found by this wait, not before it
    r->active = false;
    return 0;
  }

  int blocking(Kind k, void *buf, int64_t count, int32_t dtype, int32_t root) {
    int64_t req = -1;
    if (int rc = start(k, buf, buf, count, dtype, root, &req)) return rc;
    return wait(req);
  }
};

namespace {
NcclCommunicator::Impl *self(void *p) { return static_cast<NcclCommunicator::Impl *>(p); }

void check(const Api &a, ncclResult_t r, const char *call) {
  if (r != ncclSuccess) throw std::runtime_error(std::string("NCCL communicator: ") + call + ": " + a.ncclGetErrorString(r));
}
void check(const Api &a, cudaError_t e, const char *call) {
  if (e != cudaSuccess) throw std::runtime_error(std::string("NCCL communicator: ") + call + ": " + a.cudaGetErrorString(e));
}
} // namespace

NcclUniqueId NcclCommunicator::uniqueId() {
  const Api &a = api();
  ncclUniqueId id;
  check(a, a.ncclGetUniqueId(&id), "ncclGetUniqueId");
  NcclUniqueId out;
  static_assert(sizeof out.bytes == sizeof id.internal, "ncclUniqueId is 128 bytes");
  std::memcpy(out.bytes, id.internal, sizeof out.bytes);
  return out;
}

NcclCommunicator::NcclCommunicator(int rank, int size, const NcclUniqueId &id, int device) : impl_(new Impl) {
  Impl &m = *impl_;
  const Api &a = m.a;
  if (size < 1 || rank < 0 || rank >= size)
    throw std::runtime_error("NCCL communicator: rank " + std::to_string(rank) + " of " + std::to_string(size));
  if (const char *t = std::getenv("AOTC_COMM_TIMEOUT"))
    if (double v = std::atof(t); v > 0) m.timeout = v;
  if (device >= 0) check(a, a.cudaSetDevice(device), "cudaSetDevice");
  check(a, a.cudaStreamCreateWithFlags(&m.stream, cudaStreamNonBlocking), "cudaStreamCreateWithFlags");
  ncclUniqueId nid;
  std::memcpy(nid.internal, id.bytes, sizeof nid.internal);
  check(a, a.ncclCommInitRank(&m.comm, size, nid, rank), "ncclCommInitRank");
  aotc_comm &t = m.table;
  t.self = &m;
  t.rank = rank;
  t.size = size;
  t.allreduce_start = [](void *s, void *buf, int64_t n, int32_t dt, int64_t *req) {
    return self(s)->start(Kind::Allreduce, buf, buf, n, dt, 0, req);
  };
  t.test = [](void *s, int64_t req, int32_t *done) { return self(s)->test(req, done); };
  t.wait = [](void *s, int64_t req) { return self(s)->wait(req); };
  t.progress = [](void *s) {
    for (Impl::Request &r : self(s)->requests)
      if (r.active) self(s)->poll(r); // an error shows at the request's wait
  };
  t.broadcast = [](void *s, void *buf, int64_t bytes, int32_t root) {
    return self(s)->blocking(Kind::Broadcast, buf, bytes, -1, root); // bytes: ncclUint8
  };
  t.allreduce = [](void *s, void *buf, int64_t n, int32_t dt) { return self(s)->blocking(Kind::Allreduce, buf, n, dt, 0); };
  t.abort = [](void *s, int32_t code, const char *why) {
    // No launcher to end the job: abort the communicator (the other ranks' collectives then
    // fail, and their Trainers end them) and exit.
    std::fprintf(stderr, "%s\n", why ? why : "aotc: NCCL communicator aborted");
    std::fflush(stderr);
    self(s)->a.ncclCommAbort(self(s)->comm);
    std::_Exit(code);
  };
  t.error = [](void *s) { return self(s)->error.c_str(); };
  t.reduce_scatter_start = [](void *s, const void *send, void *recv, int64_t n, int32_t dt, int64_t *req) {
    return self(s)->start(Kind::ReduceScatter, send, recv, n, dt, 0, req);
  };
  t.allgather_start = [](void *s, const void *send, void *recv, int64_t n, int32_t dt, int64_t *req) {
    return self(s)->start(Kind::Allgather, send, recv, n, dt, 0, req);
  };
}

NcclCommunicator::~NcclCommunicator() {
  Impl &m = *impl_;
  const Api &a = m.a;
  bool inFlight = false;
  for (Impl::Request &r : m.requests) inFlight |= r.active && m.poll(r) == 0;
  if (inFlight) {
    // A request still in flight belongs to a failed step: abort rather than wait for it, and
    // leave its events, buffers and stream (work queued behind it may still touch them).
    if (m.comm) a.ncclCommAbort(m.comm);
    return;
  }
  if (m.stream) a.cudaStreamSynchronize(m.stream);
  if (m.comm) a.ncclCommDestroy(m.comm);
  for (Impl::Request &r : m.requests) {
    if (r.event) a.cudaEventDestroy(r.event);
    if (r.staging) a.cudaFree(r.staging);
  }
  if (m.stream) a.cudaStreamDestroy(m.stream);
}

const aotc_comm *NcclCommunicator::table() const { return &impl_->table; }
int NcclCommunicator::rank() const { return impl_->table.rank; }
int NcclCommunicator::size() const { return impl_->table.size; }
void NcclCommunicator::setTimeoutSeconds(double s) { impl_->timeout = s; }
NcclCommunicator::Stats NcclCommunicator::stats() const { return impl_->stats; }

} // namespace aotc::rt
