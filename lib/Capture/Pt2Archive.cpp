//===- Pt2Archive.cpp - torch.export .pt2 zip -> Program + weights ----------===//
//
// Layout written by torch.export.save (torch/export/pt2_archive/_package.py,
// torch/csrc/export/pt2_archive_constants.h), everything under one root folder
// taken from the first entry's name:
//   <root>/archive_format                         "pt2"
//   <root>/models/model.json                      ExportedProgram JSON
//   <root>/data/weights/model_weights_config.json {"config": {FQN: {path_name,
//                                                  is_param, use_pickle, tensor_meta}}}
//   <root>/data/weights/weight_<N>                raw storage bytes (native order)
//   <root>/data/constants/...                     same scheme for constants
// A payload is the whole untyped storage behind the tensor; the tensor is
// as_strided(sizes, strides, storage_offset) of it (_package.py
// `_build_file_map`/`_load_state_dict`). A 0-byte payload means zeros.
//===----------------------------------------------------------------------===//
#include "aotc/Capture.h"

#include <nlohmann/json.hpp>
#include <zip.h>

#include <algorithm>
#include <cctype>
#include <list>
#include <cstring>
#include <map>
#include <memory>
#include <optional>

namespace aotc {
namespace {

using json = nlohmann::json;

/// A read-only libzip archive.
class Zip {
public:
  explicit Zip(const std::string &path) : path_(path) {
    int err = 0;
    za_ = zip_open(path.c_str(), ZIP_RDONLY | ZIP_CHECKCONS, &err);
    if (!za_) {
      zip_error_t ze;
      zip_error_init_with_code(&ze, err);
      std::string msg = zip_error_strerror(&ze);
      zip_error_fini(&ze);
      userError(SourceLoc{path}, "cannot read the .pt2 archive: " + msg +
                                     " (truncated or not a zip file?)");
    }
    zip_int64_t n = zip_get_num_entries(za_, 0);
    for (zip_int64_t i = 0; i < n; ++i) {
      const char *nm = zip_get_name(za_, (zip_uint64_t)i, 0);
      if (nm) names_.push_back(nm);
    }
  }
  ~Zip() {
    if (za_) zip_discard(za_);
  }
  Zip(const Zip &) = delete;
  Zip &operator=(const Zip &) = delete;

