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

#include <algorithm>
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

int Trainer::zeroWorld() const {
  const aotc_program &p = *program_;
  return p.train && aotc_abi_minor(p.abi_version) >= 2 ? p.train->zero1_world : 0;
}

namespace {

/// One contiguous run of a parameter held by one rank's ZeRO-1 shard: elements
/// [paramElem, paramElem + n) of the parameter are elements [shardElem, ...) of the shard.
struct ShardRun {
  int64_t paramElem, shardElem, n;
};

/// The runs of parameter input `input` in rank `rank`'s shard (abi.h aotc_train::zero1_world:
/// each bucket's gradients 64-byte aligned in order, rank r owning [r count / N, (r+1) count / N)
/// of it, the buckets' shares end to end in the shard).
std::vector<ShardRun> shardRuns(const aotc_program &p, int input, int rank) {
  const aotc_train &t = *p.train;
  const int64_t world = t.zero1_world;
  std::vector<ShardRun> runs;
  int64_t base = 0;
  for (int b = 0; b < t.num_buckets; ++b) {
    const aotc_bucket_desc &bk = t.buckets[b];
    const int64_t isz = itemSize(dtypeFromAbi(bk.dtype)), share = bk.count / world;
    int64_t o = 0; // the gradient's first element in the bucket
    for (int g = 0; g < bk.num_grads; ++g) {
      const aotc_tensor_desc &gd = p.grads[bk.grads[g]];
      if ((int)p.grad_input_index[bk.grads[g]] == input) {
        const int64_t lo = std::max(o, rank * share), hi = std::min(o + gd.numel, (rank + 1) * share);
        if (lo < hi) runs.push_back({lo - o, base + lo - rank * share, hi - lo});
      }
      o += (std::max<int64_t>(gd.bytes, 1) + 63) / 64 * 64 / isz;
    }
    base += share;
  }
  return runs;
}

} // namespace

std::vector<Trainer::OptimizerTensor> Trainer::optimizerTensors() const {
  const aotc_program &p = *program_;
  const aotc_train &t = *p.train;
  std::vector<OptimizerTensor> out;
  for (int k = 0; k < t.num_params; ++k) {
    const int i = t.param_inputs[k];
    for (int s = 0; s < t.num_state; ++s) {
      const aotc_state_desc &d = t.state[s];
      if (d.kind == AOTC_STATE_OPTIMIZER && d.param_input == i) out.push_back({d.name, i, &d, nullptr});
      if (d.kind == AOTC_STATE_SHARD && zeroWorld() > 0 && *d.key)
        out.push_back({"optimizer.state." + std::string(p.inputs[i].name) + "." + d.key, i, nullptr, &d});
    }
  }
  return out;
}

std::vector<unsigned char> Trainer::gatherShardState(const aotc_state_desc &sd) const {
  std::vector<unsigned char> all((size_t)(comm_->size * sd.bytes));
  int64_t req = -1;
  if (comm_->allgather_start(comm_->self, state_.data() + sd.offset, all.data(), sd.numel, sd.dtype, &req) != 0 ||
      comm_->wait(comm_->self, req) != 0)
    abortJob("gathering the optimizer state '" + std::string(sd.name) + "' failed: " + comm_->error(comm_->self));
  return all;
}

Tensor Trainer::cutShard(const OptimizerTensor &o, const std::vector<unsigned char> &all) const {
  const aotc_program &p = *program_;
  const aotc_state_desc &sd = *o.shard;
  const aotc_tensor_desc &pd = p.inputs[o.paramInput];
  const int world = comm_->size;
  const int64_t isz = sd.bytes / std::max<int64_t>(sd.numel, 1);
  Tensor t(dtypeFromAbi(pd.dtype), std::vector<int64_t>(pd.shape, pd.shape + pd.rank));
  auto *dst = static_cast<unsigned char *>(t.data());
  for (int r = 0; r < world; ++r)
    for (const ShardRun &run : shardRuns(p, o.paramInput, r))
      std::memcpy(dst + run.paramElem * isz, all.data() + r * sd.bytes + run.shardElem * isz, (size_t)(run.n * isz));
  return t;
}

void Trainer::scatterShard(const OptimizerTensor &o, const Tensor &full) {
  const aotc_state_desc &sd = *o.shard;
  const int64_t isz = sd.bytes / std::max<int64_t>(sd.numel, 1);
  const auto *src = static_cast<const unsigned char *>(full.data());
  for (const ShardRun &run : shardRuns(*program_, o.paramInput, comm_->rank))
    std::memcpy(state_.data() + sd.offset + run.shardElem * isz, src + run.paramElem * isz, (size_t)(run.n * isz));
}

