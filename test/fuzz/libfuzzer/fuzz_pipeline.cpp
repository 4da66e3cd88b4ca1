//===- fuzz_pipeline.cpp - libFuzzer harness: the whole pipeline, structure-aware ===//
//
// The input is a small graph as capture-stage aotc IR (the seeds: test/fuzz/models and
// the first sample graph of every conformance op). LLVMFuzzerTestOneInput compiles it
// in memory as `aotc IN -o OUT.o` would: parse -> functionalize -> decompose -> joint ->
// lower -> partition (min-cut) -> planProgram -> emitObject (CPU). Values larger than
// 1 MiB are refused first (checkTensorBytes), to keep the executions short.
//
// The custom mutator is structure-aware (docs/fuzzing.md): it parses the input, applies
// 1-3 graph mutations - change a node's op (to one of the op registry's), change a
// non-tensor argument value, rewire an edge, insert or delete a node, change an input's
// shape, dtype, role or requires_grad, add or drop an input or an output - and rebuilds
// the graph node by node with buildCall (nodes whose arguments no longer type-check are
// dropped and their users rewired), then prints it. One mutant in 16, and any input that
// does not parse, gets libFuzzer's byte mutations instead.
//
// Every 100th program that compiles (chosen by a hash of the input, so one input always
// reproduces; AOTC_FUZZ_JIT_EVERY=1 checks all) also runs: its partitioned program is
// compiled again in float64 (convertF32ToF64, as `aotc gradcheck` does), linked by the JIT
// (tools/aotc/Jit.h), and its forward outputs and gradients (cotangents of ones) are
// compared with the float64 reference evaluator (RefEval.h) on the joint graph: integer
// and bool values exactly, NaN and +-Inf at the same positions, elsewhere
// |a - r| <= rtol |r| + atol max|r| + 1e-9 with the conformance suite's f64 tolerances
// (rtol 1e-10, atol 1e-12: the same for its pointwise and reduction classes; the 1e-9 floor
// is for values that cancel to rounding noise, see compare()). Float64 and
// not the float32 object: a random composition of ops is often ill-conditioned, and a
// float32 rounding there is not a compiler bug; codegen is the same code for both
// dtypes. Either side rejecting the inputs (an index out of range) while the other
// accepts them is a disagreement too.
//===----------------------------------------------------------------------===//
#include "FuzzCommon.h"

#include "Driver.h"
#include "Jit.h"

#include "aotc/Capture.h"
#include "aotc/Codegen.h"
#include "aotc/Kernels.h"
#include "aotc/OpRegistry.h"
#include "aotc/RefEval.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <random>

extern "C" size_t LLVMFuzzerMutate(uint8_t *data, size_t size, size_t maxSize);

using namespace aotc;

