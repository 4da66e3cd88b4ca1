//===- EmbeddingBag.cpp - _embedding_bag --------------------------------------------===//
//
// _embedding_bag(weight [V, D], indices [N], offsets [B(+1)], scale_grad_by_freq, mode,
// sparse, per_sample_weights?, include_last_offset, padding_idx) -> (output [B, D], offset2bag,
// bag_size, max_indices) (EmbeddingBag.cpp): bag b holds indices[offsets[b] : offsets[b + 1]];
// mode 0 sums the rows (times per_sample_weights), 1 averages them, 2 takes the per-feature
// maximum (the first row reaching it); entries equal to padding_idx count nowhere; an empty bag
// gives zeros. The three auxiliary results are torch's CPU kernel's, fast-path shapes included
// (measured, torch 2.15): offset2bag is [N] (each entry's bag) unless float32 mode 0 without
// padding_idx ([0]); bag_size is the bag's entry count for modes 1 and 2, zeros for mode 0; max_indices is
// [B, D] for mode 2 (0 in an empty bag), bag_size again for mode 1, zeros for mode 0.
// sparse and scale_grad_by_freq only change torch's gradient layout / scaling: scale_grad_by_freq
// is refused (not implemented yet), sparse gradients are dense here.
// A composite (lib/Decompose/DecomposeEmbeddingBag.cpp).
//===----------------------------------------------------------------------===//
#include "Ops.h"

namespace aotc {
namespace ops {
namespace {

using Types = std::vector<TensorType>;

struct BagShape {
  int64_t V, D, N, B;
};

BagShape bagShape(const Node &n) {
  TensorType w = argType(n, 0), ix = argType(n, 1), off = argType(n, 2);
  if (w.rank() != 2) nodeError(n, "embedding_bag: weight must be 2-D, got " + w.str());
  requireFloating(n, w.dtype, "embedding_bag");
  if (ix.rank() != 1) nodeError(n, "embedding_bag: input has to be 1D Tensor (with offsets), but got " + ix.str());
  if (off.rank() != 1) nodeError(n, "embedding_bag: offsets has to be a 1D Tensor, but got " + off.str());
  for (const TensorType *t : {&ix, &off})
    if (t->dtype != DType::I64 && t->dtype != DType::I32)
      nodeError(n, "embedding_bag: expected int64 or int32 indices and offsets, got " + t->str());
  int64_t mode = n.intArg(4);
  if (mode < 0 || mode > 2) nodeError(n, "embedding_bag: mode must be 0 (sum), 1 (mean) or 2 (max), got " + std::to_string(mode));
  if (n.boolArg(3)) nodeError(n, "embedding_bag: scale_grad_by_freq is not supported yet");
  if (const Node *psw = optTensor(n, 6)) {
    if (mode != 0) nodeError(n, "embedding_bag: per_sample_weights was not None. per_sample_weights is only supported for mode='sum'");
    if (psw->type().shape != ix.shape || psw->type().dtype != w.dtype)
      nodeError(n, "embedding_bag: per_sample_weights must have the indices' shape and the weight's dtype, got " +
                       psw->type().str());
  }
  int64_t B = off.shape[0] - (n.boolArg(7) ? 1 : 0);
  if (B < 0) nodeError(n, "embedding_bag: include_last_offset needs at least one offset");
  return {w.shape[0], w.shape[1], ix.shape[0], B};
}

} // namespace

void registerEmbeddingBagOps(OpRegistry &r) {
  OpDef &d = r.add("_embedding_bag(Tensor weight, Tensor indices, Tensor offsets, bool scale_grad_by_freq=False, "
                   "int mode=0, bool sparse=False, Tensor? per_sample_weights=None, bool include_last_offset=False, "
                   "int padding_idx=-1) -> (Tensor, Tensor, Tensor, Tensor)",
                   OpCategory::Composite);
  d.indexArgs = {1, 2};
  d.infer = [](const Node &n) -> Types {
    BagShape s = bagShape(n);
    int64_t mode = n.intArg(4);
    DType dt = argType(n, 0).dtype;
    bool o2b = mode != 0 || n.intArg(8) >= 0 || dt != DType::F32; // the f32 sum fast path leaves it empty
    return {{dt, {s.B, s.D}}, {DType::I64, {o2b ? s.N : 0}}, {DType::I64, {s.B}},
            {DType::I64, mode == 2 ? Shape{s.B, s.D} : Shape{s.B}}};
  };
  d.eval = [](const Node &n, const RefArgs &a, const std::vector<std::vector<const RefTensor *>> &) {
    BagShape s = bagShape(n);
    const RefTensor &w = *a.at(0), &ix = *a.at(1), &off = *a.at(2);
    const RefTensor *psw = a.size() > 6 ? a[6] : nullptr;
    int64_t mode = n.intArg(4), pad = n.intArg(8);
    RefTensor out(n.types[0].dtype, n.types[0].shape, 0.0), o2b(DType::I64, n.types[1].shape, 0.0),
        size(DType::I64, n.types[2].shape, 0.0), maxIdx(DType::I64, n.types[3].shape, 0.0);
    std::vector<int64_t> cnt(s.B, 0);
    std::vector<bool> seen(s.B * s.D, false);
    for (int64_t b = 0; b < s.B; ++b) {
      int64_t lo = (int64_t)off.data[b], hi = b + 1 < off.numel() ? (int64_t)off.data[b + 1] : s.N;
      for (int64_t i = std::max<int64_t>(lo, 0); i < std::min(hi, s.N); ++i) {
        if (o2b.numel()) o2b.data[i] = (double)b;
        int64_t row = (int64_t)ix.data[i];
        if (row < 0 || row >= s.V) nodeError(n, "embedding_bag: index " + std::to_string(row) + " out of range");
        if (row == pad) continue;
        ++cnt[b];
        for (int64_t j = 0; j < s.D; ++j) {
          double v = w.data[row * s.D + j] * (psw ? psw->data[i] : 1.0);
          double &o = out.data[b * s.D + j];
          if (mode != 2) o += v;
          else if (!seen[b * s.D + j] || v > o) o = v, seen[b * s.D + j] = true, maxIdx.data[b * s.D + j] = (double)row;
        }
      }
    }
    for (int64_t b = 0; b < s.B; ++b) {
      if (mode == 1 && cnt[b] > 0)
        for (int64_t j = 0; j < s.D; ++j) out.data[b * s.D + j] /= (double)cnt[b];
      if (mode != 0) size.data[b] = (double)cnt[b];
      if (mode == 1) maxIdx.data[b] = (double)cnt[b];
    }
    return std::vector<RefTensor>{out, o2b, size, maxIdx};
  };
}

} // namespace ops
} // namespace aotc
