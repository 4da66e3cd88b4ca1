// Stage 1: .pt2 archives, ExportedProgram JSON, format detection, flags, weights.
#include "TestUtil.h"

#include "aotc/Capture.h"
#include "aotc/TextIR.h"

#include <nlohmann/json.hpp>
#include <zip.h>

#include <cstring>

using namespace aotc;
using namespace aotc::test;
using json = nlohmann::json;

namespace {

const std::string kMlp = "examples/mlp/mlp.pt2";
const std::string kLnGelu = "test/e2e/ln_gelu/ln_gelu.pt2";

/// All members of a zip, in order.
std::vector<std::pair<std::string, std::string>> readZip(const std::string &path) {
  int err = 0;
  zip_t *z = zip_open(path.c_str(), ZIP_RDONLY, &err);
  REQUIRE(z);
  std::vector<std::pair<std::string, std::string>> out;
  for (zip_int64_t i = 0; i < zip_get_num_entries(z, 0); ++i) {
    zip_stat_t st;
    REQUIRE(zip_stat_index(z, i, 0, &st) == 0);
    std::string data(st.size, '\0');
    zip_file_t *f = zip_fopen_index(z, i, 0);
    REQUIRE(f);
    REQUIRE(zip_fread(f, data.data(), st.size) == (zip_int64_t)st.size);
    zip_fclose(f);
    out.push_back({st.name, data});
  }
  zip_discard(z);
  return out;
}

void writeZip(const std::string &path, const std::vector<std::pair<std::string, std::string>> &entries) {
  std::remove(path.c_str());
  int err = 0;
  zip_t *z = zip_open(path.c_str(), ZIP_CREATE | ZIP_TRUNCATE, &err);
  REQUIRE(z);
  for (auto &[name, data] : entries) {
    void *buf = std::malloc(data.size() + 1);
    std::memcpy(buf, data.data(), data.size());
    zip_source_t *s = zip_source_buffer(z, buf, data.size(), 1);
    REQUIRE(s);
    REQUIRE(zip_file_add(z, name.c_str(), s, ZIP_FL_OVERWRITE) >= 0);
  }
  REQUIRE(zip_close(z) == 0);
}

/// A copy of `src` with `edit` applied to its member list, written to /tmp.
std::string editedArchive(const std::string &src, const std::string &name,
                          const std::function<void(std::vector<std::pair<std::string, std::string>> &)> &edit) {
  auto entries = readZip(srcPath(src));
  edit(entries);
  std::string path = tempPath(name);
  writeZip(path, entries);
  return path;
}

std::string *member(std::vector<std::pair<std::string, std::string>> &es, const std::string &name) {
  for (auto &e : es)
    if (e.first == name) return &e.second;
  FAIL("no member " << name);
  return nullptr;
}

json mlpModelJson() {
  for (auto &[n, d] : readZip(srcPath(kMlp)))
    if (n == "mlp/models/model.json") return json::parse(d);
  FAIL("no model.json");
  return {};
}

json *findNode(json &j, const std::string &outName) {
  for (json &n : j["graph_module"]["graph"]["nodes"])
    if (n["outputs"][0].contains("as_tensor") && n["outputs"][0]["as_tensor"]["name"] == outName) return &n;
  FAIL("no node " << outName);
  return nullptr;
}

/// Captures an edited MLP model.json written as a bare JSON file.
std::string jsonError(const std::function<void(json &)> &edit, const std::vector<std::string> &specialize = {}) {
  json j = mlpModelJson();
  edit(j);
  std::string path = tempPath("edited.json");
  writeFile(path, j.dump());
  CaptureOptions o;
  o.specialize = specialize;
  return userErrorOf([&] { capture(path, o); });
}

/// Raw tensor bytes from a safetensors file (the golden), validated minimally.
std::string safetensor(const std::string &path, const std::string &key) {
  std::string f = readFile(path);
  REQUIRE(f.size() >= 8);
  uint64_t n = 0;
  std::memcpy(&n, f.data(), 8);
  json h = json::parse(f.substr(8, n));
  REQUIRE(h.contains(key));
  auto off = h[key]["data_offsets"];
  return f.substr(8 + n + off[0].get<size_t>(), off[1].get<size_t>() - off[0].get<size_t>());
}

/// The printed graph code (everything from the `class` line on).
/// The graph code of p's text, without the `  # op: X` comments (Node::userOp: a .pt2 names
/// torch's function, FX text has none).
std::string body(const Program &p) {
  std::string s = printProgram(p);
  s = s.substr(s.find("class "));
  for (size_t c; (c = s.find("  # op: ")) != std::string::npos;) s.erase(c, s.find('\n', c) - c);
  return s;
}

} // namespace

