//===- MLIRGen.cpp - Kernels.h loop kernels -> MLIR -> LLVM IR ------------===//
//
// This file implements buildKernelModule (CodegenInternal.h). Each Loop kernel
// becomes a func.func over bare-pointer memrefs (one flat memref per buffer;
// element addresses are computed from the kernel's affine Accesses):
//   scf.parallel over the kernel's parallel outer dims (no reductions: every
//   fold stays inside one outer iteration, so results do not depend on the
//   number of threads) / scf.for over the other outer dims,
//     per phase: an scf.for nest over the inner domain, carrying the
//     accumulators of reduce phases as iter_args,
// with arith/math for the scalar code. The GEMM of a Gemm kernel is a function
// of its own: fixed-size blocks of C (from the shapes only) in an scf.parallel,
// one single-threaded cblas_[sd]gemm call (llvm.call) per block. Bounds-checked (data-dependent) accesses
// are guarded by scf.if and record {code, value} in the status pair.
// Lowering (C++ PassManager): scf-to-openmp, math-to-libm, then one conversion
// to the LLVM dialect (scf->cf, arith, math, memref, cf, func with the
// bare-pointer calling convention, openmp), reconcile-unrealized-casts, and
// translateModuleToLLVMIR.
//===----------------------------------------------------------------------===//
#include "CodegenInternal.h"

#include "aotc/Diagnostics.h"

#include "mlir/Conversion/ArithToLLVM/ArithToLLVM.h"
#include "mlir/Conversion/ControlFlowToLLVM/ControlFlowToLLVM.h"
#include "mlir/Conversion/FuncToLLVM/ConvertFuncToLLVM.h"
#include "mlir/Conversion/LLVMCommon/ConversionTarget.h"
#include "mlir/Conversion/LLVMCommon/TypeConverter.h"
#include "mlir/Conversion/MathToLLVM/MathToLLVM.h"
#include "mlir/Conversion/MathToLibm/MathToLibm.h"
#include "mlir/Conversion/MemRefToLLVM/MemRefToLLVM.h"
#include "mlir/Conversion/OpenMPToLLVM/ConvertOpenMPToLLVM.h"
#include "mlir/Conversion/ReconcileUnrealizedCasts/ReconcileUnrealizedCasts.h"
#include "mlir/Conversion/SCFToControlFlow/SCFToControlFlow.h"
#include "mlir/Conversion/SCFToOpenMP/SCFToOpenMP.h"
#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/ControlFlow/IR/ControlFlow.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Dialect/LLVMIR/LLVMDialect.h"
#include "mlir/Dialect/Math/IR/Math.h"
#include "mlir/Dialect/MemRef/IR/MemRef.h"
#include "mlir/Dialect/OpenMP/OpenMPDialect.h"
#include "mlir/Dialect/SCF/IR/SCF.h"
#include "mlir/IR/Builders.h"
#include "mlir/IR/BuiltinOps.h"
#include "mlir/IR/MLIRContext.h"
#include "mlir/IR/Verifier.h"
#include "mlir/Pass/Pass.h"
#include "mlir/Pass/PassManager.h"
#include "mlir/Target/LLVMIR/Dialect/Builtin/BuiltinToLLVMIRTranslation.h"
#include "mlir/Target/LLVMIR/Dialect/LLVMIR/LLVMToLLVMIRTranslation.h"
#include "mlir/Target/LLVMIR/Dialect/OpenMP/OpenMPToLLVMIRTranslation.h"
#include "mlir/Target/LLVMIR/Export.h"
#include "mlir/Transforms/DialectConversion.h"
#include "mlir/Transforms/Passes.h"

#include "llvm/IR/Module.h"
#include "llvm/Support/raw_ostream.h"

#include <algorithm>
#include <limits>
#include <map>

using namespace mlir;

