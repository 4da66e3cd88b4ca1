//===- IndexSplit.cpp - Index-set splitting of map kernels ----------------===//
//
// This file implements splitIndexSets (FusionInternal.h). A map kernel whose
// value selects between operands by comparing a loop index with constants
// (slice_scatter / select_scatter, ViewScatter.cpp: out = inside ? src : self)
// evaluates every operand and the comparisons at every element: the attention
// backward's q/k/v gradients scattered into one [B, T, 3C] buffer do three loads
// per element, one of them a transposed stride-T read, and i64 index arithmetic
// that narrows the vector loop (about 2 GB/s, against a STREAM triad of 11-22).
//
// The pass cuts the loop of one dimension d at the points where such a
// comparison changes value, and runs each piece as a phase of its own:
//   outer = domain[0, d),  phase p: inner = [b_p - a_p] ++ domain(d, rank)
// with every address of piece [a_p, b_p) offset by coef[d] * a_p. Inside a
// piece every comparison of that index is a constant, so the selects fold, the
// untaken operands' loads disappear, and a clamped source index of the taken
// operand becomes affine again (a plain strided load). Values and store order
// per element are unchanged (each element is computed by the same expression,
// with the untaken side of each select dropped), so outputs are bit-identical.
//
// Only kernels it can split without loss are taken: one map phase, no
// accumulating store (their store order is part of the result), no checked index
// (a gather's bounds check must run wherever it ran before), at least kMinOuter
// iterations of the outer loop that a target runs in parallel, and integer
// arithmetic that fits in int64 (else nothing is folded). CPU targets only
// (FusionOptions::splitIndexSets).
//===----------------------------------------------------------------------===//
#include "FusionInternal.h"

#include "aotc/Diagnostics.h"

#include <algorithm>
#include <map>
#include <set>
#include <unordered_map>
#include <unordered_set>

