//===- fuzz_safetensors.cpp - libFuzzer harness: the safetensors reader -----===//
//
// parseSafetensors (runtime/src/Safetensors.cpp) is the one C++ reader: the runtime's
// readSafetensors, `aotc run --inputs` and `aotc gradcheck --inputs` all go through it
// (lib/ has no reader of its own). A rejection is rt::RuntimeError. Beyond crashes, for
// every accepted input x (docs/fuzzing.md):
//  * y = serializeSafetensors(parse(x)) parses again, to the same tensors in the same
//    order (name, dtype, shape, bytes) and the same metadata;
//  * serialize(parse(y)) == y (the writer is a fixpoint: equal inputs, equal files);
//  * every tensor holds numel * itemsize bytes, and the tensors' bytes add up to the
//    data section of x (the reader forbids holes and overlaps).
//===----------------------------------------------------------------------===//
#include "FuzzCommon.h"

#include "aotc/safetensors.h"

#include <nlohmann/json.hpp>

#include <cstring>
#include <fstream>

using namespace aotc;

namespace {

std::vector<uint8_t> reserialize(const rt::SafetensorsFile &f) {
  std::vector<rt::NamedTensorRef> refs;
  for (const auto &[name, t] : f.tensors)
    refs.push_back({name, &t});
  try {
    return rt::serializeSafetensors(refs, f.metadata);
  } catch (const std::exception &e) {
    fuzz::bug(std::string("safetensors: cannot write back what was read: ") + e.what());
  }
}

rt::SafetensorsFile reparse(const std::vector<uint8_t> &bytes, const char *what) {
  try {
    return rt::parseSafetensors(bytes.data(), bytes.size(), what);
  } catch (const std::exception &e) {
    fuzz::bug(std::string("safetensors: the writer's file is rejected by the reader: ") + e.what());
  }
}

void checkSame(const rt::SafetensorsFile &a, const rt::SafetensorsFile &b) {
  if (a.metadata != b.metadata)
    fuzz::bug("safetensors: metadata differs after a write/read round trip");
  if (a.tensors.size() != b.tensors.size())
    fuzz::bug("safetensors: tensor count differs after a write/read round trip");
  for (size_t i = 0; i < a.tensors.size(); ++i) {
    const auto &[na, ta] = a.tensors[i];
    const auto &[nb, tb] = b.tensors[i];
    if (na != nb || ta.dtype() != tb.dtype() || ta.shape() != tb.shape() || ta.bytes() != tb.bytes() ||
        (ta.bytes() && std::memcmp(ta.data(), tb.data(), (size_t)ta.bytes()) != 0))
      fuzz::bug("safetensors: tensor " + std::to_string(i) + " ('" + na + "' " + ta.typeString() +
                ") differs after a write/read round trip ('" + nb + "' " + tb.typeString() + ")");
  }
}

} // namespace

/// AOTC_FUZZ_SAFETENSORS_DUMP=FILE: one JSON line per input appended to FILE (the verdict,
/// and per tensor its name, dtype, shape and a hash of its bytes; the metadata), for the
/// comparison with the Python reader (safetensors_readers.py).
static void dump(const uint8_t *data, size_t size, const rt::SafetensorsFile *f) {
  static const char *path = std::getenv("AOTC_FUZZ_SAFETENSORS_DUMP");
  if (!path)
    return;
  auto fnv = [](const void *p, size_t n) {
    uint64_t h = 1469598103934665603ull;
    for (size_t i = 0; i < n; ++i)
      h = (h ^ static_cast<const uint8_t *>(p)[i]) * 1099511628211ull;
    return std::to_string(h);
  };
  nlohmann::json j = {{"input", fnv(data, size)}, {"ok", f != nullptr}};
  if (f) {
    nlohmann::json ts = nlohmann::json::array();
    for (const auto &[name, t] : f->tensors)
      ts.push_back({name, rt::safetensorsDTypeName(t.dtype()), t.shape(), fnv(t.data(), (size_t)t.bytes())});
    j["tensors"] = ts;
    j["metadata"] = f->metadata;
  }
  std::ofstream(path, std::ios::app) << j.dump() << "\n";
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  rt::SafetensorsFile f;
  try {
    f = rt::parseSafetensors(data, size, "fuzz.safetensors");
  } catch (const rt::RuntimeError &) {
    dump(data, size, nullptr);
    return 0; // a rejection
  } catch (const std::exception &e) {
    fuzz::bug(std::string("safetensors: unexpected exception: ") + e.what());
  }
  dump(data, size, &f);
  uint64_t headerLen = 0;
  for (int i = 7; i >= 0; --i)
    headerLen = (headerLen << 8) | data[i];
  int64_t total = 0;
  for (const auto &[name, t] : f.tensors) {
    int64_t n = 1;
    for (int64_t d : t.shape())
      if (d < 0 || __builtin_mul_overflow(n, d, &n))
        fuzz::bug("safetensors: tensor '" + name + "' has an invalid shape " + t.typeString());
    if (n != t.numel() || t.bytes() != n * rt::itemSize(t.dtype()))
      fuzz::bug("safetensors: tensor '" + name + "' " + t.typeString() + " has inconsistent numel/bytes");
    total += t.bytes();
  }
  if ((uint64_t)total != size - 8 - headerLen)
    fuzz::bug("safetensors: accepted tensors cover " + std::to_string(total) + " of the " +
              std::to_string(size - 8 - headerLen) + " data bytes");
  std::vector<uint8_t> y = reserialize(f);
  rt::SafetensorsFile g = reparse(y, "rewritten.safetensors");
  checkSame(f, g);
  if (reserialize(g) != y)
    fuzz::bug("safetensors: serialize(parse(serialize(parse(x)))) != serialize(parse(x))");
  return 0;
}