namespace aotc::cg {

std::string kernelSymbol(const std::string &prog, bool backward, const std::string &kernel) {
  return prog + (backward ? "_bwd_" : "_fwd_") + kernel;
}

std::string gemmSymbol(const std::string &prog, bool backward, const std::string &kernel) {
  return kernelSymbol(prog, backward, kernel) + "_gemm";
}

std::vector<int> kernelArgs(const Kernel &k) {
  std::vector<int> ids = k.reads;
  ids.insert(ids.end(), k.writes.begin(), k.writes.end());
  if (k.kind == Kernel::Kind::Gemm) {
    // Only the buffers the init phases touch.
    ids.clear();
    for (auto &p : k.phases)
      for (auto &a : p.accesses)
        if (a.buffer >= 0) ids.push_back(a.buffer);
  }
  std::sort(ids.begin(), ids.end());
  ids.erase(std::unique(ids.begin(), ids.end()), ids.end());
  return ids;
}

namespace {

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

class KernelBuilder {
public:
  KernelBuilder(OpBuilder &b, const KernelGraph &kg, const Kernel &k)
      : b_(b), ctx_(b.getContext()), kg_(kg), k_(k) {}

  void build(ModuleOp mod, const std::string &sym);

private:
  OpBuilder &b_;
  MLIRContext *ctx_;
  const KernelGraph &kg_;
  const Kernel &k_;
  Location loc_ = UnknownLoc::get(ctx_);
  std::map<int, Value> bufArg_;
  Value status_;
  std::vector<Value> regs_;

  // Per-scope state while emitting one phase body.
  const Phase *ph_ = nullptr;
  std::vector<Value> vars_; // outer ivs then inner ivs (index)
  std::map<int, Value> memo_;

  Value cIdx(int64_t v) { return b_.create<arith::ConstantIndexOp>(loc_, v); }
  Value cI64(int64_t v) { return b_.create<arith::ConstantIntOp>(loc_, v, 64); }
  Value constOf(DType t, double f, int64_t i) {
    Type ty = elemType(ctx_, t, false);
    if (isFloating(t)) return b_.create<arith::ConstantOp>(loc_, ty, b_.getFloatAttr(ty, f));
    return b_.create<arith::ConstantOp>(loc_, ty, b_.getIntegerAttr(ty, t == DType::Bool ? (i != 0) : i));
  }
  Value zeroOf(DType t) { return constOf(t, 0.0, 0); }