namespace {

constexpr int64_t kMaxValueBytes = 1 << 20;

//===-- The graph as the mutator sees it -----------------------------------===//

/// A value reference: index into inputs, then nodes (inputs.size() + node index).
/// -1: none (an input that was dropped; rebuild substitutes another value).
struct SArg {
  enum Kind { Lit, Ref, Refs } kind = Lit;
  Arg lit;               ///< Lit: the non-tensor value (std::monostate: None).
  int ref = -1;          ///< Ref
  std::vector<int> refs; ///< Refs: a tensor list (-1 entries: None in a Tensor?[]).
};
struct SInput {
  std::string name;
  TensorType type;
  InputRole role = InputRole::UserInput;
  std::string fqn;
  bool requiresGrad = false;
};
struct SNode {
  std::string name, target; ///< target "getitem": args {Ref, Lit index}
  std::vector<SArg> args;
};
struct Spec {
  std::string name = "model";
  std::vector<SInput> inputs;
  std::vector<SNode> nodes;
  std::vector<int> outputs;
  std::vector<std::pair<int, std::string>> mutatedInputs;
  int size() const { return (int)(inputs.size() + nodes.size()); }
};

Spec toSpec(const Program &p) {
  Spec s;
  s.name = p.name;
  std::unordered_map<const Node *, int> id;
  for (const auto &up : p.forward.nodes()) {
    const Node *n = up.get();
    if (n->isPlaceholder()) {
      id[n] = (int)s.inputs.size();
      s.inputs.push_back({n->name, n->type(), n->role, n->fqn, n->requiresGrad});
    }
  }
  int base = (int)s.inputs.size();
  for (const auto &up : p.forward.nodes()) {
    const Node *n = up.get();
    if (!n->isCall())
      continue;
    SNode sn{n->name, n->target, {}};
    for (const Arg &a : n->args) {
      SArg sa;
      if (auto *x = std::get_if<Node *>(&a)) {
        sa.kind = SArg::Ref;
        sa.ref = id.at(*x);
      } else if (auto *l = std::get_if<std::vector<Node *>>(&a)) {
        sa.kind = SArg::Refs;
        for (Node *m : *l)
          sa.refs.push_back(m ? id.at(m) : -1);
      } else {
        sa.lit = a;
      }
      sn.args.push_back(sa);
    }
    id[n] = base + (int)s.nodes.size();
    s.nodes.push_back(std::move(sn));
  }
  for (Node *o : p.forward.outputs())
    s.outputs.push_back(id.at(o));
  s.mutatedInputs = p.mutatedInputs;
  return s;
}

/// The program of a spec; false when nothing is left to compute.
bool rebuild(const Spec &s, Program &q) {
  q = Program();
  q.stage = "capture";
  q.name = s.name;
  q.origin = SourceLoc{"mutant.txt"};
  Graph &g = q.forward;
  std::vector<Node *> val(s.size(), nullptr);
  for (size_t i = 0; i < s.inputs.size(); ++i) {
    const SInput &in = s.inputs[i];
    if (g.find(in.name))
      continue;
    Node *ph = g.addPlaceholder(in.name, in.type, in.role);
    ph->fqn = in.role == InputRole::Parameter || in.role == InputRole::Buffer
                  ? (in.fqn.empty() ? in.name : in.fqn)
                  : "";
    ph->requiresGrad = in.requiresGrad && isFloating(in.type.dtype);
    val[i] = ph;
  }
  // A dropped value's users read the nearest earlier value instead.
  auto get = [&](int r, int before) -> Node * {
    if (r >= 0 && r < before && val[r])
      return val[r];
    for (int k = std::min(r, before - 1); k >= 0; --k)
      if (val[k])
        return val[k];
    for (int k = before - 1; k >= 0; --k)
      if (val[k])
        return val[k];
    return nullptr;
  };
  const int base = (int)s.inputs.size();
  for (size_t j = 0; j < s.nodes.size(); ++j) {
    const SNode &sn = s.nodes[j];
    const int self = base + (int)j;
    if (g.find(sn.name))
      continue;
    std::vector<Arg> args;
    std::vector<std::pair<std::string, Arg>> kwargs;
    const OpDef *def = sn.target == "getitem" ? nullptr : OpRegistry::get().lookup(sn.target);
    if (sn.target != "getitem" && !def)
      continue;
    bool ok = true;
    for (size_t i = 0; i < sn.args.size() && ok; ++i) {
      const SArg &sa = sn.args[i];
      Arg a;
      if (sa.kind == SArg::Ref) {
        Node *n = get(sa.ref, self);
        ok = n != nullptr;
        a = n;
      } else if (sa.kind == SArg::Refs) {
        std::vector<Node *> l;
        for (int r : sa.refs)
          l.push_back(r < 0 ? nullptr : get(r, self));
        a = l;
      } else {
        a = sa.lit;
      }
      if (def && i < def->schema.args.size() && def->schema.args[i].kwargOnly)
        kwargs.push_back({def->schema.args[i].name, a});
      else
        args.push_back(a);
    }
    if (!ok)
      continue;
    try {
      val[self] = buildCall(g, sn.name, sn.target, args, kwargs, SourceLoc{"mutant.txt"});
    } catch (const Error &) {
      // The mutation made this node ill-typed: drop it (its users read another value).
    }
  }
  std::vector<Node *> outs;
  for (int o : s.outputs)
    if (o >= 0 && o < s.size() && val[o] && std::find(outs.begin(), outs.end(), val[o]) == outs.end())
      outs.push_back(val[o]);
  if (outs.empty())
    for (int k = s.size() - 1; k >= base && outs.empty(); --k)
      if (val[k] && val[k]->types.size() == 1)
        outs.push_back(val[k]);
  if (outs.empty())
    return false;
  for (Node *o : outs)
    if (o->types.size() != 1)
      return false;
  g.setOutputs(outs);
  g.eliminateDeadCode();
  // Mutation outputs survive only where that output still is the same value.
  for (const auto &[i, name] : s.mutatedInputs)
    if (i >= 0 && i < (int)s.outputs.size() && i < (int)outs.size() && val[s.outputs[i]] == outs[i] &&
        g.find(name) && g.find(name)->isPlaceholder())
      q.mutatedInputs.push_back({i, name});
  return true;
}

//===-- Mutations ----------------------------------------------------------===//

struct Mutator {
  std::mt19937_64 rng;
  explicit Mutator(unsigned seed) : rng(seed) {}

