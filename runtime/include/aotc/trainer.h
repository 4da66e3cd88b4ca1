//===- trainer.h - A compiled training step with its state -------*- C++ -*-===//
//
// aotc::rt::Trainer runs <name>_train_step (abi.h, ABI 9: an object compiled with
// `aotc --optimizer=...`) in a loop. It owns everything that lives from step to step:
//  * the model's parameters, buffers, lifted constants and RNG state (the program's inputs
//    other than user inputs), initialised from the weights file of the same aotc run;
//  * the optimizer's state area (abi.h aotc_state_desc: exp_avg, ..., the step count);
//  * the run-time hyperparameters (learning rate first), the saved area, the train scratch
//    (which holds the gradients) and the outputs.
// All are allocated in the constructor: step() performs no heap allocation and no memset
// (checked in the test suite with an allocation-counting LD_PRELOAD interposer, docs/training.md).
//
//   #include "model.h"                 // compiled with --optimizer=adamw:lr=1e-3
//   #include "aotc/trainer.h"
//   aotc::rt::Trainer t(model_program, aotc::rt::readWeights(model_program, "model.weights.safetensors"));
//   for (...) {
//     t.setLr(schedule(step));          // run-time hyperparameters: no recompile
//     double loss = t.step({&x, &target});   // user inputs in program order
//     if (t.status().nonfinite) ...     // the loss or the gradient norm was NaN/inf
//   }
//   t.save("ckpt.safetensors");         // torch-compatible names (docs/training.md)
//
// Errors throw aotc::rt::RuntimeError (runtime.h) with a complete message.
//===----------------------------------------------------------------------===//
#pragma once

#include "aotc/runtime.h"
#include "aotc/safetensors.h"

#include <deque>
#include <initializer_list>
#include <span>
#include <string>
#include <vector>

namespace aotc::rt {

class Trainer {
public:
  /// Throws RuntimeError when the program has no train step (compiled without --optimizer),
  /// another ABI version, or `weights` lacks a weight the program reads (names, dtypes and
  /// shapes as readWeights checks them). `seed`: the RNG state {seed, 0} of a program that draws
  /// random numbers (dropout).
  Trainer(const aotc_program &program, const SafetensorsFile &weights, uint64_t seed = 0);
  /// A trainer that borrows its weights: weights[i] for every program input, in order (data
  /// NULL for user inputs; parameters, buffers and constants given, checked as capi.h says;
  /// the RNG state may be NULL: then owned, {seed, 0}). Each step updates them in place; they
  /// must outlive the trainer (what the Python module's parameters are).
  Trainer(const aotc_program &program, std::span<const aotc_rt_tensor> weights, uint64_t seed = 0);
  Trainer(const Trainer &) = delete;
  Trainer &operator=(const Trainer &) = delete;

  const aotc_program &program() const { return *program_; }
  const aotc_train &train() const { return *program_->train; }

  /// The user inputs step() takes, in program order (abi.h role AOTC_ROLE_USER_INPUT).
  const std::vector<int> &userInputs() const { return userInputs_; }
  /// The buffer input i is bound to (owned or borrowed weight, RNG state); nullptr for a user input.
  void *inputData(int i) const { return userInputDesc(i) ? nullptr : in_.at(i); }
  /// True for a trainer made from borrowed buffers.
  bool borrowsWeights() const { return borrowed_; }
  /// Rebinds weight i of a borrowing trainer to another buffer (checked; RuntimeError of kind
  /// AOTC_RT_ERROR_STATE for a trainer that owns its weights).
  void bind(int i, const aotc_rt_tensor &weight);

  /// One training step on one batch: forward, backward, update. `inputs` are the user inputs
  /// in program order (dtype and shape as the descriptors; RuntimeError naming a mismatch).
  /// Returns the loss (output 0), as double. Allocates nothing.
  double step(std::span<const Tensor *const> inputs);
  double step(std::initializer_list<const Tensor *> inputs) { return step(std::span(inputs.begin(), inputs.size())); }
  /// step() / accumulate() (flags AOTC_STEP_ACCUMULATE) on caller-owned buffers (capi.h checks).
  double step(std::span<const aotc_rt_tensor> inputs, uint32_t flags);
  /// One micro-batch: forward and backward, the gradients added to the accumulators; the next
  /// step() updates with the sum of its own and the accumulated gradients (as torch's
  /// p.grad accumulation before optimizer.step()). Needs an object compiled with
  /// --grad-accumulation. Returns the micro-batch's loss.
  double accumulate(std::span<const Tensor *const> inputs);
  double accumulate(std::initializer_list<const Tensor *> inputs) {
    return accumulate(std::span(inputs.begin(), inputs.size()));
  }

