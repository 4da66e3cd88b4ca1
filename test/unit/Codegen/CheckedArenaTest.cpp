//===- CheckedArenaTest.cpp - --sanitize=address and the checked arena --------===//
//
// The checked arena (abi.h AOTC_PROGRAM_CHECKED_ARENA): planned buffers are separated by
// redzones that the entry points poison, and scratch buffers are poisoned while not live.
// These tests run the instrumented object in this process, so they need ASan here: they
// run in the address suite (scripts/test.sh --sanitize=address) and, elsewhere, only check
// the plan and report that the run was skipped.
//===----------------------------------------------------------------------===//
#include "CodegenTestUtil.h"
#include "TestPrograms.h"

#include "aotc/Kernels.h"

#include <catch2/catch.hpp>

#include <fstream>
#include <random>
#include <sstream>
#include <sys/wait.h>

using namespace cgtest;

namespace {

bool asanInProcess() { return dlsym(RTLD_DEFAULT, "__asan_init") != nullptr; }

CodegenOptions checkedOptions(const std::string &name) {
  CodegenOptions o;
  o.name = name;
  o.sanitize = "address";
  o.fusion.checkedArena = true;
  return o;
}

/// Runs L's forward in a child process; returns its stderr and sets `status` (waitpid).
std::string forwardInChild(const Loaded &L, const std::vector<RefTensor> &inputs, int &status) {
  std::string errPath = L.dir + "/child.err";
  pid_t pid = fork();
  if (pid == 0) {
    FILE *f = std::freopen(errPath.c_str(), "w", stderr);
    (void)f;
    RunResult r = run(L, inputs, nullptr);
    _exit(r.fwdRc == 0 ? 0 : 3);
  }
  waitpid(pid, &status, 0);
  std::ifstream in(errPath);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

} // namespace

TEST_CASE("checked arena: redzones in the plan, correct results when instrumented", "[sanitize]") {
  Program p = linearReluSum(4, 8, 3);
  FusionOptions plain, checked;
  checked.checkedArena = true;
  KernelProgram a = planProgram(p, plain), b = planProgram(p, checked);
  CHECK(b.checkedArena);
  CHECK(b.savedBytes >= a.savedBytes + kArenaRedzone * (int64_t)p.saved.size());
  CHECK(b.forward.scratchBytes > a.forward.scratchBytes);
  if (!asanInProcess()) {
    WARN("not an ASan build: the instrumented run is checked in the address suite only");
    return;
  }
  auto L = compileAndLoad(p, checkedOptions("checked"));
  REQUIRE(L->prog);
  CHECK((L->prog->flags & (AOTC_PROGRAM_ASAN | AOTC_PROGRAM_CHECKED_ARENA)) ==
        (AOTC_PROGRAM_ASAN | AOTC_PROGRAM_CHECKED_ARENA));
  std::mt19937_64 rng(7);
  std::vector<RefTensor> in;
  for (Node *ph : p.forward.placeholders()) in.push_back(randomTensor(ph->type(), rng));
  RunResult r = run(*L, in, nullptr);
  REQUIRE(r.fwdRc == 0);
  auto ref = evaluate(p.forward, in);
  CHECK(relErr(r.outputs[0], ref[0]) <= 1e-5);
}

TEST_CASE("checked arena: a kernel writing past its buffer is reported", "[sanitize]") {
  if (!asanInProcess()) {
    WARN("not an ASan build: the planted overflow is checked in the address suite only");
    return;
  }
  Program p = linearReluSum(4, 8, 3);
  CodegenOptions o = checkedOptions("planted");
  KernelProgram kp = planProgram(p, o.fusion);
  kp.name = o.name;
  // Plant the bug: the first store into a saved or scratch buffer writes one buffer
  // further, i.e. starting at the first byte after it (its redzone).
  bool planted = false;
  for (Kernel &k : kp.forward.kernels)
    for (Phase &ph : k.phases)
      for (Store &st : ph.stores) {
        Access &ac = ph.accesses[st.access];
        const Buffer &bf = kp.forward.buffers[ac.buffer];
        if (planted || (bf.kind != BufferKind::Scratch && bf.kind != BufferKind::Saved)) continue;
        ac.offset += bf.type.numel();
        planted = true;
      }
  REQUIRE(planted);
  Loaded L;
  emitObject(kp, o, L.art);
  linkAndLoad(L, o.name);
  REQUIRE(L.prog);
  std::mt19937_64 rng(7);
  std::vector<RefTensor> in;
  for (Node *ph : p.forward.placeholders()) in.push_back(randomTensor(ph->type(), rng));
  int status = 0;
  std::string err = forwardInChild(L, in, status);
  INFO(err);
  CHECK(!(WIFEXITED(status) && WEXITSTATUS(status) == 0));
  CHECK(err.find("ERROR: AddressSanitizer: use-after-poison") != std::string::npos);
}
