//===- VectorMath.cpp - f32 exp and log as branch-free f64 arithmetic ------===//
//
// This file implements expandExpLogF32 (ScalarEmit.h), a step of the CPU lowering
// (MLIRGen.cpp): every f32 math.exp and math.log becomes plain arith on f64 values, rounded
// once to f32, so a loop calling them vectorizes (no libm call) and the result is the f32
// rounding of a value within ~1e-11 relative of the true one: within 0.5 ulp plus a
// negligible part, denormal results and denormal inputs included. The polynomial steps are
// contractible (one FMA each on v3/v4, a multiply and an add on v2): the f64 values of the
// levels differ by a few units of 2^-53, so their f32 roundings differ only for a value
// within that of a rounding boundary (none in NumericTest's 400,000-point sweep; the bits are
// not promised equal across levels, as for every contracted kernel). MLIR's f32 polynomial
// approximations were 1.6 ulp
// (exp) and 1.05 ulp (log) off, with 0 for denormal exp results; on the MLP's 5 AdamW steps
// that moved one ill-conditioned fc1 weight to 2.7e-4 (max-relative) from eager torch,
// 2.1e-4 from float64 torch, where eager itself is 6.1e-5 away (test_train_torch).
//  * exp(x): x clamped to [-200, 200] (NaN stays NaN); k = roundeven(x log2 e);
//    r = x - k ln 2 (|r| <= 0.35, f64: the product's rounding is 2e-14 at most); e^r by its
//    Taylor series to r^9 (truncation 7e-12 relative); times 2^k built from k's bits.
//    Overflow and underflow (to denormals, then 0) happen in the final rounding to f32.
//  * log(x): x as f64 (f32 denormals are normal there) = 2^e m, m in [sqrt(1/2), sqrt(2));
//    log m = 2 atanh(s), s = (m - 1)/(m + 1), |s| <= 0.172, by its series to s^15
//    (truncation 3e-14 relative); plus e ln 2. 0 -> -inf, x < 0 -> NaN, inf -> inf, NaN -> NaN.
//===----------------------------------------------------------------------===//
#include "ScalarEmit.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/LLVMIR/LLVMDialect.h"
#include "mlir/Dialect/Math/IR/Math.h"
#include "mlir/IR/Builders.h"
#include "mlir/IR/BuiltinOps.h"

#include <cmath>

using namespace mlir;

