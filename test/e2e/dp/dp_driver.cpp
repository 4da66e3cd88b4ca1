//===- dp_driver.cpp - End-to-end driver for data-parallel training ---------===//
//
// Built once per model compiled with --optimizer ... --data-parallel --grad-accumulation
// (-DAOTC_E2E_HEADER="<name>.h", -DAOTC_E2E_PROGRAM=<name>_program), linked with aotc::mpi.
// WEIGHTS is the weights file aotc wrote; FIXTURE the model fixture's golden (input.<name>
// is the batch). Shard r of step s is the fixture batch changed deterministically (floats
// x * (1 + 0.05 r) + 0.01 s, integers rolled by 7 r + 3 s elements), so every rank's shard
// has the program's batch shape and the ranks' gradients differ.
//
//   dp_driver ref WEIGHTS FIXTURE RANKS STEPS OUT
//     One process, no communicator: each step accumulate()s shards 0 .. RANKS-2 and step()s
//     shard RANKS-1 with the hyperparameter grad_scale = 1 / RANKS: the gradient DDP's mean
//     over RANKS ranks would give. Writes OUT.
//   dp_driver dp WEIGHTS FIXTURE STEPS OUT [FAULT | micro=M]      (under mpirun)
//     Every rank trains on its shard with aotc::rt::MpiCommunicator (the scratch poisoned with
//     NaN bytes before each update step); after every step the ranks'
//     parameters must have the same bits (a hash gathered from every rank). Rank 0 writes OUT
//     and prints the communicator's counters summed over the ranks ("overlap: S started, C
//     completed before the wait"). FAULT: kill (rank 1 SIGKILLs itself before step 3) or fail (rank 1's integer
//     inputs out of range at step 3: its step fails and the Trainer aborts the job), hang (rank
//     1 sleeps before step 3: rank 0's wait gives up after AOTC_COMM_TIMEOUT) or nan (rank
//     1's float inputs NaN at step 3: with --skip-nonfinite every rank must skip that step and
//     only that one, parameters still identical). micro=M:
//     each step is M micro-batches a rank (shards r M .. r M + M - 1: accumulate() then step())
//     with grad_scale 1/M, which a reference over RANKS x M shards matches.
//     save=K:PATH: every rank calls save(PATH) before step K (ZeRO-1 gathers the shards);
//     load=PATH: every rank load()s PATH first and trains from its step count on; nocomm:
//     step once without a communicator (a ZeRO-1 object must refuse: exit 1 with its error).
//   dp_driver nccl WEIGHTS FIXTURE RANKS STEPS OUT    (built with -DAOTC_DP_NCCL)
//     RANKS threads, each a Trainer on its shard with an NcclCommunicator over test/nccl's
//     fake (AOTC_NCCL_LIB / AOTC_CUDART_LIB); parameters identical on every rank after every
//     step; rank 0's written as dp's are.
//   dp_driver compare-checkpoints A B
//     Every tensor of checkpoints A and B bit-identical, optimizer state among them.
//   dp_driver compare A B TOL
//     TOL 0: the per-step parameter hashes (those both runs took) and the final parameters of A
//     and B are bit-identical; else the final parameters agree within TOL (max |a-b| / max(|b|, 1)).
//   dp_driver overlap-check OUT MIN
//     OUT's counter "completed_before_wait" is at least MIN.
// OUT (safetensors): hash i64[STEPS] (FNV-1a of all parameters after each step), param.<FQN>
// after the last step, and counters. Exit 0 on success, 1 on a failed check.
//===----------------------------------------------------------------------===//
#include AOTC_E2E_HEADER

#include "aotc/mpi.h"
#ifdef AOTC_DP_NCCL
#include "aotc/nccl.h"
#include <memory>
#endif
#include "aotc/runtime.h"
#include "aotc/safetensors.h"
#include "aotc/trainer.h"

