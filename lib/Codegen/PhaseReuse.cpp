//===- PhaseReuse.cpp - Values a reduce phase hands to a later map phase ---===//
//
// This file implements phaseReuses (include/aotc/Schedule.h), part of the CPU schedule. A
// kernel's phases are separate loops over their inner domains; a map phase that recomputes
// an expensive value its reduce phase already computed per element (softmax: the sum phase
// folds exp(x - max), the map phase divides exp(x - max) by that sum) can instead read it
// back from memory, if the reduce phase stores it there. The place is the element the map
// phase itself writes (so no scratch), which is exact and safe when:
//  * both phases have the same inner domain, the reduce phase is not split, and the value's
//    instructions are structurally the same in both (same ops, constants, registers, loads);
//  * the map phase's store is a plain one (not accumulating, no gathered index) whose address
//    is injective over the kernel's outer and inner variables (every element written once),
//    into a buffer of the value's own type (the round trip is exact; not Bool);
//  * no phase from the reduce phase to the map phase loads that buffer, and none stores to it
//    but this store (nobody sees the early value or overwrites it in between), nor stores to a
//    buffer the value loads (the map phase would have computed it from the new contents);
//  * the value contains an exp, log, tanh, erf, pow or another libm-class function
//    (isLibmScalarOp, what a cost model counts as expensive), and is the largest such common
//    value of that store.
// MLIR-free; the emitter (ScalarEmit.cpp) stores and loads as the PhaseReuse says.
//===----------------------------------------------------------------------===//
#include "aotc/Schedule.h"

#include "aotc/Kernels.h"

#include <algorithm>
#include <cstring>
#include <map>
#include <set>
#include <sstream>

