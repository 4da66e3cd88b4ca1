//===- Factory.cpp - full, zeros, ones, *_like, scalar_tensor, arange, tril ---===//
//
// Dtype defaults follow torch/_refs/__init__.py: full() infers the dtype from
// the fill value (bool -> bool, int -> i64, float -> default f32); zeros/ones/
// scalar_tensor default to f32; *_like keep self's dtype; arange gives i64 when
// start, end and step are all ints, else f32 (torch.arange docs). All factories
// are non-differentiable. tril/triu (TriangularOps.cpp) live here too: they are
// masks by position, differentiable, category Other.
//===----------------------------------------------------------------------===//
#include "Ops.h"

namespace aotc {
namespace ops {
namespace {

using Types = std::vector<TensorType>;

DType fillDType(const Node &n, size_t i) {
  DType d = numberDType(n.args.at(i));
  return isFloating(d) ? kDefaultFloat : d;
}

/// torch's "value cannot be converted to type int64_t without overflow": a fill value that
/// does not fit an integer result (NaN, +-inf, beyond int64) is a user error (libFuzzer find:
/// full_like(i64, nan) reached codegen, whose constant conversion was undefined).
DType checkFill(const Node &n, size_t i, DType result) {
  if (isFloating(result) || result == DType::Bool) return result;
  if (auto *d = std::get_if<double>(&n.args.at(i)); d && !(*d >= -9.2233720368547758e18 && *d < 9.2233720368547758e18))
    nodeError(n, "value " + argStr(n.args[i]) + " cannot be converted to type " + dtypeTorchName(result) +
                     " without overflow");
  return result;
}

RefTensor filled(const Node &n, double v) {
  const TensorType &t = n.types[0];
  return RefTensor(t.dtype, t.shape, castValue(t.dtype, v));
}

/// arange's (start, end, step) of the arange.start_step / arange.default argument layouts.
struct Range { double start, end, step; };
Range rangeOf(const Node &n, bool startStep) {
  if (startStep) return {n.scalarArg(0), n.scalarArg(1), n.scalarArg(2)};
  return {0.0, n.scalarArg(0), 1.0};
}

int64_t rangeLen(const Node &n, const Range &r) {
  if (!std::isfinite(r.start) || !std::isfinite(r.end) || !std::isfinite(r.step))
    nodeError(n, "arange: unsupported range: " + argStr(Arg(r.start)) + " -> " + argStr(Arg(r.end)) +
                     " (step " + argStr(Arg(r.step)) + ")");
  if (r.step == 0) nodeError(n, "arange: step must be nonzero");
  if ((r.step > 0 && r.end < r.start) || (r.step < 0 && r.end > r.start))
    nodeError(n, "arange: upper bound and larger bound inconsistent with step sign");
  // Checked before the conversion: a huge range is a user error, not a wrapped size.
  double len = std::ceil((r.end - r.start) / r.step);
  if (!(len < 9.0e18))
    nodeError(n, "arange: the range " + argStr(Arg(r.start)) + " -> " + argStr(Arg(r.end)) +
                     " has too many elements");
  return (int64_t)len;
}

void triangular(OpRegistry &r, const char *schema, bool lower) {
  OpDef &d = r.add(schema, OpCategory::Other);
  d.primitive = true;
  d.recomputable = !lower; // torch's default_recomputable_ops lists triu, not tril
  d.infer = [](const Node &n) -> Types {
    TensorType t = argType(n, 0);
    if (t.rank() < 2) nodeError(n, "tril/triu: input tensor must have at least 2 dimensions");
    return {t};
  };
  setEval(d, [lower](const Node &n, const RefArgs &a) {
    RefTensor out = *a.at(0);
    int64_t diag = n.intArg(1), rank = (int64_t)out.shape.size();
    for (int64_t k = 0; k < out.numel(); ++k) {
      std::vector<int64_t> idx = unravel(k, out.shape);
      int64_t off = idx[rank - 1] - idx[rank - 2];
      bool keep = lower ? off <= diag : off >= diag;
      if (!keep) out.data[k] = 0.0;
    }
    return out;
  });
}

} // namespace

Shape sizeArg(const Node &n, size_t i) {
  const auto &s = n.intListArg(i);
  for (int64_t d : s)
    if (d < 0) nodeError(n, "negative dimension " + std::to_string(d) + " in size " + shapeStr(s));
  return s;
}

void registerFactoryOps(OpRegistry &r) {
  const std::string opts = "ScalarType? dtype=None, Layout? layout=None, Device? device=None, bool? pin_memory=None";
  {
    OpDef &d = r.add("full(SymInt[] size, Scalar fill_value, *, " + opts + ") -> Tensor", OpCategory::Factory);
    d.primitive = true;
    d.nonDifferentiable = true;
    d.infer = [](const Node &n) -> Types {
      return {{checkFill(n, 1, dtypeArg(n, 2).value_or(fillDType(n, 1))), sizeArg(n, 0)}};
    };
    setEval(d, [](const Node &n, const RefArgs &) { return filled(n, n.scalarArg(1)); });
  }
  {
    OpDef &d = r.add("scalar_tensor(Scalar s, *, " + opts + ") -> Tensor", OpCategory::Factory);
    d.primitive = true;
    d.nonDifferentiable = true;
    d.infer = [](const Node &n) -> Types { return {{checkFill(n, 0, dtypeArg(n, 1).value_or(kDefaultFloat)), {}}}; };
    setEval(d, [](const Node &n, const RefArgs &) { return filled(n, n.scalarArg(0)); });
  }
  for (auto [name, v] : {std::pair<const char *, double>{"zeros", 0.0}, {"ones", 1.0}}) {
    OpDef &d = r.add(std::string(name) + "(SymInt[] size, *, " + opts + ") -> Tensor", OpCategory::Factory);
    d.primitive = true;
    d.nonDifferentiable = true;
    d.infer = [](const Node &n) -> Types { return {{dtypeArg(n, 1).value_or(kDefaultFloat), sizeArg(n, 0)}}; };
    setEval(d, [v = v](const Node &n, const RefArgs &) { return filled(n, v); });
  }
  for (auto [name, v] : {std::pair<const char *, double>{"zeros_like", 0.0}, {"ones_like", 1.0}}) {
    OpDef &d = r.add(std::string(name) + "(Tensor self, *, " + opts + ", MemoryFormat? memory_format=None) -> Tensor",
                     OpCategory::Factory);
    d.primitive = true;
    d.nonDifferentiable = true;
    d.infer = [](const Node &n) -> Types {
      TensorType t = argType(n, 0);
      return {{dtypeArg(n, 1).value_or(t.dtype), t.shape}};
    };
    setEval(d, [v = v](const Node &n, const RefArgs &) { return filled(n, v); });
  }
  {
    OpDef &d = r.add("full_like(Tensor self, Scalar fill_value, *, " + opts +
                         ", MemoryFormat? memory_format=None) -> Tensor",
                     OpCategory::Factory);
    d.primitive = true;
    d.nonDifferentiable = true;
    d.infer = [](const Node &n) -> Types {
      TensorType t = argType(n, 0);
      return {{checkFill(n, 1, dtypeArg(n, 2).value_or(t.dtype)), t.shape}};
    };
    setEval(d, [](const Node &n, const RefArgs &) { return filled(n, n.scalarArg(1)); });
  }
  for (bool startStep : {true, false}) {
    OpDef &d = startStep ? r.add("arange.start_step(Scalar start, Scalar end, Scalar step=1, *, " + opts + ") -> Tensor",
                                 OpCategory::Factory)
                         : r.add("arange(Scalar end, *, " + opts + ") -> Tensor", OpCategory::Factory);
    d.primitive = true;
    d.nonDifferentiable = true;
    d.narrowResults = true; // torch.eye's decomposition compares uint8 aranges
    size_t nScalars = startStep ? 3 : 1;
    d.infer = [startStep, nScalars](const Node &n) -> Types {
      bool anyFloat = false;
      for (size_t i = 0; i < nScalars; ++i) anyFloat |= std::holds_alternative<double>(n.args.at(i));
      DType dt = dtypeArg(n, nScalars).value_or(anyFloat ? kDefaultFloat : DType::I64);
      // An integer or bool arange computes in int64: start/end/step must fit (libFuzzer
      // find: step 1e308 with dtype=torch.bool reached an undefined double -> int64 cast).
      if (!isFloating(dt))
        for (size_t i = 0; i < nScalars; ++i)
          checkFill(n, i, DType::I64);
      return {{dt, {rangeLen(n, rangeOf(n, startStep))}}};
    };
    setEval(d, [startStep](const Node &n, const RefArgs &) {
      Range rg = rangeOf(n, startStep);
      RefTensor out(n.types[0].dtype, n.types[0].shape);
      for (int64_t i = 0; i < out.numel(); ++i) out.data[i] = castValue(out.dtype, rg.start + (double)i * rg.step);
      return out;
    });
  }
  {
    // fill.Scalar(self, value): self's type, every element `value` (the functional fill_);
    // torch's derivative is zeros_like(grad). A composite: full_like.
    OpDef &d = r.add("fill.Scalar(Tensor self, Scalar value) -> Tensor", OpCategory::Composite);
    d.nonDifferentiable = true;
    d.infer = [](const Node &n) -> Types {
      TensorType t = argType(n, 0);
      checkFill(n, 1, t.dtype);
      return {t};
    };
    setEval(d, [](const Node &n, const RefArgs &) { return filled(n, n.scalarArg(1)); });
  }
  // empty / empty_strided: torch leaves the values uninitialized; aotc's values are zeros (so a
  // program that reads them is still deterministic). Values are dense, so the strides only
  // need to be a valid list. Composites: zeros.
  for (bool strided : {false, true}) {
    OpDef &d = strided ? r.add("empty_strided(SymInt[] size, SymInt[] stride, *, " + opts + ") -> Tensor",
                               OpCategory::Composite)
                       : r.add("empty.memory_format(SymInt[] size, *, " + opts +
                                   ", MemoryFormat? memory_format=None) -> Tensor",
                               OpCategory::Composite);
    d.nonDifferentiable = true;
    d.infer = [strided](const Node &n) -> Types {
      Shape s = sizeArg(n, 0);
      if (strided && n.intListArg(1).size() != s.size())
        nodeError(n, "empty_strided: mismatch in length of strides and shape (" + std::to_string(n.intListArg(1).size()) +
                         " strides, " + std::to_string(s.size()) + " dims)");
      return {{dtypeArg(n, strided ? 2 : 1).value_or(kDefaultFloat), s}};
    };
    setEval(d, [](const Node &n, const RefArgs &) { return filled(n, 0.0); });
  }
  triangular(r, "tril(Tensor self, int diagonal=0) -> Tensor", true);
  triangular(r, "triu(Tensor self, int diagonal=0) -> Tensor", false);
}

} // namespace ops
} // namespace aotc
