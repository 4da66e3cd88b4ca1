//===- PlanTrain.cpp - Binding and fusing the train step's graphs -----------===//
//
// This file implements planTrainStep (Kernels.h). The update and accumulate graphs of a
// TrainStep (Optimizer.h) are bound to the train step's buffers: a parameter to in[i], a
// gradient to grads[j] (which the train step points into its own scratch), a state tensor to
// state + offset, a hyperparameter to hyper + 8 h, the loss to out[0]. An output that is a new
// parameter or state value is bound to the *same* buffer as its input, so it is written in
// place; that is sound because the graph builder reads every such input only in nodes that
// come before its new value's node (checked here), fusion emits kernels in node order and
// merging never moves a write before a read of the same buffer (KernelMerge.cpp), and the
// kernels that read and write it do so element by element at the same index.
//===----------------------------------------------------------------------===//
#include "aotc/Kernels.h"

#include "aotc/Diagnostics.h"

#include <algorithm>
#include <map>
#include <unordered_map>
#include <unordered_set>

namespace aotc {

namespace {


/// Internal error unless every node that reads an in-place input (transitively, up to its new
/// value) comes no later than the node of that new value.
void checkInPlaceOrder(const Graph &g, const std::vector<TrainBinding> &ins, const std::vector<TrainBinding> &outs) {
  auto users = g.users();
  std::unordered_map<const Node *, size_t> pos;
  for (size_t i = 0; i < g.nodes().size(); ++i) pos[g.nodes()[i].get()] = i;
  auto phs = g.placeholders();
  auto os = g.outputs();
  for (size_t k = 0; k < os.size(); ++k) {
    if (outs[k].kind != TrainBinding::Kind::Param && outs[k].kind != TrainBinding::Kind::State &&
        outs[k].kind != TrainBinding::Kind::Staging)
      continue;
    for (size_t i = 0; i < phs.size(); ++i) {
      if (ins[i].kind != outs[k].kind || ins[i].index != outs[k].index) continue;
      std::vector<const Node *> work{phs[i]};
      std::unordered_set<const Node *> seen;
      while (!work.empty()) {
        const Node *n = work.back();
        work.pop_back();
        if (!seen.insert(n).second) continue;
        if (n->isCall() && pos[n] > pos[os[k]])
          internalError("codegen: train step node '" + n->name + "' reads '" + phs[i]->name +
                        "' after its new value '" + os[k]->name + "' is written in place");
        // Past the new value, readers get the new value (it is stored in its buffer when
        // defined, an output being realized at once).
        if (n == os[k]) continue;
        for (Node *u : users[n])
          if (u->isCall()) work.push_back(u);
      }
    }
  }
}

void planGraph(const KernelProgram &kp, TrainPlan &tp, const Graph &g, const std::vector<TrainBinding> &ins,
               const std::vector<TrainBinding> &outs, KernelGraph &kg, const FusionOptions &opts) {
  checkInPlaceOrder(g, ins, outs);
  std::map<std::pair<int, int>, int> bufOf; // (kind, index) -> buffer id
  auto bind = [&](const TrainBinding &t, const std::string &name, const TensorType &ty) {
    auto key = std::make_pair((int)t.kind, t.index);
    auto it = bufOf.find(key);
    if (it != bufOf.end()) return it->second;
    Buffer b;
    b.name = name;
    b.type = ty;
    switch (t.kind) {
    case TrainBinding::Kind::Param: b.kind = BufferKind::Input; b.index = t.index; break;
    case TrainBinding::Kind::Grad: b.kind = BufferKind::Grad; b.index = t.index; break;
    case TrainBinding::Kind::Loss: b.kind = BufferKind::Output; b.index = t.index; break;
    case TrainBinding::Kind::State: b.kind = BufferKind::State; b.offset = tp.states[t.index].offset; break;
    case TrainBinding::Kind::Hyper: b.kind = BufferKind::Hyper; b.offset = 8 * (int64_t)t.index; break;
    case TrainBinding::Kind::Staging:
      b.kind = BufferKind::Grad;
      b.index = (int)kp.grads.size() + t.index;
      break;
    }
    kg.buffers.push_back(b);
    return bufOf[key] = (int)kg.buffers.size() - 1;
  };
  std::vector<int> in, out;
  auto phs = g.placeholders();
  for (size_t i = 0; i < phs.size(); ++i) in.push_back(bind(ins[i], phs[i]->name, phs[i]->type()));
  auto os = g.outputs();
  for (size_t k = 0; k < os.size(); ++k) {
    if (outs[k].kind != TrainBinding::Kind::State && outs[k].kind != TrainBinding::Kind::Param &&
        outs[k].kind != TrainBinding::Kind::Staging)
      internalError("codegen: a train step output must be a parameter, a state tensor or ZeRO-1's staging");
    const TensorType ty = outs[k].kind == TrainBinding::Kind::Param     ? kp.inputs[outs[k].index].type
                          : outs[k].kind == TrainBinding::Kind::Staging ? TensorType{tp.shardDType, {tp.shardElems}}
                                                                        : tp.states[outs[k].index].type;
    if (ty != os[k]->type())
      internalError("codegen: train step output '" + os[k]->name + "' is " + os[k]->type().str() + ", its buffer " +
                    ty.str());
    out.push_back(bind(outs[k], os[k]->name, ty));
  }
  fuseGraph(g, kg, in, out, opts);
  if (!kg.errors.empty()) internalError("codegen: the train step's graphs cannot fail");
}

/// Data parallel: the parameters' gradients in the order the backward is done with them (the
/// last kernel writing *or reading* each: fusion may read a finished gradient again, e.g. to
/// copy it into an equal one, and an all-reduce rewrites its bucket in place), cut into buckets
/// of one dtype, the first at most min(1 MiB, cap) and the others at most `cap` bytes (DDP's
/// 1 MiB / 25 MiB; a gradient larger than the cap is a bucket of its own), laid out from `off`
/// in that order; returns the end. No redzones inside a bucket: it is reduced as one array.
/// ZeRO-1 (world > 0): each bucket's count is padded to a multiple of world x 64 bytes'
/// elements (zeroed like the padding between gradients), so every rank's share of it is
/// 64-byte aligned; the buckets' shares are laid end to end in the flat shard.
int64_t planBuckets(const KernelProgram &kp, TrainPlan &tp, int64_t off, int64_t cap, int world) {
  const KernelGraph &bw = kp.backward;
  std::vector<int> lastUse(kp.grads.size(), -1);
  for (size_t k = 0; k < bw.kernels.size(); ++k)
    for (const std::vector<int> *ids : {&bw.kernels[k].reads, &bw.kernels[k].writes})
      for (int id : *ids)
        if (bw.buffers[id].kind == BufferKind::Grad) lastUse[bw.buffers[id].index] = (int)k;
  std::vector<int> order;
  for (int i : tp.params)
    for (size_t j = 0; j < kp.gradInputIndex.size(); ++j)
      if (kp.gradInputIndex[j] == i) order.push_back((int)j);
  for (int j : order)
    if (lastUse[j] < 0) internalError("codegen: gradient '" + kp.grads[j].name + "' is touched by no backward kernel");
  std::stable_sort(order.begin(), order.end(), [&](int a, int b) { return lastUse[a] < lastUse[b]; });
  const int64_t firstCap = std::min<int64_t>(cap, int64_t(1) << 20);
  int64_t used = 0;
  int64_t shard = 0;
  // Closes the last bucket: ZeRO-1's padding and share.
  auto close = [&] {
    if (world <= 0 || tp.buckets.empty()) return;
    GradBucket &bk = tp.buckets.back();
    const int64_t isz = itemSize(bk.dtype);
    bk.count = alignUp(bk.count, world * (64 / isz));
    bk.shardOffset = shard;
    shard += bk.count / world;
    off = std::max(off, bk.offset + bk.count * isz);
  };
  for (int j : order) {
    const TensorType &ty = kp.grads[j].type;
    const int64_t bytes = alignUp(std::max<int64_t>(ty.bytes(), 1), 64);
    GradBucket *cur = tp.buckets.empty() ? nullptr : &tp.buckets.back();
    const int64_t limit = tp.buckets.size() == 1 ? firstCap : cap;
    if (!cur || cur->dtype != ty.dtype || (used > 0 && used + bytes > limit)) {
      close();
      tp.buckets.push_back(GradBucket{ty.dtype, {}, off, 0, -1, 0});
      cur = &tp.buckets.back();
      used = 0;
    }
    tp.gradOffsets[j] = off;
    cur->grads.push_back(j);
    cur->count = (off - cur->offset) / itemSize(ty.dtype) + ty.numel();
    cur->startAfter = std::max(cur->startAfter, lastUse[j]);
    off += bytes;
    used += bytes;
  }
  close();
  if (world > 0 && shard > tp.shardElems)
    internalError("codegen: ZeRO-1's buckets need a shard of " + std::to_string(shard) + " elements, the optimizer "
                  "stage gave " + std::to_string(tp.shardElems));
  return off;
}

} // namespace

void planTrainStep(KernelProgram &kp, const TrainStep &t, const FusionOptions &opts) {
  TrainPlan &tp = kp.train;
  tp.spec = t.spec;
  tp.states = t.states;
  tp.hypers = t.hypers;
  tp.params = t.params;
  tp.stateBytes = t.stateBytes;
  tp.shardElems = t.shardElems;
  tp.shardDType = t.shardDType;
  planGraph(kp, tp, t.update, t.updateInputs, t.updateOutputs, tp.update, opts);
  tp.accumulate = t.spec.accumulate;
  if (t.spec.accumulate) planGraph(kp, tp, t.accumulate, t.accumInputs, t.accumOutputs, tp.accumulateGraph, opts);
  // Scratch: [forward/backward arena][grads][update/accumulate arena].
  const int64_t red = opts.checkedArena ? kArenaRedzone : 0;
  int64_t off = alignUp(kp.scratchBytes, 64);
  tp.gradOffsets.assign(kp.grads.size(), -1);
  if (t.spec.dataParallel) {
    for (size_t s = 0; s < tp.states.size(); ++s)
      if (tp.states[s].name == "dp.grad_scale") tp.dpScaleState = (int)s;
    if (tp.dpScaleState < 0) internalError("codegen: a data-parallel train step without dp.grad_scale");
    if (t.spec.zeroWorld > 0) {
      for (size_t s = 0; s < tp.states.size(); ++s)
        if (tp.states[s].name == "dp.sumsq") tp.sumsqState = (int)s;
      if (tp.sumsqState < 0) internalError("codegen: a ZeRO-1 train step without its dp.sumsq state");
      planGraph(kp, tp, t.shardNorm, t.normInputs, t.normOutputs, tp.shardNormGraph, opts);
    }
    off = planBuckets(kp, tp, off, t.spec.bucketBytes, t.spec.zeroWorld);
  }
  for (size_t j = 0; j < kp.grads.size(); ++j) {
    if (tp.gradOffsets[j] >= 0) continue;
    tp.gradOffsets[j] = off;
    off += alignUp(std::max<int64_t>(kp.grads[j].type.bytes(), 1), 64) + red;
  }
  if (t.spec.zeroWorld > 0) {
    const int64_t bytes = alignUp(tp.shardElems * itemSize(tp.shardDType), 64);
    tp.shardGradOffset = off;
    off += bytes;
    // The parameter shard is packed after the backward, when its arena is dead (past the first
    // 64 bytes: the error value's slot).
    if (!opts.checkedArena && 64 + bytes <= kp.scratchBytes) {
      tp.shardParamOffset = 64;
    } else {
      tp.shardParamOffset = off;
      off += bytes;
    }
  }
  tp.graphScratchOffset = off;
  tp.scratchBytes =
      off + std::max({tp.update.scratchBytes, tp.accumulateGraph.scratchBytes, tp.shardNormGraph.scratchBytes});
  kp.hasTrain = true;
}

} // namespace aotc
