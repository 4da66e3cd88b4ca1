//===- PartitionTest.cpp - Default and min-cut partitioners on joint graphs --===//
//
// Joint graphs are built by hand with buildCall, following the joint-graph
// contract (primals, then tangents_k; outputs = forward outputs, then one
// gradient per gradOf entry). Each test checks the saved set against what
// PyTorch's network gives (weights worked out in the comments) and that the
// partitioned forward + backward, evaluated with the float64 reference
// evaluator, reproduce the joint graph's values exactly.
//===----------------------------------------------------------------------===//
#include "aotc/Diagnostics.h"
#include "aotc/OpRegistry.h"
#include "aotc/Partition.h"
#include "aotc/RefEval.h"
#include "aotc/Stages.h"

#include <catch2/catch.hpp>

#include <algorithm>
#include <random>
#include <set>

using namespace aotc;

namespace {

TensorType f32(Shape s) { return TensorType{DType::F32, std::move(s)}; }

Node *call(Graph &g, const std::string &name, const std::string &target, std::vector<Arg> args) {
  return buildCall(g, name, target, args, {});
}

Node *primal(Graph &g, const std::string &name, TensorType t, InputRole role = InputRole::UserInput) {
  Node *n = g.addPlaceholder(name, std::move(t), role);
  n->requiresGrad = true;
  return n;
}


std::vector<std::string> names(const std::vector<Node *> &ns) {
  std::vector<std::string> r;
  for (Node *n : ns) r.push_back(n->name);
  return r;
}

/// Checks the "after partition" contract and that fwd+bwd == joint on random inputs.
void checkPartition(const Program &joint, const Program &p, int trials = 4) {
  REQUIRE(p.stage == "partition");
  std::vector<Node *> jph = joint.forward.placeholders();
  std::vector<Node *> primals, tangents;
  for (Node *n : jph) (n->role == InputRole::Tangent ? tangents : primals).push_back(n);

  // Forward: primals only; outputs = user outputs + saved.
  std::vector<Node *> fph = p.forward.placeholders();
  REQUIRE(names(fph) == names(primals));
  for (size_t i = 0; i < fph.size(); ++i) {
    CHECK(fph[i]->role == primals[i]->role);
    CHECK(fph[i]->type() == primals[i]->type());
  }
  std::vector<Node *> fouts = p.forward.outputs();
  REQUIRE(fouts.size() == (size_t)joint.numForwardOutputs + p.saved.size());
  for (size_t i = 0; i < p.saved.size(); ++i) {
    CHECK(fouts[joint.numForwardOutputs + i]->name == p.saved[i]);
    CHECK(fouts[joint.numForwardOutputs + i]->isCall()); // never a placeholder
  }

  // Backward: primals, Saved, tangents; outputs = one grad per gradOf.
  std::vector<Node *> bph = p.backward.placeholders();
  REQUIRE(bph.size() == primals.size() + p.saved.size() + tangents.size());
  for (size_t i = 0; i < primals.size(); ++i) {
    CHECK(bph[i]->name == primals[i]->name);
    CHECK(bph[i]->role == primals[i]->role);
  }
  for (size_t i = 0; i < p.saved.size(); ++i) {
    const Node *s = bph[primals.size() + i];
    CHECK(s->name == p.saved[i]);
    CHECK(s->role == InputRole::Saved);
    CHECK(s->type() == p.forward.find(p.saved[i])->type());
  }
  for (size_t i = 0; i < tangents.size(); ++i) {
    const Node *t = bph[primals.size() + p.saved.size() + i];
    CHECK(t->name == tangents[i]->name);
    CHECK(t->role == InputRole::Tangent);
  }
  REQUIRE(p.backward.outputs().size() == joint.gradOf.size());
  CHECK(p.gradOf == joint.gradOf);
  CHECK(p.numForwardOutputs == joint.numForwardOutputs);
  // Every saved tensor is read by the backward.
  auto bu = p.backward.users();
  for (size_t i = 0; i < p.saved.size(); ++i) CHECK(!bu[bph[primals.size() + i]].empty());

  std::mt19937_64 rng(42);
  for (int trial = 0; trial < trials; ++trial) {
    std::vector<RefTensor> pin, tin, all;
    for (Node *n : primals) pin.push_back(randomTensor(n->type(), rng, 0.2, 1.5));
    for (Node *n : tangents) tin.push_back(randomTensor(n->type(), rng));
    all = pin;
    all.insert(all.end(), tin.begin(), tin.end());
    std::vector<RefTensor> jout = evaluate(joint.forward, all);
    std::vector<RefTensor> fout = evaluate(p.forward, pin);
    std::vector<RefTensor> bin = pin;
    bin.insert(bin.end(), fout.begin() + joint.numForwardOutputs, fout.end());
    bin.insert(bin.end(), tin.begin(), tin.end());
    std::vector<RefTensor> bout = evaluate(p.backward, bin);
    for (int i = 0; i < joint.numForwardOutputs; ++i) {
      CHECK(fout[i].shape == jout[i].shape);
      CHECK(fout[i].data == jout[i].data);
    }
    REQUIRE(bout.size() + joint.numForwardOutputs == jout.size());
    for (size_t j = 0; j < bout.size(); ++j) {
      CHECK(bout[j].shape == jout[joint.numForwardOutputs + j].shape);
      CHECK(bout[j].data == jout[joint.numForwardOutputs + j].data);
    }
  }
}

Program partitioned(const Program &joint, PartitionerKind kind) {
  Program p = joint.clone();
  partition(p, kind);
  checkPartition(joint, p);
  return p;
}

std::set<std::string> recomputedTargets(const Program &p) {
  std::set<std::string> r;
  for (const Node *n : recomputedNodes(p)) r.insert(n->target);
  return r;
}

/// y = tanh(exp(x * w)), x, w: f32[8, 16]; the backward is the hand-written
/// chain rule: gy * (1 - y^2) * e, times w or x.
Program tanhExpChain() {
  Program p;
  p.stage = "joint";
  Graph &g = p.forward;
  Node *x = primal(g, "x", f32({8, 16}));
  Node *w = primal(g, "w", f32({8, 16}), InputRole::Parameter);
  Node *t = g.addPlaceholder("tangents_1", f32({8, 16}), InputRole::Tangent);
  Node *mul = call(g, "mul", "aten.mul.Tensor", {x, w});
  Node *e = call(g, "exp", "aten.exp.default", {mul});
  Node *y = call(g, "tanh", "aten.tanh.default", {e});
  Node *sq = call(g, "sq", "aten.mul.Tensor", {y, y});
  Node *nsq = call(g, "nsq", "aten.neg.default", {sq});
  Node *om = call(g, "om", "aten.add.Scalar", {nsq, 1.0});
  Node *g1 = call(g, "g1", "aten.mul.Tensor", {t, om});
  Node *g2 = call(g, "g2", "aten.mul.Tensor", {g1, e});
  Node *gx = call(g, "gx", "aten.mul.Tensor", {g2, w});
  Node *gw = call(g, "gw", "aten.mul.Tensor", {g2, x});
  g.setOutputs({y, gx, gw});
  p.numForwardOutputs = 1;
  p.gradOf = {"x", "w"};
  return p;
}

} // namespace