namespace aotc::fusion {

namespace {

/// At most this many pieces per kernel (each is a phase with a loop of its own).
constexpr int64_t kMaxPieces = 16;
/// At least this many outer iterations must stay: the loop a target splits across its
/// threads (a [1, 512, 768] scatter on dim 1 keeps its 512 parallel rows instead).
constexpr int64_t kMinOuter = 64;

bool isCompare(ScalarOp op) {
  return op == ScalarOp::Eq || op == ScalarOp::Ne || op == ScalarOp::Lt || op == ScalarOp::Le ||
         op == ScalarOp::Gt || op == ScalarOp::Ge;
}

bool isIntType(DType t) { return t == DType::I64 || t == DType::I32; }

/// An affine i64 value offset + sum coef[k] * var[k].
struct Affine {
  int64_t offset = 0;
  std::vector<int64_t> coef;
};

/// Overflow-checked int64 arithmetic: false when the result does not fit (the caller gives
/// up: no fold, no cut).
bool addOk(int64_t a, int64_t b, int64_t &r) { return !__builtin_add_overflow(a, b, &r); }
bool mulOk(int64_t a, int64_t b, int64_t &r) { return !__builtin_mul_overflow(a, b, &r); }

/// e as an affine function of the loop variables (rank `rank`), if it is one: an Index
/// without data-dependent terms, an integer constant, and sums, differences, negations and
/// constant multiples of those; nullopt also when a coefficient or offset overflows.
std::optional<Affine> affineOf(const ERef &e, size_t rank) {
  if (!isIntType(e->type)) return std::nullopt;
  switch (e->op) {
  case ScalarOp::Const: return Affine{e->i, std::vector<int64_t>(rank, 0)};
  case ScalarOp::Index:
    if (!e->addr.dyn.empty() || e->addr.coef.size() != rank) return std::nullopt;
    return Affine{e->addr.offset.ref(), refShape(e->addr.coef)}; // constants (splitIndexSets)
  case ScalarOp::Neg: {
    auto a = affineOf(e->args[0], rank);
    if (!a || !mulOk(a->offset, -1, a->offset)) return std::nullopt;
    for (auto &c : a->coef)
      if (!mulOk(c, -1, c)) return std::nullopt;
    return a;
  }
  case ScalarOp::Add:
  case ScalarOp::Sub: {
    auto a = affineOf(e->args[0], rank), b = affineOf(e->args[1], rank);
    if (!a || !b) return std::nullopt;
    const int64_t s = e->op == ScalarOp::Add ? 1 : -1;
    int64_t t = 0;
    if (!mulOk(s, b->offset, t) || !addOk(a->offset, t, a->offset)) return std::nullopt;
    for (size_t k = 0; k < rank; ++k)
      if (!mulOk(s, b->coef[k], t) || !addOk(a->coef[k], t, a->coef[k])) return std::nullopt;
    return a;
  }
  case ScalarOp::Mul: {
    auto a = affineOf(e->args[0], rank), b = affineOf(e->args[1], rank);
    if (!a || !b) return std::nullopt;
    auto isConst = [](const Affine &x) {
      return std::all_of(x.coef.begin(), x.coef.end(), [](int64_t c) { return c == 0; });
    };
    if (!isConst(*a) && !isConst(*b)) return std::nullopt;
    if (!isConst(*a)) std::swap(a, b);
    for (auto &c : b->coef)
      if (!mulOk(c, a->offset, c)) return std::nullopt;
    if (!mulOk(b->offset, a->offset, b->offset)) return std::nullopt;
    return b;
  }
  default: return std::nullopt;
  }
}

/// The range [lo, hi] of an affine value over the domain `ext` (every extent >= 1); nullopt
/// when a bound does not fit in int64.
std::optional<std::pair<int64_t, int64_t>> rangeOf(const Affine &a, const Shape &ext) {
  int64_t lo = a.offset, hi = a.offset;
  for (size_t k = 0; k < ext.size(); ++k) {
    int64_t span = 0;
    if (!mulOk(a.coef[k], ext[k] - 1, span) || !addOk(span < 0 ? lo : hi, span, span < 0 ? lo : hi))
      return std::nullopt;
  }
  return std::make_pair(lo, hi);
}

bool compare(ScalarOp op, int64_t x, int64_t y) {
  switch (op) {
  case ScalarOp::Eq: return x == y;
  case ScalarOp::Ne: return x != y;
  case ScalarOp::Lt: return x < y;
  case ScalarOp::Le: return x <= y;
  case ScalarOp::Gt: return x > y;
  default: return x >= y;
  }
}

/// A comparison of an affine value of one loop variable with a constant: the variable and
/// the positions v in (0, extent) where its truth differs from its truth at v - 1.
struct Cut {
  size_t var = 0;
  std::vector<int64_t> at;
};

std::optional<Cut> cutOf(const EExpr &cmp, const Shape &ext) {
  const size_t rank = ext.size();
  auto a = affineOf(cmp.args[0], rank), b = affineOf(cmp.args[1], rank);
  if (!a || !b) return std::nullopt;
  // a - b = off + c * v, and its range must fit (the truth at v is then exact below)
  Affine diff = *a;
  if (__builtin_sub_overflow(diff.offset, b->offset, &diff.offset)) return std::nullopt;
  int vars = 0;
  Cut cut;
  for (size_t k = 0; k < rank; ++k) {
    if (__builtin_sub_overflow(diff.coef[k], b->coef[k], &diff.coef[k])) return std::nullopt;
    if (diff.coef[k] != 0 && ext[k] > 1) {
      ++vars;
      cut.var = k;
    }
  }
  if (vars != 1 || !rangeOf(diff, ext)) return std::nullopt;
  const int64_t c = diff.coef[cut.var], n = ext[cut.var];
  auto truth = [&](int64_t v) { return compare(cmp.op, diff.offset + c * v, 0); };
  if (cmp.op == ScalarOp::Eq || cmp.op == ScalarOp::Ne) {
    if (diff.offset % c != 0) return cut; // never equal: no cut
    const int64_t v0 = -diff.offset / c;
    for (int64_t v : {v0, v0 + 1})
      if (v > 0 && v < n) cut.at.push_back(v);
    return cut;
  }
  // Ordered: monotone in v, one change at most; the first v whose truth differs from v = 0's.
  const bool t0 = truth(0);
  if (truth(n - 1) == t0) return cut;
  int64_t lo = 0, hi = n - 1; // truth(lo) == t0, truth(hi) != t0
  while (hi - lo > 1) {
    const int64_t mid = lo + (hi - lo) / 2;
    (truth(mid) == t0 ? lo : hi) = mid;
  }
  cut.at.push_back(hi);
  return cut;
}

/// Every node of the trees of a phase (store values and addresses' data-dependent terms).
void forEachNode(const TPhase &p, const std::function<void(const EExpr &)> &fn) {
  std::unordered_set<const EExpr *> seen;
  std::function<void(const ERef &)> visit = [&](const ERef &e) {
    if (!seen.insert(e.get()).second) return;
    fn(*e);
    for (auto &d : e->addr.dyn) visit(d.value);
    for (auto &a : e->args) visit(a);
  };
  for (auto &s : p.stores) {
    visit(s.value);
    for (auto &d : s.addr.dyn) visit(d.value);
  }
}

/// Folds what the domain `ext` decides: comparisons of affine values, the boolean
/// operations and selects on constants, and data-dependent address terms that are affine
/// into the address's coefficients (all are unchecked: in range by construction).
class Folder {
public:
  explicit Folder(const Shape &ext) : ext_(ext) {}

