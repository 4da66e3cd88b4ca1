//===- SafetensorsTest.cpp - safetensors round trip and validation ---------===//
#include "aotc/safetensors.h"

#include <catch2/catch.hpp>

#include <cstring>
#include <nlohmann/json.hpp>

using namespace aotc::rt;

namespace {

/// Builds a safetensors image from a raw header string and a data buffer, so
/// each test can break exactly one thing.
std::vector<uint8_t> image(const std::string &header, size_t dataBytes, uint64_t lenOverride = 0) {
  std::vector<uint8_t> out(8 + header.size() + dataBytes, 0);
  uint64_t n = lenOverride ? lenOverride : header.size();
  for (int i = 0; i < 8; ++i)
    out[i] = (uint8_t)(n >> (8 * i));
  std::memcpy(out.data() + 8, header.data(), header.size());
  for (size_t i = 0; i < dataBytes; ++i)
    out[8 + header.size() + i] = (uint8_t)i;
  return out;
}

std::string parseError(const std::vector<uint8_t> &img) {
  try {
    parseSafetensors(img.data(), img.size(), "t.safetensors");
  } catch (const RuntimeError &e) {
    return e.what();
  }
  return "(no error)";
}

} // namespace

TEST_CASE("safetensors round trip keeps bytes, dtypes, shapes and metadata") {
  Tensor a(DType::F32, {2, 3});
  for (int i = 0; i < 6; ++i)
    a.data<float>()[i] = 0.5f * (float)i - 1.0f;
  Tensor b(DType::I64, {4});
  for (int i = 0; i < 4; ++i)
    b.data<int64_t>()[i] = (int64_t)i * 1000000007LL - 3;
  Tensor c = Tensor::full(DType::Bool, {3}, 1.0);
  c.data<uint8_t>()[1] = 0;
  Tensor d = Tensor::full(DType::F64, {}, 3.25); // 0-d
  Tensor e(DType::F32, {0, 5});                  // empty

  auto bytes = serializeSafetensors({{"w", &a}, {"idx", &b}, {"mask", &c}, {"s", &d}, {"e", &e}},
                                    {{"torch", "2.9.0"}});
  // Header length is a multiple of 8 (as the Python writer pads it).
  uint64_t n = 0;
  for (int i = 7; i >= 0; --i)
    n = (n << 8) | bytes[i];
  CHECK(n % 8 == 0);
  CHECK(bytes.size() == 8 + n + 24 + 32 + 3 + 8);

  SafetensorsFile f = parseSafetensors(bytes.data(), bytes.size(), "mem");
  REQUIRE(f.tensors.size() == 5);
  CHECK(f.metadata.at("torch") == "2.9.0");
  // File order is offset order: the order given to the writer.
  CHECK(f.tensors[0].first == "w");
  CHECK(f.tensors[1].first == "idx");
  const Tensor &w = f.get("w");
  CHECK(w.dtype() == DType::F32);
  CHECK(w.shape() == std::vector<int64_t>{2, 3});
  CHECK(std::memcmp(w.data(), a.data(), 24) == 0);
  CHECK(f.get("idx").data<int64_t>()[3] == 3 * 1000000007LL - 3);
  CHECK(f.get("mask").at(0) == 1.0);
  CHECK(f.get("mask").at(1) == 0.0);
  CHECK(f.get("s").rank() == 0);
  CHECK(f.get("s").at(0) == 3.25);
  CHECK(f.get("e").numel() == 0);
  CHECK(reinterpret_cast<uintptr_t>(w.data()) % 64 == 0);
  // Serializing what was read gives the same image (deterministic writer).
  std::vector<NamedTensorRef> again;
  for (auto &[name, t] : f.tensors)
    again.push_back({name, &t});
  CHECK(serializeSafetensors(again, f.metadata) == bytes);
  CHECK_THROWS_WITH(f.get("nope", "golden"), "golden: no tensor 'nope'");
}

TEST_CASE("safetensors reader rejects a short file and a bad header length") {
  std::vector<uint8_t> tiny{1, 2, 3};
  CHECK_THAT(parseError(tiny), Catch::Contains("shorter than the 8-byte header length"));
  auto img = image("{}", 0, /*lenOverride=*/1000);
  CHECK_THAT(parseError(img), Catch::Contains("header length 1000 exceeds the file size"));
}