TEST_CASE("Partition: default saves every forward value the backward reads", "[partition]") {
  Program joint = tanhExpChain();
  Program p = partitioned(joint, PartitionerKind::Default);
  // The backward reads exp and tanh (and the primals x, w, which it gets again).
  CHECK(p.saved == std::vector<std::string>{"exp", "tanh"});
  CHECK(savedBytes(p) == 2 * 8 * 16 * 4);
  CHECK(recomputedNodes(p).empty());
}

TEST_CASE("Partition: min-cut recomputes a pointwise chain and saves less", "[partition]") {
  // Network (bytes B = 512): x, w banned, cut at 1.1B each (the backward reads
  // them). tanh is a forward output, hence materialized in the backward and
  // banned: cut at 1.1B. exp (dist 1, all users fusible) costs 2*1.1B to save,
  // but is free to recompute from x and w: so only tanh is saved.
  Program joint = tanhExpChain();
  Program p = partitioned(joint, PartitionerKind::MinCut);
  CHECK(p.saved == std::vector<std::string>{"tanh"});
  Program d = partitioned(joint, PartitionerKind::Default);
  CHECK(savedBytes(p) < savedBytes(d));
  std::vector<std::string> rec;
  for (const Node *n : recomputedNodes(p)) rec.push_back(n->name);
  CHECK(rec == std::vector<std::string>{"mul", "exp"});
  // Recomputed ops sit right before their first backward use (after g1,
  // which reads only the tangent and tanh).
  std::vector<std::string> order;
  for (auto &n : p.backward.nodes())
    if (n->isCall()) order.push_back(n->name);
  CHECK(order == std::vector<std::string>{"sq", "nsq", "om", "g1", "mul", "exp", "g2", "gx", "gw"});

  std::string s = partitionSummary(p);
  CHECK(s.find("# saved: 1 tensors, 512 bytes") != std::string::npos);
  CHECK(s.find("#   tanh: f32[8, 16] (512 bytes)") != std::string::npos);
  CHECK(s.find("# recomputed: 2 ops") != std::string::npos);
  CHECK(s.find("#   exp = aten.exp.default") != std::string::npos);
}

