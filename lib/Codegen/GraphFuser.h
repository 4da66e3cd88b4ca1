//===- GraphFuser.h - The fuser's state, shared by its two .cpp files ------===//
//
// Internal to lib/Codegen. The GraphFuser class that fuseGraph (Kernels.h) runs, and the
// helpers its methods share: Fusion.cpp defines the walk (run), values, views, pointwise
// ops, reductions, gathers and scatters; FuseLibraryCalls.cpp the library calls (GEMMs,
// convolutions, FFTs, linalg).
//===----------------------------------------------------------------------===//
#pragma once

#include "OpLowering.h"

#include "aotc/Conv.h"
#include "aotc/Diagnostics.h"
#include "aotc/Fft.h"
#include "aotc/OpRegistry.h"

#include <algorithm>
#include <optional>
#include <set>
#include <unordered_map>

namespace aotc::fusion {

/// The table entry of a call node's target (nodeError when codegen cannot lower it).
const OpLowering &loweringOf(const Node &n);
/// Views, reshapes, aliases and clones: their value is their input's, re-indexed.
bool isViewTarget(const std::string &t);
/// computeStride (aten/src/ATen/TensorUtils.cpp): strides of a view of a tensor
/// with (oldShape, oldStride) as newShape, or nullopt when not expressible.
/// Run-time sizes: the chunks are found at the reference sizes and must be equal as
/// expressions (else nullopt: the caller copies first).
std::optional<Dims> computeStride(const Dims &oldShape, const Dims &oldStride, const Dims &newShape);

struct Val {
  TensorType type;
  ERef e;
  std::vector<std::string> ops; ///< Ops inlined into e (not yet in a kernel).
  int home = -1;                ///< Buffer when e is exactly a dense load of it.
};

class GraphFuser {
public:
  GraphFuser(const Graph &g, KernelGraph &kg, const std::vector<int> &in,
             const std::vector<int> &out, const FusionOptions &opts)
      : g_(g), kg_(kg), in_(in), out_(out), opts_(opts) {}

  void run();

private:
  const Graph &g_;
  KernelGraph &kg_;
  const std::vector<int> &in_, &out_;
  const FusionOptions &opts_;
  std::unordered_map<const Node *, Val> vals_;
  std::unordered_map<const Node *, int> order_; ///< A node's position in the graph.
  std::unordered_map<const Node *, std::vector<Node *>> users_;
  std::unordered_map<const Node *, std::vector<int>> outSlots_;
  std::vector<bool> claimed_;
  std::vector<TKernel> ks_;
  /// Views whose value a GEMM already wrote densely into their output slot.
  std::unordered_map<const Node *, int> preRealized_;

  Val &val(const Node *n) {
    auto it = vals_.find(n);
    AOTC_ASSERT(it != vals_.end(), "codegen: no value for node '" + n->name + "'");
    return it->second;
  }

  int addBuffer(const std::string &name, const TensorType &t) {
    Buffer b;
    b.name = name;
    b.type = t;
    b.kind = BufferKind::Scratch;
    kg_.buffers.push_back(b);
    return (int)kg_.buffers.size() - 1;
  }

  /// `buffer` read densely as its own type.
  Val loadOf(int buffer) { return loadAs(buffer, kg_.buffers[buffer].type); }

  int newError(const Node &n, const std::string &what) {
    // The user's op and line first (Node::userOp, the stack_trace's innermost frame), then
    // the node the check is in: "in cross_entropy (model.py:17): node 'gather' (...): ...".
    std::string where = userContext(n);
    kg_.errors.push_back((where.empty() ? "" : where + ": ") + "node '" + n.name + "' (" + n.target + "): " + what);
    return (int)kg_.errors.size() - 1;
  }

