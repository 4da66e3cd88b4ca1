//===- TorchFixturesTest.cpp - functionalize() against torch's own results ---===//
//
// test/fixtures/functionalize/mut_*.fx.txt are graphs with in-place ops that
// torch traced; mut_*.golden.safetensors hold torch eager's inputs, output and
// final values of mutated inputs (float32). The functionalized graph, evaluated
// in float64 on the same inputs, must reproduce them (rtol 1e-5: float32 vs
// float64 rounding).
//===----------------------------------------------------------------------===//
#include "../Decompose/PassTestUtil.h"

#include "aotc/Stages.h"
#include "aotc/TextIR.h"

#include <nlohmann/json.hpp>

#include <cstring>
#include <fstream>
#include <sstream>

using namespace aotc;
using namespace aotc::testutil;

namespace {

std::string slurp(const std::string &path) {
  std::ifstream f(path, std::ios::binary);
  REQUIRE(f.good());
  std::stringstream ss;
  ss << f.rdbuf();
  return ss.str();
}

/// A minimal safetensors reader for F32 tensors (the fixtures' only dtype).
std::map<std::string, RefTensor> readF32Safetensors(const std::string &path) {
  std::string b = slurp(path);
  REQUIRE(b.size() >= 8);
  uint64_t n = 0;
  std::memcpy(&n, b.data(), 8);
  auto header = nlohmann::json::parse(b.substr(8, n));
  std::map<std::string, RefTensor> r;
  for (auto &[k, v] : header.items()) {
    if (k == "__metadata__") continue;
    REQUIRE(v["dtype"] == "F32");
    RefTensor t(DType::F32, v["shape"].get<Shape>());
    size_t off = 8 + n + v["data_offsets"][0].get<size_t>();
    for (int64_t i = 0; i < t.numel(); ++i) {
      float f;
      std::memcpy(&f, b.data() + off + 4 * i, 4);
      t.data[i] = f;
    }
    r[k] = std::move(t);
  }
  return r;
}

void checkFixture(const std::string &name, size_t expectMutated) {
  INFO(name);
  std::string dir = std::string(AOTC_SRC_ROOT) + "/test/fixtures/functionalize/";
  Program p = parseProgram(slurp(dir + name + ".fx.txt"), name + ".fx.txt");
  auto golden = readF32Safetensors(dir + name + ".golden.safetensors");
  std::vector<RefTensor> in;
  for (Node *ph : p.forward.placeholders()) in.push_back(golden.at("input." + ph->name));
  functionalize(p);
  for (auto &n : p.forward.nodes())
    if (n->isCall() && n->op) CHECK_FALSE(n->op->schema.mutates);
  REQUIRE(p.mutatedInputs.size() == expectMutated);
  std::vector<RefTensor> got = evaluate(p.forward, in), want = {golden.at("output.0")};
  for (auto &[idx, input] : p.mutatedInputs) {
    CHECK(idx == (int)want.size());
    CHECK(p.forward.outputs().at(idx)->name == "mutated_" + input);
    want.push_back(golden.at("mutated." + input));
  }
  expectClose(got, want, 1e-5);
}

} // namespace

TEST_CASE("functionalize reproduces torch on the mutation fixtures", "[functionalize]") {
  checkFixture("mut_intermediate", 0);
  checkFixture("mut_input", 1);
  checkFixture("mut_copy", 1);
  checkFixture("mut_view", 0);
}
