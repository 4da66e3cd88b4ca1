//===- ExportReader.h - The ExportedProgram JSON reader's state -*- C++ -*-===//
//
// Private to lib/Capture: the reader of ExportJson.cpp, declared here so that its
// size computations (ExportSymbolic.cpp, Sizes.h) live in a file of their own.
//===----------------------------------------------------------------------===//
#pragma once

#include "Complex.h"
#include "Sizes.h"
#include "aotc/Capture.h"
#include "aotc/OpRegistry.h"

#include <nlohmann/json.hpp>

#include <map>
#include <set>
#include <string>
#include <vector>

namespace aotc::export_json {

using json = nlohmann::json;

class Reader {
public:
  Reader(const json &j, std::string where, const std::vector<std::string> &specialize,
         const std::vector<std::string> &maxSize)
      : j_(j), where_(std::move(where)), loc_{where_}, specialize_(specialize), maxSize_(maxSize) {}
  Program run();

private:
  [[noreturn]] void fail(const std::string &msg) const { userError(loc_, msg); }
  /// Errors about a JSON node before its aotc Node exists, in formatNodeDiag's shape.
  [[noreturn]] void failNode(const json &jn, const std::string &msg) const;
  /// failNode's diagnostic, without throwing.
  std::string nodeDiag(const json &jn, const std::string &msg) const;

  const json &field(const json &obj, const char *key, const std::string &ctx) const;
  /// A union object: exactly one key. Returns (key, value).
  std::pair<std::string, const json *> unionOf(const json &u, const std::string &ctx) const;
  std::string tensorName(const json &arg, const std::string &ctx) const; ///< {"name": ...}
  TensorType metaType(const std::string &name) const;
  /// Whether an op's run-time size expressions (OpDef::symInfer) are meta's dims: one canonical
  /// form, or one value at the ranges' ends, middle and a mix.
  bool sameSizes(const std::vector<std::string> &ours, const TensorType &meta) const;
  /// Whether tensor_values[name] has a complex dtype (metaType then gives its view_as_real).
  bool metaComplex(const std::string &name) const;
  double jsonFloat(const json &v, const std::string &ctx) const;
  int64_t jsonInt(const json &v, const std::string &ctx) const;

  Arg convertArg(const json &arg, const SchemaArg *sa, const json &jn, const std::string &target);
  Node *ref(const std::string &name, const json &jn);
  std::string jsonNodeName(const json &jn) const;
  std::vector<std::string> refsOf(const json &arg) const;

  void readInputs(const json &graph, const json &sig);
  void readNodes(const json &graph);
  /// Every node whose target capture cannot read, grouped by target (count, first node and its
  /// stack_trace), added to diags_; then every collected problem is thrown at once.
  void checkTargets(const json &nodes);
  void buildNode(const json &jn);
  /// A node of dynamic_sizes::isSymbolicTarget: evaluated now at the --specialize values (its
  /// result into symValues_, checked against the export's sym_*_values expression).
  void buildSymbolic(const json &jn, const std::string &raw);
  /// The value of an `as_sym_int` / `as_sym_float` / `as_sym_bool` union's content.
  dynamic_sizes::Value symValue(const json &v, const json &jn, const std::string &ctx) const;
  /// symValue of a SymInt (`{"as_int": n}` or `{"as_name": ...}`), which must be an integer.
  int64_t symInt(const json &v, const json &jn, const std::string &ctx) const;
  /// The run-time size expression of a SymInt's content (`{"as_name": ...}`), "" when static.
  std::string symIntExpr(const json &v) const;
  /// The export's expression for a symbolic value (graph.sym_int_values / sym_bool_values).
  std::optional<std::string> exportedExpr(const std::string &name) const;
  /// torch.export's with_effects(token, op, args...) of an effectful op: only
  /// _linalg_check_errors(info, api, is_matrix), which becomes check_errors=True on the linalg
  /// op that computes `info` (a failed factorization is then an error of the entry point).
  void buildEffect(const json &jn);
  void readOutputs(const json &graph, const json &sig);

  const json &j_;
  std::string where_;
  SourceLoc loc_;
  const std::vector<std::string> &specialize_, &maxSize_;
  dynamic_sizes::Bindings bindings_;                   ///< Symbol values (Sizes.h).
  std::map<std::string, dynamic_sizes::Value> symValues_; ///< Symbolic node results, evaluated.
  /// Symbolic node results that depend on run-time sizes: their expressions (SymExpr::str()).
  std::map<std::string, std::string> symExprs_;
  /// The run-time size expressions of the argument convertArg read last (Node::symArgs).
  std::vector<std::string> lastSymExprs_;
  Program p_;
  const json *tensorValues_ = nullptr;
  const json *graph_ = nullptr;
  std::map<std::string, Node *> values_; ///< JSON value name -> node.
  std::set<const Node *> complex_;       ///< Nodes holding a complex value's view_as_real (Complex.h).
  std::set<std::string> scalars_;        ///< Symbols _local_scalar_dense defines (item() values: 0-d tensors).
  std::set<std::string> tokens_;         ///< Effect tokens (inputs, with_effects results): no values.
  std::set<std::string> reserved_;       ///< Every name the JSON defines.
  std::set<std::string> referenced_;     ///< Every name some node or output reads.
  DiagnosticList diags_;                 ///< Problems that do not stop reading (all reported at once).
};

} // namespace aotc::export_json