namespace {
/// x: f32[4,8] @ w: f32[8,16]; `fwd` builds the forward output from mm and
/// `bwd` the cotangent of mm from (tangent, mm, forward output).
Program mmJoint(bool relu) {
  Program p0;
  p0.stage = "joint";
  Graph &g = p0.forward;
  Node *x = primal(g, "x", f32({4, 8}));
  Node *w = primal(g, "w", f32({8, 16}), InputRole::Parameter);
  Node *t = g.addPlaceholder("tangents_1", f32({4, 16}), InputRole::Tangent);
  Node *mm = call(g, "mm", "aten.mm.default", {x, w});
  Node *out, *gmm;
  if (relu) {
    // out = relu(mm); the mask is computed from mm: gmm = t * (mm > 0).
    out = call(g, "relu", "aten.relu.default", {mm});
    Node *mask = call(g, "mask", "aten.gt.Scalar", {mm, 0.0});
    gmm = call(g, "gmm", "aten.mul.Tensor", {t, mask});
  } else {
    // out = mm * mm; gmm = 2 * t * mm.
    out = call(g, "sq", "aten.mul.Tensor", {mm, mm});
    Node *g1 = call(g, "g1", "aten.mul.Tensor", {t, mm});
    gmm = call(g, "gmm", "aten.mul.Scalar", {g1, 2.0});
  }
  Node *wt = call(g, "wt", "aten.permute.default", {w, std::vector<int64_t>{1, 0}});
  Node *gx = call(g, "gx", "aten.mm.default", {gmm, wt});
  Node *xt = call(g, "xt", "aten.permute.default", {x, std::vector<int64_t>{1, 0}});
  Node *gw = call(g, "gw", "aten.mm.default", {xt, gmm});
  g.setOutputs({out, gx, gw});
  p0.numForwardOutputs = 1;
  p0.gradOf = {"x", "w"};
  return p0;
}
} // namespace

TEST_CASE("Partition: mm outputs are never recomputed", "[partition]") {
  // out = mm*mm: the backward reads mm itself. Recomputing it from x and w
  // (which are cut anyway) would cost nothing in the network, but mm is
  // compute-intensive, hence banned, hence saved.
  Program p0 = mmJoint(/*relu=*/false);
  for (PartitionerKind k : {PartitionerKind::Default, PartitionerKind::MinCut}) {
    Program p = partitioned(p0, k);
    CHECK(p.saved == std::vector<std::string>{"mm"});
    CHECK(recomputedNodes(p).empty());
    // The permutes of primals are backward-only work, not recomputation.
    CHECK(p.backward.find("wt") != nullptr);
    CHECK(p.forward.find("wt") == nullptr);
  }
}

