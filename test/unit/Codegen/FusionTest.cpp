//===- FusionTest.cpp - Kernel grouping on small graphs -------------------===//
#include "TestPrograms.h"

#include "aotc/Decompositions.h"
#include "aotc/OpRegistry.h"

#include <catch2/catch.hpp>

using namespace aotc;
using namespace cgtest;

namespace {
const Kernel *findKernelWithOp(const KernelGraph &kg, const std::string &op) {
  for (auto &k : kg.kernels)
    if (std::find(k.ops.begin(), k.ops.end(), op) != k.ops.end()) return &k;
  return nullptr;
}
} // namespace

TEST_CASE("fusion: addmm is a beta=0 GEMM, bias+relu+sum is one kernel", "[fusion]") {
  Program p = linearReluSum();
  KernelProgram kp = planProgram(p);
  INFO(printKernels(kp));
  const KernelGraph &fw = kp.forward;
  REQUIRE(fw.kernels.size() == 2);
  const Kernel &g = fw.kernels[0];
  CHECK(g.kind == Kernel::Kind::Extern);
  CHECK(g.call.gemm.transB); // permute(w) is a transpose flag, not a copy
  CHECK(!g.call.gemm.transA);
  CHECK(g.call.gemm.beta == 0.0); // C = x @ w^T; the bias is added by the consumer
  CHECK(g.phases.empty());
  // An extern kernel's buffers are its call's: A and B read (C too only when beta != 0), C written.
  CHECK(g.call.fn == ExternFn::Gemm);
  CHECK(g.call.inputs == std::vector<int>{g.call.gemm.a, g.call.gemm.b});
  CHECK(g.call.outputs == std::vector<int>{g.call.gemm.c});
  std::vector<int> reads = g.call.inputs;
  std::sort(reads.begin(), reads.end());
  CHECK(g.reads == reads);
  CHECK(g.writes == g.call.outputs);
  const Kernel &k = fw.kernels[1];
  CHECK(k.kind == Kernel::Kind::Loop);
  CHECK(std::find(k.ops.begin(), k.ops.end(), "bias_add") != k.ops.end());
  CHECK(std::find(k.ops.begin(), k.ops.end(), "relu") != k.ops.end());
  int bias = -1;
  for (size_t b = 0; b < fw.buffers.size(); ++b)
    if (fw.buffers[b].name == "b") bias = (int)b;
  CHECK(std::find(k.reads.begin(), k.reads.end(), bias) != k.reads.end());
  CHECK(std::find(k.ops.begin(), k.ops.end(), "sum") != k.ops.end());
  // Only the addmm result is an intermediate; relu is written straight to the saved area.
  int scratch = 0;
  for (int b : k.reads) scratch += fw.buffers[b].kind == BufferKind::Scratch;
  CHECK(scratch == 1);
  for (int b : k.writes) CHECK(fw.buffers[b].kind != BufferKind::Scratch);
}

TEST_CASE("fusion: an addmm that is a graph output keeps its bias in the GEMM (beta=1)", "[fusion]") {
  Program p;
  p.name = "out";
  Graph &f = p.forward;
  Node *x = ph(f, "x", T(DType::F32, {4, 8}), InputRole::UserInput);
  Node *w = ph(f, "w", T(DType::F32, {8, 3}), InputRole::UserInput);
  Node *b = ph(f, "b", T(DType::F32, {3}), InputRole::UserInput);
  Node *mm = buildCall(f, "addmm", "aten.addmm.default", {b, x, w}, {});
  Node *r = buildCall(f, "relu", "aten.relu.default", {mm}, {});
  f.setOutputs({mm, r});
  p.numForwardOutputs = 2;
  KernelProgram kp = planProgram(p);
  INFO(printKernels(kp));
  REQUIRE(kp.forward.kernels.size() == 2);
  const Kernel &g = kp.forward.kernels[0];
  CHECK(g.kind == Kernel::Kind::Extern);
  CHECK(g.call.gemm.beta == 1.0); // bias broadcast into out[0], then C += x @ w
  CHECK(g.phases.size() == 1);
  const Kernel &k = kp.forward.kernels[1];
  CHECK(std::find(k.ops.begin(), k.ops.end(), "bias_add") == k.ops.end());
}

TEST_CASE("fusion: GEMM blocks depend on the shapes only", "[fusion]") {
  GemmDesc g;
  g.m = 64, g.n = 256, g.k = 784; // MLP fc1: 12.8M multiply-adds, n > m: column blocks
  const TargetInfo t = cpuTargetInfo("multi");
  GemmBlocks b = gemmBlocks(g, t);
  CHECK(!b.rows);
  CHECK(b.size % 32 == 0);
  CHECK(b.count * b.size >= 256);
  CHECK((b.count - 1) * b.size < 256);
  CHECK(b.count > 1);
  CHECK(b.parallel);
  g.m = 256, g.n = 784, g.k = 64;
  b = gemmBlocks(g, t);
  CHECK(b.count * b.size >= 784);
  CHECK((b.count - 1) * b.size < 784);
  g.m = 784, g.n = 256;
  b = gemmBlocks(g, t);
  CHECK(b.rows);
  g.m = 64, g.n = 10, g.k = 256; // small: one block, sequential
  b = gemmBlocks(g, t);
  CHECK(b.count == 1);
  CHECK(!b.parallel);
  g.batch = 16; // a bmm of 16 such products runs its batch entries in parallel
  b = gemmBlocks(g, t);
  CHECK(b.count == 1);
  CHECK(b.parallel);
}

