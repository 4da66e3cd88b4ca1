//===- Types.cpp - Dtypes, shapes, promotion, broadcasting ------------------===//
//
// Promotion follows torch.promote_types restricted to {bool, u8, i32, i64, f32, f64}.
//===----------------------------------------------------------------------===//
#include "aotc/Types.h"

#include "aotc/Diagnostics.h"

namespace aotc {

int64_t itemSize(DType dt) {
  switch (dt) {
  case DType::F32: return 4;
  case DType::F64: return 8;
  case DType::I64: return 8;
  case DType::Bool: return 1;
  case DType::I32: return 4;
  case DType::U8: return 1;
  }
  return 0;
}

const char *dtypeAbbr(DType dt) {
  switch (dt) {
  case DType::F32: return "f32";
  case DType::F64: return "f64";
  case DType::I64: return "i64";
  case DType::Bool: return "b8";
  case DType::I32: return "i32";
  case DType::U8: return "u8";
  }
  return "?";
}

const char *dtypeTorchName(DType dt) {
  switch (dt) {
  case DType::F32: return "torch.float32";
  case DType::F64: return "torch.float64";
  case DType::I64: return "torch.int64";
  case DType::Bool: return "torch.bool";
  case DType::I32: return "torch.int32";
  case DType::U8: return "torch.uint8";
  }
  return "?";
}

const char *dtypeSafetensorsName(DType dt) {
  switch (dt) {
  case DType::F32: return "F32";
  case DType::F64: return "F64";
  case DType::I64: return "I64";
  case DType::Bool: return "BOOL";
  case DType::I32: return "I32";
  case DType::U8: return "U8";
  }
  return "?";
}

std::optional<DType> parseDType(const std::string &in) {
  std::string s = in;
  if (s.rfind("torch.", 0) == 0)
    s = s.substr(6);
  if (s == "f32" || s == "F32" || s == "float32" || s == "float") return DType::F32;
  if (s == "f64" || s == "F64" || s == "float64" || s == "double") return DType::F64;
  if (s == "i64" || s == "I64" || s == "int64" || s == "long") return DType::I64;
  if (s == "b8" || s == "BOOL" || s == "bool") return DType::Bool;
  if (s == "i32" || s == "I32" || s == "int32" || s == "int") return DType::I32;
  if (s == "u8" || s == "U8" || s == "uint8") return DType::U8;
  return std::nullopt;
}

bool isFloating(DType dt) { return dt == DType::F32 || dt == DType::F64; }
bool isIntegral(DType dt) { return !isFloating(dt); }
bool isNarrowInt(DType dt) { return dt == DType::I32 || dt == DType::U8; }

int dtypeCategory(DType dt) {
  if (dt == DType::Bool) return 0;
  if (isIntegral(dt)) return 1;
  return 2;
}

namespace {
/// Rank among the integral dtypes: bool < u8 < i32 < i64 (torch.promote_types on these
/// gives the higher one).
int intRank(DType dt) { return dt == DType::Bool ? 0 : dt == DType::U8 ? 1 : dt == DType::I32 ? 2 : 3; }
} // namespace

DType promoteTypes(DType a, DType b) {
  if (a == b) return a;
  if (isFloating(a) && isFloating(b)) return DType::F64;
  if (isFloating(a)) return a;
  if (isFloating(b)) return b;
  return intRank(a) >= intRank(b) ? a : b;
}

int64_t numelOf(const Shape &s) {
  // Checked: shapes come from user files. Readers bound each dimension and report a located
  // error first; this is the last line against a product that does not fit in int64.
  int64_t n = 1;
  for (int64_t d : s)
    if (__builtin_mul_overflow(n, d, &n))
      userError("shape " + shapeStr(s) + " has more than 2^63 elements");
  return n;
}

std::string shapeStr(const Shape &s) {
  std::string r = "[";
  for (size_t i = 0; i < s.size(); ++i) {
    if (i) r += ", ";
    r += std::to_string(s[i]);
  }
  return r + "]";
}

std::string TensorType::dimStr(size_t i) const {
  return i < sym.size() && !sym[i].empty() ? sym[i] : std::to_string(shape[i]);
}

std::string TensorType::str() const {
  if (!symbolic()) return std::string(dtypeAbbr(dtype)) + shapeStr(shape);
  std::string s = std::string(dtypeAbbr(dtype)) + "[";
  for (size_t i = 0; i < shape.size(); ++i) s += (i ? ", " : "") + dimStr(i);
  return s + "]";
}

std::vector<int64_t> contiguousStrides(const Shape &s) {
  std::vector<int64_t> st(s.size(), 1);
  for (int64_t i = (int64_t)s.size() - 2; i >= 0; --i)
    st[i] = st[i + 1] * s[i + 1];
  return st;
}

std::optional<int64_t> wrapDim(int64_t dim, int64_t rank) {
  int64_t r = rank == 0 ? 1 : rank;
  if (dim < -r || dim >= r) return std::nullopt;
  return dim < 0 ? dim + r : dim;
}

std::optional<Shape> broadcastShapes(const Shape &a, const Shape &b) {
  size_t n = std::max(a.size(), b.size());
  Shape out(n);
  for (size_t i = 0; i < n; ++i) {
    int64_t da = i < n - a.size() ? 1 : a[i - (n - a.size())];
    int64_t db = i < n - b.size() ? 1 : b[i - (n - b.size())];
    if (da != db && da != 1 && db != 1) return std::nullopt;
    out[i] = da == 1 ? db : da;
  }
  return out;
}

} // namespace aotc
