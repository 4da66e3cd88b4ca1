//===- Arena.cpp - Liveness-based planning of the scratch arena -----------===//
//
// This file implements planArena and planScratch (Kernels.h). Every scratch
// buffer is live from the first kernel that touches it to the last one
// (inclusive). Buffers are placed largest first (ties: earliest start, then
// index) at the lowest-waste gap among the already-placed buffers whose live
// ranges intersect (greedy best fit), with 64-byte aligned offsets. Two buffers
// with intersecting ranges therefore never overlap; buffers used by the same
// kernel always intersect.
//===----------------------------------------------------------------------===//
#include "aotc/Kernels.h"

#include "aotc/Diagnostics.h"

#include <algorithm>
#include <numeric>

namespace aotc {


std::vector<int64_t> planArena(const std::vector<std::pair<int, int>> &live,
                               const std::vector<int64_t> &sizes, int64_t &total,
                               int64_t alignment) {
  AOTC_ASSERT(live.size() == sizes.size(), "planArena: size mismatch");
  size_t n = sizes.size();
  std::vector<int64_t> off(n, -1);
  std::vector<size_t> order(n);
  std::iota(order.begin(), order.end(), 0);
  std::stable_sort(order.begin(), order.end(), [&](size_t a, size_t b) {
    if (sizes[a] != sizes[b]) return sizes[a] > sizes[b];
    return live[a].first < live[b].first;
  });
  std::vector<size_t> placed;
  total = 0;
  for (size_t i : order) {
    int64_t sz = alignUp(std::max<int64_t>(sizes[i], 1), alignment);
    // Occupied intervals among time-overlapping placed buffers, sorted by offset.
    std::vector<std::pair<int64_t, int64_t>> occ;
    for (size_t j : placed)
      if (live[j].first <= live[i].second && live[i].first <= live[j].second)
        occ.push_back({off[j], off[j] + alignUp(std::max<int64_t>(sizes[j], 1), alignment)});
    std::sort(occ.begin(), occ.end());
    int64_t best = -1, bestWaste = INT64_MAX, cursor = 0;
    for (auto &[s, e] : occ) {
      if (s > cursor && s - cursor >= sz && s - cursor - sz < bestWaste) {
        best = cursor;
        bestWaste = s - cursor - sz;
      }
      cursor = std::max(cursor, e);
    }
    if (best < 0) best = cursor; // after everything live at the same time
    off[i] = best;
    total = std::max(total, best + sz);
    placed.push_back(i);
  }
  return off;
}

bool Kernel::mayFail() const {
  for (auto &p : phases)
    for (auto &a : p.accesses)
      for (auto &d : a.dyn)
        if (a.buffer >= 0 && d.error >= 0) return true;
  return false;
}

bool Kernel::callMayFail() const {
  return kind == Kind::Extern && ((call.fn == ExternFn::Conv && call.conv.error >= 0) ||
                                  (call.fn == ExternFn::Fft && call.fft.error >= 0) ||
                                  (call.fn == ExternFn::Linalg && call.linalg.error >= 0));
}

void planScratch(KernelGraph &kg, int64_t redzone) {
  std::vector<int> ids;
  std::vector<std::pair<int, int>> live;
  std::vector<int64_t> sizes;
  std::vector<std::pair<int, int>> range(kg.buffers.size(), {-1, -1});
  // The status slot (the {code, value} pair at 0, abi.h error_value_offset 8) exists whenever
  // the graph has an error table, even if no kernel can fail any more (a bounds-checked access
  // on an empty tensor is removed): the descriptor promises it inside the arena.
  bool fail = !kg.errors.empty();
  for (size_t k = 0; k < kg.kernels.size(); ++k) {
    const Kernel &K = kg.kernels[k];
    fail = fail || K.mayFail() || K.callMayFail();
    auto touch = [&](int b) {
      if (range[b].first < 0) range[b].first = (int)k;
      range[b].second = (int)k;
    };
    for (int b : K.reads) touch(b);
    for (int b : K.writes) touch(b);
  }
  for (size_t b = 0; b < kg.buffers.size(); ++b) {
    if (kg.buffers[b].kind != BufferKind::Scratch) continue;
    if (range[b].first < 0) {
      kg.buffers[b].offset = -1; // unused
      continue;
    }
    ids.push_back((int)b);
    live.push_back(range[b]);
    sizes.push_back(kg.buffers[b].bytes() + redzone);
  }
  int64_t total = 0;
  auto off = planArena(live, sizes, total);
  int64_t base = fail ? 64 : 0;
  kg.statusOffset = fail ? 0 : -1;
  for (size_t i = 0; i < ids.size(); ++i) kg.buffers[ids[i]].offset = base + off[i];
  kg.scratchBytes = base + total;
}

} // namespace aotc
