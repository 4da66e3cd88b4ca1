//===- Pipeline.cpp - The aotc pipeline, top to bottom -----------------------===//
//
// runPipeline() is the whole compiler in one straight function (in the spirit
// of Halide's src/Lower.cpp): each stage is one call, and after each one
// `--emit=<stage>` may print the result and stop. `--start-from=<stage>` reads
// that stage's text (as --emit printed it) instead and continues after it.
//
//   capture -> functionalize -> decompose -> joint -> lower -> partition
//           -> kernels (fusion + arena) -> mlir -> llvm -> object + header
//===----------------------------------------------------------------------===//
#include "Driver.h"

#include "aotc/Autodiff.h"
#include "aotc/Capture.h"
#include "aotc/Codegen.h"
#include "aotc/Diagnostics.h"
#include "aotc/Kernels.h"
#include "aotc/Optimizer.h"
#include "aotc/Partition.h"
#include "aotc/SpecializeSizes.h"
#include "aotc/TextIR.h"
#include "aotc/safetensors.h"

#include <cerrno>
#include <cstring>
#include <algorithm>
#include <filesystem>
#include <fstream>
#include <optional>
#include <set>
#include <sstream>

namespace aotc::driver {

const std::vector<std::string> kStages = {"capture", "functionalize", "decompose",
                                          "joint",   "lower",         "partition",
                                          "optimizer", "kernels",     "mlir",          "llvm",
                                          "ptx",     "fatbin"};
const std::vector<std::string> kTextStages = {"capture", "functionalize", "decompose",
                                              "joint",   "lower",         "partition"};

namespace {

/// The last stage that carries run-time sizes (issue 30, docs/dynamic-shapes.md); the pipeline
/// refuses them after it.
constexpr const char *kLastRuntimeSizeStage = "kernels";

/// Position of a stage in pipeline order (capture = 0 .. llvm = 8, ptx = 9, fatbin = 10).
int stageIndex(const std::string &s) {
  auto it = std::find(kStages.begin(), kStages.end(), s);
  AOTC_ASSERT(it != kStages.end(), "unknown stage '" + s + "'");
  return (int)(it - kStages.begin());
}

/// --requires-grad / --freeze on a parsed program that has not been
/// differentiated yet (capture applies them itself when it reads IN).
void applyGradFlags(Program &p, const CompileOptions &o) {
  if (o.requiresGrad.empty() && o.freeze.empty())
    return;
  if (stageIndex(p.stage) >= stageIndex("joint"))
    userError("--requires-grad/--freeze apply before the joint graph is built; the input is a '" +
              p.stage + "' program");
  auto find = [&](const std::string &name) -> Node * {
    for (Node *n : p.forward.placeholders())
      if (n->name == name || (!n->fqn.empty() && n->fqn == name))
        return n;
    userError(p.origin, "--requires-grad/--freeze: no input named '" + name + "'");
  };
  for (const std::string &n : o.requiresGrad) {
    Node *ph = find(n);
    if (!isFloating(ph->type().dtype))
      userError(p.origin, "--requires-grad: input '" + n + "' is " + ph->type().str() +
                              "; only floating inputs can require grad");
    ph->requiresGrad = true;
  }
  for (const std::string &n : o.freeze)
    find(n)->requiresGrad = false;
}

/// The values of constant inputs that the input did not carry (FX text's get_attr nodes, an
/// ExportedProgram JSON's or a stage text's constants; a .pt2's lifted constants are in
/// `weights` already): from --constants, by FQN, checked against the placeholder's type.
/// Without them the program still prints (--emit) and runs (`aotc run --inputs` may give
/// them by name); an object from FX text (`fxText`) needs every value (each missing one is
/// listed, at once).
void bindConstants(const Program &p, const CompileOptions &o, std::vector<Weight> &weights, bool fxText) {
  std::vector<const Node *> missing;
  for (const Node *ph : p.forward.placeholders())
    if (ph->role == InputRole::Constant &&
        std::none_of(weights.begin(), weights.end(), [&](const Weight &w) { return w.fqn == ph->fqn; }))
      missing.push_back(ph);
  if (missing.empty()) {
    if (!o.constants.empty())
      userError("--constants " + o.constants + ": the program has no tensor constant without a value");
    return;
  }
  if (o.constants.empty()) {
    // Like parameters, the constants of an ExportedProgram JSON or a stage text are the
    // caller's to supply at run time (no weights file is written for them); FX text's
    // get_attr constants need their values here (docs/formats.md "FX text").
    if (!o.constantsRequired || !fxText) return;
    DiagnosticList diags;
    for (const Node *ph : missing)
      diags.add((ph->loc.file.empty() ? o.input : ph->loc.str()) + ": error: tensor constant '" + ph->fqn + "' (" +
                ph->type().str() +
                ", node '" + ph->name + "') has no value: FX text carries none; pass --constants FILE.safetensors "
                "with a tensor named '" + ph->fqn + "'");
    diags.throwIfAny(std::to_string(missing.size()) + " tensor constants without a value");
  }
  rt::SafetensorsFile file;
  try {
    file = rt::readSafetensors(o.constants);
  } catch (const rt::RuntimeError &e) {
    userError("--constants: " + std::string(e.what()));
  }
  DiagnosticList diags;
  for (const Node *ph : missing) {
    const rt::Tensor *t = file.find(ph->fqn);
    const TensorType &ty = ph->type();
    if (!t) {
      diags.add(o.constants + ": error: no tensor '" + ph->fqn + "' for the tensor constant of node '" +
                ph->name + "' (" + ty.str() + ")");
      continue;
    }
    if ((int)t->dtype() != (int)ty.dtype || t->shape() != ty.shape) {
      diags.add(o.constants + ": error: '" + ph->fqn + "' is " + t->typeString() + " but node '" + ph->name +
                "' is " + ty.str());
      continue;
    }
    const uint8_t *b = static_cast<const uint8_t *>(t->data());
    weights.push_back(Weight{ph->fqn, ty, std::vector<uint8_t>(b, b + t->bytes())});
  }
  diags.throwIfAny("--constants: " + std::to_string(diags.size()) + " tensor constants unresolved");
}

} // namespace

CompileResult runPipeline(const CompileOptions &o) {
  CompileResult r;
  if (o.target != "cpu" && o.target != "cuda")
    userError("unsupported --target '" + o.target + "' (supported: cpu, cuda)");
  if ((o.emit == "ptx" || o.emit == "fatbin") && o.target != "cuda")
    userError("--emit=" + o.emit + " needs --target=cuda");
  if (o.allowTf32 && o.target != "cuda")
    userError("--allow-tf32 needs --target=cuda (the CPU target's GEMMs are always f32)");
  if (!o.sanitize.empty() && o.sanitize != "address" && o.sanitize != "thread")
    userError("unsupported --sanitize '" + o.sanitize + "' (supported: address, thread)");
  if (!o.sanitize.empty() && o.target != "cpu")
    userError("--sanitize=" + o.sanitize + " instruments the CPU target's code; it cannot be "
              "combined with --target=" + o.target);
  if (o.optimizer.empty() && (o.clipGradNorm > 0 || o.skipNonfinite || o.gradAccumulation || !o.dataParallel.empty()))
    userError(std::string(o.clipGradNorm > 0       ? "--clip-grad-norm"
                          : o.skipNonfinite        ? "--skip-nonfinite"
                          : o.gradAccumulation     ? "--grad-accumulation"
                                                   : "--data-parallel") +
              " needs --optimizer");
  if (o.emit == "optimizer" && o.optimizer.empty())
    userError("--emit=optimizer needs --optimizer");
  std::optional<OptimizerSpec> optim;
  if (!o.optimizer.empty()) {
    optim = parseOptimizerSpec(o.optimizer);
    optim->clipGradNorm = o.clipGradNorm;
    optim->skipNonfinite = o.skipNonfinite;
    optim->accumulate = o.gradAccumulation;
    if (!o.dataParallel.empty()) {
      optim->dataParallel = true;
      optim->bucketBytes = dataParallelBucketBytes(o.dataParallel);
      if (dataParallelZero1(o.dataParallel)) {
        if (o.worldSize < 1)
          userError("--data-parallel=" + o.dataParallel + " needs --world-size=N, the number of ranks the "
                    "optimizer state is sharded over (a ZeRO-1 object runs on exactly N ranks)");
        optim->zeroWorld = o.worldSize;
      }
    }
    if (o.worldSize > 0 && optim->zeroWorld == 0)
      userError("--world-size is for --data-parallel=zero1 (plain --data-parallel runs on any number of ranks)");
    if (o.target != "cpu")
      userError("--optimizer: the train step is compiled for the CPU target only so far (docs/training.md); "
                "use --target=cpu, or the forward/backward entry points of --target=" + o.target);
  }
  if (o.emit == "llvm" && o.target == "cuda")
    userError("--emit=llvm is the CPU target's; with --target=cuda use --emit=mlir or --emit=ptx");
  const int from = o.startFrom.empty() ? -1 : stageIndex(o.startFrom);
  // --emit=dot draws the joint graph with the split partition would make.
  const bool dot = o.emit == "dot";
  const int stop = o.emit.empty() ? -1 : stageIndex(dot ? "partition" : o.emit);
  if (stop >= 0 && stop < from)
    userError("--emit=" + o.emit + " comes before --start-from=" + o.startFrom +
              ": nothing to do");
  // A stage runs when it comes after --start-from; the pipeline stops after --emit.
  auto runs = [&](const char *stage) { return stageIndex(stage) > from; };
  auto stopsAfter = [&](const char *stage, const std::string &text) {
    if (stageIndex(stage) != stop)
      return false;
    r.stopped = true;
    r.emitted = text;
    return true;
  };

  // 1. capture: read IN (.pt2 / JSON / FX text), check shapes and dtypes against
  //    the exported meta, apply --requires-grad/--freeze. With --start-from, IN
  //    is the text of that stage instead.
  Program p;
  bool named = false; // the text carried a `# aotc: name` header
  InputFormat format = InputFormat::Unknown; // --start-from reads aotc's IR, not FX text
  if (from < 0) {
    p = capture(o.input, CaptureOptions{o.requiresGrad, o.freeze, o.maxTensorBytes, o.specialize, o.maxSize},
                &r.weights, &format);
  } else {
    if (!o.maxSize.empty())
      userError("--max-size applies when capturing a torch.export program; --start-from=" + o.startFrom +
                " reads aotc IR, whose run-time sizes have their bounds already");
    const std::string text = readFile(o.input);
    p = parseProgram(text, o.input);
    if (p.stage != o.startFrom)
      userError(SourceLoc{o.input, 0, 0}, "--start-from=" + o.startFrom + " but the input is a '" +
                                              p.stage + "' program");
    named = text.find("# aotc: name ") != std::string::npos;
    if (!o.specialize.empty()) specializeSizes(p, o.specialize); // run-time sizes given a value
    checkTensorBytes(p, o.maxTensorBytes);
    applyGradFlags(p, o);
  }
  bindConstants(p, o, r.weights, format == InputFormat::FxText);
  if (!o.name.empty())
    p.name = o.name;
  else if (!named)
    p.name = defaultProgramName(o.input);
  if (!isCIdentifier(p.name))
    userError("--name '" + p.name + "' is not a C identifier");
  if (stopsAfter("capture", printProgram(p)))
    return r;

  // 2. functionalize: in-place ops, aliasing and input mutation removed.
  if (runs("functionalize"))
    functionalize(p);
  if (stopsAfter("functionalize", printProgram(p)))
    return r;

  // 3. decompose: composites (linear, cross_entropy, ...) -> Core ATen.
  if (runs("decompose"))
    decompose(p);
  else if (stageIndex(p.stage) < stageIndex("partition"))
    widenIndexInputs(p.forward); // a hand-written later-stage text may still read i32 indices
  if (stopsAfter("decompose", printProgram(p)))
    return r;

  // 4. joint: forward + backward from derivatives.yaml (+ --derivatives files).
  if (runs("joint"))
    buildJoint(p, JointOptions{o.derivatives});
  if (stopsAfter("joint", printProgram(p)))
    return r;

  // 5a. lower: rule-bearing composites (log_softmax, layer_norm, gelu) -> primitives.
  if (runs("lower"))
    lower(p);
  if (stopsAfter("lower", printProgram(p)))
    return r;
  // 5b. partition: forward / backward split, saved tensors chosen by min-cut.
  if (dot) {
    r.stopped = true;
    r.emitted = partitionDot(p, o.partitioner);
    return r;
  }
  if (runs("partition"))
    partition(p, o.partitioner);
  if (stopsAfter("partition", printProgram(p) + partitionSummary(p)))
    return r;

  // Run-time sizes go no further than the kernels yet (issue 30, docs/dynamic-shapes.md): refused
  // before planning when the stage asked for is later.
  if (std::string syms = p.dynamicSymbols(); !syms.empty() && (stop < 0 || stop > stageIndex(kLastRuntimeSizeStage))) {
    std::string list;
    for (const Program::SpecializedSize &z : p.specializedSizes)
      if (z.dynamic) list += "\n  " + z.str();
    userError(SourceLoc{o.input}, "this dynamic export has run-time sizes (" + syms + "):" + list +
                                      "\nevery stage up to the kernels carries run-time sizes (--emit=" +
                                      std::string(kLastRuntimeSizeStage) +
                                      "); code generation compiles static sizes so far: give each symbol a "
                                      "size with --specialize SYMBOL=N or INPUT:DIM=N (docs/dynamic-shapes.md)");
  }

  // 5c. optimizer: with --optimizer, the update and accumulate graphs of the train step.
  std::optional<TrainStep> train;
  if (optim && !o.f64) { // gradcheck checks the forward and backward only
    train = buildTrainStep(p, *optim);
    if (stopsAfter("optimizer", printTrainStep(*train)))
      return r;
  }

  // aotc gradcheck compiles the same program in float64.
  if (o.f64)
    convertF32ToF64(p);

  // 6. kernels: fusion into target-neutral loop nests + scratch arena planning.
  CodegenOptions cg;
  cg.name = p.name;
  cg.sanitize = o.sanitize;
  cg.cpu = o.cpu == "host" ? hostCpuLevel() : o.cpu; // the build id hashes the level, below
  cg.cpuGemm = o.cpuGemm;
  cg.fusion.checkedArena = o.sanitize == "address";
  cg.fusion = fusionOptionsFor(cg.fusion, o.target);
  checkTargetSupport(p, o.target);
  if (o.target != "cpu" && !p.dynamicSymbols().empty())
    userError(SourceLoc{o.input}, "this dynamic export has run-time sizes (" + p.dynamicSymbols() +
                                      "): the " + o.target + " target plans static sizes only; give each symbol a "
                                      "size with --specialize SYMBOL=N or INPUT:DIM=N (docs/dynamic-shapes.md)");
  KernelProgram kp = planProgram(p, cg.fusion);
  if (train) planTrainStep(kp, *train, cg.fusion);
  {
    CompileOptions hashed = o;
    hashed.cpu = cg.cpu;
    r.buildId = buildId(hashed, p.name);
  }
  kp.buildId = r.buildId;
  cg.target = o.target;
  cg.cuda.archs = o.cudaArchs;
  cg.cuda.toolkit = o.cudaToolkit;
  cg.cuda.allowTf32 = o.allowTf32;
  // 7. schedule: the target's policy for every kernel (include/aotc/Schedule.h).
  scheduleProgram(kp, targetInfoOf(cg));
  if (stopsAfter("kernels", printKernels(kp)))
    return r;


  // 8-9. mlir -> llvm -> object: each kernel as MLIR (scf/arith/math/memref/omp),
  //      lowered to the LLVM dialect, translated to LLVM IR, optimized, emitted.
  cg.emitMLIR = stop == stageIndex("mlir");
  cg.emitLLVM = stop == stageIndex("llvm");
  cg.emitPtx = stop == stageIndex("ptx");
  cg.emitFatbin = stop == stageIndex("fatbin");
  cg.emitObject = stop < 0;
  Artifact art;
  emitObject(kp, cg, art);
  if (stopsAfter("mlir", art.mlirText) || stopsAfter("llvm", art.llvmText) ||
      stopsAfter("ptx", art.ptxText) ||
      stopsAfter("fatbin", std::string(art.fatbin.begin(), art.fatbin.end())))
    return r;
  r.object = std::move(art.object);
  r.header = emitHeader(kp, o.target);
  r.program = std::move(p);
  return r;
}

bool dataParallelZero1(const std::string &value) { return value == "zero1" || value.rfind("zero1:", 0) == 0; }

int64_t dataParallelBucketBytes(const std::string &value) {
  const std::string mbText = !dataParallelZero1(value) ? value : value == "zero1" ? "25" : value.substr(6);
  char *end = nullptr;
  errno = 0;
  double mb = std::strtod(mbText.c_str(), &end);
  if (mbText.empty() || *end || errno || !(mb > 0) || mb > 1e6)
    userError("--data-parallel=" + value + ": expected MB, zero1 or zero1:MB, the bucket size a number of megabytes "
              "in (0, 1e6], e.g. --data-parallel=25 or --data-parallel=zero1:8");
  return std::max<int64_t>(64, (int64_t)(mb * 1024 * 1024));
}

std::string defaultProgramName(const std::string &path) {
  std::string base = std::filesystem::path(path).filename().string();
  base = base.substr(0, base.find('.'));
  std::string id;
  for (char c : base)
    id += (std::isalnum((unsigned char)c) || c == '_') ? c : '_';
  if (id.empty())
    return "model";
  if (std::isdigit((unsigned char)id[0]))
    id = "_" + id;
  return id;
}

std::string readFile(const std::string &path) {
  std::ifstream in(path, std::ios::binary);
  if (!in)
    userError(SourceLoc{path, 0, 0}, std::string("cannot open file: ") + std::strerror(errno));
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

void writeFile(const std::string &path, const void *data, size_t size,
               const std::vector<std::string> &inputs) {
  OutputSet one(inputs);
  one.add(path, data, size);
  one.commit();
}

std::vector<std::string> inputFiles(const CompileOptions &o) {
  std::vector<std::string> files{o.input};
  files.insert(files.end(), o.derivatives.begin(), o.derivatives.end());
  if (!o.constants.empty()) files.push_back(o.constants);
  return files;
}

} // namespace aotc::driver
