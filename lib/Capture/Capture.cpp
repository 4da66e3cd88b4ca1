//===- Capture.cpp - Stage 1: read the input, check it, set requires_grad ---===//
//
// capture() detects the input format from the content (never the extension):
//   "PK\x03\x04" / "PK\x05\x06"  -> .pt2 zip            (Pt2Archive.cpp)
//   first non-blank byte '{'      -> ExportedProgram JSON (ExportJson.cpp)
//   a `def forward(` line         -> FX graph code        (IR/Parser.cpp)
// Shapes/dtypes are checked by the readers (each node's meta against the
// registry's inference). Then --requires-grad / --freeze are applied.
//===----------------------------------------------------------------------===//
#include "aotc/Capture.h"
#include "aotc/Diagnostics.h"
#include "aotc/TextIR.h"

#include <cerrno>
#include <cstring>
#include <cctype>
#include <fstream>
#include <iterator>
#include <set>
#include <sstream>

namespace aotc {

InputFormat detectFormat(const std::string &bytes) {
  if (bytes.size() >= 4 && bytes[0] == 'P' && bytes[1] == 'K' &&
      ((bytes[2] == '\x03' && bytes[3] == '\x04') || (bytes[2] == '\x05' && bytes[3] == '\x06')))
    return InputFormat::Pt2Zip;
  size_t i = 0;
  if (bytes.compare(0, 3, "\xEF\xBB\xBF") == 0) i = 3; // UTF-8 BOM
  while (i < bytes.size() && std::isspace((unsigned char)bytes[i])) ++i;
  if (i < bytes.size() && bytes[i] == '{') return InputFormat::ExportJson;
  if (looksLikeFxText(bytes)) return InputFormat::FxText;
  return InputFormat::Unknown;
}

std::string programNameFromPath(const std::string &path) {
  std::string base = path.substr(path.find_last_of('/') == std::string::npos ? 0 : path.find_last_of('/') + 1);
  base = base.substr(0, base.find('.'));
  std::string r;
  for (char c : base) r += (std::isalnum((unsigned char)c) || c == '_') ? c : '_';
  if (r.empty()) return "model";
  if (std::isdigit((unsigned char)r[0])) r = "_" + r;
  return r;
}

void applyRequiresGradFlags(Program &p, const CaptureOptions &opts) {
  std::vector<Node *> phs = p.forward.placeholders();
  auto find = [&](const std::string &flag, const std::string &name) -> Node * {
    for (Node *ph : phs)
      if (ph->name == name || (!ph->fqn.empty() && ph->fqn == name)) return ph;
    std::string known;
    for (Node *ph : phs) {
      known += (known.empty() ? "" : ", ") + ph->name;
      if (!ph->fqn.empty()) known += " (" + ph->fqn + ")";
    }
    userError(flag + ": the program has no input named '" + name + "'; its inputs are: " + known);
  };
  std::set<Node *> on, off;
  for (const std::string &n : opts.requiresGrad) {
    Node *ph = find("--requires-grad", n);
    if (!isFloating(ph->type().dtype))
      userError("--requires-grad: input '" + n + "' has dtype " + dtypeAbbr(ph->type().dtype) +
                "; only floating-point inputs can require grad");
    on.insert(ph);
  }
  for (const std::string &n : opts.freeze) {
    Node *ph = find("--freeze", n);
    if (on.count(ph)) userError("input '" + n + "' is named by both --requires-grad and --freeze");
    off.insert(ph);
  }
  for (Node *ph : on) ph->requiresGrad = true;
  for (Node *ph : off) ph->requiresGrad = false;
}

void checkTensorBytes(const Program &p, int64_t maxTensorBytes) {
  // Checked before any stage sizes buffers from a type: a hostile file can declare any
  // shape in a few bytes.
  for (const Graph *g : {&p.forward, &p.backward})
    for (const auto &n : g->nodes())
      for (const TensorType &t : n->types) {
        int64_t b = 0;
        if (__builtin_mul_overflow(t.numel(), itemSize(t.dtype), &b) || b > maxTensorBytes)
          nodeError(*n, "value of type " + t.str() + " is larger than --max-tensor-bytes=" +
                            std::to_string(maxTensorBytes) + " bytes");
      }
}

Program capture(const std::string &path, const CaptureOptions &opts, std::vector<Weight> *weights,
                InputFormat *format) {
  std::ifstream in(path, std::ios::binary);
  if (!in) userError("cannot open input file '" + path + "': " + std::strerror(errno));
  std::string bytes((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  if (in.bad()) userError("cannot read input file '" + path + "': " + std::strerror(errno));
  if (weights) weights->clear();

  Program p;
  InputFormat detected = detectFormat(bytes);
  if (format) *format = detected;
  switch (detected) {
  case InputFormat::Pt2Zip:
    p = readPt2(path, weights, opts.maxTensorBytes, opts.specialize, opts.maxSize);
    p.name = programNameFromPath(path);
    break;
  case InputFormat::ExportJson:
    p = readExportedProgram(bytes, path, opts.specialize, opts.maxSize);
    p.name = programNameFromPath(path);
    break;
  case InputFormat::FxText: {
    if (!opts.specialize.empty() || !opts.maxSize.empty())
      userError(SourceLoc{path}, std::string(opts.specialize.empty() ? "--max-size" : "--specialize") + " applies to a torch.export program (.pt2 or its JSON); this is FX "
                                 "graph code, whose sizes are static");
    bool isIR = bytes.find("# aotc:") != std::string::npos;
    p = parseProgram(bytes, path);
    if (p.stage != "capture")
      userError(SourceLoc{path}, "this is aotc IR after stage '" + p.stage +
                                     "'; read it with --start-from=" + p.stage);
    if (!isIR) p.name = programNameFromPath(path);
    break;
  }
  case InputFormat::Unknown:
    if (bytes.compare(0, 2, "PK") == 0)
      userError(SourceLoc{path}, "cannot read the .pt2 archive: corrupt zip header");
    userError(SourceLoc{path}, "unrecognized input format: expected a torch.export .pt2 archive, an "
                               "ExportedProgram JSON, or FX graph code (a 'def forward(self, ...):' line)");
  }
  p.origin = SourceLoc{path};
  p.stage = "capture";
  checkTensorBytes(p, opts.maxTensorBytes);
  applyRequiresGradFlags(p, opts);
  p.forward.verify();
  return p;
}

} // namespace aotc
