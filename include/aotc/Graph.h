//===- Graph.h - aotc's FX-like graph IR ------------------------*- C++ -*-===//
//
// The IR of stages 1-5 (capture .. partition). It mirrors torch.fx:
//  * a Graph is a list of Nodes in topological order;
//  * a Node is a placeholder (graph input), a call_function (an ATen op or
//    getitem), or the single output node;
//  * call_function arguments are stored in *schema order with defaults filled in*
//    (see OpRegistry.h), so passes never deal with omitted arguments;
//  * ops with several results (native_layer_norm) have several `types` and are
//    read through `getitem` nodes (target "getitem", args {node, index}), as in FX.
// Every node carries a SourceLoc and the FX stack_trace for diagnostics.
//===----------------------------------------------------------------------===//
#pragma once

#include "aotc/Diagnostics.h"
#include "aotc/Types.h"

#include <map>
#include <memory>
#include <string>
#include <unordered_map>
#include <variant>
#include <vector>

namespace aotc {

struct Node;
struct OpDef;

/// Enum-like Python literals we carry but do not interpret: devices, layouts,
/// memory formats. `text` is the Python spelling, e.g. "device(type='cpu')",
/// "torch.strided", "torch.contiguous_format".
struct EnumLit {
  std::string text;
  bool operator==(const EnumLit &o) const { return text == o.text; }
};

/// A dtype argument such as `dtype = torch.int64`.
struct DTypeLit {
  DType dtype;
  bool operator==(const DTypeLit &o) const { return dtype == o.dtype; }
};

/// One call argument. std::monostate is Python None.
/// int64_t vs double matters: it is how a Scalar keeps "wrapped int" vs "float".
using Arg = std::variant<std::monostate, Node *, std::vector<Node *>, int64_t, double, bool,
                         std::string, std::vector<int64_t>, std::vector<double>, std::vector<bool>,
                         DTypeLit, EnumLit>;

std::string argStr(const Arg &a); ///< Python spelling (node names for nodes).
/// What kind of value an Arg holds, for messages: "None", "a tensor", "an int list", ...
const char *argKindName(const Arg &a);

enum class NodeKind { Placeholder, CallFunction, Output };

/// What a placeholder is, for the ABI and for autodiff.
enum class InputRole {
  Parameter, ///< A module parameter (FQN in `fqn`); requires grad by default.
  Buffer,    ///< A module buffer (FQN in `fqn`).
  UserInput, ///< A user input (x, target).
  Tangent,   ///< The cotangent of a forward output (joint / backward graphs).
  Saved,     ///< A saved tensor (backward graphs after partition).
  Constant,  ///< A lifted tensor constant (torch.export's CONSTANT_TENSOR input; its name in
             ///< `fqn`): read-only, never differentiated, carried in the weights file.
  RngState,  ///< The step's random-number state, i64[2] = {seed, offset} (docs/randomness.md):
             ///< added by decompose when the graph draws random numbers; the step returns it
             ///< advanced (a mutated input), never differentiated.
};
/// "parameter", "buffer", "user_input", "tangent", "saved", "constant", "rng_state".
const char *roleName(InputRole r);

/// Run-time size expressions of a call's int and int-list arguments (Node::symArgs): (schema
/// argument index, one SymExpr::str() per element, "" for a constant element).
using SymArgs = std::vector<std::pair<size_t, std::vector<std::string>>>;

struct Node {
  std::string name;
  NodeKind kind = NodeKind::CallFunction;
  /// call_function: canonical target without "torch.ops.", e.g. "aten.add.Tensor";
  /// "getitem" for tuple access. Placeholders: empty.
  std::string target;
  const OpDef *op = nullptr;      ///< Registry entry (nullptr for placeholder/output/getitem).
  std::vector<Arg> args;          ///< Schema order, defaults filled. Output node: the returned nodes.
  std::vector<TensorType> types;  ///< Result types; exactly one unless the op returns a tuple.
  SourceLoc loc;                  ///< Where the node was written (text line, or JSON member).
  std::string stackTrace;         ///< FX meta["stack_trace"], may be empty.
  /// The user-level op this node comes from, for run-time messages: the function torch.export
  /// recorded (meta["torch_fn"]: "cross_entropy", "linear") or else the captured target
  /// ("aten.nll_loss_forward.default"); nodes made from it by any stage inherit it
  /// (inheritSource). The text IR carries it as a trailing `# op: X` where it differs from
  /// the previous one's or textDefaultUserOp (Printer.cpp, read back by the parser).
  std::string userOp;

  // Placeholder-only fields.
  InputRole role = InputRole::UserInput;
  std::string fqn;                ///< Parameter/buffer FQN, e.g. "fc1.weight".
  bool requiresGrad = false;

