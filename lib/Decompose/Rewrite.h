//===- Rewrite.h - Table-driven node rewriting for decompose and lower -*- C++ -*-===//
//
// Internal to lib/Decompose. A *rule* replaces one call node by a few nodes
// built with OpRegistry's buildCall; a *table* maps op targets to rules.
// applyRules() runs a table to a fixed point over a graph:
//  * new nodes are inserted right before the replaced node, named with
//    Graph::uniqueName(<op name>) and carry the replaced node's loc, stack trace and userOp;
//  * the value that replaces a result takes over the replaced node's name (for a
//    multi-result op, the name of the getitem that read that result) when it is the same
//    op; a value of another op keeps its own op's name;
//  * every replacement value must have exactly the replaced result's type
//    (internal error otherwise), so rules cannot silently change semantics;
//  * nodes a rule created but nobody reads are erased;
//  * a node with run-time sizes (Node::runtimeSized, docs/dynamic-shapes.md) may only be
//    rewritten by a rule marked `runtimeSizes`: one that takes every size it puts into an
//    argument with its expression (Size, Emitter::call's SymArgs). Any other is a located
//    error, never a silent specialization to the reference sizes. A node whose own arguments
//    are run-time sizes (Node::symArgs) needs a rule marked `runtimeSizeArgs` too.
//===----------------------------------------------------------------------===//
#pragma once

#include "aotc/Graph.h"
#include "aotc/OpRegistry.h"
#include "aotc/SymExpr.h"

#include <functional>
#include <optional>
#include <string>
#include <unordered_set>
#include <vector>

namespace aotc::rewrite {

using KwArgs = std::vector<std::pair<std::string, Arg>>;

/// A size a rule computes: its value at the program's reference sizes and its expression over
/// the run-time sizes (a constant for a static one). Arithmetic keeps both.
struct Size {
  int64_t v = 0;
  SymExpr e = SymExpr::integer(0);
  Size(int64_t x = 0) : v(x), e(SymExpr::integer(x)) {}
  Size(int64_t x, SymExpr expr) : v(x), e(std::move(expr)) {}
  /// The expression's text for Node::symArgs: "" when it is a constant.
  std::string text() const;
  friend Size operator+(const Size &a, const Size &b);
  friend Size operator-(const Size &a, const Size &b);
  friend Size operator*(const Size &a, const Size &b);
};
/// Dim d of t (TensorType::sym where run-time), and all of them.
Size sizeOf(const TensorType &t, size_t d);
std::vector<Size> sizesOf(const TensorType &t);
/// Int argument i of n (group norm's N): its run-time expression (Node::symArgs) or its constant.
Size sizeArg(const Node &n, size_t i);
/// The values of `s` (an int[] argument) and argument i's entry of Node::symArgs for them.
std::vector<int64_t> values(const std::vector<Size> &s);
/// The product of `s` (an element count).
Size product(const std::vector<Size> &s);
std::pair<size_t, std::vector<std::string>> symArg(size_t i, const std::vector<Size> &s);

/// Builds nodes in place of one node (`at`).
class Emitter {
public:
  Emitter(Graph &g, Node *at) : g_(g), at_(at) {}

  /// Emits `target(args, kwargs)` before the replaced node (defaults filled,
  /// types inferred by the registry).
  Node *call(const std::string &target, const std::vector<Arg> &args, const KwArgs &kwargs = {});
  /// As call, with the run-time sizes of int and int-list arguments by schema index (symArg).
  Node *call(const std::string &target, const std::vector<Arg> &args, const KwArgs &kwargs, const SymArgs &sym);

  // Shorthands (all emit one node; scalars are Python numbers, i.e. wrapped scalars).
  Node *add(Arg a, Arg b) { return call("aten.add.Tensor", {a, b}); }
  Node *sub(Arg a, Arg b) { return call("aten.sub.Tensor", {a, b}); }
  Node *mul(Arg a, Arg b) { return call("aten.mul.Tensor", {a, b}); }
  Node *div(Arg a, Arg b) { return call("aten.div.Tensor", {a, b}); }
  Node *neg(Node *a) { return call("aten.neg.default", {a}); }
  Node *exp(Node *a) { return call("aten.exp.default", {a}); }
  /// sum.dim_IntList(x, dims, keepdim); dims = {} reduces every dim.
  Node *sum(Node *x, std::vector<int64_t> dims, bool keepdim);
  /// A 0-d tensor holding `v` with dtype `dt` (scalar_tensor).
  Node *scalarTensor(Arg v, DType dt);
  /// _to_copy(x, dtype=dt), or x itself when it already has dtype `dt`.
  Node *toDtype(Node *x, DType dt);
  /// view(x, shape); with `sym`, shape's run-time sizes (TensorType::sym).
  Node *view(Node *x, const Shape &shape, const std::vector<std::string> &sym = {});
  /// view(x, sizes) and full(sizes, fill, dtype) with sizes that may be run-time (Size).
  Node *viewTo(Node *x, const std::vector<Size> &sizes);
  Node *fullOf(const std::vector<Size> &sizes, Arg fill, DType dt);
  /// div.Tensor(x, n) by an int count that may be a run-time size: true division by a size
  /// argument, never 1/n folded into a float (mean, batch norm).
  Node *divBy(Node *x, const Size &n);
  /// [0, 1, ..., n - 1] of dtype `dt` (aten.arange).
  Node *iota(int64_t n, DType dt = DType::I64);
  /// permute(x, dims).
  Node *permute(Node *x, const std::vector<int64_t> &dims);

  Graph &graph() { return g_; }
  Node &node() { return *at_; }
  bool created(const Node *n) const { return created_.count(n) != 0; }
  const std::vector<Node *> &createdNodes() const { return order_; }

private:
  Graph &g_;
  Node *at_;
  std::unordered_set<const Node *> created_;
  std::vector<Node *> order_;
};

/// A rule returns the value of each result of the node (one entry for a
/// single-result op; nullptr for a result it does not compute), or an empty
/// vector to leave the node unchanged.
using Rule = std::function<std::vector<Node *>(Emitter &, Node &)>;

struct RuleEntry {
  std::string target; ///< "aten.linear.default"
  Rule rule;
  std::string summary; ///< One line for docs and --help-style listings.
  /// The rule carries run-time sizes (see the top of this file); others refuse such nodes.
  bool runtimeSizes = false;
  /// It also carries a run-time size given as an argument (Node::symArgs: `view(x, [s17,
  /// 32])`, `clamp_min(x, s17)`); others refuse a node with one.
  bool runtimeSizeArgs = false;
};

/// Applies `table` until no rule fires. `stage` names the stage in diagnostics.
/// Returns the number of rewrites.
int applyRules(Graph &g, const std::vector<RuleEntry> &table, const std::string &stage);

//===-- Helpers shared by the rule files -------------------------------------===//

/// Dim `d` of a tensor of rank `rank`, wrapped (nodeError at `n` when out of range).
int64_t wrapDimAt(const Node &n, int64_t d, int64_t rank);
/// The dims reduced by an `int[1]? dim` argument (None or [] -> every dim), wrapped and sorted.
std::vector<int64_t> reducedDims(const Node &n, size_t argIndex, int64_t rank);
/// Optional `ScalarType? dtype` argument.
std::optional<DType> dtypeArgOf(const Node &n, size_t i);

} // namespace aotc::rewrite
