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

void checkAttention(const Node &n) {
  TensorType q = argType(n, 0), k = argType(n, 1), v = argType(n, 2);
  for (const TensorType *t : {&q, &k, &v})
    if (t->rank() < 2) nodeError(n, "scaled_dot_product_attention: query, key and value must be at least 2-D");
  requireFloating(n, q.dtype, "scaled_dot_product_attention");
  if (k.dtype != q.dtype || v.dtype != q.dtype)
    nodeError(n, "Expected query, key, and value to have the same dtype, but got query.dtype: " +
                     std::string(dtypeTorchName(q.dtype)) + " key.dtype: " + dtypeTorchName(k.dtype) +
                     " and value.dtype: " + dtypeTorchName(v.dtype) + " instead.");
  if (k.rank() != q.rank() || v.rank() != q.rank())
    nodeError(n, "scaled_dot_product_attention: query, key and value must have the same rank");
  int64_t r = q.rank();
  if (q.shape[r - 1] != k.shape[r - 1])
    nodeError(n, "scaled_dot_product_attention: query and key must have the same embedding size, got " +
                     shapeStr(q.shape) + " and " + shapeStr(k.shape));
  if (k.shape[r - 2] != v.shape[r - 2])
    nodeError(n, "scaled_dot_product_attention: key and value must have the same sequence length, got " +
                     shapeStr(k.shape) + " and " + shapeStr(v.shape));
  bool gqa = n.boolArg(7);
  for (int64_t d = 0; d < r - 2; ++d) {
    bool headDim = d == r - 3;
    if (k.shape[d] != v.shape[d])
      nodeError(n, "scaled_dot_product_attention: key " + shapeStr(k.shape) + " and value " + shapeStr(v.shape) +
                       " must have the same leading dims");
    if (headDim && gqa) {
      if (k.shape[d] == 0 || q.shape[d] % k.shape[d] != 0)
        nodeError(n, "scaled_dot_product_attention: with enable_gqa the number of query heads (" +
                         std::to_string(q.shape[d]) + ") must be a multiple of the key/value heads (" +
                         std::to_string(k.shape[d]) + ")");
    } else if (q.shape[d] != k.shape[d]) {
      nodeError(n, "scaled_dot_product_attention: query " + shapeStr(q.shape) + " and key " + shapeStr(k.shape) +
                       " must have the same leading dims" + (headDim ? " (enable_gqa=True repeats key heads)" : ""));
    }
  }
  if (!(n.scalarArg(4) >= 0.0 && n.scalarArg(4) <= 1.0))
    nodeError(n, "scaled_dot_product_attention: dropout probability has to be between 0 and 1, but got " +
                     argStr(n.args[4]));
  if (const Node *m = optTensor(n, 3)) {
    if (n.boolArg(5))
      nodeError(n, "_scaled_dot_product_attention: Explicit attn_mask should not be set when is_causal=True");
    Shape scores(q.shape.begin(), q.shape.end() - 1);
    scores.push_back(k.shape[r - 2]);
    auto b = broadcastShapes(scores, m->type().shape);
    if (!b || *b != scores)
      nodeError(n, "scaled_dot_product_attention: attn_mask of shape " + shapeStr(m->type().shape) +
                       " does not broadcast to the scores' " + shapeStr(scores));
    if (m->type().dtype != DType::Bool && m->type().dtype != q.dtype)
      nodeError(n, std::string("Expected attn_mask dtype to be bool or float or to match query dtype, got ") +
                       dtypeTorchName(m->type().dtype));
  }
}

} // namespace

void registerAttentionOps(OpRegistry &r) {
  OpDef &d = r.add("scaled_dot_product_attention(Tensor query, Tensor key, Tensor value, Tensor? attn_mask=None, "
                   "float dropout_p=0., bool is_causal=False, *, float? scale=None, bool enable_gqa=False) -> Tensor",
                   OpCategory::Composite);
  d.infer = [](const Node &n) -> Types {
    checkAttention(n);
    TensorType q = argType(n, 0), v = argType(n, 2);
    q.shape.back() = v.shape.back();
    return {q};
  };
  d.eval = [](const Node &n, const RefArgs &a, const std::vector<std::vector<const RefTensor *>> &) {
    if (n.scalarArg(4) != 0.0)
      nodeError(n, "scaled_dot_product_attention with dropout_p > 0 draws random numbers: it has a value "
                   "only after decompose gave its dropout a stream (docs/randomness.md)");
    const RefTensor &q = *a.at(0), &k = *a.at(1), &v = *a.at(2);
    const RefTensor *mask = a.at(3);
    int64_t r = (int64_t)q.shape.size();
    int64_t L = q.shape[r - 2], E = q.shape[r - 1], S = k.shape[r - 2], Ev = v.shape[r - 1];
    int64_t Hq = r >= 3 ? q.shape[r - 3] : 1, Hk = r >= 3 ? k.shape[r - 3] : 1;
    int64_t batch = 1;
    for (int64_t d = 0; d < r - 3; ++d) batch *= q.shape[d];
    double scale = n.isNoneArg(6) ? 1.0 / std::sqrt((double)E) : n.scalarArg(6);
    bool causal = n.boolArg(5);
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
          double *op = &out.data[((b * Hq + h) * L + i) * Ev];
          for (int64_t e = 0; e < Ev; ++e) {
            double acc = 0;
            if (m != -INFINITY)
              for (int64_t j = 0; j < S; ++j) acc += row[j] / sum * vp[j * Ev + e];
            op[e] = acc;
          }
        }
      }
    return std::vector<RefTensor>{out};
  };
}

} // namespace ops
} // namespace aotc