  uint64_t below(uint64_t n) { return n ? rng() % n : 0; }
  bool chance(int pct) { return (int)below(100) < pct; }
  template <class T> const T &pick(const std::vector<T> &v) { return v[below(v.size())]; }

  static const std::vector<const OpDef *> &ops() {
    static const std::vector<const OpDef *> all = [] {
      std::vector<const OpDef *> r;
      for (const auto &[t, def] : OpRegistry::get().all())
        r.push_back(&def);
      return r;
    }();
    return all;
  }

  int64_t smallInt() {
    static const std::vector<int64_t> special = {0, 1, -1, 2, 3, -2, 4, 8, 1 << 20, (int64_t)1 << 40,
                                                 std::numeric_limits<int64_t>::max(),
                                                 std::numeric_limits<int64_t>::min()};
    if (chance(85))
      return (int64_t)below(7) - 2;
    return pick(special);
  }
  double someFloat() {
    static const std::vector<double> t = {0.0, 1.0, -1.0, 0.5, 2.0, 1e-5, -0.0, 3.0, 1e308,
                                          INFINITY, -INFINITY, NAN, 1e-300};
    return pick(t);
  }
  DType someDType() {
    static const std::vector<DType> t = {DType::F32, DType::F32, DType::F32, DType::F64, DType::F64,
                                         DType::I64, DType::I64, DType::Bool, DType::I32, DType::U8};
    return pick(t);
  }
  int someRef(int before) {
    if (before <= 0)
      return -1;
    if (chance(70))
      return before - 1 - (int)below(std::min(before, 3));
    return (int)below(before);
  }

  /// A value for schema argument `sa` (new ops, None replaced).
  SArg generate(const SchemaArg &sa, int before) {
    SArg r;
    if (sa.hasDefault && chance(sa.optional ? 50 : 60)) {
      r.lit = sa.defaultValue;
      return r;
    }
    if (sa.optional && chance(10))
      return r; // None
    const std::string &t = sa.type;
    if (t == "Tensor") {
      r.kind = SArg::Ref;
      r.ref = someRef(before);
    } else if (sa.isTensorList()) {
      r.kind = SArg::Refs;
      for (int k = 0, n = 1 + (int)below(3); k < n; ++k)
        r.refs.push_back(t == "Tensor?[]" && chance(20) ? -1 : someRef(before));
    } else if (t == "int" || t == "SymInt") {
      r.lit = smallInt();
    } else if (t == "int[]" || t == "SymInt[]") {
      std::vector<int64_t> l;
      for (int64_t k = 0, n = sa.listLen ? sa.listLen : (int64_t)below(4); k < n; ++k)
        l.push_back(chance(80) ? (int64_t)below(5) - 1 : smallInt());
      r.lit = l;
    } else if (t == "float") {
      r.lit = someFloat();
    } else if (t == "float[]") {
      r.lit = std::vector<double>{someFloat()};
    } else if (t == "bool") {
      r.lit = chance(50);
    } else if (t == "bool[]") {
      std::vector<bool> l;
      for (int64_t k = 0, n = sa.listLen ? sa.listLen : 1 + (int64_t)below(3); k < n; ++k)
        l.push_back(chance(50));
      r.lit = l;
    } else if (t == "str") {
      static const std::vector<std::string> s = {"none", "tanh", "mean", "sum", "", "floor", "trunc"};
      r.lit = pick(s);
    } else if (t == "Scalar") {
      if (chance(50))
        r.lit = smallInt();
      else
        r.lit = someFloat();
    } else if (t == "ScalarType") {
      r.lit = DTypeLit{someDType()};
    } else if (t == "Layout") {
      r.lit = EnumLit{"torch.strided"};
    } else if (t == "Device") {
      r.lit = EnumLit{"device(type='cpu')"};
    } else if (t == "MemoryFormat") {
      r.lit = EnumLit{chance(50) ? "torch.contiguous_format" : "torch.preserve_format"};
    } else if (sa.hasDefault) {
      r.lit = sa.defaultValue;
    }
    return r;
  }

