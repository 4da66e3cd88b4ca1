//===- ScalarEmit.cpp - Kernels.h scalar code -> MLIR (all targets) ----------===//
//
// See ScalarEmit.h. Moved out of MLIRGen.cpp so the CPU and CUDA kernel
// builders emit the same scalar code.
//===----------------------------------------------------------------------===//
#include "ScalarEmit.h"

#include "aotc/Diagnostics.h"
#include "aotc/Philox.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Dialect/Math/IR/Math.h"
#include "mlir/Dialect/MemRef/IR/MemRef.h"
#include "mlir/Dialect/SCF/IR/SCF.h"
#include "mlir/Dialect/Vector/IR/VectorOps.h"
#include "mlir/IR/BuiltinOps.h"
#include "mlir/IR/Verifier.h"
#include "mlir/Pass/PassManager.h"
#include "mlir/Transforms/Passes.h"

#include "llvm/Support/raw_ostream.h"

#include <functional>
#include <limits>
#include <set>

using namespace mlir;

namespace aotc::cg {

Type elemType(MLIRContext *ctx, DType d, bool memory) {
  switch (d) {
  case DType::F32: return Float32Type::get(ctx);
  case DType::F64: return Float64Type::get(ctx);
  case DType::I64: return IntegerType::get(ctx, 64);
  case DType::Bool: return IntegerType::get(ctx, memory ? 8 : 1);
  case DType::I32: return IntegerType::get(ctx, 32);
  case DType::U8: return IntegerType::get(ctx, 8);
  }
  return {};
}

Value ScalarEmitter::constOf(DType t, double f, int64_t i) {
  Type ty = elemType(ctx_, t, false);
  if (isFloating(t)) return b_.create<arith::ConstantOp>(loc_, ty, b_.getFloatAttr(ty, f));
  return b_.create<arith::ConstantOp>(loc_, ty, b_.getIntegerAttr(ty, t == DType::Bool ? (i != 0) : i));
}

/// a (+, *, max, min) b: the associative folds that reductions and accumulating stores share
/// (max / min propagate NaN, as torch's).
/// `reassoc`: the floating ops carry fastmath<reassoc> (ScalarEmitter::reassocFolds_).
static Value foldValues(OpBuilder &b, Location l, ReduceKind k, bool fl, Value a, Value x,
                        bool reassoc = false) {
  auto fm = arith::FastMathFlagsAttr::get(b.getContext(),
                                          reassoc ? arith::FastMathFlags::reassoc : arith::FastMathFlags::none);
  switch (k) {
  case ReduceKind::Prod:
    return fl ? b.create<arith::MulFOp>(l, a, x, fm).getResult() : b.create<arith::MulIOp>(l, a, x).getResult();
  case ReduceKind::Max:
    return fl ? b.create<arith::MaximumFOp>(l, a, x, fm).getResult() : b.create<arith::MaxSIOp>(l, a, x).getResult();
  case ReduceKind::Min:
    return fl ? b.create<arith::MinimumFOp>(l, a, x, fm).getResult() : b.create<arith::MinSIOp>(l, a, x).getResult();
  default:
    return fl ? b.create<arith::AddFOp>(l, a, x, fm).getResult() : b.create<arith::AddIOp>(l, a, x).getResult();
  }
}

Value ScalarEmitter::reduceInit(const Reduction &r) {
  double f = 0.0;
  int64_t i = 0;
  if (r.kind == ReduceKind::Max || r.kind == ReduceKind::ArgMax) {
    f = -std::numeric_limits<double>::infinity();
    i = std::numeric_limits<int64_t>::min();
  } else if (r.kind == ReduceKind::Min) {
    f = std::numeric_limits<double>::infinity();
    i = std::numeric_limits<int64_t>::max();
  } else if (r.kind == ReduceKind::Prod) {
    f = 1.0;
    i = 1;
  }
  return constOf(r.accType, f, i);
}

Value ScalarEmitter::cast(Value v, DType from, DType to) {
  if (from == to) return v;
  Type ty = elemType(ctx_, to, false);
  if (to == DType::Bool) {
    if (isFloating(from)) {
      Value z = zeroOf(from);
      return b_.create<arith::CmpFOp>(loc_, arith::CmpFPredicate::UNE, v, z);
    }
    return b_.create<arith::CmpIOp>(loc_, arith::CmpIPredicate::ne, v, zeroOf(from));
  }
  if (from == DType::Bool) {
    if (isFloating(to)) return b_.create<arith::UIToFPOp>(loc_, ty, v);
    return b_.create<arith::ExtUIOp>(loc_, ty, v);
  }
  if (isFloating(from) && isFloating(to)) {
    if (to == DType::F64) return b_.create<arith::ExtFOp>(loc_, ty, v);
    return b_.create<arith::TruncFOp>(loc_, ty, v);
  }
  // Integer <-> integer/float. U8 is unsigned (zero-extended); I32/I64 are signed; a
  // narrowing integer cast truncates (wraps), as a C cast and PyTorch do.
  bool fromUnsigned = from == DType::U8, toUnsigned = to == DType::U8;
  if (isFloating(from))
    return toUnsigned ? b_.create<arith::FPToUIOp>(loc_, ty, v).getResult()
                      : b_.create<arith::FPToSIOp>(loc_, ty, v).getResult();
  if (isFloating(to))
    return fromUnsigned ? b_.create<arith::UIToFPOp>(loc_, ty, v).getResult()
                        : b_.create<arith::SIToFPOp>(loc_, ty, v).getResult();
  unsigned fw = itemSize(from) * 8, tw = itemSize(to) * 8;
  if (fw == tw) return v;
  if (fw > tw) return b_.create<arith::TruncIOp>(loc_, ty, v);
  return fromUnsigned ? b_.create<arith::ExtUIOp>(loc_, ty, v).getResult()
                      : b_.create<arith::ExtSIOp>(loc_, ty, v).getResult();
}

Value ScalarEmitter::address(const Access &a, Value &ok, Value &errCode, Value &errVal, Value *checked) {
  Value addr;
  auto add = [&](Value t) { addr = addr ? b_.create<arith::AddIOp>(loc_, addr, t).getResult() : t; };
  if (a.offset != 0) add(cIdx(a.offset));
  for (size_t k = 0; k < a.coef.size(); ++k) {
    if (a.coef[k] == 0) continue;
    add(a.coef[k] == 1 ? vars_[k] : b_.create<arith::MulIOp>(loc_, vars_[k], cIdx(a.coef[k])).getResult());
  }
  ok = nullptr;
  // Dyn terms, checked; the first failing one is reported.
  const int accessId = checked ? (int)(&a - ph_->accesses.data()) : -1; // load(): one of ph_'s
  for (auto it = a.dyn.rbegin(); it != a.dyn.rend(); ++it) {
    const DynIndex &d = *it;
    Value v = inst(d.value);
    auto pre = checked ? checked_.find({accessId, (int)(&d - a.dyn.data())}) : checked_.end();
    if (d.error >= 0 && pre != checked_.end()) { // checked before the loop
      *checked = *checked ? b_.create<arith::AndIOp>(loc_, *checked, pre->second).getResult() : pre->second;
      v = b_.create<arith::SelectOp>(loc_, pre->second, v, cI64(0));
      Value vi = b_.create<arith::IndexCastOp>(loc_, b_.getIndexType(), v);
      if (d.stride != 0) add(d.stride == 1 ? vi : b_.create<arith::MulIOp>(loc_, vi, cIdx(d.stride)).getResult());
      continue;
    }
    if (d.error < 0) { // unchecked: in range by construction
      Value vi = b_.create<arith::IndexCastOp>(loc_, b_.getIndexType(), v);
      if (d.stride != 0) add(d.stride == 1 ? vi : b_.create<arith::MulIOp>(loc_, vi, cIdx(d.stride)).getResult());
      continue;
    }
    Value good = inBounds(v, d.bound);
    Value code = cI64(d.error + 1);
    errCode = errCode ? b_.create<arith::SelectOp>(loc_, good, errCode, code).getResult() : code;
    errVal = errVal ? b_.create<arith::SelectOp>(loc_, good, errVal, v).getResult() : v;
    ok = ok ? b_.create<arith::AndIOp>(loc_, ok, good).getResult() : good;
    Value vi = b_.create<arith::IndexCastOp>(loc_, b_.getIndexType(), v);
    if (d.stride != 0) add(d.stride == 1 ? vi : b_.create<arith::MulIOp>(loc_, vi, cIdx(d.stride)).getResult());
  }
  return addr ? addr : cIdx(0);
}

Value ScalarEmitter::load(const Access &a, DType t) {
  if (!laneVectors_.empty()) {
    auto it = laneVectors_.find((int)(&a - ph_->accesses.data()));
    if (it != laneVectors_.end()) {
      Value x = b_.create<vector::ExtractOp>(loc_, it->second, ArrayRef<int64_t>{lane_});
      return cast(x, kg_.buffers[a.buffer].type.dtype, t);
    }
  }
  DType bt = kg_.buffers[a.buffer].type.dtype;
  if (rowJ_) {
    auto it = rowCache_.find((int)(&a - ph_->accesses.data()));
    if (it != rowCache_.end()) { // plain accesses only (no bounds check, not Bool): GpuGen
      auto [row, fill] = it->second;
      Value x;
      if (fill) {
        Value ok, code, val;
        x = b_.create<memref::LoadOp>(loc_, bufArg_.at(a.buffer), ValueRange{address(a, ok, code, val)});
        b_.create<memref::StoreOp>(loc_, x, row, ValueRange{rowJ_});
      } else {
        x = b_.create<memref::LoadOp>(loc_, row, ValueRange{rowJ_});
      }
      return cast(x, bt, t);
    }
  }
  Value ok, code, val, checked;
  Value addr = address(a, ok, code, val, &checked);
  Value buf = bufArg_.at(a.buffer);
  auto doLoad = [&](OpBuilder &b, Location l) -> Value {
    Value x = b.create<memref::LoadOp>(l, buf, ValueRange{addr});
    if (bt == DType::Bool) x = b.create<arith::CmpIOp>(l, arith::CmpIPredicate::ne, x,
                                                       b.create<arith::ConstantIntOp>(l, 0, 8));
    return x;
  };
  Value r;
  if (!ok) {
    r = doLoad(b_, loc_);
  } else {
    Type ty = elemType(ctx_, bt, false);
    auto ifOp = b_.create<scf::IfOp>(
        loc_, ok,
        [&](OpBuilder &b, Location l) { b.create<scf::YieldOp>(l, doLoad(b, l)); },
        [&](OpBuilder &b, Location l) {
          writeStatus(b, l, code, val);
          Value z = isFloating(bt) ? b.create<arith::ConstantOp>(l, ty, b.getFloatAttr(ty, 0.0)).getResult()
                                   : b.create<arith::ConstantOp>(l, ty, b.getIntegerAttr(ty, 0)).getResult();
          b.create<scf::YieldOp>(l, z);
        });
    r = ifOp.getResult(0);
  }
  if (checked) r = b_.create<arith::SelectOp>(loc_, checked, r, zeroOf(bt));
  return cast(r, bt, t);
}

Value ScalarEmitter::inBounds(Value v, int64_t bound) {
  return b_.create<arith::AndIOp>(loc_, b_.create<arith::CmpIOp>(loc_, arith::CmpIPredicate::sge, v, cI64(0)),
                                  b_.create<arith::CmpIOp>(loc_, arith::CmpIPredicate::slt, v, cI64(bound)));
}

void ScalarEmitter::writeStatus(OpBuilder &b, Location l, Value code, Value val) {
  auto at = [&](int64_t i) { return ValueRange{b.create<arith::ConstantIndexOp>(l, i)}; };
  b.create<memref::StoreOp>(l, code, status_, at(0));
  b.create<memref::StoreOp>(l, val, status_, at(1));
  if (statusProgramId_ != 0)
    b.create<memref::StoreOp>(l, b.create<arith::ConstantIntOp>(l, statusProgramId_, 64), status_, at(2));
}

void ScalarEmitter::store(const Store &s) {
  const Access &a = ph_->accesses[s.access];
  Value v = inst(s.value);
  DType bt = kg_.buffers[a.buffer].type.dtype;
  DType vt = ph_->insts[s.value].type;
  v = cast(v, vt, bt);
  if (auto it = laneStores_.find(s.access); it != laneStores_.end()) {
    it->second.push_back(v); // written as one vector after the last lane
    return;
  }
  Value ok, code, val;
  Value addr = address(a, ok, code, val);
  Value buf = bufArg_.at(a.buffer);
  auto doStore = [&](OpBuilder &b, Location l) {
    Value x = v;
    if (s.accumulate && s.combine != StoreCombine::Set) {
      Value old = b.create<memref::LoadOp>(l, buf, ValueRange{addr});
      const bool fl = isFloating(bt);
      if (bt == DType::Bool) { // bytes holding 0 / 1: add and max are or, mul and min are and
        x = b.create<arith::ExtUIOp>(l, old.getType(), x);
        if (s.combine == StoreCombine::Add || s.combine == StoreCombine::Max) x = b.create<arith::OrIOp>(l, old, x);
        else x = b.create<arith::AndIOp>(l, old, x);
      } else {
        ReduceKind k = s.combine == StoreCombine::Mul   ? ReduceKind::Prod
                       : s.combine == StoreCombine::Max ? ReduceKind::Max
                       : s.combine == StoreCombine::Min ? ReduceKind::Min
                                                        : ReduceKind::Sum;
        x = foldValues(b, l, k, fl, old, x);
      }
    } else if (bt == DType::Bool) {
      x = b.create<arith::ExtUIOp>(l, IntegerType::get(ctx_, 8), x);
    }
    b.create<memref::StoreOp>(l, x, buf, ValueRange{addr});
  };
  if (!ok) {
    doStore(b_, loc_);
    return;
  }
  b_.create<scf::IfOp>(
      loc_, ok,
      [&](OpBuilder &b, Location l) {
        doStore(b, l);
        b.create<scf::YieldOp>(l);
      },
      [&](OpBuilder &b, Location l) {
        writeStatus(b, l, code, val);
        b.create<scf::YieldOp>(l);
      });
}

/// include/aotc/Philox.h in i32 arithmetic: mulhilo is arith.mului_extended, the key schedule
/// wraps as uint32. The four words of one element share every round; asking for two words
/// emits the rounds twice and CSE (verifyAndTidy) keeps one copy.
Value ScalarEmitter::philox(Value seed, Value offset, Value index, int64_t word) {
  AOTC_ASSERT(word >= 0 && word < 4, "philox: word " + std::to_string(word));
  Type i32 = b_.getI32Type();
  auto c32 = [&](uint32_t v) -> Value { return b_.create<arith::ConstantIntOp>(loc_, (int64_t)(int32_t)v, 32); };
  auto lo = [&](Value v) -> Value { return b_.create<arith::TruncIOp>(loc_, i32, v); };
  auto hi = [&](Value v) -> Value { return lo(b_.create<arith::ShRUIOp>(loc_, v, cI64(32))); };
  auto x = [&](Value a, Value b) -> Value { return b_.create<arith::XOrIOp>(loc_, a, b); };
  Value c[4] = {lo(index), hi(index), lo(offset), hi(offset)};
  Value k[2] = {lo(seed), hi(seed)};
  for (int r = 0; r < philox::kRounds; ++r) {
    if (r > 0) {
      k[0] = b_.create<arith::AddIOp>(loc_, k[0], c32(philox::kW0));
      k[1] = b_.create<arith::AddIOp>(loc_, k[1], c32(philox::kW1));
    }
    auto p0 = b_.create<arith::MulUIExtendedOp>(loc_, c32(philox::kM0), c[0]);
    auto p1 = b_.create<arith::MulUIExtendedOp>(loc_, c32(philox::kM1), c[2]);
    Value n0 = x(x(p1.getHigh(), c[1]), k[0]), n2 = x(x(p0.getHigh(), c[3]), k[1]);
    c[0] = n0;
    c[1] = p1.getLow();
    c[2] = n2;
    c[3] = p0.getLow();
  }
  return b_.create<arith::ExtUIOp>(loc_, b_.getI64Type(), c[word]);
}

Value ScalarEmitter::inst(int id) {
  auto it = memo_.find(id);
  if (it != memo_.end()) return it->second;
  const Inst &in = ph_->insts[id];
  DType t = in.type;
  bool fl = isFloating(t);
  auto A = [&]() { return inst(in.a); };
  auto B = [&]() { return inst(in.b); };
  Value r;
  switch (in.op) {
  case ScalarOp::Const: r = constOf(t, in.fconst, in.iconst); break;
  case ScalarOp::Load: r = load(ph_->accesses[in.access], t); break;
  case ScalarOp::Reg: r = regs_.at(in.reg); break;
  case ScalarOp::Cast: r = cast(A(), ph_->insts[in.a].type, t); break;
  case ScalarOp::Neg:
    r = fl ? b_.create<arith::NegFOp>(loc_, A()).getResult()
           : b_.create<arith::SubIOp>(loc_, zeroOf(t), A()).getResult();
    break;
  case ScalarOp::Abs:
    if (fl) {
      r = b_.create<math::AbsFOp>(loc_, A());
    } else if (t == DType::Bool) {
      r = A();
    } else { // math.absi has no LLVM lowering in MLIR 19: x < 0 ? 0 - x : x (wraps at INT64_MIN, as torch)
      Value x = A();
      Value neg = b_.create<arith::CmpIOp>(loc_, arith::CmpIPredicate::slt, x, zeroOf(t));
      r = b_.create<arith::SelectOp>(loc_, neg, b_.create<arith::SubIOp>(loc_, zeroOf(t), x), x);
    }
    break;
  case ScalarOp::Exp: r = b_.create<math::ExpOp>(loc_, A()); break;
  case ScalarOp::Log: r = b_.create<math::LogOp>(loc_, A()); break;
  case ScalarOp::Tanh:
    r = b_.create<math::TanhOp>(loc_, A());
    if (t == DType::F32) { // MLIR's f32 approximation (MLIRGen.cpp) saturates at 1 - 2 ulp:
      // |x| >= 9 is exactly +-1 in f32 (tanh(9) = 1 - 3e-8 rounds to 1), as libm gives.
      Value x = A();
      Value big = b_.create<arith::CmpFOp>(loc_, arith::CmpFPredicate::OGE, b_.create<math::AbsFOp>(loc_, x),
                                           constOf(t, 9.0, 0));
      Value pos = b_.create<arith::CmpFOp>(loc_, arith::CmpFPredicate::OGT, x, constOf(t, 0.0, 0));
      Value one = b_.create<arith::SelectOp>(loc_, pos, constOf(t, 1.0, 0), constOf(t, -1.0, 0));
      r = b_.create<arith::SelectOp>(loc_, big, one, r);
    }
    break;
  case ScalarOp::Sqrt: r = b_.create<math::SqrtOp>(loc_, A()); break;
  case ScalarOp::Erf:
    r = b_.create<math::ErfOp>(loc_, A());
    // MLIR's f32 approximation (MLIRGen.cpp) gives erf(-0) = +0: x itself at +-0, as libm
    // and torch give it.
    if (t == DType::F32) {
      Value x = A();
      Value zero = b_.create<arith::CmpFOp>(loc_, arith::CmpFPredicate::OEQ, x, constOf(t, 0.0, 0));
      r = b_.create<arith::SelectOp>(loc_, zero, x, r);
    }
    break;
  case ScalarOp::Sin: r = b_.create<math::SinOp>(loc_, A()); break;
  case ScalarOp::Cos: r = b_.create<math::CosOp>(loc_, A()); break;
  case ScalarOp::Log1p: r = b_.create<math::Log1pOp>(loc_, A()); break;
  case ScalarOp::Expm1: r = b_.create<math::ExpM1Op>(loc_, A()); break;
  case ScalarOp::Atan2: r = b_.create<math::Atan2Op>(loc_, A(), B()); break;
  case ScalarOp::Tan: r = b_.create<math::TanOp>(loc_, A()); break;
  case ScalarOp::Asin: r = b_.create<math::AsinOp>(loc_, A()); break;
  case ScalarOp::Acos: r = b_.create<math::AcosOp>(loc_, A()); break;
  case ScalarOp::Atan: r = b_.create<math::AtanOp>(loc_, A()); break;
  case ScalarOp::Sinh: r = b_.create<math::SinhOp>(loc_, A()); break;
  case ScalarOp::Cosh: r = b_.create<math::CoshOp>(loc_, A()); break;
  case ScalarOp::Asinh: r = b_.create<math::AsinhOp>(loc_, A()); break;
  case ScalarOp::Acosh: r = b_.create<math::AcoshOp>(loc_, A()); break;
  case ScalarOp::Atanh: r = b_.create<math::AtanhOp>(loc_, A()); break;
  case ScalarOp::Log2: r = b_.create<math::Log2Op>(loc_, A()); break;
  case ScalarOp::Log10: r = b_.create<math::Log10Op>(loc_, A()); break;
  case ScalarOp::Floor: r = fl ? b_.create<math::FloorOp>(loc_, A()).getResult() : A(); break;
  case ScalarOp::Ceil: r = fl ? b_.create<math::CeilOp>(loc_, A()).getResult() : A(); break;
  case ScalarOp::Trunc: r = fl ? b_.create<math::TruncOp>(loc_, A()).getResult() : A(); break;
  case ScalarOp::Round: r = fl ? b_.create<math::RoundEvenOp>(loc_, A()).getResult() : A(); break;
  // frem: fmod's exact result; integers (a constant divisor other than 0 and -1, the op's shape
  // function) remsi, C's truncated remainder.
  case ScalarOp::Fmod:
    r = fl ? b_.create<arith::RemFOp>(loc_, A(), B()).getResult() : b_.create<arith::RemSIOp>(loc_, A(), B()).getResult();
    break;
  case ScalarOp::Remainder: { // ATen: m = fmod(a, b); m != 0 && (b < 0) != (m < 0) ? m + b : m
    Value b = B(), zero = zeroOf(t);
    Value m = fl ? b_.create<arith::RemFOp>(loc_, A(), b).getResult() : b_.create<arith::RemSIOp>(loc_, A(), b).getResult();
    Value nz, bNeg, mNeg;
    if (fl) {
      nz = b_.create<arith::CmpFOp>(loc_, arith::CmpFPredicate::UNE, m, zero);
      bNeg = b_.create<arith::CmpFOp>(loc_, arith::CmpFPredicate::OLT, b, zero);
      mNeg = b_.create<arith::CmpFOp>(loc_, arith::CmpFPredicate::OLT, m, zero);
    } else {
      nz = b_.create<arith::CmpIOp>(loc_, arith::CmpIPredicate::ne, m, zero);
      bNeg = b_.create<arith::CmpIOp>(loc_, arith::CmpIPredicate::slt, b, zero);
      mNeg = b_.create<arith::CmpIOp>(loc_, arith::CmpIPredicate::slt, m, zero);
    }
    Value fix = b_.create<arith::AndIOp>(loc_, nz, b_.create<arith::XOrIOp>(loc_, bNeg, mNeg));
    Value sum = fl ? b_.create<arith::AddFOp>(loc_, m, b).getResult() : b_.create<arith::AddIOp>(loc_, m, b).getResult();
    r = b_.create<arith::SelectOp>(loc_, fix, sum, m);
    break;
  }
  case ScalarOp::Philox: r = philox(A(), B(), inst(in.c), in.iconst); break;
  case ScalarOp::Special: { // libaotc_kernels' aotc_special_f32 / _f64(fn, x, n), a private declaration
    ModuleOp mod = b_.getBlock()->getParentOp()->getParentOfType<ModuleOp>();
    Type ft = elemType(ctx_, t, false);
    std::string name = t == DType::F32 ? "aotc_special_f32" : "aotc_special_f64";
    auto fn = mod.lookupSymbol<func::FuncOp>(name);
    if (!fn) {
      OpBuilder mb(ctx_);
      mb.setInsertionPointToStart(mod.getBody());
      fn = mb.create<func::FuncOp>(loc_, name, mb.getFunctionType({b_.getI32Type(), ft, ft}, {ft}));
      fn.setPrivate();
    }
    Value id = b_.create<arith::ConstantIntOp>(loc_, in.iconst, 32);
    r = b_.create<func::CallOp>(loc_, fn, ValueRange{id, A(), B()}).getResult(0);
    break;
  }
  case ScalarOp::Not: r = b_.create<arith::XOrIOp>(loc_, A(), constOf(DType::Bool, 1, 1)); break;
  case ScalarOp::Add: // bool: logical or (torch: True + True is True; addi on i1 would wrap)
    r = fl                 ? b_.create<arith::AddFOp>(loc_, A(), B()).getResult()
        : t == DType::Bool ? b_.create<arith::OrIOp>(loc_, A(), B()).getResult()
                           : b_.create<arith::AddIOp>(loc_, A(), B()).getResult();
    break;
  case ScalarOp::Sub:
    r = fl ? b_.create<arith::SubFOp>(loc_, A(), B()).getResult() : b_.create<arith::SubIOp>(loc_, A(), B()).getResult();
    break;
  case ScalarOp::Mul:
    r = fl ? b_.create<arith::MulFOp>(loc_, A(), B()).getResult() : b_.create<arith::MulIOp>(loc_, A(), B()).getResult();
    break;
  case ScalarOp::Div:
    r = fl ? b_.create<arith::DivFOp>(loc_, A(), B()).getResult() : b_.create<arith::DivSIOp>(loc_, A(), B()).getResult();
    break;
  case ScalarOp::Pow: r = b_.create<math::PowFOp>(loc_, A(), B()); break;
  case ScalarOp::Max: // bool: or / and (signed i1 compares would rank True = -1 below False)
    r = fl                 ? b_.create<arith::MaximumFOp>(loc_, A(), B()).getResult()
        : t == DType::Bool ? b_.create<arith::OrIOp>(loc_, A(), B()).getResult()
                           : b_.create<arith::MaxSIOp>(loc_, A(), B()).getResult();
    break;
  case ScalarOp::Min:
    r = fl                 ? b_.create<arith::MinimumFOp>(loc_, A(), B()).getResult()
        : t == DType::Bool ? b_.create<arith::AndIOp>(loc_, A(), B()).getResult()
                           : b_.create<arith::MinSIOp>(loc_, A(), B()).getResult();
    break;
  case ScalarOp::Eq: case ScalarOp::Ne: case ScalarOp::Lt:
  case ScalarOp::Le: case ScalarOp::Gt: case ScalarOp::Ge: {
    DType ot = ph_->insts[in.a].type;
    int k = (int)in.op - (int)ScalarOp::Eq;
    if (isFloating(ot)) {
      static const arith::CmpFPredicate fp[] = {arith::CmpFPredicate::OEQ, arith::CmpFPredicate::UNE,
                                                arith::CmpFPredicate::OLT, arith::CmpFPredicate::OLE,
                                                arith::CmpFPredicate::OGT, arith::CmpFPredicate::OGE};
      r = b_.create<arith::CmpFOp>(loc_, fp[k], A(), B());
    } else {
      static const arith::CmpIPredicate ip[] = {arith::CmpIPredicate::eq,  arith::CmpIPredicate::ne,
                                                arith::CmpIPredicate::slt, arith::CmpIPredicate::sle,
                                                arith::CmpIPredicate::sgt, arith::CmpIPredicate::sge};
      r = b_.create<arith::CmpIOp>(loc_, ip[k], A(), B());
    }
    break;
  }
  case ScalarOp::And: r = b_.create<arith::AndIOp>(loc_, A(), B()); break;
  case ScalarOp::Or: r = b_.create<arith::OrIOp>(loc_, A(), B()); break;
  case ScalarOp::Select: r = b_.create<arith::SelectOp>(loc_, A(), B(), inst(in.c)); break;
  case ScalarOp::Index: { // the address value itself; checks belong to the real loads
    Value ok, code, val;
    Value addr = address(ph_->accesses[in.access], ok, code, val);
    r = b_.create<arith::IndexCastOp>(loc_, b_.getI64Type(), addr);
    break;
  }
  }
  memo_[id] = r;
  return r;
}

void ScalarEmitter::combine(const Reduction &r, Value &a, Value &aIdx, Value b, Value bIdx, bool tree) {
  bool fl = isFloating(r.accType);
  switch (r.kind) {
  case ReduceKind::Sum:
  case ReduceKind::Prod:
  case ReduceKind::Max:
  case ReduceKind::Min:
    a = foldValues(b_, loc_, r.kind, fl, a, b, reassocFolds_ && !tree);
    return;
  case ReduceKind::ArgMax: {
    // b wins when greater, or NaN over a number (NaN is maximal, as torch.argmax).
    Value take;
    if (fl) {
      Value gt = b_.create<arith::CmpFOp>(loc_, arith::CmpFPredicate::OGT, b, a);
      Value bNan = b_.create<arith::CmpFOp>(loc_, arith::CmpFPredicate::UNO, b, b);
      Value aNum = b_.create<arith::CmpFOp>(loc_, arith::CmpFPredicate::ORD, a, a);
      take = b_.create<arith::OrIOp>(loc_, gt, b_.create<arith::AndIOp>(loc_, bNan, aNum));
    } else {
      take = b_.create<arith::CmpIOp>(loc_, arith::CmpIPredicate::sgt, b, a);
    }
    if (tree) { // ...or equal (both NaN counts as equal) with the smaller index
      Value same;
      if (fl) {
        Value aNan = b_.create<arith::CmpFOp>(loc_, arith::CmpFPredicate::UNO, a, a);
        Value bNan = b_.create<arith::CmpFOp>(loc_, arith::CmpFPredicate::UNO, b, b);
        same = b_.create<arith::OrIOp>(loc_, b_.create<arith::CmpFOp>(loc_, arith::CmpFPredicate::OEQ, a, b),
                                       b_.create<arith::AndIOp>(loc_, aNan, bNan));
      } else {
        same = b_.create<arith::CmpIOp>(loc_, arith::CmpIPredicate::eq, a, b);
      }
      Value earlier = b_.create<arith::CmpIOp>(loc_, arith::CmpIPredicate::slt, bIdx, aIdx);
      take = b_.create<arith::OrIOp>(loc_, take, b_.create<arith::AndIOp>(loc_, same, earlier));
    }
    a = b_.create<arith::SelectOp>(loc_, take, b, a);
    aIdx = b_.create<arith::SelectOp>(loc_, take, bIdx, aIdx);
    return;
  }
  }
}

void ScalarEmitter::setRegs(const Phase &p, ValueRange accs, size_t &ai, std::vector<Value> &regs) {
  for (auto &r : p.reductions) {
    if ((int)regs.size() <= r.reg) regs.resize(r.reg + 1);
    Value v = accs[ai++];
    if (r.kind == ReduceKind::ArgMax) v = accs[ai++];
    DType from = r.kind == ReduceKind::ArgMax ? DType::I64 : r.accType;
    regs[r.reg] = cast(v, from, k_.regTypes[r.reg]);
  }
}

void ScalarEmitter::innerBounds(const Phase &p, int dim, Value lb, Value ub, SmallVector<Value> &lbs,
                                SmallVector<Value> &ubs, SmallVector<Value> &steps) {
  for (size_t d = 0; d < p.inner.size(); ++d) {
    lbs.push_back((int)d == dim && lb ? lb : cIdx(0));
    ubs.push_back((int)d == dim && ub ? ub : cIdx(p.inner[d]));
    steps.push_back(cIdx(1));
  }
}

void ScalarEmitter::enterLane(const std::vector<std::vector<Value>> &laneOuter,
                              const std::vector<std::vector<Value>> &laneRegs, size_t t, ValueRange ivs) {
  vars_ = laneOuter[t];
  vars_.insert(vars_.end(), ivs.begin(), ivs.end());
  regs_ = laneRegs[t];
  memo_.clear();
  if (t < hoisted_.size()) memo_ = hoisted_[t];
  checked_.clear();
  if (t < hoistedChecks_.size()) checked_ = hoistedChecks_[t];
}

void ScalarEmitter::hoistInvariants(const Phase &p, const std::vector<std::vector<Value>> &laneOuter,
                                    const std::vector<std::vector<Value>> &laneRegs) {
  hoisted_.clear();
  for (int64_t e : p.inner)
    if (e <= 0) return;
  const size_t nOuter = k_.outer.size();
  std::set<int> stored;
  for (auto &st : p.stores) stored.insert(p.accesses[st.access].buffer);
  // varies[i]: instruction i depends on an inner loop variable (or loads a stored buffer).
  std::vector<char> varies(p.insts.size(), 0);
  auto accessVaries = [&](const Access &a) {
    for (size_t k = nOuter; k < a.coef.size(); ++k)
      if (a.coef[k] != 0) return true;
    for (auto &d : a.dyn)
      if (varies[d.value]) return true;
    return false;
  };
  std::set<int> ownRegs; // this phase's results: set after its fold, never before its loop
  for (auto &r : p.reductions) ownRegs.insert(r.reg);
  std::vector<int> loads;
  for (size_t i = 0; i < p.insts.size(); ++i) { // operands come first (Kernels.h)
    const Inst &in = p.insts[i];
    bool v = in.op == ScalarOp::Reg && ownRegs.count(in.reg);
    for (int o : {in.a, in.b, in.c})
      if (o >= 0) v = v || varies[o];
    if (in.op == ScalarOp::Load || in.op == ScalarOp::Index) {
      const Access &a = p.accesses[in.access];
      v = v || accessVaries(a) || (in.op == ScalarOp::Load && stored.count(a.buffer));
      if (!v && in.op == ScalarOp::Load) loads.push_back((int)i);
    }
    varies[i] = v;
  }
  // The checked dyn terms with an invariant index of the loads that stay in the loop: their
  // check runs once, before it (status written on failure), and the loop selects. Only for
  // an access whose checked terms are all invariant (a term left in the loop would report
  // over the hoisted one, where address() reports the first), into a non-empty dim (the
  // index 0 a failed check substitutes must exist).
  std::vector<std::pair<int, int>> checks;
  for (size_t i = 0; i < p.insts.size(); ++i)
    if (p.insts[i].op == ScalarOp::Load && varies[i]) {
      const Access &a = p.accesses[p.insts[i].access];
      bool all = true;
      for (auto &d : a.dyn) all = all && (d.error < 0 || (!varies[d.value] && d.bound > 0));
      if (!all) continue;
      for (size_t d = a.dyn.size(); d-- > 0;) // the first term's failure written last, as address() reports
        if (a.dyn[d].error >= 0) checks.push_back({p.insts[i].access, (int)d});
    }
  if (loads.empty() && checks.empty()) return;
  SmallVector<Value> zeros; // the inner variables: never read by what is hoisted
  for (size_t k = 0; k < p.inner.size(); ++k) zeros.push_back(cIdx(0));
  std::vector<std::map<int, Value>> values(laneOuter.size());
  std::vector<std::map<std::pair<int, int>, Value>> goods(laneOuter.size());
  for (size_t t = 0; t < laneOuter.size(); ++t) {
    enterLane(laneOuter, laneRegs, t, zeros);
    for (int i : loads) inst(i);
    for (auto [ai, di] : checks) {
      if (goods[t].count({ai, di})) continue;
      const DynIndex &d = p.accesses[ai].dyn[di];
      Value v = inst(d.value);
      Value good = inBounds(v, d.bound);
      b_.create<scf::IfOp>(loc_, b_.create<arith::XOrIOp>(loc_, good, b_.create<arith::ConstantIntOp>(loc_, 1, 1)),
                           [&](OpBuilder &b, Location l) {
                             writeStatus(b, l, b.create<arith::ConstantIntOp>(l, d.error + 1, 64), v);
                             b.create<scf::YieldOp>(l);
                           });
      goods[t][{ai, di}] = good;
    }
    values[t] = memo_;
  }
  leavePhase();
  hoisted_ = std::move(values);
  hoistedChecks_ = std::move(goods);
}

void ScalarEmitter::leavePhase() {
  memo_.clear();
  hoisted_.clear();
  hoistedChecks_.clear();
  checked_.clear();
}

SmallVector<Value> ScalarEmitter::emitFold(const Phase &p, const std::vector<std::vector<Value>> &laneOuter,
                                           const std::vector<std::vector<Value>> &laneRegs, int dim, Value lb, Value ub) {
  ph_ = &p;
  const size_t lanes = laneOuter.size();
  SmallVector<Value> lbs, ubs, steps;
  innerBounds(p, dim, lb, ub, lbs, ubs, steps);
  // Each lane's accumulators as iter_args (ArgMax: value, index), folded in inner row-major
  // order per lane, so every lane's result is the one-lane result.
  SmallVector<Value> init;
  for (size_t t = 0; t < lanes; ++t)
    for (auto &r : p.reductions) {
      init.push_back(reduceInit(r));
      if (r.kind == ReduceKind::ArgMax) init.push_back(cI64(0));
    }
  std::vector<int64_t> innerStrides = contiguousStrides(constShape(p.inner));
  hoistInvariants(p, laneOuter, laneRegs); // (a split's chunks are never empty)
  auto nest = scf::buildLoopNest(
      b_, loc_, lbs, ubs, steps, init,
      [&](OpBuilder &b, Location l, ValueRange ivs, ValueRange acc) -> scf::ValueVector {
        OpBuilder::InsertionGuard g(b_);
        b_.setInsertionPoint(b.getInsertionBlock(), b.getInsertionPoint());
        scf::ValueVector next;
        size_t ai = 0;
        Value lin64;
        for (size_t t = 0; t < lanes; ++t) {
          enterLane(laneOuter, laneRegs, t, ivs);
          for (auto &r : p.reductions) {
            Value v = inst(r.value);
            Value a = acc[ai++], idx;
            if (r.kind == ReduceKind::ArgMax) {
              idx = acc[ai++];
              if (!lin64) {
                Value lin = cIdx(0);
                for (size_t k = 0; k < ivs.size(); ++k)
                  lin = b_.create<arith::AddIOp>(loc_, lin,
                                                 b_.create<arith::MulIOp>(loc_, ivs[k], cIdx(innerStrides[k])));
                lin64 = b_.create<arith::IndexCastOp>(loc_, b_.getI64Type(), lin);
              }
            }
            combine(r, a, idx, v, lin64, /*tree=*/false);
            next.push_back(a);
            if (r.kind == ReduceKind::ArgMax) next.push_back(idx);
          }
          for (auto &u : reuse_) // the value a later map phase reads back (PhaseReuse)
            if (u.from == phase_) {
              const Phase &m = k_.phases[u.to];
              const Access &at = m.accesses[m.stores[u.store].access];
              Value ok, code, val;
              Value addr = address(at, ok, code, val);
              b_.create<memref::StoreOp>(loc_, inst(u.fromInst), bufArg_.at(at.buffer), ValueRange{addr});
            }
        }
        return next;
      });
  leavePhase();
  return SmallVector<Value>(nest.results.begin(), nest.results.end());
}

void ScalarEmitter::finishFold(const Phase &p, ValueRange results, const std::vector<std::vector<Value>> &laneOuter,
                               std::vector<std::vector<Value>> &laneRegs) {
  ph_ = &p;
  size_t ai = 0;
  for (size_t t = 0; t < laneOuter.size(); ++t) setRegs(p, results, ai, laneRegs[t]);
  // After-fold stores: inner vars are zero.
  SmallVector<Value> zeros;
  for (size_t k = 0; k < p.inner.size(); ++k) zeros.push_back(cIdx(0));
  for (size_t t = 0; t < laneOuter.size(); ++t) {
    enterLane(laneOuter, laneRegs, t, zeros);
    for (auto &s : p.stores) store(s);
  }
  memo_.clear();
}

void ScalarEmitter::emitPhaseLanes(const Phase &p, const std::vector<std::vector<Value>> &laneOuter,
                                   std::vector<std::vector<Value>> &laneRegs) {
  ph_ = &p;
  if (!p.reductions.empty()) {
    SmallVector<Value> results = emitFold(p, laneOuter, laneRegs);
    finishFold(p, results, laneOuter, laneRegs);
    return;
  }
  SmallVector<Value> lbs, ubs, steps;
  innerBounds(p, -1, {}, {}, lbs, ubs, steps);
  if (!p.inner.empty()) hoistInvariants(p, laneOuter, laneRegs);
  scf::buildLoopNest(b_, loc_, lbs, ubs, steps, [&](OpBuilder &b, Location l, ValueRange ivs) {
    OpBuilder::InsertionGuard g(b_);
    b_.setInsertionPoint(b.getInsertionBlock(), b.getInsertionPoint());
    for (size_t t = 0; t < laneOuter.size(); ++t) {
      enterLane(laneOuter, laneRegs, t, ivs);
      for (auto &u : reuse_) // stored there by reduce phase u.from (PhaseReuse)
        if (u.to == phase_) {
          const Access &at = p.accesses[p.stores[u.store].access];
          Value ok, code, val;
          Value addr = address(at, ok, code, val);
          memo_[u.toInst] = b_.create<memref::LoadOp>(loc_, bufArg_.at(at.buffer), ValueRange{addr});
        }
      for (auto &s : p.stores) store(s);
    }
  });
  leavePhase();
}

void ScalarEmitter::emitSplitBody(const std::vector<int64_t> &splitRows) {
  std::vector<std::vector<Value>> laneOuter{std::vector<Value>(k_.outer.size(), cIdx(0))};
  std::vector<std::vector<Value>> laneRegs(1, std::vector<Value>(k_.regTypes.size()));
  for (size_t pi = 0; pi < k_.phases.size(); ++pi) {
    const Phase &p = k_.phases[pi];
    const int64_t rows = pi < splitRows.size() ? splitRows[pi] : 0;
    if (rows <= 0) {
      emitPhaseLanes(p, laneOuter, laneRegs);
      continue;
    }
    const int dim = splitDimOf(p); // the dims before it have extent 1
    const int64_t parts = splitChunks(p, rows);
    // One partial per chunk and accumulator, on the calling thread's stack.
    std::vector<Value> partials;
    for (auto &r : p.reductions) {
      AOTC_ASSERT(r.kind != ReduceKind::ArgMax, "split fold of an argmax");
      partials.push_back(b_.create<memref::AllocaOp>(loc_, MemRefType::get({parts}, reduceInit(r).getType())));
    }
    // The chunks in parallel: chunk c folds rows [c * rows, min((c + 1) * rows, extent)) of
    // the split dim, in row-major order, into its partials.
    b_.create<scf::ParallelOp>(
        loc_, ValueRange{cIdx(0)}, ValueRange{cIdx(parts)}, ValueRange{cIdx(1)},
        [&](OpBuilder &b, Location, ValueRange ivs) {
          OpBuilder::InsertionGuard g(b_);
          b_.setInsertionPoint(b.getInsertionBlock(), b.getInsertionPoint());
          Value lb = b_.create<arith::MulIOp>(loc_, ivs[0], cIdx(rows));
          Value ub = b_.create<arith::MinUIOp>(loc_, b_.create<arith::AddIOp>(loc_, lb, cIdx(rows)),
                                               cIdx(p.inner[dim]));
          SmallVector<Value> res = emitFold(p, laneOuter, laneRegs, dim, lb, ub);
          for (size_t i = 0; i < partials.size(); ++i)
            b_.create<memref::StoreOp>(loc_, res[i], partials[i], ValueRange{ivs[0]});
        });
    // Then the partials in chunk order (no reassociation), on this thread.
    SmallVector<Value> init;
    for (auto &r : p.reductions) init.push_back(reduceInit(r));
    auto loop = b_.create<scf::ForOp>(
        loc_, cIdx(0), cIdx(parts), cIdx(1), init, [&](OpBuilder &b, Location, Value c, ValueRange acc) {
          OpBuilder::InsertionGuard g(b_);
          b_.setInsertionPoint(b.getInsertionBlock(), b.getInsertionPoint());
          SmallVector<Value> next;
          for (size_t i = 0; i < p.reductions.size(); ++i) {
            Value a = acc[i], none;
            Value part = b_.create<memref::LoadOp>(loc_, partials[i], ValueRange{c});
            combine(p.reductions[i], a, none, part, none, /*tree=*/true);
            next.push_back(a);
          }
          b_.create<scf::YieldOp>(loc_, next);
        });
    finishFold(p, loop.getResults(), laneOuter, laneRegs);
  }
}

void ScalarEmitter::emitLanesBody(const std::vector<std::vector<Value>> &laneOuter) {
  std::vector<std::vector<Value>> laneRegs(laneOuter.size(), std::vector<Value>(k_.regTypes.size()));
  for (size_t i = 0; i < k_.phases.size(); ++i) {
    phase_ = (int)i;
    emitPhaseLanes(k_.phases[i], laneOuter, laneRegs);
  }
  phase_ = -1;
}

void ScalarEmitter::emitBlockBody(ValueRange outerIvs, int64_t block) {
  Value base = b_.create<arith::MulIOp>(loc_, outerIvs.back(), cIdx(block));
  std::vector<Value> regRows(k_.regTypes.size()); // register r of iteration l: regRows[r][l]
  auto row = [&](DType t) {
    return b_.create<memref::AllocaOp>(loc_, MemRefType::get({block}, elemType(ctx_, t, false))).getResult();
  };
  auto forLanes = [&](const std::function<void(Value)> &body) {
    b_.create<scf::ForOp>(loc_, cIdx(0), cIdx(block), cIdx(1), ValueRange{},
                          [&](OpBuilder &b, Location, Value l, ValueRange) {
                            OpBuilder::InsertionGuard g(b_);
                            b_.setInsertionPoint(b.getInsertionBlock(), b.getInsertionPoint());
                            body(l);
                            b_.create<scf::YieldOp>(loc_);
                          });
  };
  auto enter = [&](Value l, ValueRange inner) { // iteration base + l at inner position `inner`
    vars_.assign(outerIvs.begin(), outerIvs.end());
    vars_.back() = b_.create<arith::AddIOp>(loc_, base, l);
    vars_.insert(vars_.end(), inner.begin(), inner.end());
    regs_.assign(k_.regTypes.size(), Value());
    for (size_t r = 0; r < regRows.size(); ++r)
      if (regRows[r]) regs_[r] = b_.create<memref::LoadOp>(loc_, regRows[r], ValueRange{l});
    memo_.clear();
    checked_.clear();
  };
  // Phase p's inner loops with the block's lanes innermost: body(l) at each (inner step, lane).
  auto forInnerLanes = [&](const Phase &p, const std::function<void(Value)> &body) {
    SmallVector<Value> lbs, ubs, steps;
    innerBounds(p, -1, {}, {}, lbs, ubs, steps);
    scf::buildLoopNest(b_, loc_, lbs, ubs, steps, [&](OpBuilder &b, Location, ValueRange ivs) {
      OpBuilder::InsertionGuard g(b_);
      b_.setInsertionPoint(b.getInsertionBlock(), b.getInsertionPoint());
      forLanes([&](Value l) {
        enter(l, ivs);
        body(l);
      });
    });
  };
  for (size_t pi = 0; pi < k_.phases.size(); ++pi) {
    const Phase &p = k_.phases[pi];
    ph_ = &p;
    phase_ = (int)pi;
    if (p.reductions.empty() && p.inner.empty()) { // after-fold stores
      forLanes([&](Value l) {
        enter(l, {});
        for (auto &st : p.stores) store(st);
      });
      continue;
    }
    if (p.reductions.empty()) { // a column scatter (isColumnScatter): the block's lanes innermost
      forInnerLanes(p, [&](Value) {
        for (auto &st : p.stores) store(st);
      });
      continue;
    }
    std::vector<Value> acc;
    for (auto &r : p.reductions) {
      AOTC_ASSERT(r.kind != ReduceKind::ArgMax, "block schedule with an argmax");
      acc.push_back(row(r.accType));
    }
    forLanes([&](Value l) {
      for (size_t i = 0; i < acc.size(); ++i)
        b_.create<memref::StoreOp>(loc_, reduceInit(p.reductions[i]), acc[i], ValueRange{l});
    });
    forInnerLanes(p, [&](Value l) {
      for (size_t i = 0; i < acc.size(); ++i) {
        Value a = b_.create<memref::LoadOp>(loc_, acc[i], ValueRange{l}), none;
        combine(p.reductions[i], a, none, inst(p.reductions[i].value), none, /*tree=*/false);
        b_.create<memref::StoreOp>(loc_, a, acc[i], ValueRange{l});
      }
    });
    for (auto &r : p.reductions)
      if (!regRows[r.reg]) regRows[r.reg] = row(k_.regTypes[r.reg]);
    SmallVector<Value> zeros;
    for (size_t d = 0; d < p.inner.size(); ++d) zeros.push_back(cIdx(0));
    forLanes([&](Value l) {
      for (size_t i = 0; i < acc.size(); ++i) {
        const Reduction &r = p.reductions[i];
        Value v = b_.create<memref::LoadOp>(loc_, acc[i], ValueRange{l});
        b_.create<memref::StoreOp>(loc_, cast(v, r.accType, k_.regTypes[r.reg]), regRows[r.reg], ValueRange{l});
      }
      enter(l, zeros); // after-fold stores: inner vars zero
      for (auto &st : p.stores) store(st);
    });
  }
  memo_.clear();
  phase_ = -1;
}

void ScalarEmitter::emitSequentialBody(ValueRange outerIvs) {
  emitLanesBody({std::vector<Value>(outerIvs.begin(), outerIvs.end())});
}

void verifyAndTidy(ModuleOp mod, const std::string &what, std::string *mlirText) {
  if (failed(verify(mod))) {
    std::string s;
    llvm::raw_string_ostream os(s);
    mod.print(os);
    mod.erase();
    internalError(what + ": generated MLIR does not verify:\n" + s);
  }
  // Tidy the IR (constants, common subexpressions) before printing/lowering.
  PassManager pm(mod.getContext());
  pm.addPass(createCanonicalizerPass());
  pm.addPass(createCSEPass());
  if (failed(pm.run(mod))) internalError(what + ": canonicalization failed");
  if (mlirText) {
    llvm::raw_string_ostream os(*mlirText);
    mod.print(os);
  }
}

} // namespace aotc::cg