  const std::vector<std::string> &names() const { return names_; }
  bool has(const std::string &name) const {
    return std::find(names_.begin(), names_.end(), name) != names_.end();
  }
  /// The member's bytes; std::nullopt when absent. A read failure is a user error.
  /// The size the central directory declares is never trusted for an allocation: it must
  /// be possible for the compressed bytes that are present (stored: equal; deflate: at most
  /// 1032:1, the format's maximum ratio), and the data is read in chunks, so memory grows
  /// only with bytes actually decompressed.
  std::optional<std::string> read(const std::string &name) const {
    zip_stat_t st;
    zip_stat_init(&st);
    if (zip_stat(za_, name.c_str(), 0, &st) != 0) return std::nullopt;
    if (!(st.valid & ZIP_STAT_SIZE)) userError(SourceLoc{path_}, "archive member '" + name + "' has no size");
    if ((st.valid & ZIP_STAT_COMP_METHOD) && st.comp_method != ZIP_CM_STORE && st.comp_method != ZIP_CM_DEFLATE)
      userError(SourceLoc{path_}, "archive member '" + name + "' uses compression method " +
                                      std::to_string(st.comp_method) +
                                      "; torch.export writes stored or deflated members only");
    if ((st.valid & ZIP_STAT_COMP_SIZE) && (st.valid & ZIP_STAT_COMP_METHOD)) {
      zip_uint64_t bound = st.comp_method == ZIP_CM_STORE
                               ? st.comp_size
                               : (st.comp_size > (UINT64_MAX - 64) / 1032 ? UINT64_MAX
                                                                           : st.comp_size * 1032 + 64);
      if (st.size > bound)
        userError(SourceLoc{path_}, "archive member '" + name + "' declares " + std::to_string(st.size) +
                                        " bytes but holds only " + std::to_string(st.comp_size) +
                                        " compressed bytes (corrupt archive)");
    }
    std::unique_ptr<zip_file_t, int (*)(zip_file_t *)> f(zip_fopen(za_, name.c_str(), 0), zip_fclose);
    if (!f)
      userError(SourceLoc{path_}, "cannot open archive member '" + name + "': " + zip_strerror(za_));
    std::string data;
    char chunk[1 << 16];
    for (;;) {
      zip_int64_t got = zip_fread(f.get(), chunk, sizeof chunk);
      if (got < 0)
        userError(SourceLoc{path_}, "cannot read archive member '" + name + "': " + zip_file_strerror(f.get()));
      if (got == 0) break;
      if (data.size() + (zip_uint64_t)got > st.size)
        userError(SourceLoc{path_}, "archive member '" + name + "' holds more than the " +
                                        std::to_string(st.size) + " bytes it declares (corrupt archive)");
      data.append(chunk, (size_t)got);
    }
    if (data.size() != st.size)
      userError(SourceLoc{path_}, "cannot read archive member '" + name + "' (" +
                                      std::to_string(data.size()) + " of the " + std::to_string(st.size) +
                                      " declared bytes: truncated or corrupt)");
    return data;
  }

private:
  std::string path_;
  zip_t *za_ = nullptr;
  std::vector<std::string> names_;
};

std::string trim(std::string s) {
  while (!s.empty() && std::isspace((unsigned char)s.back())) s.pop_back();
  size_t b = 0;
  while (b < s.size() && std::isspace((unsigned char)s[b])) ++b;
  return s.substr(b);
}

/// One entry of a PayloadConfig JSON.
struct Payload {
  std::string path;   ///< Member path relative to the root ("data/weights/weight_0").
  bool usePickle = false;
  const json *meta = nullptr;
  std::string configMember;
};

class Pt2Reader {
public:
  Pt2Reader(const std::string &path, int64_t maxWeightBytes)
      : path_(path), zip_(path), maxWeightBytes_(maxWeightBytes) {}
  Program run(std::vector<Weight> *weights, const std::vector<std::string> &specialize,
              const std::vector<std::string> &maxSize);

private:
  [[noreturn]] void fail(const std::string &msg) const { userError(SourceLoc{path_}, msg); }
  void readConfig(const std::string &member, const std::string &dir);
  Weight loadWeight(const Node &ph);
  void mergeTiedWeights(Program &p);