TEST_CASE("capture: MLP .pt2 roles, types and weights", "[capture]") {
  std::vector<Weight> w;
  Program p = capture(srcPath(kMlp), {}, &w);
  CHECK(p.stage == "capture");
  CHECK(p.name == "mlp");
  auto phs = p.forward.placeholders();
  REQUIRE(phs.size() == 6);
  const char *fqns[] = {"fc1.weight", "fc1.bias", "fc2.weight", "fc2.bias"};
  for (int i = 0; i < 4; ++i) {
    CHECK(phs[i]->role == InputRole::Parameter);
    CHECK(phs[i]->fqn == fqns[i]);
    CHECK(phs[i]->requiresGrad);
  }
  CHECK(phs[4]->name == "x");
  CHECK(phs[4]->role == InputRole::UserInput);
  CHECK_FALSE(phs[4]->requiresGrad);
  CHECK(phs[5]->type().str() == "i64[64]");
  CHECK_FALSE(phs[5]->requiresGrad);
  auto c = opCounts(p.forward);
  CHECK(c["aten.addmm.default"] == 2);
  CHECK(c["aten._log_softmax.default"] == 1);
  CHECK(c["aten.gather.default"] == 1);
  CHECK(p.forward.find("addmm")->stackTrace.find("linear.py") != std::string::npos);
  CHECK(p.forward.find("addmm")->loc.file == srcPath(kMlp) + ":models/model.json");
  // Weights: bit-identical to the golden's param.<FQN>, in placeholder order.
  REQUIRE(w.size() == 4);
  for (int i = 0; i < 4; ++i) {
    CHECK(w[i].fqn == fqns[i]);
    CHECK(w[i].type == phs[i]->type());
    std::string g = safetensor(srcPath("examples/mlp/golden.safetensors"), std::string("param.") + fqns[i]);
    CHECK(g.size() == w[i].bytes.size());
    CHECK(std::memcmp(g.data(), w[i].bytes.data(), g.size()) == 0);
  }
}

TEST_CASE("capture: .pt2 and FX text of the same model print the same graph", "[capture]") {
  for (auto [pt2, fx] : {std::pair<std::string, std::string>{kMlp, "examples/mlp/mlp.fx.txt"},
                         {kLnGelu, "test/e2e/ln_gelu/ln_gelu.fx.txt"}}) {
    INFO(pt2);
    Program a = capture(srcPath(pt2), {});
    Program b = capture(srcPath(fx), {});
    CHECK(body(a) == body(b));
    CHECK(printProgram(a).find("  # op: ") != std::string::npos); // the .pt2's torch_fn is kept
  }
}

TEST_CASE("capture: LN-GELU native_layer_norm results through getitem", "[capture]") {
  std::vector<Weight> w;
  Program p = capture(srcPath(kLnGelu), {}, &w);
  Node *ln = p.forward.find("native_layer_norm");
  REQUIRE(ln);
  CHECK(ln->types.size() == 3);
  CHECK(p.forward.find("getitem")->isGetitem());
  CHECK_FALSE(p.forward.find("native_layer_norm_unused_1")); // unused results get no getitem
  auto c = opCounts(p.forward);
  CHECK(c["aten.gelu.default"] == 1);
  CHECK(c["aten.pow.Tensor_Scalar"] == 1);
  CHECK(c["aten.mean.default"] == 1);
  CHECK(c["getitem"] == 1);
  REQUIRE(w.size() == 5);
  CHECK(w[4].fqn == "fc2.weight");
  CHECK(w[4].bytes.size() == 128 * 128 * 4);
  std::string g = safetensor(srcPath("test/e2e/ln_gelu/golden.safetensors"), "param.ln.weight");
  CHECK(std::memcmp(g.data(), w[2].bytes.data(), g.size()) == 0);
}

TEST_CASE("capture: buffer mutation output is recorded", "[capture]") {
  std::vector<Weight> w;
  Program p = capture(srcPath("test/fixtures/mutation/mutation.pt2"), {}, &w);
  Node *buf = p.forward.find("b_buf");
  REQUIRE(buf);
  CHECK(buf->role == InputRole::Buffer);
  CHECK(buf->fqn == "buf");
  CHECK_FALSE(buf->requiresGrad);
  REQUIRE(p.mutatedInputs.size() == 1);
  // User outputs first (abi.h): the export lists the mutation before the loss.
  CHECK(p.mutatedInputs[0] == std::pair<int, std::string>{1, "b_buf"});
  CHECK(p.forward.outputs()[1]->name == "add");
  CHECK(w.size() == 3);
}

