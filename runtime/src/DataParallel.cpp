//===- DataParallel.cpp - The Trainer's side of data-parallel training -----===//
//
// This file implements Trainer::setCommunicator and what a communicator changes in a
// Trainer (trainer.h, docs/distributed.md): the plan fingerprint compared across ranks, rank
// 0's state broadcast at the start, on load() and (buffers) before each step, and the abort of
// the whole job when a step fails. The all-reduces themselves run inside the object's train
// step (abi.h aotc_comm); this code only uses the communicator's blocking calls.
//===----------------------------------------------------------------------===//
#include "aotc/trainer.h"

#include "Internal.h"

#include <cstdio>
#include <cstring>

namespace aotc::rt {

using detail::progName;

namespace {

/// FNV-1a over bytes.
struct Fnv {
  uint64_t h = 1469598103934665603ull;
  void add(const void *p, size_t n) {
    for (size_t i = 0; i < n; ++i) h = (h ^ static_cast<const unsigned char *>(p)[i]) * 1099511628211ull;
  }
  template <class T> void add(const T &v) { add(&v, sizeof v); }
};

/// What every rank must agree on: the build id, the bucket table, the world size.
uint64_t planFingerprint(const aotc_program &p, int32_t size) {
  Fnv f;
  f.add(p.build_id, std::strlen(p.build_id));
  f.add(size);
  const aotc_train &t = *p.train;
  f.add(t.num_buckets);
  for (int i = 0; i < t.num_buckets; ++i) {
    const aotc_bucket_desc &b = t.buckets[i];
    f.add(b.dtype);
    f.add(b.offset);
    f.add(b.count);
    f.add(b.start_after);
    f.add(b.grads, sizeof(int32_t) * (size_t)b.num_grads);
  }
  return f.h >> 2; // 62 bits: the sum of one value and zeros below never overflows an int64
}

} // namespace

[[noreturn]] void Trainer::abortJob(const std::string &what) const {
  std::string msg = "aotc: error: rank " + std::to_string(comm_->rank) + " of " + std::to_string(comm_->size) + ": " +
                    what + "; aborting every rank of the job (the others would wait for this one forever)";
  std::fprintf(stderr, "%s\n", msg.c_str());
  std::fflush(stderr);
  comm_->abort(comm_->self, 1, msg.c_str());
  std::abort(); // abort() must not return
}

void Trainer::broadcastFromRank0(bool everything) {
  const aotc_program &p = *program_;
  auto bcast = [&](void *data, int64_t bytes, const std::string &what) {
    if (bytes <= 0) return;
    if (comm_->broadcast(comm_->self, data, bytes, 0) != 0)
      abortJob("broadcasting " + what + " from rank 0 failed: " + comm_->error(comm_->self));
  };
  for (int i = 0; i < p.num_inputs; ++i) {
    const aotc_tensor_desc &d = p.inputs[i];
    const bool buffer = d.role == AOTC_ROLE_BUFFER;
    // The RNG state is each rank's own (its Trainer's seed): ranks draw independent masks.
    if (buffer || (everything && d.role == AOTC_ROLE_PARAMETER))
      bcast(in_[i], d.bytes, "'" + std::string(d.name) + "'");
  }
  if (!everything) return;
  bcast(state_.data(), state_.size(), "the optimizer state");
  bcast(hyper_.data(), (int64_t)(hyper_.size() * sizeof(double)), "the hyperparameters");
}

void Trainer::setCommunicator(const aotc_comm *comm) {
  const aotc_program &p = *program_;
  const std::string name = progName(p);
  if (!comm) {
    if (comm_ && p.train->set_comm) p.train->set_comm(context_.get(), nullptr);
    comm_ = nullptr;
    return;
  }
  if (aotc_abi_minor(p.abi_version) < 1 || !p.train->set_comm)
    throw RuntimeError(name + ": data-parallel training needs an object compiled with --data-parallel "
                              "(docs/distributed.md)",
                       AOTC_RT_ERROR_STATE);
  if (comm->size < 1 || comm->rank < 0 || comm->rank >= comm->size)
    throw RuntimeError(name + ": the communicator says rank " + std::to_string(comm->rank) + " of " +
                       std::to_string(comm->size));
  if (accumulating())
    throw RuntimeError(name + ": setCommunicator in the middle of a gradient accumulation (call step() first)",
                       AOTC_RT_ERROR_STATE);
  // Every rank's fingerprint, gathered by a sum (slot r holds rank r's).
  std::vector<int64_t> fp((size_t)comm->size, 0);
  fp[(size_t)comm->rank] = (int64_t)planFingerprint(p, comm->size);
  if (comm->allreduce(comm->self, fp.data(), comm->size, AOTC_I64) != 0)
    throw RuntimeError(name + ": comparing the plan across ranks failed: " + comm->error(comm->self));
  std::string differ;
  for (int r = 1; r < comm->size; ++r)
    if (fp[(size_t)r] != fp[0]) differ += (differ.empty() ? "" : ", ") + std::to_string(r);
  if (!differ.empty()) {
    char mine[32];
    std::snprintf(mine, sizeof mine, "%016llx", (unsigned long long)fp[(size_t)comm->rank]);
    throw RuntimeError(name + " (rank " + std::to_string(comm->rank) + "): the data-parallel plan of rank" +
                           (differ.find(',') == std::string::npos ? " " : "s ") + differ +
                           " differs from rank 0's (a fingerprint of the build id " + p.build_id +
                           ", the all-reduce buckets and the world size; this rank's is " + mine +
                           "): every rank must run the same compiled object",
                       AOTC_RT_ERROR_STATE);
  }
  if (p.train->set_comm(context_.get(), comm) != 0)
    throw RuntimeError(name + ": set_comm refused the context", AOTC_RT_ERROR_ABI);
  comm_ = comm;
  broadcastFromRank0(true);
}

} // namespace aotc::rt
