//===- Jit.h - Loading an aotc object in-process and binding its inputs -----===//
//
// `aotc run` and `aotc gradcheck` execute exactly the object `aotc -o` writes:
// LLVM ORC's LLJIT links it in memory (addObjectFile) and resolves BLAS, libomp
// and libm symbols from the aotc process itself. No interpreter is involved.
//===----------------------------------------------------------------------===//
#pragma once

#include "Driver.h"

#include "aotc/abi.h"
#include "aotc/runtime.h"
#include "aotc/safetensors.h"

#include <memory>
#include <string>
#include <vector>

namespace aotc::driver {

/// An object file linked into this process. Owns the JIT; the program
/// descriptor stays valid while the LoadedObject lives.
class LoadedObject {
public:
  /// Links `object` and looks up `<name>_program`. Failures are internal errors
  /// (aotc produced the object).
  LoadedObject(const std::vector<uint8_t> &object, const std::string &name);
  ~LoadedObject();
  const aotc_program &program() const { return *program_; }

private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
  const aotc_program *program_ = nullptr;
};

/// `--sanitize=MODE` code links against MODE's runtime: a user error naming `command`
/// unless this aotc process itself runs under that sanitizer (an AOTC_SANITIZE build).
void requireSanitizerRuntime(const std::string &mode, const char *command);

/// Builds the program's inputs in order. For input i (named n, FQN for
/// parameters): `file` entries n, then input.<n> / param.<n>; for parameters and
/// buffers then the archive weights; otherwise, when `fill` is set, a value
/// fill(i, desc) makes. A missing input is a user error naming it and `filePath`;
/// a wrong dtype/shape a user error naming both types.
using InputFiller = rt::Tensor (*)(const aotc_tensor_desc &desc, uint64_t seed);
std::vector<rt::Tensor> bindInputs(const aotc_program &prog, const std::vector<Weight> &weights,
                                   const rt::SafetensorsFile *file, const std::string &filePath,
                                   InputFiller fill = nullptr, uint64_t seed = 0);

/// Cotangents for backward: tangent_<i> from `file` when present, else ones;
/// nullptr for non-floating outputs.
std::vector<std::unique_ptr<rt::Tensor>> bindTangents(const aotc_program &prog,
                                                      const rt::SafetensorsFile *file,
                                                      const std::string &filePath);

} // namespace aotc::driver