#include <algorithm>
#include <cmath>
#include <chrono>
#include <csignal>
#include <thread>
#include <map>
#include <cstdio>
#include <cstring>
#include <string>
#include <vector>

using aotc::rt::SafetensorsFile;
using aotc::rt::Tensor;
using aotc::rt::Trainer;

namespace {

const aotc_program &kProg = AOTC_E2E_PROGRAM;

int fail(const std::string &msg) {
  std::fprintf(stderr, "FAIL: %s\n", msg.c_str());
  return 1;
}

/// outOfRange: integer inputs out of any range; with nanFloats, float inputs NaN instead.
std::vector<Tensor> shard(const SafetensorsFile &fx, int step, int rank, bool outOfRange = false,
                          bool nanFloats = false) {
  std::vector<Tensor> b;
  for (int i = 0; i < kProg.num_inputs; ++i) {
    const aotc_tensor_desc &d = kProg.inputs[i];
    if (d.role != AOTC_ROLE_USER_INPUT) continue;
    const Tensor &src = fx.get(std::string("input.") + d.name);
    Tensor t = src.clone();
    const int64_t n = t.numel();
    if (d.dtype == AOTC_F32) {
      for (int64_t k = 0; k < n; ++k)
        t.data<float>()[k] = src.data<float>()[k] * (1.0f + 0.05f * rank) + 0.01f * step;
      if (outOfRange && nanFloats) std::fill(t.data<float>(), t.data<float>() + n, NAN);
    } else if (d.dtype == AOTC_F64) {
      for (int64_t k = 0; k < n; ++k) t.data<double>()[k] = src.data<double>()[k] * (1.0 + 0.05 * rank) + 0.01 * step;
    } else if (d.dtype == AOTC_I64 && n > 0) {
      const int64_t sh = (7 * rank + 3 * step) % n;
      for (int64_t k = 0; k < n; ++k)
        t.data<int64_t>()[k] = outOfRange && !nanFloats ? (int64_t)1 << 40 : src.data<int64_t>()[(k + sh) % n];
    }
    b.push_back(std::move(t));
  }
  return b;
}

std::vector<const Tensor *> ptrs(const std::vector<Tensor> &b) {
  std::vector<const Tensor *> p;
  for (const Tensor &t : b) p.push_back(&t);
  return p;
}

int64_t paramHash(const Trainer &t) {
  uint64_t h = 1469598103934665603ull;
  for (int i = 0; i < kProg.num_inputs; ++i) {
    const aotc_tensor_desc &d = kProg.inputs[i];
    if (d.role != AOTC_ROLE_PARAMETER) continue;
    const Tensor &w = t.weight(d.name);
    const auto *p = static_cast<const unsigned char *>(w.data());
    for (int64_t k = 0; k < w.bytes(); ++k) h = (h ^ p[k]) * 1099511628211ull;
  }
  return (int64_t)(h >> 1);
}

void write(const Trainer &t, const Tensor &hashes, const std::vector<std::pair<std::string, double>> &counters,
           const std::string &out) {
  std::vector<std::pair<std::string, Tensor>> keep;
  for (int i = 0; i < kProg.num_inputs; ++i)
    if (kProg.inputs[i].role == AOTC_ROLE_PARAMETER)
      keep.emplace_back(std::string("param.") + kProg.inputs[i].name, t.weight(kProg.inputs[i].name).clone());
  std::vector<aotc::rt::NamedTensorRef> refs{{"hash", &hashes}};
  for (auto &[n, x] : keep) refs.push_back({n, &x});
  std::map<std::string, std::string> meta;
  for (auto &[k, v] : counters) meta[k] = std::to_string(v);
  aotc::rt::writeSafetensors(out, refs, meta);
}

int reference(const SafetensorsFile &w, const SafetensorsFile &fx, int ranks, int steps, const std::string &out) {
  Trainer t(kProg, w);
  t.setHyper("grad_scale", 1.0 / ranks);
  Tensor hashes(aotc::rt::DType::I64, {steps});
  for (int s = 0; s < steps; ++s) {
    for (int r = 0; r < ranks; ++r) {
      auto b = shard(fx, s, r);
      if (r + 1 < ranks) t.accumulate(ptrs(b));
      else t.step(ptrs(b));
    }
    hashes.data<int64_t>()[s] = paramHash(t);
  }
  write(t, hashes, {}, out);
  std::printf("%s: reference, %d shards x %d steps, grad norm %.6g\n", kProg.name, ranks, steps, t.status().gradNorm);
  return 0;
}

int dataParallel(const SafetensorsFile &w, const SafetensorsFile &fx, int steps, const std::string &out,
                 const std::string &fault) {
  aotc::rt::MpiCommunicator comm;
  Trainer t(kProg, w);
  if (fault == "nocomm") {
    // A ZeRO-1 object must refuse to update as one process.
    auto b = shard(fx, 0, 0);
    t.step(ptrs(b));
    return fail("a step without a communicator did not fail");
  }
  t.setCommunicator(comm.table());
  const int rank = comm.rank(), size = comm.size();
  Tensor hashes(aotc::rt::DType::I64, {steps});
  std::vector<int64_t> all((size_t)size);
  const int micro = fault.rfind("micro=", 0) == 0 ? std::stoi(fault.substr(6)) : 1;
  // save=K:PATH: a checkpoint after K steps (every rank calls save()); load=PATH: start from a
  // checkpoint (its step count; earlier steps' hashes stay 0, which compare skips).
  int saveAt = -1, first = 0;
  std::string ckpt;
  if (fault.rfind("save=", 0) == 0) {
    saveAt = std::stoi(fault.substr(5));
    ckpt = fault.substr(fault.find(':') + 1);
  }
  if (fault.rfind("load=", 0) == 0) {
    t.load(fault.substr(5));
    first = (int)t.steps();
  }
  t.setHyper("grad_scale", 1.0 / micro); // the mean over micro-batches; the step divides by the ranks
  for (int s = 0; s < first; ++s) hashes.data<int64_t>()[s] = 0;
  for (int s = first; s < steps; ++s) {
    if (s == saveAt) t.save(ckpt);
    if (s == 3 && rank == 1 && fault == "kill") std::raise(SIGKILL);
    if (s == 3 && rank == 1 && fault == "hang") std::this_thread::sleep_for(std::chrono::seconds(600));
    for (int m = 0; m + 1 < micro; ++m) {
      auto b = shard(fx, s, rank * micro + m);
      t.accumulate(ptrs(b));
    }
    // NaN bytes in the saved area and the train scratch (gradients, buckets, ZeRO-1's staging)
    // must not change a bit of the step.
    t.poisonScratch();
    const bool planted = s == 3 && rank == 1 && (fault == "fail" || fault == "nan");
    auto b = shard(fx, s, rank * micro + micro - 1, planted, fault == "nan");
    t.step(ptrs(b));
    if (fault == "nan" && (s == 3) != t.status().skipped)
      return fail("step " + std::to_string(s) + ": rank " + std::to_string(rank) + (t.status().skipped ? " skipped" : " did not skip"));
    int64_t h = paramHash(t);
    MPI_Allgather(&h, 1, MPI_INT64_T, all.data(), 1, MPI_INT64_T, MPI_COMM_WORLD);
    for (int r = 1; r < size; ++r)
      if (all[(size_t)r] != all[0])
        return fail("step " + std::to_string(s) + ": rank " + std::to_string(r) + "'s parameters differ from rank 0's");
    hashes.data<int64_t>()[s] = h;
  }
  const auto &st = comm.stats();
  // The overlap counters summed over the ranks: which rank finds an all-reduce complete before
  // its wait depends on which one runs ahead (the one behind finds the other's contribution
  // there), not on whether the step overlaps.
  int64_t mine[2] = {st.started, st.completedBeforeWait}, sum[2] = {0, 0};
  MPI_Allreduce(mine, sum, 2, MPI_INT64_T, MPI_SUM, MPI_COMM_WORLD);
  if (rank == 0) {
    write(t, hashes,
          {{"started", (double)sum[0]}, {"completed_before_wait", (double)sum[1]},
           {"wait_seconds", st.waitSeconds}, {"bytes", (double)st.bytes}},
          out);
    std::printf("%s: %d ranks x %d steps, parameters identical on every rank after every step; overlap: %lld "
                "collectives started, %lld completed before the wait, %.3f ms waiting per step\n",
                kProg.name, size, steps, (long long)sum[0], (long long)sum[1],
                1e3 * st.waitSeconds / steps);
  }
  return 0;
}

#ifdef AOTC_DP_NCCL
/// The ranks as threads of this process, each a Trainer with an NcclCommunicator (over the fake
/// libnccl/libcudart of test/nccl: the buckets are host memory, staged through its "device"
/// buffers): the NCCL table drives the real train step. Parameters must be equal on every rank
/// after every step; rank 0's are written as `dp` writes them.
int ncclThreads(const SafetensorsFile &w, const SafetensorsFile &fx, int ranks, int steps, const std::string &out) {
  const aotc::rt::NcclUniqueId id = aotc::rt::NcclCommunicator::uniqueId();
  std::vector<int64_t> hash((size_t)(ranks * steps), 0);
  std::vector<std::string> errors((size_t)ranks);
  Tensor hashes(aotc::rt::DType::I64, {steps});
  std::unique_ptr<Trainer> keep;
  std::vector<std::thread> ts;
  for (int r = 0; r < ranks; ++r)
    ts.emplace_back([&, r] {
      try {
        aotc::rt::NcclCommunicator comm(r, ranks, id);
        auto t = std::make_unique<Trainer>(kProg, w);
        t->setCommunicator(comm.table());
        for (int s = 0; s < steps; ++s) {
          t->poisonScratch();
          auto b = shard(fx, s, r);
          t->step(ptrs(b));
          hash[(size_t)(r * steps + s)] = paramHash(*t);
        }
        t->setCommunicator(nullptr);
        if (r == 0) keep = std::move(t);
      } catch (const std::exception &e) {
        errors[(size_t)r] = e.what();
      }
    });
  for (auto &t : ts) t.join();
  for (int r = 0; r < ranks; ++r)
    if (!errors[(size_t)r].empty()) return fail("rank " + std::to_string(r) + ": " + errors[(size_t)r]);
  for (int s = 0; s < steps; ++s) {
    for (int r = 1; r < ranks; ++r)
      if (hash[(size_t)(r * steps + s)] != hash[(size_t)s])
        return fail("step " + std::to_string(s) + ": rank " + std::to_string(r) + "'s parameters differ from rank 0's");
    hashes.data<int64_t>()[s] = hash[(size_t)s];
  }
  write(*keep, hashes, {}, out);
  std::printf("%s: %d NCCL ranks (threads, fake NCCL) x %d steps, parameters identical on every rank after every step\n",
              kProg.name, ranks, steps);
  return 0;
}
#endif

int compare(const std::string &a, const std::string &b, double tol) {
  SafetensorsFile A = aotc::rt::readSafetensors(a), B = aotc::rt::readSafetensors(b);
  if (tol == 0) {
    const Tensor &ha = A.get("hash"), &hb = B.get("hash");
    for (int64_t s = 0; s < std::min(ha.numel(), hb.numel()); ++s)
      if (ha.data<int64_t>()[s] != hb.data<int64_t>()[s] && ha.data<int64_t>()[s] != 0 && hb.data<int64_t>()[s] != 0)
        return fail("the parameters differ after step " + std::to_string(s) + " (" + a + " vs " + b + ")");
    if (ha.numel() != hb.numel()) return fail("different step counts");
  }
  double worst = 0;
  bool bits = true;
  int n = 0;
  for (auto &[name, x] : A.tensors) {
    if (name.rfind("param.", 0) != 0) continue;
    const Tensor &y = B.get(name);
    if (x.bytes() != y.bytes()) return fail(name + ": shapes differ");
    bits = bits && std::memcmp(x.data(), y.data(), (size_t)x.bytes()) == 0;
    for (int64_t k = 0; k < x.numel(); ++k) {
      const double u = x.at(k), v = y.at(k);
      worst = std::max(worst, std::abs(u - v) / std::max(std::abs(v), 1.0));
    }
    ++n;
  }
  std::printf("compare: %d parameters, %s, max relative difference %.3g (tolerance %g)\n", n,
              bits ? "bit-identical" : "not bit-identical", worst, tol);
  if (tol == 0 && !bits) return fail("the final parameters are not bit-identical");
  if (!(worst <= tol) && tol > 0) return fail("the final parameters differ by more than the tolerance");
  return 0;
}

} // namespace

