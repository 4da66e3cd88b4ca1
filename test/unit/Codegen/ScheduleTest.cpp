//===- ScheduleTest.cpp - The schedule pass (include/aotc/Schedule.h) -----===//
#include "TestPrograms.h"

#include "aotc/Codegen.h"
#include "aotc/Diagnostics.h"

#include <catch2/catch.hpp>

using namespace aotc;
using namespace cgtest;

TEST_CASE("schedule: every kernel of every graph gets one, the same for the same target", "[schedule]") {
  KernelProgram kp = planProgram(logSoftmaxNll(64, 10));
  CHECK(!kp.scheduled);
  KernelProgram a = kp, b = kp;
  scheduleProgram(a, cpuTargetInfo("x86-64-v3"));
  scheduleProgram(b, cpuTargetInfo("x86-64-v3"));
  CHECK(a.scheduled);
  CHECK(a.target.name == "x86-64-v3");
  for (const KernelGraph *g : {&a.forward, &a.backward, &a.eval})
    for (const Kernel &k : g->kernels) CHECK(k.schedule.valid);
  CHECK(printKernels(a) == printKernels(b));
}

TEST_CASE("schedule: the CPU levels differ only in vector widths, multi lists all three", "[schedule]") {
  KernelProgram kp = planProgram(linearReluSum(64, 256, 128));
  KernelProgram v2 = kp, v4 = kp, multi = kp;
  scheduleProgram(v2, cpuTargetInfo("x86-64-v2"));
  scheduleProgram(v4, cpuTargetInfo("x86-64-v4"));
  scheduleProgram(multi, cpuTargetInfo("multi"));
  REQUIRE(v2.forward.kernels.size() == v4.forward.kernels.size());
  for (size_t i = 0; i < v2.forward.kernels.size(); ++i) {
    const KernelSchedule &s2 = v2.forward.kernels[i].schedule, &s4 = v4.forward.kernels[i].schedule;
    CHECK(s2.parallelDims == s4.parallelDims);
    CHECK(s2.lanes == s4.lanes);
    CHECK(s2.vectorDim == s4.vectorDim);
    CHECK(s2.gemm.count == s4.gemm.count);
    if (s2.vectorDim >= 0) CHECK(s4.vectorElems == 4 * s2.vectorElems); // 512 vs 128 bits
  }
  const std::string text = printKernels(multi);
  CHECK(text.find("# target multi: 128-bit vectors (clones up to 512)") != std::string::npos);
  CHECK(text.find("|") != std::string::npos); // vector=dIxW|W|W
}

TEST_CASE("schedule: codegen schedules an unscheduled program and refuses another target's", "[schedule]") {
  KernelProgram kp = planProgram(linearReluSum());
  CodegenOptions o;
  o.cpu = "x86-64-v2";
  o.emitObject = false;
  o.emitLLVM = true;
  Artifact art;
  emitObject(kp, o, art); // not scheduled: emitObject schedules a copy for x86-64-v2
  CHECK(!art.llvmText.empty());
  scheduleProgram(kp, cpuTargetInfo("x86-64-v3"));
  Artifact art2;
  CHECK_THROWS_WITH(emitObject(kp, o, art2), Catch::Contains("scheduled for x86-64-v3, not x86-64-v2"));
  CHECK_THROWS_WITH(cpuTargetInfo("pentium"), Catch::Contains("unknown CPU target 'pentium'"));
}