TEST_CASE("capture: bare ExportedProgram JSON and format detection", "[capture]") {
  Program p = capture(srcPath("test/fixtures/softmax_silu/softmax_silu.model.json"), {});
  CHECK(p.name == "softmax_silu");
  CHECK(p.forward.outputs().size() >= 1);
  CHECK(detectFormat(readFile(srcPath(kMlp))) == InputFormat::Pt2Zip);
  CHECK(detectFormat("  \n{\"a\": 1}") == InputFormat::ExportJson);
  CHECK(detectFormat(readFile(srcPath("examples/mlp/mlp.fx.txt"))) == InputFormat::FxText);
  CHECK(detectFormat("hello") == InputFormat::Unknown);
  writeFile(tempPath("garbage.bin"), "hello world\n");
  CHECK(contains(userErrorOf([] { capture(tempPath("garbage.bin"), {}); }), "unrecognized input format"));
  CHECK(userErrorOf([] { capture("/nonexistent/x.pt2", {}); }) ==
        "error: cannot open input file '/nonexistent/x.pt2': No such file or directory");
}

TEST_CASE("capture: --requires-grad / --freeze", "[capture]") {
  CaptureOptions o;
  o.requiresGrad = {"x"};
  o.freeze = {"fc1.weight", "p_fc2_bias"};
  Program p = capture(srcPath(kMlp), o);
  CHECK(p.forward.find("x")->requiresGrad);
  CHECK_FALSE(p.forward.find("p_fc1_weight")->requiresGrad);
  CHECK_FALSE(p.forward.find("p_fc2_bias")->requiresGrad);
  CHECK(p.forward.find("p_fc1_bias")->requiresGrad);

  CaptureOptions bad;
  bad.requiresGrad = {"nope"};
  CHECK(contains(userErrorOf([&] { capture(srcPath(kMlp), bad); }),
                 "--requires-grad: the program has no input named 'nope'; its inputs are: p_fc1_weight (fc1.weight)"));
  CaptureOptions intIn;
  intIn.requiresGrad = {"target"};
  CHECK(contains(userErrorOf([&] { capture(srcPath(kMlp), intIn); }), "input 'target' has dtype i64"));
  CaptureOptions both;
  both.requiresGrad = {"x"};
  both.freeze = {"x"};
  CHECK(contains(userErrorOf([&] { capture(srcPath(kMlp), both); }), "both --requires-grad and --freeze"));
  // FX text: floating inputs require grad unless frozen.
  CaptureOptions fz;
  fz.freeze = {"x"};
  Program q = capture(srcPath("examples/mlp/mlp.fx.txt"), fz);
  CHECK_FALSE(q.forward.find("x")->requiresGrad);
  CHECK(q.forward.find("p_fc1_weight")->requiresGrad);
}

//===-- ExportedProgram JSON errors ------------------------------------------===//