  std::string path_;
  Zip zip_;
  std::string root_;
  std::list<json> configs_;   // kept alive: Payload::meta points into them
  std::map<std::string, Payload> payloads_;
  int64_t maxWeightBytes_;
};

void Pt2Reader::readConfig(const std::string &member, const std::string &dir) {
  auto text = zip_.read(root_ + member);
  if (!text) return;
  std::string where = path_ + ":" + member;
  json j;
  try {
    j = json::parse(*text);
  } catch (const json::parse_error &e) {
    userError(SourceLoc{where}, std::string("invalid JSON: ") + e.what());
  }
  if (!j.is_object() || !j.contains("config") || !j["config"].is_object())
    userError(SourceLoc{where}, "malformed weights config: expected {\"config\": {FQN: {...}}}");
  configs_.push_back(std::move(j));
  const json &cfg = configs_.back()["config"];
  for (auto it = cfg.begin(); it != cfg.end(); ++it) {
    const json &e = it.value();
    if (!e.is_object() || !e.contains("path_name") || !e["path_name"].is_string())
      userError(SourceLoc{where}, "entry '" + it.key() + "' has no string 'path_name'");
    Payload p;
    p.path = dir + e["path_name"].get<std::string>();
    p.usePickle = e.contains("use_pickle") && e["use_pickle"].is_boolean() && e["use_pickle"].get<bool>();
    if (e.contains("tensor_meta") && e["tensor_meta"].is_object()) p.meta = &e["tensor_meta"];
    p.configMember = member;
    payloads_.emplace(it.key(), p);
  }
}

/// The contiguous bytes of one parameter/buffer, validated against the graph input.
/// Tied weights (nanoGPT's and GPT-2's head sharing the token embedding): torch.export lifts each
/// FQN as its own placeholder, but both weights-config entries name one payload with the same
/// tensor_meta. They are one tensor, as in module.named_parameters(): the later placeholders'
/// uses are redirected to the first (its FQN is the one named_parameters() reports) and they are
/// dropped, so the gradient of the shared tensor sums both uses. A 0-element tensor is never
/// merged: torch.export.save describes every empty tensor alike (offset 0, no bytes), so two
/// distinct empty parameters would look tied, and an empty one has nothing to share anyway.
void Pt2Reader::mergeTiedWeights(Program &p) {
  std::map<std::string, Node *> first; // payload identity -> first placeholder
  std::vector<Node *> drop;
  for (Node *ph : p.forward.placeholders()) {
    if (ph->role != InputRole::Parameter && ph->role != InputRole::Buffer) continue;
    if (ph->type().numel() == 0) continue;
    auto it = payloads_.find(ph->fqn);
    if (it == payloads_.end() || it->second.usePickle) continue; // loadWeight reports it
    const Payload &pl = it->second;
    std::string key = std::string(roleName(ph->role)) + "|" + pl.configMember + "|" + pl.path + "|" +
                      (pl.meta ? pl.meta->dump() : std::string());
    auto [at, fresh] = first.emplace(key, ph);
    if (fresh) continue;
    if (at->second->type() != ph->type()) continue; // a different view of one storage: kept apart
    p.forward.replaceAllUses(ph, at->second);
    drop.push_back(ph);
  }
  for (Node *ph : drop) p.forward.erase(ph);
}

Weight Pt2Reader::loadWeight(const Node &ph) {
  const std::string what = std::string(roleName(ph.role)) + " '" + ph.fqn + "'";
  auto it = payloads_.find(ph.fqn);
  if (it == payloads_.end())
    fail("no payload for " + what + (ph.role == InputRole::Constant ? " in data/constants/model_constants_config.json"
                                                                    : " in data/weights/model_weights_config.json"));
  const Payload &pl = it->second;
  if (pl.usePickle)
    fail(what + " is stored as a pickle (use_pickle=true, e.g. a tensor subclass); aotc reads raw payloads only");
  const TensorType &ty = ph.type();
  int64_t item = itemSize(ty.dtype);
  Shape sizes = ty.shape;
  std::vector<int64_t> strides = contiguousStrides(sizes);
  int64_t offset = 0;
  if (pl.meta) {
    const json &m = *pl.meta;
    auto ints = [&](const char *key, std::vector<int64_t> &out) {
      if (!m.contains(key) || !m[key].is_array()) return false;
      out.clear();
      for (const json &s : m[key]) {
        if (!s.is_object() || !s.contains("as_int") || !s["as_int"].is_number_integer())
          fail(what + ": tensor_meta." + key + " must be static integers (dynamic shapes not supported yet)");
        out.push_back(s["as_int"].get<int64_t>());
      }
      return true;
    };
    std::vector<int64_t> ms;
    if (ints("sizes", ms) && ms != sizes)
      fail(what + ": weights config says shape " + shapeStr(ms) + " but the graph input '" + ph.name +
           "' is " + ty.str());
    if (m.contains("dtype") && m["dtype"].is_number_integer()) {
      int64_t d = m["dtype"].get<int64_t>();
      static const std::map<int64_t, DType> dts = {{1, DType::U8},  {4, DType::I32}, {5, DType::I64},
                                                   {7, DType::F32}, {8, DType::F64}, {12, DType::Bool}};
      auto dt = dts.find(d);
      if (dt == dts.end()) fail(what + ": unsupported dtype (ScalarType " + std::to_string(d) + ")");
      if (dt->second != ty.dtype)
        fail(what + ": weights config says dtype " + dtypeAbbr(dt->second) + " but the graph input '" +
             ph.name + "' is " + ty.str());
    }
    std::vector<int64_t> st;
    if (ints("strides", st)) {
      if (st.size() != sizes.size()) fail(what + ": tensor_meta.strides has the wrong rank");
      strides = st;
    }
    if (m.contains("storage_offset") && m["storage_offset"].is_object() &&
        m["storage_offset"].contains("as_int") && m["storage_offset"]["as_int"].is_number_integer())
      offset = m["storage_offset"]["as_int"].get<int64_t>();
  }
  auto data = zip_.read(root_ + pl.path);
  if (!data) fail("missing weight file '" + pl.path + "' for " + what + " (listed in " + pl.configMember + ")");
  Weight w;
  w.fqn = ph.fqn;
  w.type = ty;
  // Checked arithmetic: the sizes, strides and offset come from the archive.
  int64_t numel = 1, nbytes = 0;
  for (int64_t d : sizes)
    if (__builtin_mul_overflow(numel, d, &numel)) fail(what + ": " + ty.str() + " has too many elements");
  if (__builtin_mul_overflow(numel, item, &nbytes)) fail(what + ": " + ty.str() + " has too many bytes");
  if (numel == 0) return w;
  if (data->empty()) {
    w.bytes.assign((size_t)nbytes, 0); // torch writes 0 bytes for an all-zero storage
    return w;
  }
  if ((int64_t)data->size() % item != 0)
    fail("weight file '" + pl.path + "' for " + what + " has " + std::to_string(data->size()) +
         " bytes, not a multiple of the " + std::to_string(item) + "-byte " + dtypeAbbr(ty.dtype) + " element");
  int64_t storage = (int64_t)data->size() / item;
  // Extent of the strided view, without overflow: every index stays below `storage`.
  if (offset < 0) fail(what + ": negative storage offset " + std::to_string(offset));
  bool overflow = false;
  int64_t maxIdx = offset;
  for (size_t d = 0; d < sizes.size() && !overflow; ++d) {
    if (strides[d] < 0) fail(what + ": negative strides are not supported");
    int64_t step = 0;
    overflow = __builtin_mul_overflow(sizes[d] - 1, strides[d], &step) ||
               __builtin_add_overflow(maxIdx, step, &maxIdx);
  }
  int64_t need = 0;
  if (overflow || maxIdx >= storage) {
    std::string needs = !overflow && !__builtin_mul_overflow(maxIdx + 1, item, &need)
                            ? std::to_string(need)
                            : std::string("more than 2^63");
    fail("weight file '" + pl.path + "' for " + what + " has " + std::to_string(data->size()) +
         " bytes, but " + ty.str() + " needs " + needs + " (shape x itemsize" +
         (offset ? std::string(" + storage offset") : "") + ")");
  }
  // A view may repeat storage (stride 0): the tensor it expands to is bounded separately.
  if (nbytes > maxWeightBytes_)
    fail(what + ": " + ty.str() + " is " + std::to_string(nbytes) + " bytes, above --max-tensor-bytes=" +
         std::to_string(maxWeightBytes_));
  w.bytes.assign((size_t)nbytes, 0);
  // Gather into row-major order.
  std::vector<int64_t> idx(sizes.size(), 0);
  for (int64_t flat = 0; flat < numel; ++flat) {
    int64_t src = offset;
    for (size_t d = 0; d < sizes.size(); ++d) src += idx[d] * strides[d];
    std::memcpy(w.bytes.data() + flat * item, data->data() + src * item, (size_t)item);
    for (size_t d = sizes.size(); d-- > 0;) {
      if (++idx[d] < sizes[d]) break;
      idx[d] = 0;
    }
  }
  return w;
}

Program Pt2Reader::run(std::vector<Weight> *weights, const std::vector<std::string> &specialize,
                       const std::vector<std::string> &maxSize) {
  const auto &names = zip_.names();
  if (names.empty()) fail("the .pt2 archive is empty");
  for (const std::string &n : names) {
    std::string base = n.substr(n.find('/') == std::string::npos ? 0 : n.find('/') + 1);
    if (n == "serialized_exported_program.json" || base == "serialized_exported_program.json")
      fail("this archive uses the torch 2.6/2.7 torch.export.save layout (serialized_exported_program.json); "
           "re-export with torch >= 2.9: torch.export.save(ep.run_decompositions(), 'model.pt2')");
  }
  size_t slash = names[0].find('/');
  root_ = slash == std::string::npos ? "" : names[0].substr(0, slash + 1);
  auto fmt = zip_.read(root_ + "archive_format");
  if (!fmt) fail("not a torch.export .pt2 archive: no '" + root_ + "archive_format' record");
  if (trim(*fmt) != "pt2")
    fail("wrong archive_format '" + trim(*fmt) + "' (expected 'pt2'; is this a torch.save or AOTInductor file?)");
  if (auto bo = zip_.read(root_ + "byteorder"); bo && trim(*bo) != "little")
    fail("archive byteorder is '" + trim(*bo) + "'; aotc reads little-endian archives only");

  // The model JSON: models/model.json, else the only models/*.json.
  std::string modelName = "model";
  std::string member = "models/model.json";
  if (!zip_.has(root_ + member)) {
    std::vector<std::string> found;
    for (const std::string &n : names)
      if (n.rfind(root_ + "models/", 0) == 0 && n.size() > 5 && n.substr(n.size() - 5) == ".json")
        found.push_back(n.substr(root_.size()));
    if (found.empty()) fail("the archive has no models/*.json (no exported program)");
    if (found.size() > 1) fail("the archive holds several programs (" + found[0] + ", " + found[1] + ", ...); aotc compiles one");
    member = found[0];
    modelName = member.substr(7, member.size() - 12);
  }
  std::string text = *zip_.read(root_ + member);
  Program p = readExportedProgram(text, path_ + ":" + member, specialize, maxSize);

  // Weights and constants.
  std::string wcfg = "data/weights/" + modelName + "_weights_config.json";
  if (!zip_.has(root_ + wcfg) && zip_.has(root_ + "data/weights/" + modelName + ".pt"))
    fail("this archive stores its weights as one torch.save pickle (data/weights/" + modelName +
         ".pt, torch 2.8); re-export with torch >= 2.9 to get raw weight payloads");
  readConfig(wcfg, "data/weights/");
  readConfig("data/constants/" + modelName + "_constants_config.json", "data/constants/");
  mergeTiedWeights(p);
  std::vector<Weight> loaded;
  for (Node *ph : p.forward.placeholders()) {
    if (ph->role != InputRole::Parameter && ph->role != InputRole::Buffer && ph->role != InputRole::Constant) continue;
    if (payloads_.empty() && !zip_.has(root_ + wcfg))
      fail("missing " + wcfg + " (the archive has parameters but no weights config)");
    loaded.push_back(loadWeight(*ph));
  }
  if (weights) *weights = std::move(loaded);
  return p;
}

} // namespace

Program readPt2(const std::string &path, std::vector<Weight> *weights, int64_t maxTensorBytes,
                const std::vector<std::string> &specialize, const std::vector<std::string> &maxSize) {
  try {
    return Pt2Reader(path, maxTensorBytes).run(weights, specialize, maxSize);
  } catch (const nlohmann::json::exception &e) {
    userError(SourceLoc{path}, std::string("malformed archive metadata: ") + e.what());
  }
}

} // namespace aotc
