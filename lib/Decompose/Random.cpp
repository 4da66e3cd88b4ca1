//===- Random.cpp - Random ops -> Philox draws of the step's RNG state --------===//
//
// The last step of decompose (docs/randomness.md), after the composites (SDPA with dropout_p > 0
// emits a dropout). Every random op that draws (rand,
// rand_like, bernoulli, and dropout in training with 0 < p < 1) gets a stream number k, in
// graph order, and becomes
//
//   u = aotc::philox_uniform(rng_state[0], rng_state[1] + k, size, dtype)
//
// followed by torch's own decomposition of the op (torch/_decomp/decompositions.py):
//   rand, rand_like:   u
//   bernoulli.p(x, p): _to_copy(u < p, x.dtype);  bernoulli(x): _to_copy(u < x, x.dtype)
//   native_dropout:    mask = u > p; (mask * x * (1 / (1 - p)), mask); dropout: its output
// Dropout that draws nothing is rewritten too: eval mode or p = 0 is (clone(x), ones), p = 1
// is (x * 0, zeros). `rng_state` (i64[2] = {seed, offset}, role rng_state) is a new input,
// added only when something draws, and the graph returns rng_state + [0, n] (n streams) as
// that input's new value, so the runtime advances the offset each step the way it writes
// back batch norm's statistics. philox_uniform is a pure function of its inputs: the joint
// graph, the partitioner (which may save the mask or recompute it) and codegen need nothing
// else to give the backward the forward's bits.
//===----------------------------------------------------------------------===//
#include "Rules.h"

#include "aotc/Stages.h"

#include <unordered_map>

namespace aotc {
namespace {

using namespace rewrite;
using Vals = std::vector<Node *>;

/// dropout/native_dropout's `train` argument (native_dropout's None means training).
bool training(const Node &n) { return n.isNoneArg(2) || n.boolArg(2); }

/// dropout/native_dropout's (p, train) argument pair: does it draw?
bool dropoutDraws(const Node &n) {
  double p = n.scalarArg(1);
  return training(n) && p > 0.0 && p < 1.0;
}

bool draws(const Node &n) {
  if (!n.isCall() || !n.op || !n.op->random) return false;
  if (n.target == "aten.native_dropout.default" || n.target == "aten.dropout.default") return dropoutDraws(n);
  return true;
}

struct Streams {
  Node *rng = nullptr;
  std::unordered_map<const Node *, int64_t> id;

