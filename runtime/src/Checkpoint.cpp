//===- Checkpoint.cpp - Trainer::save / load in torch's names --------------===//
//
// This file implements the checkpoint half of Trainer (trainer.h; docs/training.md
// "Checkpoints"). Tensors: every parameter and buffer under its FQN (lifted constants are not
// state and are not written), optimizer.state.<fqn>.<key> for torch.optim's per-parameter
// state, and optimizer.state.<fqn>.step (f32 0-d, as torch stores it) for Adam/AdamW. Before
// the first update torch's optimizer state is empty, and so is the checkpoint's.
// __metadata__ (strings; JSON where structured):
//   format        "aotc-checkpoint-1"
//   optimizer     the canonical --optimizer text of the object that wrote it
//   param_groups  JSON: torch.optim's state_dict()["param_groups"] (one group, params 0..n-1)
//   param_names   JSON: the FQN of each index of param_groups[0].params
//   hyper         JSON: {name: value} of every run-time hyperparameter (exact doubles)
//   step          the update count
//   rng           JSON: {"seed": s, "offset": o} (absent for a program without randomness)
//   build_id      the writing object's build id (informational: a rebuilt object of the same
//                 model loads it; what must match is every tensor's name, dtype and shape)
//===----------------------------------------------------------------------===//
#include "aotc/trainer.h"

#include "Internal.h"

#include <nlohmann/json.hpp>

#include <algorithm>
#include <cstring>
#include <map>

