//===- Autodiff.h - Derivative rules and the joint graph --------*- C++ -*-===//
//
// aotc builds the backward graph itself (stage "joint", lib/Autodiff), from rules
// in a data file in the spirit of PyTorch's tools/autograd/derivatives.yaml:
//
//   - name: aten.mul.Tensor
//     self: mul(grad, other)
//     other: mul(grad, self)
//
// One entry per op overload; one formula per differentiable tensor input (by its
// schema name); `non_differentiable` marks inputs that get no gradient; an
// optional `let:` mapping names shared sub-formulas. Formulas
// are expressions over registry ops and a few build-time helpers (sum_to,
// restore_dims, invperm, ...); docs/derivatives.md is the language reference.
//
// Where the rules come from:
//  * the built-in file lib/Autodiff/derivatives.yaml, read at run time from the
//    path compiled in (AOTC_DERIVATIVES_YAML); if that file is missing (installed
//    binary), from `derivatives.yaml` next to the executable, then
//    `<exe dir>/../share/aotc/derivatives.yaml`; the environment variable
//    AOTC_DERIVATIVES_YAML, when set, takes precedence over all three;
//  * then every `--derivatives FILE` (JointOptions::extraDerivatives), in order;
//    an entry for an op that already has a rule replaces the whole rule.
//
// Errors: a YAML syntax error, an entry naming an unknown op, an argument the op
// does not have, or a malformed formula are user errors located at
// `file:line:col`. A rule that fails while building the joint graph (e.g. a
// formula whose result cannot be broadcast to its input) is a user error at the
// rule's location naming the node.
//===----------------------------------------------------------------------===//
#pragma once

#include "aotc/Graph.h"
#include "aotc/RefEval.h"
#include "aotc/Stages.h"

#include <functional>
#include <map>
#include <set>
#include <string>
#include <vector>

namespace aotc {

struct FormulaKwarg;

/// One node of a parsed formula expression.
struct FormulaExpr {
  enum class Kind {
    Ident,  ///< `grad`, `self`, `result1`, `True`, `None`... (`name`)
    Int,    ///< integer literal (`i`)
    Float,  ///< floating literal (`f`)
    String, ///< 'tanh' or "tanh" (`name`)
    List,   ///< [a, b, ...] (`args`)
    Call,   ///< callee(args..., kw=value...) (`name`, `args`, `kwargs`)
    Attr,   ///< base.attr, e.g. self.sizes (`args[0]` = base, `name` = attr)
    Index,  ///< base[i], e.g. grads[0] (`args[0]` = base, `i`)
  };
  Kind kind = Kind::Ident;
  std::string name;
  int64_t i = 0;
  double f = 0.0;
  std::vector<FormulaExpr> args;
  std::vector<FormulaKwarg> kwargs;
  SourceLoc loc; ///< Position of this sub-expression in the rules file.

  std::string str() const; ///< Canonical spelling (for messages and tests).
};

/// A keyword argument of a call: `name=value`.
struct FormulaKwarg {
  std::string name;
  FormulaExpr value;
};

/// Parses one formula. `start` is the location of the formula's first character;
/// the locations of sub-expressions are offsets from it on the same line.
/// Syntax errors are user errors at the offending character.
FormulaExpr parseFormula(const std::string &text, const SourceLoc &start);
/// Same, with the location of every character offset given by `locOf` (used
/// for multi-line YAML scalars).
FormulaExpr parseFormula(const std::string &text, const std::function<SourceLoc(size_t)> &locOf);

/// The rule for one op overload.
struct DerivativeRule {
  std::string target;                          ///< "aten.mul.Tensor"
  SourceLoc loc;                               ///< Where `name:` was written.
  std::map<std::string, FormulaExpr> formulas; ///< Schema input name -> formula.
  std::set<std::string> nonDifferentiable;     ///< Inputs marked `non_differentiable`.
  /// `let:` bindings, in order: names usable in the formulas (and in later lets),
  /// evaluated lazily, at most once per node.
  std::vector<std::pair<std::string, FormulaExpr>> lets;
};

/// A set of rules (the built-in file plus user files).
class DerivativeRules {
public:
  /// Reads a rules file; entries replace earlier rules for the same op.
  /// Errors (unreadable file, YAML syntax, unknown op or argument, malformed
  /// formula, unknown function or name in a formula) are located user errors.
  void loadFile(const std::string &path);
  /// Same as loadFile for in-memory text; `filename` is used in diagnostics.
  void loadString(const std::string &text, const std::string &filename);
  /// The rule for a canonical target, or nullptr.
  const DerivativeRule *find(const std::string &target) const;
  const std::map<std::string, DerivativeRule> &all() const { return rules_; }

  /// The built-in rules (loaded once from builtinDerivativesPath()).
  static const DerivativeRules &builtin();

private:
  std::map<std::string, DerivativeRule> rules_;
};

/// Path of the built-in rules file (see the file comment for the search order).
/// User error when none of the candidate paths exists.
std::string builtinDerivativesPath();

/// Built-in rules plus opts.extraDerivatives, in order.
DerivativeRules loadDerivativeRules(const JointOptions &opts);

/// buildJoint with an explicit rule set (the Stages.h entry point loads
/// loadDerivativeRules(opts) and calls this).
///
/// Contract (docs/stage-joint.md): on return p.forward is the joint graph:
/// placeholders = the primals (unchanged) then `tangents_1..` (one per floating
/// forward output, same type); outputs = the forward outputs, then one gradient
/// per p.gradOf entry (placeholders with requiresGrad, in order; same type as
/// the input). p.stage = "joint". Errors: a node on a path from a requires-grad
/// input to an output whose op has no rule -> nodeError "no derivative rule for
/// <target>"; a non-floating input that requires grad -> nodeError.
void buildJoint(Program &p, const DerivativeRules &rules);

//===-- Gradcheck ---------------------------------------------------------===//

struct GradcheckOptions {
  double eps = 1e-6;  ///< Central-difference step.
  double atol = 1e-5; ///< |analytic - numeric| <= atol + rtol * |numeric|, elementwise.
  double rtol = 1e-3;
  uint64_t seed = 0;  ///< Seeds inputs (when not given) and cotangents.
  double lo = -1.0, hi = 1.0; ///< Range of random floating inputs.
  /// Explicit input values (one per placeholder); empty = random in [lo, hi)
  /// (integer inputs: random in [lo, hi) rounded down).
  std::vector<RefTensor> inputs;
};

struct GradcheckInputReport {
  std::string name;        ///< Placeholder name.
  double maxAbsErr = 0.0;  ///< max |analytic - numeric|.
  double maxViolation = 0.0; ///< max |a - n| / (atol + rtol |n|); <= 1 means pass.
};

struct GradcheckResult {
  bool ok = true;
  std::vector<GradcheckInputReport> inputs; ///< One per p.gradOf entry.
  std::string message; ///< Human-readable summary of the worst element per input.
};

/// Checks buildJoint(forward, rules) against central differences of the
/// float64 reference evaluator: with inputs x (random or given) and random
/// cotangents t_k ~ U[-1, 1) for each floating output, compares the joint
/// graph's gradients with d/dx sum_k <t_k, out_k(x)> computed as
/// (L(x + eps e_i) - L(x - eps e_i)) / (2 eps) for every element i of every
/// requires-grad input. `forward` is not modified.
GradcheckResult gradcheck(const Program &forward, const DerivativeRules &rules,
                          const GradcheckOptions &opts = {});

} // namespace aotc
