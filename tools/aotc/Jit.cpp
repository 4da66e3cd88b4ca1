//===- Jit.cpp - LLJIT loading of aotc objects; input binding ----------------===//
//
// The object is linked by ORC's LLJIT exactly as a static linker would link it
// into a program: BLAS (cblas_*), OpenMP (__kmpc_*) and libm symbols resolve
// against the aotc executable, which links OpenBLAS and LLVM's libomp for this
// reason (tools/aotc/CMakeLists.txt).
//===----------------------------------------------------------------------===//
#include "Jit.h"

#include "aotc/Diagnostics.h"

#include <dlfcn.h>
#include <llvm/ExecutionEngine/Orc/ExecutionUtils.h>
#include <llvm/ExecutionEngine/Orc/LLJIT.h>
#include <llvm/Support/Error.h>
#include <llvm/Support/MemoryBuffer.h>
#include <llvm/Support/TargetSelect.h>

namespace aotc::driver {

namespace {

template <class T> T unwrap(llvm::Expected<T> v, const std::string &what) {
  if (!v)
    internalError(what + ": " + llvm::toString(v.takeError()));
  return std::move(*v);
}

void check(llvm::Error e, const std::string &what) {
  if (e)
    internalError(what + ": " + llvm::toString(std::move(e)));
}

} // namespace

struct LoadedObject::Impl {
  std::unique_ptr<llvm::orc::LLJIT> jit;
};

void requireSanitizerRuntime(const std::string &mode, const char *command) {
  if (mode.empty()) return;
  const char *sym = mode == "address" ? "__asan_init" : "__tsan_init";
  if (!dlsym(RTLD_DEFAULT, sym))
    userError(std::string(command) + " --sanitize=" + mode + " runs the instrumented code in this "
              "process, which needs an aotc built with -fsanitize=" + mode +
              " (AOTC_SANITIZE=" + mode + " scripts/build.sh); this aotc is not. Compile with "
              "`aotc IN --sanitize=" + mode + " -o OUT.o` and link OUT.o into a program built with -fsanitize=" +
              mode);
}

LoadedObject::LoadedObject(const std::vector<uint8_t> &object, const std::string &name)
    : impl_(std::make_unique<Impl>()) {
  llvm::InitializeNativeTarget();
  llvm::InitializeNativeTargetAsmPrinter();
  impl_->jit = unwrap(llvm::orc::LLJITBuilder().create(), "cannot create the JIT");
  auto &jd = impl_->jit->getMainJITDylib();
  jd.addGenerator(unwrap(llvm::orc::DynamicLibrarySearchGenerator::GetForCurrentProcess(
                             impl_->jit->getDataLayout().getGlobalPrefix()),
                         "cannot search the process for symbols"));
  llvm::StringRef bytes(reinterpret_cast<const char *>(object.data()), object.size());
  check(impl_->jit->addObjectFile(llvm::MemoryBuffer::getMemBufferCopy(bytes, name + ".o")),
        "cannot add the object to the JIT");
  auto addr = unwrap(impl_->jit->lookup(name + "_program"),
                     "cannot link the object / find " + name + "_program");
  program_ = addr.toPtr<const aotc_program *>();
  check(impl_->jit->initialize(jd), "cannot run the object's initializers");
}

LoadedObject::~LoadedObject() = default;

std::vector<rt::Tensor> bindInputs(const aotc_program &prog, const std::vector<Weight> &weights,
                                   const rt::SafetensorsFile *file, const std::string &filePath,
                                   InputFiller fill, uint64_t seed) {
  std::vector<rt::Tensor> inputs;
  for (int i = 0; i < prog.num_inputs; ++i) {
    const aotc_tensor_desc &d = prog.inputs[i];
    const std::string name = d.name;
    const bool isWeight = aotc_role_is_weight(d.role);
    const rt::Tensor *t = nullptr;
    std::string from;
    if (file) {
      for (const std::string &key : {name, (isWeight ? "param." : "input.") + name, (isWeight ? "buffer." : "input.") + name})
        if ((t = file->find(key))) {
          from = filePath + ": '" + key + "'";
          break;
        }
    }
    if (t) {
      if (!t->matches(d))
        userError(from + " is " + t->typeString() + " but input '" + name + "' is " + rt::descTypeString(d) +
                  rt::fixedSizeNote(d, (int32_t)t->dtype(), (int32_t)t->shape().size()));
      inputs.push_back(t->clone());
      continue;
    }
    if (isWeight) {
      auto w = std::find_if(weights.begin(), weights.end(),
                            [&](const Weight &w) { return w.fqn == name; });
      if (w != weights.end()) {
        rt::Tensor v = rt::Tensor::fromBytes(static_cast<rt::DType>(w->type.dtype), w->type.shape,
                                             w->bytes.data(), (int64_t)w->bytes.size());
        if (!v.matches(d))
          internalError("archive weight '" + name + "' is " + v.typeString() +
                        " but the program input is " + rt::descTypeString(d));
        inputs.push_back(std::move(v));
        continue;
      }
    }
    if (d.role == AOTC_ROLE_RNG_STATE) { // seed 0, offset 0 unless the file gives one
      inputs.push_back(rt::rngState(0));
      continue;
    }
    if (fill) {
      inputs.push_back(fill(d, seed + (uint64_t)i));
      continue;
    }
    userError("missing input '" + name + "' (" + rt::descTypeString(d) + ")" +
              (filePath.empty() ? std::string(": pass it with --inputs FILE.safetensors")
                                : ": not in " + filePath));
  }
  return inputs;
}

std::vector<std::unique_ptr<rt::Tensor>> bindTangents(const aotc_program &prog,
                                                      const rt::SafetensorsFile *file,
                                                      const std::string &filePath) {
  std::vector<std::unique_ptr<rt::Tensor>> tangents;
  for (int i = 0; i < prog.num_outputs; ++i) {
    const aotc_tensor_desc &d = prog.outputs[i];
    const std::string key = "tangent_" + std::to_string(i);
    const rt::Tensor *t = file ? file->find(key) : nullptr;
    if (d.updates_input >= 0 && !aotc_output_takes_tangent(&d)) { // a mutated buffer's new value (abi.h)
      if (t)
        userError(filePath + ": '" + key + "' given, but output " + std::to_string(i) +
                  " is the new value of input '" + prog.inputs[d.updates_input].name +
                  "', which does not require grad: it takes no cotangent (as in PyTorch, a mutated buffer is "
                  "not differentiated)");
      tangents.push_back(nullptr);
      continue;
    }
    if (!aotc_output_takes_tangent(&d)) {
      tangents.push_back(nullptr);
      continue;
    }
    if (t && !t->matches(d))
      userError(filePath + ": '" + key + "' is " + t->typeString() + " but output " +
                std::to_string(i) + " is " + rt::descTypeString(d));
    // Default: ones; zeros for a mutated input's new value (nothing used it after the call).
    tangents.push_back(std::make_unique<rt::Tensor>(
        t ? t->clone()
          : rt::Tensor::full(rt::dtypeFromAbi(d.dtype),
                             std::vector<int64_t>(d.shape, d.shape + d.rank), d.updates_input >= 0 ? 0.0 : 1.0)));
  }
  return tangents;
}

} // namespace aotc::driver
