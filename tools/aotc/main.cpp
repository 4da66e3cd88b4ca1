//===- main.cpp - The aotc command line (CLI11) ------------------------------===//
//
// Parses the command line into the option structs of Driver.h and dispatches:
//   aotc IN -o OUT.o | --emit=<stage>   compile (runPipeline, then write files)
//   aotc run IN ...                     Run.cpp
//   aotc gradcheck IN ...               Gradcheck.cpp
// Exit codes: 0 ok, 1 user error (including command-line errors), 2 internal error.
//===----------------------------------------------------------------------===//
#include "Driver.h"

#include "aotc/Diagnostics.h"
#include "aotc/runtime.h"
#include "aotc/safetensors.h"

#include <algorithm>
#include <CLI/CLI.hpp>

#include <cstdlib>
#include <filesystem>
#include <iostream>

using namespace aotc;
using namespace aotc::driver;

namespace {

/// The flags every compiling command takes.
void addCompileFlags(CLI::App &app, CompileOptions &o, bool withEmit, const std::string &defaultCpu = "multi") {
  app.add_option("input", o.input, "Model: .pt2 archive, ExportedProgram JSON, or FX/aotc text")
      ->required();
  if (withEmit) {
    std::vector<std::string> emits = kStages;
    emits.push_back("dot"); // the joint graph with the partition split, as Graphviz
    app.add_option("--emit", o.emit, "Print this stage's result and stop (dot: Graphviz of "
                                     "the joint graph with the split; -o X.svg renders it)")
        ->check(CLI::IsMember(emits));
  }
  app.add_option("--start-from", o.startFrom,
                 "IN is the text of this stage (as --emit prints it); continue after it")
      ->check(CLI::IsMember(kTextStages));
  app.add_option_function<std::string>(
         "--partitioner",
         [&o](const std::string &s) {
           o.partitioner = s == "default" ? PartitionerKind::Default : PartitionerKind::MinCut;
         },
         "Forward/backward partitioner: default (save what the backward uses) or min-cut")
      ->check(CLI::IsMember({"default", "min-cut"}))
      ->default_str("min-cut");
  app.add_option("--name", o.name, "C identifier of the entry points (default: input stem)");
  app.add_option("--target", o.target, "Code generation target (cuda: docs/cuda.md)")
      ->check(CLI::IsMember({"cpu", "cuda"}))
      ->default_str("cpu");
  o.cpu = defaultCpu;
  app.add_option("--cpu", o.cpu,
                 "CPU target: multi (x86-64-v2, -v3 and -v4 code in one object, chosen at context "
                 "creation by CPUID; AOTC_CPU=v2|v3|v4 caps it), one x86-64 level (x86-64-v3: AVX2 + "
                 "FMA, x86-64-v4: AVX-512), host (the level multi would choose on this machine) or "
                 "native (this machine's CPU and features)")
      ->check(CLI::IsMember({"multi", "host", "native", "x86-64-v2", "x86-64-v3", "x86-64-v4"}))
      ->default_str(defaultCpu);
  app.add_option("--cpu-gemm", o.cpuGemm,
                 "CPU target: the library of f32 GEMMs: openblas; auto (oneDNN for A @ B^T, e.g. "
                 "nn.Linear's forward, OpenBLAS for the rest: the measured rule of "
                 "docs/stage-codegen.md \"GEMM libraries\"); or onednn (every f32 GEMM). oneDNN "
                 "GEMMs call libaotc_kernels and allocate in every call (no allocation-free step)")
      ->check(CLI::IsMember({"openblas", "auto", "onednn"}))
      ->default_str("openblas");
  app.add_option_function<std::vector<std::string>>(
         "--cuda-arch",
         [&o](const std::vector<std::string> &v) {
           o.cudaArchs = v;
           // Ascending by number (sm_80 < sm_90 < sm_100); PTX is built for the lowest.
           auto num = [](const std::string &a) { return std::stoi(a.substr(3)); };
           std::sort(o.cudaArchs.begin(), o.cudaArchs.end(),
                     [&](const std::string &a, const std::string &b) { return num(a) < num(b); });
           o.cudaArchs.erase(std::unique(o.cudaArchs.begin(), o.cudaArchs.end()), o.cudaArchs.end());
         },
         "--target=cuda: GPU architectures (cubins; PTX for the lowest)")
      ->delimiter(',')
      ->check(CLI::Validator(
          [](std::string &s) -> std::string {
            if (s.size() < 5 || s.size() > 7 || s.rfind("sm_", 0) != 0 ||
                s.find_first_not_of("0123456789", 3) != std::string::npos || std::stoi(s.substr(3)) < 50)
              return "expected sm_<NN> (sm_50 or newer), got '" + s + "'";
            return "";
          },
          "sm_NN"))
      ->default_str("sm_80,sm_90");
  app.add_option("--cuda-toolkit", o.cudaToolkit, "--target=cuda: CUDA toolkit (libdevice, ptxas, fatbinary)")
      ->default_str("/usr/local/cuda");
  app.add_flag("--allow-tf32", o.allowTf32,
               "--target=cuda: f32 GEMMs may use TF32 tensor cores (10-bit mantissa products; off by default)");
  app.add_option("--requires-grad", o.requiresGrad,
                 "Inputs (FQN or placeholder name) that get a gradient")
      ->delimiter(',');
  app.add_option("--freeze", o.freeze, "Inputs that get no gradient")->delimiter(',');
  app.add_option("--specialize", o.specialize,
                 "A dynamic export (torch.export.Dim) compiled at one size per symbol: SYMBOL=N or INPUT:DIM=N "
                 "(docs/dynamic-shapes.md)")
      ->delimiter(',');
  app.add_option("--max-size", o.maxSize,
                 "The largest size a run-time symbol of a dynamic export takes: SYMBOL=N or INPUT:DIM=N; "
                 "needed where the export leaves it unbounded (docs/dynamic-shapes.md)")
      ->delimiter(',');
  app.add_option("--max-tensor-bytes", o.maxTensorBytes,
                 "Largest tensor (bytes) the input may declare: a value, an input, a weight once "
                 "its view is expanded; larger is a user error naming it")
      ->check(CLI::PositiveNumber)
      ->default_str(std::to_string(kDefaultMaxTensorBytes));
  app.add_option("--sanitize", o.sanitize,
                 "Instrument the generated code: address (ASan, with a checked arena: poisoned "
                 "redzones between planned buffers) or thread (TSan); link with -fsanitize=...")
      ->check(CLI::IsMember({"address", "thread"}));
  app.add_option("--derivatives", o.derivatives, "Extra derivative rules (YAML), repeatable")
      ->check(CLI::ExistingFile);
  app.add_option("--optimizer", o.optimizer,
                 "Compile a train step with this optimizer: sgd|adam|adamw[:key=value,...] "
                 "(torch.optim's keys and defaults; docs/training.md)");
  app.add_option("--clip-grad-norm", o.clipGradNorm,
                 "--optimizer: clip the gradients' total 2-norm to this value before the update "
                 "(torch.nn.utils.clip_grad_norm_)")
      ->check(CLI::PositiveNumber);
  app.add_flag("--skip-nonfinite", o.skipNonfinite,
               "--optimizer: a step whose loss or gradient norm is not finite updates nothing (as GradScaler)");
  app.add_flag("--grad-accumulation", o.gradAccumulation,
               "--optimizer: keep gradient accumulators, so a step may be split into micro-batches "
               "(AOTC_STEP_ACCUMULATE; one parameter-sized buffer per parameter)");
  app.add_flag("--data-parallel{25}", o.dataParallel,
               "--optimizer: reduce the gradients over the ranks of a communicator (abi.h aotc_comm, "
               "e.g. aotc::rt::MpiCommunicator) in buckets of MB megabytes (default 25; the first 1), "
               "each all-reduce started as soon as the backward finishes its bucket (docs/distributed.md); "
               "zero1[:MB]: ZeRO-1, the optimizer state sharded over --world-size ranks");
  app.add_option("--world-size", o.worldSize,
                 "--data-parallel=zero1: the number of ranks N the optimizer state is sharded over (the object "
                 "runs on exactly N ranks)")
      ->check(CLI::Range(1, 1 << 20));
  app.add_option("--constants", o.constants,
                 "Values of FX text's tensor constants (get_attr `c: \"f32[3]\" = self.c`): a "
                 "safetensors file, one tensor per attribute path; they go into the weights file")
      ->check(CLI::ExistingFile);
}

/// OUT.o -> OUT.h; OUT.o -> OUT.weights.safetensors (OUT without a .o keeps its name).
std::string siblingPath(const std::string &out, const std::string &suffix) {
  std::filesystem::path p(out);
  if (p.extension() == ".o")
    p.replace_extension();
  return p.string() + suffix;
}

/// --emit=dot -o X.svg: renders the DOT text with Graphviz (`dot -Tsvg`).
int renderSvg(const std::string &dotText, const std::string &svg,
              const std::vector<std::string> &inputs) {
  if (std::system("command -v dot >/dev/null 2>&1") != 0)
    userError("-o " + svg + ": rendering SVG needs Graphviz's `dot` on PATH; write the DOT "
              "text instead (-o FILE.dot, or stdout)");
  if (svg.find('\'') != std::string::npos)
    userError("-o " + svg + ": an SVG path may not contain a single quote");
  std::string tmp = svg + ".dot.tmp";
  writeFile(tmp, dotText.data(), dotText.size(), inputs);
  writeFile(svg, "", 0, inputs); // refuses to overwrite an input
  std::string cmd = "dot -Tsvg -o '" + svg + "' '" + tmp + "'";
  int rc = std::system(cmd.c_str());
  std::filesystem::remove(tmp);
  if (rc != 0) userError("-o " + svg + ": `dot -Tsvg` failed");
  return 0;
}

int compileCommand(const CompileOptions &o, const std::string &output) {
  CompileResult r = runPipeline(o);
  std::vector<std::string> inputs = inputFiles(o);
  if (r.stopped) {
    if (o.emit == "dot" && output.size() > 4 && output.substr(output.size() - 4) == ".svg")
      return renderSvg(r.emitted, output, inputs);
    if (o.emit == "fatbin" && (output.empty() || output == "-"))
      userError("--emit=fatbin writes binary data: give -o FILE");
    if (output.empty() || output == "-")
      std::cout << r.emitted << std::flush;
    else
      writeFile(output, r.emitted.data(), r.emitted.size(), inputs);
    return 0;
  }
  if (output.empty())
    userError("no output file: use -o OUT.o (or --emit=<stage> to print a stage)");
  std::string header = siblingPath(output, ".h");
  std::string weights = siblingPath(output, ".weights.safetensors");
  for (const std::string &out : {output, header, weights}) refuseToOverwriteInput(out, inputs);
  // All three or none: temporaries beside the targets, renamed into place at the end.
  OutputSet files(inputs);
  files.add(output, r.object.data(), r.object.size());
  files.add(header, r.header.data(), r.header.size());
  if (!r.weights.empty()) {
    // Parameters and buffers by FQN, with the archive's bytes unchanged.
    std::vector<rt::Tensor> tensors;
    tensors.reserve(r.weights.size());
    for (const Weight &w : r.weights)
      tensors.push_back(rt::Tensor::fromBytes(static_cast<rt::DType>(w.type.dtype), w.type.shape,
                                              w.bytes.data(), (int64_t)w.bytes.size()));
    std::vector<rt::NamedTensorRef> refs;
    for (size_t i = 0; i < tensors.size(); ++i)
      refs.push_back({r.weights[i].fqn, &tensors[i]});
    // The object's build id: the runtime refuses weights from another compile.
    std::vector<uint8_t> bytes = rt::serializeSafetensors(refs, {{"aotc.build_id", r.buildId}});
    files.add(weights, bytes.data(), bytes.size());
  }
  files.commit();
  return 0;
}

} // namespace