TEST_CASE("fusion: backward mm reads the saved mask product transposed", "[fusion]") {
  Program p = linearReluSum();
  KernelProgram kp = planProgram(p);
  INFO(printKernels(kp));
  const Kernel *mm = findKernelWithOp(kp.backward, "mm");
  REQUIRE(mm);
  CHECK(mm->call.gemm.transA);
  CHECK(mm->call.gemm.m == 3);
  CHECK(mm->call.gemm.n == 8);
  CHECK(mm->call.gemm.k == 4);
}

TEST_CASE("fusion: log_softmax through the loss is 2 kernels with per-row intermediates", "[fusion]") {
  Program p = logSoftmaxNll(64, 10);
  KernelProgram kp = planProgram(p);
  std::string text = printKernels(kp);
  INFO(text);
  CHECK(kp.forward.kernels.size() <= 2);
  // Every scratch buffer is a per-row (or smaller) scalar: at most 64 elements.
  for (auto &k : kp.forward.kernels)
    for (int b : k.writes)
      if (kp.forward.buffers[b].kind == BufferKind::Scratch)
        CHECK(kp.forward.buffers[b].type.numel() <= 64);
  CHECK(text.find("checked") != std::string::npos); // gather is bounds-checked
  REQUIRE(kp.errors.size() == 1);
  CHECK(kp.errors[0].find("gather") != std::string::npos);
}

TEST_CASE("fusion: a pointwise chain is one kernel and views are indexing", "[fusion]") {
  Program p;
  p.name = "chain";
  Graph &g = p.forward;
  Node *x = ph(g, "x", T(DType::F32, {8, 6}), InputRole::UserInput);
  Node *y = ph(g, "y", T(DType::F32, {6}), InputRole::UserInput);
  Node *a = buildCall(g, "add", "aten.add.Tensor", {x, y}, {});
  Node *t = buildCall(g, "permute", "aten.permute.default", {a, std::vector<int64_t>{1, 0}}, {});
  Node *e = buildCall(g, "exp", "aten.exp.default", {t}, {});
  Node *v = buildCall(g, "view", "aten.view.default", {e, std::vector<int64_t>{6, 2, 4}}, {});
  Node *m = buildCall(g, "mul", "aten.mul.Scalar", {v, 2.0}, {});
  g.setOutputs({m});
  p.numForwardOutputs = 1;
  KernelProgram kp = planProgram(p);
  INFO(printKernels(kp));
  REQUIRE(kp.forward.kernels.size() == 1);
  auto &ops = kp.forward.kernels[0].ops;
  CHECK(ops == std::vector<std::string>{"add", "exp", "mul"});
  CHECK(kp.forward.scratchBytes == 0);
  // A reshape that strides cannot express (flattening the transposed value) realizes first:
  // into the view's own output slot when it is a graph output (one kernel writes it, no
  // scratch), else into a dense scratch copy that the reshape then re-strides.
  Node *f = buildCall(g, "view_1", "aten.view.default", {e, std::vector<int64_t>{48}}, {});
  g.setOutputs({m, f});
  p.numForwardOutputs = 2;
  KernelProgram kp2 = planProgram(p);
  INFO(printKernels(kp2));
  CHECK(kp2.forward.scratchBytes == 0);
  Node *s = buildCall(g, "sum", "aten.sum.default", {f}, {});
  Node *c = buildCall(g, "mul_1", "aten.mul.Scalar", {f, 3.0}, {});
  g.setOutputs({m, s, c});
  p.numForwardOutputs = 3;
  KernelProgram kp3 = planProgram(p);
  INFO(printKernels(kp3));
  CHECK(kp3.forward.scratchBytes > 0);
}

TEST_CASE("fusion: --no-fuse style planning gives one kernel per op", "[fusion]") {
  Program p = logSoftmaxNll(4, 3);
  FusionOptions o;
  o.fuse = false;
  KernelProgram kp = planProgram(p, o);
  KernelProgram fused = planProgram(p);
  CHECK(kp.forward.kernels.size() > fused.forward.kernels.size());
}

TEST_CASE("fusion: unsupported op is a located user error", "[fusion]") {
  Program p;
  p.name = "bad";
  Graph &g = p.forward;
  Node *x = ph(g, "x", T(DType::F32, {2, 3}), InputRole::UserInput);
  Node *s = buildCall(g, "softmax", "aten._softmax.default", {x, int64_t(1), false}, {});
  g.setOutputs({s});
  p.numForwardOutputs = 1;
  try {
    planProgram(p);
    FAIL("expected an error");
  } catch (const Error &e) {
    CHECK(e.kind() == Error::Kind::User);
    CHECK(std::string(e.what()).find("softmax") != std::string::npos);
  }
}

TEST_CASE("op table: codegen lowers every primitive, and only registered ops", "[fusion][table]") {
  const std::vector<std::string> cg = codegenTargets();
  REQUIRE(std::is_sorted(cg.begin(), cg.end()));
  for (const std::string &t : primitiveTargets()) {
    if (t == "getitem") continue; // multi-result ops are lowered away before codegen
    INFO(t);
    CHECK(std::binary_search(cg.begin(), cg.end(), t));
  }
  for (const std::string &t : cg) {
    INFO(t);
    CHECK(OpRegistry::get().lookup(t) != nullptr);
  }
}
