//===- seedgen.cpp - Writes the seed corpora of the libFuzzer harnesses -----===//
//
//   fuzz_seedgen <source root> <output folder>
//
// From the small-shape models of test/fuzz/models/*.txt (capture-stage aotc IR: roles,
// FQNs and mutations in the headers), writes for each model (docs/fuzzing.md):
//   pt2/<m>.pt2             a torch.export-layout archive: models/model.json, the weights
//                           config and one raw payload per parameter/buffer (deterministic
//                           values, dtype/shape/strides consistent with the graph);
//   json/<m>.json           the same ExportedProgram JSON, bare;
//   fx/<m>.fx.txt           plain FX graph code (the IR without its `# aotc:` headers),
//   fx/<m>.capture.txt      and the capture-stage IR;
//   stage/<m>.<stage>.txt   `aotc --emit=<stage>` of every text stage;
//   safetensors/<m>.*.safetensors  the weights, and run inputs with tangent_0;
//   pipeline/<m>.txt        the capture IR (the whole-pipeline harness's input);
// plus pipeline/conf.<op>.txt (the first sample graph of every conformance op,
// test/conformance/ops), derivatives/rules_<k>.yaml (groups of entries of the built-in
// lib/Autodiff/derivatives.yaml) and a few edge-case safetensors files. Every file is
// checked to be accepted by its reader and to be at most 64 KiB.
//===----------------------------------------------------------------------===//
#include "FuzzCommon.h"

#include "aotc/Autodiff.h"
#include "aotc/Capture.h"
#include "aotc/OpRegistry.h"
#include "aotc/Partition.h"
#include "aotc/Stages.h"
#include "aotc/safetensors.h"

#include <nlohmann/json.hpp>
#include <zip.h>

#include <cmath>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <random>
#include <sstream>

namespace fs = std::filesystem;
using json = nlohmann::json;
using namespace aotc;