namespace aotc {
namespace {

/// Canonical ids of instructions, shared by the phases given: equal ids, equal values at
/// equal loop variables (hash-consing on op, type, constants, register, access, operands).
class Canon {
public:
  std::vector<int> ids(const Phase &p) {
    std::vector<int> out(p.insts.size(), -1);
    for (size_t i = 0; i < p.insts.size(); ++i) { // operands come first (Kernels.h)
      const Inst &in = p.insts[i];
      std::ostringstream os;
      uint64_t fbits;
      std::memcpy(&fbits, &in.fconst, sizeof fbits);
      os << (int)in.op << ' ' << (int)in.type << ' ' << fbits << ' ' << in.iconst << ' ' << in.reg << ' ' << in.sym;
      for (int o : {in.a, in.b, in.c}) os << ' ' << (o >= 0 ? out[o] : -1);
      if (in.op == ScalarOp::Load || in.op == ScalarOp::Index) {
        const Access &a = p.accesses[in.access];
        os << " @" << a.buffer << ' ' << a.offset;
        for (const Dim &c : a.coef) os << ',' << c;
        for (auto &d : a.dyn) os << " d" << out[d.value] << ' ' << d.stride << ' ' << d.bound << ' ' << d.error;
      }
      auto [it, fresh] = table_.try_emplace(os.str(), (int)table_.size());
      out[i] = it->second;
    }
    return out;
  }

private:
  std::map<std::string, int> table_;
};

/// The instructions `root` depends on (itself included).
std::vector<char> cone(const Phase &p, const std::vector<int> &roots) {
  std::vector<char> in(p.insts.size(), 0);
  for (int r : roots)
    if (r >= 0) in[r] = 1;
  for (size_t i = p.insts.size(); i-- > 0;) {
    if (!in[i]) continue;
    const Inst &x = p.insts[i];
    for (int o : {x.a, x.b, x.c})
      if (o >= 0) in[o] = 1;
    if (x.op == ScalarOp::Load || x.op == ScalarOp::Index)
      for (auto &d : p.accesses[x.access].dyn) in[d.value] = 1;
  }
  return in;
}

/// Whether address a takes a different element for every (outer, inner) point: the strides
/// of the dims longer than 1, sorted, each exceed the span of the smaller ones.
bool injective(const Access &a, const Dims &outer, const Dims &inner) {
  if (!a.dyn.empty() || anySymbolic(a.coef) || anySymbolic(outer) || anySymbolic(inner)) return false;
  std::vector<std::pair<int64_t, int64_t>> dims; // |stride|, extent
  for (size_t k = 0; k < a.coef.size(); ++k) {
    const int64_t e = k < outer.size() ? outer[k] : inner[k - outer.size()];
    if (e <= 1) continue;
    if (a.coef[k] == 0) return false;
    dims.push_back({std::abs(a.coef[k]), e});
  }
  std::sort(dims.begin(), dims.end());
  int64_t span = 0;
  for (auto [c, e] : dims) {
    if (c <= span) return false;
    span += c * (e - 1);
  }
  return true;
}

} // namespace

std::vector<PhaseReuse> phaseReuses(const KernelGraph &kg, const Kernel &k, const std::vector<int64_t> &splitRows) {
  std::vector<PhaseReuse> out;
  if (k.kind != Kernel::Kind::Loop) return out;
  for (int64_t r : splitRows)
    if (r > 0) return out;
  for (size_t m = 0; m < k.phases.size(); ++m) {
    const Phase &M = k.phases[m];
    if (!M.reductions.empty() || M.inner.empty()) continue;
    for (size_t si = 0; si < M.stores.size(); ++si) {
      const Store &S = M.stores[si];
      const Access &A = M.accesses[S.access];
      if (S.accumulate || A.buffer < 0 || !injective(A, k.outer, M.inner)) continue;
      // The latest reduce phase before M over the same domain with nobody touching the buffer
      // from it to M (but this store).
      int r = -1;
      for (int i = (int)m; i >= 0; --i) {
        const Phase &P = k.phases[i];
        bool touches = false;
        for (auto &in : P.insts)
          touches |= in.op == ScalarOp::Load && P.accesses[in.access].buffer == A.buffer;
        for (size_t j = 0; j < P.stores.size(); ++j)
          touches |= P.accesses[P.stores[j].access].buffer == A.buffer && !(i == (int)m && j == si);
        if (touches) break;
        if (i < (int)m && !P.reductions.empty()) {
          if (P.inner == M.inner) r = i;
          break;
        }
      }
      if (r < 0) continue;
      const Phase &R = k.phases[r];
      Canon canon;
      std::vector<int> rIds = canon.ids(R), mIds = canon.ids(M);
      std::vector<int> rRoots;
      for (auto &red : R.reductions) rRoots.push_back(red.value);
      std::vector<char> inR = cone(R, rRoots), inM = cone(M, {S.value});
      std::map<int, int> rInstOf; // canonical id -> an instruction of R's fold computing it
      for (size_t i = 0; i < R.insts.size(); ++i)
        if (inR[i]) rInstOf.emplace(rIds[i], (int)i);
      const DType bt = kg.buffers[A.buffer].type.dtype;
      int best = -1;
      int64_t bestCost = 0;
      for (size_t i = 0; i < M.insts.size(); ++i) {
        if (!inM[i] || !rInstOf.count(mIds[i]) || M.insts[i].type != bt || bt == DType::Bool) continue;
        std::vector<char> c = cone(M, {(int)i});
        bool costly = false;
        int64_t cost = 0;
        for (size_t j = 0; j < c.size(); ++j)
          if (c[j]) {
            ++cost;
            costly |= isLibmScalarOp(M.insts[j].op);
          }
        if (costly && cost > bestCost) {
          best = (int)i;
          bestCost = cost;
        }
      }
      if (best < 0) continue;
      // The value's inputs must be the same when M runs: no store from R (its after-fold
      // stores) to M (but S, into a buffer X does not load) may write a buffer X loads.
      std::set<int> inputs;
      std::vector<char> xCone = cone(M, {best});
      for (size_t j = 0; j < xCone.size(); ++j)
        if (xCone[j] && M.insts[j].op == ScalarOp::Load) inputs.insert(M.accesses[M.insts[j].access].buffer);
      bool rewritten = false;
      for (int i = r; i <= (int)m; ++i)
        for (auto &st : k.phases[i].stores) rewritten |= inputs.count(k.phases[i].accesses[st.access].buffer) > 0;
      if (rewritten) continue;
      out.push_back({r, (int)m, (int)si, rInstOf.at(mIds[best]), best});
      break; // one value per map phase
    }
  }
  return out;
}

} // namespace aotc