  /// What a step (or micro-batch) whose loss or total gradient norm is NaN or infinite does
  /// (docs/training.md "Non-finite steps"). Whether such a step updates the parameters is the
  /// object's choice (--skip-nonfinite); this is only how the trainer reports it.
  enum class OnNonfinite {
    Warn,  ///< Default: one warning on stderr for the first such step (its number, the loss,
           ///< the gradient norm, whether the update was applied); later ones only counted.
    Raise, ///< RuntimeError of kind AOTC_RT_ERROR_NONFINITE after the step (the update was
           ///< applied unless the object was compiled with --skip-nonfinite).
    Skip,  ///< Counted silently. Needs an object compiled with --skip-nonfinite (the step then
           ///< leaves parameters and state untouched); RuntimeError otherwise.
  };
  void setOnNonfinite(OnNonfinite policy);
  OnNonfinite onNonfinite() const { return onNonfinite_; }
  /// Steps and micro-batches so far whose loss or gradient norm was not finite.
  int64_t nonfiniteSteps() const { return nonfiniteSteps_; }

  /// What the last update reported (abi.h AOTC_STATE_STATUS).
  struct Status {
    double gradNorm = 0;    ///< Total 2-norm of the gradients before clipping.
    bool nonfinite = false; ///< The loss or gradNorm was NaN or infinite.
    bool skipped = false;   ///< nonfinite with --skip-nonfinite: nothing was updated.
  };
  Status status() const;
  /// Updates done so far (the optimizer's step count; skipped steps do not count).
  int64_t steps() const;
  /// Micro-batches are in the accumulators (the next step() updates with them).
  bool accumulating() const;

  /// Run-time hyperparameters (names as abi.h aotc_hyper_desc). RuntimeError for a name the
  /// object does not have or a value outside its range.
  void setLr(double lr) { setHyper("lr", lr); }
  double lr() const { return hyper("lr"); }
  void setHyper(const std::string &name, double value);
  double hyper(const std::string &name) const;

  /// Output k of the last step (out[k]; 0 is the loss).
  const Tensor &output(int k) const { return outputs_.at(k); }
  /// The current value of a parameter, buffer or constant by FQN (RuntimeError when absent, or
  /// for a trainer that borrows its weights: read them where they are).
  const Tensor &weight(const std::string &fqn) const;
  Tensor &weight(const std::string &fqn);
  /// A state tensor by its aotc_state_desc name ("optimizer.state.fc1.weight.exp_avg").
  Tensor stateTensor(const std::string &name) const;

  /// Checkpoint (docs/training.md "Checkpoints"): parameters and buffers under their FQNs,
  /// `optimizer.state.<fqn>.<key>` and `.step` (f32 0-d), and as __metadata__ JSON the
  /// param_groups (torch.optim's state_dict() spelling), the RNG seed/offset and the build id.
  /// Written atomically (a temporary file beside `path`, then rename). RuntimeError in the
  /// middle of a gradient accumulation.
  void save(const std::string &path) const;
  /// Restores a checkpoint written by save() (or tools/aotc_checkpoint.py from torch). Every
  /// tensor must be present with this program's dtype and shape: RuntimeError naming the
  /// first that is not (another model's checkpoint), before anything is changed.
  void load(const std::string &path);
  /// The tensors save() writes, with the metadata (for tools that convert checkpoints).
  SafetensorsFile checkpoint() const;
  void restore(const SafetensorsFile &ckpt, const std::string &what);

  /// Data parallel (docs/distributed.md; an object compiled with --data-parallel): hands `comm`
  /// (abi.h aotc_comm, e.g. aotc::rt::MpiCommunicator::table()) to the train step, which then
  /// all-reduces the gradients over comm's ranks. Collective: every rank calls it, first
  /// comparing a fingerprint of the plan (build id, buckets, world size) across ranks — a
  /// mismatch throws RuntimeError naming the ranks that differ from rank 0, on every rank —
  /// then broadcasting rank 0's parameters, buffers, optimizer state and hyperparameters to
  /// all (not the RNG state: give each rank its own seed for independent dropout masks). Each later step() first broadcasts rank 0's buffers (batch-norm
  /// statistics; DDP's broadcast_buffers). A step that fails with a communicator prints the
  /// error and aborts the whole job (comm->abort): the other ranks would wait for it forever.
  /// save() writes on rank 0 only; load() reads on rank 0 and broadcasts. NULL detaches. The
  /// table must outlive the trainer.
  /// ZeRO-1 (an object compiled with --data-parallel=zero1 --world-size=N): comm must have
  /// exactly N ranks and every update needs it; each rank keeps only its shard of the optimizer
  /// state (never broadcast). save() and checkpoint() are then collective (every rank calls
  /// them: the shards are all-gathered, rank 0 writes torch's per-parameter tensors), and load()
  /// needs the communicator set (rank 0 reads, every rank takes its shard).
  void setCommunicator(const aotc_comm *comm);
  const aotc_comm *communicator() const { return comm_; }

