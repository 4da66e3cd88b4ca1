//===- Rules.h - Rule functions shared between the rule files ---*- C++ -*-===//
//
// Internal to lib/Decompose. Decompose.cpp and Lower.cpp hold the tables;
// rules used by both tables, or defined in another file (LowerNorm.cpp: the
// softmax and layer-norm families, forward and backward), are declared here.
//===----------------------------------------------------------------------===//
#pragma once

#include "Rewrite.h"

namespace aotc::rules {

using Vals = std::vector<Node *>;

// Decompose.cpp (also used by lower: autodiff formulas may emit them).
Vals transposeT(rewrite::Emitter &e, Node &n);
Vals transposeInt(rewrite::Emitter &e, Node &n);
Vals silu(rewrite::Emitter &e, Node &n);
Vals toView(rewrite::Emitter &e, Node &n);
/// clamp(x, min, max) / hardtanh(x, min_val, max_val): min at arg 1, max at arg 2;
/// clamp_min(x, min); clamp_max(x, max).
Vals clampLike(rewrite::Emitter &e, Node &n);
/// where.ScalarOther / where.ScalarSelf / masked_fill.Scalar / masked_fill.Tensor -> where.self.
Vals whereScalar(rewrite::Emitter &e, Node &n);
/// square(x) -> pow.Tensor_Scalar(x, 2).
Vals square(rewrite::Emitter &e, Node &n);
/// cat(tensors, dim) -> slice_scatter of each input into zeros.
Vals cat(rewrite::Emitter &e, Node &n);
/// split.Tensor / split_with_sizes / chunk -> one slice.Tensor per piece.
Vals split(rewrite::Emitter &e, Node &n);
/// unbind.int(x, dim) -> one select.int per index.
Vals unbind(rewrite::Emitter &e, Node &n);

// DecomposeIndex.cpp.
/// index.Tensor -> index_select over the indexed dims viewed as one, with a linear index.
Vals index(rewrite::Emitter &e, Node &n);
/// index_put -> scatter_add (accumulate) or where(hit, scatter_add into zeros, self).
Vals indexPut(rewrite::Emitter &e, Node &n);

// DecomposeScan.cpp.
/// cumsum -> a masked sum over an expanded copy of the dim (one fused reduction).
Vals cumsum(rewrite::Emitter &e, Node &n);
/// diagonal / diagonal_scatter -> index.Tensor / index_put with aranges on the two dims.
Vals diagonal(rewrite::Emitter &e, Node &n);
Vals diagonalScatter(rewrite::Emitter &e, Node &n);
/// index_reduce (mean, amax, amin) -> scatter_add counts / masked extrema.
Vals indexReduce(rewrite::Emitter &e, Node &n);
/// cumprod / logcumsumexp -> prod / logsumexp over a masked expanded copy of the dim.
Vals cumprodLike(rewrite::Emitter &e, Node &n);
/// cummax / cummin -> the index of the last running extremum, gather for the values.
Vals cummaxmin(rewrite::Emitter &e, Node &n);
/// multilabel_margin_loss -> torch's decomposition (masks, gather, clamp, sums).
Vals multilabelMarginLoss(rewrite::Emitter &e, Node &n);

// LowerResample.cpp.
/// The adaptive pooling windows of one dim of size `in` pooled to `out`: output o reads
/// [floor(o in / out), ceil((o + 1) in / out)); start and length as i64 [out], and the longest.
struct AdaptiveWindows {
  Node *start = nullptr, *len = nullptr;
  int64_t kmax = 0;
};
AdaptiveWindows adaptiveWindows(rewrite::Emitter &e, int64_t in, int64_t out);

// DecomposeNonCore.cpp (lib/IR/ops/NonCore.cpp's composites).
Vals copysign(rewrite::Emitter &e, Node &n);
Vals fmaxFmin(rewrite::Emitter &e, Node &n);
Vals hypot(rewrite::Emitter &e, Node &n);
Vals ldexp(rewrite::Emitter &e, Node &n);
Vals copyForm(rewrite::Emitter &e, Node &n);
Vals embeddingBagForwardOnly(rewrite::Emitter &e, Node &n);
Vals asStridedScatter(rewrite::Emitter &e, Node &n);
Vals addmv(rewrite::Emitter &e, Node &n);
Vals addbmm(rewrite::Emitter &e, Node &n);
Vals trilinear(rewrite::Emitter &e, Node &n);
Vals dist(rewrite::Emitter &e, Node &n);
Vals put(rewrite::Emitter &e, Node &n);
Vals emptyPermuted(rewrite::Emitter &e, Node &n);
Vals adaptiveMaxPool(rewrite::Emitter &e, Node &n);

// DecomposeRearrange.cpp.
/// flip / reflection_pad* / replication_pad* -> index_select by a computed int64 index.
Vals flip(rewrite::Emitter &e, Node &n);
Vals pad(rewrite::Emitter &e, Node &n);
/// repeat -> view, expand, view.
Vals repeat(rewrite::Emitter &e, Node &n);
/// max.dim / min.dim -> argmax (order reversed for min) + gather.
Vals maxMinDim(rewrite::Emitter &e, Node &n);
/// pow.Scalar -> pow.Tensor_Tensor with the base as a tensor; div.*_mode -> trunc / floor division.
Vals powScalar(rewrite::Emitter &e, Node &n);
Vals divMode(rewrite::Emitter &e, Node &n);
/// fill.Scalar -> full_like; empty.memory_format / empty_strided -> zeros; var.dim -> var.correction.
Vals fillScalar(rewrite::Emitter &e, Node &n);
Vals emptyLike(rewrite::Emitter &e, Node &n);
Vals varDim(rewrite::Emitter &e, Node &n);
/// embedding_dense_backward -> scatter_add of the (masked, scaled) rows into zeros.
Vals embeddingDenseBackward(rewrite::Emitter &e, Node &n);
/// _native_batch_norm_legit.no_stats -> the functional form with scratch running statistics.
Vals batchNormNoStats(rewrite::Emitter &e, Node &n);
/// im2col / col2im -> gather from / scatter_add into the padded image at the taps' positions.
Vals im2col(rewrite::Emitter &e, Node &n);
Vals col2im(rewrite::Emitter &e, Node &n);
/// masked_scatter -> a log-step prefix count of the mask, index_select of the source, where.
Vals maskedScatter(rewrite::Emitter &e, Node &n);

// DecomposeSort.cpp.
/// sort / sort.stable / topk -> stable ranks (a fused O(n^2) count) + scatter.src to them.
Vals sortOrTopk(rewrite::Emitter &e, Node &n);
/// kthvalue, median(.dim), nanmedian(.dim) -> the element of a stable rank, gather by its index.
Vals orderStatistic(rewrite::Emitter &e, Node &n);
/// The stable rank of each element of x along dim d (int64, x's shape).
Node *stableRanks(rewrite::Emitter &e, Node *x, int64_t d, bool descending);

// DecomposeDistance.cpp.
/// _cdist_forward / _pdist_forward -> pairwise differences and a fused p-norm reduction.
Vals cdistForward(rewrite::Emitter &e, Node &n);
Vals pdistForward(rewrite::Emitter &e, Node &n);

// DecomposePool3d.cpp.
/// avg_pool3d / _adaptive_avg_pool3d / max_pool3d_with_indices -> two 2-D pools ((H, W), then D).
Vals pool3d(rewrite::Emitter &e, Node &n);

// DecomposeGridSample.cpp.
/// grid_sampler_2d (bilinear, nearest; zeros, border, reflection) -> weighted gathers.
Vals gridSampler2d(rewrite::Emitter &e, Node &n);

// DecomposeEmbeddingBag.cpp.
/// _embedding_bag -> bags by a fused offsets count, scatter_add / scatter_reduce into [B + 1, D].
Vals embeddingBag(rewrite::Emitter &e, Node &n);

// DecomposeAttention.cpp.
/// scaled_dot_product_attention -> bmm, masks by where, _softmax with 0 for fully masked rows.
Vals scaledDotProductAttention(rewrite::Emitter &e, Node &n);
Vals flashAttentionForCpu(rewrite::Emitter &e, Node &n);
/// lib/Decompose/SafeSoftmax.cpp: torch's decomposed _safe_softmax, where(all(x == -inf, d),
/// 0, _softmax(x, d)) in either spelling of `all`, becomes aotc::safe_softmax(x, d). Returns
/// how many it rewrote.
int recomposeSafeSoftmax(Graph &g);

// LowerNorm.cpp.
Vals softmax(rewrite::Emitter &e, Node &n);
Vals logSoftmax(rewrite::Emitter &e, Node &n);
Vals softmaxBackward(rewrite::Emitter &e, Node &n);
Vals logSoftmaxBackward(rewrite::Emitter &e, Node &n);
Vals nativeLayerNorm(rewrite::Emitter &e, Node &n);
Vals nativeLayerNormBackward(rewrite::Emitter &e, Node &n);
Vals batchNormFunctional(rewrite::Emitter &e, Node &n);
Vals batchNormNoTraining(rewrite::Emitter &e, Node &n);
Vals nativeBatchNormBackward(rewrite::Emitter &e, Node &n);
Vals nativeGroupNorm(rewrite::Emitter &e, Node &n);
Vals nativeGroupNormBackward(rewrite::Emitter &e, Node &n);

// LowerPool.cpp.
Vals maxPool2dWithIndices(rewrite::Emitter &e, Node &n);
Vals maxPool2dWithIndicesBackward(rewrite::Emitter &e, Node &n);
Vals asStrided(rewrite::Emitter &e, Node &n);

// LowerResample.cpp.
Vals upsampleNearest2d(rewrite::Emitter &e, Node &n);
Vals upsampleBilinear2d(rewrite::Emitter &e, Node &n);
Vals upsampleNearest2dBackward(rewrite::Emitter &e, Node &n);
Vals upsampleBilinear2dBackward(rewrite::Emitter &e, Node &n);
/// upsample_{nearest,bilinear}2d.vec -> .default (decompose).
Vals upsampleVec(rewrite::Emitter &e, Node &n);
Vals avgPool2d(rewrite::Emitter &e, Node &n);
Vals avgPool2dBackward(rewrite::Emitter &e, Node &n);
Vals adaptiveAvgPool2d(rewrite::Emitter &e, Node &n);
Vals adaptiveAvgPool2dBackward(rewrite::Emitter &e, Node &n);
Vals constantPadNd(rewrite::Emitter &e, Node &n);
/// _reshape_alias -> view (contiguous strides) or as_strided (decompose).
Vals reshapeAlias(rewrite::Emitter &e, Node &n);

// LowerConv.cpp.
Vals convolution(rewrite::Emitter &e, Node &n);
Vals convolutionBackward(rewrite::Emitter &e, Node &n);

// LowerLinalg.cpp.
/// Decompositions: triangular_solve, lu_unpack, linalg_lu, linalg_inv_ex (into the linalg ops
/// that keep a derivative rule).
Vals triangularSolve(rewrite::Emitter &e, Node &n);
Vals luUnpack(rewrite::Emitter &e, Node &n);
Vals linalgLu(rewrite::Emitter &e, Node &n);
Vals invEx(rewrite::Emitter &e, Node &n);
/// The lower rules of the linalg ops and their backward helpers (the lower table appends them).
const std::vector<rewrite::RuleEntry> &linalgLowerRules();

// LowerFft.cpp.
Vals fftR2cBackward(rewrite::Emitter &e, Node &n);
Vals fftC2rBackward(rewrite::Emitter &e, Node &n);

} // namespace aotc::rules
