//===- fuzz_json.cpp - libFuzzer harness: bare ExportedProgram JSON ---------===//
//
// The input is `aotc IN`'s file: capture() reads it (format detected from the content,
// as the CLI does; the seeds are ExportedProgram JSON). Beyond crashes: an accepted
// program's --emit=capture text parses back to the same text (FuzzCommon.h).
//===----------------------------------------------------------------------===//
#include "FuzzCommon.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  static aotc::fuzz::InputFile file("model.json");
  aotc::fuzz::captureAndCheck(file.write(data, size), "json");
  return 0;
}
