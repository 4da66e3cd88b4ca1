//===- Common.cpp - Shared shape/dtype and evaluation helpers of the ops -----===//
//
// See Ops.h. Promotion follows aten/src/ATen/native/TypeProperties.cpp
// (update_result_type_state / combine_categories); reductions follow
// aten/src/ATen/WrapDimUtilsMulti.h (dim_list_to_bitset).
//===----------------------------------------------------------------------===//
#include "Ops.h"

namespace aotc {
namespace ops {

bool isNumberArg(const Node &n, size_t i) {
  const Arg &a = n.args.at(i);
  return std::holds_alternative<int64_t>(a) || std::holds_alternative<double>(a) ||
         std::holds_alternative<bool>(a);
}

DType numberDType(const Arg &a) {
  if (std::holds_alternative<bool>(a)) return DType::Bool;
  if (std::holds_alternative<int64_t>(a)) return DType::I64;
  return DType::F64;
}

TensorType argType(const Node &n, size_t i) {
  if (isNumberArg(n, i)) return TensorType{numberDType(n.args[i]), {}};
  return n.tensorArg(i)->type();
}

/// combine_categories(higher, lower) of TypeProperties.cpp.
static std::optional<DType> combineCategories(std::optional<DType> higher, std::optional<DType> lower) {
  if (!higher) return lower;
  if (isFloating(*higher)) return higher;
  if (!lower) return higher;
  if (*higher == DType::Bool || isFloating(*lower)) return promoteTypes(*higher, *lower);
  return higher;
}

DType resultType(const Node &n, const std::vector<size_t> &idx) {
  std::optional<DType> dimR, zeroR, wrappedR;
  auto upd = [](std::optional<DType> &r, DType d) { r = r ? promoteTypes(*r, d) : d; };
  for (size_t i : idx) {
    if (n.isNoneArg(i)) continue;
    if (isNumberArg(n, i)) {
      DType d = numberDType(n.args[i]);
      // A wrapped float number counts as the default dtype.
      upd(wrappedR, isFloating(d) ? kDefaultFloat : d);
      continue;
    }
    const TensorType &t = n.tensorArg(i)->type();
    upd(t.rank() > 0 ? dimR : zeroR, t.dtype);
  }
  auto r = combineCategories(dimR, combineCategories(zeroR, wrappedR));
  AOTC_ASSERT(r.has_value(), "result type of '" + n.name + "' has no operands");
  return *r;
}

Shape broadcastArgs(const Node &n, const std::vector<size_t> &idx) {
  Shape out;
  for (size_t i : idx) {
    if (n.isNoneArg(i)) continue;
    Shape s = argType(n, i).shape;
    auto b = broadcastShapes(out, s);
    if (!b)
      nodeError(n, "shapes " + shapeStr(out) + " and " + shapeStr(s) + " cannot be broadcast together");
    out = *b;
  }
  return out;
}

int64_t wrapDimOrError(const Node &n, int64_t dim, int64_t rank) {
  auto w = wrapDim(dim, rank);
  if (!w) {
    int64_t r = rank == 0 ? 1 : rank;
    nodeError(n, "dimension out of range (expected to be in range of [" + std::to_string(-r) + ", " +
                     std::to_string(r - 1) + "], but got " + std::to_string(dim) + ")");
  }
  return *w;
}

std::vector<bool> reductionMask(const Node &n, size_t dimArg, int64_t rank) {
  std::vector<bool> mask(rank, false);
  std::vector<int64_t> dims;
  if (n.isNoneArg(dimArg)) {
    return std::vector<bool>(rank, true);
  } else if (auto *i = std::get_if<int64_t>(&n.args[dimArg])) {
    dims = {*i};
  } else {
    dims = n.intListArg(dimArg);
    if (dims.empty()) return std::vector<bool>(rank, true);
  }
  for (int64_t d : dims) {
    int64_t w = wrapDimOrError(n, d, rank);
    if (rank == 0) continue;
    if (mask[w]) nodeError(n, "dim " + std::to_string(w) + " appears multiple times in the list of dims");
    mask[w] = true;
  }
  return mask;
}

Shape reducedShape(const Shape &s, const std::vector<bool> &mask, bool keepdim) {
  Shape r;
  for (size_t d = 0; d < s.size(); ++d) {
    if (!mask[d])
      r.push_back(s[d]);
    else if (keepdim)
      r.push_back(1);
  }
  return r;
}

std::optional<DType> dtypeArg(const Node &n, size_t i) {
  if (n.isNoneArg(i)) return std::nullopt;
  if (auto *d = std::get_if<DTypeLit>(&n.args[i])) return d->dtype;
  nodeError(n, "argument " + std::to_string(i) + " is not a dtype");
}

void requireFloating(const Node &n, DType d, const std::string &what) {
  if (!isFloating(d))
    nodeError(n, what + ": expected a floating point dtype, got " + dtypeTorchName(d));
}

bool canCast(DType from, DType to) { return dtypeCategory(from) <= dtypeCategory(to); }

Val valArg(const Node &n, const RefArgs &a, size_t i, const Shape &out) {
  Val v;
  if (isNumberArg(n, i)) {
    v.s = n.scalarArg(i);
    return v;
  }
  v.t = a.at(i);
  AOTC_ASSERT(v.t, "node '" + n.name + "': argument " + std::to_string(i) + " has no value");
  v.map = broadcastIndexMap(v.t->shape, out);
  return v;
}

std::vector<int64_t> unravel(int64_t flat, const Shape &s) {
  std::vector<int64_t> idx(s.size());
  for (int64_t d = (int64_t)s.size() - 1; d >= 0; --d) {
    idx[d] = s[d] ? flat % s[d] : 0;
    flat = s[d] ? flat / s[d] : 0;
  }
  return idx;
}

int64_t ravel(const std::vector<int64_t> &idx, const Shape &s) {
  int64_t f = 0;
  for (size_t d = 0; d < s.size(); ++d) f = f * s[d] + idx[d];
  return f;
}

} // namespace ops
} // namespace aotc
