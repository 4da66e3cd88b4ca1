//===- MaxFlowTest.cpp - Dinic's max flow vs brute-force minimum cuts -------===//
#include "aotc/Diagnostics.h"
#include "aotc/MaxFlow.h"

#include <catch2/catch.hpp>

#include <random>

using namespace aotc;

namespace {

struct E {
  int u, v;
  int64_t cap;
};

/// Exact minimum s-t cut by enumerating all 2^(n-2) source sides; also returns
/// the intersection of the source sides of all minimum cuts (the canonical one).
struct Brute {
  __int128 best = -1;
  uint32_t canonical = 0;
};
Brute bruteMinCut(int n, const std::vector<E> &edges, int s, int t) {
  Brute b;
  uint32_t all = ~0u;
  for (uint32_t m = 0; m < (1u << n); ++m) {
    if (!(m >> s & 1) || (m >> t & 1)) continue;
    __int128 c = 0;
    for (const E &e : edges)
      if ((m >> e.u & 1) && !(m >> e.v & 1)) c += e.cap;
    if (b.best < 0 || c < b.best) {
      b.best = c;
      all = m;
    } else if (c == b.best) {
      all &= m;
    }
  }
  b.canonical = all;
  return b;
}

std::vector<E> randomGraph(std::mt19937_64 &rng, int n, bool withInf) {
  std::vector<E> edges;
  std::uniform_real_distribution<double> coin(0, 1);
  double density = 0.15 + 0.5 * coin(rng);
  std::uniform_int_distribution<int64_t> capDist(0, coin(rng) < 0.5 ? 10 : 1000000);
  for (int u = 0; u < n; ++u)
    for (int v = 0; v < n; ++v) {
      if (u == v || coin(rng) > density) continue;
      int64_t c = capDist(rng);
      if (withInf && coin(rng) < 0.25) c = MaxFlow::kInf;
      edges.push_back({u, v, c});
      if (coin(rng) < 0.05) edges.push_back({u, v, capDist(rng)}); // parallel edge
    }
  return edges;
}

bool hasInfPath(int n, const std::vector<E> &edges, int s, int t) {
  std::vector<bool> seen(n);
  seen[s] = true;
  for (bool changed = true; changed;) {
    changed = false;
    for (const E &e : edges)
      if (e.cap == MaxFlow::kInf && seen[e.u] && !seen[e.v]) seen[e.v] = changed = true;
  }
  return seen[t];
}

void checkOne(int n, const std::vector<E> &edges, int s, int t) {
  MaxFlow mf(n);
  for (const E &e : edges) mf.addEdge(e.u, e.v, e.cap);
  int64_t f = mf.solve(s, t);
  Brute b = bruteMinCut(n, edges, s, t);
  REQUIRE((__int128)f == b.best);

  // Flow is feasible: capacity constraints and conservation.
  std::vector<int64_t> net(n, 0);
  for (int e = 0; e < mf.numEdges(); ++e) {
    REQUIRE(mf.flow(e) >= 0);
    REQUIRE(mf.flow(e) <= mf.capacity(e));
    net[mf.edgeFrom(e)] -= mf.flow(e);
    net[mf.edgeTo(e)] += mf.flow(e);
  }
  for (int v = 0; v < n; ++v)
    if (v != s && v != t) REQUIRE(net[v] == 0);
  REQUIRE(net[t] == f);

  // The reported cut: its edges' capacities sum to the flow, and its source
  // side is the canonical (smallest) one.
  int64_t cutSum = 0;
  for (int e : mf.cutEdges()) cutSum += mf.capacity(e);
  REQUIRE(cutSum == f);
  uint32_t side = 0;
  for (int v = 0; v < n; ++v)
    if (mf.sourceSide()[v]) side |= 1u << v;
  REQUIRE(side == b.canonical);
}

} // namespace

TEST_CASE("MaxFlow: exact min-cut value vs brute force on random graphs", "[maxflow]") {
  std::mt19937_64 rng(12345);
  int checked = 0, withInf = 0;
  for (int iter = 0; iter < 600; ++iter) {
    int n = 2 + (int)(rng() % 9); // 2..10 nodes
    bool inf = iter % 3 == 0;
    std::vector<E> edges = randomGraph(rng, n, inf);
    int s = (int)(rng() % n), t = (int)(rng() % n);
    if (s == t) t = (s + 1) % n;
    if (hasInfPath(n, edges, s, t)) continue;
    INFO("iteration " << iter << " n=" << n << " edges=" << edges.size());
    checkOne(n, edges, s, t);
    ++checked;
    withInf += inf;
  }
  CHECK(checked >= 500);
  CHECK(withInf >= 100);
}