  ERef run(const ERef &e) {
    auto it = memo_.find(e.get());
    if (it != memo_.end()) return it->second.second;
    ERef out = fold(e);
    memo_[e.get()] = {e, out}; // e kept alive: its address must not be reused by a later tree
    return out;
  }

  void foldAddr(EAddr &a) {
    std::vector<EDyn> keep;
    for (auto &d : a.dyn) {
      AOTC_ASSERT(d.error < 0, "index split: a checked index term (splitIndexSets refuses those)");
      d.value = run(d.value);
      if (auto aff = affineOf(d.value, ext_.size())) {
        int64_t t = 0, offset = a.offset.ref();
        Shape coef = refShape(a.coef);
        bool ok = mulOk(d.stride.ref(), aff->offset, t) && addOk(offset, t, offset);
        for (size_t k = 0; ok && k < a.coef.size(); ++k)
          ok = mulOk(d.stride.ref(), aff->coef[k], t) && addOk(coef[k], t, coef[k]);
        if (ok) {
          a.offset = offset;
          a.coef = dimsOf(coef);
          continue;
        }
      }
      keep.push_back(d);
    }
    a.dyn = std::move(keep);
  }

private:
  static ERef boolConst(bool v) { return mkIntConst(DType::Bool, v); }
  static bool isConst(const ERef &e) { return e->op == ScalarOp::Const; }

  ERef fold(const ERef &e) {
    if (e->op == ScalarOp::Load || e->op == ScalarOp::Index) {
      if (e->addr.dyn.empty()) return e;
      EAddr a = e->addr;
      foldAddr(a);
      return e->op == ScalarOp::Load ? mkLoad(e->type, std::move(a)) : mkIndex(std::move(a));
    }
    if (e->args.empty()) return e;
    std::vector<ERef> args;
    bool same = true;
    for (auto &x : e->args) {
      args.push_back(run(x));
      same = same && args.back() == x;
    }
    if (isCompare(e->op)) {
      auto a = affineOf(args[0], ext_.size()), b = affineOf(args[1], ext_.size());
      auto ra = a ? rangeOf(*a, ext_) : std::nullopt, rb = b ? rangeOf(*b, ext_) : std::nullopt;
      if (ra && rb) {
        auto [alo, ahi] = *ra;
        auto [blo, bhi] = *rb;
        // Decided when the comparison has one truth at every corner of both ranges.
        if (alo == ahi && blo == bhi) return boolConst(compare(e->op, alo, blo));
        if (e->op == ScalarOp::Lt || e->op == ScalarOp::Ge) {
          if (ahi < blo) return boolConst(e->op == ScalarOp::Lt);
          if (alo >= bhi) return boolConst(e->op == ScalarOp::Ge);
        } else if (e->op == ScalarOp::Le || e->op == ScalarOp::Gt) {
          if (ahi <= blo) return boolConst(e->op == ScalarOp::Le);
          if (alo > bhi) return boolConst(e->op == ScalarOp::Gt);
        } else if (ahi < blo || alo > bhi) {
          return boolConst(e->op == ScalarOp::Ne);
        }
      }
    } else if (e->op == ScalarOp::And || e->op == ScalarOp::Or) {
      const bool isAnd = e->op == ScalarOp::And;
      for (int i = 0; i < 2; ++i)
        if (isConst(args[i]) && e->type == DType::Bool) {
          // x && true = x, x && false = false; x || false = x, x || true = true.
          if ((args[i]->i != 0) == isAnd) return args[1 - i];
          return boolConst(!isAnd);
        }
    } else if (e->op == ScalarOp::Not && isConst(args[0]) && e->type == DType::Bool) {
      return boolConst(args[0]->i == 0);
    } else if (e->op == ScalarOp::Select && isConst(args[0])) {
      return args[0]->i != 0 ? args[1] : args[2];
    }
    if (same) return e;
    auto n = std::make_shared<EExpr>(*e);
    n->args = std::move(args);
    return n;
  }

