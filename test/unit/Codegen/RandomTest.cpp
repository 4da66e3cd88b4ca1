//===- RandomTest.cpp - Philox draws: known answers, dropout, saved vs recomputed -===//
//
// docs/randomness.md. Philox 4x32-10 (include/aotc/Philox.h) against Random123's known
// answers; compiled objects against that definition (bit for bit, 1 and 2 threads); dropout's
// statistics and gradients; the partitioner saving the mask (default partitioner) or
// recomputing it (min-cut) gives the same gradients bit for bit.
//===----------------------------------------------------------------------===//
#include "TestPrograms.h"

#include "aotc/Philox.h"
#include "aotc/Stages.h"

#include <catch2/catch.hpp>

#include <cmath>

using namespace aotc;
using namespace cgtest;

namespace {

// Random123 tests/kat_vectors, "philox4x32 10" lines: counter, key -> result.
static_assert(philox::philox4x32({0, 0, 0, 0}, {0, 0}) ==
              philox::Counter{0x6627e8d5u, 0xe169c58du, 0xbc57ac4cu, 0x9b00dbd8u});
static_assert(philox::philox4x32({0xffffffffu, 0xffffffffu, 0xffffffffu, 0xffffffffu}, {0xffffffffu, 0xffffffffu}) ==
              philox::Counter{0x408f276du, 0x41c83b0eu, 0xa20bc7c6u, 0x6d5451fdu});
static_assert(philox::philox4x32({0x243f6a88u, 0x85a308d3u, 0x13198a2eu, 0x03707344u}, {0xa4093822u, 0x299f31d0u}) ==
              philox::Counter{0xd16cfe09u, 0x94fdccebu, 0x5001e420u, 0x24126ea1u});

constexpr int64_t kN = 200000;

/// A forward graph (stage functionalize) through decompose, joint, lower and partition.
Program partitioned(Program q, PartitionerKind kind) {
  q.stage = "functionalize";
  decompose(q);
  buildJoint(q, {});
  lower(q);
  partition(q, kind);
  return q;
}

/// loss = sum(native_dropout(x, p, train)[0] * c), also returning the mask; x requires grad.
Program dropoutProgram(double p, bool train, PartitionerKind kind, int64_t n = kN) {
  Program q;
  q.name = "drop";
  Graph &g = q.forward;
  Node *x = ph(g, "x", T(DType::F32, {n}), InputRole::UserInput, true);
  Node *c = ph(g, "c", T(DType::F32, {n}), InputRole::UserInput);
  Node *d = buildCall(g, "native_dropout", "aten.native_dropout.default", {x, p, train}, {});
  Node *out = buildCall(g, "getitem", "getitem", {d, int64_t(0)}, {});
  Node *mask = buildCall(g, "getitem_1", "getitem", {d, int64_t(1)}, {});
  Node *m = buildCall(g, "mul", "aten.mul.Tensor", {out, c}, {});
  Node *s = buildCall(g, "sum", "aten.sum.dim_IntList", {m, std::vector<int64_t>{}}, {});
  g.setOutputs({s, mask});
  return partitioned(std::move(q), kind);
}

struct Drop {
  std::unique_ptr<Loaded> lib;
  RunResult r;
  std::vector<RefTensor> in;
};

Drop runDropout(double p, bool train, PartitionerKind kind, uint64_t seed, int64_t offset = 0) {
  Drop d;
  Program q = dropoutProgram(p, train, kind);
  d.lib = compileAndLoad(q);
  REQUIRE(d.lib->prog);
  std::mt19937_64 rng(3);
  d.in = {randomTensor(T(DType::F32, {kN}), rng), randomTensor(T(DType::F32, {kN}), rng, 0.5, 2.0)};
  if (d.lib->prog->num_inputs == 3) {
    RefTensor st(DType::I64, {2});
    st.data = {(double)seed, (double)offset};
    d.in.push_back(st);
  }
  std::vector<RefTensor> tangents = {RefTensor(DType::F32, {})};
  tangents[0].data = {1.0};
  d.r = run(*d.lib, d.in, &tangents);
  REQUIRE(d.r.fwdRc == 0);
  REQUIRE(d.r.bwdRc == 0);
  return d;
}

} // namespace