TEST_CASE("Partition: min-cut saves a bool mask instead of an mm output", "[partition]") {
  // out = relu(mm), gmm = t * (mm > 0). Default saves mm (f32[4,16], 256 B)
  // and computes the mask in the backward. Min-cut: mm is banned, cutting it
  // costs int(256*1.1) = 281 (materialized: its users do not fuse with an mm);
  // the mask (b8[4,16], 64 B, unclaimed, dist 0 -> 1.1, fused into its user:
  // x2) costs 140. So min-cut saves the mask and never recomputes mm.
  Program p0 = mmJoint(/*relu=*/true);
  Program d = partitioned(p0, PartitionerKind::Default);
  CHECK(d.saved == std::vector<std::string>{"mm"});
  Program m = partitioned(p0, PartitionerKind::MinCut);
  CHECK(m.saved == std::vector<std::string>{"mask"});
  CHECK(savedBytes(m) == 64);
  CHECK(savedBytes(d) == 256);
  CHECK(recomputedTargets(m).count("aten.mm.default") == 0);
  CHECK(m.forward.find("mask") != nullptr); // computed in the forward
}

TEST_CASE("Partition: a reduction shrinking more than 4x stays saved", "[partition]") {
  // out = x / s, s = sum(x*x, dim 1, keepdim): f32[8,1] from f32[8,16]
  // (32 * 4 < 512 bytes: banned). Backward: t/s - 2x * sum(t*x)/s^2.
  Program p0;
  p0.stage = "joint";
  Graph &g = p0.forward;
  Node *x = primal(g, "x", f32({8, 16}));
  Node *t = g.addPlaceholder("tangents_1", f32({8, 16}), InputRole::Tangent);
  Node *sq = call(g, "sq", "aten.mul.Tensor", {x, x});
  Node *s = call(g, "s", "aten.sum.dim_IntList", {sq, std::vector<int64_t>{1}, true});
  Node *out = call(g, "out", "aten.div.Tensor", {x, s});
  Node *a = call(g, "a", "aten.div.Tensor", {t, s});
  Node *b = call(g, "b", "aten.mul.Tensor", {t, x});
  Node *c = call(g, "c", "aten.sum.dim_IntList", {b, std::vector<int64_t>{1}, true});
  Node *s2 = call(g, "s2", "aten.mul.Tensor", {s, s});
  Node *d = call(g, "d", "aten.div.Tensor", {c, s2});
  Node *e = call(g, "e", "aten.mul.Tensor", {d, x});
  Node *f = call(g, "f", "aten.mul.Scalar", {e, 2.0});
  Node *gx = call(g, "gx", "aten.sub.Tensor", {a, f});
  g.setOutputs({out, gx});
  p0.numForwardOutputs = 1;
  p0.gradOf = {"x"};

  Program p = partitioned(p0, PartitionerKind::MinCut);
  CHECK(p.saved == std::vector<std::string>{"s"});
  CHECK(savedBytes(p) == 32);
  // The sum over x*x is not recomputed, although that would be free in the
  // network (x is cut anyway): this is the reduction ban at work. s*s needs
  // no tangent but is backward-only work, computed from the saved s.
  CHECK(recomputedNodes(p).empty());
  CHECK(p.backward.find("s2") != nullptr);
  Program dflt = partitioned(p0, PartitionerKind::Default);
  CHECK(dflt.saved == std::vector<std::string>{"s"});
}

