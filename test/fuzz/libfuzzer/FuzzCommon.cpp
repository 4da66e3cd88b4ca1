//===- FuzzCommon.cpp - Shared pieces of the libFuzzer harnesses ------------===//
#include "FuzzCommon.h"

#include "aotc/Autodiff.h"
#include "aotc/Capture.h"
#include "aotc/Partition.h"
#include "aotc/Stages.h"

#include <algorithm>
#include <cctype>
#include <cstring>
#include <sys/stat.h>
#include <unistd.h>

namespace aotc::fuzz {

InputFile::InputFile(const std::string &name) {
  const char *tmp = std::getenv("TMPDIR");
  dir_ = std::string(tmp && *tmp ? tmp : "/tmp") + "/aotc-fuzz-" + std::to_string(getpid());
  ::mkdir(dir_.c_str(), 0700);
  path_ = dir_ + "/" + name;
}

InputFile::~InputFile() {
  std::remove(path_.c_str());
  ::rmdir(dir_.c_str());
}

const std::string &InputFile::write(const uint8_t *data, size_t size) {
  std::ofstream out(path_, std::ios::binary | std::ios::trunc);
  out.write(reinterpret_cast<const char *>(data), (std::streamsize)size);
  out.close();
  if (!out)
    bug("cannot write the fuzz input to " + path_);
  return path_;
}

const char *const kTextStages[6] = {"capture", "functionalize", "decompose",
                                    "joint",   "lower",         "partition"};

int textStageIndex(const std::string &stage) {
  for (int i = 0; i < 6; ++i)
    if (stage == kTextStages[i])
      return i;
  return -1;
}

/// First line where two texts differ, for the bug message.
static std::string firstDifference(const std::string &a, const std::string &b) {
  size_t i = 0;
  while (i < a.size() && i < b.size() && a[i] == b[i])
    ++i;
  size_t line = 1 + (size_t)std::count(a.begin(), a.begin() + (long)i, '\n');
  auto lineAt = [&](const std::string &s) {
    size_t b0 = s.rfind('\n', i == 0 ? 0 : i - 1);
    b0 = b0 == std::string::npos ? 0 : b0 + 1;
    size_t e = s.find('\n', i);
    return s.substr(b0, e == std::string::npos ? std::string::npos : e - b0);
  };
  return "line " + std::to_string(line) + ":\n  first:  " + lineAt(a) + "\n  second: " + lineAt(b);
}

std::string checkTextRoundTrip(const Program &p, const char *what) {
  std::string text = printProgram(p);
  Program q;
  try {
    q = parseProgram(text, "printed.txt");
  } catch (const Error &e) {
    bug(std::string(what) + ": aotc cannot read the text it printed (stage " + p.stage + "): " +
        e.what() + "\n--- text ---\n" + text);
  }
  std::string again = printProgram(q);
  if (again != text)
    bug(std::string(what) + ": print(parse(print(p))) != print(p) at stage " + p.stage + ", " +
        firstDifference(text, again) + "\n--- text ---\n" + text);
  return text;
}

void prepareStartFrom(Program &p) {
  // Pipeline.cpp: the program name becomes C symbols (isCIdentifier, Codegen.h).
  bool id = !p.name.empty() && !std::isdigit((unsigned char)p.name[0]);
  for (char c : p.name)
    id = id && (std::isalnum((unsigned char)c) || c == '_');
  if (!id)
    userError("--name '" + p.name + "' is not a C identifier");
  checkTensorBytes(p, kDefaultMaxTensorBytes);
  int s = textStageIndex(p.stage);
  if (s >= textStageIndex("decompose") && s < textStageIndex("partition"))
    widenIndexInputs(p.forward);
}

bool runNextStage(Program &p) {
  switch (textStageIndex(p.stage)) {
  case 0: functionalize(p); break;
  case 1: decompose(p); break;
  case 2: buildJoint(p, JointOptions{}); break;
  case 3: lower(p); break;
  case 4: partition(p, PartitionerKind::MinCut); break;
  case 5: return false;
  default: bug("unknown stage '" + p.stage + "'");
  }
  return true;
}

void captureAndCheck(const std::string &path, const char *what) {
  Program p;
  std::vector<Weight> weights;
  if (!accepted(what, [&] { p = capture(path, CaptureOptions{}, &weights); }))
    return;
  for (const Weight &w : weights)
    if ((int64_t)w.bytes.size() != w.type.bytes())
      bug(std::string(what) + ": weight '" + w.fqn + "' of type " + w.type.str() + " holds " +
          std::to_string(w.bytes.size()) + " bytes");
  checkTextRoundTrip(p, what);
}

} // namespace aotc::fuzz
