//===- Pointwise.cpp - Elementwise ops: arithmetic, activations, comparisons ---===//
//
// Schemas are copied from aten/src/ATen/native/native_functions.yaml. Dtypes
// follow torch/_prims_common ELEMENTWISE_TYPE_PROMOTION_KIND of each op's ref
// in torch/_refs/__init__.py:
//   DEFAULT       add sub mul maximum minimum where clamp neg abs relu ...
//   INT_TO_FLOAT  div exp log sqrt tanh sigmoid erf sin cos reciprocal ...
//   ALWAYS_BOOL   eq ne lt le gt ge logical_not
// Formulas: gelu/gelu-tanh from aten/src/ATen/native/cpu/Activation.cpp,
// elu/softplus/leaky_relu/hardtanh from torch/nn/functional.py docs.
//===----------------------------------------------------------------------===//
#include "Ops.h"

#include <cmath>
#include <functional>
#include <optional>
#include <tuple>

namespace aotc {
namespace ops {

OpDef &unaryFloat(OpRegistry &r, const char *schema, std::function<double(double)> f, std::optional<ScalarOp> op) {
  OpDef &d = r.add(schema, OpCategory::Pointwise);
  d.primitive = true;
  if (op) d.scalar = OpDef::ScalarBody{*op, OpDef::ScalarBody::Operands::Floating, {0}};
  d.infer = [](const Node &n) -> std::vector<TensorType> {
    TensorType t = argType(n, 0);
    return {{intToFloat(t.dtype), t.shape}};
  };
  setEval(d, [f](const Node &n, const RefArgs &a) {
    return mapArgs(n, a, {0}, [&](const double *x) { return f(x[0]); });
  });
  return d;
}

namespace {

using Fn1 = std::function<double(double)>;
using Types = std::vector<TensorType>;

using Body = OpDef::ScalarBody;
using Operands = OpDef::ScalarBody::Operands;

/// Unary primitive keeping the input dtype (neg, abs, relu, ...). `noBool`: bool input is an
/// error; `op` as unaryFloat's.
void unarySame(OpRegistry &r, const char *schema, Fn1 f, bool noBool = false,
               std::optional<ScalarOp> op = std::nullopt) {
  OpDef &d = r.add(schema, OpCategory::Pointwise);
  d.primitive = true;
  if (op) d.scalar = Body{*op, Operands::Result, {0}};
  d.infer = [noBool](const Node &n) -> Types {
    TensorType t = argType(n, 0);
    if (noBool && t.dtype == DType::Bool) nodeError(n, "not supported for bool tensors");
    return {t};
  };
  setEval(d, [f](const Node &n, const RefArgs &a) {
    return mapArgs(n, a, {0}, [&](const double *x) { return f(x[0]); });
  });
}

/// Unary activation that requires a floating input; `f(x, node)` may read scalar args.
OpDef &unaryAct(OpRegistry &r, const char *schema, std::function<double(double, const Node &)> f) {
  OpDef &d = r.add(schema, OpCategory::Pointwise);
  d.infer = [](const Node &n) -> Types {
    TensorType t = argType(n, 0);
    requireFloating(n, t.dtype, n.target);
    return {t};
  };
  setEval(d, [f](const Node &n, const RefArgs &a) {
    return mapArgs(n, a, {0}, [&](const double *x) { return f(x[0], n); });
  });
  return d;
}

/// Binary primitive over args 0 and 1 with DEFAULT (or INT_TO_FLOAT / ALWAYS_BOOL) promotion;
/// `op` as unaryFloat's (ALWAYS_BOOL ones compare their operands in the promoted dtype).
enum class Promo { Default, IntToFloat, AlwaysBool };
OpDef &binary(OpRegistry &r, const char *schema, Promo p,
              std::function<double(double, double, const Node &)> f,
              std::optional<ScalarOp> op = std::nullopt) {
  OpDef &d = r.add(schema, OpCategory::Pointwise);
  d.primitive = true;
  if (op) d.scalar = Body{*op, p == Promo::AlwaysBool ? Operands::Compare : Operands::Result, {0, 1}};
  d.infer = [p](const Node &n) -> Types {
    Shape s = broadcastArgs(n, {0, 1});
    DType dt = resultType(n, {0, 1});
    if (p == Promo::IntToFloat) dt = intToFloat(dt);
    if (p == Promo::AlwaysBool) dt = DType::Bool;
    return {{dt, s}};
  };
  setEval(d, [f](const Node &n, const RefArgs &a) {
    return mapArgs(n, a, {0, 1}, [&](const double *x) { return f(x[0], x[1], n); });
  });
  return d;
}

/// add/sub/rsub with `alpha` (argument 2). `sign` = +1 add, -1 sub; `reversed`: rsub.
void addLike(OpRegistry &r, const char *schema, double sign, bool reversed) {
  OpDef &d = binary(r, schema, Promo::Default, [sign, reversed](double x, double y, const Node &n) {
    double alpha = n.scalarArg(2);
    return reversed ? y + sign * alpha * x : x + sign * alpha * y;
  });
  d.primitive = !reversed; // rsub is rewritten to sub by decompose
  auto base = d.infer;
  d.infer = [base, sign](const Node &n) -> Types {
    Types t = base(n);
    if (sign < 0 && argType(n, 0).dtype == DType::Bool && argType(n, 1).dtype == DType::Bool)
      nodeError(n, "subtraction of two bool tensors is not supported; use logical_xor");
    if (!isFloating(t[0].dtype) && std::holds_alternative<double>(n.args.at(2)))
      nodeError(n, "for integral input tensors, argument alpha must not be a floating point number");
    return t;
  };
}

double gelu(double x, const std::string &approx) {
  if (approx == "tanh") {
    const double k = std::sqrt(2.0 / M_PI);
    return 0.5 * x * (1.0 + std::tanh(k * (x + 0.044715 * x * x * x)));
  }
  return 0.5 * x * (1.0 + std::erf(x / std::sqrt(2.0)));
}

} // namespace

void registerPointwiseOps(OpRegistry &r) {
  // Arithmetic.
  addLike(r, "add.Tensor(Tensor self, Tensor other, *, Scalar alpha=1) -> Tensor", 1, false);
  addLike(r, "add.Scalar(Tensor self, Scalar other, Scalar alpha=1) -> Tensor", 1, false);
  addLike(r, "sub.Tensor(Tensor self, Tensor other, *, Scalar alpha=1) -> Tensor", -1, false);
  addLike(r, "sub.Scalar(Tensor self, Scalar other, Scalar alpha=1) -> Tensor", -1, false);
  addLike(r, "rsub.Scalar(Tensor self, Scalar other, Scalar alpha=1) -> Tensor", -1, true);
  auto mul = [](double x, double y, const Node &) { return x * y; };
  binary(r, "mul.Tensor(Tensor self, Tensor other) -> Tensor", Promo::Default, mul, ScalarOp::Mul);
  binary(r, "mul.Scalar(Tensor self, Scalar other) -> Tensor", Promo::Default, mul, ScalarOp::Mul);
  auto div = [](double x, double y, const Node &) { return x / y; };
  binary(r, "div.Tensor(Tensor self, Tensor other) -> Tensor", Promo::IntToFloat, div);
  binary(r, "div.Scalar(Tensor self, Scalar other) -> Tensor", Promo::IntToFloat, div);
  // atan2(y, x): the angle of (x, y) in [-pi, pi] (C's atan2: signed zeros, NaN propagates).
  binary(r, "atan2(Tensor self, Tensor other) -> Tensor", Promo::IntToFloat,
         [](double y, double x, const Node &) { return std::atan2(y, x); }, ScalarOp::Atan2);
  auto pw = [](double x, double y, const Node &) { return std::pow(x, y); };
  binary(r, "pow.Tensor_Scalar(Tensor self, Scalar exponent) -> Tensor", Promo::Default, pw);
  binary(r, "pow.Tensor_Tensor(Tensor self, Tensor exponent) -> Tensor", Promo::Default, pw);
  // maximum/minimum propagate NaN (torch.maximum docs).
  binary(r, "maximum(Tensor self, Tensor other) -> Tensor", Promo::Default, [](double x, double y, const Node &) {
    return std::isnan(x) || std::isnan(y) ? NAN : std::max(x, y);
  }, ScalarOp::Max);
  binary(r, "minimum(Tensor self, Tensor other) -> Tensor", Promo::Default, [](double x, double y, const Node &) {
    return std::isnan(x) || std::isnan(y) ? NAN : std::min(x, y);
  }, ScalarOp::Min);

  // Comparisons (ALWAYS_BOOL, computed in the promoted dtype; float64 holds them exactly).
  struct Cmp { const char *name; std::function<bool(double, double)> f; ScalarOp op; };
  std::vector<Cmp> cmps = {{"eq", std::equal_to<double>(), ScalarOp::Eq},
                           {"ne", std::not_equal_to<double>(), ScalarOp::Ne},
                           {"lt", std::less<double>(), ScalarOp::Lt},
                           {"le", std::less_equal<double>(), ScalarOp::Le},
                           {"gt", std::greater<double>(), ScalarOp::Gt},
                           {"ge", std::greater_equal<double>(), ScalarOp::Ge}};
  for (auto &c : cmps) {
    auto f = [g = c.f](double x, double y, const Node &) { return g(x, y) ? 1.0 : 0.0; };
    OpDef &s = binary(r, (std::string(c.name) + ".Scalar(Tensor self, Scalar other) -> Tensor").c_str(),
                      Promo::AlwaysBool, f, c.op);
    s.nonDifferentiable = true;
    OpDef &t = binary(r, (std::string(c.name) + ".Tensor(Tensor self, Tensor other) -> Tensor").c_str(),
                      Promo::AlwaysBool, f, c.op);
    t.nonDifferentiable = true;
  }
  {
    OpDef &d = r.add("logical_not(Tensor self) -> Tensor", OpCategory::Pointwise);
    d.primitive = true;
    d.nonDifferentiable = true;
    d.infer = [](const Node &n) -> Types { return {{DType::Bool, argType(n, 0).shape}}; };
    setEval(d, [](const Node &n, const RefArgs &a) {
      return mapArgs(n, a, {0}, [](const double *x) { return x[0] == 0.0 ? 1.0 : 0.0; });
    });
  }

  {
    // isnan(x) = x != x: NaN is the one value unequal to itself (ALWAYS_BOOL; false for
    // integer and bool tensors). One existing scalar operation, so nothing else names it.
    OpDef &d = r.add("isnan(Tensor self) -> Tensor", OpCategory::Pointwise);
    d.primitive = true;
    d.nonDifferentiable = true;
    d.scalar = Body{ScalarOp::Ne, Operands::Compare, {0, 0}};
    d.infer = [](const Node &n) -> Types { return {{DType::Bool, argType(n, 0).shape}}; };
    setEval(d, [](const Node &n, const RefArgs &a) {
      return mapArgs(n, a, {0}, [](const double *x) { return std::isnan(x[0]) ? 1.0 : 0.0; });
    });
  }

  // Logical ops (ALWAYS_BOOL; any input dtype, nonzero is true, NaN is true).
  for (const char *name : {"logical_and", "logical_or", "logical_xor"}) {
    std::string op = name;
    auto f = [op](double x, double y, const Node &) {
      bool a = x != 0.0, b = y != 0.0;
      return (op == "logical_and" ? a && b : op == "logical_or" ? a || b : a != b) ? 1.0 : 0.0;
    };
    binary(r, (op + "(Tensor self, Tensor other) -> Tensor").c_str(), Promo::AlwaysBool, f).nonDifferentiable = true;
  }
  // Bitwise ops: integral and bool dtypes only (BinaryOps.cpp bitwise_*_kernel has no float kernel).
  for (const char *name : {"bitwise_and", "bitwise_or", "bitwise_xor"}) {
    std::string op = name;
    auto f = [op](double x, double y, const Node &) {
      int64_t a = (int64_t)x, b = (int64_t)y;
      return (double)(op == "bitwise_and" ? a & b : op == "bitwise_or" ? a | b : a ^ b);
    };
    for (const char *ov : {".Tensor(Tensor self, Tensor other) -> Tensor", ".Scalar(Tensor self, Scalar other) -> Tensor"}) {
      OpDef &d = binary(r, (op + ov).c_str(), Promo::Default, f);
      d.nonDifferentiable = true;
      auto base = d.infer;
      d.infer = [base, op](const Node &n) -> Types {
        Types t = base(n);
        if (isFloating(t[0].dtype))
          nodeError(n, op + " is not implemented for " + dtypeTorchName(t[0].dtype) +
                           " (bitwise ops take integral or bool tensors)");
        return t;
      };
    }
  }

  // Unary math (INT_TO_FLOAT).
  unaryFloat(r, "exp(Tensor self) -> Tensor", [](double x) { return std::exp(x); }, ScalarOp::Exp);
  unaryFloat(r, "log(Tensor self) -> Tensor", [](double x) { return std::log(x); }, ScalarOp::Log);
  unaryFloat(r, "log1p(Tensor self) -> Tensor", [](double x) { return std::log1p(x); }, ScalarOp::Log1p);
  unaryFloat(r, "expm1(Tensor self) -> Tensor", [](double x) { return std::expm1(x); }, ScalarOp::Expm1);
  unaryFloat(r, "tanh(Tensor self) -> Tensor", [](double x) { return std::tanh(x); }, ScalarOp::Tanh);
  unaryFloat(r, "sigmoid(Tensor self) -> Tensor", [](double x) { return 1.0 / (1.0 + std::exp(-x)); });
  unaryFloat(r, "sqrt(Tensor self) -> Tensor", [](double x) { return std::sqrt(x); }, ScalarOp::Sqrt);
  unaryFloat(r, "rsqrt(Tensor self) -> Tensor", [](double x) { return 1.0 / std::sqrt(x); });
  unaryFloat(r, "erf(Tensor self) -> Tensor", [](double x) { return std::erf(x); }, ScalarOp::Erf);
  unaryFloat(r, "reciprocal(Tensor self) -> Tensor", [](double x) { return 1.0 / x; });
  unaryFloat(r, "sin(Tensor self) -> Tensor", [](double x) { return std::sin(x); }, ScalarOp::Sin);
  unaryFloat(r, "cos(Tensor self) -> Tensor", [](double x) { return std::cos(x); }, ScalarOp::Cos);
  unaryFloat(r, "tan(Tensor self) -> Tensor", [](double x) { return std::tan(x); }, ScalarOp::Tan);
  unaryFloat(r, "asin(Tensor self) -> Tensor", [](double x) { return std::asin(x); }, ScalarOp::Asin);
  unaryFloat(r, "acos(Tensor self) -> Tensor", [](double x) { return std::acos(x); }, ScalarOp::Acos);
  unaryFloat(r, "atan(Tensor self) -> Tensor", [](double x) { return std::atan(x); }, ScalarOp::Atan);
  unaryFloat(r, "sinh(Tensor self) -> Tensor", [](double x) { return std::sinh(x); }, ScalarOp::Sinh);
  unaryFloat(r, "cosh(Tensor self) -> Tensor", [](double x) { return std::cosh(x); }, ScalarOp::Cosh);
  unaryFloat(r, "asinh(Tensor self) -> Tensor", [](double x) { return std::asinh(x); }, ScalarOp::Asinh);
  unaryFloat(r, "acosh(Tensor self) -> Tensor", [](double x) { return std::acosh(x); }, ScalarOp::Acosh);
  unaryFloat(r, "atanh(Tensor self) -> Tensor", [](double x) { return std::atanh(x); }, ScalarOp::Atanh);
  unaryFloat(r, "log2(Tensor self) -> Tensor", [](double x) { return std::log2(x); }, ScalarOp::Log2);
  unaryFloat(r, "log10(Tensor self) -> Tensor", [](double x) { return std::log10(x); }, ScalarOp::Log10);
  // Rounding keeps the dtype (the identity on integers, as torch; bool is refused, as torch).
  unarySame(r, "floor(Tensor self) -> Tensor", [](double x) { return std::floor(x); }, true, ScalarOp::Floor);
  unarySame(r, "ceil(Tensor self) -> Tensor", [](double x) { return std::ceil(x); }, true, ScalarOp::Ceil);
  unarySame(r, "trunc(Tensor self) -> Tensor", [](double x) { return std::trunc(x); }, true, ScalarOp::Trunc);
  unarySame(r, "round(Tensor self) -> Tensor", [](double x) { return std::nearbyint(x); }, true, ScalarOp::Round);
  {
    // round.decimals (non-core): torch's round_decimals_kernel: ten_pow = 10^|d|; d > 0:
    // round(x * ten_pow) / ten_pow, d < 0: round(x / ten_pow) * ten_pow (floating only; a
    // composite of round, whose gradient is 0).
    OpDef &d = r.add("round.decimals(Tensor self, *, int decimals) -> Tensor", OpCategory::Composite);
    d.infer = [](const Node &n) -> Types {
      TensorType t = argType(n, 0);
      if (!isFloating(t.dtype)) nodeError(n, "round with decimals is only supported for floating tensors (as torch)");
      return {t};
    };
    setEval(d, [](const Node &n, const RefArgs &a) {
      int64_t dec = n.intArg(1);
      double p = std::pow(10.0, (double)std::llabs(dec));
      return mapArgs(n, a, {0}, [&](const double *x) {
        return dec >= 0 ? std::nearbyint(x[0] * p) / p : std::nearbyint(x[0] / p) * p;
      });
    });
  }
  {
    // exp2 (non-core): 2^x = exp(x ln 2) (decompose; INT_TO_FLOAT).
    OpDef &d = r.add("exp2(Tensor self) -> Tensor", OpCategory::Composite);
    d.infer = [](const Node &n) -> Types {
      TensorType t = argType(n, 0);
      return {{intToFloat(t.dtype), t.shape}};
    };
    setEval(d, [](const Node &n, const RefArgs &a) {
      return mapArgs(n, a, {0}, [](const double *x) { return std::exp2(x[0]); });
    });
  }
  // fmod (C's, the sign of self) and remainder (Python's, the sign of other). Integers only by a
  // constant Scalar other than 0 and -1 (Swin's window masks: `arange % n`): an integer division
  // by a tensor could divide by zero, which must raise as torch's ZeroDivisionError (not yet), and
  // INT_MIN % -1 overflows.
  auto python_mod = [](double x, double y, const Node &) {
    double m = std::fmod(x, y);
    return m != 0 && ((y < 0) != (m < 0)) ? m + y : m;
  };
  auto c_mod = [](double x, double y, const Node &) { return std::fmod(x, y); };
  for (auto [schema, f, op] :
       {std::make_tuple("fmod.Tensor(Tensor self, Tensor other) -> Tensor", +c_mod, ScalarOp::Fmod),
        std::make_tuple("fmod.Scalar(Tensor self, Scalar other) -> Tensor", +c_mod, ScalarOp::Fmod),
        std::make_tuple("remainder.Tensor(Tensor self, Tensor other) -> Tensor", +python_mod, ScalarOp::Remainder),
        std::make_tuple("remainder.Scalar(Tensor self, Scalar other) -> Tensor", +python_mod, ScalarOp::Remainder)}) {
    OpDef &d = binary(r, schema, Promo::Default, f, op);
    auto base = d.infer;
    d.infer = [base](const Node &n) -> Types {
      Types t = base(n);
      bool constDivisor = n.target.ends_with(".Scalar") && std::holds_alternative<int64_t>(n.args[1]) &&
                          std::get<int64_t>(n.args[1]) != 0 && std::get<int64_t>(n.args[1]) != -1;
      if (!isFloating(t[0].dtype) && (t[0].dtype == DType::Bool || !constDivisor))
        nodeError(n, "integer " + n.target + " is supported only by a constant other than 0 and -1: an integer "
                                             "division by zero must raise, as torch's ZeroDivisionError (not yet)");
      return t;
    };
  }

  // Unary keeping the dtype.
  unarySame(r, "neg(Tensor self) -> Tensor", [](double x) { return -x; }, /*noBool=*/true, ScalarOp::Neg);
  unarySame(r, "abs(Tensor self) -> Tensor", [](double x) { return std::fabs(x); }, false, ScalarOp::Abs);
  unarySame(r, "relu(Tensor self) -> Tensor", [](double x) { return x > 0 ? x : 0.0; }, /*noBool=*/true);
  {
    OpDef &d = r.add("sign(Tensor self) -> Tensor", OpCategory::Pointwise);
    d.primitive = true;
    d.nonDifferentiable = true; // derivative is zero almost everywhere
    d.infer = [](const Node &n) -> Types { return {argType(n, 0)}; };
    setEval(d, [](const Node &n, const RefArgs &a) {
      return mapArgs(n, a, {0}, [](const double *x) { return double((x[0] > 0) - (x[0] < 0)); });
    });
  }
  {
    // bitwise_not: ~x on i64 (-x - 1), logical not on bool; floating tensors are refused
    // (torch: "not implemented for 'Float'"). A composite (decompose).
    OpDef &d = r.add("bitwise_not(Tensor self) -> Tensor", OpCategory::Composite);
    d.nonDifferentiable = true;
    d.infer = [](const Node &n) -> Types {
      TensorType t = argType(n, 0);
      if (isFloating(t.dtype)) nodeError(n, "bitwise_not is only defined for integer and bool tensors, got " + t.str());
      return {t};
    };
    setEval(d, [](const Node &n, const RefArgs &a) {
      const bool b = argType(n, 0).dtype == DType::Bool;
      return mapArgs(n, a, {0}, [b](const double *x) { return b ? double(x[0] == 0) : -x[0] - 1; });
    });
  }
  {
    // isinf: |x| == inf for floating tensors, false for integer and bool ones. A composite.
    OpDef &d = r.add("isinf(Tensor self) -> Tensor", OpCategory::Composite);
    d.nonDifferentiable = true;
    d.infer = [](const Node &n) -> Types { return {{DType::Bool, argType(n, 0).shape}}; };
    setEval(d, [](const Node &n, const RefArgs &a) {
      return mapArgs(n, a, {0}, [](const double *x) { return std::isinf(x[0]) ? 1.0 : 0.0; });
    });
  }
  {
    // square(x) = pow(x, 2): bool ** int promotes to i64.
    OpDef &d = r.add("square(Tensor self) -> Tensor", OpCategory::Pointwise);
    d.infer = [](const Node &n) -> Types {
      TensorType t = argType(n, 0);
      if (t.dtype == DType::Bool) t.dtype = DType::I64;
      return {t};
    };
    setEval(d, [](const Node &n, const RefArgs &a) {
      return mapArgs(n, a, {0}, [](const double *x) { return x[0] * x[0]; });
    });
  }

  // Activations.
  {
    OpDef &g = unaryAct(r, "gelu(Tensor self, *, str approximate='none') -> Tensor", [](double x, const Node &n) {
      return gelu(x, std::get<std::string>(n.args[1]));
    });
    auto base = g.infer;
    g.infer = [base](const Node &n) -> Types {
      const std::string &ap = std::get<std::string>(n.args.at(1));
      if (ap != "none" && ap != "tanh") nodeError(n, "approximate must be 'none' or 'tanh', got '" + ap + "'");
      return base(n);
    };
  }
  unaryAct(r, "silu(Tensor self) -> Tensor", [](double x, const Node &) { return x / (1.0 + std::exp(-x)); });
  unaryAct(r, "hardtanh(Tensor self, Scalar min_val=-1, Scalar max_val=1) -> Tensor", [](double x, const Node &n) {
    return std::min(std::max(x, n.scalarArg(1)), n.scalarArg(2));
  });
  unaryAct(r, "leaky_relu(Tensor self, Scalar negative_slope=0.01) -> Tensor", [](double x, const Node &n) {
    return x > 0 ? x : x * n.scalarArg(1);
  });
  unaryAct(r, "elu(Tensor self, Scalar alpha=1, Scalar scale=1, Scalar input_scale=1) -> Tensor",
           [](double x, const Node &n) {
             double alpha = n.scalarArg(1), scale = n.scalarArg(2), is = n.scalarArg(3);
             return x > 0 ? scale * x : scale * alpha * std::expm1(x * is);
           });
  unaryAct(r, "softplus(Tensor self, Scalar beta=1, Scalar threshold=20) -> Tensor", [](double x, const Node &n) {
    double beta = n.scalarArg(1), th = n.scalarArg(2);
    return x * beta > th ? x : std::log1p(std::exp(x * beta)) / beta;
  });

  // Clamping: result_type(self, min, max) with the bounds as wrapped numbers.
  auto clampEval = [](const Node &n, const RefArgs &a) {
    bool hasLo = !n.isNoneArg(1), hasHi = n.args.size() > 2 && !n.isNoneArg(2);
    double lo = hasLo ? n.scalarArg(1) : 0, hi = hasHi ? n.scalarArg(2) : 0;
    return mapArgs(n, a, {0}, [=](const double *x) {
      double v = x[0];
      if (std::isnan(v)) return v;
      if (hasLo) v = std::max(v, lo);
      if (hasHi) v = std::min(v, hi);
      return v;
    });
  };
  {
    OpDef &d = r.add("clamp(Tensor self, Scalar? min=None, Scalar? max=None) -> Tensor", OpCategory::Pointwise);
    d.infer = [](const Node &n) -> Types {
      if (n.isNoneArg(1) && n.isNoneArg(2)) nodeError(n, "at least one of 'min' or 'max' must not be None");
      return {{resultType(n, {0, 1, 2}), argType(n, 0).shape}};
    };
    setEval(d, clampEval);
  }
  {
    OpDef &d = r.add("clamp_min(Tensor self, Scalar min) -> Tensor", OpCategory::Pointwise);
    d.infer = [](const Node &n) -> Types { return {{resultType(n, {0, 1}), argType(n, 0).shape}}; };
    setEval(d, clampEval);
  }

  {
    OpDef &d = r.add("clamp_max(Tensor self, Scalar max) -> Tensor", OpCategory::Pointwise);
    d.infer = [](const Node &n) -> Types { return {{resultType(n, {0, 1}), argType(n, 0).shape}}; };
    setEval(d, [](const Node &n, const RefArgs &a) {
      double hi = n.scalarArg(1);
      return mapArgs(n, a, {0}, [=](const double *x) { return std::isnan(x[0]) ? x[0] : std::min(x[0], hi); });
    });
  }

  // where: condition must be bool; value dtype = result_type(self, other).
  auto whereInfer = [](const Node &n) -> Types {
    if (argType(n, 0).dtype != DType::Bool)
      nodeError(n, std::string("where expected condition to be a boolean tensor, got ") +
                       dtypeTorchName(argType(n, 0).dtype));
    return {{resultType(n, {1, 2}), broadcastArgs(n, {0, 1, 2})}};
  };
  auto whereEval = [](const Node &n, const RefArgs &a) {
    return mapArgs(n, a, {0, 1, 2}, [](const double *x) { return x[0] != 0 ? x[1] : x[2]; });
  };
  for (const char *s : {"where.self(Tensor condition, Tensor self, Tensor other) -> Tensor",
                        "where.ScalarOther(Tensor condition, Tensor self, Scalar other) -> Tensor",
                        "where.ScalarSelf(Tensor condition, Scalar self, Tensor other) -> Tensor"}) {
    OpDef &d = r.add(s, OpCategory::Pointwise);
    d.primitive = std::string(s).rfind("where.self", 0) == 0; // the Scalar forms decompose to it
    d.infer = whereInfer;
    setEval(d, whereEval);
  }
  {
    OpDef &d = r.add("masked_fill.Scalar(Tensor self, Tensor mask, Scalar value) -> Tensor", OpCategory::Pointwise);
    d.infer = [](const Node &n) -> Types {
      TensorType s = argType(n, 0);
      TensorType m = argType(n, 1);
      if (m.dtype != DType::Bool) nodeError(n, "masked_fill expects a bool mask");
      // Out of place, self and mask broadcast together (ATen masked_fill: expand_outplace).
      auto b = broadcastShapes(s.shape, m.shape);
      if (!b)
        nodeError(n, "mask of shape " + shapeStr(m.shape) + " does not broadcast with " + shapeStr(s.shape));
      s.shape = *b;
      return {s};
    };
    setEval(d, [](const Node &n, const RefArgs &a) {
      double v = n.scalarArg(2);
      return mapArgs(n, a, {0, 1}, [v](const double *x) { return x[1] != 0 ? v : x[0]; });
    });
  }

  {
    // masked_fill.Tensor: the value is a 0-d tensor (TensorAdvancedIndexing.cpp masked_fill__cpu);
    // self's dtype is kept (the value is cast to it).
    OpDef &d = r.add("masked_fill.Tensor(Tensor self, Tensor mask, Tensor value) -> Tensor", OpCategory::Pointwise);
    d.infer = [](const Node &n) -> Types {
      TensorType s = argType(n, 0), m = argType(n, 1), v = argType(n, 2);
      if (m.dtype != DType::Bool) nodeError(n, "masked_fill expects a bool mask");
      if (v.rank() != 0)
        nodeError(n, "masked_fill_ only supports a 0-dimensional value tensor, but got tensor with " +
                         std::to_string(v.rank()) + " dimension(s).");
      auto b = broadcastShapes(s.shape, m.shape);
      if (!b) nodeError(n, "mask of shape " + shapeStr(m.shape) + " does not broadcast with " + shapeStr(s.shape));
      s.shape = *b;
      return {s};
    };
    setEval(d, [](const Node &n, const RefArgs &a) {
      return mapArgs(n, a, {0, 1, 2}, [](const double *x) { return x[1] != 0 ? x[2] : x[0]; });
    });
  }

  // Copies and casts.
  {
    OpDef &d = r.add("_to_copy(Tensor self, *, ScalarType? dtype=None, Layout? layout=None, Device? device=None, "
                     "bool? pin_memory=None, bool non_blocking=False, MemoryFormat? memory_format=None) -> Tensor",
                     OpCategory::Pointwise);
    d.primitive = true;
    d.indexArgs = {0};       // reads i32/u8 (WidenIndices)
    d.narrowResults = true;  // and makes them (an index cast, the linalg ops' int32 pivots and info)
    d.infer = [](const Node &n) -> Types {
      TensorType t = argType(n, 0);
      if (auto dt = dtypeArg(n, 1)) t.dtype = *dt;
      return {t};
    };
    setEval(d, [](const Node &n, const RefArgs &a) {
      return mapArgs(n, a, {0}, [](const double *x) { return x[0]; });
    });
  }
  {
    // copy(self, src): src broadcast to self's shape and cast to self's dtype (the functional
    // form of self.copy_(src)).
    OpDef &d = r.add("copy(Tensor self, Tensor src, bool non_blocking=False) -> Tensor", OpCategory::Pointwise);
    d.infer = [](const Node &n) -> Types {
      TensorType s = argType(n, 0), src = argType(n, 1);
      auto b = broadcastShapes(s.shape, src.shape);
      if (!b || *b != s.shape)
        nodeError(n, "copy: the source of shape " + shapeStr(src.shape) + " does not broadcast to the destination's " +
                         shapeStr(s.shape));
      return {s};
    };
    setEval(d, [](const Node &n, const RefArgs &a) {
      return mapArgs(n, a, {1}, [](const double *x) { return x[0]; });
    });
  }
  {
    // _assert_tensor_metadata: a check with no result. Its size and dtype are checked against
    // the tensor when the node is read, then the readers drop it. aotc's values are dense with
    // no strides, and the target decides the device, so stride, device and layout are not checked.
    OpDef &d = r.add("_assert_tensor_metadata(Tensor a, SymInt[]? size=None, SymInt[]? stride=None, "
                     "ScalarType? dtype=None, *, Device? device=None, Layout? layout=None) -> ()",
                     OpCategory::Other);
    d.nonDifferentiable = true;
    d.infer = [](const Node &n) -> Types {
      TensorType t = argType(n, 0);
      if (auto dt = dtypeArg(n, 3); dt && *dt != t.dtype)
        nodeError(n, std::string("_assert_tensor_metadata: tensor dtype mismatch: expected ") + dtypeTorchName(*dt) +
                         " but got " + dtypeTorchName(t.dtype));
      if (!n.isNoneArg(1) && n.intListArg(1) != t.shape)
        nodeError(n, "_assert_tensor_metadata: tensor size mismatch: expected " + shapeStr(n.intListArg(1)) +
                         " but got " + shapeStr(t.shape));
      return {};
    };
    d.eval = [](const Node &, const RefArgs &, const std::vector<std::vector<const RefTensor *>> &) {
      return std::vector<RefTensor>{};
    };
  }
  for (const char *s : {"clone(Tensor self, *, MemoryFormat? memory_format=None) -> Tensor",
                        "lift_fresh_copy(Tensor self) -> Tensor"}) {
    OpDef &d = r.add(s, OpCategory::Pointwise);
    d.primitive = std::string(s).rfind("clone", 0) == 0; // lift_fresh_copy decomposes to clone
    d.infer = [](const Node &n) -> Types { return {argType(n, 0)}; };
    setEval(d, [](const Node &n, const RefArgs &a) {
      return mapArgs(n, a, {0}, [](const double *x) { return x[0]; });
    });
  }
}

} // namespace ops
} // namespace aotc