void Trainer::broadcastShards(const SafetensorsFile *ck) {
  // Before the first step a checkpoint has no optimizer state (torch's is empty).
  int32_t has = 0;
  if (ck)
    for (auto &[n, x] : ck->tensors) has |= n.rfind("optimizer.state.", 0) == 0;
  if (comm_->broadcast(comm_->self, &has, sizeof has, 0) != 0)
    abortJob("broadcasting the checkpoint's optimizer state failed: " + std::string(comm_->error(comm_->self)));
  const aotc_program &p = *program_;
  for (int s = 0; s < p.train->num_state; ++s)
    if (p.train->state[s].kind == AOTC_STATE_SHARD)
      std::memset(state_.data() + p.train->state[s].offset, 0, (size_t)p.train->state[s].bytes);
  if (!has) return;
  for (const OptimizerTensor &o : optimizerTensors()) {
    const aotc_tensor_desc &pd = p.inputs[o.paramInput];
    Tensor full = ck ? ck->get(o.name).clone() : Tensor(dtypeFromAbi(pd.dtype), std::vector<int64_t>(pd.shape, pd.shape + pd.rank));
    if (comm_->broadcast(comm_->self, full.data(), full.bytes(), 0) != 0)
      abortJob("broadcasting the optimizer state '" + o.name + "' failed: " + comm_->error(comm_->self));
    scatterShard(o, full);
  }
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
  if (zeroWorld() == 0) {
    bcast(state_.data(), state_.size(), "the optimizer state");
  } else {
    // ZeRO-1: a shard is its rank's own; the rest (the step count, accumulators) is rank 0's.
    const aotc_train &t = *p.train;
    for (int s = 0; s < t.num_state; ++s)
      if (t.state[s].kind != AOTC_STATE_SHARD)
        bcast(state_.data() + t.state[s].offset, t.state[s].bytes, "'" + std::string(t.state[s].name) + "'");
  }
  bcast(hyper_.data(), (int64_t)(hyper_.size() * sizeof(double)), "the hyperparameters");
}

void Trainer::setCommunicator(const aotc_comm *comm) {
  const aotc_program &p = *program_;
  const std::string name = progName(p);
  const int zero = zeroWorld();
  aotc_set_comm_fn setComm = zero ? p.train->set_comm_zero1 : aotc_abi_minor(p.abi_version) >= 1 ? p.train->set_comm : nullptr;
  if (!comm) {
    if (comm_ && setComm) setComm(context_.get(), nullptr);
    comm_ = nullptr;
    return;
  }
  if (!setComm)
    throw RuntimeError(name + ": data-parallel training needs an object compiled with --data-parallel "
                              "(docs/distributed.md)",
                       AOTC_RT_ERROR_STATE);
  if (zero && (!comm->reduce_scatter_start || !comm->allgather_start))
    throw RuntimeError(name + ": a ZeRO-1 object needs a communicator table with reduce_scatter_start and "
                              "allgather_start (abi.h 10.2; build the table with this abi.h)",
                       AOTC_RT_ERROR_STATE);
  if (zero && shardRank_ >= 0 && shardRank_ != comm->rank && steps() > 0)
    throw RuntimeError(name + ": this trainer's optimizer state is rank " + std::to_string(shardRank_) +
                           "'s ZeRO-1 shard; the communicator makes it rank " + std::to_string(comm->rank) +
                           " (save() and load() to move state between rank layouts)",
                       AOTC_RT_ERROR_STATE);
  if (zero && comm->size != zero)
    throw RuntimeError(name + ": compiled with --data-parallel=zero1 --world-size=" + std::to_string(zero) +
                           " (its optimizer state is sharded over " + std::to_string(zero) +
                           " ranks), but the communicator has " + std::to_string(comm->size) +
                           ": run it on " + std::to_string(zero) + " ranks or recompile",
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
  if (setComm(context_.get(), comm) != 0)
    throw RuntimeError(name + ": set_comm refused the context", AOTC_RT_ERROR_ABI);
  comm_ = comm;
  if (zero) shardRank_ = comm->rank;
  broadcastFromRank0(true);
}

} // namespace aotc::rt
