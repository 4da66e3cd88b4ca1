//===- fuzz_stage.cpp - libFuzzer harness: every --start-from stage text ----===//
//
// The input is aotc IR of any text stage (capture .. partition; the seeds are
// `aotc --emit=<stage>` texts of small models). parseProgram reads it as
// `aotc --start-from=<its stage>` does, then the next text stage runs in memory, as
// Pipeline.cpp runs it (later stages and codegen: fuzz_pipeline). Properties checked on
// every program that is accepted, at the input's stage and after the next one:
//  (1) print(p) parses again, and print(parse(print(p))) == print(p) (the --emit=S /
//      --start-from=S contract; for an arbitrary input text T only print(parse(T)) is
//      canonical, so the property starts at the first print);
//  (2) the next stage gives the same text whether it runs on p or on parse(print(p)):
//      the text carries everything the later stages need;
// and a stage rejects p exactly when it rejects parse(print(p)).
//===----------------------------------------------------------------------===//
#include "FuzzCommon.h"

#include "aotc/Capture.h"

using namespace aotc;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  std::string text(reinterpret_cast<const char *>(data), size);
  Program p;
  if (!fuzz::accepted("stage (parse)", [&] {
        p = parseProgram(text, "fuzz.txt");
        fuzz::prepareStartFrom(p);
      }))
    return 0;
  std::string printed = fuzz::checkTextRoundTrip(p, "stage");
  Program q = parseProgram(printed, "printed.txt");
  fuzz::prepareStartFrom(q);
  const std::string stage = p.stage;
  bool more = true;
  bool okP = fuzz::accepted("stage (next stage)", [&] { more = fuzz::runNextStage(p); });
  bool okQ = fuzz::accepted("stage (next stage, reparsed)", [&] { fuzz::runNextStage(q); });
  if (okP != okQ)
    fuzz::bug("the stage after '" + stage + "' " + (okP ? "accepts" : "rejects") +
              " the program but " + (okQ ? "accepts" : "rejects") + " its printed text");
  if (!okP || !more)
    return 0;
  if (fuzz::checkTextRoundTrip(p, "stage (next stage)") != printProgram(q))
    fuzz::bug("the stage after '" + stage + "' gives different texts for the program and for "
              "its printed text\n--- printed input ---\n" + printed);
  return 0;
}