namespace aotc::rt {

using detail::progName;

namespace {

bool isAdam(const aotc_train &t) { return std::string(t.optimizer) != "sgd"; }

/// The flags of the canonical config text ("...,amsgrad=1,maximize=0").
bool configFlag(const aotc_train &t, const std::string &key) {
  std::string c = t.config;
  return c.find("," + key + "=1") != std::string::npos;
}

} // namespace

SafetensorsFile Trainer::checkpoint() const {
  const aotc_program &p = *program_;
  const aotc_train &t = *p.train;
  SafetensorsFile f;
  for (int i = 0; i < p.num_inputs; ++i) {
    const aotc_tensor_desc &d = p.inputs[i];
    if (d.role == AOTC_ROLE_PARAMETER || d.role == AOTC_ROLE_BUFFER)
      f.tensors.emplace_back(d.name, Tensor::fromBytes(dtypeFromAbi(d.dtype), std::vector<int64_t>(d.shape, d.shape + d.rank),
                                                       in_[i], d.bytes));
  }
  const int64_t n = steps();
  if (zeroWorld() > 0 && !comm_)
    throw RuntimeError(progName(p) + ": a ZeRO-1 trainer's checkpoint gathers every rank's shard: set its communicator "
                                     "first (and call save() or checkpoint() on every rank)",
                       AOTC_RT_ERROR_STATE);
  nlohmann::json names = nlohmann::json::array();
  const std::vector<OptimizerTensor> ot = optimizerTensors();
  // ZeRO-1: each shard state gathered once (every rank takes part; n is the same on all).
  std::map<const aotc_state_desc *, std::vector<unsigned char>> gathered;
  if (n > 0)
    for (const OptimizerTensor &o : ot)
      if (o.shard && !gathered.count(o.shard)) gathered[o.shard] = gatherShardState(*o.shard);
  for (int k = 0; k < t.num_params; ++k) {
    const std::string fqn = p.inputs[t.param_inputs[k]].name;
    names.push_back(fqn);
    if (n == 0) continue; // torch's state is empty before the first step
    for (const OptimizerTensor &o : ot)
      if (o.paramInput == t.param_inputs[k])
        f.tensors.emplace_back(o.name, o.shard ? cutShard(o, gathered.at(o.shard)) : stateTensor(o.name));
    if (isAdam(t)) f.tensors.emplace_back("optimizer.state." + fqn + ".step", Tensor::full(DType::F32, {}, (double)n));
  }
  nlohmann::json hy = nlohmann::json::object();
  for (int h = 0; h < t.num_hyper; ++h) hy[t.hyper[h].name] = hyper_[h];
  auto value = [&](const char *name, double dflt) { return hy.contains(name) ? hy[name].get<double>() : dflt; };
  nlohmann::json g;
  std::vector<int> ids(t.num_params);
  for (int k = 0; k < t.num_params; ++k) ids[k] = k;
  g["lr"] = value("lr", 0);
  if (isAdam(t)) {
    g["betas"] = {value("beta1", 0.9), value("beta2", 0.999)};
    g["eps"] = value("eps", 1e-8);
    g["weight_decay"] = value("weight_decay", 0);
    g["amsgrad"] = configFlag(t, "amsgrad");
    g["foreach"] = nullptr;
    g["maximize"] = configFlag(t, "maximize");
    g["capturable"] = false;
    g["differentiable"] = false;
    g["fused"] = nullptr;
    g["decoupled_weight_decay"] = std::string(t.optimizer) == "adamw";
  } else {
    g["momentum"] = value("momentum", 0);
    g["dampening"] = value("dampening", 0);
    g["weight_decay"] = value("weight_decay", 0);
    g["nesterov"] = configFlag(t, "nesterov");
    g["maximize"] = configFlag(t, "maximize");
    g["foreach"] = nullptr;
    g["differentiable"] = false;
    g["fused"] = nullptr;
  }
  g["params"] = ids;
  f.metadata["format"] = "aotc-checkpoint-1";
  f.metadata["optimizer"] = t.config;
  f.metadata["param_groups"] = nlohmann::json::array({g}).dump();
  f.metadata["param_names"] = names.dump();
  f.metadata["hyper"] = hy.dump();
  f.metadata["step"] = std::to_string(n);
  f.metadata["build_id"] = p.build_id ? p.build_id : "";
  int r = rngStateIndex(p);
  if (r >= 0) {
    const int64_t *rs = static_cast<const int64_t *>(in_[r]);
    f.metadata["rng"] = nlohmann::json{{"seed", rs[0]}, {"offset", rs[1]}}.dump();
  }
  return f;
}

void Trainer::save(const std::string &path) const {
  // Data parallel: every rank holds the same state; rank 0 writes it. ZeRO-1: every rank takes
  // part in gathering the shards first.
  if (comm_ && comm_->rank != 0 && zeroWorld() == 0) return;
  if (accumulating())
    throw RuntimeError(path + ": cannot save in the middle of a gradient accumulation (call step() first)",
                       AOTC_RT_ERROR_STATE);
  SafetensorsFile f = checkpoint();
  if (comm_ && comm_->rank != 0) return;
  std::vector<NamedTensorRef> refs;
  for (auto &[name, t] : f.tensors) refs.push_back({name, &t});
  writeSafetensors(path, refs, f.metadata);
}

void Trainer::load(const std::string &path) {
  if (!comm_ && zeroWorld() > 0)
    throw RuntimeError(path + ": a ZeRO-1 trainer loads a checkpoint into every rank's shard: set its communicator "
                              "first (and call load() on every rank)",
                       AOTC_RT_ERROR_STATE);
  if (!comm_) return restore(readSafetensors(path), path);
  // Data parallel: rank 0 reads and restores, then every rank takes its state; a failure on
  // rank 0 is every rank's (no rank waits for a broadcast that never comes).
  int32_t ok = 1;
  std::string why;
  SafetensorsFile ck;
  if (comm_->rank == 0) try {
      ck = readSafetensors(path);
      restore(ck, path);
    } catch (const RuntimeError &e) {
      ok = 0;
      why = e.what();
    }
  if (comm_->broadcast(comm_->self, &ok, sizeof ok, 0) != 0)
    abortJob("broadcasting the result of load(" + path + ") failed: " + comm_->error(comm_->self));
  if (!ok)
    throw RuntimeError(comm_->rank == 0 ? why : path + ": rank 0 could not load the checkpoint (its message says why)",
                       AOTC_RT_ERROR_IO);
  broadcastFromRank0(true);
  if (zeroWorld() > 0) broadcastShards(comm_->rank == 0 ? &ck : nullptr);
}

void Trainer::restore(const SafetensorsFile &ck, const std::string &what) {
  const aotc_program &p = *program_;
  const aotc_train &t = *p.train;
  const std::string name = progName(p);
  if (accumulating())
    throw RuntimeError(what + ": cannot load a checkpoint in the middle of a gradient accumulation (call step() first)",
                       AOTC_RT_ERROR_STATE);
  if (zeroWorld() > 0 && !comm_)
    throw RuntimeError(what + ": a ZeRO-1 trainer restores its shard of the optimizer state: set its communicator first",
                       AOTC_RT_ERROR_STATE);
  auto mismatch = [&](const std::string &tensor, const std::string &why) {
    throw RuntimeError(what + ": " + why + " (tensor '" + tensor + "'): the checkpoint is not one of " + name +
                           "'s (its model or optimizer differs)",
                       AOTC_RT_ERROR_IO);
  };
  auto check = [&](const std::string &tname, DType dt, const std::vector<int64_t> &shape) -> const Tensor & {
    const Tensor *x = ck.find(tname);
    if (!x) mismatch(tname, "no tensor '" + tname + "' (" + typeString(dt, shape) + ")");
    if (x->dtype() != dt || x->shape() != shape)
      mismatch(tname, "'" + tname + "' is " + x->typeString() + ", " + name + " has " + typeString(dt, shape));
    return *x;
  };
  // 1. Validate everything before changing anything: first the optimizer's flags of a torch
  // param group (another optimizer's state then says so, not which tensor it lacks).
  if (auto it = ck.metadata.find("param_groups"); it != ck.metadata.end() && !ck.metadata.count("hyper")) {
    try {
      nlohmann::json g = nlohmann::json::parse(it->second).at(0);
      if (isAdam(t) && g.contains("decoupled_weight_decay") && g["decoupled_weight_decay"].is_boolean() &&
          g["decoupled_weight_decay"].get<bool>() != (std::string(t.optimizer) == "adamw"))
        throw RuntimeError(what + ": param_groups has decoupled_weight_decay=" +
                           (g["decoupled_weight_decay"].get<bool>() ? "True (torch's AdamW)" : "False (torch's Adam)") +
                           " but the object was compiled with " + t.config);
      for (const char *flag : {"nesterov", "amsgrad", "maximize"})
        if (g.contains(flag) && g[flag].is_boolean() && g[flag].get<bool>() != configFlag(t, flag))
          throw RuntimeError(what + ": param_groups has " + flag + "=" + (g[flag].get<bool>() ? "True" : "False") +
                             " but the object was compiled with " + t.config);
    } catch (const nlohmann::json::exception &e) {
      throw RuntimeError(what + ": malformed param_groups metadata: " + e.what(), AOTC_RT_ERROR_IO);
    }
  }
  std::vector<std::string> expected;
  for (int i = 0; i < p.num_inputs; ++i) {
    const aotc_tensor_desc &d = p.inputs[i];
    if (d.role != AOTC_ROLE_PARAMETER && d.role != AOTC_ROLE_BUFFER) continue;
    check(d.name, dtypeFromAbi(d.dtype), std::vector<int64_t>(d.shape, d.shape + d.rank));
    expected.push_back(d.name);
  }
  bool hasState = false;
  for (auto &[n, x] : ck.tensors) hasState |= n.rfind("optimizer.state.", 0) == 0;
  const std::vector<OptimizerTensor> ot = optimizerTensors();
  if (hasState)
    for (int k = 0; k < t.num_params; ++k) {
      const std::string fqn = p.inputs[t.param_inputs[k]].name;
      const aotc_tensor_desc &pd = p.inputs[t.param_inputs[k]];
      for (const OptimizerTensor &o : ot) {
        if (o.paramInput != t.param_inputs[k]) continue;
        check(o.name, dtypeFromAbi(pd.dtype), std::vector<int64_t>(pd.shape, pd.shape + pd.rank));
        expected.push_back(o.name);
      }
      if (isAdam(t)) {
        check("optimizer.state." + fqn + ".step", DType::F32, {});
        expected.push_back("optimizer.state." + fqn + ".step");
      }
    }
  for (auto &[n, x] : ck.tensors)
    if (std::find(expected.begin(), expected.end(), n) == expected.end())
      mismatch(n, "'" + n + "' (" + x.typeString() + ") is not a parameter, buffer or optimizer state of " + name);
  // The step count: metadata "step", else (a converted torch checkpoint) the state's step.
  double step = 0;
  auto meta = [&](const char *key) -> const std::string * {
    auto it = ck.metadata.find(key);
    return it == ck.metadata.end() ? nullptr : &it->second;
  };
  try {
    if (const std::string *s = meta("step")) step = std::stod(*s);
    else if (hasState && isAdam(t)) step = ck.get("optimizer.state." + std::string(p.inputs[t.param_inputs[0]].name) + ".step").at(0);
    else if (hasState) step = 1; // SGD's momentum buffers exist: no longer the first step
  } catch (const std::exception &) {
    throw RuntimeError(what + ": metadata 'step' is not a number");
  }
  if (hasState && isAdam(t))
    for (int k = 0; k < t.num_params; ++k) {
      std::string sn = "optimizer.state." + std::string(p.inputs[t.param_inputs[k]].name) + ".step";
      if (ck.get(sn).at(0) != step) mismatch(sn, "the step counts of the parameters differ");
    }
  // A step count without state tensors is only consistent for an optimizer that keeps none
  // (plain SGD: no momentum).
  const bool keepsState = !ot.empty();
  if (!hasState && step != 0 && keepsState)
    throw RuntimeError(what + ": step " + std::to_string(step) + " but no optimizer state", AOTC_RT_ERROR_IO);
  // Hyperparameters: "hyper" (exact, aotc's) else torch's param_groups.
  std::vector<double> hyper = hyper_;
  try {
    nlohmann::json hy;
    if (const std::string *h = meta("hyper")) {
      hy = nlohmann::json::parse(*h);
    } else if (const std::string *pg = meta("param_groups")) {
      nlohmann::json g = nlohmann::json::parse(*pg).at(0);
      // torch.optim's hyperparameters (other numbers, such as an LR scheduler's initial_lr,
      // are not the optimizer's).
      for (const char *k : {"lr", "momentum", "dampening", "weight_decay", "eps"})
        if (g.contains(k) && g[k].is_number()) hy[k] = g[k];
      if (g.contains("betas")) {
        hy["beta1"] = g["betas"][0];
        hy["beta2"] = g["betas"][1];
      }
      if (!hy.contains("weight_decay") || hy["weight_decay"].get<double>() == 0) hy.erase("weight_decay");
    }
    for (auto &[k, v] : hy.items()) {
      int h = -1;
      for (int j = 0; j < t.num_hyper; ++j)
        if (k == t.hyper[j].name) h = j;
      if (h < 0) {
        if (v.get<double>() != 0)
          throw RuntimeError(what + ": hyperparameter " + k + " = " + v.dump() +
                             " is not compiled into this object (" + t.config + ")");
        continue;
      }
      hyper[h] = v.get<double>();
    }
  } catch (const nlohmann::json::exception &e) {
    throw RuntimeError(what + ": malformed hyperparameter metadata: " + e.what());
  }
  // 2. Apply (the hyperparameters first: the only step that can still fail, by range).
  const std::vector<double> before = hyper_;
  try {
    for (int h = 0; h < t.num_hyper; ++h) setHyper(t.hyper[h].name, hyper[h]);
  } catch (const RuntimeError &e) {
    hyper_ = before;
    throw RuntimeError(what + ": " + e.what());
  }
  for (int i = 0; i < p.num_inputs; ++i) {
    const aotc_tensor_desc &d = p.inputs[i];
    if (d.role == AOTC_ROLE_PARAMETER || d.role == AOTC_ROLE_BUFFER)
      std::memcpy(in_[i], ck.get(d.name).data(), (size_t)d.bytes);
  }
  std::memset(state_.data(), 0, (size_t)state_.size());
  for (const OptimizerTensor &o : ot)
    if (hasState && o.resident)
      std::memcpy(state_.data() + o.resident->offset, ck.get(o.name).data(), (size_t)o.resident->bytes);
  // ZeRO-1: the shards are this rank's shares (load() gives every rank its own).
  if (hasState && zeroWorld() > 0)
    for (const OptimizerTensor &o : ot) scatterShard(o, ck.get(o.name));
  for (int s = 0; s < t.num_state; ++s) {
    const aotc_state_desc &d = t.state[s];
    if (d.kind == AOTC_STATE_STEP) *reinterpret_cast<float *>(state_.data() + d.offset) = (float)step;
  }
  int r = rngStateIndex(p);
  if (r >= 0) {
    int64_t *rs = static_cast<int64_t *>(in_[r]);
    rs[0] = (int64_t)seed_;
    rs[1] = 0;
    if (const std::string *rng = meta("rng")) {
      try {
        nlohmann::json j = nlohmann::json::parse(*rng);
        rs[0] = j.at("seed").get<int64_t>();
        rs[1] = j.at("offset").get<int64_t>();
      } catch (const nlohmann::json::exception &e) {
        throw RuntimeError(what + ": malformed 'rng' metadata: " + e.what());
      }
    }
  }
}

} // namespace aotc::rt