  /// The buffer a realized node should live in: its (first unclaimed) output slot, else
  /// (viaView: for a caller whose buffer will hold exactly n's value, densely) the slot of a
  /// reshape of n (viewSlotUser), else scratch. Read it back with loadAs(home, n's type).
  int homeFor(const Node *n, const std::string &suffix = "", bool viaView = false) {
    if (suffix.empty())
      if (int k = freeSlot(n); k >= 0) {
        claimed_[k] = true;
        return out_[k];
      }
    if (viaView && suffix.empty())
      if (int b = claimViewSlot(n); b >= 0) return b;
    return addBuffer(n->name + suffix, n->types.empty() ? TensorType{} : n->type());
  }

  /// n's first unclaimed output slot (an index into out_), or -1.
  int freeSlot(const Node *n) const {
    if (auto it = outSlots_.find(n); it != outSlots_.end())
      for (int k : it->second)
        if (!claimed_[k]) return k;
    return -1;
  }

  /// The slot of viewSlotUser(n), claimed (that view's value is then the slot's contents),
  /// or -1.
  int claimViewSlot(const Node *n) {
    const Node *u = viewSlotUser(n);
    if (!u) return -1;
    int k = freeSlot(u);
    claimed_[k] = true;
    preRealized_[u] = out_[k];
    return out_[k];
  }

  /// A chain of view / reshape / _unsafe_view / alias / clone users of n (each of the same
  /// dtype and element count as n, so n's dense row-major bytes are its value) ending at a
  /// node with an unclaimed output slot: n stored there needs no copy into that slot (the
  /// forward's saved `view` of a layer norm or GELU output, read by the next GEMM).
  const Node *viewSlotUser(const Node *n) {
    for (Node *u : users_[n]) {
      if (!u->isCall() || u->types.size() != 1 || preRealized_.count(u) || u->tensorArg(0) != n) continue;
      const OpLowering *l = findLowering(*u);
      if (!l) continue;
      const TensorType &ut = u->type(), &nt = n->type();
      // expand to the same shape (export's expand before a bmm's view) is the identity too.
      const bool identity = l->kind == LoweringKind::View && ut == nt &&
                            l->view(*u, dimsOf(nt), dimsOf(ut)) == IndexMap::identity((int)nt.shape.size());
      if (l->kind != LoweringKind::Reshape && l->kind != LoweringKind::Alias && l->kind != LoweringKind::Clone &&
          !identity)
        continue;
      if (ut.dtype != nt.dtype || ut.numel() != nt.numel()) continue;
      if (freeSlot(u) >= 0) return u;
      if (const Node *w = viewSlotUser(u)) return w;
    }
    return nullptr;
  }

  /// `buffer` read densely as a value of type t (t's element count, the buffer's dtype).
  Val loadAs(int buffer, const TensorType &t) {
    Val v;
    v.type = TensorType{kg_.buffers[buffer].type.dtype, t.shape, t.sym};
    AOTC_ASSERT(v.type.numel() == kg_.buffers[buffer].type.numel(),
                "codegen: buffer '" + kg_.buffers[buffer].name + "' read with another element count");
    EAddr a;
    a.buffer = buffer;
    a.coef = contiguousStrides(dimsOf(v.type));
    v.e = mkLoad(v.type.dtype, std::move(a));
    v.home = buffer;
    return v;
  }

  /// Stores v densely into `buffer` with a map kernel; returns the loaded value.
  Val realizeInto(Val v, int buffer, const std::string &opName = "") {
    TKernel k;
    k.outer = dimsOf(v.type);
    TPhase p;
    TStore s;
    s.addr.buffer = buffer;
    s.addr.coef = contiguousStrides(k.outer);
    s.value = mkCast(v.e, kg_.buffers[buffer].type.dtype);
    p.stores.push_back(s);
    k.phases.push_back(std::move(p));
    k.ops = v.ops;
    if (k.ops.empty()) k.ops.push_back(opName.empty() ? "copy" : opName);
    ks_.push_back(std::move(k));
    return loadAs(buffer, v.type);
  }

