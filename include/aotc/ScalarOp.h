//===- ScalarOp.h - The scalar operations of element computations -*- C++ -*-===//
//
// The operations one element of a pointwise computation is built from. The kernel IR's
// instructions (include/aotc/Kernels.h, Inst) compute them, each target emits them
// (lib/Codegen/ScalarEmit.cpp for the CPU, GpuGen.cpp for CUDA), and an op's OpDef names the
// one a simple pointwise primitive is made of (OpRegistry.h, OpDef::scalar), so that adding
// such an op touches only its registry entry. In IR, below every stage.
//===----------------------------------------------------------------------===//
#pragma once

#include <cstdint>

namespace aotc {

/// Scalar operations. Types: every Inst has a result dtype; operands of binary
/// ops and comparisons have the same dtype (Cast makes them so); Bool values are
/// 1-bit truth values (stored as bytes 0/1).
enum class ScalarOp : uint8_t {
  Const,   ///< fconst (floating) or iconst (i64/bool).
  Load,    ///< Access `access` of the phase.
  Reg,     ///< Register `reg` (a reduction result of an earlier phase).
  Cast,    ///< a -> type (float->int truncates toward zero; x->bool is x != 0).
  Neg, Abs, Exp, Log, Tanh, Sqrt, Erf, Not,
  Add, Sub, Mul, Div,   ///< Div on integers is not generated (true division casts first).
  Pow,     ///< Floating a^b (libm pow).
  Max, Min,             ///< Floating: NaN-propagating (torch.maximum); integers: plain.
  Eq, Ne, Lt, Le, Gt, Ge, ///< Result Bool; ordered comparisons (NaN compares false, Ne true).
  And, Or,              ///< Bool.
  Select,  ///< a ? b : c (a Bool).
  Index,   ///< The i64 value of Access `access` (buffer -1): an affine function of the
           ///< loop variables (plus dyn terms), e.g. "is this element inside the slice".
  Sin, Cos, Log1p, Expm1, ///< Floating unary libm functions (sinf/sin, ..., log1pf, expm1f).
  Atan2,   ///< Floating atan2(a, b) (libm atan2f/atan2).
  Philox,  ///< Word `iconst` (0..3) of Philox 4x32-10 (include/aotc/Philox.h) with key a (the i64
           ///< seed) and counter {lo32(c), hi32(c), lo32(b), hi32(b)} (b: the i64 offset, c: the
           ///< i64 element index); the result is I64 in [0, 2^32).
  Tan, Asin, Acos, Atan, Sinh, Cosh, Asinh, Acosh, Atanh, Log2, Log10, ///< Floating unary libm functions.
  Floor, Ceil, Trunc, Round, ///< Rounding to an integral value (Round: half to even, as torch.round);
                             ///< the identity on integers.
  Fmod,      ///< Floating a - trunc(a / b) * b, exactly (libm fmod; the sign of a).
  Remainder, ///< Floating Python's a % b: fmod, plus b when non-zero and of the other sign than b.
  Special,   ///< Floating special function `iconst` (AOTC_SPECIAL_*, aotc/kernels.h) of a, with b
             ///< polygamma's order (a constant of the same type): a call of libaotc_kernels'
             ///< aotc_special_f32 / _f64 per element (include/aotc/SpecialMath.h).
};
/// True for the operations that are a libm call (exp, log, sin, atan2, ...): what a target's
/// cost model counts as expensive.
bool isLibmScalarOp(ScalarOp op);
const char *scalarOpName(ScalarOp op);

} // namespace aotc
