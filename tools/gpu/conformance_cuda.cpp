//===- conformance_cuda.cpp - Conformance samples on a GPU -------------------===//
//
//   conformance_cuda DIR OUTDIR [FIRST]
//
// Every program of the linked table (conformance_table.h; DIR/programs.cpp), from index FIRST
// (0): reads DIR/<name>.in.safetensors (inputs and tangent_<i>, as `aotc run --inputs`), runs
// one forward and backward on the device and writes OUTDIR/<name>.out.safetensors (output_<i>,
// grad_<name>, as `aotc run --out`). Prints "start <index> <name>" before each, so a caller
// (tools/gpu/conformance_gpu.py device) that sees this process fail (a CUDA error is sticky:
// it exits 2 naming it) records that sample and starts again at the next index.
// Exit 77 without a CUDA device.
//===----------------------------------------------------------------------===//
#include "conformance_table.h"
#include "device_model.h"

#include <cstdio>
#include <cstdlib>
#include <exception>
#include <string>

int main(int argc, char **argv) {
  if (argc < 3) {
    std::fprintf(stderr, "usage: %s DIR OUTDIR [FIRST]\n", argv[0]);
    return 2;
  }
  aotc_gpu::tool = "conformance_cuda";
  if (aotc_gpu::noCudaDevice("conformance_cuda")) return 77;
  const std::string dir = argv[1], outDir = argv[2];
  const int first = argc > 3 ? std::atoi(argv[3]) : 0;
  for (int i = first; i < aotc_gpu::kConformanceCount; ++i) {
    const aotc_gpu::ConformanceEntry &e = aotc_gpu::kConformance[i];
    std::printf("start %d %s\n", i, e.name);
    std::fflush(stdout);
    try {
      aotc::rt::SafetensorsFile inputs = aotc::rt::readSafetensors(dir + "/" + e.name + ".in.safetensors");
      aotc_gpu::DeviceModel m(*e.prog, nullptr, nullptr, &inputs);
      aotc_gpu::runOnce(m, outDir + "/" + e.name + ".out.safetensors");
    } catch (const std::exception &ex) {
      std::fprintf(stderr, "conformance_cuda: %s: %s\n", e.name, ex.what());
      return 2;
    }
  }
  std::printf("done %d programs\n", aotc_gpu::kConformanceCount - first);
  return 0;
}
