//===- Attention.cpp - scaled_dot_product_attention ---------------------------===//
//
// scaled_dot_product_attention as torch's math path defines it (aten/src/ATen/native/transformers/
// attention.cpp _scaled_dot_product_attention_math, torch/_decomp _safe_softmax):
//   attn = (q * sqrt(scale)) @ (k^T * sqrt(scale)), scale = 1/sqrt(E) unless given;
//   is_causal: positions j > i get -inf (the mask is tril(ones(L, S)));
//   a bool attn_mask keeps the True positions (False -> -inf); a float one is added;
//   p = softmax(attn, -1), with 0 for a row whose every score is -inf (fully masked rows);
//   out = p @ v.
// enable_gqa: k and v have Hq / Hk heads, repeated (repeat_interleave) over the query heads.
// q: [..., Hq, L, E], k: [..., Hk, S, E], v: [..., Hk, S, Ev] -> [..., Hq, L, Ev]; the leading
// dims must be equal. dropout_p > 0 applies dropout(p) to the probabilities (torch's math path);
// such a node has no f64 value of its own: decompose gives the dropout a Philox stream
// (docs/randomness.md).
// Decompose (lib/Decompose/DecomposeAttention.cpp) expands it to bmm / softmax / where, so its
// gradient is theirs.
//===----------------------------------------------------------------------===//
#include "Ops.h"