  /// Non-view users, looking through views; with stopAtSlots, a view that is a graph output
  /// is a user itself (it is stored in its slot, and its own users read it from there).
  void effectiveUsers(const Node *n, std::vector<Node *> &out, bool stopAtSlots = false) {
    for (Node *u : users_[n]) {
      if (u->isCall() && isViewTarget(u->target) && !(stopAtSlots && outSlots_.count(u)))
        effectiveUsers(u, out, stopAtSlots);
      else out.push_back(u);
    }
  }

  /// True when u's data argument (arg 0) is n or a chain of views of n, and
  /// its other tensor arguments (the index) do not depend on n through views.
  bool readsAsData(const Node *u, const Node *n) {
    auto viewOf = [&](const Node *a) {
      while (a != n && a->isCall() && isViewTarget(a->target)) a = a->tensorArg(0);
      return a == n;
    };
    if (!viewOf(u->tensorArg(0))) return false;
    for (size_t i = 1; i < u->args.size(); ++i)
      if (auto *p = std::get_if<Node *>(&u->args[i]); p && viewOf(*p)) return false;
    return true;
  }

  /// True when every path from n's users meets in one pointwise node through pointwise nodes
  /// only (at most 16, none but the meeting node a graph output): n's users are then all
  /// inlined into that node's value, whose kernel evaluates n once per element (the
  /// expression is a DAG), so n need not be stored for them (GELU's backward: tanh feeds
  /// 1 + tanh and tanh * tanh, which meet in one sum; stored, it was a 4 MiB write and read
  /// per layer of nanoGPT large).
  bool joinsPointwise(const Node *n) {
    auto pointwise = [&](const Node *u) {
      const OpLowering *l = u->isCall() ? findLowering(*u) : nullptr;
      return l && l->kind == LoweringKind::Pointwise;
    };
    std::set<std::pair<int, const Node *>> live; // graph order: a node after all its inputs
    for (Node *u : users_[n]) live.insert({order_.at(u), u});
    for (int steps = 0; live.size() > 1; ++steps) {
      auto [i, u] = *live.begin();
      live.erase(live.begin());
      if (steps == 16 || !pointwise(u) || outSlots_.count(u)) return false;
      for (Node *w : users_[u]) live.insert({order_.at(w), w});
    }
    return live.size() == 1 && pointwise(live.begin()->second);
  }

  bool isMatmul(const Node *n) {
    const OpLowering *l = findLowering(*n);
    return l && l->kind == LoweringKind::Matmul;
  }
  /// A library call that reads its operands from dense buffers (GEMMs, convolutions).
  bool readsBuffers(const Node *n) {
    const OpLowering *l = findLowering(*n);
    return l && (l->kind == LoweringKind::Matmul || l->kind == LoweringKind::Conv || l->kind == LoweringKind::Fft ||
                 l->kind == LoweringKind::Linalg);
  }

  void defineNode(const Node *n);
  void definePointwise(const Node *n, PointwiseRule rule);
  void defineView(const Node *n, const OpLowering &l);
  void defineReduction(const Node *n, const OpLowering &l);
  void defineMatmul(const Node *n, const OpLowering &l);
  void defineGather(const Node *n);
  void defineIndexSelect(const Node *n);
  void defineScatter(const Node *n);
  void defineViewScatter(const Node *n);
  void defineConv(const Node *n, const OpLowering &l);
  void defineFft(const Node *n);
  void defineLinalg(const Node *n, const OpLowering &l);
  /// (buffer, element offset) of a dense row-major copy of arg's value (arg's own home when
  /// it already is one).
  std::pair<int, int64_t> denseOperand(Node *arg);
  void maybeRealize(const Node *n, Val &v);

  ERef operand(const Node &n, size_t i, const Shape &out, DType t);
  struct BlasOperand {
    int buffer;
    Dim offset, ld, batchStride;
    bool trans;
  };
  BlasOperand blasOperand(const Node &n, Node *arg, int rank);
};

} // namespace aotc::fusion