  /// Perturbs one literal (keeps its kind mostly, as a user editing the graph would).
  void perturb(SArg &a, const SchemaArg *sa, int before) {
    Arg &v = a.lit;
    if (auto *i = std::get_if<int64_t>(&v)) {
      // Wrapping arithmetic: the mutator itself must not overflow on INT64_MIN/MAX.
      const uint64_t u = (uint64_t)*i;
      switch (below(4)) {
      case 0: *i = (int64_t)(u + 1); break;
      case 1: *i = (int64_t)(u - 1); break;
      case 2: *i = (int64_t)(0 - u - (chance(50) ? 1 : 0)); break;
      default: *i = smallInt();
      }
    } else if (auto *d = std::get_if<double>(&v)) {
      *d = chance(50) ? someFloat() : *d * (chance(50) ? -2.0 : 0.5);
    } else if (auto *b = std::get_if<bool>(&v)) {
      *b = !*b;
    } else if (auto *l = std::get_if<std::vector<int64_t>>(&v)) {
      switch (below(5)) {
      case 0: l->push_back((int64_t)below(5) - 1); break;
      case 1: if (!l->empty()) l->erase(l->begin() + (long)below(l->size())); break;
      case 2: std::reverse(l->begin(), l->end()); break;
      case 3: if (!l->empty()) (*l)[below(l->size())] = smallInt(); break;
      default: if (!l->empty()) { int64_t &x = (*l)[below(l->size())]; x = (int64_t)((uint64_t)x + (chance(50) ? 1 : -1)); }
      }
    } else if (auto *dl = std::get_if<std::vector<double>>(&v)) {
      if (!dl->empty()) (*dl)[below(dl->size())] = someFloat();
      else dl->push_back(someFloat());
    } else if (auto *bl = std::get_if<std::vector<bool>>(&v)) {
      if (!bl->empty()) { size_t k = below(bl->size()); (*bl)[k] = !(*bl)[k]; }
    } else if (auto *t = std::get_if<DTypeLit>(&v)) {
      t->dtype = someDType();
    } else if (sa) {
      a = generate(*sa, before); // None, strings, enums: a fresh value
    }
  }

  void mutateInput(Spec &s) {
    if (s.inputs.empty())
      return;
    SInput &in = s.inputs[below(s.inputs.size())];
    Shape &sh = in.type.shape;
    switch (below(8)) {
    case 0: if (!sh.empty()) { int64_t &d = sh[below(sh.size())]; d = std::max<int64_t>(0, d + (chance(50) ? 1 : -1)); } break;
    case 1: if (!sh.empty()) sh[below(sh.size())] = 1; break;
    case 2: if (sh.size() < 4) sh.insert(sh.begin() + (long)below(sh.size() + 1), 1 + (int64_t)below(4)); break;
    case 3: if (!sh.empty()) sh.erase(sh.begin() + (long)below(sh.size())); break;
    case 4: if (sh.size() >= 2) std::swap(sh[0], sh[sh.size() - 1]); break;
    case 5: in.type.dtype = someDType(); break;
    case 6: in.requiresGrad = !in.requiresGrad; break;
    default:
      in.role = in.role == InputRole::UserInput ? (chance(50) ? InputRole::Parameter : InputRole::Buffer)
                                                : InputRole::UserInput;
      in.fqn = in.role == InputRole::UserInput ? "" : in.name;
    }
    for (int64_t &d : sh)
      d = std::min<int64_t>(d, 8);
  }