namespace aotc::cg {
namespace {

/// 1.5 * 2^52 and its bits: adding it to a small integer-valued double puts the integer in
/// the low bits (the integer <-> double conversions of exp and log without cvt instructions).
constexpr double kMagic = 6755399441055744.0;
constexpr int64_t kMagicBits = 0x4338000000000000;

struct F64 {
  OpBuilder &b;
  Location l;
  Value c(double v) { return b.create<arith::ConstantOp>(l, b.getF64FloatAttr(v)); }
  Value i(int64_t v) { return b.create<arith::ConstantOp>(l, b.getI64IntegerAttr(v)); }
  Value add(Value x, Value y) { return b.create<arith::AddFOp>(l, x, y); }
  Value sub(Value x, Value y) { return b.create<arith::SubFOp>(l, x, y); }
  Value mul(Value x, Value y) { return b.create<arith::MulFOp>(l, x, y); }
  Value cmp(arith::CmpFPredicate p, Value x, Value y) { return b.create<arith::CmpFOp>(l, p, x, y); }
  Value sel(Value p, Value x, Value y) { return b.create<arith::SelectOp>(l, p, x, y); }
  /// a * x + y, contractible: one FMA where the clone has FMA (v3, v4), a multiply and an
  /// add where it does not (v2).
  Value mulAdd(Value a, Value x, Value y) {
    auto fm = arith::FastMathFlagsAttr::get(b.getContext(), arith::FastMathFlags::contract);
    return b.create<arith::AddFOp>(l, b.create<arith::MulFOp>(l, a, x, fm), y, fm);
  }
  /// sum_k coef[k] x^k by Horner, each step contractible (mulAdd).
  Value horner(Value x, const std::vector<double> &coef) {
    Value acc = c(coef.back());
    for (size_t k = coef.size() - 1; k-- > 0;) acc = mulAdd(acc, x, c(coef[k]));
    return acc;
  }
};

Value expF32(OpBuilder &b, Location l, Value x) {
  F64 f{b, l};
  Value xd = b.create<arith::ExtFOp>(l, b.getF64Type(), x);
  Value xc = b.create<arith::MinimumFOp>(l, b.create<arith::MaximumFOp>(l, xd, f.c(-200.0)), f.c(200.0));
  Value nan = f.cmp(arith::CmpFPredicate::UNO, xd, xd);
  // A NaN x makes k, r and p NaN (no poison: k only goes through bitcasts and integer ops
  // below) and the final select returns x itself.
  Value k = b.create<LLVM::RoundEvenOp>(l, f.mul(xc, f.c(1.4426950408889634074)));
  Value r = f.mulAdd(k, f.c(-0.69314718055994530942), xc);
  std::vector<double> taylor(10);
  double fact = 1.0;
  for (int n = 0; n <= 9; ++n) {
    if (n) fact *= n;
    taylor[n] = 1.0 / fact;
  }
  Value p = f.horner(r, taylor);
  // 2^k from k's bits without fptosi (AVX2 has no f64 -> i64 vector conversion: the loop
  // would extract and convert each lane): k + 1.5 * 2^52 holds 0x4338000000000000 + k in its
  // bits (|k| <= 289); adding 1023 and shifting left by 52 keeps just k + 1023 as the exponent.
  Value kbits = b.create<arith::BitcastOp>(l, b.getI64Type(), f.add(k, f.c(kMagic)));
  Value bits = b.create<arith::ShLIOp>(l, b.create<arith::AddIOp>(l, kbits, f.i(1023)), f.i(52));
  Value scale = b.create<arith::BitcastOp>(l, b.getF64Type(), bits);
  Value y = b.create<arith::TruncFOp>(l, b.getF32Type(), f.mul(p, scale));
  return b.create<arith::SelectOp>(l, nan, x, y);
}

Value logF32(OpBuilder &b, Location l, Value x) {
  F64 f{b, l};
  Value xd = b.create<arith::ExtFOp>(l, b.getF64Type(), x);
  Value bits = b.create<arith::BitcastOp>(l, b.getI64Type(), xd);
  Value e = b.create<arith::SubIOp>(l, b.create<arith::ShRUIOp>(l, bits, f.i(52)), f.i(1023));
  Value mbits = b.create<arith::OrIOp>(l, b.create<arith::AndIOp>(l, bits, f.i((int64_t(1) << 52) - 1)),
                                       f.i(int64_t(1023) << 52));
  Value m = b.create<arith::BitcastOp>(l, b.getF64Type(), mbits);
  Value big = f.cmp(arith::CmpFPredicate::OGT, m, f.c(1.4142135623730950488));
  m = f.sel(big, f.mul(m, f.c(0.5)), m);
  e = b.create<arith::SelectOp>(l, big, b.create<arith::AddIOp>(l, e, f.i(1)), e);
  Value s = b.create<arith::DivFOp>(l, f.sub(m, f.c(1.0)), f.add(m, f.c(1.0)));
  Value s2 = f.mul(s, s);
  std::vector<double> atanh;
  for (int n = 0; n <= 7; ++n) atanh.push_back(2.0 / (2 * n + 1)); // 2 atanh(s) = s * sum 2 s^2n / (2n + 1)
  Value logm = f.mul(s, f.horner(s2, atanh));
  // e as f64 without sitofp (no i64 -> f64 vector conversion before AVX-512): the bits
  // 0x4338000000000000 + e are the double 1.5 * 2^52 + e (|e| < 2^51), exactly.
  Value ed = f.sub(b.create<arith::BitcastOp>(l, b.getF64Type(), b.create<arith::AddIOp>(l, e, f.i(kMagicBits))),
                   f.c(kMagic));
  Value y = b.create<arith::TruncFOp>(l, b.getF32Type(), f.add(f.mul(ed, f.c(0.69314718055994530942)), logm));
  auto c32 = [&](float v) { return b.create<arith::ConstantOp>(l, b.getF32FloatAttr(v)).getResult(); };
  auto cmp32 = [&](arith::CmpFPredicate p, Value a, Value v) { return b.create<arith::CmpFOp>(l, p, a, v); };
  // Specials, innermost first: +inf, then x < 0 (NaN), x == 0 (-inf), NaN (itself).
  y = f.sel(cmp32(arith::CmpFPredicate::OEQ, x, c32(INFINITY)), x, y);
  y = f.sel(cmp32(arith::CmpFPredicate::OLT, x, c32(0.0f)), c32(NAN), y);
  y = f.sel(cmp32(arith::CmpFPredicate::OEQ, x, c32(0.0f)), c32(-INFINITY), y);
  return f.sel(cmp32(arith::CmpFPredicate::UNO, x, x), x, y);
}

} // namespace

void expandExpLogF32(ModuleOp mod) {
  mod.walk([](Operation *op) {
    if (!isa<math::ExpOp, math::LogOp>(op) || !op->getResult(0).getType().isF32()) return;
    OpBuilder b(op);
    Value x = op->getOperand(0);
    Value y = isa<math::ExpOp>(op) ? expF32(b, op->getLoc(), x) : logF32(b, op->getLoc(), x);
    op->getResult(0).replaceAllUsesWith(y);
    op->erase();
  });
}

} // namespace aotc::cg