namespace aotc {
namespace ops {

namespace {

using Types = std::vector<TensorType>;

/// Argument positions: scaled_dot_product_attention and _scaled_dot_product_flash_attention_for_cpu
/// order them differently; gqa < 0: the op has no enable_gqa (flash: fewer key/value heads
/// are repeated, as enable_gqa).
struct Positions {
  int mask, dropout, causal, scale, gqa;
  const char *op;
};
constexpr Positions kSdpa{3, 4, 5, 6, 7, "scaled_dot_product_attention"};
constexpr Positions kFlash{5, 3, 4, 6, -1, "_scaled_dot_product_flash_attention_for_cpu"};

void checkAttention(const Node &n, const Positions &at) {
  TensorType q = argType(n, 0), k = argType(n, 1), v = argType(n, 2);
  for (const TensorType *t : {&q, &k, &v})
    if (t->rank() < 2) nodeError(n, std::string(at.op) + ": query, key and value must be at least 2-D");
  requireFloating(n, q.dtype, at.op);
  if (k.dtype != q.dtype || v.dtype != q.dtype)
    nodeError(n, "Expected query, key, and value to have the same dtype, but got query.dtype: " +
                     std::string(dtypeTorchName(q.dtype)) + " key.dtype: " + dtypeTorchName(k.dtype) +
                     " and value.dtype: " + dtypeTorchName(v.dtype) + " instead.");
  if (k.rank() != q.rank() || v.rank() != q.rank())
    nodeError(n, std::string(at.op) + ": query, key and value must have the same rank");
  int64_t r = q.rank();
  if (q.shape[r - 1] != k.shape[r - 1])
    nodeError(n, std::string(at.op) + ": query and key must have the same embedding size, got " +
                     shapeStr(q.shape) + " and " + shapeStr(k.shape));
  if (k.shape[r - 2] != v.shape[r - 2])
    nodeError(n, std::string(at.op) + ": key and value must have the same sequence length, got " +
                     shapeStr(k.shape) + " and " + shapeStr(v.shape));
  bool gqa = at.gqa < 0 || n.boolArg(at.gqa);
  for (int64_t d = 0; d < r - 2; ++d) {
    bool headDim = d == r - 3;
    if (k.shape[d] != v.shape[d])
      nodeError(n, std::string(at.op) + ": key " + shapeStr(k.shape) + " and value " + shapeStr(v.shape) +
                       " must have the same leading dims");
    if (headDim && gqa) {
      if (k.shape[d] == 0 || q.shape[d] % k.shape[d] != 0)
        nodeError(n, std::string(at.op) + ": with enable_gqa the number of query heads (" +
                         std::to_string(q.shape[d]) + ") must be a multiple of the key/value heads (" +
                         std::to_string(k.shape[d]) + ")");
    } else if (q.shape[d] != k.shape[d]) {
      nodeError(n, std::string(at.op) + ": query " + shapeStr(q.shape) + " and key " + shapeStr(k.shape) +
                       " must have the same leading dims" + (headDim && at.gqa >= 0 ? " (enable_gqa=True repeats key heads)" : ""));
    }
  }
  if (!(n.scalarArg(at.dropout) >= 0.0 && n.scalarArg(at.dropout) <= 1.0))
    nodeError(n, std::string(at.op) + ": dropout probability has to be between 0 and 1, but got " +
                     argStr(n.args[at.dropout]));
  if (const Node *m = optTensor(n, at.mask)) {
    if (n.boolArg(at.causal) && at.gqa >= 0) // the flash kernel applies both
      nodeError(n, "_scaled_dot_product_attention: Explicit attn_mask should not be set when is_causal=True");
    Shape scores(q.shape.begin(), q.shape.end() - 1);
    scores.push_back(k.shape[r - 2]);
    auto b = broadcastShapes(scores, m->type().shape);
    if (!b || *b != scores)
      nodeError(n, std::string(at.op) + ": attn_mask of shape " + shapeStr(m->type().shape) +
                       " does not broadcast to the scores' " + shapeStr(scores));
    if (m->type().dtype != DType::Bool && m->type().dtype != DType::F32 && m->type().dtype != q.dtype)
      nodeError(n, std::string("Expected attn_mask dtype to be bool or float or to match query dtype, got ") +
                       dtypeTorchName(m->type().dtype));
  }
}

/// The f64 value of both ops: the output and, when `lse` is given, logsumexp of each row's
/// masked, scaled scores (0 for a fully masked row, as torch's flash kernel).
RefTensor attentionRef(const Node &n, const Positions &at, const RefArgs &a, RefTensor *lse) {
  if (n.scalarArg(at.dropout) != 0.0)
    nodeError(n, std::string(at.op) + " with dropout_p > 0 draws random numbers: it has a value "
                 "only after decompose gave its dropout a stream (docs/randomness.md)");
  const RefTensor &q = *a.at(0), &k = *a.at(1), &v = *a.at(2);
  const RefTensor *mask = a.at(at.mask);
  int64_t r = (int64_t)q.shape.size();
  int64_t L = q.shape[r - 2], E = q.shape[r - 1], S = k.shape[r - 2], Ev = v.shape[r - 1];
  int64_t Hq = r >= 3 ? q.shape[r - 3] : 1, Hk = r >= 3 ? k.shape[r - 3] : 1;
  int64_t batch = 1;
  for (int64_t d = 0; d < r - 3; ++d) batch *= q.shape[d];
  double scale = n.isNoneArg(at.scale) ? 1.0 / std::sqrt((double)E) : n.scalarArg(at.scale);
  bool causal = n.boolArg(at.causal);
  Shape scores(q.shape.begin(), q.shape.end() - 1);
  scores.push_back(S);
  std::vector<int64_t> mmap = mask ? broadcastIndexMap(mask->shape, scores) : std::vector<int64_t>{};
  RefTensor out(n.types[0].dtype, n.types[0].shape);
  std::vector<double> row(S);
  for (int64_t b = 0; b < batch; ++b)
    for (int64_t h = 0; h < Hq; ++h) {
      int64_t hk = h / (Hq / Hk);
      const double *qp = &q.data[((b * Hq + h) * L) * E];
      const double *kp = &k.data[((b * Hk + hk) * S) * E];
      const double *vp = &v.data[((b * Hk + hk) * S) * Ev];
      for (int64_t i = 0; i < L; ++i) {
        double m = -INFINITY;
        for (int64_t j = 0; j < S; ++j) {
          double s = 0;
          for (int64_t e = 0; e < E; ++e) s += qp[i * E + e] * kp[j * E + e];
          s *= scale;
          int64_t sflat = ((b * Hq + h) * L + i) * S + j;
          if (causal && j > i) s = -INFINITY;
          if (mask) {
            double mv = mask->data[mmap[sflat]];
            if (mask->dtype == DType::Bool) s = mv != 0 ? s : -INFINITY;
            else s += mv;
          }
          row[j] = s;
          m = std::max(m, s);
        }
        double sum = 0;
        for (int64_t j = 0; j < S; ++j) sum += row[j] = m == -INFINITY ? 0.0 : std::exp(row[j] - m);
        if (lse) lse->data[(b * Hq + h) * L + i] = m == -INFINITY ? 0.0 : m + std::log(sum);
        double *op = &out.data[((b * Hq + h) * L + i) * Ev];
        for (int64_t e = 0; e < Ev; ++e) {
          double acc = 0;
          if (m != -INFINITY)
            for (int64_t j = 0; j < S; ++j) acc += row[j] / sum * vp[j * Ev + e];
          op[e] = acc;
        }
      }
    }
  return out;
}

using ListArgs = std::vector<std::vector<const RefTensor *>>;

} // namespace

void registerAttentionOps(OpRegistry &r) {
  {
    OpDef &d = r.add("scaled_dot_product_attention(Tensor query, Tensor key, Tensor value, Tensor? attn_mask=None, "
                     "float dropout_p=0., bool is_causal=False, *, float? scale=None, bool enable_gqa=False) -> Tensor",
                     OpCategory::Composite);
    d.infer = [](const Node &n) -> Types {
      checkAttention(n, kSdpa);
      TensorType q = argType(n, 0), v = argType(n, 2);
      q.shape.back() = v.shape.back();
      return {q};
    };
    d.eval = [](const Node &n, const RefArgs &a, const ListArgs &) {
      return std::vector<RefTensor>{attentionRef(n, kSdpa, a, nullptr)};
    };
  }
  {
    // torch's CPU flash kernel (aten/src/ATen/native/transformers/attention.cpp
    // _scaled_dot_product_flash_attention_cpu): 4-D [B, H, L, E] inputs with one head size,
    // fewer key/value heads repeated, no dropout, a float mask (f32 or q's dtype, 2-D or 4-D) that
    // may come with is_causal (both apply); the output [B, Hq, L, E] and logsumexp [B, Hq, L]
    // in q's dtype (torch's accumulation dtype for f32 and f64); a fully masked row gives
    // output 0 and logsumexp 0 (measured with torch 2.15).
    OpDef &d = r.add("_scaled_dot_product_flash_attention_for_cpu(Tensor query, Tensor key, Tensor value, "
                     "float dropout_p=0.0, bool is_causal=False, *, Tensor? attn_mask=None, float? scale=None) "
                     "-> (Tensor output, Tensor logsumexp)",
                     OpCategory::Composite);
    d.infer = [](const Node &n) -> Types {
      checkAttention(n, kFlash);
      TensorType q = argType(n, 0), k = argType(n, 1), v = argType(n, 2);
      if (q.rank() != 4 || k.rank() != 4 || v.rank() != 4)
        nodeError(n, "scaled_dot_product_flash_attention_flash_attention: Accept only 4 dims inputs shape of "
                     "{B, H, T, K}, got " + shapeStr(q.shape) + ", " + shapeStr(k.shape) + ", " + shapeStr(v.shape));
      if (n.scalarArg(3) != 0.0)
        nodeError(n, "scaled_dot_product_attention_flash_attention: Currently do not support dropout > 0 (dropout_p = " +
                         argStr(n.args[3]) + ")");
      if (q.shape.back() != v.shape.back())
        nodeError(n, "scaled_dot_product_attention_flash_attention: Q/K/V should have the same head size, got " +
                         shapeStr(q.shape) + ", " + shapeStr(k.shape) + ", " + shapeStr(v.shape));
      if (const Node *m = optTensor(n, 5)) {
        if (m->type().dtype != q.dtype && m->type().dtype != DType::F32) // torch: kFloat or q's dtype
          nodeError(n, std::string("scaled_dot_product_attention_flash_attention: Attention mask is the same data "
                                   "type as query (got ") + dtypeTorchName(m->type().dtype) + ")");
        if (m->type().rank() != 2 && m->type().rank() != 4)
          nodeError(n, "scaled_dot_product_attention_flash_attention: Attention mask dim in {2, 4}, got " +
                           shapeStr(m->type().shape));
      }
      TensorType out = q;
      out.shape.back() = v.shape.back();
      return {out, {q.dtype, Shape(q.shape.begin(), q.shape.end() - 1)}};
    };
    d.eval = [](const Node &n, const RefArgs &a, const ListArgs &) {
      RefTensor lse(n.types[1].dtype, n.types[1].shape);
      RefTensor out = attentionRef(n, kFlash, a, &lse);
      return std::vector<RefTensor>{out, lse};
    };
  }
}

} // namespace ops
} // namespace aotc