  void changeOp(Spec &s, size_t j) {
    SNode &n = s.nodes[j];
    if (n.target == "getitem")
      return;
    const int before = (int)(s.inputs.size() + j);
    const OpDef *cur = OpRegistry::get().lookup(n.target);
    // Mostly an op of the same category (keeps the arguments meaningful).
    std::vector<const OpDef *> cands;
    if (cur && chance(70))
      for (const OpDef *d : ops())
        if (d->category == cur->category)
          cands.push_back(d);
    if (cands.empty())
      cands = ops();
    const OpDef *def = pick(cands);
    std::vector<int> oldRefs;
    for (const SArg &a : n.args)
      if (a.kind == SArg::Ref)
        oldRefs.push_back(a.ref);
    std::vector<SArg> args;
    size_t r = 0;
    for (const SchemaArg &sa : def->schema.args) {
      if (sa.isTensor() && r < oldRefs.size() && !(sa.optional && chance(30))) {
        SArg a;
        a.kind = SArg::Ref;
        a.ref = oldRefs[r++];
        args.push_back(a);
      } else {
        args.push_back(generate(sa, before));
      }
    }
    n.target = def->target();
    n.args = std::move(args);
  }

  void insertNode(Spec &s) {
    size_t pos = below(s.nodes.size() + 1);
    const int at = (int)(s.inputs.size() + pos);
    for (SNode &n : s.nodes)
      for (SArg &a : n.args) {
        if (a.kind == SArg::Ref && a.ref >= at)
          ++a.ref;
        for (int &r : a.refs)
          if (r >= at)
            ++r;
      }
    for (int &o : s.outputs)
      if (o >= at)
        ++o;
    const OpDef *def = pick(ops());
    SNode n{def->schema.name + "_fz" + std::to_string(below(1000)), def->target(), {}};
    for (const SchemaArg &sa : def->schema.args)
      n.args.push_back(generate(sa, at));
    s.nodes.insert(s.nodes.begin() + (long)pos, n);
    if (chance(50))
      s.outputs.push_back(at);
  }

  void deleteNode(Spec &s, size_t j) {
    const int at = (int)(s.inputs.size() + j);
    int subst = -1;
    for (const SArg &a : s.nodes[j].args)
      if (a.kind == SArg::Ref) {
        subst = a.ref;
        break;
      }
    auto fix = [&](int &r) {
      if (r == at)
        r = subst;
      else if (r > at)
        --r;
    };
    s.nodes.erase(s.nodes.begin() + (long)j);
    for (SNode &n : s.nodes)
      for (SArg &a : n.args) {
        if (a.kind == SArg::Ref)
          fix(a.ref);
        for (int &r : a.refs)
          fix(r);
      }
    for (int &o : s.outputs)
      fix(o);
  }

