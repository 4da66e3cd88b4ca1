//===- MaxFlow.cpp - Dinic's maximum flow on int64 capacities ---------------===//
//
// See include/aotc/MaxFlow.h for the algorithm, the infinity sentinel and the
// overflow argument.
//===----------------------------------------------------------------------===//
#include "aotc/MaxFlow.h"
#include "aotc/Diagnostics.h"

#include <algorithm>
#include <deque>
#include <string>

namespace aotc {

MaxFlow::MaxFlow(int numNodes) {
  AOTC_ASSERT(numNodes >= 0, "MaxFlow: negative node count");
  adj_.resize(numNodes);
}

int MaxFlow::addNode() {
  AOTC_ASSERT(!solved_, "MaxFlow: addNode after solve");
  adj_.emplace_back();
  return (int)adj_.size() - 1;
}

void MaxFlow::checkNode(int u, const char *what) const {
  if (u < 0 || u >= numNodes())
    internalError(std::string("MaxFlow: ") + what + " " + std::to_string(u) + " is not a node (" +
                  std::to_string(numNodes()) + " nodes)");
}

int MaxFlow::addEdge(int u, int v, int64_t cap) {
  AOTC_ASSERT(!solved_, "MaxFlow: addEdge after solve");
  checkNode(u, "edge tail");
  checkNode(v, "edge head");
  if (cap < 0 || cap > kInf)
    internalError("MaxFlow: capacity " + std::to_string(cap) + " of edge " + std::to_string(u) +
                  "->" + std::to_string(v) + " is outside [0, kInf]");
  if (cap < kInf) {
    int64_t sum;
    if (__builtin_add_overflow(finiteSum_, cap, &sum) || sum >= kInf)
      internalError("MaxFlow: the finite capacities sum to 2^62 or more (overflow guard); "
                    "the network is too large for int64 capacities");
    finiteSum_ = sum;
  }
  int e = (int)from_.size();
  from_.push_back(u);
  cap_.push_back(cap);
  to_.push_back(v);
  residual_.push_back(cap);
  to_.push_back(u);
  residual_.push_back(0);
  adj_[u].push_back(2 * e);
  adj_[v].push_back(2 * e + 1);
  return e;
}

bool MaxFlow::buildLevels(int s, int t) {
  level_.assign(numNodes(), -1);
  std::deque<int> q{s};
  level_[s] = 0;
  while (!q.empty()) {
    int u = q.front();
    q.pop_front();
    for (int a : adj_[u]) {
      int v = to_[a];
      if (residual_[a] > 0 && level_[v] < 0) {
        level_[v] = level_[u] + 1;
        q.push_back(v);
      }
    }
  }
  return level_[t] >= 0;
}

int64_t MaxFlow::solve(int s, int t) {
  AOTC_ASSERT(!solved_, "MaxFlow: solve called twice");
  checkNode(s, "source");
  checkNode(t, "sink");
  AOTC_ASSERT(s != t, "MaxFlow: source and sink are the same node");

  // An s->t path of infinite edges only makes the flow unbounded.
  {
    std::vector<bool> seen(numNodes(), false);
    std::vector<int> stack{s};
    seen[s] = true;
    while (!stack.empty()) {
      int u = stack.back();
      stack.pop_back();
      for (int a : adj_[u]) {
        if ((a & 1) || cap_[a / 2] != kInf) continue;
        int v = to_[a];
        if (!seen[v]) {
          seen[v] = true;
          stack.push_back(v);
        }
      }
    }
    if (seen[t])
      internalError("min-cut: a source->sink path made only of infinite-capacity edges (no finite "
                    "cut exists); the flow network is malformed");
  }

  int64_t total = 0;
  std::vector<size_t> cur(numNodes());
  std::vector<int> path; // arcs from s to the current node
  while (buildLevels(s, t)) {
    std::fill(cur.begin(), cur.end(), 0);
    for (;;) {
      // Find one augmenting path in the level graph with current-arc pointers.
      path.clear();
      int u = s;
      while (u != t) {
        bool advanced = false;
        for (; cur[u] < adj_[u].size(); ++cur[u]) {
          int a = adj_[u][cur[u]];
          int v = to_[a];
          if (residual_[a] > 0 && level_[v] == level_[u] + 1) {
            path.push_back(a);
            u = v;
            advanced = true;
            break;
          }
        }
        if (advanced) continue;
        // Dead end: remove u from the level graph and retreat.
        level_[u] = -1;
        if (path.empty()) break;
        int a = path.back();
        path.pop_back();
        u = to_[a ^ 1];
        ++cur[u];
      }
      if (u != t) break; // no more paths in this level graph
      int64_t f = kInf;
      for (int a : path) f = std::min(f, residual_[a]);
      for (int a : path) {
        residual_[a] -= f;
        residual_[a ^ 1] += f;
      }
      total += f; // total < kInf before, f <= kInf: no overflow
      AOTC_ASSERT(total < kInf, "MaxFlow: flow reached the infinity sentinel");
    }
  }

  // Canonical minimum cut: nodes reachable from s in the residual graph.
  sourceSide_.assign(numNodes(), false);
  std::vector<int> stack{s};
  sourceSide_[s] = true;
  while (!stack.empty()) {
    int x = stack.back();
    stack.pop_back();
    for (int a : adj_[x]) {
      int v = to_[a];
      if (residual_[a] > 0 && !sourceSide_[v]) {
        sourceSide_[v] = true;
        stack.push_back(v);
      }
    }
  }
  AOTC_ASSERT(!sourceSide_[t], "MaxFlow: sink reachable after max flow");
  solved_ = true;
  return total;
}

const std::vector<bool> &MaxFlow::sourceSide() const {
  AOTC_ASSERT(solved_, "MaxFlow: sourceSide before solve");
  return sourceSide_;
}

std::vector<int> MaxFlow::cutEdges() const {
  AOTC_ASSERT(solved_, "MaxFlow: cutEdges before solve");
  std::vector<int> r;
  for (int e = 0; e < numEdges(); ++e)
    if (sourceSide_[from_[e]] && !sourceSide_[to_[2 * e]]) r.push_back(e);
  return r;
}

int64_t MaxFlow::flow(int e) const {
  AOTC_ASSERT(solved_, "MaxFlow: flow before solve");
  AOTC_ASSERT(e >= 0 && e < numEdges(), "MaxFlow: unknown edge");
  return residual_[2 * e + 1];
}

} // namespace aotc
