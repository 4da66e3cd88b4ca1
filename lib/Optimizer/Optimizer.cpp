//===- Optimizer.cpp - The update and accumulate graphs of a train step ---===//
//
// This file implements Optimizer.h: parsing --optimizer, the state-area layout and the two
// graphs that run after the backward (docs/stage-optimizer.md).
//
// The update graph follows torch.optim's single-tensor code of torch 2.15 op by op (what a
// CPU run of torch.optim.SGD/Adam/AdamW executes when foreach is not chosen), so the f32
// roundings are torch's: run-time scalars (lr, betas, ...) are f64 placeholders; the scalars
// torch computes in Python floats (1 - beta1 ** step, lr / bias_correction1, ...) are computed
// here in f64 too, then rounded to the parameter's dtype where torch passes a Python float to
// an f32 tensor op. Every placeholder that is updated in place (parameter, state) is read only
// by nodes that come before its new value's node, the order the codegen needs for an output
// written into its own input's buffer (Plan.cpp checks it).
//===----------------------------------------------------------------------===//
#include "aotc/Optimizer.h"

#include "aotc/Diagnostics.h"
#include "aotc/OpRegistry.h"
#include "aotc/TextIR.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <map>
#include <sstream>

namespace aotc {

const char *optimizerName(OptimizerKind k) {
  switch (k) {
  case OptimizerKind::SGD: return "sgd";
  case OptimizerKind::Adam: return "adam";
  case OptimizerKind::AdamW: return "adamw";
  }
  return "?";
}

namespace {

/// Shortest text that reads back as the same double ("0.001", "1e-08").
std::string num(double v) {
  char buf[64];
  for (int prec = 1; prec <= 17; ++prec) {
    std::snprintf(buf, sizeof buf, "%.*g", prec, v);
    if (std::strtod(buf, nullptr) == v) break;
  }
  return buf;
}

std::string trimmed(const std::string &s) {
  size_t b = s.find_first_not_of(" \t");
  if (b == std::string::npos) return "";
  return s.substr(b, s.find_last_not_of(" \t") - b + 1);
}

/// "lr=1e-3,betas=(0.9,0.99)" -> {"lr=1e-3", "betas=(0.9,0.99)"}: commas inside brackets
/// belong to the value.
std::vector<std::string> splitTopLevel(const std::string &s) {
  std::vector<std::string> items(1);
  int depth = 0;
  for (char c : s) {
    if (c == '(' || c == '[') ++depth;
    if (c == ')' || c == ']') depth = std::max(0, depth - 1);
    if (c == ',' && depth == 0) items.emplace_back();
    else items.back() += c;
  }
  return items;
}

std::vector<std::string> keysOf(OptimizerKind k) {
  if (k == OptimizerKind::SGD) return {"lr", "momentum", "dampening", "weight_decay", "nesterov", "maximize"};
  return {"lr", "beta1", "beta2", "eps", "weight_decay", "amsgrad", "maximize"};
}

} // namespace

std::string OptimizerSpec::str() const {
  std::string s = optimizerName(kind);
  s += ":lr=" + num(lr);
  if (kind == OptimizerKind::SGD) {
    s += ",momentum=" + num(momentum) + ",dampening=" + num(dampening) + ",weight_decay=" + num(weightDecay) +
         ",nesterov=" + (nesterov ? "1" : "0");
  } else {
    s += ",beta1=" + num(beta1) + ",beta2=" + num(beta2) + ",eps=" + num(eps) + ",weight_decay=" + num(weightDecay) +
         ",amsgrad=" + (amsgrad ? "1" : "0");
  }
  s += std::string(",maximize=") + (maximize ? "1" : "0");
  return s;
}

OptimizerSpec parseOptimizerSpec(const std::string &text) {
  const std::string opt = "--optimizer=" + text;
  OptimizerSpec s;
  std::string name = text.substr(0, text.find(':'));
  if (name == "sgd") s.kind = OptimizerKind::SGD;
  else if (name == "adam") s.kind = OptimizerKind::Adam;
  else if (name == "adamw") { s.kind = OptimizerKind::AdamW; s.weightDecay = 1e-2; }
  else userError(opt + ": unknown optimizer '" + name + "' (known: sgd, adam, adamw)");
  std::vector<std::string> keys = keysOf(s.kind);
  DiagnosticList diags;
  std::map<std::string, double> seen;
  auto setValue = [&](const std::string &key, const std::string &v) {
    std::string t = trimmed(v);
    double d;
    if (t == "True" || t == "true") d = 1; // torch's Python spelling of the flags
    else if (t == "False" || t == "false") d = 0;
    else {
      char *end = nullptr;
      d = std::strtod(t.c_str(), &end);
      if (t.empty() || *end != '\0' || !std::isfinite(d)) {
        diags.add("error: " + opt + ": '" + key + "=" + t + "' is not a finite number");
        return;
      }
    }
    if (seen.count(key)) diags.add("error: " + opt + ": '" + key + "' given twice");
    seen[key] = d;
  };
  if (text.size() > name.size()) {
    for (const std::string &item : splitTopLevel(text.substr(name.size() + 1))) {
      size_t eq = item.find('=');
      std::string key = trimmed(item.substr(0, eq));
      bool betas = key == "betas" && s.kind != OptimizerKind::SGD;
      if (!betas && std::find(keys.begin(), keys.end(), key) == keys.end()) {
        std::string known;
        for (auto &k : keys) known += (known.empty() ? "" : ", ") + k;
        if (s.kind != OptimizerKind::SGD) known += ", betas=(beta1,beta2)";
        diags.add("error: " + opt + ": unknown key '" + key + "' for " + name + " (known: " + known + ")");
        continue;
      }
      if (eq == std::string::npos) {
        diags.add("error: " + opt + ": '" + key + "' needs a value (" + key + "=...)");
        continue;
      }
      std::string v = trimmed(item.substr(eq + 1));
      if (!betas) {
        setValue(key, v);
        continue;
      }
      // torch's spelling: betas=(0.9, 0.999), also [..] or without brackets.
      if (v.size() >= 2 && ((v.front() == '(' && v.back() == ')') || (v.front() == '[' && v.back() == ']')))
        v = v.substr(1, v.size() - 2);
      size_t comma = v.find(',');
      if (comma == std::string::npos || v.find(',', comma + 1) != std::string::npos) {
        diags.add("error: " + opt + ": 'betas=" + item.substr(eq + 1) + "' must be two numbers, betas=(beta1,beta2)");
        continue;
      }
      setValue("beta1", v.substr(0, comma));
      setValue("beta2", v.substr(comma + 1));
    }
  }
  auto flag = [&](const char *key, bool &out) {
    if (!seen.count(key)) return;
    double d = seen[key];
    if (d != 0 && d != 1) diags.add("error: " + opt + ": '" + key + "' must be 0 or 1, got " + num(d));
    out = d == 1;
  };
  auto val = [&](const char *key, double &out) {
    if (seen.count(key)) out = seen[key];
  };
  val("lr", s.lr);
  val("momentum", s.momentum);
  val("dampening", s.dampening);
  val("weight_decay", s.weightDecay);
  val("beta1", s.beta1);
  val("beta2", s.beta2);
  val("eps", s.eps);
  flag("nesterov", s.nesterov);
  flag("amsgrad", s.amsgrad);
  flag("maximize", s.maximize);
  // torch.optim's checks (sgd.py, adam.py).
  if (s.lr < 0) diags.add("error: " + opt + ": invalid learning rate " + num(s.lr) + " (must be >= 0)");
  if (s.weightDecay < 0) diags.add("error: " + opt + ": invalid weight_decay " + num(s.weightDecay) + " (must be >= 0)");
  if (s.kind == OptimizerKind::SGD) {
    if (s.momentum < 0) diags.add("error: " + opt + ": invalid momentum " + num(s.momentum) + " (must be >= 0)");
    if (s.nesterov && (s.momentum <= 0 || s.dampening != 0))
      diags.add("error: " + opt + ": nesterov momentum requires a momentum > 0 and zero dampening");
  } else {
    if (s.eps < 0) diags.add("error: " + opt + ": invalid eps " + num(s.eps) + " (must be >= 0)");
    if (!(s.beta1 >= 0 && s.beta1 < 1)) diags.add("error: " + opt + ": invalid beta1 " + num(s.beta1) + " (must be in [0, 1))");
    if (!(s.beta2 >= 0 && s.beta2 < 1)) diags.add("error: " + opt + ": invalid beta2 " + num(s.beta2) + " (must be in [0, 1))");
  }
  // One problem is its own message; several end with their count.
  diags.throwIfAny(diags.size() > 1 ? opt + ": " + std::to_string(diags.size()) + " problems" : "");
  return s;
}

namespace {

/// Builds nodes at the end of one graph (schema defaults and types by the registry).
struct GraphBuilder {
  Graph &g;
  Node *call(const std::string &base, const std::string &target, std::vector<Arg> args,
             std::vector<std::pair<std::string, Arg>> kwargs = {}) {
    return buildCall(g, g.uniqueName(base), target, args, kwargs);
  }
  Node *add(Node *a, Node *b) { return call("add", "aten.add.Tensor", {a, b}); }
  Node *sub(Node *a, Node *b) { return call("sub", "aten.sub.Tensor", {a, b}); }
  Node *mul(Node *a, Node *b) { return call("mul", "aten.mul.Tensor", {a, b}); }
  Node *div(Node *a, Node *b) { return call("div", "aten.div.Tensor", {a, b}); }
  Node *neg(Node *a) { return call("neg", "aten.neg.default", {a}); }
  Node *sqrt(Node *a) { return call("sqrt", "aten.sqrt.default", {a}); }
  Node *where(Node *c, Node *a, Node *b) { return call("where", "aten.where.self", {c, a, b}); }
  Node *cast(Node *a, DType dt) {
    if (a->type().dtype == dt) return a;
    return call("to", "aten._to_copy.default", {a}, {{"dtype", DTypeLit{dt}}});
  }
  /// 1 - x for a 0-d f64 x (torch's Python float arithmetic).
  Node *oneMinus(Node *x) { return call("rsub", "aten.rsub.Scalar", {x, 1.0}); }
  Node *constant(double v, DType dt) {
    return call("const", "aten.scalar_tensor.default", {v}, {{"dtype", DTypeLit{dt}}});
  }
  /// |x| < inf: false for NaN and +-inf.
  Node *isFinite(Node *x) {
    return call("isfinite", "aten.lt.Scalar", {call("abs", "aten.abs.default", {x}), INFINITY});
  }
  /// The sum of every element: a full reduction, which the CPU schedule folds in chunks on the
  /// thread team (KernelSchedule::splitRows; it replaced stop 37's column-sums-first form).
  Node *sumAll(Node *x) { return call("sum", "aten.sum.default", {x}); }
};

std::string ident(const std::string &fqn) {
  std::string s;
  for (char c : fqn) s += (std::isalnum((unsigned char)c) ? c : '_');
  return s;
}


} // namespace

TrainStep buildTrainStep(const Program &p, const OptimizerSpec &spec) {
  TrainStep t;
  t.spec = spec;
  auto fph = p.forward.placeholders();
  auto fouts = p.forward.outputs();
  const int nUser = p.numForwardOutputs;
  if (nUser < 1 || fouts.empty() || fouts[0]->type().rank() != 0 || !isFloating(fouts[0]->type().dtype) ||
      !p.outputHasTangent(0, fouts[0]->type().dtype))
    userError(p.origin, "--optimizer: the program's first output must be the loss, a 0-d floating tensor; it is " +
                            (fouts.empty() ? std::string("missing") : "'" + fouts[0]->name + "' (" + fouts[0]->type().str() + ")"));
  // Gradients: grads[j] belongs to input gradOf[j]; parameters are updated, other inputs
  // with a gradient (a --requires-grad user input) are not, as torch.optim sees parameters only.
  std::vector<int> gradOfParam(fph.size(), -1);
  for (size_t j = 0; j < p.gradOf.size(); ++j)
    for (size_t i = 0; i < fph.size(); ++i)
      if (fph[i]->name == p.gradOf[j] && fph[i]->role == InputRole::Parameter) gradOfParam[i] = (int)j;
  for (size_t i = 0; i < fph.size(); ++i)
    if (gradOfParam[i] >= 0) t.params.push_back((int)i);
  if (t.params.empty()) userError(p.origin, "--optimizer: no parameter has a gradient (all frozen?)");
  const bool zero = spec.zeroWorld > 0;
  if (zero)
    for (int i : t.params)
      if (fph[i]->type().dtype != fph[t.params[0]]->type().dtype)
        userError(p.origin, "--data-parallel=zero1: every parameter must have one dtype (the shard is one flat "
                            "tensor); '" + fph[t.params[0]]->fqn + "' is " + dtypeTorchName(fph[t.params[0]]->type().dtype) +
                            ", '" + fph[i]->fqn + "' " + dtypeTorchName(fph[i]->type().dtype));

  // Hyperparameters (run-time, abi.h hyper[]); weight decay and momentum only when compiled in.
  const bool sgd = spec.kind == OptimizerKind::SGD;
  const bool wd = spec.weightDecay != 0, mom = sgd && spec.momentum != 0;
  auto hyper = [&](const char *name, double v, double lo, double hi, bool open) {
    t.hypers.push_back(HyperParam{name, v, lo, hi, open});
    return (int)t.hypers.size() - 1;
  };
  const double kNoMax = -1;
  int hLr = hyper("lr", spec.lr, 0, kNoMax, false);
  int hMom = -1, hDamp = -1, hB1 = -1, hB2 = -1, hEps = -1, hWd = -1, hMax = -1;
  if (mom) {
    // Compiled with momentum: it must stay > 0 (torch keeps no buffer at 0).
    hMom = hyper("momentum", spec.momentum, 0, kNoMax, false);
    hDamp = hyper("dampening", spec.dampening, -INFINITY, INFINITY, false);
  }
  if (!sgd) {
    hB1 = hyper("beta1", spec.beta1, 0, 1, true);
    hB2 = hyper("beta2", spec.beta2, 0, 1, true);
    hEps = hyper("eps", spec.eps, 0, kNoMax, false);
  }
  if (wd) hWd = hyper("weight_decay", spec.weightDecay, 0, kNoMax, false);
  if (spec.clipGradNorm > 0) hMax = hyper("max_norm", spec.clipGradNorm, 0, kNoMax, false);
  // Data parallel: the reduced sum times grad_scale / world size (DDP's mean at 1).
  if (spec.dataParallel) hyper("grad_scale", 1.0, 0, kNoMax, false);

  // The state area.
  int64_t off = 0;
  auto state = [&](const std::string &name, TensorType ty, StateKind kind, int param, const std::string &key) {
    StateTensor s{name, std::move(ty), kind, param, -1, key, off};
    off += alignUp(std::max<int64_t>(s.type.bytes(), 1), 64);
    t.states.push_back(std::move(s));
    return (int)t.states.size() - 1;
  };
  std::vector<std::vector<int>> optState(fph.size());
  std::vector<std::string> keys;
  if (mom) keys = {"momentum_buffer"};
  if (!sgd) keys = {"exp_avg", "exp_avg_sq"};
  if (!sgd && spec.amsgrad) keys.push_back("max_exp_avg_sq");
  // ZeRO-1: one flat shard per key instead of one tensor per parameter.
  std::vector<int> shardState;
  if (zero) {
    t.shardDType = fph[t.params[0]]->type().dtype;
    std::vector<int64_t> numels;
    for (int i : t.params) numels.push_back(fph[i]->type().numel());
    t.shardElems = zeroShardElems(numels, itemSize(t.shardDType), spec.zeroWorld);
    const TensorType flat{t.shardDType, {t.shardElems}};
    for (const std::string &k : keys) shardState.push_back(state("optimizer.shard." + k, flat, StateKind::Shard, -1, k));
  } else {
    for (int i : t.params)
      for (const std::string &k : keys)
        optState[i].push_back(state("optimizer.state." + fph[i]->fqn + "." + k, fph[i]->type(), StateKind::Optimizer, i, k));
  }
  const int sStep = state("optimizer.step", TensorType{DType::F32, {}}, StateKind::Step, -1, "");
  std::vector<int> accum(fph.size(), -1);
  int sCount = -1;
  if (spec.accumulate) {
    for (int i : t.params) accum[i] = state("accum." + fph[i]->fqn, fph[i]->type(), StateKind::Accum, i, "");
    sCount = state("accum.count", TensorType{DType::F32, {}}, StateKind::AccumCount, -1, "");
  }
  const int sNorm = state("status.grad_norm", TensorType{fouts[0]->type().dtype, {}}, StateKind::Status, -1, "");
  const int sBad = state("status.nonfinite", TensorType{DType::Bool, {}}, StateKind::Status, -1, "");
  const int sDpScale =
      spec.dataParallel ? state("dp.grad_scale", TensorType{DType::F64, {}}, StateKind::Status, -1, "") : -1;
  const int sSumsq = zero ? state("dp.sumsq", TensorType{fouts[0]->type().dtype, {}}, StateKind::Status, -1, "") : -1;
  for (int k = 1; k < nUser; ++k)
    if (p.outputHasTangent(k, fouts[k]->type().dtype)) {
      int s = state("zeros." + fouts[k]->name, fouts[k]->type(), StateKind::Zeros, -1, "");
      t.states[s].output = k;
    }
  t.stateBytes = off;

  using K = TrainBinding::Kind;
  // ---- accumulate: accum = count > 0 ? accum + grad : grad; count += 1.
  if (spec.accumulate) {
    GraphBuilder b{t.accumulate};
    std::vector<Node *> outs;
    Node *count = t.accumulate.addPlaceholder("accum_count", t.states[sCount].type, InputRole::UserInput);
    t.accumInputs.push_back({K::State, sCount});
    std::vector<std::pair<Node *, Node *>> ga;
    for (int i : t.params) {
      const std::string id = ident(fph[i]->fqn);
      ga.push_back({t.accumulate.addPlaceholder("grad_" + id, fph[i]->type(), InputRole::UserInput),
                    t.accumulate.addPlaceholder("accum_" + id, fph[i]->type(), InputRole::UserInput)});
      t.accumInputs.push_back({K::Grad, gradOfParam[i]});
      t.accumInputs.push_back({K::State, accum[i]});
    }
    Node *any = b.call("gt", "aten.gt.Scalar", {count, 0.0});
    for (size_t k = 0; k < ga.size(); ++k) {
      outs.push_back(b.where(any, b.add(ga[k].second, ga[k].first), ga[k].first));
      t.accumOutputs.push_back({K::State, accum[t.params[k]]});
    }
    outs.push_back(b.call("add", "aten.add.Scalar", {count, 1.0}));
    t.accumOutputs.push_back({K::State, sCount});
    t.accumulate.setOutputs(outs);
  }

  // ---- update.
  Graph &g = t.update;
  GraphBuilder b{g};
  auto ph = [&](const std::string &name, const TensorType &ty, TrainBinding bind) {
    t.updateInputs.push_back(bind);
    return g.addPlaceholder(name, ty, InputRole::UserInput);
  };
  std::vector<Node *> H(t.hypers.size());
  for (size_t h = 0; h < t.hypers.size(); ++h)
    H[h] = ph(t.hypers[h].name, TensorType{DType::F64, {}}, {K::Hyper, (int)h});
  Node *loss = ph("loss", fouts[0]->type(), {K::Loss, 0});
  Node *step = ph("step", t.states[sStep].type, {K::State, sStep});
  Node *count = spec.accumulate ? ph("accum_count", t.states[sCount].type, {K::State, sCount}) : nullptr;
  // What is updated: each parameter, or (ZeRO-1) this rank's flat shard of all of them.
  struct P {
    TrainBinding bind;
    Node *p, *g, *acc;
    std::vector<Node *> st;
    std::vector<TrainBinding> stBind;
  };
  std::vector<P> ps;
  Node *sumsq = nullptr;
  if (zero) {
    sumsq = ph("dp_sumsq", t.states[sSumsq].type, {K::State, sSumsq});
    const TensorType flat{t.shardDType, {t.shardElems}};
    P q{{K::Staging, 0}, ph("param_shard", flat, {K::Staging, 0}), ph("grad_shard", flat, {K::Staging, 1}), nullptr, {},
        {}};
    for (int s : shardState) {
      q.st.push_back(ph(t.states[s].stateKey + "_shard", flat, {K::State, s}));
      q.stBind.push_back({K::State, s});
    }
    ps.push_back(q);
  }
  for (int i : zero ? std::vector<int>{} : t.params) {
    const std::string id = ident(fph[i]->fqn);
    P q{{K::Param, i}, ph("param_" + id, fph[i]->type(), {K::Param, i}),
        ph("grad_" + id, fph[i]->type(), {K::Grad, gradOfParam[i]}),
        spec.accumulate && !spec.dataParallel ? ph("accum_" + id, fph[i]->type(), {K::State, accum[i]}) : nullptr,
        {}, {}};
    for (int s : optState[i]) {
      q.st.push_back(ph(t.states[s].stateKey + "_" + id, t.states[s].type, {K::State, s}));
      q.stBind.push_back({K::State, s});
    }
    ps.push_back(q);
  }
  std::vector<Node *> outs;
  auto out = [&](Node *n, TrainBinding bind) {
    outs.push_back(n);
    t.updateOutputs.push_back(bind);
  };
  // The gradient of this step: with micro-batches, the accumulated sum plus this one's.
  // Data parallel: the train step added the accumulators before the all-reduce; the reduced
  // sum is scaled by dp.grad_scale (grad_scale / world size, written by the train step).
  std::vector<Node *> grads;
  if (spec.dataParallel) {
    Node *scale = ph("dp_grad_scale", t.states[sDpScale].type, {K::State, sDpScale});
    for (P &q : ps) grads.push_back(b.mul(q.g, b.cast(scale, q.g->type().dtype)));
  } else {
    Node *any = count ? b.call("gt", "aten.gt.Scalar", {count, 0.0}) : nullptr;
    for (P &q : ps) grads.push_back(any ? b.where(any, b.add(q.acc, q.g), q.g) : q.g);
  }
  // Total 2-norm as torch.nn.utils.get_total_norm: the norm of the per-gradient norms.
  const DType ldt = fouts[0]->type().dtype;
  Node *total = nullptr;
  if (zero) {
    // ZeRO-1: the shardNorm graph's sum of squares of this shard, all-reduced by the train
    // step before this graph runs (a sum in another order than the per-tensor norms below).
    total = b.sqrt(sumsq);
    GraphBuilder nb{t.shardNorm};
    Node *g = t.shardNorm.addPlaceholder("grad_shard", TensorType{t.shardDType, {t.shardElems}}, InputRole::UserInput);
    Node *sc = t.shardNorm.addPlaceholder("dp_grad_scale", t.states[sDpScale].type, InputRole::UserInput);
    t.normInputs = {{K::Staging, 1}, {K::State, sDpScale}};
    Node *gs = nb.mul(g, nb.cast(sc, g->type().dtype));
    t.shardNorm.setOutputs({nb.cast(nb.sumAll(nb.mul(gs, gs)), ldt)});
    t.normOutputs = {{K::State, sSumsq}};
    t.shardNorm.verify();
  } else {
    for (Node *gr : grads) {
      Node *n = b.sqrt(b.cast(b.sumAll(b.mul(gr, gr)), ldt));
      Node *sq = b.mul(n, n);
      total = total ? b.add(total, sq) : sq;
    }
    total = b.sqrt(total);
  }
  if (hMax >= 0) {
    // clip_coef = max_norm / (total_norm + 1e-6), clamped to 1, multiplies every gradient.
    Node *coef = b.div(b.cast(H[hMax], ldt), b.call("add", "aten.add.Scalar", {total, 1e-6}));
    coef = b.call("clamp_max", "aten.clamp_max.default", {coef, 1.0});
    for (Node *&gr : grads) gr = b.mul(gr, b.cast(coef, gr->type().dtype));
  }
  // Data parallel: the all-reduced norm alone, the same on every rank, so that all ranks skip
  // (or not) together; a rank's own loss differs (a non-finite loss gives non-finite gradients).
  Node *bad = spec.dataParallel
                  ? b.call("logical_not", "aten.logical_not.default", {b.isFinite(total)})
                  : b.call("logical_not", "aten.logical_not.default",
                           {b.call("logical_and", "aten.logical_and.default", {b.isFinite(loss), b.isFinite(total)})});
  // With --skip-nonfinite a non-finite step keeps every value (GradScaler skips optimizer.step).
  auto keep = [&](Node *fresh, Node *old) { return spec.skipNonfinite ? b.where(bad, old, fresh) : fresh; };
  // SGD's momentum buffer starts as the gradient (torch: buf is None on the first step).
  Node *first = mom ? b.call("eq", "aten.eq.Scalar", {step, 0.0}) : nullptr;
  Node *lr = H[hLr];
  // Scalars in f64 (torch's Python floats), then as torch hands them to f32 ops.
  Node *bc1 = nullptr, *stepSizeNeg = nullptr, *bc2Sqrt = nullptr, *lerpW = nullptr, *oneMinusB2 = nullptr,
       *decay = nullptr;
  if (!sgd) {
    // torch's step_t += 1, then step = step_t.item() (a Python float).
    Node *step64 = b.cast(b.call("add", "aten.add.Scalar", {step, 1.0}), DType::F64);
    bc1 = b.oneMinus(b.call("pow", "aten.pow.Tensor_Tensor", {H[hB1], step64}));
    Node *bc2 = b.oneMinus(b.call("pow", "aten.pow.Tensor_Tensor", {H[hB2], step64}));
    stepSizeNeg = b.neg(b.div(lr, bc1));
    bc2Sqrt = b.sqrt(bc2);
    lerpW = b.oneMinus(H[hB1]);
    oneMinusB2 = b.oneMinus(H[hB2]);
    if (wd && spec.kind == OptimizerKind::AdamW) decay = b.oneMinus(b.mul(lr, H[hWd]));
  }
  for (size_t k = 0; k < ps.size(); ++k) {
    P &q = ps[k];
    const DType dt = q.p->type().dtype;
    auto S = [&](Node *scalar) { return b.cast(scalar, dt); };
    Node *gr = grads[k];
    if (spec.maximize) gr = b.neg(gr);
    Node *param = q.p;
    if (sgd) {
      if (wd) gr = b.add(gr, b.mul(param, S(H[hWd])));  // grad.add(param, alpha=weight_decay)
      if (mom) {
        // buf = grad on the first step, else buf * momentum + grad * (1 - dampening).
        Node *buf = q.st[0];
        Node *upd = b.add(b.mul(buf, S(H[hMom])), b.mul(gr, S(b.oneMinus(H[hDamp]))));
        Node *nb = keep(b.where(first, gr, upd), buf);
        out(nb, q.stBind[0]);
        gr = spec.nesterov ? b.add(gr, b.mul(nb, S(H[hMom]))) : nb;
      }
      out(keep(b.add(param, b.mul(gr, S(b.neg(lr)))), param), q.bind);
      continue;
    }
    if (wd && spec.kind == OptimizerKind::AdamW) param = b.mul(param, S(decay)); // param.mul_(1 - lr * wd)
    else if (wd) gr = b.add(gr, b.mul(param, S(H[hWd])));
    // exp_avg.lerp_(grad, 1 - beta1): ATen's lerp, self + w (end - self) for w < 0.5, else
    // end - (end - self)(1 - w).
    Node *m = q.st[0], *v = q.st[1];
    Node *w = S(lerpW);
    Node *diff = b.sub(gr, m);
    Node *small = b.call("lt", "aten.lt.Scalar", {b.call("abs", "aten.abs.default", {w}), 0.5});
    Node *m1 = b.where(small, b.add(m, b.mul(w, diff)), b.sub(gr, b.mul(diff, b.oneMinus(w))));
    // exp_avg_sq.mul_(beta2).addcmul_(grad, grad, value=1 - beta2): self + value * t1 * t2.
    Node *v1 = b.add(b.mul(v, S(H[hB2])), b.mul(b.mul(S(oneMinusB2), gr), gr));
    // Each state's new value is an output written in place as soon as it is defined, so what
    // comes after reads the new values (equal to m1, v1 on a step that is not skipped).
    Node *mOut = keep(m1, m), *vOut = keep(v1, v);
    out(mOut, q.stBind[0]);
    out(vOut, q.stBind[1]);
    Node *second = vOut;
    if (spec.amsgrad) {
      second = keep(b.call("maximum", "aten.maximum.default", {q.st[2], vOut}), q.st[2]);
      out(second, q.stBind[2]);
    }
    // denom = (sqrt(.) / bias_correction2_sqrt) + eps; param.addcdiv_(exp_avg, denom, value=-step_size).
    Node *denom = b.add(b.div(b.sqrt(second), S(bc2Sqrt)), S(H[hEps]));
    Node *p1 = b.add(param, b.div(b.mul(S(stepSizeNeg), mOut), denom));
    out(keep(p1, q.p), q.bind);
  }
  // A node of its own, after every reader of the old count (first, the bias corrections):
  // it is written into the count's buffer when defined.
  out(keep(b.call("add", "aten.add.Scalar", {step, 1.0}), step), {K::State, sStep});
  if (count) out(b.call("zeros_like", "aten.zeros_like.default", {count}), {K::State, sCount});
  out(total, {K::State, sNorm});
  out(bad, {K::State, sBad});
  g.setOutputs(outs);
  g.verify();
  if (spec.accumulate) t.accumulate.verify();
  return t;
}

int64_t zeroShardElems(const std::vector<int64_t> &numels, int64_t itemSize, int world) {
  // Each gradient 64-byte aligned in its bucket; a bucket padded to world x A elements adds
  // fewer than A to each rank's shard, and there are at most numels.size() buckets.
  const int64_t A = 64 / itemSize;
  int64_t total = 0;
  for (int64_t n : numels) total += alignUp(std::max<int64_t>(n, 1), A);
  return alignUp((total + world - 1) / world, A) + A * (int64_t)numels.size();
}

std::string printTrainStep(const TrainStep &t) {
  std::ostringstream os;
  os << "# aotc: optimizer " << t.spec.str() << "\n";
  if (t.spec.clipGradNorm > 0) os << "# aotc: clip_grad_norm " << num(t.spec.clipGradNorm) << "\n";
  if (t.spec.skipNonfinite) os << "# aotc: skip_nonfinite\n";
  if (t.spec.accumulate) os << "# aotc: grad_accumulation\n";
  if (t.spec.dataParallel) os << "# aotc: data_parallel bucket " << t.spec.bucketBytes << " bytes\n";
  if (t.spec.zeroWorld) os << "# aotc: zero1 world " << t.spec.zeroWorld << " shard " << t.shardElems << " elements\n";
  for (const HyperParam &h : t.hypers) os << "# aotc: hyper " << h.name << " = " << num(h.value) << "\n";
  os << "# aotc: state " << t.stateBytes << " bytes\n";
  for (const StateTensor &s : t.states)
    os << "# aotc: state " << s.name << " \"" << s.type.str() << "\" at " << s.offset << "\n";
  os << "class TrainStep(torch.nn.Module):\n";
  os << printGraphCode(t.update, "update");
  if (t.spec.accumulate) os << "\n" << printGraphCode(t.accumulate, "accumulate");
  if (t.spec.zeroWorld) os << "\n" << printGraphCode(t.shardNorm, "shard_norm");
  return os.str();
}

} // namespace aotc