  void mutate(Spec &s) {
    const size_t nn = s.nodes.size();
    switch (below(12)) {
    case 0:
    case 1:
      mutateInput(s);
      break;
    case 2:
    case 3:
    case 4: { // an argument value
      if (!nn) break;
      size_t j = below(nn);
      SNode &n = s.nodes[j];
      const OpDef *def = OpRegistry::get().lookup(n.target);
      std::vector<size_t> lits;
      for (size_t i = 0; i < n.args.size(); ++i)
        if (n.args[i].kind == SArg::Lit)
          lits.push_back(i);
      if (lits.empty() || n.target == "getitem") break;
      size_t i = pick(lits);
      perturb(n.args[i], def && i < def->schema.args.size() ? &def->schema.args[i] : nullptr,
              (int)(s.inputs.size() + j));
      break;
    }
    case 5: { // an edge
      if (!nn) break;
      size_t j = below(nn);
      for (SArg &a : s.nodes[j].args)
        if (a.kind == SArg::Ref && chance(60)) {
          a.ref = someRef((int)(s.inputs.size() + j));
          break;
        } else if (a.kind == SArg::Refs && !a.refs.empty()) {
          a.refs[below(a.refs.size())] = someRef((int)(s.inputs.size() + j));
          break;
        }
      break;
    }
    case 6:
    case 7:
      if (nn) changeOp(s, below(nn));
      break;
    case 8:
      if (nn < 24) insertNode(s);
      break;
    case 9:
      if (nn > 1) deleteNode(s, below(nn));
      break;
    case 10: // outputs
      if (chance(50) && s.size() > 0)
        s.outputs.push_back((int)below(s.size()));
      else if (s.outputs.size() > 1)
        s.outputs.erase(s.outputs.begin() + (long)below(s.outputs.size()));
      break;
    default: // add or drop an input
      if (chance(50) || s.inputs.size() < 2) {
        SInput in{"in_fz" + std::to_string(below(1000)), {someDType(), {}}, InputRole::UserInput, "", chance(50)};
        for (int k = 0, r = (int)below(4); k < r; ++k)
          in.type.shape.push_back(1 + (int64_t)below(5));
        // Appended last among the inputs: every node reference moves up by one.
        for (SNode &n : s.nodes)
          for (SArg &a : n.args) {
            if (a.kind == SArg::Ref && a.ref >= (int)s.inputs.size())
              ++a.ref;
            for (int &r : a.refs)
              if (r >= (int)s.inputs.size())
                ++r;
          }
        for (int &o : s.outputs)
          if (o >= (int)s.inputs.size())
            ++o;
        s.inputs.push_back(in);
      } else {
        int k = (int)below(s.inputs.size());
        auto fix = [&](int &r) {
          if (r == k)
            r = -1;
          else if (r > k)
            --r;
        };
        s.inputs.erase(s.inputs.begin() + k);
        for (SNode &n : s.nodes)
          for (SArg &a : n.args) {
            if (a.kind == SArg::Ref)
              fix(a.ref);
            for (int &r : a.refs)
              fix(r);
          }
        for (int &o : s.outputs)
          fix(o);
        s.mutatedInputs.clear();
      }
    }
  }
};

//===-- Running and comparing ----------------------------------------------===//

uint64_t fnv1a(const uint8_t *data, size_t size) {
  uint64_t h = 1469598103934665603ull;
  for (size_t i = 0; i < size; ++i)
    h = (h ^ data[i]) * 1099511628211ull;
  return h;
}

rt::Tensor toRuntime(const RefTensor &r, const aotc_tensor_desc &d) {
  rt::Tensor t = rt::Tensor::like(d);
  for (int64_t i = 0; i < t.numel(); ++i) {
    double v = r.data[i];
    switch (d.dtype) {
    case AOTC_F32: t.data<float>()[i] = (float)v; break;
    case AOTC_F64: t.data<double>()[i] = v; break;
    case AOTC_I64: t.data<int64_t>()[i] = (int64_t)v; break;
    case AOTC_I32: t.data<int32_t>()[i] = (int32_t)v; break;
    default: t.data<uint8_t>()[i] = (uint8_t)v; break; // bool, u8
    }
  }
  return t;
}

/// The conformance comparison (test/conformance/run_conformance.py `compare`).
void compare(const rt::Tensor &a, const RefTensor &r, const std::string &what, const std::string &text) {
  if (a.shape() != r.shape || a.numel() != r.numel())
    fuzz::bug("JIT vs reference: " + what + " is " + a.typeString() + ", the reference has shape " +
              shapeStr(r.shape) + "\n--- program ---\n" + text);
  const bool floating = isFloating(r.dtype);
  double scale = 0;
  for (double v : r.data)
    if (std::isfinite(v))
      scale = std::max(scale, std::fabs(v));
  // The conformance suite's f64 tolerances, plus an absolute floor: in a composed graph
  // a value can be an exact zero computed as a sum of O(1) terms that cancel (a gradient
  // through mean - mean), leaving rounding noise of ~1e-16 on both sides that no
  // tolerance relative to the (tiny) result covers. A real miscompile is far above it.
  const double rtol = 1e-10, atol = 1e-12, kNoiseFloor = 1e-9;
  for (int64_t i = 0; i < a.numel(); ++i) {
    double x = a.at(i), y = r.data[i];
    bool bad;
    if (!floating)
      // RefEval holds integers as doubles, exact up to 2^53 (RefEval.h): beyond that it
      // cannot judge int64 arithmetic, which wraps (add.Scalar(x, 2^62, alpha=4)).
      bad = std::fabs(y) <= 9007199254740992.0 && x != y;
    else if (std::isnan(x) || std::isnan(y))
      bad = !(std::isnan(x) && std::isnan(y));
    else if (std::isinf(x) || std::isinf(y))
      bad = x != y;
    else
      bad = std::fabs(x - y) > rtol * std::fabs(y) + atol * scale + kNoiseFloor;
    if (bad) {
      char buf[160];
      std::snprintf(buf, sizeof buf, "element %lld: %.17g vs the reference's %.17g", (long long)i, x, y);
      fuzz::bug("JIT vs reference: " + what + " " + buf + "\n--- program ---\n" + text);
    }
  }
}

void jitCheck(const Program &joint, const Program &partitioned, uint64_t seed) {
  const std::string text = printProgram(joint);
  Program f = partitioned.clone();
  driver::convertF32ToF64(f);
  CodegenOptions cg;
  cg.name = f.name;
  Artifact art;
  KernelProgram kp = planProgram(f, cg.fusion);
  emitObject(kp, cg, art);
  driver::LoadedObject obj(art.object, f.name);
  const aotc_program &prog = obj.program();

  // Primal values (placeholders of the joint graph that are not tangents), then ones.
  std::mt19937_64 rng(seed);
  std::vector<RefTensor> refIn;
  std::vector<const Node *> primals;
  for (Node *ph : joint.forward.placeholders()) {
    if (ph->role == InputRole::Tangent) {
      refIn.push_back(RefTensor(ph->type().dtype, ph->type().shape, 1.0));
      continue;
    }
    primals.push_back(ph);
    refIn.push_back(randomTensor(ph->type(), rng, isFloating(ph->type().dtype) ? -1.0 : 0.0,
                                 isFloating(ph->type().dtype) ? 1.0 : 2.0));
  }
  if ((int)primals.size() != prog.num_inputs)
    fuzz::bug("JIT: the object has " + std::to_string(prog.num_inputs) + " inputs, the joint graph " +
              std::to_string(primals.size()) + " primals\n--- program ---\n" + text);
  std::vector<rt::Tensor> inputs;
  for (int i = 0; i < prog.num_inputs; ++i) {
    const Node *ph = primals[i];
    const std::string expect = ph->fqn.empty() ? ph->name : ph->fqn;
    if (expect != prog.inputs[i].name)
      fuzz::bug("JIT: input " + std::to_string(i) + " is '" + prog.inputs[i].name + "', the joint graph's '" +
                expect + "'\n--- program ---\n" + text);
    inputs.push_back(toRuntime(refIn[i], prog.inputs[i]));
  }
  std::vector<std::unique_ptr<rt::Tensor>> tangents = driver::bindTangents(prog, nullptr, "");

  std::vector<rt::Tensor> outs, grads;
  std::string jitError;
  try {
    rt::DifferentiableFunction fn(prog);
    std::vector<const rt::Tensor *> in, tan;
    for (const rt::Tensor &t : inputs)
      in.push_back(&t);
    for (const auto &t : tangents)
      tan.push_back(t.get());
    auto fwd = fn.forward(in);
    outs = std::move(fwd.outputs);
    if (prog.num_grads > 0)
      grads = fn.backward(fwd.state, tan);
  } catch (const rt::RuntimeError &e) {
    jitError = e.what();
  }
  std::vector<RefTensor> ref;
  std::string refError;
  try {
    ref = evaluate(joint.forward, refIn);
  } catch (const Error &e) {
    if (e.kind() != Error::Kind::User)
      fuzz::bug(std::string("reference evaluator: ") + e.what() + "\n--- program ---\n" + text);
    refError = e.what();
  }
  if (jitError.empty() != refError.empty())
    fuzz::bug("JIT vs reference: " +
              (jitError.empty() ? "only the reference rejects the inputs: " + refError
                                : "only the JIT rejects the inputs: " + jitError) +
              "\n--- program ---\n" + text);
  if (!jitError.empty())
    return;
  if ((int)outs.size() != joint.numForwardOutputs ||
      ref.size() != (size_t)joint.numForwardOutputs + joint.gradOf.size() ||
      grads.size() != joint.gradOf.size())
    fuzz::bug("JIT vs reference: output counts differ\n--- program ---\n" + text);
  for (size_t i = 0; i < outs.size(); ++i)
    compare(outs[i], ref[i], "output " + std::to_string(i), text);
  for (size_t j = 0; j < grads.size(); ++j)
    compare(grads[j], ref[joint.numForwardOutputs + j], "gradient of '" + joint.gradOf[j] + "'", text);
}

} // namespace