  /// A dynamic export's int and int-list arguments whose values depend on run-time sizes
  /// (docs/dynamic-shapes.md): (argument index, one expression per element: "" for a constant
  /// element, else its SymExpr::str() over the program's run-time symbols). `args` holds the
  /// values at the program's reference sizes, which shape inference reads.
  SymArgs symArgs;
  const std::vector<std::string> *symArg(size_t i) const {
    for (const auto &[k, e] : symArgs)
      if (k == i) return &e;
    return nullptr;
  }
  /// Element k of argument i's expressions: "" when it is a constant (or has none).
  const std::string &symArgText(size_t i, size_t k = 0) const;
  /// Records argument i's expressions (as read: one for a single int given for an int[N]
  /// argument, which buildCall repeated N times, is repeated as well). Both readers call it.
  void setSymArg(size_t i, std::vector<std::string> exprs);

  /// Whether the node reads or computes run-time sizes: a symbolic size argument, argument
  /// or result (docs/dynamic-shapes.md). A pass that rewrites such a node must carry them.
  bool runtimeSized() const;

  /// A node made from `o` (a rewrite, a derivative, a copy) keeps where `o` came from.
  void inheritSource(const Node &o) {
    stackTrace = o.stackTrace;
    userOp = o.userOp;
  }
  const TensorType &type() const; ///< The single result type (internal error if not exactly one).
  bool isPlaceholder() const { return kind == NodeKind::Placeholder; }
  bool isCall() const { return kind == NodeKind::CallFunction; }
  bool isGetitem() const { return kind == NodeKind::CallFunction && target == "getitem"; }
  /// Every Node* this node reads, in argument order (tensor lists flattened).
  std::vector<Node *> inputs() const;
  /// Argument i as a specific type; internal error on a mismatch.
  Node *tensorArg(size_t i) const;
  int64_t intArg(size_t i) const;
  double scalarArg(size_t i) const;  ///< int64_t, double or bool argument as a double.
  bool boolArg(size_t i) const;
  const std::vector<int64_t> &intListArg(size_t i) const;
  bool isNoneArg(size_t i) const;
};

/// True for the names FX never gives a node as they are (Python builtins and keywords: sum,
/// max, input, ...); Graph::fxName suffixes them.
bool fxShadowsBuiltin(const std::string &name);

/// Throws a user error naming a graph node, its target, its location and its FX stack_trace
/// (the node form of Diagnostics.h's userError; lib/IR/NodeDiagnostics.cpp).
[[noreturn]] void nodeError(const Node &node, const std::string &msg);
/// Formats the node diagnostic without throwing (used for warnings and runtime messages):
/// "<loc>: <severity>: node '<name>' (<target>): <msg>" and the stack_trace on its own line.
std::string formatNodeDiag(const Node &node, const std::string &severity, const std::string &msg);
/// Where a node comes from in the user's terms, for run-time messages: "in cross_entropy
/// (model.py:17)" — its userOp (torch's function name, or the aten op without "aten." and
/// ".default") and the innermost frame of its stack_trace as file name:line; either part may
/// be missing; "" when both are.
std::string userContext(const Node &node);
/// The one-line summary FX prints for a stack trace, "File: <file>:<line> in <fn>, code:
/// <code>", from its innermost frame (lib/IR/Printer.cpp); a summary is returned unchanged.
std::string traceSummary(const std::string &stackTrace);
/// The userOp a node of text IR gets when no `# op:` comment precedes it: its own target
/// (none for getitem). The printer writes a comment exactly where this would be wrong.
inline std::string textDefaultUserOp(const Node &n) { return n.isGetitem() ? std::string() : n.target; }

/// One graph: placeholders first, then call_functions, then exactly one output node.
class Graph {
public:
  Graph() = default;
  Graph(const Graph &) = delete;
  Graph &operator=(const Graph &) = delete;
  Graph(Graph &&) = default;
  Graph &operator=(Graph &&) = default;

  /// Appends a placeholder (before the output node if there is one).
  Node *addPlaceholder(const std::string &name, TensorType type, InputRole role);
  /// Appends a call_function; `args` must already be in schema order (use
  /// OpRegistry::buildCall to fill defaults and infer types).
  Node *addCall(const std::string &name, const std::string &target, std::vector<Arg> args,
                std::vector<TensorType> types);
  /// Inserts a call_function right before `before` (for rewrites).
  Node *insertCallBefore(Node *before, const std::string &name, const std::string &target,
                         std::vector<Arg> args, std::vector<TensorType> types);
  /// Sets (or replaces) the output node.
  Node *setOutputs(std::vector<Node *> outs);

  const std::vector<std::unique_ptr<Node>> &nodes() const { return nodes_; }
  std::vector<Node *> placeholders() const;
  Node *outputNode() const; ///< nullptr before setOutputs.
  std::vector<Node *> outputs() const;
  Node *find(const std::string &name) const;

