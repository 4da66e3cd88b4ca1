// Helpers shared by the Capture unit tests.
#pragma once

#include "aotc/Diagnostics.h"
#include "aotc/Graph.h"

#include <catch2/catch.hpp>

#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <functional>
#include <iterator>
#include <map>
#include <set>
#include <string>

#include <unistd.h>

namespace aotc::test {

inline std::string srcPath(const std::string &rel) { return std::string(AOTC_SRC_ROOT) + "/" + rel; }

inline std::string readFile(const std::string &path) {
  std::ifstream in(path, std::ios::binary);
  REQUIRE(in.good());
  return std::string((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
}

/// A per-process scratch path (ctest runs test cases of several build trees in parallel),
/// removed when the test program exits.
inline std::string tempPath(const std::string &name) {
  struct Removal {
    std::set<std::string> paths;
    ~Removal() {
      for (const auto &p : paths) std::remove(p.c_str());
    }
  };
  static Removal removal;
  std::string path = "/tmp/aotc_capture_test_" + std::to_string(::getpid()) + "_" + name;
  removal.paths.insert(path);
  return path;
}

inline void writeFile(const std::string &path, const std::string &bytes) {
  std::ofstream out(path, std::ios::binary);
  out << bytes;
  REQUIRE(out.good());
}

/// Runs `f`, which must throw a *user* error; returns its message.
inline std::string userErrorOf(const std::function<void()> &f) {
  try {
    f();
  } catch (const Error &e) {
    if (std::getenv("AOTC_TEST_SHOW_ERRORS")) std::fprintf(stderr, "[user error] %s\n", e.what());
    REQUIRE(e.kind() == Error::Kind::User);
    return e.what();
  }
  FAIL("expected a user error, nothing was thrown");
  return "";
}

/// Number of call nodes per target.
inline std::map<std::string, int> opCounts(const Graph &g) {
  std::map<std::string, int> m;
  for (const auto &n : g.nodes())
    if (n->isCall()) ++m[n->target];
  return m;
}

inline bool contains(const std::string &hay, const std::string &needle) {
  return hay.find(needle) != std::string::npos;
}

} // namespace aotc::test