TEST_CASE("Partition: an MLP joint graph, both partitioners agree with the joint", "[partition]") {
  // h = relu(addmm(b1, x, w1^T)); out = sum(h * h); the backward is written out.
  Program p0;
  p0.stage = "joint";
  Graph &g = p0.forward;
  Node *x = g.addPlaceholder("x", f32({6, 5}), InputRole::UserInput);
  Node *w1 = primal(g, "w1", f32({7, 5}), InputRole::Parameter);
  Node *b1 = primal(g, "b1", f32({7}), InputRole::Parameter);
  Node *t = g.addPlaceholder("tangents_1", f32({}), InputRole::Tangent);
  Node *w1t = call(g, "w1t", "aten.permute.default", {w1, std::vector<int64_t>{1, 0}});
  Node *h0 = call(g, "h0", "aten.addmm.default", {b1, x, w1t});
  Node *h = call(g, "h", "aten.relu.default", {h0});
  Node *hh = call(g, "hh", "aten.mul.Tensor", {h, h});
  Node *loss = call(g, "loss", "aten.sum.default", {hh});
  // d loss / d h = 2h * t ; d h0 = that * (h > 0)
  Node *te = call(g, "te", "aten.expand.default", {t, std::vector<int64_t>{6, 7}});
  Node *gh = call(g, "gh", "aten.mul.Tensor", {te, h});
  Node *gh2 = call(g, "gh2", "aten.mul.Scalar", {gh, 2.0});
  Node *pos = call(g, "pos", "aten.gt.Scalar", {h, 0.0});
  Node *gh0 = call(g, "gh0", "aten.mul.Tensor", {gh2, pos});
  Node *gt = call(g, "ght", "aten.permute.default", {gh0, std::vector<int64_t>{1, 0}});
  Node *gw1 = call(g, "gw1", "aten.mm.default", {gt, x});
  Node *gb1 = call(g, "gb1", "aten.sum.dim_IntList", {gh0, std::vector<int64_t>{0}, false});
  g.setOutputs({loss, gw1, gb1});
  p0.numForwardOutputs = 1;
  p0.gradOf = {"w1", "b1"};

  Program d = partitioned(p0, PartitionerKind::Default);
  Program m = partitioned(p0, PartitionerKind::MinCut);
  CHECK(d.saved == std::vector<std::string>{"h"});
  // Min-cut: h (relu, dist 1, all users fuse) costs 2*int(168*1.1) = 368 to
  // save; h0 (addmm, banned, dist 2, materialized) costs int(168*1.21) = 203.
  // So it saves the addmm output and recomputes the relu (as Inductor does).
  CHECK(m.saved == std::vector<std::string>{"h0"});
  CHECK(savedBytes(m) <= savedBytes(d));
  std::vector<std::string> rec;
  for (const Node *n : recomputedNodes(m)) rec.push_back(n->name);
  CHECK(rec == std::vector<std::string>{"h"});
  CHECK(recomputedNodes(d).empty());
  // x is a primal without grad, still a backward placeholder (contract).
  CHECK(m.backward.placeholders()[0]->name == "x");
}

TEST_CASE("Partition: a gradient that is a primal or needs no tangent", "[partition]") {
  // out = x + y (y does not require grad); grad of x = tangent, plus a
  // constant gradient for z (unused by the forward): zeros_like(z).
  Program p0;
  p0.stage = "joint";
  Graph &g = p0.forward;
  Node *x = primal(g, "x", f32({3}));
  Node *y = g.addPlaceholder("y", f32({3}), InputRole::UserInput);
  Node *z = primal(g, "z", f32({2}));
  Node *t = g.addPlaceholder("tangents_1", f32({3}), InputRole::Tangent);
  Node *out = call(g, "out", "aten.add.Tensor", {x, y});
  Node *gz = call(g, "gz", "aten.mul.Scalar", {z, 0.0});
  g.setOutputs({out, t, gz});
  p0.numForwardOutputs = 1;
  p0.gradOf = {"x", "z"};
  for (PartitionerKind k : {PartitionerKind::Default, PartitionerKind::MinCut}) {
    Program p = partitioned(p0, k);
    CHECK(p.saved.empty());
    CHECK(p.backward.outputs()[0]->name == "tangents_1");
  }
}

