//===- ExportJson.cpp - ExportedProgram JSON -> Program ---------------------===//
//
// Reads the JSON that torch.export.save writes to models/model.json
// (torch/_export/serde/serialize.py, schema.py SCHEMA_VERSION 8.x):
//   graph_module.graph.{inputs, outputs, nodes, tensor_values}
//   graph_module.signature.{input_specs, output_specs}
//   schema_version, verifiers
// Unions are objects with exactly one key ({"as_tensor": {"name": "x"}}); enums
// are integers; floats may be the strings "Infinity"/"-Infinity"/"NaN".
// Node inputs are NamedArguments with schema argument names, defaults omitted
// (buildCall fills them). Tuple results are named after their getitem users
// (unused ones `<node>_unused_<i>`); aotc re-creates the getitem nodes.
//===----------------------------------------------------------------------===//
#include "ExportReader.h"
#include "aotc/Capture.h"
#include "aotc/OpRegistry.h"

#include <nlohmann/json.hpp>

#include <algorithm>
#include <cmath>
#include <map>
#include <queue>
#include <set>

namespace aotc {
namespace export_json {

/// A node's string metadata field (`metadata.stack_trace`, `metadata.torch_fn`), "" when absent
/// or not a string.
std::string metaString(const json &jn, const char *key) {
  if (!jn.is_object() || !jn.contains("metadata") || !jn["metadata"].is_object()) return "";
  const json &m = jn["metadata"];
  return m.contains(key) && m[key].is_string() ? m[key].get<std::string>() : "";
}

/// ScalarType enum of schema.py -> aotc dtype.
std::optional<DType> dtypeFromEnum(int64_t v) {
  switch (v) {
  case 1: return DType::U8;
  case 4: return DType::I32;
  case 5: return DType::I64;
  case 7: return DType::F32;
  case 8: return DType::F64;
  case 12: return DType::Bool;
  default: return std::nullopt;
  }
}

const char *scalarTypeName(int64_t v) {
  static const std::map<int64_t, const char *> names = {
      {0, "unknown"},       {1, "uint8"},         {2, "int8"},          {3, "int16"},
      {4, "int32"},         {5, "int64"},         {6, "float16"},       {7, "float32"},
      {8, "float64"},       {9, "complex32"},     {10, "complex64"},    {11, "complex128"},
      {12, "bool"},         {13, "bfloat16"},     {28, "uint16"},       {29, "float8_e4m3fn"},
      {30, "float8_e5m2"},  {31, "float8_e4m3fnuz"}, {32, "float8_e5m2fnuz"}};
  auto it = names.find(v);
  return it == names.end() ? "unknown" : it->second;
}


void Reader::failNode(const json &jn, const std::string &msg) const {
  throw Error(Error::Kind::User, nodeDiag(jn, msg));
}

std::string Reader::nodeDiag(const json &jn, const std::string &msg) const {
  std::string s = "node '" + jsonNodeName(jn) + "'";
  if (jn.is_object() && jn.contains("target") && jn["target"].is_string())
    s += " (" + canonicalTarget(jn["target"].get<std::string>()) + ")";
  s += ": " + msg;
  if (std::string stack = metaString(jn, "stack_trace"); !stack.empty()) s += "\n  stack_trace: " + stack;
  return loc_.str() + ": error: " + s;
}

const json &Reader::field(const json &obj, const char *key, const std::string &ctx) const {
  if (!obj.is_object()) fail(ctx + ": expected a JSON object");
  auto it = obj.find(key);
  if (it == obj.end()) fail(ctx + ": missing field '" + key + "'");
  return *it;
}

std::pair<std::string, const json *> Reader::unionOf(const json &u, const std::string &ctx) const {
  if (!u.is_object() || u.size() != 1) fail(ctx + ": expected a union object with exactly one key");
  return {u.begin().key(), &u.begin().value()};
}

std::string Reader::tensorName(const json &arg, const std::string &ctx) const {
  const json &n = field(arg, "name", ctx);
  if (!n.is_string()) fail(ctx + ": 'name' must be a string");
  return n.get<std::string>();
}

double Reader::jsonFloat(const json &v, const std::string &ctx) const {
  if (v.is_number()) return v.get<double>();
  if (v.is_string()) {
    std::string s = v.get<std::string>();
    if (s == "Infinity" || s == "inf") return INFINITY;
    if (s == "-Infinity" || s == "-inf") return -INFINITY;
    if (s == "NaN" || s == "nan") return NAN;
  }
  fail(ctx + ": expected a float");
}

int64_t Reader::jsonInt(const json &v, const std::string &ctx) const {
  if (v.is_number_unsigned() && v.get<uint64_t>() > (uint64_t)INT64_MAX) fail(ctx + ": integer out of int64 range");
  if (v.is_number_integer()) return v.get<int64_t>();
  fail(ctx + ": expected an integer");
}

std::string Reader::jsonNodeName(const json &jn) const {
  if (!jn.is_object()) return "?";
  if (jn.contains("name") && jn["name"].is_string()) return jn["name"].get<std::string>();
  if (jn.contains("outputs") && jn["outputs"].is_array() && !jn["outputs"].empty()) {
    const json &o = jn["outputs"][0];
    if (o.is_object() && o.size() == 1) {
      const json &v = o.begin().value();
      if (v.is_object() && v.contains("name") && v["name"].is_string()) return v["name"].get<std::string>();
      if (v.is_array() && !v.empty() && v[0].is_object() && v[0].contains("name") && v[0]["name"].is_string())
        return v[0]["name"].get<std::string>();
    }
  }
  return "?";
}

/// tensor_values[name] -> TensorType (static shapes, supported dtypes only).
TensorType Reader::metaType(const std::string &name) const {
  std::string ctx = "tensor_values['" + name + "']";
  auto it = tensorValues_->find(name);
  if (it == tensorValues_->end()) fail("no tensor_values entry for '" + name + "'");
  const json &m = *it;
  int64_t dt = jsonInt(field(m, "dtype", ctx), ctx + ".dtype");
  // complex64 / complex128: the view_as_real, a trailing dim of 2 added below (Complex.h).
  auto d = dt == 10 ? std::optional<DType>(DType::F32) : dt == 11 ? std::optional<DType>(DType::F64) : dtypeFromEnum(dt);
  if (!d)
    fail("tensor '" + name + "': unsupported dtype " + scalarTypeName(dt) + " (ScalarType " +
         std::to_string(dt) + "; aotc supports float32, float64, int64, bool; int32 and uint8 as index inputs)");
  TensorType t;
  t.dtype = *d;
  const json &sizes = field(m, "sizes", ctx);
  if (!sizes.is_array()) fail(ctx + ".sizes: expected a list");
  for (const json &s : sizes) {
    auto [k, v] = unionOf(s, ctx + ".sizes");
    int64_t n = 0;
    if (k == "as_expr") {
      std::string e = v->is_object() && v->contains("expr_str") && (*v)["expr_str"].is_string()
                          ? (*v)["expr_str"].get<std::string>() : "?";
      try {
        SymExpr x = SymExpr::parse(e);
        n = x.eval(bindings_.values);
        if (SymExpr r = x.substitute(bindings_.specialized); r.hasSymbols()) { // a run-time size
          t.sym.resize(t.shape.size());
          t.sym.push_back(r.normalText());
        }
      } catch (const SymExprError &err) {
        std::string why = err.what();
        if (e.size() > 120) e = e.substr(0, 120) + "...";
        // A symbol no input size reads (u0 of nonzero or item()): a size that depends on data.
        if (why.find("has no value") != std::string::npos && !bindings_.values.empty())
          why += ": a size that depends on data (aotc needs every size known when compiling)";
        fail("tensor '" + name + "': size '" + e + "': " + why);
      }
    } else {
      if (k != "as_int") fail(ctx + ".sizes: unexpected '" + k + "'");
      n = jsonInt(*v, ctx + ".sizes");
    }
    if (n < 0) fail(ctx + ".sizes: negative size");
    t.shape.push_back(n);
  }
  if (t.symbolic()) t.sym.resize(t.shape.size());
  int64_t numel = 1;
  for (int64_t n : t.shape)
    if (__builtin_mul_overflow(numel, n, &numel)) fail("tensor '" + name + "': more than 2^63 elements");
  if (m.contains("layout") && m["layout"].is_number_integer() && m["layout"].get<int64_t>() != 7 &&
      m["layout"].get<int64_t>() != 0)
    fail("tensor '" + name + "': non-strided (sparse/mkldnn) layout is not supported");
  if (dt == 10 || dt == 11) {
    t.shape.push_back(2);
    if (t.symbolic()) t.sym.push_back("");
  }
  return t;
}

bool Reader::sameSizes(const std::vector<std::string> &ours, const TensorType &meta) const {
  // One size over the ranges (aotc::sameSize), dim by dim.
  std::vector<SizeRange> ranges;
  for (const std::string &s : bindings_.dynamic) ranges.push_back({s, bindings_.ranges.at(s).min, bindings_.values.at(s)});
  for (size_t i = 0; i < meta.shape.size(); ++i) {
    try {
      if (!sameSize(SymExpr::ofSize(ours, i, meta.shape[i]), SymExpr::parse(meta.dimStr(i)), ranges, bindings_.specialized))
        return false;
    } catch (const SymExprError &) {
      return false;
    }
  }
  return true;
}

bool Reader::metaComplex(const std::string &name) const {
  auto it = tensorValues_->find(name);
  if (it == tensorValues_->end() || !it->is_object() || !it->contains("dtype")) return false;
  const json &d = (*it)["dtype"];
  return d.is_number_integer() && (d.get<int64_t>() == 10 || d.get<int64_t>() == 11);
}

/// Every tensor/sym name an Argument reads.
std::vector<std::string> Reader::refsOf(const json &arg) const {
  std::vector<std::string> r;
  if (!arg.is_object() || arg.size() != 1) return r;
  const std::string &k = arg.begin().key();
  const json &v = arg.begin().value();
  auto nameOf = [&](const json &x) {
    if (x.is_object() && x.contains("name") && x["name"].is_string()) r.push_back(x["name"].get<std::string>());
  };
  if (k == "as_tensor") nameOf(v);
  else if (k == "as_tensors" && v.is_array())
    for (const json &x : v) nameOf(x);
  else if ((k == "as_sym_float" || k == "as_sym_int" || k == "as_sym_bool") && v.is_object() && v.contains("as_name") &&
           v["as_name"].is_string())
    r.push_back(v["as_name"].get<std::string>()); // a symbol: _local_scalar_dense's or a size op's value
  else if (k == "as_sym_ints" && v.is_array()) { // a view's sizes: ints and size-op values
    for (const json &x : v)
      if (x.is_object() && x.contains("as_name") && x["as_name"].is_string()) r.push_back(x["as_name"].get<std::string>());
  }
  else if ((k == "as_optional_tensors") && v.is_array()) {
    for (const json &x : v)
      if (x.is_object() && x.contains("as_tensor")) nameOf(x["as_tensor"]);
  } else if (k == "as_optional_tensor" && v.is_object() && v.contains("as_tensor"))
    nameOf(v["as_tensor"]);
  return r;
}

Node *Reader::ref(const std::string &name, const json &jn) {
  auto it = values_.find(name);
  if (it == values_.end()) failNode(jn, "reads '" + name + "', which no input or node defines (dangling reference)");
  return it->second;
}

/// Converts one Argument union to the Arg the schema type asks for.
Arg Reader::convertArg(const json &arg, const SchemaArg *sa, const json &jn, const std::string &target) {
  std::string argName = sa ? sa->name : "?";
  auto [k, vp] = unionOf(arg, "argument '" + argName + "'");
  const json &v = *vp;
  std::string ctx = "argument '" + argName + "'";
  std::string ty = sa ? sa->type : "";
  lastSymExprs_.clear();
  auto ints = [&](const json &list) {
    if (!list.is_array()) failNode(jn, ctx + ": expected a list");
    std::vector<int64_t> r;
    std::vector<std::string> exprs;
    bool dynamic = false;
    for (const json &x : list) {
      if (x.is_object()) { // as_sym_ints entries
        r.push_back(symInt(x, jn, ctx));
        exprs.push_back(symIntExpr(x));
        dynamic |= !exprs.back().empty();
      } else {
        r.push_back(jsonInt(x, ctx));
        exprs.emplace_back();
      }
    }
    if (dynamic) lastSymExprs_ = exprs;
    return r;
  };
  if (k == "as_none") return std::monostate{};
  if (k == "as_tensor") return ref(tensorName(v, ctx), jn);
  if (k == "as_complex") // a Python complex number: only the complex rewrites read it (Complex.h)
    return complex_values::complexNumberLit(jsonFloat(field(v, "real", ctx), ctx), jsonFloat(field(v, "imag", ctx), ctx));
  if ((k == "as_sym_float" || k == "as_sym_int" || k == "as_sym_bool") && v.is_object() && v.contains("as_name") &&
      v["as_name"].is_string() && scalars_.count(v["as_name"].get<std::string>())) {
    // A value read by item() (_local_scalar_dense): a 0-d tensor, accepted where a tensor is.
    std::string name = v["as_name"].get<std::string>();
    if (ty != "Tensor" && ty != "Tensor?")
      failNode(jn, ctx + ": the value of item() ('" + name + "') used as a " + (ty.empty() ? "non-tensor" : ty) +
                       " argument: data-dependent (shapes, sizes and non-tensor arguments must be known when "
                       "compiling; a tensor argument is supported)");
    return ref(name, jn);
  }
  if (k == "as_tensors" || k == "as_optional_tensors") {
    if (!v.is_array()) failNode(jn, ctx + ": expected a list");
    std::vector<Node *> r;
    for (const json &x : v) {
      if (k == "as_tensors") {
        r.push_back(ref(tensorName(x, ctx), jn));
      } else {
        auto [kk, xv] = unionOf(x, ctx);
        if (kk == "as_none") r.push_back(nullptr);
        else if (kk == "as_tensor") r.push_back(ref(tensorName(*xv, ctx), jn));
        else failNode(jn, ctx + ": unexpected '" + kk + "'");
      }
    }
    return r;
  }
  if (k == "as_optional_tensor") {
    auto [kk, xv] = unionOf(v, ctx);
    if (kk == "as_none") return std::monostate{};
    if (kk == "as_tensor") return ref(tensorName(*xv, ctx), jn);
    failNode(jn, ctx + ": unexpected '" + kk + "'");
  }
  if (k == "as_int" || k == "as_sym_int") {
    int64_t n;
    if (k == "as_sym_int") {
      n = symInt(v, jn, ctx);
      if (std::string e = symIntExpr(v); !e.empty()) lastSymExprs_ = {e};
    } else {
      n = jsonInt(v, ctx);
    }
    if (ty == "float" || ty == "bool") {
      if (!lastSymExprs_.empty())
        failNode(jn, ctx + ": a " + ty + " computed from run-time sizes is not supported (compile at one size with "
                              "--specialize)");
      if (ty == "bool") failNode(jn, ctx + ": expected a bool, got an int");
      return (double)n;
    }
    return n;
  }
  if (k == "as_ints" || k == "as_sym_ints") {
    std::vector<int64_t> r = ints(v);
    if (ty == "Tensor[]" || ty == "Tensor?[]") {
      if (!r.empty()) failNode(jn, ctx + ": expected a list of tensors");
      return std::vector<Node *>{};
    }
    if (ty == "float[]") {
      if (!lastSymExprs_.empty())
        failNode(jn, ctx + ": floats computed from run-time sizes are not supported (compile at one size with "
                              "--specialize)");
      return std::vector<double>(r.begin(), r.end());
    }
    return r;
  }
  if (k == "as_float" || k == "as_sym_float") {
    if (k == "as_sym_float") {
      auto [kk, xv] = unionOf(v, ctx);
      if (kk == "as_name") {
        if (!symIntExpr(v).empty())
          failNode(jn, ctx + ": a float computed from run-time sizes is not supported (compile at one size with "
                             "--specialize)");
        dynamic_sizes::Value sv = symValue(v, jn, ctx);
        if (std::holds_alternative<bool>(sv)) failNode(jn, ctx + ": expected a float, got a bool");
        return std::holds_alternative<double>(sv) ? std::get<double>(sv) : (double)std::get<int64_t>(sv);
      }
      return jsonFloat(*xv, ctx);
    }
    double d = jsonFloat(v, ctx);
    if (ty == "int" || ty == "SymInt") failNode(jn, ctx + ": expected an int, got a float");
    return d;
  }
  if (k == "as_floats") {
    if (!v.is_array()) failNode(jn, ctx + ": expected a list");
    std::vector<double> r;
    for (const json &x : v) r.push_back(jsonFloat(x, ctx));
    if (r.empty() && (ty == "int[]" || ty == "SymInt[]")) return std::vector<int64_t>{};
    return r;
  }
  if (k == "as_bool" || k == "as_sym_bool") {
    if (k == "as_sym_bool") {
      auto [kk, xv] = unionOf(v, ctx);
      if (kk == "as_name") {
        if (!symIntExpr(v).empty())
          failNode(jn, ctx + ": a bool computed from run-time sizes is not supported (compile at one size with "
                             "--specialize)");
        dynamic_sizes::Value sv = symValue(v, jn, ctx);
        if (!std::holds_alternative<bool>(sv)) failNode(jn, ctx + ": expected a bool, got " + dynamic_sizes::str(sv));
        return std::get<bool>(sv);
      }
      if (!xv->is_boolean()) failNode(jn, ctx + ": expected a bool");
      return xv->get<bool>();
    }
    if (!v.is_boolean()) failNode(jn, ctx + ": expected a bool");
    return v.get<bool>();
  }
  if (k == "as_bools") {
    if (!v.is_array()) failNode(jn, ctx + ": expected a list");
    std::vector<bool> r;
    for (const json &x : v) {
      if (!x.is_boolean()) failNode(jn, ctx + ": expected a list of bools");
      r.push_back(x.get<bool>());
    }
    return r;
  }
  if (k == "as_string") {
    if (!v.is_string()) failNode(jn, ctx + ": expected a string");
    return v.get<std::string>();
  }
  if (k == "as_scalar_type") {
    int64_t e = jsonInt(v, ctx);
    if (e == 10 || e == 11) return complex_values::complexDTypeLit(e == 10 ? DType::F32 : DType::F64);
    auto d = dtypeFromEnum(e);
    if (!d)
      failNode(jn, ctx + ": unsupported dtype " + scalarTypeName(e) + " (ScalarType " + std::to_string(e) +
                       "; aotc supports float32, float64, int64, bool; int32 and uint8 as index inputs)");
    return DTypeLit{*d};
  }
  if (k == "as_memory_format") {
    static const std::map<int64_t, const char *> mf = {{1, "torch.contiguous_format"}, {2, "torch.channels_last"},
                                                       {3, "torch.channels_last_3d"}, {4, "torch.preserve_format"}};
    auto it = mf.find(jsonInt(v, ctx));
    if (it == mf.end()) failNode(jn, ctx + ": unknown memory format");
    return EnumLit{it->second};
  }
  if (k == "as_layout") {
    int64_t e = jsonInt(v, ctx);
    if (e != 7) failNode(jn, ctx + ": only torch.strided layout is supported");
    return EnumLit{"torch.strided"};
  }
  if (k == "as_device") {
    const json &t = field(v, "type", ctx);
    if (!t.is_string()) failNode(jn, ctx + ": device type must be a string");
    std::string s = "device(type='" + t.get<std::string>() + "'";
    if (v.contains("index") && v["index"].is_number_integer()) s += ", index=" + std::to_string(v["index"].get<int64_t>());
    return EnumLit{s + ")"};
  }
  failNode(jn, ctx + " of " + target + ": unsupported argument kind '" + k + "'");
}

void Reader::readInputs(const json &graph, const json &sig) {
  const json &inputs = field(graph, "inputs", "graph");
  const json &specs = field(sig, "input_specs", "signature");
  if (!inputs.is_array() || !specs.is_array()) fail("graph.inputs and signature.input_specs must be lists");
  if (inputs.size() != specs.size())
    fail("graph.inputs has " + std::to_string(inputs.size()) + " entries but signature.input_specs has " +
         std::to_string(specs.size()));
  for (size_t i = 0; i < specs.size(); ++i) {
    std::string ctx = "input_specs[" + std::to_string(i) + "]";
    auto [kind, spec] = unionOf(specs[i], ctx);
    auto [ik, iv] = unionOf(inputs[i], "graph.inputs[" + std::to_string(i) + "]");
    if (ik == "as_sym_int" || ik == "as_sym_float" || ik == "as_sym_bool")
      fail(ctx + ": symbolic input: dynamic shapes not supported yet");
    if (ik != "as_tensor")
      fail(ctx + ": non-tensor graph input ('" + ik + "') is not supported");
    std::string name = tensorName(*iv, ctx);
    InputRole role = InputRole::UserInput;
    std::string fqn;
    if (kind == "user_input") {
      const json &arg = field(*spec, "arg", ctx);
      auto [ak, av] = unionOf(arg, ctx + ".arg");
      if (ak != "as_tensor") fail(ctx + ": non-tensor user input ('" + ak + "') is not supported");
      if (tensorName(*av, ctx) != name) fail(ctx + ": names '" + tensorName(*av, ctx) + "' but graph.inputs has '" + name + "'");
    } else if (kind == "parameter" || kind == "buffer") {
      if (tensorName(field(*spec, "arg", ctx), ctx) != name)
        fail(ctx + ": argument name does not match graph.inputs ('" + name + "')");
      const json &f = field(*spec, kind == "parameter" ? "parameter_name" : "buffer_name", ctx);
      if (!f.is_string()) fail(ctx + ": the FQN must be a string");
      fqn = f.get<std::string>();
      role = kind == "parameter" ? InputRole::Parameter : InputRole::Buffer;
    } else if (kind == "tensor_constant") {
      if (tensorName(field(*spec, "arg", ctx), ctx) != name)
        fail(ctx + ": argument name does not match graph.inputs ('" + name + "')");
      const json &f = field(*spec, "tensor_constant_name", ctx);
      if (!f.is_string()) fail(ctx + ": the constant's name must be a string");
      fqn = f.get<std::string>();
      role = InputRole::Constant;
    } else if (kind == "token") {
      tokens_.insert(name); // orders effectful calls (with_effects); aotc keeps graph order
      continue;
    } else if (kind == "custom_obj" || kind == "constant_input") {
      fail(ctx + ": input kind '" + kind + "' is not supported");
    } else {
      fail(ctx + ": unknown input kind '" + kind + "'");
    }
    if (values_.count(name)) fail("duplicate name '" + name + "' in graph.inputs");
    if (metaComplex(name))
      fail(ctx + ": input '" + name + "' is complex: aotc computes complex values inside the graph only "
           "(docs/complex.md); make it a real tensor of its view_as_real and call "
           "torch.view_as_complex on it in forward");
    Node *ph = p_.forward.addPlaceholder(name, metaType(name), role);
    ph->fqn = fqn;
    ph->requiresGrad = role == InputRole::Parameter;
    ph->loc = loc_;
    values_[name] = ph;
    reserved_.insert(name);
  }
}

void Reader::readNodes(const json &graph) {
  const json &nodes = field(graph, "nodes", "graph");
  if (!nodes.is_array()) fail("graph.nodes must be a list");
  checkTargets(nodes);
  // 1. Who defines what (duplicates are errors).
  std::map<std::string, size_t> producer;
  for (size_t k = 0; k < nodes.size(); ++k) {
    const json &jn = nodes[k];
    if (!jn.is_object()) fail("graph.nodes[" + std::to_string(k) + "]: expected an object");
    const json &outs = field(jn, "outputs", "graph.nodes[" + std::to_string(k) + "]");
    if (!outs.is_array()) failNode(jn, "'outputs' must be a list");
    for (const json &o : outs) {
      std::vector<std::string> names = refsOf(o);
      std::string tgt = jn.contains("target") && jn["target"].is_string() ? jn["target"].get<std::string>() : "";
      bool item = tgt == "torch.ops.aten._local_scalar_dense.default";
      if (o.is_object() && o.size() == 1 && o.begin().key().rfind("as_sym_", 0) == 0) {
        if (!item && !dynamic_sizes::isSymbolicTarget(tgt))
          failNode(jn, "a symbolic result of an op that is not a size computation: not supported");
        if (item)
          for (const std::string &n : names) scalars_.insert(n);
      }
      for (const std::string &n : names) {
        if (reserved_.count(n)) failNode(jn, "duplicate name '" + n + "'");
        reserved_.insert(n);
        producer[n] = k;
      }
    }
    if (jn.contains("name") && jn["name"].is_string()) {
      std::string n = jn["name"].get<std::string>();
      bool isOwnOutput = producer.count(n) && producer[n] == k;
      if (!isOwnOutput) {
        if (reserved_.count(n)) failNode(jn, "duplicate name '" + n + "'");
        reserved_.insert(n);
      }
    }
  }
  // 2. Dependencies; dangling references are reported here.
  std::vector<std::vector<size_t>> users(nodes.size());
  std::vector<int> pending(nodes.size(), 0);
  for (size_t k = 0; k < nodes.size(); ++k) {
    const json &ins = field(nodes[k], "inputs", "graph.nodes[" + std::to_string(k) + "]");
    if (!ins.is_array()) failNode(nodes[k], "'inputs' must be a list");
    std::set<size_t> deps;
    for (const json &na : ins) {
      if (!na.is_object() || !na.contains("arg")) failNode(nodes[k], "malformed input (expected {name, arg, kind})");
      for (const std::string &n : refsOf(na["arg"])) {
        referenced_.insert(n);
        if (values_.count(n) || tokens_.count(n)) continue; // a graph input
        auto it = producer.find(n);
        if (it == producer.end())
          failNode(nodes[k], "reads '" + n + "', which no input or node defines (dangling reference)");
        deps.insert(it->second);
      }
    }
    for (size_t d : deps) {
      if (d == k) failNode(nodes[k], "reads its own output (cycle)");
      users[d].push_back(k);
      ++pending[k];
    }
  }
  // 3. Topological order, stable (lowest index first); leftovers form a cycle.
  std::priority_queue<size_t, std::vector<size_t>, std::greater<size_t>> ready;
  for (size_t k = 0; k < nodes.size(); ++k)
    if (!pending[k]) ready.push(k);
  std::vector<size_t> order;
  while (!ready.empty()) {
    size_t k = ready.top();
    ready.pop();
    order.push_back(k);
    for (size_t u : users[k])
      if (--pending[u] == 0) ready.push(u);
  }
  if (order.size() != nodes.size()) {
    // Walk predecessors among the blocked nodes until one repeats.
    std::vector<std::vector<size_t>> preds(nodes.size());
    for (size_t k = 0; k < nodes.size(); ++k)
      for (size_t u : users[k]) preds[u].push_back(k);
    size_t cur = 0;
    while (!pending[cur]) ++cur;
    std::vector<size_t> path;
    std::map<size_t, size_t> seenAt;
    while (!seenAt.count(cur)) {
      seenAt[cur] = path.size();
      path.push_back(cur);
      for (size_t p : preds[cur])
        if (pending[p]) { cur = p; break; }
    }
    // `path` follows inputs backwards; print the cycle in data-flow order.
    std::string cyc = "'" + jsonNodeName(nodes[cur]) + "'";
    for (size_t i = path.size(); i-- > seenAt[cur] + 1;) cyc += " -> '" + jsonNodeName(nodes[path[i]]) + "'";
    cyc += " -> '" + jsonNodeName(nodes[cur]) + "'";
    failNode(nodes[cur], "the graph has a cycle: " + cyc);
  }
  for (size_t k : order) buildNode(nodes[k]);
}

/// Why capture cannot read `raw` (empty when it can).
static std::string targetProblem(const std::string &raw) {
  if (dynamic_sizes::isSymbolicTarget(raw)) return "";
  if (raw.rfind("torch.ops.higher_order.", 0) == 0) return "higher-order op '" + raw + "' is not supported";
  if (raw.rfind("torch.ops.", 0) != 0) {
    if (raw.rfind("_operator.", 0) == 0 || raw.rfind("torch.sym_", 0) == 0 || raw.rfind("math.", 0) == 0)
      return "symbolic-shape op '" + raw + "' is not one aotc evaluates (Capture/Sizes.cpp lists them)";
    return "unknown op '" + raw + "'";
  }
  if (!OpRegistry::get().lookup(canonicalTarget(raw)) && !complex_values::isComplexOnlyTarget(canonicalTarget(raw))) {
    if (const std::string *why = refusalReason(canonicalTarget(raw))) return "unsupported op '" + raw + "': " + *why;
    return "unknown op '" + raw + "'";
  }
  return "";
}

static const char *const kWithEffects = "torch.ops.higher_order.with_effects";
static const char *const kCheckErrors = "torch.ops.aten._linalg_check_errors.default";

/// Why capture cannot read a with_effects node (empty when it can).
static std::string effectProblem(const json &jn) {
  const json *op = nullptr;
  if (jn.contains("inputs") && jn["inputs"].is_array() && jn["inputs"].size() >= 3 && jn["inputs"][1].is_object() &&
      jn["inputs"][1].contains("arg") && jn["inputs"][1]["arg"].is_object() && jn["inputs"][1]["arg"].contains("as_operator"))
    op = &jn["inputs"][1]["arg"]["as_operator"];
  if (!op || !op->is_string()) return "malformed with_effects node (expected token, operator, arguments)";
  if (op->get<std::string>() != kCheckErrors)
    return "the effectful op '" + op->get<std::string>() + "' (with_effects) is not supported";
  return "";
}

void Reader::buildEffect(const json &jn) {
  const json &ins = jn["inputs"];
  std::string token = tensorName(field(ins[0], "arg", "with_effects")["as_tensor"], "with_effects token");
  if (!tokens_.count(token)) failNode(jn, "with_effects: '" + token + "' is not an effect token");
  Node *info = ref(tensorName(field(ins[2], "arg", "with_effects")["as_tensor"], "with_effects info"), jn);
  if (!checkLinalgErrors(info))
    failNode(jn, "_linalg_check_errors reads '" + info->name +
                     "', which is not the info result of a linalg op with check_errors: aotc checks LAPACK's info "
                     "only where the op computes it");
  const json &outs = jn["outputs"];
  if (outs.is_array() && !outs.empty() && outs[0].is_object() && outs[0].contains("as_tensor"))
    tokens_.insert(tensorName(outs[0]["as_tensor"], "with_effects outputs[0]"));
}

void Reader::checkTargets(const json &nodes) {
  struct Group {
    size_t first = 0, count = 0;
    std::string problem;
  };
  std::map<std::string, Group> groups; // by target
  std::vector<std::string> order;      // targets in order of first use
  size_t bad = 0;
  for (size_t k = 0; k < nodes.size(); ++k) {
    const json &jn = nodes[k];
    if (!jn.is_object() || !jn.contains("target") || !jn["target"].is_string()) continue; // buildNode says
    std::string raw = jn["target"].get<std::string>();
    std::string problem = raw == kWithEffects ? effectProblem(jn) : targetProblem(raw);
    if (problem.empty()) continue;
    ++bad;
    auto [it, fresh] = groups.try_emplace(raw, Group{k, 0, problem});
    if (fresh) order.push_back(raw);
    ++it->second.count;
  }
  for (const std::string &t : order) {
    const Group &g = groups[t];
    std::string uses = g.count == 1 ? "" : " (" + std::to_string(g.count) + " nodes; the first is shown)";
    diags_.add(nodeDiag(nodes[g.first], g.problem + uses));
  }
  diags_.throwIfAny(order.empty() ? "" : unsupportedOpsSummary(order.size(), bad));
}

void Reader::buildNode(const json &jn) {
  const json &tj = field(jn, "target", "node");
  if (!tj.is_string()) failNode(jn, "'target' must be a string");
  std::string raw = tj.get<std::string>();
  if (raw == kWithEffects) return buildEffect(jn);
  if (dynamic_sizes::isSymbolicTarget(raw)) return buildSymbolic(jn, raw);
  if (std::string why = targetProblem(raw); !why.empty()) failNode(jn, why); // checkTargets reported it already
  std::string target = canonicalTarget(raw);
  const OpDef *def = OpRegistry::get().lookup(target);
  AOTC_ASSERT(def || complex_values::isComplexOnlyTarget(target), "capture: targetProblem accepted the unknown op '" + raw + "'");
  static const std::vector<SchemaArg> noSchema; // complex-only targets: positional tensors (Complex.cpp)
  const auto &sargs = def ? def->schema.args : noSchema;
  std::string stack = metaString(jn, "stack_trace");
  // The user-level op for run-time messages: torch_fn "cross_entropy_1;function.cross_entropy"
  // (or "...;method.softmax") names the function the user called; else the captured op.
  std::string userOp = target;
  if (std::string fn = metaString(jn, "torch_fn"); !fn.empty()) {
    if (size_t semi = fn.find(';'); semi != std::string::npos) fn = fn.substr(semi + 1);
    if (size_t dot = fn.rfind('.'); dot != std::string::npos) fn = fn.substr(dot + 1);
    if (!fn.empty() && fn.size() < 200) userOp = fn;
  }

  std::vector<Arg> pos;
  std::vector<std::pair<std::string, Arg>> kwargs;
  std::set<std::string> seen;
  SymArgs symArgs;
  auto noteSym = [&](size_t index) {
    if (!lastSymExprs_.empty()) {
      if (!def) failNode(jn, "run-time sizes in an argument of a complex op are not supported");
      symArgs.push_back({index, lastSymExprs_});
    }
  };
  for (const json &na : jn["inputs"]) {
    std::string an = na.contains("name") && na["name"].is_string() ? na["name"].get<std::string>() : "";
    if (an.empty() || !def) { // complex-only targets (no schema): their arguments in order
      if (!kwargs.empty()) failNode(jn, "positional argument after named ones");
      const SchemaArg *sa = pos.size() < sargs.size() ? &sargs[pos.size()] : nullptr;
      pos.push_back(convertArg(na["arg"], sa, jn, target));
      noteSym(pos.size() - 1);
      continue;
    }
    const SchemaArg *sa = nullptr;
    for (const auto &s : sargs)
      if (s.name == an) sa = &s;
    if (!sa) failNode(jn, "op '" + target + "' has no argument named '" + an + "'");
    if (!seen.insert(an).second) failNode(jn, "argument '" + an + "' given twice");
    kwargs.push_back({an, convertArg(na["arg"], sa, jn, target)});
    noteSym((size_t)(sa - sargs.data()));
  }
  if (def && pos.size() > sargs.size())
    failNode(jn, "expects at most " + std::to_string(sargs.size()) + " arguments, got " + std::to_string(pos.size()));

  // Result names.
  const json &outs = jn["outputs"];
  bool single = (!def || def->schema.numReturns == 1) && outs.size() == 1 && outs[0].is_object() &&
                outs[0].size() == 1 && outs[0].begin().key() == "as_tensor";
  // item(): one symbol result, named by as_name (a 0-d tensor in aotc).
  bool symbol = target == "aten._local_scalar_dense.default" && outs.size() == 1 && outs[0].is_object() &&
                outs[0].size() == 1 && outs[0].begin().key().rfind("as_sym_", 0) == 0;
  std::string nodeName;
  if (symbol) {
    const json &sv = outs[0].begin().value();
    if (!sv.is_object() || !sv.contains("as_name") || !sv["as_name"].is_string())
      failNode(jn, "outputs[0]: expected a named symbol");
    nodeName = sv["as_name"].get<std::string>();
    single = true;
  } else if (single) {
    nodeName = tensorName(outs[0]["as_tensor"], "outputs[0]");
  } else if (jn.contains("name") && jn["name"].is_string()) {
    nodeName = jn["name"].get<std::string>();
  } else {
    std::string base = def ? def->schema.name : "complex_op";
    nodeName = base;
    for (int i = 1; reserved_.count(nodeName) || p_.forward.find(nodeName); ++i)
      nodeName = base + "_" + std::to_string(i);
    reserved_.insert(nodeName);
  }
  Node *n = nullptr;
  auto isComplex = [&](const Node *x) { return complex_.count(x) != 0; };
  complex_values::ComplexCall cc{nodeName, target, pos, kwargs, loc_, stack, userOp, single && metaComplex(nodeName)};
  try {
    if (complex_values::needsComplexLowering(cc, isComplex)) {
      if (!single) failNode(jn, "an op with several results on complex values is not supported");
      // The pair representation is built at the reference sizes: refused over run-time ones.
      bool runtime = !symArgs.empty();
      auto symbolic = [](const Node *x) {
        return x && std::any_of(x->types.begin(), x->types.end(), [](const TensorType &t) { return t.symbolic(); });
      };
      auto scan = [&](const Arg &a) {
        if (auto *x = std::get_if<Node *>(&a)) runtime |= symbolic(*x);
        if (auto *v = std::get_if<std::vector<Node *>>(&a))
          for (Node *x : *v) runtime |= symbolic(x);
      };
      for (const Arg &a : pos) scan(a);
      for (const auto &kv : kwargs) scan(kv.second);
      if (runtime)
        failNode(jn, "complex values over run-time sizes are not supported yet: compile at one size with "
                     "--specialize SYMBOL=N (docs/dynamic-shapes.md)");
      n = complex_values::lowerComplexCall(p_.forward, cc, isComplex);
    } else {
      n = buildCall(p_.forward, nodeName, target, pos, kwargs, loc_, nullptr, {}, SizeInference::Reference);
    }
  } catch (const Error &e) {
    // Errors of argument binding / shape inference: add the node's stack trace.
    std::string msg = e.what();
    if (e.kind() == Error::Kind::User && !stack.empty() && msg.find("\n  stack_trace: ") == std::string::npos)
      throw Error(e.kind(), msg + "\n  stack_trace: " + stack);
    throw;
  }
  n->loc = loc_;
  n->stackTrace = stack;
  n->userOp = userOp;
  for (auto &[i, exprs] : symArgs) n->setSymArg(i, std::move(exprs));
  if (n->types.empty()) { // a check without results (_assert_tensor_metadata): done by its infer
    p_.forward.erase(n);
    return;
  }
  // The op's shape function over run-time sizes (from its arguments, so once per node). A
  // result the export gives no meta keeps it.
  const auto ours = inferSymbolic(*n, n->types);
  if (ours)
    for (size_t k = 0; k < n->types.size(); ++k) n->types[k].sym = (*ours)[k];
  auto check = [&](size_t k, const std::string &name) {
    if (!tensorValues_->contains(name)) return;
    TensorType meta = metaType(name);
    TensorType &t = n->types[k];
    // A run-time size's dim: inference checks its value at the reference sizes; the export's
    // meta gives its expression (symbolic shape functions: docs/dynamic-shapes.md).
    // (An inferred type copied from an input carries its expressions: compared without them.)
    if (meta.dtype != t.dtype || meta.shape != t.shape)
      nodeError(*n, "exported meta of '" + name + "' says " + meta.str() + " but aotc infers " +
                        TensorType(t.dtype, t.shape).str()); // the values at the reference sizes
    t.sym = meta.sym;
    // The shape function must agree with the export's expressions.
    if (ours && (meta.symbolic() || !(*ours)[k].empty()) && !sameSizes((*ours)[k], meta))
      nodeError(*n, "from its arguments' run-time sizes, aotc's shape function gives " +
                        TensorType{meta.dtype, meta.shape, (*ours)[k]}.str() + " but the export's meta says " +
                        meta.str() + " (an inconsistent export, or a shape function of aotc to fix)");
  };
  if (single) {
    if (n->types.size() != 1) nodeError(*n, "expected one result, the op has " + std::to_string(n->types.size()));
    check(0, nodeName);
    if (metaComplex(nodeName)) complex_.insert(n);
    values_[nodeName] = n;
    return;
  }
  // Tuple (or list) results: one getitem per used output, named as the output.
  std::vector<std::pair<size_t, std::string>> items; // (result index, name)
  if (outs.size() == 1 && outs[0].is_object() && outs[0].contains("as_tensors")) {
    size_t i = 0;
    for (const json &t : outs[0]["as_tensors"]) items.push_back({i++, tensorName(t, "outputs")});
  } else {
    for (size_t i = 0; i < outs.size(); ++i) {
      auto [k, v] = unionOf(outs[i], "outputs[" + std::to_string(i) + "]");
      if (k == "as_none") continue;
      if (k != "as_tensor") failNode(jn, "unsupported result kind '" + k + "'");
      items.push_back({i, tensorName(*v, "outputs")});
    }
  }
  for (auto &[i, name] : items) {
    if (i >= n->types.size())
      nodeError(*n, "the export lists result " + std::to_string(i) + " but the op has " +
                        std::to_string(n->types.size()) + " results");
    check(i, name);
    if (!referenced_.count(name)) continue; // e.g. `<node>_unused_<i>`: nothing reads it
    // A one-element list result (split into one chunk): the node's value itself.
    Node *gi = n->types.size() == 1
                   ? buildCall(p_.forward, name, "aten.alias.default", {Arg(n)}, {}, loc_, nullptr, {}, SizeInference::Reference)
                   : buildCall(p_.forward, name, "getitem", {Arg(n), Arg((int64_t)i)}, {}, loc_);
    gi->loc = loc_;
    gi->stackTrace = stack;
    gi->userOp = userOp;
    values_[name] = gi;
  }
}

void Reader::readOutputs(const json &graph, const json &sig) {
  const json &outs = field(graph, "outputs", "graph");
  if (!outs.is_array()) fail("graph.outputs must be a list");
  const json *specs = sig.contains("output_specs") ? &sig["output_specs"] : nullptr;
  if (specs && (!specs->is_array() || specs->size() != outs.size()))
    fail("signature.output_specs does not match graph.outputs");
  // User outputs first, then the new values of mutated inputs (abi.h's order; torch.export
  // puts the mutations first): the loss is out[0] whatever the export order.
  std::vector<Node *> result, mutations;
  std::vector<std::string> mutated; // input names, parallel to `mutations`
  for (size_t i = 0; i < outs.size(); ++i) {
    std::string ctx = "graph.outputs[" + std::to_string(i) + "]";
    if (specs && (*specs)[i].is_object() && (*specs)[i].contains("token")) continue; // the effects' last token
    auto [k, v] = unionOf(outs[i], ctx);
    if (k != "as_tensor") fail(ctx + ": non-tensor output ('" + k + "') is not supported");
    std::string name = tensorName(*v, ctx);
    auto it = values_.find(name);
    if (it == values_.end()) fail(ctx + ": returns '" + name + "', which no input or node defines (dangling reference)");
    if (complex_.count(it->second))
      fail(ctx + ": returns the complex tensor '" + name + "': aotc computes complex values inside the graph only "
           "(docs/complex.md); return torch.view_as_real of it");
    if (!specs) {
      result.push_back(it->second);
      continue;
    }
    auto [sk, sv] = unionOf((*specs)[i], "output_specs[" + std::to_string(i) + "]");
    if (sk == "user_output" || sk == "loss_output") {
      result.push_back(it->second);
      continue;
    }
    if (sk == "buffer_mutation" || sk == "parameter_mutation" || sk == "user_input_mutation") {
      const char *key = sk == "buffer_mutation" ? "buffer_name"
                        : sk == "parameter_mutation" ? "parameter_name" : "user_input_name";
      const json &f = field(*sv, key, "output_specs[" + std::to_string(i) + "]");
      if (!f.is_string()) fail("output_specs[" + std::to_string(i) + "]: '" + key + "' must be a string");
      std::string target = f.get<std::string>();
      Node *in = nullptr;
      for (Node *ph : p_.forward.placeholders())
        if ((sk == "user_input_mutation" ? ph->name : ph->fqn) == target) in = ph;
      if (!in) fail("output_specs[" + std::to_string(i) + "]: mutates unknown input '" + target + "'");
      mutations.push_back(it->second);
      mutated.push_back(in->name);
      continue;
    }
    if (sk == "gradient_to_parameter" || sk == "gradient_to_user_input")
      fail("output_specs[" + std::to_string(i) + "]: '" + sk +
           "': joint (training) exports are not supported; export the forward only");
    fail("output_specs[" + std::to_string(i) + "]: output kind '" + sk + "' is not supported");
  }
  for (size_t k = 0; k < mutations.size(); ++k) {
    p_.mutatedInputs.push_back({(int)result.size(), mutated[k]});
    result.push_back(mutations[k]);
  }
  p_.forward.setOutputs(result);
}

Program Reader::run() {
  if (!j_.is_object()) fail("not an ExportedProgram JSON: expected a top-level object");
  if (!j_.contains("graph_module"))
    fail("not an ExportedProgram JSON: no 'graph_module' (expected the models/model.json of a torch.export .pt2)");
  const json &sv = field(j_, "schema_version", "ExportedProgram");
  int64_t major = jsonInt(field(sv, "major", "schema_version"), "schema_version.major");
  int64_t minor = sv.contains("minor") && sv["minor"].is_number_integer() ? sv["minor"].get<int64_t>() : 0;
  if (major != 8)
    fail("unsupported schema_version " + std::to_string(major) + "." + std::to_string(minor) +
         " (aotc reads major version 8; re-export with a torch that writes it)");
  auto isTraining = [](const json &v) { return v.is_string() && v.get<std::string>() == "TRAINING"; };
  bool training = j_.contains("dialect") && isTraining(j_["dialect"]);
  if (j_.contains("verifiers") && j_["verifiers"].is_array())
    for (const json &v : j_["verifiers"]) training |= isTraining(v);
  if (training)
    fail("this ExportedProgram is in the TRAINING dialect (torch.export.export output); aotc needs "
         "Core ATen: re-export with `ep = ep.run_decompositions()` before torch.export.save");
  const json &gm = field(j_, "graph_module", "ExportedProgram");
  const json &graph = field(gm, "graph", "graph_module");
  const json &sig = field(gm, "signature", "graph_module");
  const json &tv = field(graph, "tensor_values", "graph");
  if (!tv.is_object()) fail("graph.tensor_values must be an object");
  tensorValues_ = &tv;
  graph_ = &graph;
  bindings_ = dynamic_sizes::bindSymbols(j_, specialize_, maxSize_, loc_);
  p_.stage = "capture";
  p_.origin = loc_;
  readInputs(graph, sig);
  // Names read by the graph outputs count as references too (for getitem creation).
  if (graph.contains("outputs") && graph["outputs"].is_array())
    for (const json &o : graph["outputs"])
      for (const std::string &n : refsOf(o)) referenced_.insert(n);
  readNodes(graph);
  readOutputs(graph, sig);
  // Run-time sizes: a symbol's name is not a value's (the text would read one as the other),
  // and the reference sizes, every memory plan's, meet the checks.
  for (const std::string &sym : bindings_.dynamic)
    if (reserved_.count(sym) || values_.count(sym))
      fail("dynamic export: the symbol '" + sym + "' is also the name of a value of the graph; give it a size with "
           "--specialize");
  for (const Program::SizeCheck &c : p_.sizeChecks) {
    int64_t holds = 1;
    try {
      holds = SymExpr::parse(c.expr).eval(bindings_.values);
    } catch (const SymExprError &e) {
      fail("the export's check '" + c.expr + "' at the reference sizes (" + bindings_.str() + "): " + e.what());
    }
    if (!holds)
      fail("the reference sizes " + bindings_.str() + " (every run-time symbol at its maximum) fail the export's check " +
           c.expr + " (" + c.message + "): choose another --max-size");
  }
  for (auto &[sym, v] : bindings_.values) {
    const dynamic_sizes::Range &r = bindings_.ranges[sym];
    p_.specializedSizes.push_back(
        {sym, v, r.min, r.max.value_or(-1), bindings_.dims[sym], bindings_.dynamic.count(sym) > 0});
  }
  p_.forward.verify();
  return std::move(p_);
}

} // namespace export_json

using export_json::json;
using export_json::Reader;

Program readExportedProgram(const std::string &text, const std::string &where,
                            const std::vector<std::string> &specialize, const std::vector<std::string> &maxSize) {
  json j;
  try {
    j = json::parse(text);
  } catch (const json::parse_error &e) {
    // Position of the error: nlohmann reports the byte count read.
    int line = 1, col = 1;
    size_t upto = std::min<size_t>(e.byte > 0 ? e.byte - 1 : 0, text.size());
    for (size_t i = 0; i < upto; ++i) {
      if (text[i] == '\n') { ++line; col = 1; }
      else ++col;
    }
    std::string msg = e.what();
    size_t c = msg.find(": ", msg.find("parse error"));
    if (c != std::string::npos) msg = msg.substr(c + 2);
    userError(SourceLoc{where, line, col}, "invalid JSON: " + msg);
  } catch (const json::exception &e) {
    // e.g. out_of_range.406, a number such as 1e400 that overflows a double.
    userError(SourceLoc{where}, std::string("invalid JSON: ") + e.what());
  }
  try {
    return Reader(j, where, specialize, maxSize).run();
  } catch (const json::exception &e) {
    // Any shape the explicit checks missed: still a user error, never a crash.
    userError(SourceLoc{where}, std::string("malformed ExportedProgram JSON: ") + e.what());
  }
}

} // namespace aotc