TEST_CASE("random: compiled philox_uniform equals Philox.h bit for bit, 1 and 2 threads", "[random]") {
  for (DType dt : {DType::F32, DType::F64}) {
    Program q;
    q.name = "u";
    q.stage = "partition";
    Graph &g = q.forward;
    Node *s = ph(g, "s", T(DType::I64, {}), InputRole::UserInput);
    Node *o = ph(g, "o", T(DType::I64, {}), InputRole::UserInput);
    Node *u = buildCall(g, "u", "aotc.philox_uniform.default", {s, o, std::vector<int64_t>{3, 1000, 7}, DTypeLit{dt}}, {});
    g.setOutputs({u});
    q.numForwardOutputs = 1;
    auto L = compileAndLoad(q);
    REQUIRE(L->prog);
    auto setThreads = (void (*)(int))dlsym(L->handle, "omp_set_num_threads");
    REQUIRE(setThreads);
    RefTensor seed(DType::I64, {}), off(DType::I64, {});
    seed.data = {(double)0x123456789LL}; // both key words non-zero
    off.data = {(double)((int64_t(5) << 32) + 17)};
    setThreads(1);
    RunResult r1 = run(*L, {seed, off}, nullptr);
    setThreads(2);
    RunResult r2 = run(*L, {seed, off}, nullptr);
    REQUIRE(r1.fwdRc == 0);
    CHECK(r1.outputs[0].data == r2.outputs[0].data);
    auto ref = evaluate(g, {seed, off});
    int64_t mismatches = 0;
    double lo = 1, hi = 0, sum = 0;
    for (int64_t i = 0; i < ref[0].numel(); ++i) {
      double want = dt == DType::F32 ? (double)philox::uniformF32(0x123456789ULL, (5ULL << 32) + 17, i)
                                     : philox::uniformF64(0x123456789ULL, (5ULL << 32) + 17, i);
      mismatches += r1.outputs[0].data[i] != want || ref[0].data[i] != want;
      lo = std::min(lo, want);
      hi = std::max(hi, want);
      sum += want;
    }
    CHECK(mismatches == 0);
    CHECK(lo >= 0.0);
    CHECK(hi < 1.0);
    CHECK(std::abs(sum / ref[0].numel() - 0.5) < 4 * std::sqrt(1.0 / 12 / ref[0].numel()));
  }
}

TEST_CASE("random: dropout p = 0 and eval mode are the identity and draw nothing", "[random]") {
  for (auto [p, train] : {std::pair{0.0, true}, std::pair{0.5, false}}) {
    Drop d = runDropout(p, train, PartitionerKind::MinCut, 1);
    CHECK(d.lib->prog->num_inputs == 2); // no rng_state input
    double want = 0;
    for (int64_t i = 0; i < kN; ++i) want += (double)(float)d.in[0].data[i] * (float)d.in[1].data[i];
    CHECK(std::abs(d.r.outputs[0].data[0] - want) <= 1e-4 * std::abs(want) + 1e-3);
    for (int64_t i = 0; i < kN; ++i) {
      CHECK(d.r.outputs[1].data[i] == 1.0);
      CHECK(d.r.grads[0].data[i] == (double)(float)d.in[1].data[i]);
    }
  }
}

TEST_CASE("random: dropout keeps 1-p within 4 sigma, gradient 0 or c/(1-p), the mask is Philox's", "[random]") {
  for (double p : {0.1, 0.5, 0.9}) {
    INFO("p = " << p);
    Drop d = runDropout(p, true, PartitionerKind::MinCut, 42, 7);
    REQUIRE(d.lib->prog->num_inputs == 3);
    CHECK(d.lib->prog->inputs[2].role == AOTC_ROLE_RNG_STATE);
    // The advanced state: an output that updates the rng_state input, {seed, offset + 1}.
    const aotc_program &P = *d.lib->prog;
    int next = -1;
    for (int k = 0; k < P.num_outputs; ++k)
      if (P.outputs[k].updates_input == 2) next = k;
    REQUIRE(next >= 0);
    CHECK(d.r.outputs[next].data == std::vector<double>{42, 8});
    const RefTensor &mask = d.r.outputs[1], &g = d.r.grads[0];
    int64_t kept = 0, wrongMask = 0, wrongGrad = 0;
    const float scale = (float)(1.0 / (1.0 - p));
    for (int64_t i = 0; i < kN; ++i) {
      bool keep = philox::uniformF32(42, 7, i) > p;
      kept += mask.data[i] != 0;
      wrongMask += (mask.data[i] != 0) != keep;
      // mul(mul(mask, x), scale) -> d/dx = c * scale * mask, in f32.
      double want = keep ? (double)((float)d.in[1].data[i] * scale) : 0.0;
      wrongGrad += g.data[i] != want;
    }
    CHECK(wrongMask == 0);
    CHECK(wrongGrad == 0);
    double sigma = std::sqrt(p * (1 - p) / kN);
    CHECK(std::abs((double)kept / kN - (1 - p)) < 4 * sigma);
  }
}

