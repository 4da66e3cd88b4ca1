//===- ExprTree.cpp - Expression trees of fusion and their flattening -----===//
//
// This file implements the tree helpers of FusionInternal.h (construction,
// address rewriting for views, substitution) and flattenKernel, which turns a
// tree kernel into the flat, CSE'd instruction lists of Kernels.h.
//===----------------------------------------------------------------------===//
#include "FusionInternal.h"

#include "aotc/Diagnostics.h"

#include <algorithm>
#include <map>
#include <sstream>
#include <unordered_map>
#include <unordered_set>

namespace aotc::fusion {

ERef mkConst(DType t, double v) {
  auto e = std::make_shared<EExpr>();
  e->op = ScalarOp::Const;
  e->type = t;
  if (isFloating(t)) e->f = v;
  else if (t == DType::Bool) e->i = v != 0.0;
  else if (!(v >= -9223372036854775808.0 && v < 9223372036854775808.0))
    internalError("codegen: integer constant " + std::to_string(v) + " outside int64 (the op's checks missed it)");
  else e->i = (int64_t)v;
  e->f = isFloating(t) ? v : (double)e->i;
  return e;
}

ERef mkIntConst(DType t, int64_t v) {
  auto e = std::make_shared<EExpr>();
  e->op = ScalarOp::Const;
  e->type = t;
  e->i = t == DType::Bool ? (v != 0) : v;
  e->f = (double)e->i;
  return e;
}

void refuseRuntimeArg(const Node &n, size_t i) {
  if (const std::vector<std::string> *e = n.symArg(i))
    for (const std::string &x : *e)
      if (!x.empty())
        nodeError(n, "codegen: argument " + std::to_string(i) + " is a run-time size (" + x +
                         "), which this op takes as a constant only: give the sizes with --specialize "
                         "(docs/dynamic-shapes.md)");
}

ERef mkSizeConst(DType t, const Dim &d) {
  if (!d.symbolic()) return isFloating(t) ? mkConst(t, (double)d.ref()) : mkIntConst(t, d.ref());
  if (t == DType::Bool) return mkOp(ScalarOp::Ne, DType::Bool, {mkSizeConst(DType::I64, d), mkIntConst(DType::I64, 0)});
  auto e = std::make_shared<EExpr>();
  e->op = ScalarOp::Const;
  e->type = t;
  e->i = d.ref();
  e->f = (double)d.ref();
  e->sym = d.sym();
  return e;
}

ERef mkConstArg(DType t, const Node &n, size_t i) {
  if (const std::string &e = n.symArgText(i); !e.empty()) {
    const int64_t *iv = std::get_if<int64_t>(&n.args[i]);
    if (!iv) nodeError(n, "codegen: argument " + std::to_string(i) + " is a run-time size but not an integer");
    return mkSizeConst(t, Dim::expr(e, *iv));
  }
  if (!isFloating(t)) {
    // Integer scalars stay exact (through double, 2^53 + 1 would become 2^53).
    const int64_t *iv = std::get_if<int64_t>(&n.args[i]);
    const bool *bv = std::get_if<bool>(&n.args[i]);
    if (iv || bv) return mkIntConst(t, iv ? *iv : (int64_t)*bv);
  }
  return mkConst(t, n.scalarArg(i));
}

ERef mkLoad(DType t, EAddr a) {
  auto e = std::make_shared<EExpr>();
  e->op = ScalarOp::Load;
  e->type = t;
  e->addr = std::move(a);
  return e;
}

ERef mkIndex(EAddr a) {
  auto e = std::make_shared<EExpr>();
  e->op = ScalarOp::Index;
  e->type = DType::I64;
  a.buffer = -1;
  e->addr = std::move(a);
  return e;
}

ERef mkReg(DType t, int reg) {
  auto e = std::make_shared<EExpr>();
  e->op = ScalarOp::Reg;
  e->type = t;
  e->reg = reg;
  return e;
}

ERef mkOp(ScalarOp op, DType t, std::vector<ERef> args) {
  auto e = std::make_shared<EExpr>();
  e->op = op;
  e->type = t;
  e->args = std::move(args);
  return e;
}

ERef mkSpecial(int64_t fn, DType t, ERef x, ERef n) {
  auto e = std::make_shared<EExpr>();
  e->op = ScalarOp::Special;
  e->type = t;
  e->args = {std::move(x), std::move(n)};
  e->i = fn;
  return e;
}

ERef mkPhilox(ERef seed, ERef offset, ERef index, int64_t word) {
  auto e = std::make_shared<EExpr>();
  e->op = ScalarOp::Philox;
  e->type = DType::I64;
  e->args = {std::move(seed), std::move(offset), std::move(index)};
  e->i = word;
  return e;
}

ERef mkCast(ERef e, DType t) {
  if (e->type == t) return e;
  if (e->op == ScalarOp::Const && !e->sym.empty()) return mkSizeConst(t, Dim::expr(e->sym, e->i));
  if (e->op == ScalarOp::Const) return mkConst(t, e->f);
  return mkOp(ScalarOp::Cast, t, {std::move(e)});
}

int exprCost(const ERef &root) {
  std::unordered_set<const EExpr *> seen;
  int cost = 0;
  std::function<void(const ERef &)> visit = [&](const ERef &e) {
    if (!seen.insert(e.get()).second) return;
    if (e->op != ScalarOp::Load && e->op != ScalarOp::Const && e->op != ScalarOp::Reg &&
        e->op != ScalarOp::Index) {
      ++cost;
      if (isLibmScalarOp(e->op)) cost += 3;
      if (e->op == ScalarOp::Philox) cost += 40; // 10 rounds of 2 wide multiplies and 4 xors
    }
    for (auto &a : e->args) visit(a);
    for (auto &d : e->addr.dyn) visit(d.value);
  };
  visit(root);
  return cost;
}

namespace {
struct Mapper {
  const AddrFn &fn;
  std::unordered_map<const EExpr *, ERef> memo;
  bool failed = false;
  ERef run(const ERef &e) {
    if (failed) return nullptr;
    auto it = memo.find(e.get());
    if (it != memo.end()) return it->second;
    ERef out;
    if (e->op == ScalarOp::Load || e->op == ScalarOp::Index) {
      EAddr a = e->addr;
      for (auto &d : a.dyn) {
        d.value = run(d.value);
        if (failed) return nullptr;
      }
      if (!fn(a)) {
        failed = true;
        return nullptr;
      }
      out = e->op == ScalarOp::Load ? mkLoad(e->type, std::move(a)) : mkIndex(std::move(a));
    } else if (e->args.empty()) {
      out = e;
    } else {
      std::vector<ERef> args;
      bool same = true;
      for (auto &x : e->args) {
        args.push_back(run(x));
        if (failed) return nullptr;
        same = same && args.back() == x;
      }
      if (same) out = e;
      else {
        auto n = std::make_shared<EExpr>(*e);
        n->args = std::move(args);
        out = n;
      }
    }
    memo[e.get()] = out;
    return out;
  }
};
} // namespace

ERef mapAddrs(const ERef &e, const AddrFn &fn) {
  Mapper m{fn, {}, false};
  return m.run(e);
}

ERef substitute(const ERef &root, const std::function<ERef(const EExpr &)> &fn) {
  std::unordered_map<const EExpr *, ERef> memo;
  std::function<ERef(const ERef &)> run = [&](const ERef &e) -> ERef {
    auto it = memo.find(e.get());
    if (it != memo.end()) return it->second;
    ERef out = fn(*e);
    if (!out) {
      if ((e->op == ScalarOp::Load || e->op == ScalarOp::Index) && !e->addr.dyn.empty()) {
        EAddr a = e->addr;
        bool same = true;
        for (auto &d : a.dyn) {
          auto v = run(d.value);
          same = same && v == d.value;
          d.value = v;
        }
        out = same ? e : e->op == ScalarOp::Load ? mkLoad(e->type, std::move(a)) : mkIndex(std::move(a));
      } else if (!e->args.empty()) {
        std::vector<ERef> args;
        bool same = true;
        for (auto &x : e->args) {
          args.push_back(run(x));
          same = same && args.back() == x;
        }
        if (same) out = e;
        else {
          auto n = std::make_shared<EExpr>(*e);
          n->args = std::move(args);
          out = n;
        }
      } else {
        out = e;
      }
    }
    memo[e.get()] = out;
    return out;
  };
  return run(root);
}

void forEachAddr(const ERef &root, const std::function<void(const EAddr &)> &fn) {
  std::unordered_set<const EExpr *> seen;
  std::function<void(const ERef &)> visit = [&](const ERef &e) {
    if (!seen.insert(e.get()).second) return;
    if (e->op == ScalarOp::Load) fn(e->addr);
    if (e->op == ScalarOp::Load || e->op == ScalarOp::Index)
      for (auto &d : e->addr.dyn) visit(d.value);
    for (auto &a : e->args) visit(a);
  };
  visit(root);
}

void forEachReg(const ERef &root, const std::function<void(int)> &fn) {
  std::unordered_set<const EExpr *> seen;
  std::function<void(const ERef &)> visit = [&](const ERef &e) {
    if (!seen.insert(e.get()).second) return;
    if (e->op == ScalarOp::Reg) fn(e->reg);
    for (auto &d : e->addr.dyn) visit(d.value);
    for (auto &a : e->args) visit(a);
  };
  visit(root);
}

IndexMap IndexMap::identity(int rank) {
  IndexMap m;
  m.newRank = rank;
  m.m.assign(rank, std::vector<int64_t>(rank, 0));
  m.c.assign(rank, Dim(0));
  for (int d = 0; d < rank; ++d) m.m[d][d] = 1;
  return m;
}

IndexMap IndexMap::broadcast(const Shape &from, const Shape &to) {
  IndexMap m;
  int r = (int)to.size(), rf = (int)from.size();
  m.newRank = r;
  m.m.assign(rf, std::vector<int64_t>(r, 0));
  m.c.assign(rf, Dim(0));
  for (int d = 0; d < rf; ++d) {
    int nd = d + r - rf;
    if (from[d] != 1 || (nd >= 0 && to[nd] == 1)) m.m[d][nd] = 1;
  }
  return m;
}

IndexMap IndexMap::select(const std::vector<int> &newPosOfOld, int newRank) {
  IndexMap m;
  m.newRank = newRank;
  m.m.assign(newPosOfOld.size(), std::vector<int64_t>(newRank, 0));
  m.c.assign(newPosOfOld.size(), Dim(0));
  for (size_t d = 0; d < newPosOfOld.size(); ++d)
    if (newPosOfOld[d] >= 0) m.m[d][newPosOfOld[d]] = 1;
  return m;
}

ERef applyIndexMap(const ERef &e, const IndexMap &map) {
  return mapAddrs(e, [&](EAddr &a) {
    AOTC_ASSERT(a.coef.size() == map.m.size(), "index map rank mismatch");
    Dims nc(map.newRank, Dim(0));
    for (size_t d = 0; d < a.coef.size(); ++d) {
      a.offset += a.coef[d] * map.c[d];
      for (int k = 0; k < map.newRank; ++k)
        if (map.m[d][k] != 0) nc[k] += a.coef[d] * map.m[d][k];
    }
    a.coef = std::move(nc);
    return true;
  });
}

bool hasRuntimeSizes(const TKernel &k) {
  bool any = anySymbolic(k.outer);
  auto addr = [&](const EAddr &a) {
    any = any || a.offset.symbolic() || anySymbolic(a.coef);
    for (auto &d : a.dyn) any = any || d.stride.symbolic() || d.bound.symbolic();
  };
  std::unordered_set<const EExpr *> seen;
  std::function<void(const ERef &)> visit = [&](const ERef &e) {
    if (!seen.insert(e.get()).second) return;
    any = any || !e->sym.empty();
    if (e->op == ScalarOp::Load || e->op == ScalarOp::Index) {
      addr(e->addr);
      for (auto &d : e->addr.dyn) visit(d.value);
    }
    for (auto &a : e->args) visit(a);
  };
  for (auto &p : k.phases) {
    any = any || anySymbolic(p.inner);
    for (auto &r : p.reds) visit(r.value);
    for (auto &s : p.stores) {
      addr(s.addr);
      visit(s.value);
      for (auto &d : s.addr.dyn) visit(d.value);
    }
  }
  return any;
}

//===-- Reads / writes -----------------------------------------------------===//

std::vector<int> kernelReads(const TKernel &k) {
  std::vector<int> r;
  auto add = [&](const ERef &e) { forEachAddr(e, [&](const EAddr &a) { r.push_back(a.buffer); }); };
  for (auto &p : k.phases) {
    for (auto &x : p.reds) add(x.value);
    for (auto &s : p.stores) {
      add(s.value);
      for (auto &d : s.addr.dyn) add(d.value);
      if (s.accumulate) r.push_back(s.addr.buffer);
    }
  }
  if (k.kind == Kernel::Kind::Extern) r.insert(r.end(), k.call.inputs.begin(), k.call.inputs.end());
  std::sort(r.begin(), r.end());
  r.erase(std::unique(r.begin(), r.end()), r.end());
  return r;
}

std::vector<int> kernelWrites(const TKernel &k) {
  std::vector<int> w;
  for (auto &p : k.phases)
    for (auto &s : p.stores) w.push_back(s.addr.buffer);
  if (k.kind == Kernel::Kind::Extern) {
    w.insert(w.end(), k.call.outputs.begin(), k.call.outputs.end());
    if (k.call.workspace >= 0) w.push_back(k.call.workspace);
  }
  std::sort(w.begin(), w.end());
  w.erase(std::unique(w.begin(), w.end()), w.end());
  return w;
}

//===-- Flattening ---------------------------------------------------------===//

namespace {
struct Flattener {
  Phase &ph;
  std::unordered_map<const EExpr *, int> memo;
  std::map<std::string, int> cse;
  std::map<std::string, int> accessIds;

