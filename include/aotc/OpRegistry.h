//===- OpRegistry.h - ATen op schemas, categories, shape functions -*- C++ -*-===//
//
// One entry per supported ATen overload. Each entry holds:
//  * the schema string exactly as in ATen's native_functions.yaml (without
//    "aten::"), parsed so that arguments omitted by the exporter get their defaults;
//  * a category (pointwise, reduction, view, matmul, index, factory, composite);
//  * a shape/dtype function following PyTorch's meta functions and
//    type promotion (torch/_prims_common ELEMENTWISE_TYPE_PROMOTION_KIND);
//  * a float64 reference implementation (RefEval.h) used as the oracle of
//    gradchecks and pass-preservation tests.
// The entries live in lib/IR/ops/*.cpp, one file per category.
//===----------------------------------------------------------------------===//
#pragma once

#include "aotc/Graph.h"
#include "aotc/ScalarOp.h"

#include <functional>
#include <map>
#include <optional>
#include <string>
#include <vector>

namespace aotc {

struct RefTensor;

/// One parsed schema argument: "int[1]? dim=None", "*, Scalar alpha=1", ...
struct SchemaArg {
  std::string name;
  std::string type;        ///< Base type without '?': Tensor, Tensor[], int, int[], SymInt, SymInt[],
                           ///< float, bool, str, Scalar, ScalarType, Layout, Device, MemoryFormat, Tensor?[]
  bool optional = false;   ///< The '?' suffix.
  bool kwargOnly = false;  ///< After '*'.
  bool hasDefault = false;
  Arg defaultValue;        ///< Valid when hasDefault.
  int64_t listLen = 0;     ///< N of a sized list type such as "int[1]" or "bool[3]" (0: unsized).
                           ///< A single int given for an "int[N]" argument is repeated N times.
  bool isTensor() const { return type == "Tensor"; }
  bool isTensorList() const { return type == "Tensor[]" || type == "Tensor?[]"; }
};

struct OpSchema {
  std::string ns = "aten"; ///< Namespace: "aten", or "aotc" for aotc's own primitives.
  std::string name;        ///< "add"
  std::string overload;    ///< "Tensor", or "default" when the schema has none.
  std::vector<SchemaArg> args;
  int numReturns = 1;      ///< Number of results (a Tensor[] return counts as 1 list).
  bool returnsAlias = false; ///< "Tensor(a)" results: the op is a view.
  bool returnsList = false; ///< A single "Tensor[]" result (split): a node with one result type
                            ///< may still be indexed (`split[0]` of a one-chunk split).
  bool mutates = false;    ///< Some argument is annotated "(a!)": in-place or out=.
  std::vector<int> mutatedArgs;
  std::string target() const; ///< "aten.add.Tensor"
};

/// Parses an ATen schema string, e.g.
/// "add.Tensor(Tensor self, Tensor other, *, Scalar alpha=1) -> Tensor".
/// Throws internalError on malformed schemas (they are ours).
OpSchema parseSchema(const std::string &text);

enum class OpCategory {
  Pointwise,  ///< Elementwise with broadcasting (incl. comparisons, where, casts, clone).
  Reduction,  ///< sum, mean, amax, ...
  View,       ///< view, permute, expand, unsqueeze, squeeze, slice, select, getitem ...
  Matmul,     ///< mm, addmm, bmm
  Index,      ///< gather, scatter_add, index_select, embedding
  Factory,    ///< full, scalar_tensor, zeros, arange
  Composite,  ///< Decomposed before autodiff or lowered after it (linear, layer_norm, ...)
  Conv,       ///< convolution, convolution_backward, aotc::conv_*_grad (library calls)
  Fft,        ///< _fft_r2c, _fft_c2r, _fft_c2c (library calls on complex values' view_as_real)
  Other,
};
const char *categoryName(OpCategory c);

/// torch.export's with_effects(token, aten._linalg_check_errors, info, ...): sets
/// check_errors=True on the linalg op whose info result `info` is (a getitem of it), so that a
/// failed factorization is an error of the entry point, as torch raises. Returns false when
/// `info` is not such a result (lib/IR/ops/Linalg.cpp; both readers call it).
bool checkLinalgErrors(Node *info);

/// Values of one node's arguments when evaluating in float64 (RefEval).
using RefArgs = std::vector<const RefTensor *>; // parallel to node.args; nullptr for non-tensors

struct OpDef {
  OpSchema schema;
  OpCategory category = OpCategory::Other;
  /// Shape/dtype inference. Reads node.args (schema order, tensor args already
  /// typed). Returns one TensorType per result. Bad input: call nodeError(node, ...).
  std::function<std::vector<TensorType>(const Node &node)> infer;
  /// float64 reference: results for `node` given its tensor arguments
  /// (`args[i]` is the value of node.args[i] when it is a tensor, else nullptr;
  /// tensor lists are passed through `lists`).
  std::function<std::vector<RefTensor>(const Node &node, const RefArgs &args,
                                       const std::vector<std::vector<const RefTensor *>> &lists)>
      eval;
  /// Draws random numbers (aotc.philox_uniform, and the random ops decompose rewrites to it):
  /// never recomputed by the partitioner, so the backward sees the forward's draw.
  bool random = false;
  /// A primitive: lower() keeps it and the codegen computes it (lib/Codegen/OpLowering.cpp, or
  /// `scalar` below); every other call is rewritten by decompose or lower before codegen.
  bool primitive = false;
  /// The min-cut partitioner may recompute it in the backward instead of saving its result
  /// (PyTorch's default_recomputable_ops): by default the pointwise, view, reduction and
  /// factory categories (OpRegistry::add); an op of another category that torch lists sets it.
  bool recomputable = false;
  /// A view an in-place write may go through (functionalize writes the new value back into the
  /// base through its inverse): view, reshape, permute, unsqueeze, squeeze, slice, select, ...
  bool writeThrough = false;
  /// A pointwise primitive whose element is one scalar operation of its operands: that
  /// operation, and how its operands are cast. The codegen builds the element from it; a
  /// pointwise primitive without one has a rule of its own in lib/Codegen/OpLowering.cpp.
  struct ScalarBody {
    ScalarOp op = ScalarOp::Const;
    enum class Operands {
      Result,   ///< cast to the result dtype (neg, abs, mul, maximum, atan2, ...)
      Floating, ///< cast to the result's floating dtype (exp, log, sin, ...: INT_TO_FLOAT)
      Compare,  ///< cast to the operands' promoted dtype; the result is Bool (eq, isnan, ...)
    } operands = Operands::Result;
    std::vector<int> args; ///< The op's arguments the operation reads, in order.
    int64_t iconst = 0;    ///< The operation's constant (ScalarOp::Special: which function).
  };
  std::optional<ScalarBody> scalar;
  /// Marked non-differentiable (argmax, comparisons, factories): autodiff
  /// passes no gradient through it and needs no rule.
  bool nonDifferentiable = false;
  /// Argument positions that may hold an I32 or U8 tensor (index arguments, and
  /// _to_copy's input). Every other tensor argument and every result must use one of
  /// aotc's compute dtypes (F32, F64, I64, Bool); inferTypes reports the node otherwise.
  std::vector<int> indexArgs;
  /// Results may be I32 (index-only values too: LAPACK's pivots and info of the linalg ops, and
  /// _to_copy to an index dtype).
  bool narrowResults = false;
  /// Shape function over run-time sizes (a dynamic export, docs/dynamic-shapes.md): the
  /// results' TensorType::sym (one vector per result, "" for a static dim, an empty vector
  /// for an all-static result; SymExpr canonical text) from the arguments' (their types'
  /// sym, Node::symArgs) and the results' `types` at the reference sizes (infer's). Unset:
  /// not written for this op yet; SymExprError: not for these arguments. lib/IR/SymShapes.cpp.
  std::function<std::vector<std::vector<std::string>>(const Node &node, const std::vector<TensorType> &types)> symInfer;
  std::string target() const { return schema.target(); }
};

/// The global registry. OpRegistry::get() fills it on first use by calling the
/// register<Category>Ops functions of lib/IR/ops/*.cpp explicitly (no static
/// constructors, which a static-library link may drop). The table is in docs/ops.md.
class OpRegistry {
public:
  static OpRegistry &get();
  /// Registers an op; `schema` is the native_functions.yaml text.
  OpDef &add(const std::string &schema, OpCategory cat);
  /// Looks up "aten.add.Tensor" (also accepts "torch.ops.aten.add.Tensor"
  /// and "aten::add.Tensor"). nullptr when unknown.
  const OpDef *lookup(const std::string &target) const;
  const std::map<std::string, OpDef> &all() const { return ops_; }
  /// A registered op, for the registration functions that complete entries (SymShapes.cpp).
  OpDef *edit(const std::string &target);

private:
  std::map<std::string, OpDef> ops_;
};

/// An op aotc refuses by name, and why (lib/IR/ops/Refused.cpp; docs/ops.md "Refused ops").
struct RefusedOp {
  std::string target; ///< "aten.linalg_qr.default"
  std::string reason;
};
/// Every op refused by name: the unsupported Core ATen overloads, then the others.
const std::vector<RefusedOp> &refusedOps();
/// The reason `target` ("aten.x.y" or "torch.ops.aten.x.y") is refused, or nullptr when it is
/// not in the table (an op aotc has never heard of).
const std::string *refusalReason(const std::string &target);

/// Strips "torch.ops." and turns "aten::x.y" into "aten.x.y"; appends ".default"
/// when the overload is missing ("aten.relu" -> "aten.relu.default").
std::string canonicalTarget(const std::string &target);

/// Builds a call node from possibly-partial arguments:
///  * positional `args` fill schema arguments in order; `kwargs` by name;
///  * the rest get their schema defaults (a missing argument without default is
///    a nodeError "missing argument 'x'"; too many positional ones "expects at most N
///    arguments, got M"; also "unexpected keyword argument 'x'", "got multiple values
///    for argument 'x'", "argument 'x' expects <type>");
///  * values are coerced to the schema type: an int for a float argument becomes a
///    double, a single int for "int[N]" is repeated N times, an empty list takes the
///    list's element type; a Python number in a Tensor position is kept as a wrapped
///    scalar for pointwise ops only (as eager PyTorch does for `aten.mul.Tensor(x, 0.5)`);
///  * result types are inferred with OpDef::infer, and their run-time sizes (TensorType::sym)
///    with inferSymbolic when an argument or `symArgs` (Node::symArgs, by schema index) has
///    them: a pass's new node carries the sizes of what it reads. An op without a shape
///    function over run-time sizes is then a nodeError (compile at one size, --specialize).
///    SizeInference::Reference skips that: the readers set sym from their input.
/// `name` is used verbatim (pick a fresh one with Graph::uniqueName). On any error
/// the graph is left unchanged.
/// Unknown targets raise a user error at `loc`. getitem is handled too
/// (args {tuple node, index}).
enum class SizeInference { Runtime, Reference };
Node *buildCall(Graph &g, const std::string &name, const std::string &target,
                const std::vector<Arg> &args, const std::vector<std::pair<std::string, Arg>> &kwargs,
                const SourceLoc &loc = {}, Node *insertBefore = nullptr, const SymArgs &symArgs = {},
                SizeInference sizes = SizeInference::Runtime);

/// buildCall's argument binding alone: `args` and `kwargs` in schema order, defaults filled,
/// values coerced, for the op of `at.op` (errors name `at`; no types are inferred).
std::vector<Arg> bindArgs(const Node &at, const std::vector<Arg> &args,
                          const std::vector<std::pair<std::string, Arg>> &kwargs);

/// Re-runs shape inference for one existing node (used by capture to compare
/// with exported meta). Returns the inferred types.
std::vector<TensorType> inferTypes(const Node &node);

/// The run-time size expressions of node's results (TensorType::sym) given `types`, its
/// results at the reference sizes: empty vectors when no argument has run-time sizes; nullopt
/// when one has and the op's symInfer is unset or refuses these arguments (lib/IR/SymShapes.cpp).
std::optional<std::vector<std::vector<std::string>>> inferSymbolic(const Node &node, const std::vector<TensorType> &types);

namespace ops {
/// torch.result_type over the arguments of n at `idx` (tensors or numbers; None skipped):
/// dimensioned tensors, then 0-d tensors, then wrapped numbers (a float number counts as
/// f32), a lower class mattering only when its category is higher (c10 ResultTypeState,
/// TypeProperties.cpp). Defined in lib/IR/ops/Common.cpp.
DType resultType(const Node &n, const std::vector<size_t> &idx);

/// What diagonal(self, offset, dim1, dim2) takes from a tensor of shape `s` (lib/IR/ops/Scan.cpp):
/// the wrapped dims, the diagonal's length, its first (row, col) in (dim1, dim2), and the
/// result shape (the other dims, then len). Bad dims: nodeError at `n`.
struct DiagonalGeom {
  int64_t d1 = 0, d2 = 1, len = 0, row0 = 0, col0 = 0;
  Shape shape;
};
DiagonalGeom diagonalGeom(const Node &n, const Shape &s, int64_t offset, int64_t dim1, int64_t dim2);
} // namespace ops

/// The elements along `dim` that slice.Tensor selects from, and slice_scatter writes into, a
/// tensor of shape `shape`: `len` elements at start, start+step, ... (start/end wrapped and
/// clamped as ATen's slice() in aten/src/ATen/native/TensorShape.cpp).
struct SliceRange {
  int64_t dim, start, len, step;
};
/// Reads (dim, start, end, step) from n.args[dimArg..dimArg+3] (start/end may be None).
/// Node errors: a 0-dim tensor ("<opName> cannot be applied to a 0-dim tensor"), a dim out of
/// range, step <= 0. Defined in lib/IR/ops/View.cpp.
SliceRange sliceRange(const Node &n, const Shape &shape, size_t dimArg, const std::string &opName);

} // namespace aotc
