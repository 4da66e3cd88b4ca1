//===- build_id_check.cpp - A compile's .o, .h and weights belong together ----===//
//
// Built with the header of one aotc run (AOTC_E2E_HEADER) and the object of the same or
// another run (test/e2e/CMakeLists.txt, e2e.build_id.*):
//   build_id_check run              prints "started <id>"; with a mismatched object the
//                                   header's static check aborts before main (stderr names both)
//   build_id_check weights FILE     aotc::rt::readWeights(<name>_program, FILE): prints
//                                   "weights ok" or the RuntimeError (exit 1)
//===----------------------------------------------------------------------===//
#include AOTC_E2E_HEADER

#include "aotc/safetensors.h"

#include <cstdio>
#include <string>

int main(int argc, char **argv) {
  const aotc_program &p = AOTC_E2E_PROGRAM;
  std::string mode = argc > 1 ? argv[1] : "";
  if (mode == "run") {
    std::printf("started %s\n", p.build_id);
    return 0;
  }
  if (mode == "weights" && argc > 2) {
    try {
      aotc::rt::readWeights(p, argv[2]);
      std::printf("weights ok\n");
      return 0;
    } catch (const aotc::rt::RuntimeError &e) {
      std::fprintf(stderr, "error: %s\n", e.what());
      return 1;
    }
  }
  std::fprintf(stderr, "usage: %s run | weights FILE\n", argv[0]);
  return 2;
}
