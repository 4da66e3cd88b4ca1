//===- Driver.h - What main.cpp, Pipeline.cpp, Run.cpp and Gradcheck.cpp share -===//
//
// The aotc tool has three commands (docs/cli.md):
//   aotc IN -o OUT.o [flags]                  compile (Pipeline.cpp)
//   aotc run IN [--inputs F] --out F [flags]  compile, JIT-load the object, run (Run.cpp)
//   aotc gradcheck IN [flags]                 compile in f64, compare with central differences
// All three compile through runPipeline(). Errors are aotc::Error exceptions
// (exit 1 user, 2 internal) caught in main().
//===----------------------------------------------------------------------===//
#pragma once

#include "aotc/Graph.h"
#include "aotc/Stages.h"
#include "aotc/abi.h"

#include <cstdint>
#include <string>
#include <vector>

namespace aotc::driver {

/// The pipeline's stages, in order. Text stages (capture .. partition) can be
/// printed and parsed; kernels/mlir/llvm can only be printed.
extern const std::vector<std::string> kStages;
/// The stages --start-from accepts (capture .. partition).
extern const std::vector<std::string> kTextStages;

/// Flags shared by every command that compiles.
struct CompileOptions {
  std::string input;                      ///< IN: .pt2, ExportedProgram JSON, FX/aotc text.
  std::string emit;                       ///< --emit=<stage>; empty: compile to an object.
  std::string startFrom;                  ///< --start-from=<stage>; empty: capture IN.
  PartitionerKind partitioner = PartitionerKind::MinCut;
  std::string name;                       ///< --name; empty: defaultProgramName(input).
  std::string target = "cpu";             ///< --target: "cpu" or "cuda".
  std::vector<std::string> cudaArchs = {"sm_80", "sm_90"}; ///< --cuda-arch (sorted, unique).
  std::string cudaToolkit = "/usr/local/cuda";             ///< --cuda-toolkit.
  bool allowTf32 = false;                                  ///< --allow-tf32 (cuda GEMMs).
  std::string cpu = "multi";                               ///< --cpu (CPU target; Codegen.h).
  std::string cpuGemm = "openblas";                       ///< --cpu-gemm (TargetInfo::gemmLibrary).
  std::vector<std::string> requiresGrad;  ///< --requires-grad
  std::vector<std::string> freeze;        ///< --freeze
  std::vector<std::string> specialize;    ///< --specialize SYMBOL=N / INPUT:DIM=N (dynamic exports)
  std::vector<std::string> maxSize;       ///< --max-size SYMBOL=N / INPUT:DIM=N (run-time sizes' bound)
  std::vector<std::string> derivatives;   ///< --derivatives (repeatable)
  std::string constants;                  ///< --constants: safetensors with FX text's get_attr values.
  /// An object is written (not --emit, not run/gradcheck, whose --inputs may hold them):
  /// every constant input needs its value, from the archive or --constants.
  bool constantsRequired = false;
  bool f64 = false;                       ///< gradcheck: every f32 becomes f64 before codegen.
  int64_t maxTensorBytes = kDefaultMaxTensorBytes; ///< --max-tensor-bytes (Stages.h).
  std::string sanitize;                   ///< --sanitize: "", "address" or "thread" (CPU target).
  std::string optimizer;                  ///< --optimizer text (Optimizer.h); empty: no train step.
  double clipGradNorm = 0;                ///< --clip-grad-norm; 0: off.
  bool skipNonfinite = false;             ///< --skip-nonfinite.
  bool gradAccumulation = false;          ///< --grad-accumulation.
  std::string dataParallel;               ///< --data-parallel[=MB|zero1[:MB]]: "" off, else the value ("25").
  int worldSize = 0;                      ///< --world-size (zero1's rank count); 0: not given.
};

/// What runPipeline produces.
struct CompileResult {
  bool stopped = false;         ///< --emit stopped the pipeline; `emitted` holds the text.
  std::string emitted;
  Program program;              ///< The partitioned program (when not stopped before).
  std::vector<Weight> weights;  ///< Parameter/buffer values from a .pt2 / JSON archive.
  std::vector<uint8_t> object;  ///< The relocatable object.
  std::string header;           ///< The C header.
  std::string buildId;          ///< buildId(opts): in the object, the header and the weights' metadata.
};

/// The whole pipeline: capture (or parse, with --start-from) -> functionalize ->
/// decompose -> joint -> lower -> partition -> codegen. Stops after
/// `opts.emit` with that stage's text.
CompileResult runPipeline(const CompileOptions &opts);

/// The compile's build id (BuildId.cpp): 32 hex digits of a SHA-256 over aotc's version and
/// sources, the bytes of IN, the built-in and --derivatives rule files, the program name
/// (`programName`, as resolved) and every option that changes the outputs.
std::string buildId(const CompileOptions &opts, const std::string &programName);

/// --data-parallel's bucket size in bytes: its value MB, zero1 (25) or zero1:MB, MB a positive
/// number of megabytes; a user error otherwise.
int64_t dataParallelBucketBytes(const std::string &value);
/// --data-parallel's value asks for ZeRO-1 ("zero1" or "zero1:MB").
bool dataParallelZero1(const std::string &value);

/// "mlp.pt2" -> "mlp"; "my-model.fx.txt" -> "my_model"; "3d.json" -> "_3d":
/// the file name up to its first '.', non-identifier characters replaced by '_'.
std::string defaultProgramName(const std::string &path);
/// Reads a whole file; user error naming it when it cannot be read.
std::string readFile(const std::string &path);
/// Writes a file, refusing (user error) when `path` is one of `inputs` (same file).
void writeFile(const std::string &path, const void *data, size_t size,
               const std::vector<std::string> &inputs);
/// User error when `out` is (or is the same file as) one of `inputs`.
void refuseToOverwriteInput(const std::string &out, const std::vector<std::string> &inputs);

/// A compile's output files, written atomically (Outputs.cpp): add() writes each to a
/// temporary file beside its target (user error on failure, naming the target);
/// commit() renames them all into place, restoring the earlier files if a rename fails.
/// Temporaries not committed are removed by the destructor. Inputs are never overwritten.
class OutputSet {
public:
  explicit OutputSet(std::vector<std::string> inputs) : inputs_(std::move(inputs)) {}
  ~OutputSet();
  OutputSet(const OutputSet &) = delete;
  OutputSet &operator=(const OutputSet &) = delete;
  void add(const std::string &path, const void *data, size_t size);
  void commit();

private:
  void writeInPlace(const std::string &path, const void *data, size_t size);
  struct Pending {
    std::string path, tmp; ///< The real target (symlinks resolved) and its temporary.
    std::string shown;     ///< The path as given, for messages.
  };
  std::vector<std::string> inputs_;
  std::vector<Pending> files_;
  int writes_ = 0, renames_ = 0;
};

/// Every file the options read (IN, --derivatives), for the overwrite check.
std::vector<std::string> inputFiles(const CompileOptions &opts);

/// gradcheck's conversion: every f32 type and dtype argument of both graphs becomes f64.
void convertF32ToF64(Program &p);

struct RunOptions {
  CompileOptions compile;
  std::string inputs;  ///< --inputs: safetensors with inputs / parameters / tangent_<i>.
  std::string out;     ///< --out: safetensors receiving output_<i> and grad_<name>.
  std::string saveObject; ///< --save-object: also write the object that is loaded.
  int profileSteps = 0;   ///< --profile[=N]: N more steps after the first, profiled (0: none).
};
/// `aotc run`; returns the exit code.
int runCommand(const RunOptions &opts);

struct GradcheckOptions {
  CompileOptions compile;
  std::string inputs;      ///< --inputs (optional): values to check at.
  int samples = 32;        ///< Elements checked per input (all when the input is smaller).
  double eps = 1e-6;       ///< Central-difference step.
  double atol = 1e-5, rtol = 1e-3;
  uint64_t seed = 0;
};
/// `aotc gradcheck`; returns the exit code (1 when an error exceeds the tolerance).
int gradcheckCommand(const GradcheckOptions &opts);

} // namespace aotc::driver
