//===- PassTestUtil.h - Helpers for pass-preservation unit tests -*- C++ -*-===//
//
// Shared by test/unit/Decompose and test/unit/Functionalize: build graphs with
// buildCall, evaluate them with the float64 reference on random inputs and
// compare results with a relative tolerance.
//===----------------------------------------------------------------------===//
#pragma once

#include "aotc/OpRegistry.h"
#include "aotc/RefEval.h"

#include <catch2/catch.hpp>

#include <algorithm>
#include <cmath>
#include <map>
#include <random>
#include <string>

namespace aotc::testutil {

inline TensorType f64(Shape s) { return {DType::F64, std::move(s)}; }
inline TensorType f32(Shape s) { return {DType::F32, std::move(s)}; }
inline TensorType i64(Shape s) { return {DType::I64, std::move(s)}; }

/// A placeholder (user input, requires grad when floating).
inline Node *input(Graph &g, const std::string &name, TensorType t) {
  bool fl = isFloating(t.dtype);
  Node *n = g.addPlaceholder(name, std::move(t), InputRole::UserInput);
  n->requiresGrad = fl;
  return n;
}

/// A call node named after its op (FX style: add, add_1, ...).
inline Node *op(Graph &g, const std::string &target, const std::vector<Arg> &args,
                const std::vector<std::pair<std::string, Arg>> &kwargs = {}) {
  std::string t = canonicalTarget(target);
  std::string base = t == "getitem" ? t : t.substr(5, t.find('.', 5) - 5);
  return buildCall(g, g.uniqueName(base), t, args, kwargs);
}

/// Random inputs for every placeholder: floats in [-1, 1) (or `ranges` by name),
/// i64 in [lo, hi) from `ranges` (default [0, 2)).
inline std::vector<RefTensor> randomInputs(const Graph &g, uint64_t seed,
                                           const std::map<std::string, std::pair<double, double>> &ranges = {}) {
  std::mt19937_64 rng(seed);
  std::vector<RefTensor> r;
  for (Node *p : g.placeholders()) {
    auto it = ranges.find(p->name);
    double lo = -1, hi = 1;
    if (!isFloating(p->type().dtype)) lo = 0, hi = 2;
    if (it != ranges.end()) lo = it->second.first, hi = it->second.second;
    r.push_back(randomTensor(p->type(), rng, lo, hi));
  }
  return r;
}

/// Checks two result lists are equal within a relative tolerance `rtol`
/// (|a - b| <= rtol * max(1, |b|)), with identical dtypes and shapes.
inline void expectClose(const std::vector<RefTensor> &got, const std::vector<RefTensor> &want,
                        double rtol = 1e-12) {
  REQUIRE(got.size() == want.size());
  for (size_t i = 0; i < got.size(); ++i) {
    INFO("output " << i);
    REQUIRE(got[i].dtype == want[i].dtype);
    REQUIRE(got[i].shape == want[i].shape);
    double worst = 0;
    for (int64_t k = 0; k < want[i].numel(); ++k) {
      double a = got[i].data[k], b = want[i].data[k];
      if (std::isnan(a) && std::isnan(b)) continue;
      worst = std::max(worst, std::abs(a - b) / std::max(1.0, std::abs(b)));
    }
    CHECK(worst <= rtol);
  }
}

/// Number of call nodes with `target`.
inline int countTarget(const Graph &g, const std::string &target) {
  int c = 0;
  for (auto &n : g.nodes())
    if (n->isCall() && n->target == target) ++c;
  return c;
}

/// Runs `pass` on a copy of `p` and checks the outputs agree with the original
/// on `trials` random input sets. Returns the transformed program.
template <class Pass>
Program checkPreserves(const Program &p, Pass pass, int trials = 3,
                       const std::map<std::string, std::pair<double, double>> &ranges = {}) {
  Program q;
  q.forward = p.forward.clone();
  q.numForwardOutputs = p.numForwardOutputs;
  q.gradOf = p.gradOf;
  pass(q);
  q.forward.verify();
  for (int t = 0; t < trials; ++t) {
    auto in = randomInputs(p.forward, 1234 + t, ranges);
    expectClose(evaluate(q.forward, in), evaluate(p.forward, in));
  }
  return q;
}

} // namespace aotc::testutil