namespace {

std::string readText(const fs::path &p) {
  std::ifstream in(p, std::ios::binary);
  if (!in)
    throw std::runtime_error("cannot read " + p.string());
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

void writeBytes(const fs::path &p, const void *data, size_t size) {
  if (size > 64 * 1024)
    throw std::runtime_error(p.string() + " would be " + std::to_string(size) + " bytes (> 64 KiB)");
  fs::create_directories(p.parent_path());
  std::ofstream out(p, std::ios::binary | std::ios::trunc);
  out.write(static_cast<const char *>(data), (std::streamsize)size);
  if (!out)
    throw std::runtime_error("cannot write " + p.string());
}
void writeText(const fs::path &p, const std::string &s) { writeBytes(p, s.data(), s.size()); }

int64_t scalarTypeEnum(DType d) {
  switch (d) {
  case DType::U8: return 1;
  case DType::I32: return 4;
  case DType::I64: return 5;
  case DType::F32: return 7;
  case DType::F64: return 8;
  case DType::Bool: return 12;
  }
  return 0;
}

json tensorMeta(const TensorType &t) {
  json sizes = json::array(), strides = json::array();
  for (int64_t d : t.shape)
    sizes.push_back({{"as_int", d}});
  for (int64_t s : contiguousStrides(t.shape))
    strides.push_back({{"as_int", s}});
  return {{"dtype", scalarTypeEnum(t.dtype)},
          {"sizes", sizes},
          {"requires_grad", false},
          {"device", {{"type", "cpu"}, {"index", nullptr}}},
          {"strides", strides},
          {"storage_offset", {{"as_int", 0}}},
          {"layout", 7}};
}

json floatJson(double v) {
  if (std::isnan(v))
    return "NaN";
  if (std::isinf(v))
    return v > 0 ? "Infinity" : "-Infinity";
  return v;
}

/// One argument as the serializer's Argument union (torch/_export/serde/schema.py).
json encodeArg(const Arg &a, const SchemaArg &sa) {
  return std::visit(
      [&](const auto &v) -> json {
        using T = std::decay_t<decltype(v)>;
        if constexpr (std::is_same_v<T, std::monostate>)
          return {{"as_none", nullptr}};
        else if constexpr (std::is_same_v<T, Node *>)
          return {{"as_tensor", {{"name", v->name}}}};
        else if constexpr (std::is_same_v<T, std::vector<Node *>>) {
          json l = json::array();
          for (Node *n : v) {
            if (sa.type == "Tensor?[]")
              l.push_back(n ? json{{"as_tensor", {{"name", n->name}}}} : json{{"as_none", nullptr}});
            else
              l.push_back({{"name", n->name}});
          }
          return {{sa.type == "Tensor?[]" ? "as_optional_tensors" : "as_tensors", l}};
        } else if constexpr (std::is_same_v<T, int64_t>)
          return {{"as_int", v}};
        else if constexpr (std::is_same_v<T, double>)
          return {{"as_float", floatJson(v)}};
        else if constexpr (std::is_same_v<T, bool>)
          return {{"as_bool", v}};
        else if constexpr (std::is_same_v<T, std::string>)
          return {{"as_string", v}};
        else if constexpr (std::is_same_v<T, std::vector<int64_t>>)
          return {{"as_ints", v}};
        else if constexpr (std::is_same_v<T, std::vector<double>>) {
          json l = json::array();
          for (double d : v)
            l.push_back(floatJson(d));
          return {{"as_floats", l}};
        } else if constexpr (std::is_same_v<T, std::vector<bool>>)
          return {{"as_bools", v}};
        else if constexpr (std::is_same_v<T, DTypeLit>)
          return {{"as_scalar_type", scalarTypeEnum(v.dtype)}};
        else {
          static_assert(std::is_same_v<T, EnumLit>);
          if (v.text == "torch.strided")
            return {{"as_layout", 7}};
          if (v.text.rfind("device(", 0) == 0)
            return {{"as_device", {{"type", "cpu"}, {"index", nullptr}}}};
          static const std::map<std::string, int> mf = {{"torch.contiguous_format", 1},
                                                        {"torch.channels_last", 2},
                                                        {"torch.channels_last_3d", 3},
                                                        {"torch.preserve_format", 4}};
          auto it = mf.find(v.text);
          if (it == mf.end())
            throw std::runtime_error("no JSON encoding for " + v.text);
          return {{"as_memory_format", it->second}};
        }
      },
      a);
}

/// The ExportedProgram JSON of a capture-stage program (the subset aotc reads).
json exportedProgram(const Program &p) {
  const Graph &g = p.forward;
  json inputs = json::array(), specs = json::array(), nodes = json::array(), outputs = json::array(),
       outSpecs = json::array(), values = json::object();
  for (Node *ph : g.placeholders()) {
    inputs.push_back({{"as_tensor", {{"name", ph->name}}}});
    values[ph->name] = tensorMeta(ph->type());
    if (ph->role == InputRole::Parameter)
      specs.push_back({{"parameter", {{"arg", {{"name", ph->name}}}, {"parameter_name", ph->fqn}}}});
    else if (ph->role == InputRole::Buffer)
      specs.push_back({{"buffer", {{"arg", {{"name", ph->name}}}, {"buffer_name", ph->fqn}, {"persistent", true}}}});
    else
      specs.push_back({{"user_input", {{"arg", {{"as_tensor", {{"name", ph->name}}}}}}}});
  }
  auto users = g.users();
  for (const auto &up : g.nodes()) {
    const Node *n = up.get();
    if (!n->isCall() || n->isGetitem())
      continue;
    json ins = json::array();
    const auto &sargs = n->op->schema.args;
    for (size_t i = 0; i < sargs.size() && i < n->args.size(); ++i)
      ins.push_back({{"name", sargs[i].name}, {"arg", encodeArg(n->args[i], sargs[i])},
                     {"kind", sargs[i].kwargOnly ? 2 : 1}});
    json outs = json::array();
    if (n->types.size() == 1 && !n->op->schema.returnsList) {
      outs.push_back({{"as_tensor", {{"name", n->name}}}});
      values[n->name] = tensorMeta(n->types[0]);
    } else {
      if (n->op->schema.returnsList)
        throw std::runtime_error("list results (" + n->target + ") are not written");
      for (size_t i = 0; i < n->types.size(); ++i) {
        std::string name = n->name + "_unused_" + std::to_string(i);
        for (Node *u : users[n])
          if (u->isGetitem() && (size_t)u->intArg(1) == i)
            name = u->name;
        outs.push_back({{"as_tensor", {{"name", name}}}});
        values[name] = tensorMeta(n->types[i]);
      }
    }
    json node = {{"target", "torch.ops." + n->target}, {"inputs", ins}, {"outputs", outs}, {"name", n->name}};
    node["metadata"] = json::object();
    if (!n->stackTrace.empty())
      node["metadata"]["stack_trace"] = n->stackTrace;
    nodes.push_back(node);
  }
  std::vector<Node *> outNodes = g.outputs();
  for (size_t i = 0; i < outNodes.size(); ++i) {
    const std::string &name = outNodes[i]->name;
    outputs.push_back({{"as_tensor", {{"name", name}}}});
    json spec = {{"user_output", {{"arg", {{"as_tensor", {{"name", name}}}}}}}};
    for (const auto &[idx, in] : p.mutatedInputs) {
      if (idx != (int)i)
        continue;
      Node *ph = g.find(in);
      if (ph->role == InputRole::Buffer)
        spec = {{"buffer_mutation", {{"arg", {{"name", name}}}, {"buffer_name", ph->fqn}}}};
      else if (ph->role == InputRole::Parameter)
        spec = {{"parameter_mutation", {{"arg", {{"name", name}}}, {"parameter_name", ph->fqn}}}};
      else
        spec = {{"user_input_mutation", {{"arg", {{"name", name}}}, {"user_input_name", ph->name}}}};
    }
    outSpecs.push_back(spec);
  }
  return {{"graph_module",
           {{"graph", {{"inputs", inputs}, {"outputs", outputs}, {"nodes", nodes}, {"tensor_values", values}}},
            {"signature", {{"input_specs", specs}, {"output_specs", outSpecs}}}}},
          {"schema_version", {{"major", 8}, {"minor", 13}}},
          {"verifiers", json::array()}};
}

/// Deterministic values for a tensor of type `t` (row-major, little-endian bytes).
std::vector<uint8_t> values(const TensorType &t, std::mt19937_64 &rng) {
  std::vector<uint8_t> b((size_t)t.bytes());
  std::uniform_real_distribution<double> u(-1.0, 1.0);
  for (int64_t i = 0; i < t.numel(); ++i) {
    switch (t.dtype) {
    case DType::F32: { float v = (float)u(rng); std::memcpy(&b[i * 4], &v, 4); break; }
    case DType::F64: { double v = u(rng); std::memcpy(&b[i * 8], &v, 8); break; }
    case DType::I64: { int64_t v = (int64_t)(rng() % 2); std::memcpy(&b[i * 8], &v, 8); break; }
    case DType::I32: { int32_t v = (int32_t)(rng() % 2); std::memcpy(&b[i * 4], &v, 4); break; }
    case DType::U8:
    case DType::Bool: b[i] = (uint8_t)(rng() % 2); break;
    }
  }
  return b;
}

std::vector<uint8_t> zipMembers(const std::vector<std::pair<std::string, std::string>> &members) {
  zip_error_t ze;
  zip_error_init(&ze);
  zip_source_t *src = zip_source_buffer_create(nullptr, 0, 0, &ze);
  zip_source_keep(src);
  zip_t *za = zip_open_from_source(src, ZIP_TRUNCATE, &ze);
  if (!za)
    throw std::runtime_error("libzip: cannot create an archive");
  for (const auto &[name, bytes] : members) {
    zip_source_t *m = zip_source_buffer(za, bytes.data(), bytes.size(), 0);
    zip_int64_t idx = zip_file_add(za, name.c_str(), m, ZIP_FL_ENC_UTF_8);
    zip_set_file_compression(za, (zip_uint64_t)idx, ZIP_CM_STORE, 0);
    zip_file_set_mtime(za, (zip_uint64_t)idx, 0, 0);
  }
  if (zip_close(za) != 0)
    throw std::runtime_error("libzip: cannot write the archive");
  zip_source_open(src);
  zip_source_seek(src, 0, SEEK_END);
  zip_int64_t n = zip_source_tell(src);
  zip_source_seek(src, 0, SEEK_SET);
  std::vector<uint8_t> out((size_t)n);
  zip_source_read(src, out.data(), (zip_uint64_t)n);
  zip_source_close(src);
  zip_source_free(src);
  zip_error_fini(&ze);
  return out;
}

rt::Tensor toTensor(const TensorType &t, const std::vector<uint8_t> &bytes) {
  return rt::Tensor::fromBytes(static_cast<rt::DType>(t.dtype), t.shape, bytes.data(), (int64_t)bytes.size());
}

void model(const fs::path &file, const fs::path &out) {
  const std::string m = file.stem().string();
  const std::string text = readText(file);
  Program p = parseProgram(text, file.string());
  std::mt19937_64 rng(std::hash<std::string>{}(m));

  // JSON and .pt2.
  json ep = exportedProgram(p);
  std::string epText = ep.dump();
  writeText(out / "json" / (m + ".json"), epText);
  const std::string root = m + "/";
  std::vector<std::pair<std::string, std::string>> members = {
      {root + ".data/version", "6\n"}, {root + "archive_format", "pt2"}, {root + "archive_version", "0"},
      {root + "byteorder", "little"}, {root + "models/model.json", epText}};
  json config = json::object();
  std::vector<std::pair<std::string, std::vector<uint8_t>>> weights;
  for (Node *ph : p.forward.placeholders()) {
    if (ph->role != InputRole::Parameter && ph->role != InputRole::Buffer)
      continue;
    std::string path = "weight_" + std::to_string(weights.size());
    weights.push_back({ph->fqn, values(ph->type(), rng)});
    config[ph->fqn] = {{"path_name", path}, {"is_param", ph->role == InputRole::Parameter},
                       {"use_pickle", false}, {"tensor_meta", tensorMeta(ph->type())}};
    members.push_back({root + "data/weights/" + path,
                       std::string(weights.back().second.begin(), weights.back().second.end())});
  }
  members.push_back({root + "data/weights/model_weights_config.json", json{{"config", config}}.dump()});
  members.push_back({root + "data/constants/model_constants_config.json", R"({"config": {}})"});
  std::vector<uint8_t> pt2 = zipMembers(members);
  writeBytes(out / "pt2" / (m + ".pt2"), pt2.data(), pt2.size());

  // FX text and the stages.
  std::string plain;
  std::istringstream lines(text);
  for (std::string line; std::getline(lines, line);)
    if (line.rfind("# aotc:", 0) != 0)
      plain += line + "\n";
  writeText(out / "fx" / (m + ".fx.txt"), plain);
  writeText(out / "fx" / (m + ".capture.txt"), text);
  writeText(out / "pipeline" / (m + ".txt"), text);
  Program s = p.clone();
  do {
    std::string st = printProgram(s);
    if (s.stage == "partition")
      st += partitionSummary(s);
    writeText(out / "stage" / (m + "." + s.stage + ".txt"), st);
  } while (fuzz::runNextStage(s));

  // safetensors: the weights (as `aotc -o` writes them) and `aotc run` inputs.
  std::vector<rt::Tensor> ts;
  std::vector<std::string> names;
  for (auto &[fqn, bytes] : weights) {
    Node *ph = nullptr;
    for (Node *x : p.forward.placeholders())
      if (x->fqn == fqn)
        ph = x;
    ts.push_back(toTensor(ph->type(), bytes));
    names.push_back(fqn);
  }
  for (Node *ph : p.forward.placeholders())
    if (ph->role == InputRole::UserInput) {
      ts.push_back(toTensor(ph->type(), values(ph->type(), rng)));
      names.push_back("input." + ph->name);
    }
  std::vector<rt::NamedTensorRef> refs;
  for (size_t i = 0; i < ts.size(); ++i)
    refs.push_back({names[i], &ts[i]});
  std::vector<uint8_t> st = rt::serializeSafetensors(refs, {{"format", "pt"}, {"model", m}});
  writeBytes(out / "safetensors" / (m + ".inputs.safetensors"), st.data(), st.size());
  std::cout << "seedgen: " << m << "\n";
}

void conformanceGraphs(const fs::path &srcRoot, const fs::path &out) {
  std::vector<fs::path> files;
  for (const auto &e : fs::directory_iterator(srcRoot / "test/conformance/ops"))
    if (e.path().string().size() > 7 && e.path().string().ends_with(".fx.txt"))
      files.push_back(e.path());
  std::sort(files.begin(), files.end());
  int n = 0;
  for (const fs::path &f : files) {
    std::string text = readText(f);
    // The first sample: from its `class` line to the next `# ==== sample` line.
    size_t b = text.find("class GraphModule");
    size_t e = text.find("# ==== sample", b);
    if (b == std::string::npos)
      continue;
    std::string g = text.substr(b, e == std::string::npos ? std::string::npos : e - b);
    std::string op = f.filename().string();
    op = op.substr(0, op.size() - 7);
    try {
      Program p = parseProgram(g, op);
      (void)p;
    } catch (const Error &) {
      continue;
    }
    writeText(out / "pipeline" / ("conf." + op + ".txt"), g);
    ++n;
  }
  std::cout << "seedgen: " << n << " conformance graphs\n";
}

void derivativeRules(const fs::path &srcRoot, const fs::path &out) {
  std::string text = readText(srcRoot / "lib/Autodiff/derivatives.yaml");
  std::vector<std::string> entries;
  std::istringstream lines(text);
  for (std::string line; std::getline(lines, line);) {
    if (line.rfind("- name:", 0) == 0)
      entries.push_back("");
    if (!entries.empty() && line.rfind("#", 0) != 0)
      entries.back() += line + "\n";
  }
  int k = 0;
  for (size_t i = 0; i < entries.size(); i += 6, ++k) {
    std::string chunk;
    for (size_t j = i; j < i + 6 && j < entries.size(); ++j)
      chunk += entries[j];
    DerivativeRules r;
    r.loadString(chunk, "chunk");
    writeText(out / "derivatives" / ("rules_" + std::to_string(k) + ".yaml"), chunk);
  }
  writeText(out / "derivatives" / "wrong_exp.yaml", readText(srcRoot / "test/conformance/wrong_exp.yaml"));
  std::cout << "seedgen: " << k << " derivative rule groups\n";
}

void edgeSafetensors(const fs::path &out) {
  rt::Tensor empty(rt::DType::F32, {0, 3}), scalar = rt::Tensor::full(rt::DType::F64, {}, 2.5),
      mask = rt::Tensor::full(rt::DType::Bool, {3}, 1.0), idx = rt::Tensor::full(rt::DType::I32, {2}, 1.0),
      bytes = rt::Tensor::full(rt::DType::U8, {2, 2}, 7.0), big = rt::Tensor::full(rt::DType::I64, {2}, -1.0);
  auto write = [&](const std::string &name, const std::vector<rt::NamedTensorRef> &refs,
                   const std::map<std::string, std::string> &meta) {
    std::vector<uint8_t> b = rt::serializeSafetensors(refs, meta);
    writeBytes(out / "safetensors" / name, b.data(), b.size());
  };
  write("edge.empty_file.safetensors", {}, {});
  write("edge.metadata_only.safetensors", {}, {{"a", "b"}, {"", ""}});
  write("edge.dtypes.safetensors",
        {{"e", &empty}, {"s", &scalar}, {"m", &mask}, {"i", &idx}, {"u", &bytes}, {"l", &big}}, {});
}

} // namespace

int main(int argc, char **argv) {
  if (argc != 3) {
    std::cerr << "usage: fuzz_seedgen <source root> <output folder>\n";
    return 2;
  }
  try {
    fs::path src = argv[1], out = argv[2];
    std::vector<fs::path> models;
    for (const auto &e : fs::directory_iterator(src / "test/fuzz/models"))
      if (e.path().extension() == ".txt")
        models.push_back(e.path());
    std::sort(models.begin(), models.end());
    for (const fs::path &m : models)
      model(m, out);
    conformanceGraphs(src, out);
    derivativeRules(src, out);
    edgeSafetensors(out);
  } catch (const std::exception &e) {
    std::cerr << "fuzz_seedgen: " << e.what() << "\n";
    return 1;
  }
  return 0;
}
