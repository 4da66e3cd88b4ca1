//===- Dim.cpp - Sizes of the kernel IR (include/aotc/Dim.h) ------------===//
#include "aotc/Dim.h"

#include "aotc/Diagnostics.h"
#include "aotc/Graph.h"
#include "aotc/SymExpr.h"

namespace aotc {

Dim Dim::expr(const SymExpr &e, int64_t ref) {
  Dim d(ref);
  SymExpr c = e.canonical();
  if (auto v = c.constant()) {
    AOTC_ASSERT(*v == ref, "Dim: constant " + std::to_string(*v) + " given reference value " + std::to_string(ref));
    return d;
  }
  d.sym_ = c.str();
  return d;
}

Dim Dim::expr(const std::string &text, int64_t ref) {
  return text.empty() ? Dim(ref) : expr(SymExpr::parse(text), ref);
}

SymExpr Dim::toExpr() const { return symbolic() ? SymExpr::parse(sym_) : SymExpr::integer(ref_); }

std::string Dim::str() const { return symbolic() ? sym_ : std::to_string(ref_); }

int64_t Dim::eval(const std::map<std::string, int64_t> &sizes) const {
  return symbolic() ? SymExpr::parse(sym_).eval(sizes) : ref_;
}

Dim::operator int64_t() const {
  if (symbolic())
    internalError("a run-time size (" + sym_ + ") where this code handles only constant sizes");
  return ref_;
}

namespace {
Dim combine(SymExpr::Op op, const Dim &a, const Dim &b, int64_t ref) {
  return Dim::expr(SymExpr::binary(op, a.toExpr(), b.toExpr()), ref);
}
} // namespace

Dim operator+(const Dim &a, const Dim &b) {
  if (!a.symbolic() && !b.symbolic()) return Dim(a.ref() + b.ref());
  if (a.is(0)) return b;
  if (b.is(0)) return a;
  return combine(SymExpr::Op::Add, a, b, a.ref() + b.ref());
}

Dim operator-(const Dim &a, const Dim &b) {
  if (!a.symbolic() && !b.symbolic()) return Dim(a.ref() - b.ref());
  if (b.is(0)) return a;
  return combine(SymExpr::Op::Add, a, Dim(-1) * b, a.ref() - b.ref());
}

Dim operator*(const Dim &a, const Dim &b) {
  if (!a.symbolic() && !b.symbolic()) return Dim(a.ref() * b.ref());
  if (a.is(0) || b.is(0)) return Dim(0);
  if (a.is(1)) return b;
  if (b.is(1)) return a;
  return combine(SymExpr::Op::Mul, a, b, a.ref() * b.ref());
}

std::ostream &operator<<(std::ostream &os, const Dim &d) { return os << d.str(); }

Dims dimsOf(const TensorType &t) {
  Dims d;
  for (size_t k = 0; k < t.shape.size(); ++k)
    d.push_back(k < t.sym.size() ? Dim::expr(t.sym[k], t.shape[k]) : Dim(t.shape[k]));
  return d;
}

Dims dimsOf(const Shape &s) { return Dims(s.begin(), s.end()); }

Shape refShape(const Dims &d) {
  Shape s;
  for (const Dim &x : d) s.push_back(x.ref());
  return s;
}

Shape constShape(const Dims &d) {
  Shape s;
  for (const Dim &x : d) s.push_back((int64_t)x);
  return s;
}

std::vector<std::string> symTexts(const Dims &d) {
  if (!anySymbolic(d)) return {};
  std::vector<std::string> r;
  for (const Dim &x : d) r.push_back(x.sym());
  return r;
}

bool anySymbolic(const Dims &d) {
  for (const Dim &x : d)
    if (x.symbolic()) return true;
  return false;
}

Dim numelOf(const Dims &d) {
  Dim n(1);
  for (const Dim &x : d) n = n * x;
  return n;
}

Dims contiguousStrides(const Dims &d) {
  Dims st(d.size(), Dim(1));
  for (int k = (int)d.size() - 2; k >= 0; --k) st[k] = st[k + 1] * d[k + 1];
  return st;
}

std::string dimsStr(const Dims &d) {
  std::string s = "[";
  for (size_t k = 0; k < d.size(); ++k) s += (k ? ", " : "") + d[k].str();
  return s + "]";
}

Dim dimArg(const Node &n, size_t i) { return Dim::expr(n.symArgText(i), n.intArg(i)); }

} // namespace aotc
