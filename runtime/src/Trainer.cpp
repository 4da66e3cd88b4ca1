//===- Trainer.cpp - The train step's state, step loop and checkpoints -----===//
//
// This file implements Trainer (trainer.h). The constructor allocates everything a step
// touches; run() only fills the user inputs' slots of in[] and calls <name>_train_step.
// Checkpoints follow torch's names (docs/training.md "Checkpoints"): a parameter or buffer
// under its FQN, optimizer.state.<fqn>.<key> and, for Adam/AdamW, optimizer.state.<fqn>.step;
// __metadata__ holds JSON: param_groups (torch.optim's state_dict() spelling), hyper (every
// run-time hyperparameter, exactly), rng ({seed, offset}), step, build_id, optimizer.
//===----------------------------------------------------------------------===//
#include "aotc/trainer.h"

#include "Internal.h"

#include <nlohmann/json.hpp>

#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>

namespace aotc::rt {

using detail::progName;

namespace {

std::vector<int64_t> shapeOf(const aotc_state_desc &d) { return std::vector<int64_t>(d.shape, d.shape + d.rank); }

/// A double as the shortest text that reads back the same ("1e-09", "0.9", "inf").
std::string num(double v) {
  char b[32];
  for (int prec = 6; prec <= 17; ++prec) {
    std::snprintf(b, sizeof b, "%.*g", prec, v);
    if (std::strtod(b, nullptr) == v || std::isnan(v)) break;
  }
  return b;
}

} // namespace

void Trainer::init(const aotc_program &program) {
  context_ = detail::openProgram(program, "Trainer"); // the ABI version first: older descriptors have no `train`
  if (!program.train || !program.train->train_step)
    throw RuntimeError("aotc runtime: program '" + progName(program) +
                           "' has no train step: compile it with --optimizer=sgd|adam|adamw[:...] (docs/training.md)",
                       AOTC_RT_ERROR_ABI);
  owned_.resize(program.num_inputs);
  in_.assign(program.num_inputs, nullptr);
  for (int i = 0; i < program.num_inputs; ++i)
    if (program.inputs[i].role == AOTC_ROLE_USER_INPUT) userInputs_.push_back(i);
  for (int k = 0; k < program.num_outputs; ++k) {
    outputs_.push_back(Tensor::like(program.outputs[k]));
    out_.push_back(outputs_.back().data());
  }
  const aotc_train &t = *program.train;
  for (int h = 0; h < t.num_hyper; ++h) hyper_.push_back(t.hyper[h].value);
  saved_ = AlignedBuffer(program.saved_bytes);
  scratch_ = AlignedBuffer(t.scratch_bytes);
  state_ = AlignedBuffer(t.state_bytes); // zeroed: torch's zero exp_avg, step 0
  if (const aotc_state_desc *d = findState("status.nonfinite")) nonfiniteOffset_ = d->offset;
  detail::pinBlasToOneThread();
}

Trainer::Trainer(const aotc_program &program, const SafetensorsFile &weights, uint64_t seed)
    : program_(&program), seed_(seed) {
  init(program);
  const std::string name = progName(program);
  for (int i = 0; i < program.num_inputs; ++i) {
    const aotc_tensor_desc &d = program.inputs[i];
    if (d.role == AOTC_ROLE_USER_INPUT) continue;
    if (d.role == AOTC_ROLE_RNG_STATE) {
      owned_[i] = rngState(seed);
    } else {
      const Tensor *t = weights.find(d.name);
      if (!t) throw RuntimeError(name + ": the weights have no tensor '" + d.name + "' (" + descTypeString(d) + ")");
      if (!t->matches(d))
        throw RuntimeError(name + ": weight '" + d.name + "' is " + t->typeString() + ", the program expects " +
                           descTypeString(d));
      owned_[i] = t->clone();
    }
    in_[i] = owned_[i].data();
  }
}

Trainer::Trainer(const aotc_program &program, std::span<const aotc_rt_tensor> weights, uint64_t seed)
    : program_(&program), borrowed_(true), seed_(seed) {
  init(program);
  if ((int64_t)weights.size() != program.num_inputs)
    throw RuntimeError(progName(program) + ": a trainer takes " + std::to_string(program.num_inputs) +
                       " inputs' buffers (NULL for user inputs), got " + std::to_string(weights.size()));
  for (int i = 0; i < program.num_inputs; ++i) {
    const aotc_tensor_desc &d = program.inputs[i];
    if (d.role == AOTC_ROLE_USER_INPUT) {
      if (weights[i].data)
        throw RuntimeError(progName(program) + ": " + detail::inputWhat(program, i) +
                           " is a user input: give it to each step, not to the trainer (data NULL)");
      continue;
    }
    if (d.role == AOTC_ROLE_RNG_STATE && !weights[i].data) {
      owned_[i] = rngState(seed);
      in_[i] = owned_[i].data();
      continue;
    }
    detail::checkTensor(program, d, weights[i], [&] { return detail::inputWhat(program, i); });
    in_[i] = weights[i].data;
  }
}

void Trainer::bind(int i, const aotc_rt_tensor &weight) {
  const aotc_program &p = *program_;
  if (!borrowed_)
    throw RuntimeError(progName(p) + ": this trainer owns its weights (made from a weights file); only a trainer made "
                                     "from the caller's buffers rebinds them",
                       AOTC_RT_ERROR_STATE);
  if (i < 0 || i >= p.num_inputs)
    throw RuntimeError(progName(p) + ": no input " + std::to_string(i) + " (the program has " +
                       std::to_string(p.num_inputs) + ")");
  if (userInputDesc(i))
    throw RuntimeError(progName(p) + ": " + detail::inputWhat(p, i) + " is a user input: give it to each step");
  detail::checkTensor(p, p.inputs[i], weight, [&] { return detail::inputWhat(p, i); });
  in_[i] = weight.data;
}

double Trainer::call(uint32_t flags) {
  const aotc_program &p = *program_;
  if ((flags & AOTC_STEP_ACCUMULATE) && !p.train->grad_accumulation)
    throw RuntimeError(progName(p) + ": accumulate() needs an object compiled with --grad-accumulation");
  if (!comm_ && !(flags & AOTC_STEP_ACCUMULATE) && zeroWorld() > 0)
    throw RuntimeError(progName(p) + ": compiled with --data-parallel=zero1 --world-size=" + std::to_string(zeroWorld()) +
                           ": its optimizer state is one rank's shard, so it updates only with a communicator of that "
                           "many ranks (setCommunicator; docs/distributed.md)",
                       AOTC_RT_ERROR_STATE);
  // Data parallel: rank 0's buffers (batch-norm statistics) before every update step, as DDP.
  if (comm_ && !(flags & AOTC_STEP_ACCUMULATE)) broadcastFromRank0(false);
  int rc = p.train->train_step(context_.get(), in_.data(), out_.data(), saved_.data(), state_.data(), hyper_.data(),
                               scratch_.data(), flags);
  if (rc != 0) {
    EntryPointError e = detail::entryPointError(p, "train_step", rc, scratch_.data(), scratch_.size(), context_.get());
    if (!comm_) throw e;
    // The other ranks may be inside an all-reduce this rank will never join.
    abortJob(e.what() + (rc == AOTC_ERROR_COMM ? ": " + std::string(comm_->error(comm_->self)) : std::string()));
  }
  ++calls_;
  double loss = outputs_[0].at(0);
  // A micro-batch only computes its loss; an update also reports the gradient norm's check.
  // Data parallel: an update decides on the all-reduced norm alone (status.nonfinite, the same
  // on every rank), so that no rank raises while the others go on.
  const bool update = !(flags & AOTC_STEP_ACCUMULATE);
  const bool statusBad = update && nonfiniteOffset_ >= 0 && state_.data()[nonfiniteOffset_] != 0;
  bool bad = comm_ && update ? statusBad : !std::isfinite(loss) || statusBad;
  if (bad) reportNonfinite(loss, flags);
  return loss;
}

void Trainer::setOnNonfinite(OnNonfinite policy) {
  if (policy == OnNonfinite::Skip && !program_->train->skip_nonfinite)
    throw RuntimeError(progName(*program_) + ": skipping non-finite steps needs an object compiled with "
                                             "--skip-nonfinite (the step updates in place: only the compiled step "
                                             "can leave the parameters untouched)");
  onNonfinite_ = policy;
}

void Trainer::reportNonfinite(double loss, uint32_t flags) {
  ++nonfiniteSteps_;
  if (onNonfinite_ == OnNonfinite::Skip || (onNonfinite_ == OnNonfinite::Warn && nonfiniteSteps_ > 1)) return;
  const bool micro = flags & AOTC_STEP_ACCUMULATE;
  const bool skipped = !micro && program_->train->skip_nonfinite;
  char what[256];
  if (micro)
    std::snprintf(what, sizeof what, "call %lld (a micro-batch): the loss is %g", (long long)calls_, loss);
  else
    std::snprintf(what, sizeof what, "call %lld (a step): the loss is %g, the gradient norm %g", (long long)calls_,
                  loss, status().gradNorm);
  std::string msg = progName(*program_) + ": " + what +
                    (micro ? std::string("; the next update will see this micro-batch's gradients")
                     : skipped ? std::string("; the update was skipped (--skip-nonfinite)")
                               : std::string("; the update was applied (compile with --skip-nonfinite to skip such steps)"));
  if (onNonfinite_ == OnNonfinite::Raise) throw RuntimeError(msg, AOTC_RT_ERROR_NONFINITE);
  std::fprintf(stderr, "aotc: warning: %s; later non-finite steps are counted, not reported "
                       "(Trainer::nonfiniteSteps; setOnNonfinite: warn, raise, skip)\n",
               msg.c_str());
}

double Trainer::run(std::span<const Tensor *const> inputs, uint32_t flags) {
  detail::bindUserInputs(*program_, userInputs_, inputs, in_, "a step takes");
  return call(flags);
}

double Trainer::step(std::span<const aotc_rt_tensor> inputs, uint32_t flags) {
  detail::bindUserInputs(*program_, userInputs_, inputs, in_, "a step takes");
  return call(flags);
}

double Trainer::step(std::span<const Tensor *const> inputs) { return run(inputs, 0); }

double Trainer::accumulate(std::span<const Tensor *const> inputs) { return run(inputs, AOTC_STEP_ACCUMULATE); }

bool Trainer::accumulating() const {
  const aotc_state_desc *c = findState("accum.count");
  return c && *reinterpret_cast<const float *>(state_.data() + c->offset) != 0;
}

const aotc_state_desc *Trainer::findState(const std::string &name) const {
  const aotc_train &t = *program_->train;
  for (int s = 0; s < t.num_state; ++s)
    if (name == t.state[s].name) return &t.state[s];
  return nullptr;
}

Tensor Trainer::stateTensor(const std::string &name) const {
  const aotc_state_desc *d = findState(name);
  if (!d) throw RuntimeError(progName(*program_) + ": no state tensor '" + name + "'");
  return Tensor::fromBytes(dtypeFromAbi(d->dtype), shapeOf(*d), state_.data() + d->offset, d->bytes);
}

Trainer::Status Trainer::status() const {
  Status s;
  if (const aotc_state_desc *d = findState("status.grad_norm"))
    s.gradNorm = d->dtype == AOTC_F64 ? *reinterpret_cast<const double *>(state_.data() + d->offset)
                                      : *reinterpret_cast<const float *>(state_.data() + d->offset);
  if (const aotc_state_desc *d = findState("status.nonfinite")) s.nonfinite = state_.data()[d->offset] != 0;
  s.skipped = s.nonfinite && program_->train->skip_nonfinite;
  return s;
}

int64_t Trainer::steps() const {
  const aotc_state_desc *d = findState("optimizer.step");
  return d ? (int64_t)*reinterpret_cast<const float *>(state_.data() + d->offset) : 0;
}

int Trainer::hyperIndex(const std::string &name) const {
  const aotc_train &t = *program_->train;
  for (int h = 0; h < t.num_hyper; ++h)
    if (name == t.hyper[h].name) return h;
  std::string known;
  for (int h = 0; h < t.num_hyper; ++h) known += std::string(known.empty() ? "" : ", ") + t.hyper[h].name;
  throw RuntimeError(progName(*program_) + ": no run-time hyperparameter '" + name + "' (this object has: " + known +
                     "; " + t.config + ")");
}

void Trainer::setHyper(const std::string &name, double value) {
  int h = hyperIndex(name);
  const aotc_hyper_desc &d = program_->train->hyper[h];
  bool bounded = d.max >= d.min;
  bool ok = std::isfinite(value) && value >= d.min && (!bounded || (d.max_open ? value < d.max : value <= d.max));
  if (!ok)
    throw RuntimeError(progName(*program_) + ": " + name + " = " + num(value) + " is outside [" + num(d.min) + ", " +
                       (bounded ? num(d.max) : std::string("inf")) + (d.max_open ? ")" : "]"));
  hyper_[h] = value;
}

double Trainer::hyper(const std::string &name) const { return hyper_[hyperIndex(name)]; }

const Tensor &Trainer::weight(const std::string &fqn) const {
  if (borrowed_)
    throw RuntimeError(progName(*program_) + ": weight('" + fqn + "'): this trainer borrows its weights (read them in "
                                             "the caller's buffers)",
                       AOTC_RT_ERROR_STATE);
  for (int i = 0; i < program_->num_inputs; ++i)
    if (aotc_role_is_weight(program_->inputs[i].role) && fqn == program_->inputs[i].name) return owned_[i];
  throw RuntimeError(progName(*program_) + ": no parameter, buffer or constant '" + fqn + "'");
}

Tensor &Trainer::weight(const std::string &fqn) { return const_cast<Tensor &>(std::as_const(*this).weight(fqn)); }

void Trainer::poisonScratch() {
  saved_.fill(0xFF);
  scratch_.fill(0xFF);
}

} // namespace aotc::rt
