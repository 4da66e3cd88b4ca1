//===- KernelMerge.cpp - Merging tree kernels with the same outer domain --===//
//
// This file implements mergeKernels (FusionInternal.h). A later kernel B is
// moved into an earlier kernel A (its phases run after A's, inside the same
// outer iteration) when:
//  * both are loop kernels with the same outer domain, possibly after viewing a
//    pure map kernel's domain [outer..., rest...] as outer + inner loop `rest`;
//  * every value B reads from A is produced in the same outer iteration:
//    either a reduction result stored once per outer index (B then uses the
//    register directly) or an element stored by a map phase that B reads at
//    exactly the same address over the same inner domain (B then recomputes /
//    shares the stored expression);
//  * no kernel between A and B writes something B reads.
// Adjacent phases of the same kind and inner domain are coalesced into one loop.
// Finally stores to scratch buffers nobody reads are dropped (with the
// reductions only they used): a per-row max consumed by a merged phase leaves
// no buffer behind.
//===----------------------------------------------------------------------===//
#include "FusionInternal.h"

#include <algorithm>
#include <set>

namespace aotc::fusion {
namespace {

bool splittable(const TKernel &k) {
  return k.kind == Kernel::Kind::Loop && !k.noMerge && k.phases.size() == 1 &&
         !k.phases[0].isReduce() && k.phases[0].inner.empty();
}

/// Domains at most this big may lose their parallel loop when merged into a
/// sequential (outer = []) kernel.
constexpr int64_t kSmallDomain = 4096;

bool isPrefix(const Dims &p, const Dims &s) {
  if (p.size() >= s.size() || !std::equal(p.begin(), p.end(), s.begin())) return false;
  return !p.empty() || numelOf(s).ref() <= kSmallDomain; // a run-time domain: at its largest
}

/// Coefficients of extent-1 loop variables are irrelevant: make them 0 so
/// addresses compare equal whatever the view that produced them.
ERef zeroUnitCoefs(const ERef &e, const Dims &ext) {
  return mapAddrs(e, [&](EAddr &a) {
    for (size_t k = 0; k < a.coef.size() && k < ext.size(); ++k)
      if (ext[k] == 1) a.coef[k] = 0;
    return true;
  });
}

void normalizeUnitDims(TKernel &k) {
  for (auto &p : k.phases) {
    Dims ext = k.outer;
    ext.insert(ext.end(), p.inner.begin(), p.inner.end());
    for (auto &r : p.reds) r.value = zeroUnitCoefs(r.value, ext);
    for (auto &s : p.stores) {
      s.value = zeroUnitCoefs(s.value, ext);
      for (size_t i = 0; i < s.addr.coef.size() && i < ext.size(); ++i)
        if (ext[i] == 1) s.addr.coef[i] = 0;
      for (auto &d : s.addr.dyn) d.value = zeroUnitCoefs(d.value, ext);
    }
  }
}

/// Re-targets an expression that depends on outer variables only to a phase
/// with `inner` inner variables (nullptr if it depends on inner variables).
ERef retarget(const ERef &e, size_t no, size_t inner) {
  return mapAddrs(e, [&](EAddr &a) {
    for (size_t k = no; k < a.coef.size(); ++k)
      if (a.coef[k] != 0) return false;
    a.coef.resize(no + inner, Dim(0));
    return true;
  });
}

void split(TKernel &k, size_t outerRank) {
  k.phases[0].inner.assign(k.outer.begin() + outerRank, k.outer.end());
  k.outer.resize(outerRank);
}

/// Finds A's single plain store to `buffer` (phase index, store index).
bool findStore(const TKernel &A, int buffer, size_t &pi, size_t &si) {
  int found = 0;
  for (size_t p = 0; p < A.phases.size(); ++p)
    for (size_t s = 0; s < A.phases[p].stores.size(); ++s)
      if (A.phases[p].stores[s].addr.buffer == buffer) {
        ++found;
        pi = p;
        si = s;
      }
  if (found != 1) return false;
  const TStore &st = A.phases[pi].stores[si];
  return !st.accumulate && st.addr.dyn.empty();
}

bool tryMerge(TKernel &A, TKernel &B) {
  TKernel a = A, b = B;
  if (a.outer != b.outer) {
    if (splittable(b) && isPrefix(a.outer, b.outer)) split(b, a.outer.size());
    else if (splittable(a) && isPrefix(b.outer, a.outer)) split(a, b.outer.size());
    else return false;
  }
  normalizeUnitDims(a);
  normalizeUnitDims(b);
  size_t no = a.outer.size();
  std::vector<int> aw = kernelWrites(a);
  auto writtenByA = [&](int buf) { return std::binary_search(aw.begin(), aw.end(), buf); };
  // Renumber B's registers after A's.
  int base = (int)a.regs.size();
  auto shiftRegs = [&](const ERef &e) {
    return substitute(e, [&](const EExpr &x) -> ERef {
      return x.op == ScalarOp::Reg ? mkReg(x.type, x.reg + base) : nullptr;
    });
  };
  bool ok = true;
  for (auto &p : b.phases) {
    size_t nv = no + p.inner.size();
    auto resolve = [&](const ERef &e) -> ERef {
      ERef shifted = shiftRegs(e);
      return substitute(shifted, [&](const EExpr &x) -> ERef {
        if (!ok || x.op != ScalarOp::Load || !writtenByA(x.addr.buffer)) return nullptr;
        size_t pi = 0, si = 0;
        if (!findStore(a, x.addr.buffer, pi, si) || !x.addr.dyn.empty()) {
          ok = false;
          return nullptr;
        }
        const TPhase &sp = a.phases[pi];
        const TStore &st = sp.stores[si];
        if (sp.isReduce() || numelOf(sp.inner).is(1)) {
          // One value per outer index (after-fold store, or a map phase with a
          // single inner iteration): B must read it at the same outer index.
          bool same = x.addr.offset == st.addr.offset && x.addr.coef.size() == nv;
          for (size_t k = 0; same && k < no; ++k) same = x.addr.coef[k] == st.addr.coef[k];
          for (size_t k = no; same && k < nv; ++k) same = x.addr.coef[k] == 0;
          ERef v = same ? retarget(st.value, no, p.inner.size()) : nullptr;
          if (!v) {
            ok = false;
            return nullptr;
          }
          return mkCast(v, x.type);
        }
        if (sp.inner != p.inner || x.addr.offset != st.addr.offset || x.addr.coef != st.addr.coef) {
          ok = false;
          return nullptr;
        }
        return mkCast(st.value, x.type);
      });
    };
    for (auto &r : p.reds) r.value = resolve(r.value);
    for (auto &s : p.stores) {
      s.value = resolve(s.value);
      for (auto &d : s.addr.dyn) d.value = resolve(d.value);
      if (s.accumulate && writtenByA(s.addr.buffer)) ok = false;
    }
    for (auto &r : p.reds) r.reg += base;
    if (!ok) return false;
  }
  // Append B's phases, coalescing the boundary when possible.
  for (size_t i = 0; i < b.phases.size(); ++i) {
    TPhase &bp = b.phases[i];
    TPhase &last = a.phases.back();
    bool coalesce = false;
    if (i == 0 && last.inner == bp.inner && last.isReduce() == bp.isReduce()) {
      if (!last.isReduce()) coalesce = true;
      else {
        std::set<int> lastRegs;
        for (auto &r : last.reds) lastRegs.insert(r.reg);
        bool indep = true;
        for (auto &r : bp.reds)
          forEachReg(r.value, [&](int reg) { indep = indep && !lastRegs.count(reg); });
        coalesce = indep;
      }
    }
    if (coalesce) {
      for (auto &r : bp.reds) last.reds.push_back(r);
      for (auto &s : bp.stores) last.stores.push_back(s);
    } else {
      a.phases.push_back(bp);
    }
  }
  for (auto t : b.regs) a.regs.push_back(t);
  for (auto &o : b.ops) a.ops.push_back(o);
  A = std::move(a);
  return true;
}

bool intersects(const std::vector<int> &x, const std::vector<int> &y) {
  for (int v : x)
    if (std::binary_search(y.begin(), y.end(), v)) return true;
  return false;
}

void eliminateDeadStores(std::vector<TKernel> &ks, const std::vector<Buffer> &buffers) {
  for (bool changed = true; changed;) {
    changed = false;
    std::set<int> read;
    for (auto &k : ks)
      if (!k.dead)
        for (int b : kernelReads(k)) read.insert(b);
    for (auto &k : ks) {
      if (k.dead || k.kind != Kernel::Kind::Loop) continue;
      for (auto &p : k.phases) {
        size_t before = p.stores.size();
        p.stores.erase(std::remove_if(p.stores.begin(), p.stores.end(),
                                      [&](const TStore &s) {
                                        return buffers[s.addr.buffer].kind == BufferKind::Scratch &&
                                               !read.count(s.addr.buffer);
                                      }),
                       p.stores.end());
        changed = changed || before != p.stores.size();
      }
      // Drop reductions whose register nobody uses.
      std::set<int> used;
      for (auto &p : k.phases) {
        for (auto &r : p.reds) forEachReg(r.value, [&](int g) { used.insert(g); });
        for (auto &s : p.stores) {
          forEachReg(s.value, [&](int g) { used.insert(g); });
          for (auto &d : s.addr.dyn) forEachReg(d.value, [&](int g) { used.insert(g); });
        }
      }
      for (auto &p : k.phases) {
        size_t before = p.reds.size();
        p.reds.erase(std::remove_if(p.reds.begin(), p.reds.end(),
                                    [&](const TReduction &r) { return !used.count(r.reg); }),
                     p.reds.end());
        changed = changed || before != p.reds.size();
      }
      k.phases.erase(std::remove_if(k.phases.begin(), k.phases.end(),
                                    [](const TPhase &p) { return p.reds.empty() && p.stores.empty(); }),
                     k.phases.end());
      if (k.phases.empty()) {
        k.dead = true;
        changed = true;
      }
    }
  }
}

} // namespace

void mergeKernels(std::vector<TKernel> &ks, const std::vector<Buffer> &buffers) {
  for (size_t bi = 1; bi < ks.size(); ++bi) {
    TKernel &B = ks[bi];
    if (B.dead || B.kind != Kernel::Kind::Loop || B.noMerge) continue;
    std::vector<int> br = kernelReads(B);
    for (size_t ai = bi; ai-- > 0;) {
      TKernel &A = ks[ai];
      if (A.dead) continue;
      if (A.kind == Kernel::Kind::Loop && !A.noMerge && tryMerge(A, B)) {
        B.dead = true;
        break;
      }
      std::vector<int> aw = kernelWrites(A);
      std::vector<int> bw = kernelWrites(B);
      std::vector<int> ar = kernelReads(A);
      if (intersects(br, aw) || intersects(bw, aw) || intersects(bw, ar)) break;
    }
  }
  eliminateDeadStores(ks, buffers);
}

} // namespace aotc::fusion
