//===- Optimizer.h - The update step compiled after the backward -*- C++ -*-===//
//
// Stage "optimizer" of the pipeline (docs/stage-optimizer.md): with --optimizer, after
// partition, two more graphs are built from a partitioned Program:
//  * the *update* graph: the torch.optim step (SGD, Adam, AdamW, single-tensor semantics of
//    torch 2.15, torch.optim's defaults), optionally after clip_grad_norm_, over every
//    parameter that has a gradient; its outputs are the new parameters and optimizer state,
//    written in place (the codegen binds each output to its input's buffer);
//  * the *accumulate* graph: one micro-batch of gradient accumulation (accum += grad).
// Their placeholders are parameters (the program's inputs), gradients (the backward's
// outputs), optimizer state (a persistent area the caller owns), run-time hyperparameters
// (0-d f64: the learning rate and the others, so schedules need no recompile) and the loss.
// Every graph is printed by `--emit=optimizer`.
//===----------------------------------------------------------------------===//
#pragma once

#include "aotc/Graph.h"

#include <string>
#include <vector>

namespace aotc {

enum class OptimizerKind { SGD, Adam, AdamW };
const char *optimizerName(OptimizerKind k); ///< "sgd", "adam", "adamw"

/// What --optimizer, --clip-grad-norm and --skip-nonfinite asked for. Hyperparameter values
/// are the run-time defaults written into the object; the structural choices (nesterov,
/// amsgrad, maximize, whether momentum / weight decay are compiled in) are fixed.
struct OptimizerSpec {
  OptimizerKind kind = OptimizerKind::SGD;
  double lr = 1e-3;
  double momentum = 0, dampening = 0; ///< SGD
  double beta1 = 0.9, beta2 = 0.999, eps = 1e-8; ///< Adam, AdamW
  double weightDecay = 0; ///< SGD, Adam: 0; AdamW: 1e-2 (torch.optim's defaults)
  bool nesterov = false, amsgrad = false, maximize = false;
  double clipGradNorm = 0; ///< --clip-grad-norm=MAX: 0 = off.
  bool skipNonfinite = false;
  /// --grad-accumulation: accumulators in the state area and the accumulate graph, so a step
  /// may be split into micro-batches (costs one parameter-sized buffer per parameter).
  bool accumulate = false;
  /// --data-parallel: the step's gradient is the sum over the ranks of a communicator (abi.h
  /// aotc_comm, all-reduced in buckets by the train step) times the run-time hyperparameter
  /// grad_scale / world size (DDP's mean); without a communicator, one process. The update
  /// graph reads that factor from the state "dp.grad_scale" and no longer adds the
  /// accumulators itself: the train step adds them before the all-reduce.
  bool dataParallel = false;
  int64_t bucketBytes = 0; ///< --data-parallel=MB: the bucket size, bytes (the first bucket: 1 MiB at most).
  /// --data-parallel=zero1 --world-size=N (ZeRO-1, docs/distributed.md): N, else 0. Each of
  /// the N ranks keeps and updates one shard of the optimizer state: the buckets are reduce-
  /// scattered, the update runs over this rank's flat shard (states "optimizer.shard.<key>",
  /// StateKind::Shard; the parameters and gradients staged, TrainBinding::Kind::Staging) and
  /// the new parameters are all-gathered.
  int zeroWorld = 0;
  /// The canonical spelling: "adamw:lr=0.001,beta1=0.9,...". Parsing it gives this spec back.
  std::string str() const;
};

/// Parses "--optimizer" text: `NAME[:key=value,...]`, NAME sgd|adam|adamw, keys as torch.optim
/// (betas as beta1/beta2; nesterov, amsgrad, maximize 0|1). Every bad key or value is a user
/// error naming the option and the accepted keys; ranges are torch.optim's checks.
OptimizerSpec parseOptimizerSpec(const std::string &text);

/// One run-time hyperparameter slot (`const double *hyper` of the train step, abi.h).
struct HyperParam {
  std::string name;   ///< "lr", "momentum", "dampening", "weight_decay", "beta1", "beta2", "eps", "max_norm"
  double value = 0;   ///< The compile-time default.
  double min = 0, max = 0; ///< Allowed run-time range [min, max]; max < min: no upper bound.
  bool maxOpen = false;    ///< max itself is excluded (beta < 1).
};

/// One tensor of the persistent state area.
enum class StateKind {
  Optimizer, ///< torch.optim state of one parameter (momentum_buffer, exp_avg, ...).
  Step,      ///< The step count, f32 0-d (torch keeps one per parameter; all are equal).
  Accum,     ///< Accumulated gradient of one parameter (micro-batches).
  AccumCount,///< Micro-batches accumulated so far, f32 0-d.
  Status,    ///< Written by every update: grad_norm (f32 0-d), nonfinite (bool 0-d).
  Zeros,     ///< Never written: the zero cotangent of a differentiable output other than the loss.
  /// ZeRO-1: "optimizer.shard.<key>", a flat [S] tensor of this rank's share of every
  /// parameter's optimizer state (OptimizerSpec::zeroWorld).
  Shard,
};
struct StateTensor {
  std::string name;  ///< "optimizer.state.<fqn>.exp_avg", "optimizer.step", "accum.<fqn>", ...
  TensorType type;
  StateKind kind = StateKind::Optimizer;
  int paramInput = -1;   ///< Input index of the parameter (Optimizer, Accum), else -1.
  int output = -1;       ///< Zeros: the output index whose cotangent it is.
  std::string stateKey;  ///< Optimizer: "exp_avg", "exp_avg_sq", "max_exp_avg_sq", "momentum_buffer".
  int64_t offset = 0;    ///< Byte offset in the state area (64-byte aligned).
};

/// How a placeholder of the update / accumulate graphs binds to the train step's buffers.
struct TrainBinding {
  /// Staging (ZeRO-1): the train step's transient flat [S] buffers in its scratch, index 0 this
  /// rank's share of the parameters (packed before the update, all-gathered after it), 1 its
  /// share of the reduced gradients (where the reduce-scatters land).
  enum class Kind { Param, Grad, State, Hyper, Loss, Staging } kind = Kind::Param;
  int index = -1; ///< Param: input index; Grad: grads[] index; State: states index; Hyper: hypers index.
};

/// The training step of a program: the two graphs and the ABI around them.
struct TrainStep {
  OptimizerSpec spec;
  Graph update, accumulate; ///< accumulate: empty without OptimizerSpec::accumulate.
  std::vector<TrainBinding> updateInputs, updateOutputs;   ///< Per placeholder / output.
  std::vector<TrainBinding> accumInputs, accumOutputs;
  std::vector<StateTensor> states;
  std::vector<HyperParam> hypers;
  std::vector<int> params; ///< Input indices of the parameters updated, in input order.
  int64_t stateBytes = 0;
  /// ZeRO-1: the shard's length S in elements (every Shard state and staging buffer is [S], of
  /// the parameters' dtype `shardDType`): room for this rank's
  /// 1/N of every bucket however the codegen cuts the buckets (zeroShardElems), and `shardNorm`,
  /// the graph giving the sum of squares of this rank's scaled gradient shard ("dp.sumsq"),
  /// which the train step all-reduces before the update reads it.
  int64_t shardElems = 0;
  DType shardDType = DType::F32;
  Graph shardNorm;
  std::vector<TrainBinding> normInputs, normOutputs;
};

/// ZeRO-1's shard length for parameters of `numels` elements of `itemSize` bytes on `world`
/// ranks: each bucket is padded to a multiple of world x (64 / itemSize) elements and a rank's
/// shard of it is 1/world of that, so the sum over buckets is at most this, whatever the cuts.
int64_t zeroShardElems(const std::vector<int64_t> &numels, int64_t itemSize, int world);

/// Builds the train step of a partitioned Program `p` (stage partition): checks that forward
/// output 0 is a 0-d floating loss and that at least one parameter has a gradient (user errors
/// otherwise), lays out the state area and builds both graphs.
TrainStep buildTrainStep(const Program &p, const OptimizerSpec &spec);

/// `--emit=optimizer`: the spec, the state area and the hyperparameters as `# aotc:` comment
/// lines, then both graphs as FX code (`def update(...)`, `def accumulate(...)`).
std::string printTrainStep(const TrainStep &t);

} // namespace aotc