  Value cast(Value v, DType from, DType to);
  Value inst(int id);
  Value address(const Access &a, Value &ok, Value &errCode, Value &errVal);
  Value load(const Access &a, DType t);
  void store(const Store &s);
  void emitPhase(const Phase &p);
  void emitBody(ValueRange outerIvs);
};

Value KernelBuilder::cast(Value v, DType from, DType to) {
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

Value KernelBuilder::address(const Access &a, Value &ok, Value &errCode, Value &errVal) {
  Value addr;
  auto add = [&](Value t) { addr = addr ? b_.create<arith::AddIOp>(loc_, addr, t).getResult() : t; };
  if (a.offset != 0) add(cIdx(a.offset));
  for (size_t k = 0; k < a.coef.size(); ++k) {
    if (a.coef[k] == 0) continue;
    add(a.coef[k] == 1 ? vars_[k] : b_.create<arith::MulIOp>(loc_, vars_[k], cIdx(a.coef[k])).getResult());
  }
  ok = nullptr;
  // Dyn terms, checked; the first failing one is reported.
  for (auto it = a.dyn.rbegin(); it != a.dyn.rend(); ++it) {
    const DynIndex &d = *it;
    Value v = inst(d.value);
    if (d.error < 0) { // unchecked: in range by construction
      Value vi = b_.create<arith::IndexCastOp>(loc_, b_.getIndexType(), v);
      if (d.stride != 0) add(d.stride == 1 ? vi : b_.create<arith::MulIOp>(loc_, vi, cIdx(d.stride)).getResult());
      continue;
    }
    Value ge = b_.create<arith::CmpIOp>(loc_, arith::CmpIPredicate::sge, v, cI64(0));
    Value lt = b_.create<arith::CmpIOp>(loc_, arith::CmpIPredicate::slt, v, cI64(d.bound));
    Value good = b_.create<arith::AndIOp>(loc_, ge, lt);
    Value code = cI64(d.error + 1);
    errCode = errCode ? b_.create<arith::SelectOp>(loc_, good, errCode, code).getResult() : code;
    errVal = errVal ? b_.create<arith::SelectOp>(loc_, good, errVal, v).getResult() : v;
    ok = ok ? b_.create<arith::AndIOp>(loc_, ok, good).getResult() : good;
    Value vi = b_.create<arith::IndexCastOp>(loc_, b_.getIndexType(), v);
    if (d.stride != 0) add(d.stride == 1 ? vi : b_.create<arith::MulIOp>(loc_, vi, cIdx(d.stride)).getResult());
  }
  return addr ? addr : cIdx(0);
}

Value KernelBuilder::load(const Access &a, DType t) {
  Value ok, code, val;
  Value addr = address(a, ok, code, val);
  Value buf = bufArg_.at(a.buffer);
  DType bt = kg_.buffers[a.buffer].type.dtype;
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
          b.create<memref::StoreOp>(l, code, status_, ValueRange{b.create<arith::ConstantIndexOp>(l, 0)});
          b.create<memref::StoreOp>(l, val, status_, ValueRange{b.create<arith::ConstantIndexOp>(l, 1)});
          Value z = isFloating(bt) ? b.create<arith::ConstantOp>(l, ty, b.getFloatAttr(ty, 0.0)).getResult()
                                   : b.create<arith::ConstantOp>(l, ty, b.getIntegerAttr(ty, 0)).getResult();
          b.create<scf::YieldOp>(l, z);
        });
    r = ifOp.getResult(0);
  }
  return cast(r, bt, t);
}

void KernelBuilder::store(const Store &s) {
  const Access &a = ph_->accesses[s.access];
  Value v = inst(s.value);
  DType bt = kg_.buffers[a.buffer].type.dtype;
  DType vt = ph_->insts[s.value].type;
  v = cast(v, vt, bt);
  Value ok, code, val;
  Value addr = address(a, ok, code, val);
  Value buf = bufArg_.at(a.buffer);
  auto doStore = [&](OpBuilder &b, Location l) {
    Value x = v;
    if (s.accumulate) {
      Value old = b.create<memref::LoadOp>(l, buf, ValueRange{addr});
      if (isFloating(bt)) x = b.create<arith::AddFOp>(l, old, x);
      else if (bt == DType::Bool) x = b.create<arith::OrIOp>(l, old, b.create<arith::ExtUIOp>(l, old.getType(), x));
      else x = b.create<arith::AddIOp>(l, old, x);
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
        b.create<memref::StoreOp>(l, code, status_, ValueRange{b.create<arith::ConstantIndexOp>(l, 0)});
        b.create<memref::StoreOp>(l, val, status_, ValueRange{b.create<arith::ConstantIndexOp>(l, 1)});
        b.create<scf::YieldOp>(l);
      });
}