  /// A fresh node name: `base`, else `base_1`, `base_2`, ... (FX's rule).
  std::string uniqueName(const std::string &base);
  /// A fresh name as FX gives a new node (torch/fx/graph.py _Namespace.create_name): as
  /// uniqueName, but a base that would shadow a Python builtin or keyword (fxShadowsBuiltin)
  /// starts at `base_1`. `alsoTaken` names further names to avoid (another graph's).
  std::string fxName(const std::string &base, const Graph *alsoTaken = nullptr) const;
  /// Renames a node (keeps the name index in sync); internal error if `newName`
  /// is taken by another node.
  void rename(Node *n, const std::string &newName);
  /// Replaces every use of `from` by `to` (in args and outputs).
  void replaceAllUses(Node *from, Node *to);
  /// Removes call_function nodes with no users that are not outputs (dead code).
  void eliminateDeadCode();
  /// Erases one node; internal error if it still has users.
  void erase(Node *n);
  /// Users of every node, in node order.
  std::unordered_map<const Node *, std::vector<Node *>> users() const;
  /// Checks topological order, unique names, arg references inside the graph.
  /// Violations are internal errors (passes must keep the graph valid).
  void verify() const;
  /// Moves nodes into a valid topological order, stable for already-ordered graphs.
  void topoSort();
  /// Deep copy. `map` (optional) receives old->new node pointers.
  Graph clone(std::unordered_map<const Node *, Node *> *map = nullptr) const;

private:
  std::vector<std::unique_ptr<Node>> nodes_;
  std::unordered_map<std::string, Node *> byName_;
};

/// What a compilation unit carries between stages: one graph (capture ..
/// lower: the forward, or the joint graph), or two after partition.
/// Printed and parsed as text by IR/Printer.h and IR/Parser.h.
struct Program {
  std::string stage;          ///< "capture", "functionalize", "decompose", "joint", "lower", "partition".
  std::string name = "model"; ///< C identifier used for entry points.
  SourceLoc origin;           ///< The input file.
  Graph forward;              ///< Forward graph, or the joint graph for stages joint/lower.
  Graph backward;             ///< Backward graph (stage partition only).

  // Joint-graph bookkeeping (stages joint and lower).
  int numForwardOutputs = 0;  ///< The first N joint outputs are the forward outputs; the rest are grads.
  /// For each gradient output of the joint graph (and of the backward graph), the
  /// placeholder name (in the forward) whose gradient it is.
  std::vector<std::string> gradOf;
  /// Partition: names of forward outputs that are saved tensors (after the user outputs);
  /// they are the backward's placeholders with role Saved, in the same order.
  std::vector<std::string> saved;
  /// Mutated inputs after functionalization: (output index, input name).
  std::vector<std::pair<int, std::string>> mutatedInputs;
  /// The size symbols of a dynamic export (docs/dynamic-shapes.md): each symbol, the export's
  /// range and the user input dims that carry it. A symbol given by --specialize has that
  /// value; a run-time symbol (`dynamic`) has its reference value, the maximum of its range
  /// (or --max-size), at which TensorType::shape and symbolic arguments are evaluated.
  struct SpecializedSize {
    std::string symbol;
    int64_t value = 0, min = 0, max = -1; ///< max -1: unbounded.
    std::string dims;                     ///< "x:0,y:0" (may be empty).
    bool dynamic = false;                 ///< A run-time size.
    std::string str() const;              ///< "s17=37 (range [2, 64]; x:0, y:0)", "s17 (run time, range ...)"
  };
  std::vector<SpecializedSize> specializedSizes;
  /// A condition on run-time sizes that every call must meet: the export's _assert_scalar
  /// and sym_constrain_range nodes over run-time symbols (SymExpr::str() form, and the
  /// message to give when it fails).
  struct SizeCheck {
    std::string expr, message;
  };
  std::vector<SizeCheck> sizeChecks;
  /// The run-time symbols ("s17, s48"), "" when every size is static.
  std::string dynamicSymbols() const;

  /// The name of the input whose new value forward output k is (mutatedInputs), or nullptr.
  const std::string *mutatedInputOf(int k) const;
  /// Whether forward output k, of dtype dt, is differentiable, i.e. gets a tangent placeholder
  /// in the joint graph and a tangents[k] in the ABI: a floating dtype, and, for a mutated
  /// input's new value, an input that requires grad (an activation mutated in place: the
  /// caller's later uses of it send their gradient through the mutation, as in eager; batch
  /// norm's running statistics, buffers, get no cotangent, as in AOTAutograd).
  /// The one rule the joint builder, gradcheck and codegen share.
  bool outputHasTangent(int k, DType dt) const;

  /// Deep copy (both graphs and all bookkeeping).
  Program clone() const;
};

} // namespace aotc