TEST_CASE("Partition: contract violations are internal errors", "[partition]") {
  Program joint = tanhExpChain();
  joint.gradOf = {"x"}; // 2 gradient outputs, 1 entry
  try {
    partition(joint, PartitionerKind::MinCut);
    FAIL("expected an internal error");
  } catch (const Error &e) {
    CHECK(e.kind() == Error::Kind::Internal);
  }
  Program already = tanhExpChain();
  already.stage = "partition";
  CHECK_THROWS_AS(partition(already, PartitionerKind::Default), Error);
}

TEST_CASE("Partition: byte guard when the weighted cut saves more bytes", "[partition]") {
  // The log-softmax tail of a classifier. lsm = log_softmax(mm(x, w)) is read
  // by the forward's sum and by the backward's exp. Network weights:
  //   lsm:    dist 1, all users fuse -> 2*int(320*1.1)          = 704
  //   logits: mm, banned, dist 3, materialized -> int(320*1.331) = 425
  //   amax:   reduction (32*4 < 320), banned, dist 3 -> 2*42      =  84
  //   lg:     dist 2 -> 2*int(32*1.21)                            =  76
  // so the network saves {logits, amax, lg} (585 < 704): 384 bytes, more than
  // the 320 bytes of {lsm} that default saves. partition(MinCut) keeps default's.
  Program p0;
  p0.stage = "joint";
  Graph &g = p0.forward;
  Node *x = primal(g, "x", f32({8, 4}));
  Node *w = primal(g, "w", f32({4, 10}), InputRole::Parameter);
  Node *t = g.addPlaceholder("tangents_1", f32({}), InputRole::Tangent);
  Node *logits = call(g, "logits", "aten.mm.default", {x, w});
  Node *amax = call(g, "amax", "aten.amax.default", {logits, std::vector<int64_t>{1}, true});
  Node *s1 = call(g, "s1", "aten.sub.Tensor", {logits, amax});
  Node *e1 = call(g, "e1", "aten.exp.default", {s1});
  Node *se = call(g, "se", "aten.sum.dim_IntList", {e1, std::vector<int64_t>{1}, true});
  Node *lg = call(g, "lg", "aten.log.default", {se});
  Node *lsm = call(g, "lsm", "aten.sub.Tensor", {s1, lg});
  Node *loss = call(g, "loss", "aten.sum.default", {lsm});
  Node *te = call(g, "te", "aten.expand.default", {t, std::vector<int64_t>{8, 10}});
  Node *ex = call(g, "ex", "aten.exp.default", {lsm});
  Node *sm = call(g, "sm", "aten.sum.dim_IntList", {te, std::vector<int64_t>{1}, true});
  Node *mul = call(g, "mulg", "aten.mul.Tensor", {ex, sm});
  Node *gl = call(g, "gl", "aten.sub.Tensor", {te, mul});
  Node *wt = call(g, "wt", "aten.permute.default", {w, std::vector<int64_t>{1, 0}});
  Node *gx = call(g, "gx", "aten.mm.default", {gl, wt});
  Node *xt = call(g, "xt", "aten.permute.default", {x, std::vector<int64_t>{1, 0}});
  Node *gw = call(g, "gw", "aten.mm.default", {xt, gl});
  g.setOutputs({loss, gx, gw});
  p0.numForwardOutputs = 1;
  p0.gradOf = {"x", "w"};

  CHECK(minCutNetworkSaved(p0) == std::vector<std::string>{"logits", "amax", "lg"});
  Program d = partitioned(p0, PartitionerKind::Default);
  Program m = partitioned(p0, PartitionerKind::MinCut);
  CHECK(d.saved == std::vector<std::string>{"lsm"});
  CHECK(m.saved == std::vector<std::string>{"lsm"});
  CHECK(savedBytes(m) == 320);
  // When the network's set is no larger, it is used as is (the chain above).
  CHECK(minCutNetworkSaved(tanhExpChain()) == std::vector<std::string>{"tanh"});
}