TEST_CASE("random: the same seed gives the same bits, another seed or offset others", "[random]") {
  Drop a = runDropout(0.5, true, PartitionerKind::MinCut, 5);
  Drop b = runDropout(0.5, true, PartitionerKind::MinCut, 5);
  Drop c = runDropout(0.5, true, PartitionerKind::MinCut, 6);
  Drop e = runDropout(0.5, true, PartitionerKind::MinCut, 5, 1);
  CHECK(a.r.outputs[1].data == b.r.outputs[1].data);
  CHECK(a.r.grads[0].data == b.r.grads[0].data);
  int64_t diffSeed = 0, diffOffset = 0;
  for (int64_t i = 0; i < kN; ++i) {
    diffSeed += a.r.outputs[1].data[i] != c.r.outputs[1].data[i];
    diffOffset += a.r.outputs[1].data[i] != e.r.outputs[1].data[i];
  }
  // Independent masks with p = 0.5 differ in half the elements.
  CHECK(std::abs((double)diffSeed / kN - 0.5) < 0.01);
  CHECK(std::abs((double)diffOffset / kN - 0.5) < 0.01);
}

TEST_CASE("random: the mask saved (default partitioner) or recomputed (min-cut) gives the same bits",
          "[random]") {
  // Without the mask as an output, min-cut recomputes it from rng_state in the backward.
  auto build = [](PartitionerKind kind) {
    Program q;
    q.name = "drop2";
    Graph &g = q.forward;
    Node *x = ph(g, "x", T(DType::F32, {kN}), InputRole::UserInput, true);
    Node *d = buildCall(g, "dropout", "aten.dropout.default", {x, 0.3, true}, {});
    Node *t = buildCall(g, "tanh", "aten.tanh.default", {d}, {});
    Node *s = buildCall(g, "sum", "aten.sum.dim_IntList", {t, std::vector<int64_t>{}}, {});
    g.setOutputs({s});
    return partitioned(std::move(q), kind);
  };
  Program saved = build(PartitionerKind::Default), recomputed = build(PartitionerKind::MinCut);
  auto hasPhilox = [](const Graph &g) {
    for (auto &n : g.nodes())
      if (n->target == "aotc.philox_uniform.default") return true;
    return false;
  };
  CHECK_FALSE(hasPhilox(saved.backward));
  CHECK(hasPhilox(recomputed.backward));
  std::mt19937_64 rng(9);
  RefTensor st(DType::I64, {2});
  st.data = {11, 3};
  std::vector<RefTensor> in = {randomTensor(T(DType::F32, {kN}), rng), st};
  std::vector<RefTensor> tangents = {RefTensor(DType::F32, {})};
  tangents[0].data = {1.0};
  auto L1 = compileAndLoad(saved), L2 = compileAndLoad(recomputed);
  REQUIRE(L1->prog);
  REQUIRE(L2->prog);
  CHECK(L2->prog->saved_bytes < L1->prog->saved_bytes);
  RunResult r1 = run(*L1, in, &tangents), r2 = run(*L2, in, &tangents);
  REQUIRE(r1.bwdRc == 0);
  REQUIRE(r2.bwdRc == 0);
  CHECK(r1.outputs[0].data == r2.outputs[0].data);
  CHECK(r1.grads[0].data == r2.grads[0].data);
  int64_t zero = 0;
  for (double v : r2.grads[0].data) zero += v == 0.0;
  CHECK(std::abs((double)zero / kN - 0.3) < 4 * std::sqrt(0.3 * 0.7 / kN));
}
