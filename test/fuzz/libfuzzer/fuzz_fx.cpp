//===- fuzz_fx.cpp - libFuzzer harness: FX graph-code text ------------------===//
//
// The input is `aotc IN`'s file: capture() reads it (the seeds are plain FX text as
// print_readable() writes it, and capture-stage aotc IR). Beyond crashes: an accepted
// program's --emit=capture text parses back to the same text (FuzzCommon.h).
//===----------------------------------------------------------------------===//
#include "FuzzCommon.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  static aotc::fuzz::InputFile file("model.fx.txt");
  aotc::fuzz::captureAndCheck(file.write(data, size), "fx");
  return 0;
}
