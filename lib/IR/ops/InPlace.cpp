//===- InPlace.cpp - In-place ops accepted before functionalization ----------===//
//
// `op_(Tensor(a!) self, ...) -> Tensor(a!)`: parseSchema marks them mutating
// (OpSchema::mutates, mutatedArgs = {0}). Functionalize rewrites each to its
// out-of-place counterpart; until then these entries give the result type
// (self's type: the out-of-place result must broadcast to self's shape and be
// castable to self's dtype, as in TensorIterator's in-place checks) and a
// reference value (the out-of-place result cast to self's dtype).
//===----------------------------------------------------------------------===//
#include "Ops.h"

namespace aotc {
namespace ops {
namespace {

using Types = std::vector<TensorType>;

/// Registers `schema` with the shape function and evaluator of the functional op `base`
/// (same argument layout).
void inPlaceOf(OpRegistry &r, const std::string &schema, const std::string &base) {
  const OpDef *b = r.lookup(base);
  AOTC_ASSERT(b, "in-place op's base '" + base + "' is not registered");
  OpDef &d = r.add(schema, b->category);
  auto inferBase = b->infer;
  d.infer = [inferBase](const Node &n) -> Types {
    TensorType self = argType(n, 0);
    TensorType res = inferBase(n)[0];
    if (res.shape != self.shape)
      nodeError(n, "output with shape " + shapeStr(self.shape) + " doesn't match the broadcast shape " +
                       shapeStr(res.shape));
    if (!canCast(res.dtype, self.dtype))
      nodeError(n, std::string("result type ") + dtypeTorchName(res.dtype) + " can't be cast to the desired output type " +
                       dtypeTorchName(self.dtype));
    return {self};
  };
  d.eval = b->eval; // evaluators write n.types[0] (= self's type), casting values to it
}

} // namespace

/// Registers the out= overload `schema` of `base` (`foo.out(..., *, Tensor(a!) out)`): its
/// result is `out` (type: out's; foo's result must have out's shape and cast to its dtype).
void outOf(OpRegistry &r, const std::string &schema, const std::string &base) {
  const OpDef *b = r.lookup(base);
  AOTC_ASSERT(b, "out= op's base '" + base + "' is not registered");
  OpDef &d = r.add(schema, b->category);
  auto inferBase = b->infer;
  d.infer = [inferBase](const Node &n) -> Types {
    TensorType out = argType(n, n.args.size() - 1);
    TensorType res = inferBase(n)[0]; // the base's arguments come first, in its order
    if (res.shape != out.shape)
      nodeError(n, "out= tensor of shape " + shapeStr(out.shape) + " for a result of shape " + shapeStr(res.shape) +
                       " (torch would resize it; aotc's shapes are static)");
    if (!canCast(res.dtype, out.dtype))
      nodeError(n, std::string("result type ") + dtypeTorchName(res.dtype) + " can't be cast to the desired output type " +
                       dtypeTorchName(out.dtype));
    return {out};
  };
  d.eval = b->eval; // evaluators write n.types[0] (= out's type)
}

void registerInPlaceOps(OpRegistry &r) {
  // out= overloads: only the Core ATen one (atan2.out); functionalize makes them foo + a write.
  outOf(r, "atan2.out(Tensor self, Tensor other, *, Tensor(a!) out) -> Tensor(a!)", "aten.atan2.default");
  inPlaceOf(r, "add_.Tensor(Tensor(a!) self, Tensor other, *, Scalar alpha=1) -> Tensor(a!)", "aten.add.Tensor");
  inPlaceOf(r, "add_.Scalar(Tensor(a!) self, Scalar other, Scalar alpha=1) -> Tensor(a!)", "aten.add.Scalar");
  inPlaceOf(r, "sub_.Tensor(Tensor(a!) self, Tensor other, *, Scalar alpha=1) -> Tensor(a!)", "aten.sub.Tensor");
  inPlaceOf(r, "mul_.Tensor(Tensor(a!) self, Tensor other) -> Tensor(a!)", "aten.mul.Tensor");
  inPlaceOf(r, "mul_.Scalar(Tensor(a!) self, Scalar other) -> Tensor(a!)", "aten.mul.Scalar");
  inPlaceOf(r, "div_.Tensor(Tensor(a!) self, Tensor other) -> Tensor(a!)", "aten.div.Tensor");
  inPlaceOf(r, "relu_(Tensor(a!) self) -> Tensor(a!)", "aten.relu.default");
  inPlaceOf(r, "clamp_(Tensor(a!) self, Scalar? min=None, Scalar? max=None) -> Tensor(a!)", "aten.clamp.default");
  {
    // copy_(self, src): src broadcast to self's shape, cast to self's dtype.
    OpDef &d = r.add("copy_(Tensor(a!) self, Tensor src, bool non_blocking=False) -> Tensor(a!)", OpCategory::Pointwise);
    d.infer = [](const Node &n) -> Types {
      TensorType self = argType(n, 0), src = argType(n, 1);
      auto b = broadcastShapes(src.shape, self.shape);
      if (!b || *b != self.shape)
        nodeError(n, "copy_: source of shape " + shapeStr(src.shape) + " does not broadcast to " + shapeStr(self.shape));
      return {self};
    };
    setEval(d, [](const Node &n, const RefArgs &a) {
      return mapArgs(n, a, {1}, [](const double *x) { return x[0]; });
    });
  }
  {
    OpDef &d = r.add("fill_.Scalar(Tensor(a!) self, Scalar value) -> Tensor(a!)", OpCategory::Pointwise);
    d.infer = [](const Node &n) -> Types { return {argType(n, 0)}; };
    setEval(d, [](const Node &n, const RefArgs &a) {
      const TensorType &t = n.types[0];
      return RefTensor(t.dtype, t.shape, castValue(t.dtype, n.scalarArg(1)));
    });
  }
  {
    OpDef &d = r.add("zero_(Tensor(a!) self) -> Tensor(a!)", OpCategory::Pointwise);
    d.infer = [](const Node &n) -> Types { return {argType(n, 0)}; };
    setEval(d, [](const Node &n, const RefArgs &) { return RefTensor(n.types[0].dtype, n.types[0].shape, 0.0); });
  }
}

} // namespace ops
} // namespace aotc