TEST_CASE("Partition: long fusible chains get cut every ~100 forward nodes", "[partition]") {
  // h_i = tanh(h_{i-1}), i = 1..N; backward g_{i-1} = g_i * (1 - h_i^2).
  // Recomputing the whole chain from x would be free in the network, but
  // ban_recompute_long_fusible_chains bans a node once a fusible chain runs
  // more than 100 forward nodes past its start, so a few chain values are saved.
  const int N = 450;
  Program p0;
  p0.stage = "joint";
  Graph &g = p0.forward;
  Node *x = primal(g, "x", f32({4}));
  Node *t = g.addPlaceholder("tangents_1", f32({4}), InputRole::Tangent);
  std::vector<Node *> h{x};
  for (int i = 1; i <= N; ++i)
    h.push_back(call(g, "h" + std::to_string(i), "aten.tanh.default", {h.back()}));
  Node *gi = t;
  for (int i = N; i >= 1; --i) {
    std::string k = std::to_string(i);
    Node *sq = call(g, "sq" + k, "aten.mul.Tensor", {h[i], h[i]});
    Node *om = call(g, "om" + k, "aten.rsub.Scalar", {sq, 1.0});
    gi = call(g, "g" + k, "aten.mul.Tensor", {gi, om});
  }
  g.setOutputs({h.back(), gi});
  p0.numForwardOutputs = 1;
  p0.gradOf = {"x"};

  Program d = partitioned(p0, PartitionerKind::Default);
  CHECK(d.saved.size() == (size_t)N);
  Program m = partitioned(p0, PartitionerKind::MinCut);
  // h_i has forward order i-1. The first chain starts at h1 (order 0) and is
  // banned at order 101 (h102); the next unvisited start is h103, banned at
  // h204; and so on. h450 is the forward output (materialized: banned).
  CHECK(m.saved == std::vector<std::string>{"h102", "h204", "h306", "h408", "h450"});
  CHECK(recomputedNodes(m).size() == (size_t)N - 5);
}

TEST_CASE("Partition: a fusible use after an unfusible one is banned (used far apart)",
          "[partition]") {
  // X = 2x feeds tanh (A), mm (B -> relu D, the first unfusible use, order 3)
  // and, later, sigmoid (C, order 4). ban_recompute_used_far_apart bans C.
  // Without the ban the cheapest cut is the primal x (placeholders are outside
  // requiredFw, so dist 0 -> int(64*1.1) = 70 < X's 77 < C's 2*70): nothing
  // saved, X and C recomputed. With the ban, C itself must be saved.
  Program p0;
  p0.stage = "joint";
  Graph &g = p0.forward;
  Node *x = primal(g, "x", f32({4, 4}));
  Node *w = primal(g, "w", f32({4, 4}), InputRole::Parameter);
  Node *t = g.addPlaceholder("tangents_1", f32({4, 4}), InputRole::Tangent);
  Node *X = call(g, "X", "aten.mul.Scalar", {x, 2.0});
  Node *A = call(g, "A", "aten.tanh.default", {X});
  Node *B = call(g, "B", "aten.mm.default", {X, w});
  Node *D = call(g, "D", "aten.relu.default", {B});
  Node *C = call(g, "C", "aten.sigmoid.default", {X});
  Node *s1 = call(g, "s1", "aten.add.Tensor", {A, D});
  Node *out = call(g, "out", "aten.add.Tensor", {s1, C});
  Node *gx = call(g, "gx", "aten.mul.Tensor", {t, C});
  Node *gw = call(g, "gw", "aten.mul.Tensor", {t, w});
  g.setOutputs({out, gx, gw});
  p0.numForwardOutputs = 1;
  p0.gradOf = {"x", "w"};
  Program m = partitioned(p0, PartitionerKind::MinCut);
  CHECK(m.saved == std::vector<std::string>{"C"});
  CHECK(recomputedNodes(m).empty());
}
