//===- BuildId.cpp - The build id shared by one compile's .o, .h and weights --===//
//
// buildId() hashes (SHA-256, LLVM's) everything that determines a compile's outputs:
// aotc's version and a hash of its sources (AOTC_SOURCE_HASH, generated at build time,
// so a rebuilt aotc gives other ids), the bytes of IN, of the built-in derivatives.yaml
// and of every --derivatives file, the program name, and each option that changes what
// is emitted. Equal inputs give equal ids, so outputs stay byte-identical;
// any change gives another id, so a new .o beside an old .h or weights file is detected
// (docs/abi.md "Build id").
//===----------------------------------------------------------------------===//
#include "Driver.h"

#include "aotc/Autodiff.h"
#include "aotc/Optimizer.h"
#include "aotc/Diagnostics.h"
#include "aotc_source_hash.h"

#include "llvm/ADT/StringRef.h"
#include "llvm/Support/SHA256.h"

#include <cerrno>
#include <cstring>
#include <algorithm>
#include <array>
#include <cstdio>
#include <fstream>
#include <string>

namespace aotc::driver {

std::string buildId(const CompileOptions &o, const std::string &programName) {
  llvm::SHA256 h;
  // A file's bytes, read in chunks (IN may be a large archive), length-prefixed.
  auto fileField = [&](const std::string &key, const std::string &path) {
    std::ifstream in(path, std::ios::binary);
    if (!in) userError(SourceLoc{path, 0, 0}, std::string("cannot open file: ") + std::strerror(errno));
    std::string head = key + "=file:";
    h.update(llvm::StringRef(head));
    char buf[1 << 16];
    uint64_t total = 0;
    while (in.read(buf, sizeof buf) || in.gcount() > 0) {
      h.update(llvm::StringRef(buf, (size_t)in.gcount()));
      total += (uint64_t)in.gcount();
    }
    std::string tail = ":" + std::to_string(total) + "\n";
    h.update(llvm::StringRef(tail));
  };
  auto field = [&](const std::string &key, const std::string &value) {
    // Length-prefixed, so no two different option sets hash the same bytes.
    std::string rec = key + "=" + std::to_string(value.size()) + ":" + value + "\n";
    h.update(llvm::StringRef(rec));
  };
  auto list = [](const std::vector<std::string> &v) {
    std::string s;
    for (const std::string &x : v) s += std::to_string(x.size()) + ":" + x + ",";
    return s;
  };
  field("aotc", AOTC_VERSION);
  field("sources", AOTC_SOURCE_HASH);
  field("abi", std::to_string(AOTC_ABI_VERSION));
  fileField("input", o.input);
  fileField("builtin-derivatives", builtinDerivativesPath());
  for (const std::string &d : o.derivatives) fileField("derivatives", d);
  if (!o.constants.empty()) fileField("constants", o.constants);
  field("start-from", o.startFrom);
  field("partitioner", o.partitioner == PartitionerKind::Default ? "default" : "min-cut");
  field("name", programName);
  field("target", o.target);
  if (o.target == "cpu") field("cpu", o.cpu);
  if (o.target == "cpu" && o.cpuGemm != "openblas") field("cpu-gemm", o.cpuGemm);
  if (o.target == "cuda") {
    field("cuda-arch", list(o.cudaArchs));
    field("cuda-toolkit", o.cudaToolkit);
    field("allow-tf32", o.allowTf32 ? "1" : "0");
  }
  field("requires-grad", list(o.requiresGrad));
  field("freeze", list(o.freeze));
  if (!o.specialize.empty()) { // the entries' order does not matter (Sizes.cpp binds them all)
    std::vector<std::string> sorted = o.specialize;
    std::sort(sorted.begin(), sorted.end());
    field("specialize", list(sorted));
  }
  if (!o.maxSize.empty()) {
    std::vector<std::string> sorted = o.maxSize;
    std::sort(sorted.begin(), sorted.end());
    field("max-size", list(sorted));
  }
  field("f64", o.f64 ? "1" : "0");
  field("max-tensor-bytes", std::to_string(o.maxTensorBytes));
  field("sanitize", o.sanitize);
  if (!o.optimizer.empty()) {
    // The canonical spelling, so equivalent texts give one id.
    field("optimizer", parseOptimizerSpec(o.optimizer).str());
    char clip[64];
    std::snprintf(clip, sizeof clip, "%.17g", o.clipGradNorm);
    field("clip-grad-norm", clip);
    field("skip-nonfinite", o.skipNonfinite ? "1" : "0");
    field("grad-accumulation", o.gradAccumulation ? "1" : "0");
    if (!o.dataParallel.empty()) field("data-parallel", std::to_string(dataParallelBucketBytes(o.dataParallel)));
    if (o.worldSize > 0) field("world-size", std::to_string(o.worldSize));
  }
  std::array<uint8_t, 32> d = h.final();
  static const char *hex = "0123456789abcdef";
  std::string id;
  for (int i = 0; i < 16; ++i) {
    id += hex[d[i] >> 4];
    id += hex[d[i] & 15];
  }
  return id;
}

} // namespace aotc::driver
