//===- ArenaTest.cpp - Liveness-based scratch arena planning --------------===//
#include "aotc/Kernels.h"

#include <catch2/catch.hpp>

#include <random>

using namespace aotc;

TEST_CASE("arena: a chain of 4 equal intermediates needs at most 2 slots", "[arena]") {
  // a -> b -> c -> d: each buffer is live from its producer to its consumer.
  std::vector<std::pair<int, int>> live = {{0, 1}, {1, 2}, {2, 3}, {3, 4}};
  std::vector<int64_t> sizes(4, 1000);
  int64_t total = 0;
  auto off = planArena(live, sizes, total);
  CHECK(total <= 2 * 1024);
  CHECK(off[0] != off[1]);
  CHECK(off[1] != off[2]);
  CHECK(off[2] != off[3]);
  for (auto o : off) CHECK(o % 64 == 0);
}

TEST_CASE("arena: no two simultaneously live buffers overlap (random)", "[arena]") {
  std::mt19937_64 rng(42);
  for (int trial = 0; trial < 300; ++trial) {
    int n = 1 + (int)(rng() % 12);
    std::vector<std::pair<int, int>> live;
    std::vector<int64_t> sizes;
    for (int i = 0; i < n; ++i) {
      int a = (int)(rng() % 10), b = a + (int)(rng() % 5);
      live.push_back({a, b});
      sizes.push_back(1 + (int64_t)(rng() % 5000));
    }
    int64_t total = 0;
    auto off = planArena(live, sizes, total);
    int64_t sum = 0;
    for (int i = 0; i < n; ++i) {
      REQUIRE(off[i] % 64 == 0);
      REQUIRE(off[i] + sizes[i] <= total);
      sum += (sizes[i] + 63) / 64 * 64;
      for (int j = i + 1; j < n; ++j) {
        bool timeOverlap = live[i].first <= live[j].second && live[j].first <= live[i].second;
        bool memOverlap = off[i] < off[j] + sizes[j] && off[j] < off[i] + sizes[i];
        INFO("trial " << trial << " buffers " << i << "," << j);
        REQUIRE(!(timeOverlap && memOverlap));
      }
    }
    CHECK(total <= sum); // never worse than no reuse
  }
}

TEST_CASE("arena: disjoint lifetimes share memory", "[arena]") {
  std::vector<std::pair<int, int>> live = {{0, 0}, {1, 1}, {2, 2}};
  std::vector<int64_t> sizes = {4096, 4096, 4096};
  int64_t total = 0;
  auto off = planArena(live, sizes, total);
  CHECK(total == 4096);
  CHECK(off == std::vector<int64_t>{0, 0, 0});
}
