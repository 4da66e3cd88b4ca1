//===- FuzzCommon.h - What every libFuzzer harness of aotc shares -----------===//
//
// The verdict rule (docs/fuzzing.md): an input that aotc rejects with a *user* error
// (aotc::Error of kind User; rt::RuntimeError for the runtime's readers) is an accepted
// rejection. An internal error, any other exception, a crash, a sanitizer report, an
// out-of-memory (-malloc_limit_mb / -rss_limit_mb), a hang (-timeout) or a failed
// property check is a bug: the harness prints why and aborts, so libFuzzer records the
// input as a crash.
//===----------------------------------------------------------------------===//
#pragma once

#include "aotc/Diagnostics.h"
#include "aotc/Graph.h"
#include "aotc/TextIR.h"

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <exception>
#include <fstream>
#include <string>

namespace aotc::fuzz {

/// Prints "aotc fuzz: BUG: <msg>" and aborts (libFuzzer saves the input).
[[noreturn]] inline void bug(const std::string &msg) {
  std::fprintf(stderr, "aotc fuzz: BUG: %s\n", msg.c_str());
  std::fflush(stderr);
  std::abort();
}

/// Runs `f`. Returns true when it completed, false when it threw a user error (an accepted
/// rejection); anything else is a bug.
template <class F> bool accepted(const char *what, F &&f) {
  try {
    f();
    return true;
  } catch (const Error &e) {
    if (e.kind() == Error::Kind::User)
      return false;
    bug(std::string(what) + ": internal error on this input: " + e.what());
  } catch (const std::exception &e) {
    bug(std::string(what) + ": unexpected exception: " + e.what());
  } catch (...) {
    bug(std::string(what) + ": unexpected non-standard exception");
  }
}

/// The input as a file: capture() and readPt2() read paths, exactly as `aotc IN` does.
/// One file per process, rewritten for every input, removed at exit.
class InputFile {
public:
  explicit InputFile(const std::string &name);
  ~InputFile();
  /// Rewrites the file with `data` and returns its path.
  const std::string &write(const uint8_t *data, size_t size);
  const std::string &path() const { return path_; }

private:
  std::string dir_, path_;
};

/// The text stages in pipeline order (Driver.h kTextStages) and a stage's position.
extern const char *const kTextStages[6];
int textStageIndex(const std::string &stage); ///< -1 when not a text stage.

/// What `aotc --start-from=<p.stage>` does to a parsed program before the next stage
/// (Pipeline.cpp): the name must be a C identifier, the tensor-size bound, and index
/// widening when decompose is skipped.
void prepareStartFrom(Program &p);
/// Runs the stage after p.stage (functionalize .. partition) as Pipeline.cpp does, with
/// the built-in derivative rules and the min-cut partitioner. False when p is partitioned.
bool runNextStage(Program &p);

/// The --emit=S / --start-from=S contract on one program: its text T = print(p) parses
/// back (a user error on aotc's own output is a bug) and print(parse(T)) == T.
/// Returns T.
std::string checkTextRoundTrip(const Program &p, const char *what);

/// The body of the capture harnesses (pt2, json, fx): capture() of the file at `path` as
/// `aotc IN --emit=capture` does; when it is accepted, every weight holds exactly its
/// type's bytes and the printed program passes checkTextRoundTrip.
void captureAndCheck(const std::string &path, const char *what);

} // namespace aotc::fuzz
