//===- Types.h - Dtypes and tensor types of the aotc IR ---------*- C++ -*-===//
//
// aotc supports four dtypes: f32, f64, i64 and bool (1 byte). A 0-d tensor has an empty
// shape. A dim of a dynamic export's program may be an expression over its run-time size
// symbols (TensorType::sym, docs/dynamic-shapes.md).
// Names follow torch/utils/_dtype_abbrs.py ("f32", "f64", "i64", "b8").
//===----------------------------------------------------------------------===//
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace aotc {

/// Element types. aotc computes on F32, F64, I64 and Bool. I32 and U8 are *index* dtypes:
/// they are accepted only where an op declares index arguments (OpDef::indexArgs: gather,
/// scatter_add, index_select, embedding; _to_copy reads them too), never as an op's result
/// (docs/formats.md, "Dtypes").
enum class DType : uint8_t { F32, F64, I64, Bool, I32, U8 };

/// Size of one element in bytes (bool is 1 byte, as in PyTorch).
int64_t itemSize(DType dt);
/// FX abbreviation: "f32", "f64", "i64", "b8", "i32", "u8".
const char *dtypeAbbr(DType dt);
/// Python spelling: "torch.float32", "torch.float64", "torch.int64", "torch.bool", ...
const char *dtypeTorchName(DType dt);
/// safetensors spelling: "F32", "F64", "I64", "BOOL", "I32", "U8".
const char *dtypeSafetensorsName(DType dt);
/// Parses any of the three spellings above (and "float32"/"int64"/... without "torch.").
std::optional<DType> parseDType(const std::string &s);
bool isFloating(DType dt);
bool isIntegral(DType dt); ///< i64, i32, u8 and bool.
/// I32 and U8: storage-only index dtypes (see DType).
bool isNarrowInt(DType dt);

/// PyTorch promotion categories: bool < integral < floating.
int dtypeCategory(DType dt);
/// torch.promote_types for two tensor dtypes.
DType promoteTypes(DType a, DType b);

using Shape = std::vector<int64_t>;

int64_t numelOf(const Shape &s);
/// "[4, 16]" (the FX spelling).
std::string shapeStr(const Shape &s);

/// The static type of one tensor value.
/// v rounded up to a multiple of a (a > 0): buffer offsets and sizes in the arenas.
inline int64_t alignUp(int64_t v, int64_t a) { return (v + a - 1) / a * a; }

struct TensorType {
  TensorType() = default;
  TensorType(DType d, Shape s, std::vector<std::string> e = {}) : dtype(d), shape(std::move(s)), sym(std::move(e)) {}

  DType dtype = DType::F32;
  /// The sizes. A symbolic dim (see `sym`) holds its value at the program's reference sizes:
  /// every run-time symbol at the maximum of its range (Program::SpecializedSize).
  Shape shape;
  /// Empty for a static type; else one entry per dim: "" for a static dim, or the dim's
  /// expression over the program's run-time size symbols in SymExpr::str() form ("s17",
  /// "2*s17 - 1").
  std::vector<std::string> sym;

  bool symbolic() const { return !sym.empty(); }
  /// The dim as text: its expression, or its size.
  std::string dimStr(size_t i) const;

  int64_t numel() const { return numelOf(shape); }
  int64_t bytes() const { return numel() * itemSize(dtype); }
  int64_t rank() const { return (int64_t)shape.size(); }
  /// FX annotation text without quotes: "f32[4, 16]", "f32[s17, 16]".
  std::string str() const;
  bool operator==(const TensorType &o) const { return dtype == o.dtype && shape == o.shape && sym == o.sym; }
  bool operator!=(const TensorType &o) const { return !(*this == o); }
};

/// Row-major contiguous strides, in elements.
std::vector<int64_t> contiguousStrides(const Shape &s);
/// Normalizes a possibly negative dim against a rank (torch's maybe_wrap_dim);
/// returns std::nullopt when out of range. Rank 0 accepts dims -1 and 0.
std::optional<int64_t> wrapDim(int64_t dim, int64_t rank);
/// torch broadcasting of two shapes; std::nullopt when incompatible.
std::optional<Shape> broadcastShapes(const Shape &a, const Shape &b);

} // namespace aotc