  /// Test hook: fills the saved area, the train scratch (which holds the gradients) with 0xFF
  /// bytes (NaN): a step must give the same bits after it (docs/training.md).
  void poisonScratch();

private:
  friend class Evaluator;
  double run(std::span<const Tensor *const> inputs, uint32_t flags);
  double call(uint32_t flags);
  void init(const aotc_program &program);
  bool userInputDesc(int i) const { return program_->inputs[i].role == AOTC_ROLE_USER_INPUT; }
  int hyperIndex(const std::string &name) const;
  const aotc_state_desc *findState(const std::string &name) const;

  const aotc_program *program_;
  ProgramContext context_;
  std::vector<Tensor> owned_;        ///< Per input: the owned tensor (empty for user inputs and borrowed weights).
  bool borrowed_ = false;
  std::vector<int> userInputs_;
  std::vector<void *> in_, out_;
  std::vector<Tensor> outputs_;
  std::vector<double> hyper_;
  AlignedBuffer saved_, scratch_, state_;
  uint64_t seed_ = 0;
  OnNonfinite onNonfinite_ = OnNonfinite::Warn;
  int64_t calls_ = 0, nonfiniteSteps_ = 0;
  int64_t nonfiniteOffset_ = -1; ///< state offset of status.nonfinite (-1: none)
  const aotc_comm *comm_ = nullptr;
  int shardRank_ = -1; ///< ZeRO-1: the rank whose shard state_ holds (-1: none yet).
  void broadcastFromRank0(bool everything);
  /// ZeRO-1: the world size the object was compiled for (abi.h aotc_train::zero1_world), else 0.
  int zeroWorld() const;
  /// One optimizer state tensor as torch.optim has it ("optimizer.state.<fqn>.<key>"): where
  /// it lives in the state area (`resident`, one tensor) or, ZeRO-1, spread over the ranks'
  /// shard `shard` (an AOTC_STATE_SHARD descriptor).
  struct OptimizerTensor {
    std::string name;
    int paramInput = -1;
    const aotc_state_desc *resident = nullptr, *shard = nullptr;
  };
  std::vector<OptimizerTensor> optimizerTensors() const;
  /// ZeRO-1: a shard state gathered from every rank (collective: rank r's at r x bytes), one
  /// optimizer tensor cut out of that, and this rank's share of a full tensor written into its
  /// shard.
  std::vector<unsigned char> gatherShardState(const aotc_state_desc &sd) const;
  Tensor cutShard(const OptimizerTensor &o, const std::vector<unsigned char> &all) const;
  void scatterShard(const OptimizerTensor &o, const Tensor &full);
  /// ZeRO-1 load(): rank 0's checkpoint tensors (valid on rank 0) to every rank's shards.
  void broadcastShards(const SafetensorsFile *ck);
  [[noreturn]] void abortJob(const std::string &what) const;
  void reportNonfinite(double loss, uint32_t flags);
};

/// The forward of a program without saving anything (abi.h <name>_eval), on a Trainer's
/// current parameters and buffers, which it reads in place (no copy): the trainer's own
/// program, or the same model exported in eval mode (batch norm's running statistics, no
/// dropout) and compiled without --optimizer; its weights are bound by FQN, its lifted
/// constants come from its own weights file (docs/training.md "Eval"). Mutated inputs' new values (running statistics of a train-mode
/// export) are outputs only: evaluation never changes the trainer. Everything is allocated in
/// the constructor: run() allocates nothing.
///
///   aotc::rt::Evaluator ev(trainer, model_eval_program);
///   const aotc::rt::Tensor &logits = ev.run({&x})[0];
class Evaluator {
public:
  /// RuntimeError when `program` has no eval entry point or another ABI version, or one of
  /// its parameters or buffers is not the trainer's (name, dtype and shape; the first mismatch
  /// is named). Lifted constants (role constant; torch.export numbers them per export) are
  /// taken from `constants`, the eval program's weights file, which a program with constants
  /// needs. The trainer must outlive the evaluator.
  Evaluator(const Trainer &trainer, const aotc_program &program, const SafetensorsFile *constants = nullptr);
  explicit Evaluator(const Trainer &trainer) : Evaluator(trainer, trainer.program(), nullptr) {}
  Evaluator(const Evaluator &) = delete;
  Evaluator &operator=(const Evaluator &) = delete;

  const aotc_program &program() const { return *program_; }
  /// The inputs run() takes, in program order (abi.h role AOTC_ROLE_USER_INPUT).
  const std::vector<int> &userInputs() const { return userInputs_; }
  /// User inputs of `program` in its order (dtype and shape as its descriptors).
  const std::vector<Tensor> &run(std::span<const Tensor *const> inputs);
  const std::vector<Tensor> &run(std::initializer_list<const Tensor *> inputs) {
    return run(std::span(inputs.begin(), inputs.size()));
  }
  const Tensor &output(int k) const { return outputs_.at(k); }

private:
  const aotc_program *program_;
  ProgramContext context_;
  std::vector<int> userInputs_;
  std::vector<void *> in_, out_;
  std::vector<Tensor> outputs_;
  std::deque<Tensor> owned_; // constants copied from `constants` (stable addresses)
  AlignedBuffer scratch_;
};

} // namespace aotc::rt