TEST_CASE("safetensors reader rejects invalid JSON and non-object headers") {
  CHECK_THAT(parseError(image("{\"a\": ", 0)), Catch::Contains("header is not valid JSON"));
  CHECK_THAT(parseError(image("[1, 2]", 0)), Catch::Contains("header must be a JSON object"));
  CHECK_THAT(parseError(image(R"({"a": {"dtype": "F32"}})", 0)),
             Catch::Contains("tensor 'a': entry needs dtype, shape and data_offsets"));
  CHECK_THAT(parseError(image(R"({"__metadata__": {"k": 1}})", 0)),
             Catch::Contains("__metadata__ entry 'k' is not a string"));
}

TEST_CASE("safetensors reader rejects unsupported dtypes and bad shapes") {
  CHECK_THAT(parseError(image(R"({"a": {"dtype": "F16", "shape": [2], "data_offsets": [0, 4]}})", 4)),
             Catch::Contains("tensor 'a': unsupported dtype \"F16\""));
  CHECK_THAT(parseError(image(R"({"a": {"dtype": "F32", "shape": [-2], "data_offsets": [0, 8]}})", 8)),
             Catch::Contains("shape must hold non-negative integers"));
  CHECK_THAT(parseError(image(R"({"a": {"dtype": "F32", "shape": [2.5], "data_offsets": [0, 8]}})", 8)),
             Catch::Contains("shape must hold non-negative integers"));
}

TEST_CASE("safetensors reader rejects offsets out of range or inconsistent with the shape") {
  CHECK_THAT(parseError(image(R"({"a": {"dtype": "F32", "shape": [2], "data_offsets": [0, 16]}})", 8)),
             Catch::Contains("data_offsets [0, 16] exceed the data buffer (8 bytes)"));
  CHECK_THAT(parseError(image(R"({"a": {"dtype": "F32", "shape": [2], "data_offsets": [8, 0]}})", 8)),
             Catch::Contains("end 0 is before begin 8"));
  CHECK_THAT(parseError(image(R"({"a": {"dtype": "F32", "shape": [3], "data_offsets": [0, 8]}})", 8)),
             Catch::Contains("tensor 'a': f32[3] needs 12 bytes but data_offsets span 8"));
  CHECK_THAT(parseError(image(R"({"a": {"dtype": "F32", "shape": [2], "data_offsets": [0, -8]}})", 8)),
             Catch::Contains("data_offsets must hold non-negative integers"));
}

TEST_CASE("safetensors reader rejects overlapping tensors and holes") {
  CHECK_THAT(parseError(image(R"({"a": {"dtype": "F32", "shape": [2], "data_offsets": [0, 8]},
                                  "b": {"dtype": "F32", "shape": [2], "data_offsets": [4, 12]}})",
                              12)),
             Catch::Contains("tensors 'a' and 'b' overlap"));
  CHECK_THAT(parseError(image(R"({"a": {"dtype": "F32", "shape": [1], "data_offsets": [0, 4]},
                                  "b": {"dtype": "F32", "shape": [1], "data_offsets": [8, 12]}})",
                              12)),
             Catch::Contains("bytes 4 to 8 of the data buffer belong to no tensor"));
  CHECK_THAT(parseError(image(R"({"a": {"dtype": "F32", "shape": [1], "data_offsets": [0, 4]}})", 12)),
             Catch::Contains("bytes 4 to 12 of the data buffer belong to no tensor"));
}

TEST_CASE("safetensors reader takes an empty tensor at the offset of another") {
  // "a" (8 bytes) and "z" (empty) both start at 0: the empty one sorts first whatever the names
  // (a 0-element tensor constant beside an input, as python/aotc/_safetensors.py writes them).
  auto img = image(R"({"a": {"dtype": "F32", "shape": [2], "data_offsets": [0, 8]},
                       "z": {"dtype": "F32", "shape": [0], "data_offsets": [0, 0]}})",
                   8);
  CHECK(parseError(img) == "(no error)");
  // Negative control: a non-empty tensor inside another still overlaps.
  CHECK_THAT(parseError(image(R"({"a": {"dtype": "F32", "shape": [2], "data_offsets": [0, 8]},
                                  "z": {"dtype": "F32", "shape": [1], "data_offsets": [0, 4]}})",
                              8)),
             Catch::Contains("overlap"));
}

TEST_CASE("safetensors writer rejects duplicate names and unreadable paths") {
  Tensor a(DType::F32, {1});
  CHECK_THROWS_WITH(serializeSafetensors({{"a", &a}, {"a", &a}}),
                    Catch::Contains("duplicate or reserved tensor name 'a'"));
  CHECK_THROWS_WITH(readSafetensors("/nonexistent/x.safetensors"),
                    "/nonexistent/x.safetensors: cannot open file: No such file or directory");
}