int main(int argc, char **argv) {
  try {
    const std::string mode = argc > 1 ? argv[1] : "";
    if (mode == "ref" && argc == 7)
      return reference(aotc::rt::readWeights(kProg, argv[2]), aotc::rt::readSafetensors(argv[3]), std::stoi(argv[4]),
                       std::stoi(argv[5]), argv[6]);
    if (mode == "dp" && (argc == 6 || argc == 7))
      return dataParallel(aotc::rt::readWeights(kProg, argv[2]), aotc::rt::readSafetensors(argv[3]), std::stoi(argv[4]),
                          argv[5], argc == 7 ? argv[6] : "");
    if (mode == "compare" && argc == 5) return compare(argv[2], argv[3], std::stod(argv[4]));
#ifdef AOTC_DP_NCCL
    if (mode == "nccl" && argc == 7)
      return ncclThreads(aotc::rt::readWeights(kProg, argv[2]), aotc::rt::readSafetensors(argv[3]), std::stoi(argv[4]),
                         std::stoi(argv[5]), argv[6]);
#endif
    if (mode == "compare-checkpoints" && argc == 4) {
      // Every tensor of two checkpoints bit-identical (the optimizer state in torch's names).
      SafetensorsFile A = aotc::rt::readSafetensors(argv[2]), B = aotc::rt::readSafetensors(argv[3]);
      if (A.tensors.size() != B.tensors.size()) return fail("the checkpoints hold different tensors");
      int state = 0;
      for (auto &[name, x] : A.tensors) {
        const Tensor *y = B.find(name);
        if (!y) return fail(name + " is missing from " + argv[3]);
        if (x.bytes() != y->bytes() || std::memcmp(x.data(), y->data(), (size_t)x.bytes()) != 0)
          return fail(name + " differs");
        state += name.rfind("optimizer.state.", 0) == 0;
      }
      std::printf("compare-checkpoints: %zu tensors (%d optimizer state) bit-identical\n", A.tensors.size(), state);
      return state > 0 ? 0 : fail("no optimizer state in the checkpoints");
    }
    if (mode == "overlap-check" && argc == 4) {
      SafetensorsFile f = aotc::rt::readSafetensors(argv[2]);
      double c = std::stod(f.metadata.at("completed_before_wait")), s = std::stod(f.metadata.at("started"));
      std::printf("overlap: %.0f of %.0f all-reduces completed before the step waited for them\n", c, s);
      return c >= std::stod(argv[3]) ? 0 : fail("fewer than " + std::string(argv[3]) + " completed before the wait");
    }
    std::fprintf(stderr, "usage: %s ref|dp|compare|overlap-check ... (see the top of dp_driver.cpp)\n", argv[0]);
    return 2;
  } catch (const std::exception &e) {
    std::fprintf(stderr, "error: %s\n", e.what());
    return 1;
  }
}