Value KernelBuilder::inst(int id) {
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
    r = fl ? b_.create<math::AbsFOp>(loc_, A()).getResult() : b_.create<math::AbsIOp>(loc_, A()).getResult();
    break;
  case ScalarOp::Exp: r = b_.create<math::ExpOp>(loc_, A()); break;
  case ScalarOp::Log: r = b_.create<math::LogOp>(loc_, A()); break;
  case ScalarOp::Tanh: r = b_.create<math::TanhOp>(loc_, A()); break;
  case ScalarOp::Sqrt: r = b_.create<math::SqrtOp>(loc_, A()); break;
  case ScalarOp::Erf: r = b_.create<math::ErfOp>(loc_, A()); break;
  case ScalarOp::Sin: r = b_.create<math::SinOp>(loc_, A()); break;
  case ScalarOp::Cos: r = b_.create<math::CosOp>(loc_, A()); break;
  case ScalarOp::Log1p: r = b_.create<math::Log1pOp>(loc_, A()); break;
  case ScalarOp::Expm1: r = b_.create<math::ExpM1Op>(loc_, A()); break;
  case ScalarOp::Not: r = b_.create<arith::XOrIOp>(loc_, A(), constOf(DType::Bool, 1, 1)); break;
  case ScalarOp::Add:
    r = fl ? b_.create<arith::AddFOp>(loc_, A(), B()).getResult() : b_.create<arith::AddIOp>(loc_, A(), B()).getResult();
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
  case ScalarOp::Max:
    r = fl ? b_.create<arith::MaximumFOp>(loc_, A(), B()).getResult()
           : b_.create<arith::MaxSIOp>(loc_, A(), B()).getResult();
    break;
  case ScalarOp::Min:
    r = fl ? b_.create<arith::MinimumFOp>(loc_, A(), B()).getResult()
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

void KernelBuilder::emitPhase(const Phase &p) {
  ph_ = &p;
  size_t no = k_.outer.size();
  std::vector<Value> outerVars(vars_.begin(), vars_.begin() + no);
  SmallVector<Value> lbs, ubs, steps;
  for (int64_t d : p.inner) {
    lbs.push_back(cIdx(0));
    ubs.push_back(cIdx(d));
    steps.push_back(cIdx(1));
  }
  if (p.reductions.empty()) {
    scf::buildLoopNest(b_, loc_, lbs, ubs, steps, [&](OpBuilder &b, Location l, ValueRange ivs) {
      OpBuilder::InsertionGuard g(b_);
      b_.setInsertionPoint(b.getInsertionBlock(), b.getInsertionPoint());
      vars_ = outerVars;
      vars_.insert(vars_.end(), ivs.begin(), ivs.end());
      memo_.clear();
      for (auto &s : p.stores) store(s);
    });
    memo_.clear();
    return;
  }
  // Reduce phase: accumulators as iter_args (ArgMax: value, index).
  SmallVector<Value> init;
  for (auto &r : p.reductions) {
    DType at = r.accType;
    double f = 0.0;
    int64_t i = 0;
    if (r.kind == ReduceKind::Max || r.kind == ReduceKind::ArgMax) {
      f = -std::numeric_limits<double>::infinity();
      i = std::numeric_limits<int64_t>::min();
    } else if (r.kind == ReduceKind::Min) {
      f = std::numeric_limits<double>::infinity();
      i = std::numeric_limits<int64_t>::max();
    }
    init.push_back(constOf(at, f, i));
    if (r.kind == ReduceKind::ArgMax) init.push_back(cI64(0));
  }
  std::vector<int64_t> innerStrides = contiguousStrides(p.inner);
  auto nest = scf::buildLoopNest(
      b_, loc_, lbs, ubs, steps, init,
      [&](OpBuilder &b, Location l, ValueRange ivs, ValueRange acc) -> scf::ValueVector {
        OpBuilder::InsertionGuard g(b_);
        b_.setInsertionPoint(b.getInsertionBlock(), b.getInsertionPoint());
        vars_ = outerVars;
        vars_.insert(vars_.end(), ivs.begin(), ivs.end());
        memo_.clear();
        scf::ValueVector next;
        size_t ai = 0;
        for (auto &r : p.reductions) {
          Value v = inst(r.value);
          Value a = acc[ai++];
          bool fl = isFloating(r.accType);
          switch (r.kind) {
          case ReduceKind::Sum:
            next.push_back(fl ? b_.create<arith::AddFOp>(loc_, a, v).getResult()
                              : b_.create<arith::AddIOp>(loc_, a, v).getResult());
            break;
          case ReduceKind::Max:
            next.push_back(fl ? b_.create<arith::MaximumFOp>(loc_, a, v).getResult()
                              : b_.create<arith::MaxSIOp>(loc_, a, v).getResult());
            break;
          case ReduceKind::Min:
            next.push_back(fl ? b_.create<arith::MinimumFOp>(loc_, a, v).getResult()
                              : b_.create<arith::MinSIOp>(loc_, a, v).getResult());
            break;
          case ReduceKind::ArgMax: {
            Value idx = acc[ai++];
            Value take;
            if (fl) {
              Value gt = b_.create<arith::CmpFOp>(loc_, arith::CmpFPredicate::OGT, v, a);
              Value vnan = b_.create<arith::CmpFOp>(loc_, arith::CmpFPredicate::UNO, v, v);
              Value anum = b_.create<arith::CmpFOp>(loc_, arith::CmpFPredicate::ORD, a, a);
              take = b_.create<arith::OrIOp>(loc_, gt, b_.create<arith::AndIOp>(loc_, vnan, anum));
            } else {
              take = b_.create<arith::CmpIOp>(loc_, arith::CmpIPredicate::sgt, v, a);
            }
            Value lin = cIdx(0);
            for (size_t k = 0; k < ivs.size(); ++k)
              lin = b_.create<arith::AddIOp>(loc_, lin,
                                             b_.create<arith::MulIOp>(loc_, ivs[k], cIdx(innerStrides[k])));
            Value lin64 = b_.create<arith::IndexCastOp>(loc_, b_.getI64Type(), lin);
            next.push_back(b_.create<arith::SelectOp>(loc_, take, v, a));
            next.push_back(b_.create<arith::SelectOp>(loc_, take, lin64, idx));
            break;
          }
          }
        }
        return next;
      });
  SmallVector<Value> results = nest.results;
  if (p.inner.empty()) {
    // buildLoopNest without loops returns the body's values directly.
  }
  size_t ai = 0;
  for (auto &r : p.reductions) {
    if ((int)regs_.size() <= r.reg) regs_.resize(r.reg + 1);
    Value v = results[ai++];
    if (r.kind == ReduceKind::ArgMax) v = results[ai++];
    DType from = r.kind == ReduceKind::ArgMax ? DType::I64 : r.accType;
    regs_[r.reg] = cast(v, from, k_.regTypes[r.reg]);
  }
  // After-fold stores: inner vars are zero.
  vars_ = outerVars;
  for (size_t k = 0; k < p.inner.size(); ++k) vars_.push_back(cIdx(0));
  memo_.clear();
  for (auto &s : p.stores) store(s);
  memo_.clear();
}

void KernelBuilder::emitBody(ValueRange outerIvs) {
  vars_.assign(outerIvs.begin(), outerIvs.end());
  regs_.assign(k_.regTypes.size(), Value());
  std::vector<Value> outer = vars_;
  for (auto &p : k_.phases) {
    vars_ = outer;
    emitPhase(p);
  }
}

void KernelBuilder::build(ModuleOp mod, const std::string &sym) {
  std::vector<int> args = kernelArgs(k_);
  SmallVector<Type> types;
  for (int id : args) {
    const Buffer &bf = kg_.buffers[id];
    types.push_back(MemRefType::get({std::max<int64_t>(bf.type.numel(), 1)},
                                    elemType(ctx_, bf.type.dtype, true)));
  }
  bool fail = k_.mayFail();
  if (fail) types.push_back(MemRefType::get({2}, b_.getI64Type()));
  b_.setInsertionPointToEnd(mod.getBody());
  auto fn = b_.create<func::FuncOp>(loc_, sym, b_.getFunctionType(types, {}));
  Block *entry = fn.addEntryBlock();
  b_.setInsertionPointToStart(entry);
  for (size_t i = 0; i < args.size(); ++i) bufArg_[args[i]] = entry->getArgument(i);
  if (fail) status_ = entry->getArgument(args.size());
  // Outer loops: parallel dims first, then sequential ones.
  int np = std::min<int>(k_.parallelDims, (int)k_.outer.size());
  SmallVector<Value> plb, pub, pst, slb, sub, sst;
  for (int d = 0; d < (int)k_.outer.size(); ++d) {
    (d < np ? plb : slb).push_back(cIdx(0));
    (d < np ? pub : sub).push_back(cIdx(k_.outer[d]));
    (d < np ? pst : sst).push_back(cIdx(1));
  }
  auto sequential = [&](OpBuilder &b, Location l, ValueRange pivs) {
    OpBuilder::InsertionGuard g(b_);
    b_.setInsertionPoint(b.getInsertionBlock(), b.getInsertionPoint());
    SmallVector<Value> pv(pivs.begin(), pivs.end());
    scf::buildLoopNest(b_, loc_, slb, sub, sst, [&](OpBuilder &b2, Location l2, ValueRange sivs) {
      OpBuilder::InsertionGuard g2(b_);
      b_.setInsertionPoint(b2.getInsertionBlock(), b2.getInsertionPoint());
      SmallVector<Value> all = pv;
      all.append(sivs.begin(), sivs.end());
      emitBody(all);
    });
  };
  if (np > 0) {
    b_.create<scf::ParallelOp>(loc_, plb, pub, pst,
                               [&](OpBuilder &b, Location l, ValueRange ivs) { sequential(b, l, ivs); });
  } else {
    sequential(b_, loc_, {});
  }
  b_.setInsertionPointToEnd(entry);
  b_.create<func::ReturnOp>(loc_);
}

/// The GEMM of a Gemm kernel as `func.func @<kernel>_gemm(%a, %b, %c: !llvm.ptr)`:
/// the gemmBlocks() blocks of C (rows or columns, per batch entry) as an
/// scf.parallel (scf.for when too small) whose body is one single-threaded
/// `llvm.call @cblas_[sd]gemm` per block (row-major, transposes as flags).
/// The blocking depends on the shapes only, so results are bit-identical for
/// any number of OpenMP threads as long as the BLAS itself runs single-threaded.
void buildGemmFunction(OpBuilder &b, ModuleOp mod, const Kernel &k, const std::string &sym) {
  const GemmDesc &g = k.gemm;
  for (int64_t v : {g.m, g.n, g.k, g.lda, g.ldb, g.ldc})
    if (v > std::numeric_limits<int32_t>::max())
      userError("codegen: matrix dimension " + std::to_string(v) + " exceeds BLAS int range");
  MLIRContext *ctx = b.getContext();
  Location loc = UnknownLoc::get(ctx);
  Type fp = g.dtype == DType::F64 ? (Type)Float64Type::get(ctx) : (Type)Float32Type::get(ctx);
  Type i32 = b.getI32Type();
  Type ptr = LLVM::LLVMPointerType::get(ctx);
  const char *blas = g.dtype == DType::F64 ? "cblas_dgemm" : "cblas_sgemm";
  if (!mod.lookupSymbol(blas)) {
    auto fty = LLVM::LLVMFunctionType::get(LLVM::LLVMVoidType::get(ctx),
                                           {i32, i32, i32, i32, i32, i32, fp, ptr, i32, ptr, i32, fp, ptr, i32});
    b.setInsertionPointToStart(mod.getBody());
    b.create<LLVM::LLVMFuncOp>(loc, blas, fty);
  }
  b.setInsertionPointToEnd(mod.getBody());
  auto fn = b.create<func::FuncOp>(loc, sym, b.getFunctionType({ptr, ptr, ptr}, {}));
  Block *entry = fn.addEntryBlock();
  b.setInsertionPointToStart(entry);
  GemmBlocks gb = gemmBlocks(g);
  int64_t extent = gb.rows ? g.m : g.n;
  Value pa = entry->getArgument(0), pb = entry->getArgument(1), pc = entry->getArgument(2);
  auto body = [&](OpBuilder &ob, Value block) {
    auto ci = [&](int64_t v) { return ob.create<arith::ConstantIndexOp>(loc, v).getResult(); };
    auto add = [&](Value x, Value y) { return ob.create<arith::AddIOp>(loc, x, y).getResult(); };
    auto mul = [&](Value x, int64_t c) { return ob.create<arith::MulIOp>(loc, x, ci(c)).getResult(); };
    Value bi = ob.create<arith::DivUIOp>(loc, block, ci(gb.count));
    Value start = mul(ob.create<arith::RemUIOp>(loc, block, ci(gb.count)), gb.size);
    Value len = ob.create<arith::MinUIOp>(loc, ci(gb.size), ob.create<arith::SubIOp>(loc, ci(extent), start));
    Value offA = add(ci(g.offA), mul(bi, g.strideA));
    Value offB = add(ci(g.offB), mul(bi, g.strideB));
    Value offC = add(ci(g.offC), mul(bi, g.strideC));
    if (gb.rows) {
      offA = add(offA, mul(start, g.transA ? 1 : g.lda));
      offC = add(offC, mul(start, g.ldc));
    } else {
      offB = add(offB, mul(start, g.transB ? g.ldb : 1));
      offC = add(offC, start);
    }
    auto at = [&](Value base, Value off) {
      Value o = ob.create<arith::IndexCastOp>(loc, ob.getI64Type(), off);
      return ob.create<LLVM::GEPOp>(loc, ptr, fp, base, ValueRange{o}, /*inbounds=*/true).getResult();
    };
    auto i32c = [&](int64_t v) { return ob.create<arith::ConstantIntOp>(loc, v, 32).getResult(); };
    auto i32v = [&](Value v) { return ob.create<arith::IndexCastOp>(loc, i32, v).getResult(); };
    auto fpc = [&](double v) { return ob.create<arith::ConstantOp>(loc, fp, ob.getFloatAttr(fp, v)).getResult(); };
    Value M = gb.rows ? i32v(len) : i32c(g.m);
    Value N = gb.rows ? i32c(g.n) : i32v(len);
    ob.create<LLVM::CallOp>(
        loc, TypeRange{}, blas,
        ValueRange{i32c(101), i32c(g.transA ? 112 : 111), i32c(g.transB ? 112 : 111), M, N, i32c(g.k),
                   fpc(g.alpha), at(pa, offA), i32c(std::max<int64_t>(g.lda, 1)), at(pb, offB),
                   i32c(std::max<int64_t>(g.ldb, 1)), fpc(g.beta), at(pc, offC),
                   i32c(std::max<int64_t>(g.ldc, 1))});
  };
  int64_t total = gb.count * g.batch;
  Value lb = b.create<arith::ConstantIndexOp>(loc, 0), ub = b.create<arith::ConstantIndexOp>(loc, total),
        st = b.create<arith::ConstantIndexOp>(loc, 1);
  if (total == 1) {
    body(b, lb);
  } else if (gb.parallel) {
    b.create<scf::ParallelOp>(loc, ValueRange{lb}, ValueRange{ub}, ValueRange{st},
                              [&](OpBuilder &ob, Location, ValueRange ivs) { body(ob, ivs[0]); });
  } else {
    b.create<scf::ForOp>(loc, lb, ub, st, ValueRange{},
                         [&](OpBuilder &ob, Location l, Value iv, ValueRange) {
                           body(ob, iv);
                           ob.create<scf::YieldOp>(l);
                         });
  }
  b.setInsertionPointToEnd(entry);
  b.create<func::ReturnOp>(loc);
}

/// Lowers scf/arith/math/memref/func/omp to the LLVM dialect.
LogicalResult lowerToLLVMDialect(ModuleOp mod) {
  MLIRContext *ctx = mod.getContext();
  {
    PassManager pm(ctx);
    pm.addPass(createConvertSCFToOpenMPPass());
    pm.addPass(createConvertMathToLibmPass());
    if (failed(pm.run(mod))) return failure();
  }
  LowerToLLVMOptions options(ctx);
  options.useBarePtrCallConv = true;
  LLVMTypeConverter converter(ctx, options);
  RewritePatternSet patterns(ctx);
  // scf -> cf in the same conversion: scf-to-openmp wraps loop bodies in
  // memref.alloca_scope, a single-block op that must be inlined first.
  populateSCFToControlFlowConversionPatterns(patterns);
  arith::populateArithToLLVMConversionPatterns(converter, patterns);
  populateMathToLLVMConversionPatterns(converter, patterns);
  populateFinalizeMemRefToLLVMConversionPatterns(converter, patterns);
  cf::populateControlFlowToLLVMConversionPatterns(converter, patterns);
  populateFuncToLLVMConversionPatterns(converter, patterns);
  populateOpenMPToLLVMConversionPatterns(converter, patterns);
  LLVMConversionTarget target(*ctx);
  configureOpenMPToLLVMConversionLegality(target, converter);
  target.addLegalOp<ModuleOp, omp::TerminatorOp, omp::BarrierOp, omp::TaskwaitOp,
                    omp::TaskyieldOp>();
  if (failed(applyFullConversion(mod, target, std::move(patterns)))) return failure();
  PassManager pm2(ctx);
  pm2.addPass(createReconcileUnrealizedCastsPass());
  return pm2.run(mod);
}

} // namespace

