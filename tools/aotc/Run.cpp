//===- Run.cpp - `aotc run`: compile, JIT-link the object, run one step ------===//
//
//   aotc run IN [--inputs in.safetensors] --out out.safetensors [compile flags]
//
// 1. Compiles IN exactly as `aotc IN -o OUT.o` would (same object bytes), so
//    every graph error is reported before any input is read.
// 2. Reads --inputs: user inputs by name (or input.<name>), parameters/buffers
//    by FQN (or param.<FQN>, buffer.<FQN>; default: the archive's values), cotangents
//    tangent_<i> (default: ones). A missing input is a user error naming it.
// 3. Links the object in-process (Jit.h) and calls <name>_forward and
//    <name>_backward through the runtime's DifferentiableFunction.
// 4. Writes output_<i> (forward outputs) and grad_<name> (one per gradient).
// --profile[=N]: N more forward + backward calls after the first, then the profile report of
//    those N (docs/profiling.md) on stderr when the function is destroyed.
//===----------------------------------------------------------------------===//
#include "Jit.h"

#include "aotc/Diagnostics.h"

#include <cstdlib>
#include <optional>

namespace aotc::driver {

int runCommand(const RunOptions &o) {
  if (o.compile.target == "cuda")
    userError("aotc run --target=cuda: aotc does not run on a GPU (it is a compiler; the machine that "
              "builds need not have one). Compile with `aotc IN --target=cuda -o OUT.o` and link the "
              "object with the CUDA runtime and a driver: tools/gpu/train_cuda.cpp, or "
              "scripts/gpu-check.sh (docs/cuda.md)");
  requireSanitizerRuntime(o.compile.sanitize, "aotc run");
  CompileResult compiled = runPipeline(o.compile);
  AOTC_ASSERT(!compiled.stopped, "aotc run never stops early");

  std::optional<rt::SafetensorsFile> file;
  if (!o.inputs.empty()) {
    try {
      file = rt::readSafetensors(o.inputs);
    } catch (const rt::RuntimeError &e) {
      userError(e.what());
    }
  }
  std::vector<std::string> readFiles = inputFiles(o.compile);
  if (!o.inputs.empty())
    readFiles.push_back(o.inputs);

  if (!o.saveObject.empty())
    writeFile(o.saveObject, compiled.object.data(), compiled.object.size(), readFiles);
  LoadedObject obj(compiled.object, compiled.program.name);
  const aotc_program &prog = obj.program();
  std::vector<rt::Tensor> inputs =
      bindInputs(prog, compiled.weights, file ? &*file : nullptr, o.inputs);
  std::vector<std::unique_ptr<rt::Tensor>> tangents =
      bindTangents(prog, file ? &*file : nullptr, o.inputs);

  // --profile: the context is profiled (a text report on stderr unless AOTC_PROFILE names a
  // file); the first step is left out of the report (rt::resetProfiles after it).
  if (o.profileSteps > 0) {
    const char *env = std::getenv("AOTC_PROFILE");
    rt::setProfile(env && *env && std::string(env) != "0" ? env : "1");
  }
  rt::DifferentiableFunction f(prog);
  std::vector<const rt::Tensor *> inPtrs, tanPtrs;
  for (const rt::Tensor &t : inputs)
    inPtrs.push_back(&t);
  for (const auto &t : tangents)
    tanPtrs.push_back(t.get());
  std::vector<rt::Tensor> outputs, grads;
  try {
    auto fwd = f.forward(inPtrs);
    outputs = std::move(fwd.outputs);
    if (prog.num_grads > 0)
      grads = f.backward(fwd.state, tanPtrs);
    if (o.profileSteps > 0) rt::resetProfiles();
    for (int s = 0; s < o.profileSteps; ++s) {
      auto again = f.forward(inPtrs);
      if (prog.num_grads > 0) f.backward(again.state, tanPtrs);
    }
  } catch (const rt::RuntimeError &e) {
    // Out-of-range indices and the like: the user's data, named by node and value.
    userError(e.what());
  }

  std::vector<rt::NamedTensorRef> refs;
  std::vector<std::string> names;
  for (size_t i = 0; i < outputs.size(); ++i)
    refs.push_back({"output_" + std::to_string(i), &outputs[i]});
  for (int j = 0; j < prog.num_grads; ++j)
    refs.push_back({std::string("grad_") + prog.inputs[prog.grad_input_index[j]].name, &grads[j]});
  std::vector<uint8_t> bytes = rt::serializeSafetensors(refs);
  writeFile(o.out, bytes.data(), bytes.size(), readFiles);
  return 0;
}

} // namespace aotc::driver
