//===- Random.cpp - rand, rand_like, bernoulli, dropout, aotc::philox_uniform ---===//
//
// The random ops torch.export leaves (aten.rand, rand_like, bernoulli, native_dropout, and
// dropout before run_decompositions) carry `OpDef::random`: they have shape functions but
// no value of their own. decompose's first step (lib/Decompose/Random.cpp) gives each one
// that draws a stream of the step's RNG state and rewrites it into
// aotc::philox_uniform(seed, offset + stream, size, dtype), whose value is a pure function
// of its inputs (include/aotc/Philox.h): it has an f64 reference, the partitioner may
// recompute it, and the forward and the backward see the same bits. docs/randomness.md.
//===----------------------------------------------------------------------===//
#include "Ops.h"

#include "aotc/Philox.h"

namespace aotc {
namespace ops {
namespace {

using Types = std::vector<TensorType>;

/// The value of a random op before decompose gave it a stream: there is none to compute.
void noValue(OpDef &d) {
  d.random = true;
  d.eval = [](const Node &n, const RefArgs &, const std::vector<std::vector<const RefTensor *>> &)
      -> std::vector<RefTensor> {
    nodeError(n, "'" + n.target + "' draws random numbers: it has a value only after decompose "
                 "gave it a stream of the step's rng_state (docs/randomness.md)");
  };
}

/// A probability argument: finite and in [0, 1] (torch: "dropout probability has to be between
/// 0 and 1", "bernoulli_ expects p to be in [0, 1]").
void checkProbability(const Node &n, size_t i) {
  double p = n.scalarArg(i);
  if (!(p >= 0.0 && p <= 1.0))
    nodeError(n, "probability has to be between 0 and 1, but got " + argStr(n.args[i]));
}

DType floatingResult(const Node &n, DType d, const char *what) {
  requireFloating(n, d, what);
  return d;
}

} // namespace

void registerRandomOps(OpRegistry &r) {
  const std::string opts = "ScalarType? dtype=None, Layout? layout=None, Device? device=None, bool? pin_memory=None";
  {
    OpDef &d = r.add("rand(SymInt[] size, *, " + opts + ") -> Tensor", OpCategory::Factory);
    d.nonDifferentiable = true;
    noValue(d);
    d.infer = [](const Node &n) -> Types {
      return {{floatingResult(n, dtypeArg(n, 1).value_or(kDefaultFloat), "rand: the dtype"), sizeArg(n, 0)}};
    };
  }
  {
    // randperm(n): a permutation of [0, n): the stable ranks of n uniform draws (f64 keys).
    OpDef &d = r.add("randperm(SymInt n, *, ScalarType? dtype=None, Layout? layout=None, Device? device=None, "
                     "bool? pin_memory=None) -> Tensor",
                     OpCategory::Factory);
    d.nonDifferentiable = true;
    noValue(d);
    d.infer = [](const Node &n) -> Types {
      int64_t len = n.intArg(0);
      if (len < 0) nodeError(n, "randperm: n must be non-negative, got " + std::to_string(len));
      DType dt = dtypeArg(n, 1).value_or(DType::I64);
      if (dt != DType::I64 && dt != DType::F32 && dt != DType::F64)
        nodeError(n, std::string("randperm: the result dtype must be int64, float32 or float64 in aotc, got ") +
                         dtypeTorchName(dt));
      if (dt == DType::F32 && len > (int64_t(1) << 24) + 1)
        nodeError(n, "randperm: n is too large for result tensor type: float (n <= 2^24 + 1)");
      return {{dt, {len}}};
    };
  }
  for (const char *name : {"randn", "randn_like"}) {
    // Standard normal numbers: Box-Muller over two uniform draws (lib/Decompose/Random.cpp).
    const bool like = std::string(name) == "randn_like";
    OpDef &d = like ? r.add("randn_like(Tensor self, *, " + opts + ", MemoryFormat? memory_format=None) -> Tensor",
                            OpCategory::Factory)
                    : r.add("randn(SymInt[] size, *, " + opts + ") -> Tensor", OpCategory::Factory);
    d.nonDifferentiable = true;
    noValue(d);
    d.infer = [like](const Node &n) -> Types {
      if (like) {
        TensorType t = argType(n, 0);
        return {{floatingResult(n, dtypeArg(n, 1).value_or(t.dtype), "randn_like: the dtype"), t.shape}};
      }
      return {{floatingResult(n, dtypeArg(n, 1).value_or(kDefaultFloat), "randn: the dtype"), sizeArg(n, 0)}};
    };
  }
  {
    OpDef &d = r.add("rand_like(Tensor self, *, " + opts + ", MemoryFormat? memory_format=None) -> Tensor",
                     OpCategory::Factory);
    d.nonDifferentiable = true;
    noValue(d);
    d.infer = [](const Node &n) -> Types {
      TensorType t = argType(n, 0);
      return {{floatingResult(n, dtypeArg(n, 1).value_or(t.dtype), "rand_like: the dtype"), t.shape}};
    };
  }
  {
    // torch: bernoulli's gradient is zeros (derivatives.yaml); decompose makes it a comparison.
    OpDef &d = r.add("bernoulli(Tensor self, *, Generator? generator=None) -> Tensor", OpCategory::Pointwise);
    d.nonDifferentiable = true;
    noValue(d);
    d.infer = [](const Node &n) -> Types {
      TensorType t = argType(n, 0);
      return {{floatingResult(n, t.dtype, "bernoulli: self"), t.shape}};
    };
  }
  {
    OpDef &d = r.add("bernoulli.p(Tensor self, float p, *, Generator? generator=None) -> Tensor",
                     OpCategory::Pointwise);
    d.nonDifferentiable = true;
    noValue(d);
    d.infer = [](const Node &n) -> Types {
      checkProbability(n, 1);
      TensorType t = argType(n, 0);
      return {{floatingResult(n, t.dtype, "bernoulli: self"), t.shape}};
    };
  }
  {
    OpDef &d = r.add("native_dropout(Tensor input, float p, bool? train) -> (Tensor, Tensor)", OpCategory::Composite);
    noValue(d);
    d.infer = [](const Node &n) -> Types {
      checkProbability(n, 1);
      TensorType t = argType(n, 0);
      return {{floatingResult(n, t.dtype, "native_dropout: input"), t.shape}, {DType::Bool, t.shape}};
    };
  }
  {
    OpDef &d = r.add("dropout(Tensor input, float p, bool train) -> Tensor", OpCategory::Composite);
    noValue(d);
    d.infer = [](const Node &n) -> Types {
      checkProbability(n, 1);
      TensorType t = argType(n, 0);
      return {{floatingResult(n, t.dtype, "dropout: input"), t.shape}};
    };
  }
  {
    // Element i (row-major) is philox::uniformF32/F64(seed, offset, i). seed and offset are 0-d
    // i64 tensors (views of the rng_state input plus the stream number).
    OpDef &d = r.add("aotc::philox_uniform(Tensor seed, Tensor offset, SymInt[] size, ScalarType dtype) -> Tensor",
                     OpCategory::Factory);
    d.primitive = true;
    d.nonDifferentiable = true;
    d.infer = [](const Node &n) -> Types {
      for (size_t i : {0, 1}) {
        TensorType t = argType(n, i);
        if (t.dtype != DType::I64 || t.rank() != 0)
          nodeError(n, std::string(i == 0 ? "seed" : "offset") + " must be a 0-d int64 tensor, got " + t.str());
      }
      DType dt = dtypeArg(n, 3).value_or(kDefaultFloat);
      if (dt != DType::F32 && dt != DType::F64)
        nodeError(n, "philox_uniform: dtype must be float32 or float64, got " + std::string(dtypeTorchName(dt)));
      return {{dt, sizeArg(n, 2)}};
    };
    setEval(d, [](const Node &n, const RefArgs &a) {
      const TensorType &t = n.types[0];
      RefTensor out(t.dtype, t.shape);
      // RefTensor holds doubles: seeds and offsets are exact below 2^53.
      auto u64 = [](double v) { return (uint64_t)(int64_t)v; };
      uint64_t seed = u64(a.at(0)->data.at(0)), off = u64(a.at(1)->data.at(0));
      for (int64_t i = 0; i < out.numel(); ++i)
        out.data[i] = t.dtype == DType::F32 ? (double)philox::uniformF32(seed, off, (uint64_t)i)
                                            : philox::uniformF64(seed, off, (uint64_t)i);
      return out;
    });
  }
}

} // namespace ops
} // namespace aotc