std::unique_ptr<llvm::Module> buildKernelModule(const KernelProgram &kp, llvm::LLVMContext &lctx,
                                                std::string *mlirText) {
  DialectRegistry registry;
  registry.insert<func::FuncDialect, arith::ArithDialect, math::MathDialect, memref::MemRefDialect,
                  scf::SCFDialect, cf::ControlFlowDialect, LLVM::LLVMDialect, omp::OpenMPDialect>();
  registerBuiltinDialectTranslation(registry);
  registerLLVMDialectTranslation(registry);
  registerOpenMPDialectTranslation(registry);
  MLIRContext ctx(registry, MLIRContext::Threading::DISABLED);
  ctx.loadAllAvailableDialects();
  OpBuilder b(&ctx);
  ModuleOp mod = ModuleOp::create(UnknownLoc::get(&ctx), StringRef(kp.name));
  auto addGraph = [&](const KernelGraph &kg, bool bwd) {
    for (auto &k : kg.kernels) {
      if (!k.phases.empty()) {
        KernelBuilder kb(b, kg, k);
        kb.build(mod, kernelSymbol(kp.name, bwd, k.name));
      }
      if (k.kind == Kernel::Kind::Gemm && k.gemm.m > 0 && k.gemm.n > 0 && k.gemm.batch > 0)
        buildGemmFunction(b, mod, k, gemmSymbol(kp.name, bwd, k.name));
    }
  };
  addGraph(kp.forward, false);
  if (kp.hasBackward) addGraph(kp.backward, true);
  if (failed(verify(mod))) {
    std::string s;
    llvm::raw_string_ostream os(s);
    mod.print(os);
    mod.erase();
    internalError("codegen: generated MLIR does not verify:\n" + s);
  }
  {
    // Tidy the IR (constants, common subexpressions) before printing/lowering.
    PassManager pm(&ctx);
    pm.addPass(createCanonicalizerPass());
    pm.addPass(createCSEPass());
    if (failed(pm.run(mod))) internalError("codegen: canonicalization failed");
  }
  if (mlirText) {
    llvm::raw_string_ostream os(*mlirText);
    mod.print(os);
  }
  if (failed(lowerToLLVMDialect(mod))) {
    mod.erase();
    internalError("codegen: lowering MLIR to the LLVM dialect failed");
  }
  auto llvmMod = translateModuleToLLVMIR(mod, lctx, kp.name);
  mod.erase();
  if (!llvmMod) internalError("codegen: translation to LLVM IR failed");
  return llvmMod;
}

} // namespace aotc::cg