int main(int argc, char **argv) {
  CLI::App app{"aotc: ahead-of-time compiler for PyTorch training graphs.\n"
               "Compiles a torch.export archive or FX graph code into an object file with\n"
               "forward and backward entry points, a C header and the weights.",
               "aotc"};
  app.set_version_flag("--version", "aotc " AOTC_VERSION);
  app.require_subcommand(0, 1);

  CompileOptions compile;
  std::string output;
  addCompileFlags(app, compile, /*withEmit=*/true);
  app.get_option("input")->required(false);
  app.add_option("-o,--output", output,
                 "Object file to write (OUT.h and OUT.weights.safetensors are written next "
                 "to it); with --emit, the text file (default: stdout)");

  RunOptions run;
  CLI::App *runCmd = app.add_subcommand(
      "run", "Compile IN, load the object in-process (LLVM ORC) and run forward + backward");
  addCompileFlags(*runCmd, run.compile, /*withEmit=*/false, "host"); // runs here: one level
  runCmd->add_option("--inputs", run.inputs,
                     "safetensors with inputs by name (or input.<name>), parameters by FQN "
                     "(or param.<FQN>, buffer.<FQN>), and tangent_<i>; read only after IN compiled");
  runCmd->add_option("--out", run.out, "safetensors receiving output_<i> and grad_<name>")
      ->required();
  runCmd->add_option("--save-object", run.saveObject,
                     "Also write the object it loads (for comparing with `aotc IN -o`)");
  runCmd->add_flag("--profile{10}", run.profileSteps,
                   "After the step, run N more (default 10) and print each kernel's time, GB/s, GFLOP/s "
                   "and fraction of this machine's measured ceiling on stderr (docs/profiling.md)")
      ->check(CLI::PositiveNumber);

  GradcheckOptions gc;
  CLI::App *gcCmd = app.add_subcommand(
      "gradcheck", "Compile IN in f64 and compare its gradients with central differences");
  addCompileFlags(*gcCmd, gc.compile, /*withEmit=*/false, "host");
  gcCmd->add_option("--inputs", gc.inputs, "safetensors with the point to check at");
  gcCmd->add_option("--samples", gc.samples, "Elements checked per input")
      ->check(CLI::PositiveNumber)
      ->capture_default_str();
  gcCmd->add_option("--eps", gc.eps, "Central-difference step")->capture_default_str();
  gcCmd->add_option("--atol", gc.atol, "Absolute tolerance")->capture_default_str();
  gcCmd->add_option("--rtol", gc.rtol, "Relative tolerance")->capture_default_str();
  gcCmd->add_option("--seed", gc.seed, "Seed of the sampled elements and random inputs")
      ->capture_default_str();

  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError &e) {
    int rc = app.exit(e);
    return rc == 0 ? 0 : 1;
  }

  try {
    if (*runCmd)
      return runCommand(run);
    if (*gcCmd) {
      gc.compile.f64 = true;
      return gradcheckCommand(gc);
    }
    if (compile.input.empty())
      userError("no input file (see aotc --help)");
    compile.constantsRequired = compile.emit.empty();
    return compileCommand(compile, output);
  } catch (const Error &e) {
    std::cerr << e.what() << "\n";
    return e.exitCode();
  } catch (const rt::RuntimeError &e) {
    std::cerr << "error: " << e.what() << "\n";
    return 1;
  } catch (const std::exception &e) {
    std::cerr << "internal error: " << e.what() << "\n";
    return 2;
  }
}
