//===- Special.cpp - Special functions: gamma family, erf family, Bessel ------===//
//
// lgamma, digamma, polygamma, erfc, erfinv, i0 and torch.special's erfcx, ndtri, i0e, i1, i1e,
// bessel_j0 / j1 / y0 / y1, modified_bessel_i0 / i1 / k0 / k1 (none is Core ATen: torch's
// default decompositions leave them as they are). Elementwise, INT_TO_FLOAT; each is one
// ScalarOp::Special (the generated CPU kernels call libaotc_kernels' aotc_special_f32 / _f64),
// and the float64 reference evaluates the same functions (include/aotc/SpecialMath.h), so the
// independent checks are OpInfo against eager (tools/opinfo) and gradcheck of the derivative
// rules (finite differences). --target=cuda refuses them by name (no device implementation).
//===----------------------------------------------------------------------===//
#include "Ops.h"

#include "aotc/SpecialMath.h"

namespace aotc {
namespace ops {
namespace {

using Types = std::vector<TensorType>;

void special(OpRegistry &r, const char *schema, int32_t fn) {
  OpDef &d = unaryFloat(r, schema, [fn](double x) { return special::eval(fn, x, 0); }, ScalarOp::Special);
  d.scalar->iconst = fn;
}

} // namespace

void registerSpecialOps(OpRegistry &r) {
  special(r, "lgamma(Tensor self) -> Tensor", AOTC_SPECIAL_LGAMMA);
  special(r, "digamma(Tensor self) -> Tensor", AOTC_SPECIAL_DIGAMMA);
  special(r, "erfc(Tensor self) -> Tensor", AOTC_SPECIAL_ERFC);
  special(r, "erfinv(Tensor self) -> Tensor", AOTC_SPECIAL_ERFINV);
  special(r, "special_erfcx(Tensor self) -> Tensor", AOTC_SPECIAL_ERFCX);
  special(r, "special_ndtri(Tensor self) -> Tensor", AOTC_SPECIAL_NDTRI);
  special(r, "i0(Tensor self) -> Tensor", AOTC_SPECIAL_I0);
  special(r, "special_i0e(Tensor self) -> Tensor", AOTC_SPECIAL_I0E);
  special(r, "special_i1(Tensor self) -> Tensor", AOTC_SPECIAL_I1);
  special(r, "special_i1e(Tensor self) -> Tensor", AOTC_SPECIAL_I1E);
  special(r, "special_bessel_j0(Tensor self) -> Tensor", AOTC_SPECIAL_J0);
  special(r, "special_bessel_j1(Tensor self) -> Tensor", AOTC_SPECIAL_J1);
  special(r, "special_bessel_y0(Tensor self) -> Tensor", AOTC_SPECIAL_Y0);
  special(r, "special_bessel_y1(Tensor self) -> Tensor", AOTC_SPECIAL_Y1);
  special(r, "special_modified_bessel_i0(Tensor self) -> Tensor", AOTC_SPECIAL_I0);
  special(r, "special_modified_bessel_i1(Tensor self) -> Tensor", AOTC_SPECIAL_I1);
  special(r, "special_modified_bessel_k0(Tensor self) -> Tensor", AOTC_SPECIAL_K0);
  special(r, "special_modified_bessel_k1(Tensor self) -> Tensor", AOTC_SPECIAL_K1);
  {
    // polygamma(n, x): the order is an int argument (torch: "polygamma(n, x) does not support
    // negative n."), the scalar operation's second operand (a constant).
    OpDef &d = r.add("polygamma(int n, Tensor self) -> Tensor", OpCategory::Pointwise);
    d.primitive = true;
    d.scalar = OpDef::ScalarBody{ScalarOp::Special, OpDef::ScalarBody::Operands::Floating, {1, 0}, AOTC_SPECIAL_POLYGAMMA};
    d.infer = [](const Node &n) -> Types {
      if (n.intArg(0) < 0) nodeError(n, "polygamma(n, x) does not support negative n.");
      // Beyond n = 1000 every value is +-inf or 0 in f64 except for huge x, and Boost's series
      // for negative x builds tables that grow with n^2: refused rather than approximated.
      if (n.intArg(0) > 1000) nodeError(n, "polygamma(n, x): aotc supports n <= 1000, got " + std::to_string(n.intArg(0)));
      TensorType t = argType(n, 1);
      return {{intToFloat(t.dtype), t.shape}};
    };
    setEval(d, [](const Node &n, const RefArgs &a) {
      double k = (double)n.intArg(0);
      return mapArgs(n, a, {1}, [&](const double *x) { return special::eval(AOTC_SPECIAL_POLYGAMMA, x[0], k); });
    });
  }
}

} // namespace ops
} // namespace aotc
