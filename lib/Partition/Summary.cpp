//===- Summary.cpp - The --emit=partition summary -----------------------------===//
//
// Saved tensors (name, type, bytes), their total, and the recomputed ops of a
// partitioned Program. Everything is derived from the Program itself, so the
// summary of a re-parsed partition (--start-from=partition) is the same.
//===----------------------------------------------------------------------===//
#include "aotc/Partition.h"

#include "aotc/Diagnostics.h"


namespace aotc {

namespace {
const Node *savedNode(const Program &p, const std::string &name) {
  const Node *n = p.forward.find(name);
  if (!n) internalError("partition summary: saved tensor '" + name + "' is not a forward node");
  return n;
}
} // namespace

int64_t savedBytes(const Program &p) {
  int64_t total = 0;
  for (const std::string &s : p.saved) total += savedNode(p, s)->type().bytes();
  return total;
}

std::vector<const Node *> recomputedNodes(const Program &p) {
  // PyTorch's debug count of rematerialized nodes: fw call nodes & bw call nodes
  // (by name; the partitioners keep the joint graph's names).
  std::vector<const Node *> r;
  for (auto &up : p.backward.nodes()) {
    const Node *n = up.get();
    if (!n->isCall()) continue;
    const Node *f = p.forward.find(n->name);
    if (f && f->isCall()) r.push_back(n);
  }
  return r;
}

int64_t savedSlotBytes(int64_t bytes) {
  int64_t b = std::max<int64_t>(bytes, 1);
  return (b + kSavedTensorAlignment - 1) / kSavedTensorAlignment * kSavedTensorAlignment;
}

int64_t savedAreaBytes(const Program &p) {
  int64_t total = 0;
  for (const std::string &name : p.saved) total += savedSlotBytes(savedNode(p, name)->type().bytes());
  return total;
}

std::string partitionSummary(const Program &p) {
  std::string s = "# partition summary (docs/cli.md \"Reading --emit output\")\n";
  int64_t bytes = savedBytes(p), area = savedAreaBytes(p);
  s += "# saved: " + std::to_string(p.saved.size()) + " tensors, " + std::to_string(bytes) + " bytes";
  if (area != bytes)
    s += " (the header's saved area: " + std::to_string(area) + " bytes, each tensor padded to a multiple of " +
         std::to_string(kSavedTensorAlignment) + ")";
  s += "\n";
  if (std::string syms = p.dynamicSymbols(); !syms.empty()) {
    // The min-cut weighed every tensor at the largest sizes (TensorType::shape holds them), and
    // the saved area is planned at them; the backward reads the sizes from the primals it gets
    // again, so no size is saved (docs/dynamic-shapes.md, step 2e).
    s += "# run-time sizes (" + syms + "): bytes at the largest sizes,";
    for (const Program::SpecializedSize &z : p.specializedSizes)
      if (z.dynamic) s += " " + z.symbol + "=" + std::to_string(z.value);
    s += "; the backward reads them from its primals\n";
  }
  for (const std::string &name : p.saved) {
    const TensorType &t = savedNode(p, name)->type();
    s += "#   " + name + ": " + t.str() + " (" + std::to_string(t.bytes()) + " bytes)\n";
  }
  std::vector<const Node *> rec = recomputedNodes(p);
  s += "# recomputed: " + std::to_string(rec.size()) + " ops\n";
  for (const Node *n : rec) s += "#   " + n->name + " = " + n->target + "\n";
  return s;
}

} // namespace aotc