  Shape ext_;
  std::unordered_map<const EExpr *, std::pair<ERef, ERef>> memo_;
};

void shift(EAddr &a, size_t var, int64_t by) { a.offset += a.coef[var] * by; }

} // namespace

bool splitIndexSets(TKernel &k) {
  if (k.kind != Kernel::Kind::Loop || k.noMerge || k.phases.size() != 1 || k.outer.size() < 2)
    return false;
  if (hasRuntimeSizes(k)) return false; // the cuts are constants
  const TPhase &p = k.phases[0];
  if (p.isReduce() || !p.inner.empty()) return false;
  for (auto &s : p.stores)
    if (s.accumulate) return false;
  // A checked index (a gather's) must stay evaluated where it was: folding a select drops
  // its untaken side, and with it a bounds check that reports a bad index.
  bool checked = false;
  forEachNode(p, [&](const EExpr &e) {
    for (auto &d : e.addr.dyn) checked |= d.error >= 0;
  });
  for (auto &s : p.stores)
    for (auto &d : s.addr.dyn) checked |= d.error >= 0;
  if (checked) return false;
  const Shape ext = refShape(k.outer);
  for (int64_t n : ext)
    if (n < 1) return false;
  // The cut points per loop variable.
  std::map<size_t, std::set<int64_t>> cuts;
  forEachNode(p, [&](const EExpr &e) {
    if (!isCompare(e.op)) return;
    if (auto c = cutOf(e, ext)) cuts[c->var].insert(c->at.begin(), c->at.end());
  });
  // The innermost variable with cuts, outside the first (the parallel outer loop stays).
  size_t d = 0;
  for (auto &[var, at] : cuts)
    if (var >= 1 && !at.empty()) d = var;
  if (d == 0 || (int64_t)cuts[d].size() + 1 > kMaxPieces) return false;
  if (numelOf(Shape(ext.begin(), ext.begin() + d)) < kMinOuter) return false;

  std::vector<int64_t> bounds = {0};
  bounds.insert(bounds.end(), cuts[d].begin(), cuts[d].end());
  bounds.push_back(ext[d]);
  const Shape outer(ext.begin(), ext.begin() + d);
  std::vector<TPhase> pieces;
  for (size_t i = 0; i + 1 < bounds.size(); ++i) {
    const int64_t a = bounds[i], len = bounds[i + 1] - a;
    Shape pieceExt = ext;
    pieceExt[d] = len;
    Folder fold(pieceExt);
    auto shifted = [&](const ERef &e) {
      return mapAddrs(e, [&](EAddr &x) {
        shift(x, d, a);
        return true;
      });
    };
    TPhase q;
    q.inner.assign(ext.begin() + d, ext.end());
    q.inner[0] = len;
    for (const TStore &s : p.stores) {
      TStore t = s;
      for (auto &dy : t.addr.dyn) dy.value = fold.run(shifted(dy.value));
      shift(t.addr, d, a);
      fold.foldAddr(t.addr);
      t.value = fold.run(shifted(s.value));
      q.stores.push_back(std::move(t));
    }
    pieces.push_back(std::move(q));
  }
  k.outer = dimsOf(outer);
  k.phases = std::move(pieces);
  return true;
}

} // namespace aotc::fusion
