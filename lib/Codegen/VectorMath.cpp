//===- VectorMath.cpp - f32 exp and log as branch-free f64 arithmetic ------===//
//
// This file implements expandExpLogF32 (ScalarEmit.h), a step of the CPU lowering
// (MLIRGen.cpp): every f32 math.exp and math.log becomes plain arith on f64 values, rounded
// once to f32, so a loop calling them vectorizes (no libm call) and the result is the f32
// rounding of a value within ~3e-13 relative of the true one: within 0.5 ulp plus a
// negligible part, denormal results and denormal inputs included, the same bits on every
// x86-64 level (no FMA contraction). MLIR's f32 polynomial approximations were 1.6 ulp
// (exp) and 1.05 ulp (log) off, with 0 for denormal exp results; on the MLP's 5 AdamW steps
// that moved one ill-conditioned fc1 weight to 2.7e-4 (max-relative) from eager torch,
// 2.1e-4 from float64 torch, where eager itself is 6.1e-5 away (test_train_torch).
//  * exp(x): x clamped to [-200, 200] (NaN stays NaN); k = roundeven(x log2 e);
//    r = x - k ln 2 (|r| <= 0.35, f64: the product's rounding is 2e-14 at most); e^r by its
//    Taylor series to r^10 (truncation 3.1e-13 relative); times 2^k built from k's bits.
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
  /// sum_k coef[k] x^k by Horner.
  Value horner(Value x, const std::vector<double> &coef) {
    Value acc = c(coef.back());
    for (size_t k = coef.size() - 1; k-- > 0;) acc = add(mul(acc, x), c(coef[k]));
    return acc;
  }
};

Value expF32(OpBuilder &b, Location l, Value x) {
  F64 f{b, l};
  Value xd = b.create<arith::ExtFOp>(l, b.getF64Type(), x);
  Value xc = b.create<arith::MinimumFOp>(l, b.create<arith::MaximumFOp>(l, xd, f.c(-200.0)), f.c(200.0));
  Value nan = f.cmp(arith::CmpFPredicate::UNO, xd, xd);
  Value k = b.create<LLVM::RoundEvenOp>(l, f.mul(xc, f.c(1.4426950408889634074)));
  k = f.sel(nan, f.c(0.0), k); // fptosi of NaN would be poison
  Value r = f.sub(xc, f.mul(k, f.c(0.69314718055994530942)));
  std::vector<double> taylor(11);
  double fact = 1.0;
  for (int n = 0; n <= 10; ++n) {
    if (n) fact *= n;
    taylor[n] = 1.0 / fact;
  }
  Value p = f.horner(r, taylor);
  Value ki = b.create<arith::FPToSIOp>(l, b.getI64Type(), k);
  Value bits = b.create<arith::ShLIOp>(l, b.create<arith::AddIOp>(l, ki, f.i(1023)), f.i(52));
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
  Value ed = b.create<arith::SIToFPOp>(l, b.getF64Type(), e);
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
