//===- Stages.h - The entry point of every stage ----------------*- C++ -*-===//
//
// The pipeline (tools/aotc/Pipeline.cpp) is one straight function calling these
// in order: capture, functionalize, decompose, joint, lower, partition, kernels,
// mlir, llvm. Each stage's output is a Program that IR/Printer.h prints as text
// (--emit=<stage>) and IR/Parser.h reads back (--start-from=<stage>).
//===----------------------------------------------------------------------===//
#pragma once

#include "aotc/Graph.h"

#include <string>
#include <vector>

namespace aotc {

/// Default of --max-tensor-bytes: no tensor of the input program (a value, a placeholder, a
/// weight once its view is expanded) may be larger, in bytes. 64 GiB: above any single
/// tensor of the models aotc targets, far below what a hostile 20-byte file can claim.
constexpr int64_t kDefaultMaxTensorBytes = int64_t(1) << 36;

struct CaptureOptions {
  std::vector<std::string> requiresGrad; ///< --requires-grad: names (FQN or placeholder) forced on.
  std::vector<std::string> freeze;       ///< --freeze: names forced off.
  int64_t maxTensorBytes = kDefaultMaxTensorBytes; ///< --max-tensor-bytes (bytes).
  /// --specialize: "SYMBOL=N" / "INPUT:DIM=N", the size a dynamic export is compiled at
  /// (docs/dynamic-shapes.md).
  std::vector<std::string> specialize;
  /// --max-size: "SYMBOL=N" / "INPUT:DIM=N", the largest size of a run-time symbol (required
  /// for one the export leaves unbounded; a bounded one may be lowered).
  std::vector<std::string> maxSize;
};

/// Stage 1 (lib/Capture). Reads a .pt2 archive, a bare ExportedProgram JSON, or
/// FX graph-code text (format detected from content), checks every node's
/// shape/dtype against the exported meta, and applies requires_grad flags.
/// Weights of a .pt2 are returned in `weights` (FQN -> raw bytes + type) when non-null;
/// the detected format in `format` when non-null (Capture.h).
enum class InputFormat;
struct Weight {
  std::string fqn;
  TensorType type;
  std::vector<uint8_t> bytes; ///< Raw little-endian storage, numel*itemsize bytes.
};
Program capture(const std::string &path, const CaptureOptions &opts,
                std::vector<Weight> *weights = nullptr, InputFormat *format = nullptr);

/// Stage 2 (lib/Functionalize): removes in-place ops, aliasing and input mutation.
void functionalize(Program &p);
/// Stage 3 (lib/Decompose): composites -> Core ATen, before autodiff.
void decompose(Program &p);
/// Part of decompose, its last step (lib/Decompose/Random.cpp): every random op that draws
/// gets a stream of a new `rng_state` input (i64[2] = {seed, offset}, InputRole::RngState) and
/// becomes aotc::philox_uniform of it (docs/randomness.md); the graph returns the advanced
/// state as that input's new value (Program::mutatedInputs). No-op when nothing draws.
void assignRandomStreams(Program &p);
/// Part of decompose (lib/Decompose/WidenIndices.cpp): every i32/u8 value read by an index
/// argument gets one `_to_copy(v, dtype=torch.int64)` that those arguments read instead; views
/// and outputs keep their dtype. Idempotent. Afterwards no index argument is narrow.
void widenIndexInputs(Graph &g);

struct JointOptions {
  std::vector<std::string> extraDerivatives; ///< --derivatives files, added after the built-in one.
};
/// Stage 4 (lib/Autodiff): builds the joint forward+backward graph.
void buildJoint(Program &p, const JointOptions &opts);
/// Stage 5a (lib/Decompose/Lower*.cpp): rule-bearing composites -> primitives.
void lower(Program &p);

enum class PartitionerKind { Default, MinCut };
/// Stage 5b (lib/Partition): splits the joint graph into forward and backward.
void partition(Program &p, PartitionerKind kind);

} // namespace aotc
