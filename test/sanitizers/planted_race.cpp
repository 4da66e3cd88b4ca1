//===- planted_race.cpp - The thread suite still sees races in parallel regions ---===//
//
// Built in the thread suite only (test/sanitizers/CMakeLists.txt), with -fopenmp against
// LLVM's libomp, as the generated kernels' parallel loops are:
//   planted_race race    every thread of an OpenMP parallel loop adds to one shared
//                        counter without synchronization: TSan must report a data race
//                        (the ctest expects the report), however test/sanitizers/tsan.supp
//                        and ignore_noninstrumented_modules treat libomp's own code;
//   planted_race clean   the same work with a reduction and a barrier-ordered read: no
//                        report (Archer tells TSan about libomp's synchronization).
//===----------------------------------------------------------------------===//
#include <cstdio>
#include <cstring>
#include <vector>

int main(int argc, char **argv) {
  bool race = argc > 1 && std::strcmp(argv[1], "race") == 0;
  const int n = 1 << 16;
  std::vector<double> v(n);
  for (int i = 0; i < n; ++i) v[i] = i % 7;
  double sum = 0;
  if (race) {
#pragma omp parallel for num_threads(2)
    for (int i = 0; i < n; ++i) sum += v[i]; // the planted race
  } else {
#pragma omp parallel for num_threads(2) reduction(+ : sum)
    for (int i = 0; i < n; ++i) sum += v[i];
    std::vector<double> w(n);
#pragma omp parallel num_threads(2)
    {
#pragma omp for
      for (int i = 0; i < n; ++i) w[i] = 2 * v[i];
      // implicit barrier: every w[i] is written before any thread reads its neighbour's
#pragma omp for
      for (int i = 0; i < n; ++i) v[i] = w[(i + 1) % n];
    }
  }
  std::printf("sum=%g\n", sum);
  return 0;
}
