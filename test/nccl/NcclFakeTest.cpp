//===- NcclFakeTest.cpp - NcclCommunicator against the fake libnccl/libcudart -----===//
//
// Ranks are threads (test/nccl/fake_nccl.cpp); AOTC_NCCL_LIB and AOTC_CUDART_LIB point at the
// fake (set below). Expected values are computed here independently: sums in rank order
// (the fake's, and what 2 ranks of real NCCL give: a0 + a1), layouts from abi.h's definitions
// of reduce-scatter and all-gather.
//===----------------------------------------------------------------------===//
#include "aotc/nccl.h"

#include <catch2/catch.hpp>
#include <cuda_runtime_api.h>

#include <atomic>
#include <cstdlib>
#include <functional>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

using aotc::rt::NcclCommunicator;
using aotc::rt::NcclUniqueId;

namespace {

/// The fake for both libraries (a variable set already, e.g. nccl.missing_library's, stays).
const bool kFakeEnv = setenv("AOTC_NCCL_LIB", AOTC_FAKE_NCCL, 0) == 0 && setenv("AOTC_CUDART_LIB", AOTC_FAKE_NCCL, 0) == 0;

/// Runs body(rank, comm) on `n` threads, one communicator each; returns the failures.
std::vector<std::string> onRanks(int n, const std::function<void(int, NcclCommunicator &, std::vector<std::string> &)> &body) {
  NcclUniqueId id = NcclCommunicator::uniqueId();
  std::mutex m;
  std::vector<std::string> failures;
  std::vector<std::thread> ts;
  for (int r = 0; r < n; ++r)
    ts.emplace_back([&, r] {
      std::vector<std::string> mine;
      try {
        NcclCommunicator c(r, n, id);
        body(r, c, mine);
      } catch (const std::exception &e) {
        mine.push_back("rank " + std::to_string(r) + ": " + e.what());
      }
      std::lock_guard<std::mutex> l(m);
      failures.insert(failures.end(), mine.begin(), mine.end());
    });
  for (auto &t : ts) t.join();
  return failures;
}

#define EXPECT_OR(cond, what)                                                                                        \
  do {                                                                                                               \
    if (!(cond)) f.push_back("rank " + std::to_string(r) + ": " + (what));                                          \
  } while (0)

float value(int r, int i) { return 0.1f * (float)(r + 1) + 0.37f * (float)i; }

} // namespace

TEST_CASE("NCCL fake: the table's collectives over 3 ranks, device and host buffers", "[nccl][collectives]") {
  const int n = 3, count = 37;
  auto f = onRanks(n, [&](int r, NcclCommunicator &c, std::vector<std::string> &f) {
    const aotc_comm &t = *c.table();
    EXPECT_OR(t.rank == r && t.size == n, "rank/size");
    // All-reduce in place on device memory (f32): the rank-order sum.
    float *d = nullptr;
    cudaMalloc(reinterpret_cast<void **>(&d), count * sizeof(float));
    for (int i = 0; i < count; ++i) d[i] = value(r, i);
    int64_t req = -1;
    EXPECT_OR(t.allreduce_start(t.self, d, count, AOTC_F32, &req) == 0, t.error(t.self));
    EXPECT_OR(t.wait(t.self, req) == 0, t.error(t.self));
    for (int i = 0; i < count; ++i) {
      float want = value(0, i);
      for (int q = 1; q < n; ++q) want += value(q, i);
      EXPECT_OR(d[i] == want, "all-reduce element " + std::to_string(i));
    }
    // Reduce-scatter from host memory (f64, staged): rank r gets elements [r count, (r+1) count).
    std::vector<double> send(n * count), recv(count);
    for (int i = 0; i < n * count; ++i) send[i] = (double)value(r, i);
    EXPECT_OR(t.reduce_scatter_start(t.self, send.data(), recv.data(), count, AOTC_F64, &req) == 0, t.error(t.self));
    EXPECT_OR(t.wait(t.self, req) == 0, t.error(t.self));
    for (int i = 0; i < count; ++i) {
      double want = (double)value(0, r * count + i);
      for (int q = 1; q < n; ++q) want += (double)value(q, r * count + i);
      EXPECT_OR(recv[i] == want, "reduce-scatter element " + std::to_string(i));
    }
    // All-gather (i64, host): rank q's count elements at q count.
    std::vector<int64_t> mine(count), all(n * count);
    for (int i = 0; i < count; ++i) mine[i] = 1000 * r + i;
    EXPECT_OR(t.allgather_start(t.self, mine.data(), all.data(), count, AOTC_I64, &req) == 0, t.error(t.self));
    EXPECT_OR(t.wait(t.self, req) == 0, t.error(t.self));
    for (int q = 0; q < n; ++q)
      for (int i = 0; i < count; ++i) EXPECT_OR(all[q * count + i] == 1000 * q + i, "all-gather element");
    // The runtime's blocking calls on host memory: a broadcast of bytes from rank 1 and an
    // i64 all-reduce (the fingerprint check's).
    std::string text = r == 1 ? "from rank one" : "xxxxxxxxxxxxx";
    EXPECT_OR(t.broadcast(t.self, text.data(), (int64_t)text.size(), 1) == 0, t.error(t.self));
    EXPECT_OR(text == "from rank one", "broadcast gave '" + text + "'");
    int64_t fp[3] = {0, 0, 0};
    fp[r] = 11 + r;
    EXPECT_OR(t.allreduce(t.self, fp, 3, AOTC_I64) == 0, t.error(t.self));
    EXPECT_OR(fp[0] == 11 && fp[1] == 12 && fp[2] == 13, "blocking all-reduce");
    cudaFree(d);
  });
  INFO((f.empty() ? std::string() : f[0]));
  REQUIRE(f.empty());
}