TEST_CASE("MaxFlow: hand-computed networks", "[maxflow]") {
  // CLRS Figure 26.1: max flow 23.
  MaxFlow g(6);
  g.addEdge(0, 1, 16);
  g.addEdge(0, 2, 13);
  g.addEdge(2, 1, 4);
  g.addEdge(1, 3, 12);
  g.addEdge(3, 2, 9);
  g.addEdge(2, 4, 14);
  g.addEdge(4, 3, 7);
  g.addEdge(3, 5, 20);
  g.addEdge(4, 5, 4);
  CHECK(g.solve(0, 5) == 23);
  // Minimum cut {s, v1, v2, v4} | {v3, t}: 12 + 7 + 4 = 23.
  CHECK(g.sourceSide() == std::vector<bool>{true, true, true, false, true, false});

  // Two equal cuts in series: the canonical cut is the one nearest the source.
  MaxFlow h(3);
  int e0 = h.addEdge(0, 1, 5);
  h.addEdge(1, 2, 5);
  CHECK(h.solve(0, 2) == 5);
  CHECK(h.cutEdges() == std::vector<int>{e0});

  // Infinite edges that are not on an all-infinite path are fine.
  MaxFlow k(4);
  k.addEdge(0, 1, MaxFlow::kInf);
  k.addEdge(1, 2, 7);
  k.addEdge(2, 3, MaxFlow::kInf);
  k.addEdge(0, 3, 1);
  CHECK(k.solve(0, 3) == 8);
  CHECK(k.sourceSide() == std::vector<bool>{true, true, false, false});
}

TEST_CASE("MaxFlow: an all-infinite source->sink path is an internal error", "[maxflow]") {
  MaxFlow g(4);
  g.addEdge(0, 1, MaxFlow::kInf);
  g.addEdge(1, 2, MaxFlow::kInf);
  g.addEdge(2, 3, MaxFlow::kInf);
  g.addEdge(0, 3, 3);
  try {
    g.solve(0, 3);
    FAIL("expected an internal error");
  } catch (const Error &e) {
    CHECK(e.kind() == Error::Kind::Internal);
    CHECK(std::string(e.what()).find("infinite") != std::string::npos);
  }
}

TEST_CASE("MaxFlow: capacity overflow guard and bad arguments", "[maxflow]") {
  MaxFlow g(2);
  g.addEdge(0, 1, MaxFlow::kInf - 1);
  try {
    g.addEdge(0, 1, 1); // finite sum would reach kInf
    FAIL("expected an internal error");
  } catch (const Error &e) {
    CHECK(e.kind() == Error::Kind::Internal);
    CHECK(std::string(e.what()).find("overflow") != std::string::npos);
  }
  MaxFlow h(2);
  CHECK_THROWS_AS(h.addEdge(0, 1, -1), Error);
  CHECK_THROWS_AS(h.addEdge(0, 1, MaxFlow::kInf + 1), Error);
  CHECK_THROWS_AS(h.addEdge(0, 2, 1), Error);
  CHECK_THROWS_AS(h.solve(1, 1), Error);
}

TEST_CASE("MaxFlow: a long chain does not recurse", "[maxflow]") {
  const int n = 200000;
  MaxFlow g(n);
  for (int i = 0; i + 1 < n; ++i) g.addEdge(i, i + 1, 1000 + (i % 7 == 3 ? -990 : 0) + i % 3);
  // The minimum capacity on the chain is 1000 - 990 + 0 = 10, first at i = 3 (i%7==3, i%3==0).
  CHECK(g.solve(0, n - 1) == 10);
  auto cut = g.cutEdges();
  REQUIRE(cut.size() == 1);
  CHECK(g.capacity(cut[0]) == 10);
  CHECK(g.edgeFrom(cut[0]) == 3); // canonical cut: the saturated edge nearest the source
}