extern "C" size_t LLVMFuzzerCustomMutator(uint8_t *data, size_t size, size_t maxSize,
                                          unsigned int seed) {
  Mutator m(seed);
  Program p;
  bool parsed = false;
  try {
    p = parseProgram(std::string(reinterpret_cast<const char *>(data), size), "fuzz.txt");
    parsed = p.stage == "capture";
  } catch (const Error &) {
  }
  if (!parsed || m.chance(6))
    return LLVMFuzzerMutate(data, size, maxSize);
  Spec s = toSpec(p);
  for (int k = 0, n = 1 + (int)m.below(3); k < n; ++k)
    m.mutate(s);
  Program q;
  std::string out;
  try {
    if (!rebuild(s, q))
      return LLVMFuzzerMutate(data, size, maxSize);
    out = printProgram(q);
  } catch (const Error &) {
    return LLVMFuzzerMutate(data, size, maxSize);
  }
  if (out.size() > maxSize)
    return LLVMFuzzerMutate(data, size, maxSize);
  std::memcpy(data, out.data(), out.size());
  return out.size();
}

/// Counts for the campaign report, printed at exit ("aotc fuzz pipeline: ...").
struct Stats {
  uint64_t inputs = 0, parsed = 0, staged = 0, compiled = 0, jitChecked = 0;
  ~Stats() {
    std::fprintf(stderr,
                 "aotc fuzz pipeline: inputs=%llu parsed=%llu through_partition=%llu compiled=%llu "
                 "jit_checked=%llu\n",
                 (unsigned long long)inputs, (unsigned long long)parsed, (unsigned long long)staged,
                 (unsigned long long)compiled, (unsigned long long)jitChecked);
  }
} stats;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  ++stats.inputs;
  static const uint64_t every = [] {
    const char *e = std::getenv("AOTC_FUZZ_JIT_EVERY");
    return e && std::atoll(e) > 0 ? (uint64_t)std::atoll(e) : 100;
  }();
  Program p;
  if (!fuzz::accepted("pipeline (parse)", [&] {
        p = parseProgram(std::string(reinterpret_cast<const char *>(data), size), "fuzz.txt");
        fuzz::prepareStartFrom(p);
        checkTensorBytes(p, kMaxValueBytes);
      }))
    return 0;
  ++stats.parsed;
  Program joint;
  bool haveJoint = false;
  bool ok = fuzz::accepted("pipeline (stages)", [&] {
    do {
      if (p.stage == "joint") {
        joint = p.clone();
        haveJoint = true;
      }
    } while (fuzz::runNextStage(p));
    checkTensorBytes(p, kMaxValueBytes);
  });
  if (!ok)
    return 0;
  ++stats.staged;
  CodegenOptions cg;
  cg.name = p.name;
  Artifact art;
  if (!fuzz::accepted("pipeline (codegen)", [&] {
        KernelProgram kp = planProgram(p, cg.fusion);
        emitObject(kp, cg, art);
      }))
    return 0;
  ++stats.compiled;
  const uint64_t h = fnv1a(data, size);
  if (haveJoint && h % every == 0) {
    ++stats.jitChecked;
    fuzz::accepted("pipeline (JIT check)", [&] { jitCheck(joint, p, h); });
  }
  return 0;
}
