//===- BuildId.cpp - The build id shared by one compile's .o, .h and weights --===//
//
// buildId() hashes (SHA-256, LLVM's) everything that determines a compile's outputs:
// aotc's version, the bytes of IN and of every --derivatives file, and each option that
// changes what is emitted. Equal inputs give equal ids, so outputs stay byte-identical;
// any change gives another id, so a new .o beside an old .h or weights file is detected
// (docs/abi.md "Build id").
//===----------------------------------------------------------------------===//
#include "Driver.h"

#include "llvm/ADT/StringRef.h"
#include "llvm/Support/SHA256.h"

#include <array>
#include <string>

namespace aotc::driver {

std::string buildId(const CompileOptions &o) {
  llvm::SHA256 h;
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
  field("abi", std::to_string(AOTC_ABI_VERSION));
  field("input", readFile(o.input));
  for (const std::string &d : o.derivatives) field("derivatives", readFile(d));
  field("start-from", o.startFrom);
  field("partitioner", o.partitioner == PartitionerKind::Default ? "default" : "min-cut");
  field("name", o.name);
  field("target", o.target);
  if (o.target == "cuda") {
    field("cuda-arch", list(o.cudaArchs));
    field("cuda-toolkit", o.cudaToolkit);
    field("allow-tf32", o.allowTf32 ? "1" : "0");
  }
  field("requires-grad", list(o.requiresGrad));
  field("freeze", list(o.freeze));
  field("f64", o.f64 ? "1" : "0");
  field("max-tensor-bytes", std::to_string(o.maxTensorBytes));
  field("sanitize", o.sanitize);
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
