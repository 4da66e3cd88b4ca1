//===- Arith.cpp - pow.Scalar, div with a rounding mode, clamp with tensor bounds ------===//
//
// Composites of the pointwise family (decompose or lower rewrites them; see
// docs/stage-decompose.md and docs/stage-lower.md):
//  * pow.Scalar(base, exponent): a Python-number base; result_type(base, exponent)
//    (pow(2, int tensor) is i64, pow(2.5, int tensor) f32);
//  * div.Tensor_mode / div.Scalar_mode (BinaryOps.cpp div_trunc / div_floor): None is true
//    division; 'trunc' rounds toward zero; 'floor' is Python's // (div_floor_floating:
//    (a - fmod(a, b)) / b corrected toward -inf, then rounded to the nearest integer, so
//    the quotient is exact where floor(a / b) would round). The dtype is
//    result_type(self, other) for a mode; gradients are zero (torch: grad * 0);
//  * clamp.Tensor(self, min?, max?): min(max(self, min), max) with NaN propagating from
//    every operand, result_type(self, min, max); its gradient rule is torch 2.15's
//    (derivatives.yaml: ties share the gradient).
//===----------------------------------------------------------------------===//
#include "Ops.h"

namespace aotc {
namespace ops {
namespace {

using Types = std::vector<TensorType>;

/// Python's floor division of floating values, as torch's div_floor_floating.
double floorDivide(double a, double b) {
  if (b == 0) return a / b;
  double mod = std::fmod(a, b);
  double div = (a - mod) / b;
  if (mod != 0 && (b < 0) != (mod < 0)) div -= 1;
  if (div == 0) return std::copysign(0.0, a / b);
  double fl = std::floor(div);
  if (div - fl > 0.5) fl += 1;
  return fl;
}

/// The rounding mode of a div.*_mode node: "" (None), "trunc" or "floor".
std::string roundingMode(const Node &n) {
  if (n.isNoneArg(2)) return "";
  const std::string &m = std::get<std::string>(n.args.at(2));
  if (m != "trunc" && m != "floor")
    nodeError(n, "div expected rounding_mode to be one of None, 'trunc', or 'floor' but found '" + m + "'");
  return m;
}

} // namespace

void registerArithOps(OpRegistry &r) {
  {
    OpDef &d = r.add("pow.Scalar(Scalar self, Tensor exponent) -> Tensor", OpCategory::Composite);
    d.infer = [](const Node &n) -> Types {
      DType dt = resultType(n, {0, 1});
      if (!isFloating(dt))
        nodeError(n, "pow with an integer base and an integer exponent tensor is not supported yet (integer pow; "
                     "a floating base or exponent is)");
      return {{dt, argType(n, 1).shape}};
    };
    setEval(d, [](const Node &n, const RefArgs &a) {
      return mapArgs(n, a, {0, 1}, [](const double *x) { return std::pow(x[0], x[1]); });
    });
  }
  for (const char *schema : {"div.Tensor_mode(Tensor self, Tensor other, *, str? rounding_mode) -> Tensor",
                             "div.Scalar_mode(Tensor self, Scalar other, *, str? rounding_mode) -> Tensor"}) {
    OpDef &d = r.add(schema, OpCategory::Composite);
    d.infer = [](const Node &n) -> Types {
      std::string mode = roundingMode(n);
      Shape s = broadcastArgs(n, {0, 1});
      DType dt = resultType(n, {0, 1});
      if (mode.empty()) return {{intToFloat(dt), s}};
      if (!isFloating(dt))
        nodeError(n, "integer division with rounding_mode '" + mode + "' is not supported yet (only floating "
                     "tensors): an integer division by zero must raise, as torch's ZeroDivisionError");
      return {{dt, s}};
    };
    setEval(d, [](const Node &n, const RefArgs &a) {
      std::string mode = roundingMode(n);
      return mapArgs(n, a, {0, 1}, [&](const double *x) {
        if (mode == "floor") return floorDivide(x[0], x[1]);
        return mode == "trunc" ? std::trunc(x[0] / x[1]) : x[0] / x[1];
      });
    });
  }
  {
    OpDef &d = r.add("clamp.Tensor(Tensor self, Tensor? min=None, Tensor? max=None) -> Tensor", OpCategory::Composite);
    d.indexArgs = {1, 2}; // i32 / u8 bounds are widened to i64 (same result dtype, exact values)
    d.infer = [](const Node &n) -> Types {
      if (n.isNoneArg(1) && n.isNoneArg(2)) nodeError(n, "torch.clamp: At least one of 'min' or 'max' must not be None");
      return {{resultType(n, {0, 1, 2}), broadcastArgs(n, {0, 1, 2})}};
    };
    setEval(d, [](const Node &n, const RefArgs &a) {
      const bool lo = !n.isNoneArg(1), hi = !n.isNoneArg(2);
      std::vector<size_t> idx = {0, lo ? size_t(1) : size_t(0), hi ? size_t(2) : size_t(0)};
      return mapArgs(n, a, idx, [&](const double *x) {
        double v = x[0];
        if (lo) v = std::isnan(v) || std::isnan(x[1]) ? NAN : std::max(v, x[1]);
        if (hi) v = std::isnan(v) || std::isnan(x[2]) ? NAN : std::min(v, x[2]);
        return v;
      });
    });
  }
}

} // namespace ops
} // namespace aotc