  int access(const EAddr &a) {
    Access acc;
    acc.buffer = a.buffer;
    acc.offset = a.offset;
    acc.coef = a.coef;
    std::ostringstream key;
    key << a.buffer << ':' << a.offset;
    for (auto c : a.coef) key << ',' << c;
    for (auto &d : a.dyn) {
      DynIndex di;
      di.value = inst(d.value);
      di.stride = d.stride;
      di.bound = d.bound;
      di.error = d.error;
      acc.dyn.push_back(di);
      key << "|d" << di.value << ',' << di.stride << ',' << di.bound << ',' << di.error;
    }
    auto it = accessIds.find(key.str());
    if (it != accessIds.end()) return it->second;
    ph.accesses.push_back(std::move(acc));
    return accessIds[key.str()] = (int)ph.accesses.size() - 1;
  }

  int inst(const ERef &e) {
    auto it = memo.find(e.get());
    if (it != memo.end()) return it->second;
    Inst in;
    in.op = e->op;
    in.type = e->type;
    if (e->args.size() > 0) in.a = inst(e->args[0]);
    if (e->args.size() > 1) in.b = inst(e->args[1]);
    if (e->args.size() > 2) in.c = inst(e->args[2]);
    in.fconst = e->f;
    in.iconst = e->i;
    in.reg = e->reg;
    in.sym = e->sym;
    if (e->op == ScalarOp::Load || e->op == ScalarOp::Index) in.access = access(e->addr);
    std::ostringstream key;
    key << (int)in.op << ':' << (int)in.type << ':' << in.a << ',' << in.b << ',' << in.c << ':'
        << in.access << ':' << in.reg << ':' << in.iconst << ':' << in.sym << ':';
    key.precision(17);
    key << in.fconst;
    auto c = cse.find(key.str());
    int id;
    if (c != cse.end()) id = c->second;
    else {
      ph.insts.push_back(in);
      id = cse[key.str()] = (int)ph.insts.size() - 1;
    }
    memo[e.get()] = id;
    return id;
  }
};
} // namespace

Kernel flattenKernel(const TKernel &tk, const std::string &name) {
  Kernel k;
  k.kind = tk.kind;
  k.name = name;
  k.outer = tk.outer;
  k.regTypes = tk.regs;
  k.call = tk.call;
  for (auto &o : tk.ops)
    if (std::find(k.ops.begin(), k.ops.end(), o) == k.ops.end()) k.ops.push_back(o);
  for (auto &tp : tk.phases) {
    Phase ph;
    ph.inner = tp.inner;
    Flattener f{ph, {}, {}, {}};
    for (auto &r : tp.reds) {
      Reduction red;
      red.kind = r.kind;
      red.value = f.inst(r.value);
      red.reg = r.reg;
      red.accType = r.accType;
      ph.reductions.push_back(red);
    }
    for (auto &s : tp.stores) {
      Store st;
      st.value = f.inst(s.value);
      st.access = f.access(s.addr);
      st.accumulate = s.accumulate;
      st.combine = s.combine;
      ph.stores.push_back(st);
    }
    k.phases.push_back(std::move(ph));
  }
  k.reads = kernelReads(tk);
  k.writes = kernelWrites(tk);
  return k;
}

} // namespace aotc::fusion
