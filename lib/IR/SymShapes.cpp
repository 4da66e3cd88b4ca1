//===- SymShapes.cpp - Shape functions over run-time sizes ------------------===//
//
// OpDef::symInfer of the ops a dynamic export's batch and sequence sizes flow through
// (docs/dynamic-shapes.md): the results' dims as expressions over the run-time symbols, from
// the arguments' (TensorType::sym, Node::symArgs) and the results' values at the reference
// sizes (`types`, from OpDef::infer). Every expression is in SymExpr's canonical form. The
// rules follow ATen's meta functions as OpDef::infer does; capture checks each against the
// export's own expressions (lib/Capture/ExportJson.cpp).
//
// Generic rules by category: pointwise (broadcasting), reductions over `dim` / `keepdim`;
// then one rule per view, matmul, factory, index and norm op below.
//===----------------------------------------------------------------------===//
#include "aotc/OpRegistry.h"
#include "aotc/SymExpr.h"

#include "ops/Ops.h"

#include <algorithm>
#include <set>

namespace aotc {
namespace {

using Dims = std::vector<SymExpr>;
using SymResult = std::vector<std::vector<std::string>>;

/// Dim i of t as an expression: its run-time expression, or its size.
SymExpr dimOf(const TensorType &t, size_t i) { return SymExpr::ofSize(t.sym, i, t.shape.at(i)); }
Dims dimsOf(const TensorType &t) {
  Dims d;
  for (size_t i = 0; i < t.shape.size(); ++i) d.push_back(dimOf(t, i));
  return d;
}
/// Element k of int / int-list argument i as an expression.
SymExpr intArgExpr(const Node &n, size_t i, size_t k = 0) {
  if (const std::string &e = n.symArgText(i, k); !e.empty()) return SymExpr::parse(e);
  if (auto *v = std::get_if<int64_t>(&n.args[i])) return SymExpr::integer(*v);
  if (!std::holds_alternative<std::vector<int64_t>>(n.args[i])) throw SymExprError("a size argument that is not an int");
  return SymExpr::integer(n.intListArg(i).at(k));
}
std::vector<std::string> text(const Dims &d) { return SymExpr::sizeTexts(d); }
SymExpr add(SymExpr a, SymExpr b) { return SymExpr::binary(SymExpr::Op::Add, std::move(a), std::move(b)); }
SymExpr mul(SymExpr a, SymExpr b) { return SymExpr::binary(SymExpr::Op::Mul, std::move(a), std::move(b)); }
SymExpr product(const Dims &d) {
  SymExpr p = SymExpr::integer(1);
  for (const SymExpr &e : d) p = mul(p, e);
  return p;
}
int64_t wrap(int64_t d, int64_t rank) { return d < 0 ? d + std::max<int64_t>(rank, 1) : d; }
const TensorType &tensorType(const Node &n, size_t i) { return n.tensorArg(i)->type(); }

/// Broadcasting (torch's infer_size): per result dim, right-aligned, the first operand dim
/// that is run-time, else the operand dims say the size; scalars and numbers are skipped.
SymResult pointwise(const Node &n, const std::vector<TensorType> &types) {
  std::vector<const TensorType *> ins;
  for (const Arg &a : n.args)
    if (auto *p = std::get_if<Node *>(&a); p && *p && (*p)->types.size() == 1) ins.push_back(&(*p)->type());
  SymResult r;
  for (const TensorType &t : types) {
    Dims d;
    for (size_t i = 0; i < t.shape.size(); ++i) {
      SymExpr e = SymExpr::integer(t.shape[i]);
      size_t back = t.shape.size() - i;
      std::optional<std::string> runtime;
      for (const TensorType *in : ins) {
        if (in->shape.size() < back) continue;
        size_t j = in->shape.size() - back;
        if (j < in->sym.size() && !in->sym[j].empty()) {
          e = SymExpr::parse(in->sym[j]);
          runtime = e.canonical().str();
          break;
        }
      }
      // Every operand's dim is that run-time size or a constant 1: another size equals it at
      // one size only (torch.export would have fixed it by a guard).
      for (const TensorType *in : ins) {
        if (!runtime || in->shape.size() < back) continue;
        size_t j = in->shape.size() - back;
        bool isRuntime = j < in->sym.size() && !in->sym[j].empty();
        if (isRuntime ? SymExpr::parse(in->sym[j]).canonical().str() != *runtime : in->shape[j] != 1)
          throw SymExprError("a run-time size broadcast against another size");
      }
      d.push_back(e);
    }
    r.push_back(text(d));
  }
  return r;
}

/// A reduction of argument 0 over `dim` (an int, an int list, or None: all) with `keepdim`.
SymResult reduction(const Node &n, const std::vector<TensorType> &types) {
  const OpSchema &s = n.op->schema;
  const TensorType &in = tensorType(n, 0);
  std::set<int64_t> reduced;
  bool keep = false, all = true;
  for (size_t i = 0; i < s.args.size(); ++i) {
    if (s.args[i].name == "keepdim") keep = n.boolArg(i);
    if (s.args[i].name != "dim" || n.isNoneArg(i)) continue;
    std::vector<int64_t> dims;
    if (auto *v = std::get_if<int64_t>(&n.args[i])) dims = {*v};
    else dims = n.intListArg(i);
    all = dims.empty();
    for (int64_t d : dims) reduced.insert(wrap(d, in.rank()));
  }
  Dims out;
  for (int64_t i = 0; i < in.rank(); ++i) {
    if (all || reduced.count(i)) {
      if (keep) out.push_back(SymExpr::integer(1));
    } else {
      out.push_back(dimOf(in, i));
    }
  }
  SymResult r;
  for (const TensorType &t : types) r.push_back(t.rank() == (int64_t)out.size() ? text(out) : std::vector<std::string>{});
  return r;
}

/// view / reshape / _unsafe_view: the size argument, a -1 solved from the element count.
SymResult view(const Node &n, const std::vector<TensorType> &) {
  const TensorType &in = tensorType(n, 0);
  const std::vector<int64_t> &size = n.intListArg(1);
  Dims out;
  int infer = -1;
  for (size_t k = 0; k < size.size(); ++k) {
    if (size[k] == -1 && !(n.symArg(1) && !(*n.symArg(1))[k].empty())) {
      infer = (int)k;
      out.push_back(SymExpr::integer(1));
    } else {
      out.push_back(intArgExpr(n, 1, k));
    }
  }
  if (infer >= 0)
    out[infer] = SymExpr::binary(SymExpr::Op::CleanDiv, product(dimsOf(in)), product(out));
  return {text(out)};
}

SymResult permute(const Node &n, const std::vector<TensorType> &) {
  const TensorType &in = tensorType(n, 0);
  Dims out;
  for (int64_t d : n.intListArg(1)) out.push_back(dimOf(in, wrap(d, in.rank())));
  return {text(out)};
}

SymResult transpose(const Node &n, const std::vector<TensorType> &) {
  const TensorType &in = tensorType(n, 0);
  Dims out = dimsOf(in);
  if (n.op->schema.name == "t") {
    if (out.size() == 2) std::swap(out[0], out[1]);
  } else {
    std::swap(out.at(wrap(n.intArg(1), in.rank())), out.at(wrap(n.intArg(2), in.rank())));
  }
  return {text(out)};
}

SymResult unsqueeze(const Node &n, const std::vector<TensorType> &) {
  const TensorType &in = tensorType(n, 0);
  Dims out = dimsOf(in);
  int64_t d = n.intArg(1);
  d = d < 0 ? d + in.rank() + 1 : d;
  out.insert(out.begin() + d, SymExpr::integer(1));
  return {text(out)};
}

/// squeeze.dim / squeeze.dims: the named dims of size 1 at the reference sizes go (a run-time
/// dim is never squeezed: ATen's meta keeps a symbolic size).
SymResult squeeze(const Node &n, const std::vector<TensorType> &) {
  const TensorType &in = tensorType(n, 0);
  std::set<int64_t> dims;
  if (auto *v = std::get_if<int64_t>(&n.args[1])) dims.insert(wrap(*v, in.rank()));
  else
    for (int64_t d : n.intListArg(1)) dims.insert(wrap(d, in.rank()));
  Dims out;
  for (int64_t i = 0; i < in.rank(); ++i) {
    bool runtime = i < (int64_t)in.sym.size() && !in.sym[i].empty();
    if (dims.count(i) && in.shape[i] == 1 && !runtime) continue;
    out.push_back(dimOf(in, i));
  }
  return {text(out)};
}

/// expand: the size argument, -1 keeping the (right-aligned) input dim.
SymResult expand(const Node &n, const std::vector<TensorType> &) {
  const TensorType &in = tensorType(n, 0);
  const std::vector<int64_t> &size = n.intListArg(1);
  Dims out;
  for (size_t k = 0; k < size.size(); ++k) {
    bool runtime = n.symArg(1) && !(*n.symArg(1))[k].empty();
    int64_t j = (int64_t)k - ((int64_t)size.size() - in.rank());
    if (size[k] == -1 && !runtime && j >= 0) out.push_back(dimOf(in, j));
    else out.push_back(intArgExpr(n, 1, k));
  }
  return {text(out)};
}

/// slice.Tensor over a run-time dim: `dim - start` from a start in [0, dim] to the end
/// (end >= the dim, as None and sys.maxsize are), step 1. Other slices of a run-time dim are
/// not symbolic yet (their length needs clamps over the range).
SymResult slice(const Node &n, const std::vector<TensorType> &types) {
  const TensorType &in = tensorType(n, 0);
  int64_t dim = wrap(n.intArg(1), in.rank());
  Dims out = dimsOf(in);
  bool runtimeDim = dim < (int64_t)in.sym.size() && !in.sym[dim].empty();
  bool runtimeArgs = n.symArg(2) || n.symArg(3) || n.symArg(4);
  if (!runtimeDim && !runtimeArgs) {
    out[dim] = SymExpr::integer(types[0].shape[dim]);
    return {text(out)};
  }
  int64_t start = n.isNoneArg(2) ? 0 : n.intArg(2), step = n.intArg(4);
  bool toEnd = n.isNoneArg(3) || (!n.symArg(3) && n.intArg(3) >= (int64_t(1) << 62));
  if (!runtimeArgs && step == 1 && toEnd && start >= 0 && start <= in.shape[dim]) {
    out[dim] = add(dimOf(in, dim), SymExpr::integer(-start));
    return {text(out)};
  }
  if (!runtimeDim && n.symArg(3) && !n.symArg(2) && !n.symArg(4) && step == 1 && start == 0) {
    out[dim] = intArgExpr(n, 3); // x[:, :T] of a static dim at least T long
    if (types[0].shape[dim] == n.intArg(3)) return {text(out)};
  }
  // [start, end) with run-time bounds inside the dim, step 1: end - start. The bounds are in
  // range at the reference sizes; at others this assumes what the rewrites that write them
  // guarantee (the pieces of a cat, a slice_scatter's gradient). Capture checks an export's
  // own slices against its expressions.
  if (runtimeArgs && !n.symArg(4) && step == 1 && !n.isNoneArg(2) && !n.isNoneArg(3)) {
    int64_t end = n.intArg(3);
    if (0 <= start && start <= end && end <= in.shape[dim]) {
      out[dim] = add(intArgExpr(n, 3), mul(SymExpr::integer(-1), intArgExpr(n, 2)));
      return {text(out)};
    }
  }
  throw SymExprError("this slice of a run-time size");
}

SymResult select(const Node &n, const std::vector<TensorType> &) {
  const TensorType &in = tensorType(n, 0);
  Dims out = dimsOf(in);
  out.erase(out.begin() + wrap(n.intArg(1), in.rank()));
  return {text(out)};
}

/// cat: the sum of the operands' dims along `dim` (1-d empty operands skipped, as ATen does).
SymResult cat(const Node &n, const std::vector<TensorType> &types) {
  const auto &ts = std::get<std::vector<Node *>>(n.args[0]);
  const TensorType *first = nullptr;
  for (const Node *t : ts)
    if (!(t->type().rank() == 1 && t->type().shape[0] == 0 && t->type().sym.empty())) {
      first = &t->type();
      break;
    }
  if (!first) return {{}};
  int64_t dim = wrap(n.intArg(1), first->rank());
  Dims out = dimsOf(*first);
  SymExpr sum = SymExpr::integer(0);
  for (const Node *t : ts)
    if (t->type().rank() == first->rank()) sum = add(sum, dimOf(t->type(), dim));
  out[dim] = sum;
  (void)types;
  return {text(out)};
}

/// split_with_sizes: the sizes argument along `dim`.
SymResult splitWithSizes(const Node &n, const std::vector<TensorType> &types) {
  const TensorType &in = tensorType(n, 0);
  int64_t dim = wrap(n.intArg(2), in.rank());
  SymResult r;
  for (size_t k = 0; k < types.size(); ++k) {
    Dims out = dimsOf(in);
    out[dim] = intArgExpr(n, 1, k);
    r.push_back(text(out));
  }
  return r;
}

SymResult mm(const Node &n, const std::vector<TensorType> &) {
  const TensorType &a = tensorType(n, 0), &b = tensorType(n, 1);
  return {text({dimOf(a, 0), dimOf(b, 1)})};
}
SymResult addmm(const Node &n, const std::vector<TensorType> &) {
  const TensorType &a = tensorType(n, 1), &b = tensorType(n, 2);
  return {text({dimOf(a, 0), dimOf(b, 1)})};
}
SymResult bmm(const Node &n, const std::vector<TensorType> &) {
  const TensorType &a = tensorType(n, 0), &b = tensorType(n, 1);
  return {text({dimOf(a, 0), dimOf(a, 1), dimOf(b, 2)})};
}

/// embedding(weight, indices): indices' dims, then the embedding dim.
SymResult embedding(const Node &n, const std::vector<TensorType> &) {
  Dims out = dimsOf(tensorType(n, 1));
  out.push_back(dimOf(tensorType(n, 0), 1));
  return {text(out)};
}
/// index_select(self, dim, index): self's dims, `dim` the index's length.
SymResult indexSelect(const Node &n, const std::vector<TensorType> &) {
  const TensorType &in = tensorType(n, 0);
  Dims out = dimsOf(in);
  if (!out.empty()) {
    const TensorType &ix = tensorType(n, 2);
    out[wrap(n.intArg(1), in.rank())] = ix.rank() == 0 ? SymExpr::integer(1) : dimOf(ix, 0);
  }
  return {text(out)};
}
/// gather(self, dim, index): index's dims.
SymResult gather(const Node &n, const std::vector<TensorType> &) { return {text(dimsOf(tensorType(n, 2)))}; }
/// Results shaped like argument 0 (softmax, layer norm's output, dropout, ...), and for the
/// others the types' own sizes (statistics, masks: see the op rules that need more).
SymResult likeFirst(const Node &n, const std::vector<TensorType> &types) {
  SymResult r{text(dimsOf(tensorType(n, 0)))};
  for (size_t k = 1; k < types.size(); ++k) r.push_back({});
  return r;
}
/// Every result shaped like argument 0 (native_dropout's output and mask).
SymResult allLikeFirst(const Node &n, const std::vector<TensorType> &types) {
  return SymResult(types.size(), text(dimsOf(tensorType(n, 0))));
}
/// Ops over a batch: the tensor arguments in `batchArgs` may have a run-time dim 0 (the batch).
/// Any other run-time size, in a dim or an argument (but element 0 of int-list argument
/// `sizeArg`, an input_size) has no shape function yet: a run-time height, width or channel
/// count, a weight with a run-time dim.
void batchDimsOnly(const Node &n, const std::vector<size_t> &batchArgs, int sizeArg = -1) {
  auto check = [](const TensorType &t, bool batch) {
    for (size_t j = batch ? 1 : 0; j < t.sym.size(); ++j)
      if (!t.sym[j].empty()) throw SymExprError("a run-time size in a dim other than the batch (dim 0)");
  };
  for (size_t i = 0; i < n.args.size(); ++i) {
    bool batch = std::find(batchArgs.begin(), batchArgs.end(), i) != batchArgs.end();
    if (auto *x = std::get_if<Node *>(&n.args[i]); x && *x)
      for (const TensorType &t : (*x)->types) check(t, batch);
    if (auto *v = std::get_if<std::vector<Node *>>(&n.args[i]))
      for (const Node *x : *v)
        if (x)
          for (const TensorType &t : x->types) check(t, false);
  }
  for (const auto &[i, exprs] : n.symArgs)
    for (size_t k = 0; k < exprs.size(); ++k)
      if (!exprs[k].empty() && ((int)i != sizeArg || k != 0))
        throw SymExprError("a run-time size argument other than the batch");
}
/// Ops over a batch (convolution, pooling): dim 0 of the results in `batched` is dim 0 of
/// argument `from`; every other dim and result is static.
decltype(OpDef::symInfer) batchOnly(size_t from, std::vector<size_t> batched, std::vector<size_t> batchArgs) {
  return [from, batched, batchArgs](const Node &n, const std::vector<TensorType> &types) {
    batchDimsOnly(n, batchArgs);
    SymResult r(types.size());
    for (size_t k : batched) {
      if (k >= types.size() || types[k].rank() == 0) continue;
      Dims d{dimOf(tensorType(n, from), 0)};
      for (size_t i = 1; i < types[k].shape.size(); ++i) d.push_back(SymExpr::integer(types[k].shape[i]));
      r[k] = text(d);
    }
    return r;
  };
}
/// The gradient of a pooling's input: result 0 like argument `i` (the input), over a batch.
decltype(OpDef::symInfer) likeArg(size_t i, std::vector<size_t> batchArgs) {
  return [i, batchArgs](const Node &n, const std::vector<TensorType> &types) {
    batchDimsOnly(n, batchArgs);
    SymResult r(types.size());
    r[0] = text(dimsOf(tensorType(n, i)));
    return r;
  };
}
/// A gradient whose sizes are its int-list argument `a` (input_size), over a batch.
decltype(OpDef::symInfer) sizesFromArg(size_t a, std::vector<size_t> batchArgs) {
  return [a, batchArgs](const Node &n, const std::vector<TensorType> &types) {
    batchDimsOnly(n, batchArgs, (int)a);
    Dims out;
    for (size_t k = 0; k < types[0].shape.size(); ++k) out.push_back(intArgExpr(n, a, k));
    return SymResult{text(out)};
  };
}
/// constant_pad_nd(x, pad): the last dims grown by their pads (pad lists the last dim first).
SymResult constantPadNd(const Node &n, const std::vector<TensorType> &) {
  const TensorType &in = tensorType(n, 0);
  Dims d = dimsOf(in);
  size_t pairs = n.intListArg(1).size() / 2;
  for (size_t i = 0; i < pairs && i < d.size(); ++i) {
    size_t dim = d.size() - 1 - i;
    d[dim] = add(d[dim], add(intArgExpr(n, 1, 2 * i), intArgExpr(n, 1, 2 * i + 1)));
  }
  return {text(d)};
}
/// Results whose sizes no run-time size reaches (a gradient of a weight, a table's rows).
SymResult staticResults(const Node &, const std::vector<TensorType> &types) { return SymResult(types.size()); }
/// native_layer_norm: the output like the input; mean and rstd keep the leading dims.
SymResult layerNorm(const Node &n, const std::vector<TensorType> &types) {
  const TensorType &in = tensorType(n, 0);
  SymResult r{text(dimsOf(in))};
  size_t lead = in.shape.size() - n.intListArg(1).size();
  for (size_t k = 1; k < types.size(); ++k) {
    Dims d;
    for (size_t i = 0; i < types[k].shape.size(); ++i) d.push_back(i < lead ? dimOf(in, i) : SymExpr::integer(1));
    r.push_back(text(d));
  }
  return r;
}

/// unbind(x, dim): every result is x without `dim`; along a run-time size (the number of
/// results) there is none.
SymResult unbind(const Node &n, const std::vector<TensorType> &types) {
  const TensorType &in = tensorType(n, 0);
  Dims d = dimsOf(in);
  if (d.empty()) return SymResult(types.size());
  size_t at = (size_t)wrap(n.intArg(1), in.rank());
  if (d[at].hasSymbols()) throw SymExprError("unbind along a run-time size (the number of results)");
  d.erase(d.begin() + at);
  return SymResult(types.size(), text(d));
}
/// native_group_norm(x, w, b, N, C, HxW, group, eps) over a run-time batch: the output like x,
/// mean and rstd [N, group].
SymResult groupNorm(const Node &n, const std::vector<TensorType> &types) {
  batchDimsOnly(n, {0}, 3);
  const TensorType &in = tensorType(n, 0);
  SymResult r{text(dimsOf(in))};
  for (size_t k = 1; k < types.size(); ++k) r.push_back(text({dimOf(in, 0), SymExpr::integer(n.intArg(6))}));
  return r;
}
/// native_group_norm_backward(g, x, mean, rstd, w, N, ...): grad_input like x; the weight's and
/// bias's static.
SymResult groupNormBackward(const Node &n, const std::vector<TensorType> &types) {
  batchDimsOnly(n, {0, 1, 2, 3}, 5);
  SymResult r(types.size());
  r[0] = text(dimsOf(tensorType(n, 1)));
  return r;
}

/// Factories with a `size` argument (full, empty; philox_uniform's is its
/// third).
SymResult sizeFactory(const Node &n, const std::vector<TensorType> &types) {
  size_t at = 0;
  for (size_t i = 0; i < n.op->schema.args.size(); ++i)
    if (n.op->schema.args[i].name == "size") at = i;
  Dims out;
  for (size_t k = 0; k < types[0].shape.size(); ++k) out.push_back(intArgExpr(n, at, k));
  return {text(out)};
}
/// *_like factories: argument 0's dims.
SymResult likeFactory(const Node &n, const std::vector<TensorType> &) { return {text(dimsOf(tensorType(n, 0)))}; }

/// arange(end) / arange.start_step(start, end, step): ceil((end - start) / step) for integer
/// bounds; a step other than 1 with run-time bounds is not symbolic yet.
SymResult arange(const Node &n, const std::vector<TensorType> &) {
  bool startStep = n.op->schema.overload == "start_step" || n.op->schema.overload == "start";
  SymExpr end = intArgExpr(n, startStep ? 1 : 0);
  SymExpr start = startStep ? intArgExpr(n, 0) : SymExpr::integer(0);
  bool unitStep = n.op->schema.overload != "start_step" || (!n.symArg(2) && std::holds_alternative<int64_t>(n.args[2]) &&
                                                           std::get<int64_t>(n.args[2]) == 1);
  if (!unitStep) throw SymExprError("arange with a step other than 1 over a run-time size");
  return {text({add(end, mul(SymExpr::integer(-1), start))})};
}

} // namespace

namespace ops {

void registerSymbolicShapes(OpRegistry &r) {
  auto set = [&](const char *target, decltype(OpDef::symInfer) f) {
    OpDef *d = r.edit(target);
    AOTC_ASSERT(d, std::string("symbolic shape function of an unknown op ") + target);
    d->symInfer = std::move(f);
  };
  for (auto &[target, def] : r.all()) {
    OpDef &d = *r.edit(target);
    bool dimArg = false;
    for (const SchemaArg &a : d.schema.args) dimArg |= a.name == "dim";
    bool keep = false;
    for (const SchemaArg &a : d.schema.args) keep |= a.name == "keepdim";
    if (d.category == OpCategory::Pointwise && !dimArg) d.symInfer = pointwise;
    if (d.category == OpCategory::Reduction && keep && d.schema.numReturns == 1) d.symInfer = reduction;
  }
  for (const char *t : {"aten.view.default", "aten._unsafe_view.default", "aten.reshape.default"}) set(t, view);
  set("aten.permute.default", permute);
  set("aten.t.default", transpose);
  set("aten.transpose.int", transpose);
  set("aten.unsqueeze.default", unsqueeze);
  set("aten.squeeze.dim", squeeze);
  set("aten.squeeze.dims", squeeze);
  set("aten.expand.default", expand);
  set("aten.slice.Tensor", slice);
  set("aten.select.int", select);
  set("aten.cat.default", cat);
  set("aten.split_with_sizes.default", splitWithSizes);
  set("aten.mm.default", mm);
  set("aten.addmm.default", addmm);
  set("aten.bmm.default", bmm);
  set("aten.embedding.default", embedding);
  set("aten.gather.default", gather);
  set("aten.index_select.default", indexSelect);
  set("aten._softmax.default", likeFirst);
  set("aten._log_softmax.default", likeFirst);
  set("aten._native_batch_norm_legit_functional.default", likeFirst);
  set("aten.native_layer_norm.default", layerNorm);
  set("aten.native_group_norm.default", groupNorm);
  set("aten.unbind.int", unbind);
  set("aten.native_group_norm_backward.default", groupNormBackward);
  for (const char *t : {"aten.full.default", "aten.empty.memory_format", "aten.rand.default", "aten.randn.default",
                        "aotc.philox_uniform.default"})
    set(t, sizeFactory);
  for (const char *t : {"aten.rand_like.default", "aten.randn_like.default"}) set(t, likeFactory);
  set("aten.native_dropout.default", allLikeFirst);
  // Results shaped like the first argument: aliases, scatters into it, softmax variants.
  for (const char *t : {"aten.alias.default", "aten.detach.default", "aten.slice_scatter.default",
                        "aten.select_scatter.default", "aten._safe_softmax.default", "aotc.safe_softmax.default",
                        "aten.dropout.default", "aten.scatter_add.default", "aten.scatter.src", "aten.scatter.value",
                        "aten.scatter_reduce.two", "aten._softmax_backward_data.default",
                        "aten._log_softmax_backward_data.default", "aten.threshold_backward.default",
                        "aten.gelu_backward.default",
                        // the gradient of the input like the output's; the others weights' (static)
                        "aten.native_layer_norm_backward.default", "aten.native_batch_norm_backward.default"})
    set(t, likeFirst);
  // Convolution and pooling over a run-time batch (issue 30 item 5, phase 1).
  set("aten.convolution.default", batchOnly(0, {0}, {0}));
  set("aten.convolution_backward.default", batchOnly(1, {0}, {0, 1})); // grad_input; the weight's, bias's static
  set("aotc.conv_weight_grad.default", batchOnly(0, {}, {0, 1}));
  set("aotc.conv_input_grad.default", sizesFromArg(2, {0}));
  set("aten.max_pool2d_with_indices.default", batchOnly(0, {0, 1}, {0}));
  set("aten.max_pool2d_with_indices_backward.default", likeArg(1, {0, 1, 7})); // grad, self, indices
  set("aten.avg_pool2d.default", batchOnly(0, {0}, {0}));
  set("aten.avg_pool2d_backward.default", likeArg(1, {0, 1}));
  set("aten._adaptive_avg_pool2d.default", batchOnly(0, {0}, {0}));
  set("aten._adaptive_avg_pool2d_backward.default", likeArg(1, {0, 1}));
  for (const char *t : {"aten.upsample_nearest2d.default", "aten.upsample_bilinear2d.default",
                        "aten.upsample_nearest2d.vec", "aten.upsample_bilinear2d.vec"})
    set(t, batchOnly(0, {0}, {0}));
  for (const char *t : {"aten.upsample_nearest2d_backward.default", "aten.upsample_bilinear2d_backward.default"})
    set(t, sizesFromArg(2, {0}));
  set("aten.as_strided.default", sizeFactory); // its `size`
  for (const char *t : {"aten.mean.default", "aten.sum.default"}) set(t, reduction); // to a 0-d tensor
  set("aten.constant_pad_nd.default", constantPadNd);
  set("aten.embedding_dense_backward.default", staticResults);
  set("aten.scalar_tensor.default", staticResults); // 0-d, its value a run-time size or not
  set("aten.full_like.default", likeFactory);
  set("aten.arange.default", arange);
  set("aten.arange.start_step", arange);
}

} // namespace ops

std::optional<std::vector<std::vector<std::string>>> inferSymbolic(const Node &node,
                                                                   const std::vector<TensorType> &types) {
  bool runtime = !node.symArgs.empty();
  for (const Node *in : node.inputs())
    for (const TensorType &t : in->types) runtime |= t.symbolic();
  if (!runtime) return std::vector<std::vector<std::string>>(types.size());
  if (node.isGetitem()) {
    const Node *src = node.tensorArg(0);
    int64_t i = node.intArg(1);
    return std::vector<std::vector<std::string>>{src->types.at(i < 0 ? i + src->types.size() : i).sym};
  }
  if (!node.op || !node.op->symInfer) return std::nullopt;
  SymResult r;
  try {
    r = node.op->symInfer(node, types);
  } catch (const SymExprError &) {
    return std::nullopt;
  }
  if (r.size() != types.size()) return std::nullopt;
  for (size_t k = 0; k < r.size(); ++k)
    if (!r[k].empty() && r[k].size() != types[k].shape.size()) return std::nullopt;
  return r;
}

} // namespace aotc