TEST_CASE("JSON errors: malformed and unsupported programs", "[capture][errors]") {
  std::string path = tempPath("edited.json");
  // Invalid JSON: position reported as line:col.
  writeFile(tempPath("bad.json"), "{\"graph_module\":\n  [1, 2,, 3]}");
  CHECK(contains(userErrorOf([] { capture(tempPath("bad.json"), {}); }),
                 tempPath("bad.json") + ":2:9: error: invalid JSON: syntax error"));
  CHECK(contains(jsonError([](json &j) { (*findNode(j, "relu"))["target"] = "torch.ops.aten.relu_nope.default"; }),
                 "error: node 'relu' (aten.relu_nope.default): unknown op 'torch.ops.aten.relu_nope.default'"));
  CHECK(contains(jsonError([](json &j) {
                   (*findNode(j, "relu"))["inputs"].push_back({{"name", "bogus"}, {"arg", {{"as_int", 1}}}, {"kind", 2}});
                 }),
                 "node 'relu' (aten.relu.default): op 'aten.relu.default' has no argument named 'bogus'"));
  CHECK(contains(jsonError([](json &j) { (*findNode(j, "addmm"))["inputs"].erase(2); }),
                 "missing argument 'mat2'"));
  std::string mism = jsonError([](json &j) {
    j["graph_module"]["graph"]["tensor_values"]["relu"]["sizes"][1]["as_int"] = 255;
  });
  CHECK(contains(mism, "node 'relu' (aten.relu.default): exported meta of 'relu' says f32[64, 255] but aotc infers "
                       "f32[64, 256]"));
  CHECK(contains(mism, "stack_trace: File \"")); // the node's FX stack trace is shown
  CHECK(contains(jsonError([](json &j) {
                   (*findNode(j, "relu"))["inputs"][0]["arg"]["as_tensor"]["name"] = "ghost";
                 }),
                 "node 'relu' (aten.relu.default): reads 'ghost', which no input or node defines (dangling reference)"));
  CHECK(contains(jsonError([](json &j) {
                   (*findNode(j, "permute"))["inputs"][0]["arg"]["as_tensor"]["name"] = "relu";
                 }),
                 "the graph has a cycle: 'permute' -> 'addmm' -> 'relu' -> 'permute'"));
  CHECK(contains(jsonError([](json &j) { (*findNode(j, "relu"))["outputs"][0]["as_tensor"]["name"] = "addmm"; }),
                 "node 'relu' (aten.relu.default): duplicate name 'addmm'"));
  CHECK(contains(jsonError([](json &j) { j["graph_module"]["graph"]["tensor_values"]["x"]["dtype"] = 13; }),
                 "tensor 'x': unsupported dtype bfloat16 (ScalarType 13"));
  CHECK(contains(jsonError([](json &j) {
                   j["graph_module"]["graph"]["tensor_values"]["x"]["sizes"][0] =
                       json{{"as_expr", {{"expr_str", "Symbol('s0')"}, {"hint", {{"as_int", 64}}}}}};
                 }),
                 "dynamic export: run-time sizes without an upper bound:\n  s0 in [0, inf]: x:0"));
  // --specialize: a derived input dim names its symbol; at s0=32 the size 2*s0 is read and
  // then disagrees with the graph's static meta of x's users (64 rows).
  auto twice = [](json &j) {
    j["graph_module"]["graph"]["tensor_values"]["x"]["sizes"][0] =
        json{{"as_expr", {{"expr_str", "Mul(Integer(2), Symbol('s0', integer=True))"}, {"hint", {{"as_int", 64}}}}}};
    j["range_constraints"] = {{"s0", {{"min_val", 1}, {"max_val", 32}}}};
  };
  CHECK(contains(jsonError(twice, {"x:0=64"}), "--specialize 'x:0=64': input 'x' dim 0 is '2*s0': give the value of its symbol"));
  CHECK(contains(jsonError(twice, {"s0=33"}), "s0=33 is outside the range the export allows, [1, 32]"));
  CHECK(contains(jsonError(twice, {"s0=31"}), "exported meta of"));
  {
    json j = mlpModelJson();
    twice(j);
    std::string path = tempPath("twice.json");
    writeFile(path, j.dump());
    CaptureOptions o;
    o.specialize = {"s0=32"};
    Program p = capture(path, o);
    CHECK(p.forward.placeholders()[4]->type().shape == Shape{64, 784});
  }
  CHECK(contains(jsonError([](json &j) { j["verifiers"] = {"TRAINING"}; }),
                 "TRAINING dialect (torch.export.export output); aotc needs Core ATen: re-export with "
                 "`ep = ep.run_decompositions()`"));
  CHECK(contains(jsonError([](json &j) { j["schema_version"]["major"] = 7; }), "unsupported schema_version 7."));
  CHECK(contains(jsonError([](json &j) {
                   j["graph_module"]["signature"]["input_specs"][4] =
                       json{{"tensor_constant", {{"arg", {{"name", "y"}}}, {"tensor_constant_name", "c"}}}};
                 }),
                 "input_specs[4]: argument name does not match graph.inputs ('x')"));
  CHECK(contains(jsonError([](json &j) {
                   j["graph_module"]["signature"]["input_specs"][4] =
                       json{{"tensor_constant", {{"arg", {{"name", "x"}}}, {"tensor_constant_name", 3}}}};
                 }),
                 "input_specs[4]: the constant's name must be a string"));
  CHECK(contains(jsonError([](json &j) { j["graph_module"]["graph"].erase("nodes"); }),
                 "graph: missing field 'nodes'"));
  CHECK(contains(jsonError([](json &j) { j["graph_module"]["graph"]["outputs"][0] = json{{"as_int", 3}}; }),
                 "non-tensor output ('as_int') is not supported"));
  CHECK(contains(jsonError([](json &j) { j["graph_module"]["graph"]["nodes"][0]["inputs"] = 5; }),
                 "'inputs' must be a list"));
}