TEST_CASE("NCCL fake: test() sees a collective unfinished until every rank has started it", "[nccl]") {
  std::atomic<int> phase{0};
  auto f = onRanks(2, [&](int r, NcclCommunicator &c, std::vector<std::string> &f) {
    const aotc_comm &t = *c.table();
    float x[4] = {1, 2, 3, (float)r};
    int64_t req = -1;
    if (r == 1)
      while (phase.load() == 0) std::this_thread::yield();
    EXPECT_OR(t.allreduce_start(t.self, x, 4, AOTC_F32, &req) == 0, t.error(t.self));
    if (r == 0) {
      int32_t done = 7;
      t.progress(t.self);
      EXPECT_OR(t.test(t.self, req, &done) == 0 && done == 0, "finished before rank 1 started");
      phase = 1;
    }
    EXPECT_OR(t.wait(t.self, req) == 0, t.error(t.self));
    EXPECT_OR(x[0] == 2 && x[3] == 1, "sum");
    EXPECT_OR(c.stats().started == 1, "started");
  });
  INFO((f.empty() ? std::string() : f[0]));
  REQUIRE(f.empty());
}

TEST_CASE("NCCL fake: errors name the call and NCCL's text, a missing rank times out", "[nccl]") {
  setenv("FAKE_NCCL_FAIL_COUNT", "7", 1);
  auto f = onRanks(2, [&](int r, NcclCommunicator &c, std::vector<std::string> &f) {
    const aotc_comm &t = *c.table();
    int64_t req = -1;
    float x[8] = {};
    EXPECT_OR(t.allreduce_start(t.self, x, 8, AOTC_BOOL, &req) != 0, "a bool all-reduce was accepted");
    EXPECT_OR(std::string(t.error(t.self)).find("all-reduce of dtype 3 (not f32, f64, i64)") != std::string::npos,
              t.error(t.self));
    EXPECT_OR(t.allreduce_start(t.self, x, 7, AOTC_F32, &req) != 0, "the injected failure was not reported");
    EXPECT_OR(std::string(t.error(t.self)) ==
                  "NCCL rank " + std::to_string(r) + " of 2: ncclAllReduce: invalid argument (fake)",
              t.error(t.self));
    if (r == 0) {
      // Rank 1 never joins this one.
      c.setTimeoutSeconds(1);
      EXPECT_OR(t.allreduce_start(t.self, x, 8, AOTC_F32, &req) == 0, t.error(t.self));
      EXPECT_OR(t.wait(t.self, req) != 0, "a wait without the other rank succeeded");
      EXPECT_OR(std::string(t.error(t.self)).find("did not complete within 1 s (AOTC_COMM_TIMEOUT)") != std::string::npos,
                t.error(t.self));
    }
  });
  unsetenv("FAKE_NCCL_FAIL_COUNT");
  INFO((f.empty() ? std::string() : f[0]));
  REQUIRE(f.empty());
}

// Run alone with AOTC_NCCL_LIB naming a file that does not exist (ctest nccl.missing_library).
TEST_CASE("NCCL: a library that cannot be loaded is a clear error", "[.missing]") {
  try {
    NcclCommunicator::uniqueId();
    FAIL("loaded");
  } catch (const std::runtime_error &e) {
    const std::string m = e.what();
    INFO(m);
    CHECK(m.find("cannot load NCCL (/nonexistent/libnccl.so.2: ") != std::string::npos);
    CHECK(m.find("set AOTC_NCCL_LIB to libnccl.so.2") != std::string::npos);
  }
}
