//===- AutodiffInternal.h - Shared by the lib/Autodiff files ----*- C++ -*-===//
//
// Internal to lib/Autodiff:
//  * the table of build-time helper functions formulas may call (sum_to, ...);
//  * short-name resolution of op calls (mul -> aten.mul.Tensor / aten.mul.Scalar);
//  * BackwardBuilder: creates backward nodes with CSE and exact peepholes;
//  * evalFormula: turns a parsed formula into graph nodes for one forward node.
//===----------------------------------------------------------------------===//
#pragma once

#include "aotc/Autodiff.h"
#include "aotc/OpRegistry.h"

#include <map>
#include <set>
#include <string>
#include <type_traits>
#include <vector>

namespace aotc {
namespace autodiff {

/// A helper evaluated while building the graph (not a registry op).
struct HelperInfo {
  const char *name;
  int minArgs, maxArgs;
  const char *doc; ///< One line for docs/derivatives.md and error messages.
};
const std::vector<HelperInfo> &helpers();
const HelperInfo *findHelper(const std::string &name);

/// Short-name aliases (sum_dim -> aten.sum.dim_IntList, ...).
const std::map<std::string, std::string> &shortNameAliases();

/// Candidate registry ops for a callee written in a formula: a full target
/// ("aten.mul.Tensor" or "mul.Tensor") gives that op; an alias gives its target;
/// a short name "mul" gives every "aten.mul.*" overload, ordered Tensor,
/// default, Scalar, then the others by name. Empty when nothing matches.
std::vector<const OpDef *> resolveCallee(const std::string &name);

/// Creates backward nodes: names them after the op, attaches the forward
/// node's location and stack trace, applies exact peepholes (x*1, view to the
/// same shape, identity permute, cast to the same dtype, ...) and reuses an
/// existing backward node with the same target and arguments (CSE).
class BackwardBuilder {
public:
  explicit BackwardBuilder(Graph &g) : g_(g) {}
  /// Builds target(args, kwargs); `origin` is the forward node being differentiated.
  /// `sym`: the run-time sizes of int and int-list arguments (buildCall's SymArgs).
  Node *call(const std::string &target, const std::vector<Arg> &args,
             const std::vector<std::pair<std::string, Arg>> &kwargs, const Node *origin, const SymArgs &sym = {});
  /// Sum of x over its broadcast dims so that the result has shape `to` (`toSym`: its
  /// run-time sizes, TensorType::sym) (PyTorch at::sum_to): sum.dim_IntList(keepdim=True)
  /// then view.
  Node *sumTo(Node *x, const Shape &to, const Node *origin, const std::vector<std::string> &toSym = {});
  /// A zero tensor of type t (full; its run-time sizes too).
  Node *zeros(const TensorType &t, const Node *origin);
  /// Converts x to dtype `dt` (_to_copy) unless it already has it.
  Node *cast(Node *x, DType dt, const Node *origin);
  Graph &graph() { return g_; }

private:
  Graph &g_;
  std::map<std::string, Node *> cse_;
};

/// A formula's value, with the run-time sizes (docs/dynamic-shapes.md) of its ints: one
/// SymExpr::str() per int of an int or int list ("" for a constant); empty when none is one.
struct Val {
  Arg a;
  std::vector<std::string> sym;
  Val() = default;
  template <class T, class = std::enable_if_t<std::is_constructible_v<Arg, T &&>>>
  Val(T &&v, std::vector<std::string> s = {}) : a(std::forward<T>(v)), sym(std::move(s)) {}
  bool symbolic() const;
};

/// Everything a formula of one forward node can refer to.
struct FormulaScope {
  const Node *node = nullptr;            ///< The forward node.
  const DerivativeRule *rule = nullptr;
  std::vector<Node *> grads;             ///< Gradient per result (nullptr: none flowed).
  std::vector<Node *> *results = nullptr; ///< Per result: the node itself or a getitem (lazy).
  std::map<std::string, Val> letValues;  ///< Evaluated `let:` bindings.
  std::set<std::string> letInProgress;   ///< Cycle detection.
};

/// Evaluates a formula; the value is a Node* for tensors, or a constant (with the run-time
/// sizes it depends on).
Val evalFormula(const FormulaExpr &e, FormulaScope &scope, BackwardBuilder &bb);

/// Checks a formula against an op schema at load time: every callee exists,
/// every name is an input, grad/grads[i]/result/resultK fit the number of
/// results, attributes are known. Errors are user errors at the expression.
/// `lets` are the names bound by the entry's `let:` so far.
void validateFormula(const FormulaExpr &e, const OpDef &op, const std::set<std::string> &lets = {});

} // namespace autodiff
} // namespace aotc
