//===- AutodiffTestUtil.h - Small graph builders for autodiff tests -*- C++ -*-===//
#pragma once

#include "aotc/Autodiff.h"
#include "aotc/OpRegistry.h"

#include <string>
#include <vector>

namespace aotc::test {

inline TensorType f64(Shape s) { return {DType::F64, std::move(s)}; }
inline TensorType f32(Shape s) { return {DType::F32, std::move(s)}; }
inline TensorType i64(Shape s) { return {DType::I64, std::move(s)}; }
inline TensorType b8(Shape s) { return {DType::Bool, std::move(s)}; }

/// Builds a forward Program (stage "decompose") node by node.
struct ProgramBuilder {
  Program p;
  ProgramBuilder() { p.stage = "decompose"; }
  Node *input(const std::string &name, TensorType t, bool requiresGrad = true) {
    Node *n = p.forward.addPlaceholder(name, std::move(t), InputRole::UserInput);
    n->requiresGrad = requiresGrad && isFloating(n->type().dtype);
    return n;
  }
  Node *call(const std::string &target, std::vector<Arg> args,
             std::vector<std::pair<std::string, Arg>> kwargs = {}) {
    std::string base = target == "getitem" ? "getitem" : OpRegistry::get().lookup(target)->schema.name;
    return buildCall(p.forward, p.forward.uniqueName(base), target, args, kwargs);
  }
  Program done(std::vector<Node *> outs) {
    p.forward.setOutputs(std::move(outs));
    return std::move(p);
  }
};

/// Number of nodes of `g` with the given target.
inline int countTarget(const Graph &g, const std::string &target) {
  int c = 0;
  for (auto &n : g.nodes())
    if (n->isCall() && n->target == target) ++c;
  return c;
}

} // namespace aotc::test