//===-- .pt2 archive errors --------------------------------------------------===//

TEST_CASE("pt2 errors: broken archives and weights", "[capture][errors]") {
  std::string full = readFile(srcPath(kMlp));
  writeFile(tempPath("trunc.pt2"), full.substr(0, full.size() / 2));
  CHECK(contains(userErrorOf([] { capture(tempPath("trunc.pt2"), {}); }),
                 "trunc.pt2: error: cannot read the .pt2 archive"));
  writeFile(tempPath("notzip.pt2"), std::string("PK\x03\x04garbage", 11));
  CHECK(contains(userErrorOf([] { capture(tempPath("notzip.pt2"), {}); }), "cannot read the .pt2 archive"));

  std::string p = editedArchive(kMlp, "fmt.pt2", [](auto &es) { *member(es, "mlp/archive_format") = "zip"; });
  CHECK(contains(userErrorOf([&] { capture(p, {}); }), "wrong archive_format 'zip' (expected 'pt2'"));

  p = editedArchive(kMlp, "noweight.pt2", [](auto &es) {
    es.erase(std::remove_if(es.begin(), es.end(), [](auto &e) { return e.first == "mlp/data/weights/weight_2"; }),
             es.end());
  });
  CHECK(contains(userErrorOf([&] { capture(p, {}); }),
                 "missing weight file 'data/weights/weight_2' for parameter 'fc2.weight' "
                 "(listed in data/weights/model_weights_config.json)"));

  p = editedArchive(kMlp, "short.pt2", [](auto &es) { member(es, "mlp/data/weights/weight_1")->resize(1000); });
  CHECK(contains(userErrorOf([&] { capture(p, {}); }),
                 "weight file 'data/weights/weight_1' for parameter 'fc1.bias' has 1000 bytes, but f32[256] needs 1024"));

  p = editedArchive(kMlp, "pickled.pt2", [](auto &es) {
    std::string *cfg = member(es, "mlp/data/weights/model_weights_config.json");
    json j = json::parse(*cfg);
    j["config"]["fc1.bias"]["use_pickle"] = true;
    *cfg = j.dump();
  });
  CHECK(contains(userErrorOf([&] { capture(p, {}); }), "parameter 'fc1.bias' is stored as a pickle"));

  p = editedArchive(kMlp, "old.pt2", [](auto &es) {
    std::string js = *member(es, "mlp/models/model.json");
    es = {{"serialized_exported_program.json", js}, {"version", "8.20"}};
  });
  CHECK(contains(userErrorOf([&] { capture(p, {}); }),
                 "torch 2.6/2.7 torch.export.save layout (serialized_exported_program.json); re-export with torch >= 2.9"));

  p = editedArchive(kMlp, "badjson.pt2", [](auto &es) { member(es, "mlp/models/model.json")->resize(100); });
  CHECK(contains(userErrorOf([&] { capture(p, {}); }), "badjson.pt2:models/model.json:1:101: error: invalid JSON"));
}

TEST_CASE("pt2 weights: strided payload and shared storage are gathered", "[capture]") {
  // fc2.bias (f32[10]) read with stride 2 from a 20-float storage at offset 1.
  std::vector<float> storage(21);
  for (int i = 0; i < 21; ++i) storage[i] = (float)i;
  std::string p = editedArchive(kMlp, "strided.pt2", [&](auto &es) {
    *member(es, "mlp/data/weights/weight_3") = std::string((const char *)storage.data(), storage.size() * 4);
    std::string *cfg = member(es, "mlp/data/weights/model_weights_config.json");
    json j = json::parse(*cfg);
    j["config"]["fc2.bias"]["tensor_meta"]["strides"] = json::array({{{"as_int", 2}}});
    j["config"]["fc2.bias"]["tensor_meta"]["storage_offset"] = {{"as_int", 1}};
    *cfg = j.dump();
  });
  std::vector<Weight> w;
  capture(p, {}, &w);
  REQUIRE(w.size() == 4);
  REQUIRE(w[3].bytes.size() == 40);
  const float *v = (const float *)w[3].bytes.data();
  for (int i = 0; i < 10; ++i) CHECK(v[i] == (float)(1 + 2 * i));
}
