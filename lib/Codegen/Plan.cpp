//===- Plan.cpp - ABI binding of a partitioned program, kernel listing ----===//
//
// This file implements planProgram and printKernels (Kernels.h): it binds the
// forward and backward graphs' placeholders and outputs to the ABI buffers of
// abi.h (in/out/saved/tangents/grads), lays out the saved area, fuses both
// graphs and builds the program-wide error table.
//===----------------------------------------------------------------------===//
#include "aotc/Kernels.h"
#include "aotc/Codegen.h"

#include "aotc/Diagnostics.h"
#include "aotc/Partition.h"
#include "aotc/abi.h"

#include <algorithm>
#include <set>
#include <sstream>

namespace aotc {

const char *bufferKindName(BufferKind k) {
  switch (k) {
  case BufferKind::Input: return "input";
  case BufferKind::Output: return "output";
  case BufferKind::Saved: return "saved";
  case BufferKind::Tangent: return "tangent";
  case BufferKind::Grad: return "grad";
  case BufferKind::Scratch: return "scratch";
  case BufferKind::State: return "state";
  case BufferKind::Hyper: return "hyper";
  }
  return "?";
}

const char *reduceKindName(ReduceKind k) {
  switch (k) {
  case ReduceKind::Sum: return "sum";
  case ReduceKind::Max: return "max";
  case ReduceKind::Min: return "min";
  case ReduceKind::ArgMax: return "argmax";
  case ReduceKind::Prod: return "prod";
  }
  return "?";
}

const char *externFnName(ExternFn f) {
  switch (f) {
  case ExternFn::Gemm: return "gemm";
  case ExternFn::Conv: return "conv";
  case ExternFn::Fft: return "fft";
  case ExternFn::Linalg: return "linalg";
  }
  return "?";
}

const char *linalgKindName(LinalgDesc::Kind k) {
  switch (k) {
  case LinalgDesc::Kind::Cholesky: return "cholesky";
  case LinalgDesc::Kind::TriSolve: return "trisolve";
  case LinalgDesc::Kind::Lu: return "lu";
  case LinalgDesc::Kind::LuSolve: return "lu_solve";
  case LinalgDesc::Kind::Eigh: return "eigh";
  case LinalgDesc::Kind::Svd: return "svd";
  case LinalgDesc::Kind::Qr: return "qr";
  case LinalgDesc::Kind::Perm: return "perm";
  }
  return "?";
}

ExternCall linalgCall(const LinalgDesc &l) {
  ExternCall c;
  c.fn = ExternFn::Linalg;
  for (int b : {l.a, l.b, l.c})
    if (b >= 0) c.inputs.push_back(b);
  c.outputs = {l.out};
  c.linalg = l;
  return c;
}

const char *fftKindName(FftDesc::Kind k) {
  switch (k) {
  case FftDesc::Kind::C2C: return "c2c";
  case FftDesc::Kind::R2C: return "r2c";
  case FftDesc::Kind::C2R: return "c2r";
  }
  return "?";
}

ExternCall fftCall(const FftDesc &d) {
  ExternCall c;
  c.fn = ExternFn::Fft;
  c.inputs = {d.in};
  c.outputs = {d.out};
  c.fft = d;
  return c;
}

const char *convRoleName(ConvDesc::Role r) {
  switch (r) {
  case ConvDesc::Role::Forward: return "forward";
  case ConvDesc::Role::InputGrad: return "input_grad";
  case ConvDesc::Role::WeightGrad: return "weight_grad";
  }
  return "?";
}

ExternCall convCall(const ConvDesc &d) {
  ExternCall c;
  c.fn = ExternFn::Conv;
  c.inputs = {d.a, d.b};
  c.outputs = {d.c};
  c.conv = d;
  return c;
}

ExternCall gemmCall(const GemmDesc &g) {
  ExternCall c;
  c.fn = ExternFn::Gemm;
  c.inputs = {g.a, g.b};
  if (g.beta != 0.0) c.inputs.push_back(g.c);
  c.outputs = {g.c};
  c.gemm = g;
  return c;
}

bool ExternCall::empty() const {
  switch (fn) {
  case ExternFn::Gemm: // a run-time size is at least 1
    return gemm.m.ref() <= 0 || gemm.n.ref() <= 0 || gemm.batch.ref() <= 0;
  case ExternFn::Conv: // empty tensors never reach codegen as calls (defineConv, defineFft)
  case ExternFn::Fft:
  case ExternFn::Linalg: return false;
  }
  return false;
}

static int addBuf(KernelGraph &kg, const std::string &name, const TensorType &t, BufferKind kind,
                  int index, int64_t offset = 0) {
  Buffer b;
  b.name = name;
  b.type = t;
  b.kind = kind;
  b.index = index;
  b.offset = offset;
  kg.buffers.push_back(b);
  return (int)kg.buffers.size() - 1;
}

/// Renumbers kg's error indices (DynIndex::error, a library call's) from `base` on and
/// appends its error table to the program's.
static void appendErrors(KernelProgram &kp, KernelGraph &kg, int base) {
  for (auto &k : kg.kernels)
    for (auto &ph : k.phases)
      for (auto &a : ph.accesses)
        for (auto &d : a.dyn)
          if (d.error >= 0) d.error += base;
  for (auto &k : kg.kernels)
    if (k.callMayFail()) k.call.conv.error += base;
  for (auto &e : kg.errors) kp.errors.push_back(e);
}

KernelProgram planProgram(const Program &p, const FusionOptions &optsIn) {
  KernelProgram kp;
  kp.name = p.name;
  FusionOptions opts = optsIn;
  for (const Program::SpecializedSize &s : p.specializedSizes) {
    kp.specializedSizes.push_back(s.str());
    if (s.dynamic) opts.sizeMinimums[s.symbol] = s.min;
  }
  auto fph = p.forward.placeholders();
  auto fouts = p.forward.outputs();
  bool hasBwd = false;
  for (auto &n : p.backward.nodes())
    if (n->kind != NodeKind::Placeholder) hasBwd = true;
  hasBwd = hasBwd || !p.backward.placeholders().empty();
  kp.hasBackward = hasBwd;
  int nUser = (!hasBwd && p.saved.empty()) ? (int)fouts.size() : p.numForwardOutputs;
  if (nUser + p.saved.size() != fouts.size())
    internalError("codegen: forward has " + std::to_string(fouts.size()) + " outputs, expected " +
                  std::to_string(nUser) + " user outputs + " + std::to_string(p.saved.size()) +
                  " saved tensors");

  // ABI tensors.
  for (Node *ph : fph) {
    AbiTensor t;
    bool named = (ph->role == InputRole::Parameter || ph->role == InputRole::Buffer ||
                  ph->role == InputRole::Constant) && !ph->fqn.empty();
    t.name = named ? ph->fqn : ph->name;
    t.type = ph->type();
    t.role = ph->role == InputRole::Parameter ? AOTC_ROLE_PARAMETER
           : ph->role == InputRole::Buffer    ? AOTC_ROLE_BUFFER
           : ph->role == InputRole::Constant  ? AOTC_ROLE_CONSTANT
           : ph->role == InputRole::RngState  ? AOTC_ROLE_RNG_STATE
                                              : AOTC_ROLE_USER_INPUT;
    t.requiresGrad = std::find(p.gradOf.begin(), p.gradOf.end(), ph->name) != p.gradOf.end();
    kp.inputs.push_back(t);
  }
  for (int k = 0; k < nUser; ++k) {
    AbiTensor t;
    t.name = fouts[k]->name;
    t.type = fouts[k]->type();
    t.role = AOTC_ROLE_OUTPUT;
    if (const std::string *mut = p.mutatedInputOf(k)) {
      for (size_t i = 0; i < fph.size(); ++i)
        if (fph[i]->name == *mut) t.updatesInput = (int)i;
      if (t.updatesInput < 0)
        internalError("codegen: output " + std::to_string(k) + " updates unknown input '" + *mut + "'");
      // abi.h: a new value that takes a tangent (its input requires grad) says so (ABI 9.2).
      t.requiresGrad = hasBwd && p.outputHasTangent(k, t.type.dtype);
    }
    kp.outputs.push_back(t);
  }
  if (hasBwd)
    for (auto &g : p.gradOf) {
      int idx = -1;
      for (size_t i = 0; i < fph.size(); ++i)
        if (fph[i]->name == g) idx = (int)i;
      if (idx < 0) internalError("codegen: gradOf names unknown input '" + g + "'");
      AbiTensor t = kp.inputs[idx];
      t.role = AOTC_ROLE_GRAD;
      t.requiresGrad = false;
      kp.grads.push_back(t);
      kp.gradInputIndex.push_back(idx);
    }

  // Saved area.
  std::vector<int64_t> savedOff;
  int64_t so = 0;
  for (size_t s = 0; s < p.saved.size(); ++s) {
    savedOff.push_back(so);
    so += savedSlotBytes(fouts[nUser + s]->type().bytes()) + (opts.checkedArena ? kArenaRedzone : 0);
  }
  kp.savedBytes = so;
  kp.checkedArena = opts.checkedArena;

  // The forward's placeholders and user outputs as in[] and out[] (the forward, the eval graph).
  auto bindForwardAbi = [&](KernelGraph &kg, std::vector<int> &in, std::vector<int> &out) {
    for (size_t i = 0; i < fph.size(); ++i)
      in.push_back(addBuf(kg, fph[i]->name, fph[i]->type(), BufferKind::Input, (int)i));
    for (int k = 0; k < nUser; ++k)
      out.push_back(addBuf(kg, fouts[k]->name, fouts[k]->type(), BufferKind::Output, k));
  };

  // Forward.
  {
    KernelGraph &kg = kp.forward;
    std::vector<int> in, out;
    bindForwardAbi(kg, in, out);
    for (size_t s = 0; s < p.saved.size(); ++s)
      out.push_back(addBuf(kg, p.saved[s], fouts[nUser + s]->type(), BufferKind::Saved, -1,
                           savedOff[s]));
    fuseGraph(p.forward, kg, in, out, opts);
  }
  kp.errors = kp.forward.errors;
  kp.backwardErrorBase = (int)kp.errors.size();

  if (hasBwd) {
    KernelGraph &kg = kp.backward;
    // Tangent k <-> k-th differentiable forward output (Program::outputHasTangent).
    std::vector<int> floatingOut;
    for (int k = 0; k < nUser; ++k)
      if (p.outputHasTangent(k, fouts[k]->type().dtype)) floatingOut.push_back(k);
    std::vector<int> in;
    int primal = 0, tangent = 0;
    for (Node *ph : p.backward.placeholders()) {
      if (ph->role == InputRole::Saved) {
        auto it = std::find(p.saved.begin(), p.saved.end(), ph->name);
        if (it == p.saved.end())
          internalError("codegen: backward placeholder '" + ph->name + "' is not a saved tensor");
        size_t s = it - p.saved.begin();
        in.push_back(addBuf(kg, ph->name, ph->type(), BufferKind::Saved, -1, savedOff[s]));
      } else if (ph->role == InputRole::Tangent) {
        if (tangent >= (int)floatingOut.size())
          internalError("codegen: more tangents than floating forward outputs");
        in.push_back(addBuf(kg, ph->name, ph->type(), BufferKind::Tangent, floatingOut[tangent++]));
      } else {
        if (primal >= (int)fph.size()) internalError("codegen: backward has too many primals");
        in.push_back(addBuf(kg, ph->name, ph->type(), BufferKind::Input, primal++));
      }
    }
    std::vector<int> out;
    auto bouts = p.backward.outputs();
    if (bouts.size() != kp.grads.size())
      internalError("codegen: backward outputs do not match gradOf");
    for (size_t j = 0; j < bouts.size(); ++j)
      out.push_back(addBuf(kg, "grad_" + kp.grads[j].name, kp.grads[j].type, BufferKind::Grad, (int)j));
    fuseGraph(p.backward, kg, in, out, opts);
    appendErrors(kp, kg, kp.backwardErrorBase);
  }

  // Eval: the forward's user outputs only; what only fed saved tensors is dead.
  if (!p.saved.empty() && opts.eval) {
    Graph g = p.forward.clone();
    auto gouts = g.outputs();
    g.setOutputs(std::vector<Node *>(gouts.begin(), gouts.begin() + nUser));
    g.eliminateDeadCode();
    KernelGraph &kg = kp.eval;
    std::vector<int> in, out;
    bindForwardAbi(kg, in, out);
    fuseGraph(g, kg, in, out, opts);
    kp.hasEval = true;
    kp.evalErrorBase = (int)kp.errors.size();
    appendErrors(kp, kg, kp.evalErrorBase);
  }
  kp.scratchBytes = std::max({kp.forward.scratchBytes, kp.backward.scratchBytes, kp.eval.scratchBytes});
  return kp;
}

/// Where a buffer lives: in[i], out[i], tangents[i], grads[i], saved+B, state+B, hyper[i],
/// scratch+B, or none.
static std::string bufferPlace(const Buffer &b) {
  switch (b.kind) {
  case BufferKind::Input: return "in[" + std::to_string(b.index) + "]";
  case BufferKind::Output: return "out[" + std::to_string(b.index) + "]";
  case BufferKind::Tangent: return "tangents[" + std::to_string(b.index) + "]";
  case BufferKind::Grad: return "grads[" + std::to_string(b.index) + "]";
  case BufferKind::Saved: return "saved+" + std::to_string(b.offset);
  case BufferKind::State: return "state+" + std::to_string(b.offset);
  case BufferKind::Hyper: return "hyper[" + std::to_string(b.offset / 8) + "]";
  case BufferKind::Scratch: return b.offset >= 0 ? "scratch+" + std::to_string(b.offset) : "none";
  }
  return "?";
}

/// The buffers' names; a name that two buffers share (`shared`: a value written to an output
/// and to the saved area) gets its place without brackets, `getitem@out1` and
/// `getitem@saved+64`, so every entry names one buffer (= one pointer argument of the kernel).
static std::string joinNames(const KernelGraph &kg, const std::set<std::string> &shared,
                             const std::vector<int> &ids) {
  std::string s = "[";
  for (size_t i = 0; i < ids.size(); ++i) {
    const Buffer &b = kg.buffers[ids[i]];
    std::string place = bufferPlace(b);
    std::erase_if(place, [](char c) { return c == '[' || c == ']'; });
    s += (i ? ", " : "") + b.name + (shared.count(b.name) ? "@" + place : "");
  }
  return s + "]";
}

std::string printKernelGraph(const KernelGraph &kg, const std::string &title, const TargetInfo &t,
                             int64_t partialsOffset) {
  std::ostringstream os;
  os << "# " << title << ": " << kg.kernels.size() << " kernels, scratch " << kg.scratchBytes
     << " bytes\n";
  std::set<std::string> seen, shared; // names of more than one buffer
  for (auto &b : kg.buffers)
    if (!seen.insert(b.name).second) shared.insert(b.name);
  for (auto &k : kg.kernels) {
    os << "kernel " << k.name << ":";
    if (k.kind == Kernel::Kind::Extern) os << " " << externFnName(k.call.fn);
    if (k.kind == Kernel::Kind::Extern && k.call.fn == ExternFn::Conv) {
      os << " " << convRoleName(k.call.conv.role);
      if (k.call.conv.batch.symbolic()) os << " batch=" << k.call.conv.batch;
    }
    if (k.kind == Kernel::Kind::Extern && k.call.fn == ExternFn::Fft) {
      const FftDesc &f = k.call.fft;
      os << " " << fftKindName(f.kind) << (f.kind == FftDesc::Kind::C2C ? (f.forward ? " forward" : " backward") : "")
         << (f.kind == FftDesc::Kind::R2C && !f.onesided ? " full" : "")
         << " shape=" << shapeStr(f.shape) << " axes=" << shapeStr(f.axes) << " scale=" << f.scale;
    }
    if (k.kind == Kernel::Kind::Extern && k.call.fn == ExternFn::Linalg) {
      const LinalgDesc &l = k.call.linalg;
      os << " " << linalgKindName(l.kind) << " batch=" << l.batch << " m=" << l.m << " n=" << l.n;
      if (l.nrhs) os << " nrhs=" << l.nrhs;
      if (l.upper) os << " upper";
      if (!l.left) os << " right";
      if (l.unit) os << " unit";
      if (l.adjoint) os << " adjoint";
      if (l.full) os << " full=" << l.full;
      if (!l.computeUV) os << " novectors";
      if (l.check) os << " check";
    }
    os << " ops=[";
    for (size_t i = 0; i < k.ops.size(); ++i) os << (i ? ", " : "") << k.ops[i];
    os << "] reads=" << joinNames(kg, shared, k.reads) << " writes=" << joinNames(kg, shared, k.writes);
    Dims dom = k.outer;
    Dims inner;
    bool common = true;
    for (auto &p : k.phases) {
      if (p.inner.empty()) continue;
      if (inner.empty()) inner = p.inner;
      else if (inner != p.inner) common = false;
    }
    if (common) dom.insert(dom.end(), inner.begin(), inner.end());
    os << " domain=" << dimsStr(k.kind == Kernel::Kind::Extern ? k.outer : dom);
    if (k.kind == Kernel::Kind::Loop && (k.phases.size() > 1 || !common ||
                                         (k.phases.size() == 1 && !k.phases[0].reductions.empty()))) {
      os << " phases=[";
      for (size_t i = 0; i < k.phases.size(); ++i) {
        auto &p = k.phases[i];
        os << (i ? ", " : "");
        if (p.reductions.empty()) os << "map";
        else {
          os << "reduce(";
          for (size_t r = 0; r < p.reductions.size(); ++r)
            os << (r ? "," : "") << reduceKindName(p.reductions[r].kind);
          os << ")";
        }
        os << dimsStr(p.inner);
      }
      os << "]";
    }
    if (k.kind == Kernel::Kind::Extern && k.call.fn == ExternFn::Gemm) {
      auto &g = k.call.gemm;
      os << " m=" << g.m << " n=" << g.n << " k=" << g.k;
      if (g.batch.symbolic() || g.batch.ref() > 1) os << " batch=" << g.batch;
      if (g.transA) os << " transA";
      if (g.transB) os << " transB";
      if (g.beta != 0.0) os << " beta=" << g.beta;
    }
    if (k.mayFail()) os << " checked";
    if (std::string sched = scheduleText(k, t); !sched.empty()) {
      os << " schedule=[" << sched;
      if (t.gpu && k.schedule.gpu.finalGrid > 0)
        os << " final=" << k.schedule.gpu.finalGrid << "x" << k.schedule.gpu.block
           << " partials=scratch+" << partialsOffset;
      os << "]";
    }
    os << "\n";
  }
  // The intermediates that live in the scratch arena (everything else is an ABI buffer).
  os << "# " << title << " scratch buffers:";
  int n = 0;
  for (auto &b : kg.buffers)
    if (b.kind == BufferKind::Scratch && b.offset >= 0)
      os << (n++ ? ", " : " ") << b.name << " " << b.type.str();
  if (n == 0) os << " none";
  os << "\n";
  // Where every buffer lives, in buffer-id order (= the order of a kernel's pointer arguments).
  os << "# " << title << " buffers:";
  for (auto &b : kg.buffers) {
    os << " " << b.name << "=" << bufferPlace(b);
  }
  os << "\n";
  return os.str();
}

std::string printKernels(const KernelProgram &in) {
  KernelProgram storage;
  const KernelProgram &kp = scheduledProgram(in, cpuTargetInfo("multi"), storage);
  const TargetInfo &target = kp.target;
  std::string s = "# aotc kernels for '" + kp.name + "': saved " + std::to_string(kp.savedBytes) +
                  " bytes, scratch " + std::to_string(kp.scratchBytes) + " bytes\n";
  for (const std::string &z : kp.specializedSizes)
    if (z.find("run time") != std::string::npos)
      s += "# run-time size " + z + ": the sizes below are expressions over it; the saved area and the arenas "
           "are planned at its largest value\n";
  // The legend (docs/cli.md "Reading --emit output" says more).
  s += "# legend: one line per kernel, in call order. ops= the graph ops fused into it (their base names);\n"
       "#   reads= / writes= its buffers (NAME_contig: a strided view copied to a dense buffer first);\n"
       "#   domain= the iteration space; phases=[..] the loops run one after another inside each outer\n"
       "#   iteration: map[dims] element-wise, reduce(kinds)[dims] a reduction over those dims;\n"
       "#   checked: can fail at run time (an index out of range, a library error) with a code whose\n"
       "#   message names the op; gemm/conv/fft/linalg: a library call (m n k transA/transB batch beta:\n"
       "#   the GEMM's shape and operands); schedule=[..]: how the target runs it (docs/stage-codegen.md\n"
       "#   \"Schedules\"): parallel=N the outer N dims on the thread team, split=pI:PxR phase I's fold\n"
       "#   in P chunks of R rows on the team, else serial; lanes=N outer\n"
       "#   iterations per loop body; vector=dIxW the vector loop (iteration variable I, outer then inner)\n"
       "#   and elements per register (multi: v2|v3|v4); a GEMM's blocks=COUNTxSIZE{rows|cols} of C,\n"
       "#   parallel when they run on the team, a single-threaded library call per thread's run of\n"
       "#   blocks (last=alone: the small last block is a call of its own); cuda=<mapping> grid= block=\n";
  if (target.gpu)
    s += "# target cuda: mappings and launches of docs/cuda.md\n";
  else
    s += "# target " + target.name + ": " + std::to_string(target.vectorBits) + "-bit vectors" +
         (target.maxVectorBits > target.vectorBits ? " (clones up to " + std::to_string(target.maxVectorBits) + ")" : "") +
         ", parallel loops from cost " + std::to_string(target.parallelMinCost) + "\n";
  s += printKernelGraph(kp.forward, "forward", target, gpuPartialsOffset(kp));
  if (kp.hasBackward) s += printKernelGraph(kp.backward, "backward", target, gpuPartialsOffset(kp));
  if (kp.hasEval) s += printKernelGraph(kp.eval, "eval", target); // CPU targets only (FusionOptions::eval)
  if (kp.hasTrain) {
    // The train step's graphs; their scratch lives at train scratch + graphScratchOffset.
    s += "# train step: state " + std::to_string(kp.train.stateBytes) + " bytes, train scratch " +
         std::to_string(kp.train.scratchBytes) + " bytes (update/accumulate arena at +" +
         std::to_string(kp.train.graphScratchOffset) + ")\n";
    for (size_t i = 0; i < kp.train.buckets.size(); ++i) {
      const GradBucket &bk = kp.train.buckets[i];
      const int zw = kp.train.spec.zeroWorld;
      s += "# bucket " + std::to_string(i) + ": " + dtypeAbbr(bk.dtype) + " x " + std::to_string(bk.count) +
           " at train scratch +" + std::to_string(bk.offset) + (zw ? ", reduce-scatter" : ", all-reduce") +
           " starts after backward " + kp.backward.kernels[bk.startAfter].name + ", waited for before the update" +
           (zw ? "; this rank's " + std::to_string(bk.count / zw) + " at shard +" + std::to_string(bk.shardOffset) +
                     ", all-gathered after the update"
               : std::string()) +
           "; grads";
      for (int j : bk.grads) s += " " + kp.grads[j].name;
      s += "\n";
    }
    s += printKernelGraph(kp.train.update, "update", target);
    if (kp.train.accumulate) s += printKernelGraph(kp.train.accumulateGraph, "accumulate", target);
    if (kp.train.spec.zeroWorld > 0) s += printKernelGraph(kp.train.shardNormGraph, "shard_norm", target);
  }
  return s;
}

} // namespace aotc