  /// philox_uniform of node n's stream, of n's shape and dtype `dt`. A run-time size (`sym`,
  /// TensorType::sym) leaves each element's counter as at a static size: element i of the
  /// stream is the same number whatever the sizes.
  Node *uniform(Emitter &e, Node &n, const Shape &shape, DType dt, const std::vector<std::string> &sym = {}) const {
    int64_t k = id.at(&n);
    Node *seed = e.call("aten.select.int", {rng, int64_t(0), int64_t(0)});
    Node *off = e.call("aten.select.int", {rng, int64_t(0), int64_t(1)});
    if (k) off = e.add(off, k);
    return e.call("aotc.philox_uniform.default", {seed, off, std::vector<int64_t>(shape), DTypeLit{dt}}, {}, {{2, sym}});
  }
};

Vals dropout(Emitter &e, Node &n, const Streams &s, bool withMask) {
  Node *x = n.tensorArg(0);
  const TensorType &t = x->type();
  double p = n.scalarArg(1);
  Node *out, *mask;
  if (draws(n)) {
    mask = e.call("aten.gt.Scalar", {s.uniform(e, n, t.shape, t.dtype, t.sym), p});
    out = e.mul(e.mul(mask, x), 1.0 / (1.0 - p));
  } else {
    bool zero = p == 1.0 && training(n);
    out = zero ? e.mul(x, 0.0) : e.call("aten.clone.default", {x});
    mask = e.call("aten.full.default", {std::vector<int64_t>(t.shape), !zero}, {{"dtype", DTypeLit{DType::Bool}}},
                  {{0, t.sym}});
  }
  if (withMask) return {out, mask};
  return {out};
}

std::vector<RuleEntry> randomRules(const Streams &s) {
  auto draw = [&s](Emitter &e, Node &n) -> Vals {
    const TensorType &t = n.type();
    return {s.uniform(e, n, t.shape, t.dtype, t.sym)};
  };
  auto bernoulli = [&s](Emitter &e, Node &n) -> Vals {
    Node *x = n.tensorArg(0);
    const TensorType &t = x->type();
    Arg p = n.target == "aten.bernoulli.p" ? n.args[1] : Arg(x);
    return {e.toDtype(e.call(n.target == "aten.bernoulli.p" ? "aten.lt.Scalar" : "aten.lt.Tensor",
                             {s.uniform(e, n, t.shape, t.dtype, t.sym), p}),
                      t.dtype)};
  };
  // Box-Muller: u = the stream's uniforms of shape [2, *size]; sqrt(-2 log(1 - u[0])) cos(2 pi u[1])
  // (1 - u is in (0, 1]: no log(0)). The values are aotc's, not torch's generator's.
  auto normal = [&s](Emitter &e, Node &n) -> Vals {
    const TensorType &t = n.type();
    Shape two = t.shape;
    two.insert(two.begin(), 2);
    std::vector<std::string> twoSym = t.sym;
    if (!twoSym.empty()) twoSym.insert(twoSym.begin(), "");
    Node *u = s.uniform(e, n, two, t.dtype, twoSym);
    Node *u0 = e.call("aten.select.int", {u, int64_t(0), int64_t(0)});
    Node *u1 = e.call("aten.select.int", {u, int64_t(0), int64_t(1)});
    Node *r = e.call("aten.sqrt.default", {e.mul(e.call("aten.log.default", {e.call("aten.rsub.Scalar", {u0, 1.0})}), -2.0)});
    Node *c = e.call("aten.cos.default", {e.mul(u1, 6.283185307179586)});
    return {e.mul(r, c)};
  };
  // randperm: perm[rank(u_i)] = i for n f64 uniforms u (stable ranks: a permutation even with ties).
  auto randperm = [&s](Emitter &e, Node &n) -> Vals {
    const TensorType &t = n.type();
    int64_t len = t.shape[0];
    Node *ar = e.call("aten.arange.start_step", {int64_t(0), len}, {{"dtype", DTypeLit{DType::I64}}});
    if (len <= 1) return {e.toDtype(ar, t.dtype)};
    Node *r = rules::stableRanks(e, s.uniform(e, n, {len}, DType::F64), 0, false);
    Node *z = e.call("aten.full.default", {std::vector<int64_t>{len}, int64_t(0)}, {{"dtype", DTypeLit{DType::I64}}});
    return {e.toDtype(e.call("aten.scatter.src", {z, int64_t(0), r, ar}), t.dtype)};
  };
  return {
      {"aten.randperm.default", randperm, "perm[rank(u_i)] = i: stable ranks of n f64 philox uniforms, scatter.src of arange"},
      {"aten.randn.default", normal, "Box-Muller: sqrt(-2 log(1 - u0)) cos(2 pi u1), u = philox_uniform [2, *size]", true},
      {"aten.randn_like.default", normal, "as randn", true},
      {"aten.rand.default", draw, "philox_uniform of its stream", true},
      {"aten.rand_like.default", draw, "philox_uniform of its stream", true},
      {"aten.bernoulli.default", bernoulli, "_to_copy(u < self)", true},
      {"aten.bernoulli.p", bernoulli, "_to_copy(u < p)", true},
      {"aten.native_dropout.default", [&s](Emitter &e, Node &n) { return dropout(e, n, s, true); },
       "mask = u > p; (mask * x / (1 - p), mask)", true},
      {"aten.dropout.default", [&s](Emitter &e, Node &n) { return dropout(e, n, s, false); },
       "native_dropout's output", true},
  };
}

} // namespace

std::vector<std::pair<std::string, std::string>> randomRuleTable() {
  Streams none;
  std::vector<std::pair<std::string, std::string>> r;
  for (const RuleEntry &e : randomRules(none)) r.push_back({e.target, e.summary});
  return r;
}

void assignRandomStreams(Program &p) {
  Graph &g = p.forward;
  Streams s;
  int64_t n = 0;
  for (auto &x : g.nodes())
    if (draws(*x)) s.id[x.get()] = n++;
  if (n > 0) {
    for (Node *ph : g.placeholders())
      if (ph->role == InputRole::RngState)
        userError(ph->loc, "the program already has an rng_state input ('" + ph->name +
                               "') and still draws random numbers: decompose assigns the streams once");
    s.rng = g.addPlaceholder(g.uniqueName("rng_state"), TensorType{DType::I64, {2}}, InputRole::RngState);
  }
  applyRules(g, randomRules(s), "decompose");
  if (n == 0) return;
  // rng_state + [0, n]: the state of the next step.
  Emitter e(g, g.outputNode());
  Node *inc = e.mul(e.call("aten.arange.default", {int64_t(2)}), n);
  Node *next = e.add(s.rng, inc);
  g.rename(next, g.uniqueName("rng_state_next"));
  std::vector<Node *> outs = g.outputs();
  outs.push_back(next);
  g.setOutputs(outs);
  p.mutatedInputs.push_back({(int)outs.size() - 1, s.rng->name});
}

} // namespace aotc
