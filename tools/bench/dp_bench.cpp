//===- dp_bench.cpp - Times data-parallel train steps (scripts/bench.sh --distributed) -===//
//
//   [mpirun -np N] bench_dp LIB NAME WEIGHTS INPUTS WARMUP ITERS OUT.json [--blocking]
//
// LIB is a shared library made from an object compiled with --optimizer ... --data-parallel
// (python/aotc build_library or clang -shared), NAME its program, WEIGHTS its weights file,
// INPUTS a safetensors with `input.<name>` for every user input (each rank trains on the same
// batch: the timing does not depend on the values). With one rank the step runs without a
// communicator (one process); with N ranks through aotc::rt::MpiCommunicator. --blocking
// gives the object no communicator and instead all-reduces every bucket blocking after the
// step: what the step would cost with no overlap at all (same bytes, same buckets).
//
// Rank 0 writes OUT.json: times_ms (the slowest rank's time of each timed step, MPI_MAX),
// ranks, omp_threads, bytes_per_step (each rank's all-reduce volume), wait_ms_per_step (time
// the step spent waiting for all-reduces: communication not hidden), allreduce_ms (a blocking
// MPI_Allreduce of the same buckets after the timed steps, median of 5: the communication's
// full cost), completed_before_wait (all-reduces progress() found done before the wait),
// bytes_completed_before_wait_per_step (their bytes: the communication hidden behind the
// backward), started, and latency_us (a one-element MPI_Allreduce, median of 101).
//===----------------------------------------------------------------------===//
#include "aotc/abi.h"
#include "aotc/mpi.h"
#include "aotc/runtime.h"
#include "aotc/safetensors.h"
#include "aotc/trainer.h"

#include <nlohmann/json.hpp>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <dlfcn.h>
#include <fstream>
#include <omp.h>
#include <string>
#include <vector>

using aotc::rt::Tensor;
using Clock = std::chrono::steady_clock;

namespace {

[[noreturn]] void die(const std::string &msg) {
  std::fprintf(stderr, "bench_dp: %s\n", msg.c_str());
  MPI_Abort(MPI_COMM_WORLD, 2);
  std::exit(2);
}

double ms(Clock::time_point t0) { return std::chrono::duration<double, std::milli>(Clock::now() - t0).count(); }

/// Buffers of the buckets' sizes and dtypes, to all-reduce them blocking as the step would.
struct BucketBuffers {
  const aotc_train &t;
  std::vector<std::vector<char>> bufs;
  static int64_t itemBytes(const aotc_bucket_desc &b) { return b.dtype == AOTC_F64 ? 8 : 4; }
  explicit BucketBuffers(const aotc_train &train) : t(train) {
    for (int b = 0; b < t.num_buckets; ++b) bufs.emplace_back((size_t)(t.buckets[b].count * itemBytes(t.buckets[b])), 0);
  }
  /// Each rank's all-reduce volume: every bucket's bytes.
  int64_t bytes() const {
    int64_t n = 0;
    for (const auto &b : bufs) n += (int64_t)b.size();
    return n;
  }
  /// A blocking in-place MPI_Allreduce of every bucket.
  void reduce() {
    for (int b = 0; b < t.num_buckets; ++b)
      MPI_Allreduce(MPI_IN_PLACE, bufs[(size_t)b].data(), (int)t.buckets[b].count,
                    t.buckets[b].dtype == AOTC_F64 ? MPI_DOUBLE : MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD);
  }
  /// Median ms of `reps` reduce() calls, each after a barrier.
  double medianMs(int reps) {
    std::vector<double> times;
    for (int r = 0; r < reps; ++r) {
      MPI_Barrier(MPI_COMM_WORLD);
      auto t0 = Clock::now();
      reduce();
      times.push_back(ms(t0));
    }
    std::sort(times.begin(), times.end());
    return times[times.size() / 2];
  }
};

} // namespace

