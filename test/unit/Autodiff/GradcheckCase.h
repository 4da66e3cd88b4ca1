//===- GradcheckCase.h - One case of the built-in rules' gradcheck table -*- C++ -*-===//
#pragma once

#include "aotc/Autodiff.h"

#include <functional>
#include <map>
#include <string>
#include <vector>

namespace aotc::test {

struct Case {
  std::string target; ///< The rule this case exercises (must appear in the graph).
  std::string label;
  std::function<Program()> build;
  double lo = -1.0, hi = 1.0;
  std::vector<double> kinks; ///< Floating inputs are kept >= 0.05 away from these.
  std::map<std::string, std::pair<double, double>> ranges; ///< Per-placeholder ranges.
};

/// The linalg ops' cases (GradcheckLinalg.cpp).
std::vector<Case> linalgCases();

} // namespace aotc::test
