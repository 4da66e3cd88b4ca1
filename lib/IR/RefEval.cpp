//===- RefEval.cpp - The float64 reference evaluator ---------------------------===//
//
// Walks a graph in node order, calling each op's OpDef::eval on float64 values.
// Checks every result against the node's static types, so a wrong shape
// function or evaluator is caught as an internal error at once.
//===----------------------------------------------------------------------===//
#include "aotc/RefEval.h"
#include "aotc/OpRegistry.h"

#include <cmath>
#include <unordered_map>

namespace aotc {

RefTensor::RefTensor(DType dt, Shape s, double fill)
    : dtype(dt), shape(std::move(s)), data((size_t)numelOf(shape), fill) {}

int64_t RefTensor::offset(const std::vector<int64_t> &idx) const {
  AOTC_ASSERT(idx.size() == shape.size(), "RefTensor::offset: rank mismatch");
  int64_t f = 0;
  for (size_t d = 0; d < shape.size(); ++d) {
    AOTC_ASSERT(idx[d] >= 0 && idx[d] < shape[d], "RefTensor::offset: index out of range");
    f = f * shape[d] + idx[d];
  }
  return f;
}

std::vector<int64_t> broadcastIndexMap(const Shape &in, const Shape &out) {
  AOTC_ASSERT(in.size() <= out.size(), "broadcastIndexMap: input rank exceeds output rank");
  size_t lead = out.size() - in.size();
  // Strides of `in` aligned to `out`'s dims, 0 where broadcast.
  std::vector<int64_t> st(out.size(), 0);
  int64_t s = 1;
  for (int64_t d = (int64_t)in.size() - 1; d >= 0; --d) {
    AOTC_ASSERT(in[d] == out[d + lead] || in[d] == 1,
                "broadcastIndexMap: " + shapeStr(in) + " does not broadcast to " + shapeStr(out));
    st[d + lead] = in[d] == 1 ? 0 : s;
    s *= in[d];
  }
  int64_t n = numelOf(out);
  std::vector<int64_t> map(n);
  std::vector<int64_t> idx(out.size(), 0);
  int64_t off = 0;
  for (int64_t k = 0; k < n; ++k) {
    map[k] = off;
    // Increment the multi-index (row-major), keeping `off` in sync.
    for (int64_t d = (int64_t)out.size() - 1; d >= 0; --d) {
      if (++idx[d] < out[d]) {
        off += st[d];
        break;
      }
      off -= st[d] * (out[d] - 1);
      idx[d] = 0;
    }
  }
  return map;
}

static void checkResult(const Node &n, const RefTensor &v, const TensorType &t, const char *what) {
  if (v.shape != t.shape || v.dtype != t.dtype || (int64_t)v.data.size() != numelOf(v.shape))
    internalError(std::string("reference evaluator: ") + what + " '" + n.name + "' (" + n.target +
                  ") has value " + dtypeAbbr(v.dtype) + shapeStr(v.shape) + " but type " + t.str());
}

std::vector<RefTensor> evaluate(const Graph &g, const std::vector<RefTensor> &inputs) {
  std::unordered_map<const Node *, std::vector<RefTensor>> vals;
  std::vector<Node *> ph = g.placeholders();
  AOTC_ASSERT(ph.size() == inputs.size(), "evaluate: " + std::to_string(inputs.size()) +
                                              " inputs for " + std::to_string(ph.size()) +
                                              " placeholders");
  for (size_t i = 0; i < ph.size(); ++i) {
    checkResult(*ph[i], inputs[i], ph[i]->type(), "input");
    vals[ph[i]] = {inputs[i]};
  }
  std::vector<RefTensor> result;
  for (const auto &up : g.nodes()) {
    const Node &n = *up;
    if (n.isPlaceholder()) continue;
    auto valueOf = [&](const Node *x) -> const RefTensor * {
      auto it = vals.find(x);
      AOTC_ASSERT(it != vals.end() && it->second.size() == 1,
                  "evaluate: '" + n.name + "' reads '" + x->name + "' which has no single value");
      return &it->second[0];
    };
    if (n.kind == NodeKind::Output) {
      for (Node *o : n.inputs()) result.push_back(*valueOf(o));
      break;
    }
    if (n.isGetitem()) {
      Node *src = std::get<Node *>(n.args.at(0));
      int64_t i = std::get<int64_t>(n.args.at(1));
      auto &sv = vals.at(src);
      if (i < 0) i += (int64_t)sv.size();
      AOTC_ASSERT(i >= 0 && i < (int64_t)sv.size(), "evaluate: getitem index out of range");
      RefTensor v = sv[i];
      checkResult(n, v, n.type(), "node");
      vals[&n] = {std::move(v)};
      continue;
    }
    const OpDef *op = n.op ? n.op : OpRegistry::get().lookup(n.target);
    AOTC_ASSERT(op, "evaluate: unknown op '" + n.target + "'");
    RefArgs args(n.args.size(), nullptr);
    std::vector<std::vector<const RefTensor *>> lists(n.args.size());
    for (size_t i = 0; i < n.args.size(); ++i) {
      if (auto *p = std::get_if<Node *>(&n.args[i])) {
        if (*p) args[i] = valueOf(*p);
      } else if (auto *l = std::get_if<std::vector<Node *>>(&n.args[i])) {
        for (Node *x : *l) lists[i].push_back(x ? valueOf(x) : nullptr);
      }
    }
    std::vector<RefTensor> out = op->eval(n, args, lists);
    AOTC_ASSERT(out.size() == n.types.size(), "evaluate: '" + n.name + "' produced " +
                                                  std::to_string(out.size()) + " results, expected " +
                                                  std::to_string(n.types.size()));
    for (size_t i = 0; i < out.size(); ++i) checkResult(n, out[i], n.types[i], "node");
    vals[&n] = std::move(out);
  }
  return result;
}

RefTensor randomTensor(const TensorType &t, std::mt19937_64 &rng, double lo, double hi) {
  RefTensor r(t.dtype, t.shape);
  std::uniform_real_distribution<double> u(lo, hi);
  for (double &v : r.data) {
    if (t.dtype == DType::Bool)
      v = (rng() & 1) ? 1.0 : 0.0;
    else if (isIntegral(t.dtype))
      v = std::floor(u(rng));
    else
      v = u(rng);
  }
  return r;
}

} // namespace aotc
