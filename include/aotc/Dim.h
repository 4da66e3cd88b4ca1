//===- Dim.h - A size of the kernel IR: a constant or a run-time expression -*- C++ -*-===//
//
// The kernel IR (include/aotc/Kernels.h) keeps every size that can depend on a run-time size
// symbol (docs/dynamic-shapes.md) as a Dim: a loop's trip count, an access's coefficient and
// offset, a GEMM's m / n / k, leading dimensions and offsets, a data-dependent index's bound.
// A Dim is a constant, or an expression over the program's run-time symbols in SymExpr's
// normal form (the text TensorType::sym keeps) together with its value at the reference sizes
// (every run-time symbol at the largest value of its range), which is what the arenas are
// planned at. Arithmetic keeps the normal form, so two Dims are equal when their forms are.
//
// A transitional conversion to int64_t gives a constant's value and is an internal error for
// a run-time Dim: code that does not handle run-time sizes yet (the targets' code generators)
// keeps compiling against constants, and fails loudly rather than use the reference value
// where a run-time value is meant. Code that decides on a plan (a schedule, a fusion choice)
// from the reference value says so with ref().
//===----------------------------------------------------------------------===//
#pragma once

#include "aotc/Types.h"

#include <cstdint>
#include <map>
#include <optional>
#include <ostream>
#include <string>
#include <vector>

namespace aotc {

class SymExpr;
struct Node;

class Dim {
public:
  Dim(int64_t v = 0) : ref_(v) {} // NOLINT: a constant size is a Dim
  Dim(int v) : ref_(v) {}         // NOLINT
  Dim(size_t v) : ref_((int64_t)v) {} // NOLINT
  /// `text` (an expression over run-time symbols, any form SymExpr::parse reads) with value
  /// `ref` at the reference sizes; a constant when the expression has no symbols.
  static Dim expr(const std::string &text, int64_t ref);
  static Dim expr(const SymExpr &e, int64_t ref);

  bool symbolic() const { return !sym_.empty(); }
  /// The value at the reference sizes (the constant itself for a constant).
  int64_t ref() const { return ref_; }
  /// The normal-form text; "" for a constant.
  const std::string &sym() const { return sym_; }
  std::optional<int64_t> constant() const {
    return symbolic() ? std::nullopt : std::optional<int64_t>(ref_);
  }
  bool is(int64_t v) const { return !symbolic() && ref_ == v; }
  /// The expression (a constant's is an integer).
  SymExpr toExpr() const;
  /// The text: the expression, or the number.
  std::string str() const;
  /// The value with every run-time symbol given (SymExprError when one is missing).
  int64_t eval(const std::map<std::string, int64_t> &sizes) const;

  /// Transitional (see the file comment): the constant; internal error when run-time.
  operator int64_t() const; // NOLINT

  bool operator==(const Dim &o) const { return ref_ == o.ref_ && sym_ == o.sym_; }
  bool operator!=(const Dim &o) const { return !(*this == o); }
  bool operator==(int64_t v) const { return is(v); }
  bool operator!=(int64_t v) const { return !is(v); }
  bool operator==(int v) const { return is(v); }
  bool operator!=(int v) const { return !is(v); }

private:
  int64_t ref_ = 0;
  std::string sym_;
};

Dim operator+(const Dim &a, const Dim &b);
Dim operator-(const Dim &a, const Dim &b);
Dim operator*(const Dim &a, const Dim &b);
inline Dim operator+(const Dim &a, int64_t b) { return a + Dim(b); }
inline Dim operator+(int64_t a, const Dim &b) { return Dim(a) + b; }
inline Dim operator-(const Dim &a, int64_t b) { return a - Dim(b); }
inline Dim operator-(int64_t a, const Dim &b) { return Dim(a) - b; }
inline Dim operator*(const Dim &a, int64_t b) { return a * Dim(b); }
inline Dim operator*(int64_t a, const Dim &b) { return Dim(a) * b; }
inline Dim operator+(const Dim &a, int b) { return a + Dim(b); }
inline Dim operator-(const Dim &a, int b) { return a - Dim(b); }
inline Dim operator*(const Dim &a, int b) { return a * Dim(b); }
inline Dim operator*(int a, const Dim &b) { return Dim(a) * b; }
inline Dim &operator+=(Dim &a, const Dim &b) { return a = a + b; }
inline Dim &operator*=(Dim &a, const Dim &b) { return a = a * b; }
std::ostream &operator<<(std::ostream &os, const Dim &d);

using Dims = std::vector<Dim>;

/// The dims of a type: its expressions (TensorType::sym) with their reference values.
Dims dimsOf(const TensorType &t);
/// Constants of a static shape.
Dims dimsOf(const Shape &s);
/// The values at the reference sizes.
Shape refShape(const Dims &d);
/// The constants of all-constant dims (transitional, as operator int64_t: an internal error for a
/// run-time dim).
Shape constShape(const Dims &d);
/// The expressions as TensorType::sym keeps them ("" for a constant; empty when all are).
std::vector<std::string> symTexts(const Dims &d);
bool anySymbolic(const Dims &d);
Dim numelOf(const Dims &d);
/// Row-major contiguous strides, in elements.
Dims contiguousStrides(const Dims &d);
/// "[s17, 16]".
std::string dimsStr(const Dims &d);
/// Int argument i of n as a size: its run-time expression (Node::symArgs) or its constant.
Dim dimArg(const Node &n, size_t i);

} // namespace aotc