int main(int argc, char **argv) {
  if (argc != 8 && !(argc == 9 && std::string(argv[8]) == "--blocking")) {
    std::fprintf(stderr, "usage: %s LIB NAME WEIGHTS INPUTS WARMUP ITERS OUT.json [--blocking]\n", argv[0]);
    return 2;
  }
  const bool blocking = argc == 9;
  aotc::rt::MpiCommunicator comm;
  try {
    void *h = dlopen(argv[1], RTLD_NOW | RTLD_LOCAL);
    if (!h) die(std::string("cannot load ") + argv[1] + ": " + dlerror());
    auto *p = static_cast<const aotc_program *>(dlsym(h, (std::string(argv[2]) + "_program").c_str()));
    if (!p) die(std::string(argv[1]) + ": no symbol " + argv[2] + "_program");
    const int warmup = std::atoi(argv[5]), iters = std::atoi(argv[6]);
    aotc::rt::SafetensorsFile weights = aotc::rt::readSafetensors(argv[3]), data = aotc::rt::readSafetensors(argv[4]);
    aotc::rt::Trainer t(*p, weights);
    if (comm.size() > 1 && !blocking) t.setCommunicator(comm.table());
    std::vector<Tensor> in;
    for (int i : t.userInputs()) in.push_back(data.get(std::string("input.") + p->inputs[i].name, argv[4]).clone());
    std::vector<const Tensor *> ptrs;
    for (const Tensor &x : in) ptrs.push_back(&x);
    const aotc_train &tr = *p->train;
    BucketBuffers buckets(tr);
    std::vector<double> times;
    double wait0 = 0;
    int64_t started0 = 0, done0 = 0, doneBytes0 = 0;
    for (int k = 0; k < warmup + iters; ++k) {
      if (k == warmup) {
        wait0 = comm.stats().waitSeconds;
        started0 = comm.stats().started;
        done0 = comm.stats().completedBeforeWait;
        doneBytes0 = comm.stats().bytesCompletedBeforeWait;
      }
      MPI_Barrier(MPI_COMM_WORLD);
      auto t0 = Clock::now();
      t.step(ptrs);
      if (blocking && comm.size() > 1) buckets.reduce();
      double local = ms(t0), slowest = 0;
      MPI_Allreduce(&local, &slowest, 1, MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD);
      if (k >= warmup) times.push_back(slowest);
    }
    const int64_t bytes = buckets.bytes();
    const double full = comm.size() > 1 ? buckets.medianMs(5) : 0;
    // The all-reduce latency: a one-element MPI_Allreduce, median of 101.
    double latencyUs = 0;
    if (comm.size() > 1) {
      std::vector<double> us;
      float one = 1;
      for (int r = 0; r < 101; ++r) {
        MPI_Barrier(MPI_COMM_WORLD);
        auto t0 = Clock::now();
        MPI_Allreduce(MPI_IN_PLACE, &one, 1, MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD);
        us.push_back(1e3 * ms(t0));
      }
      std::sort(us.begin(), us.end());
      latencyUs = us[50];
    }
    if (comm.rank() == 0) {
      nlohmann::json j;
      j["times_ms"] = times;
      j["ranks"] = comm.size();
      j["omp_threads"] = omp_get_max_threads();
      j["blocking"] = blocking;
      j["buckets"] = tr.num_buckets;
      j["bytes_per_step"] = bytes;
      j["wait_ms_per_step"] = 1e3 * (comm.stats().waitSeconds - wait0) / std::max(iters, 1);
      j["started"] = comm.stats().started - started0;
      j["completed_before_wait"] = comm.stats().completedBeforeWait - done0;
      j["allreduce_ms"] = full;
      j["bytes_completed_before_wait_per_step"] =
          (double)(comm.stats().bytesCompletedBeforeWait - doneBytes0) / std::max(iters, 1);
      j["latency_us"] = latencyUs;
      std::ofstream f(argv[7]);
      f << j.dump(1) << "\n";
      if (!f) die(std::string("cannot write ") + argv[7]);
    }
  } catch (const std::exception &e) {
    die(e.what());
  }
  return 0;
}
