// Throughput, ns per element, of the f32 kernels of impls.h and of aotc's compiled eval
// kernels (obj/<f>_<n>_v<l>.o, one op each). Each timing: a batch of calls lasting >= 20 ms,
// repeated 5 times; min and median printed. Run under `taskset -c 1`, OMP_NUM_THREADS=1.
//   bench [filter]   (filter: substring of "func impl", optional)
#include "impls.h"
#include <algorithm>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <string>
#include <time.h>
#include <vector>

struct aotc_context;
typedef int (*eval_t)(aotc_context *, const void *const *, void *const *, void *);
typedef aotc_context *(*create_t)(void);
#define OBJ(F, N, L)                                                   \
  extern "C" int F##_##N##_v##L##_eval(aotc_context *, const void *const *, void *const *, void *); \
  extern "C" aotc_context *F##_##N##_v##L##_context_create(void);
#define OBJS(F) OBJ(F, 1048576, 4) OBJ(F, 1048576, 3) OBJ(F, 16384, 4) OBJ(F, 16384, 3)
extern "C" void replica512_exp(const float *, float *, size_t);
extern "C" void replica512_log(const float *, float *, size_t);
extern "C" void replica512_sig(const float *, float *, size_t);
OBJS(exp) OBJS(log) OBJS(tanh) OBJS(erf) OBJS(sigmoid)

struct Obj { eval_t e; create_t c; aotc_context *ctx; };
#define O(F, N, L) Obj{F##_##N##_v##L##_eval, F##_##N##_v##L##_context_create, nullptr}

static double now() { timespec t; clock_gettime(CLOCK_MONOTONIC, &t); return t.tv_sec + 1e-9 * t.tv_nsec; }

static char scratch[4096] __attribute__((aligned(64)));

// One timing: ns per element of the best batch, 5 batches; returns min, median.
template <class F> static void timeit(F call, size_t n, double &mn, double &med) {
  call(); call();
  double t0 = now(); int reps = 0;
  while (now() - t0 < 0.005) { call(); ++reps; }
  int per = std::max(1, (int)(reps * 0.020 / (now() - t0)));
  std::vector<double> v;
  int nb = getenv("BATCHES") ? atoi(getenv("BATCHES")) : 5;
  for (int r = 0; r < nb; ++r) {
    double a = now();
    for (int i = 0; i < per; ++i) call();
    v.push_back((now() - a) / per / n * 1e9);
  }
  std::sort(v.begin(), v.end());
  mn = v[0]; med = v[nb / 2];
}

int main(int argc, char **argv) {
  const char *filt = argc > 1 ? argv[1] : "";
  struct K { const char *f; const char *name; kern_t k; Obj o1m, o16k; };
  Obj none{nullptr, nullptr, nullptr};
  std::vector<K> ks = {
      {"exp", "sleef avx512 u10", sleef512_exp_u10, none, none},
      {"exp", "sleef avx2 u10", sleef256_exp_u10, none, none},
      {"exp", "libmvec avx512", mvec512_exp, none, none},
      {"exp", "libmvec avx2", mvec256_exp, none, none},
      {"exp", "aotc replica (clang v4)", replica_exp, none, none},
      {"exp", "aotc replica (v4, 512-bit)", replica512_exp, none, none},
      {"exp", "aotc object v4", nullptr, O(exp, 1048576, 4), O(exp, 16384, 4)},
      {"exp", "aotc object v3", nullptr, O(exp, 1048576, 3), O(exp, 16384, 3)},
      {"exp", "glibc expf scalar", libm_exp, none, none},
      {"log", "sleef avx512 u10", sleef512_log_u10, none, none},
      {"log", "sleef avx2 u10", sleef256_log_u10, none, none},
      {"log", "sleef avx512 u35", sleef512_log_u35, none, none},
      {"log", "libmvec avx512", mvec512_log, none, none},
      {"log", "libmvec avx2", mvec256_log, none, none},
      {"log", "aotc replica (clang v4)", replica_log, none, none},
      {"log", "aotc replica (v4, 512-bit)", replica512_log, none, none},
      {"log", "aotc object v4", nullptr, O(log, 1048576, 4), O(log, 16384, 4)},
      {"log", "aotc object v3", nullptr, O(log, 1048576, 3), O(log, 16384, 3)},
      {"log", "glibc logf scalar", libm_log, none, none},
      {"tanh", "sleef avx512 u10", sleef512_tanh_u10, none, none},
      {"tanh", "sleef avx2 u10", sleef256_tanh_u10, none, none},
      {"tanh", "sleef avx512 u35", sleef512_tanh_u35, none, none},
      {"tanh", "libmvec avx512", mvec512_tanh, none, none},
      {"tanh", "libmvec avx2", mvec256_tanh, none, none},
      {"tanh", "aotc object v4 (MLIR)", nullptr, O(tanh, 1048576, 4), O(tanh, 16384, 4)},
      {"tanh", "aotc object v3 (MLIR)", nullptr, O(tanh, 1048576, 3), O(tanh, 16384, 3)},
      {"tanh", "glibc tanhf scalar", libm_tanh, none, none},
      {"erf", "sleef avx512 u10", sleef512_erf_u10, none, none},
      {"erf", "sleef avx2 u10", sleef256_erf_u10, none, none},
      {"erf", "libmvec avx512", mvec512_erf, none, none},
      {"erf", "libmvec avx2", mvec256_erf, none, none},
      {"erf", "aotc object v4 (MLIR)", nullptr, O(erf, 1048576, 4), O(erf, 16384, 4)},
      {"erf", "aotc object v3 (MLIR)", nullptr, O(erf, 1048576, 3), O(erf, 16384, 3)},
      {"erf", "glibc erff scalar", libm_erf, none, none},
      {"sigmoid", "sleef avx512 u10 exp", sleef512_sig_u10, none, none},
      {"sigmoid", "libmvec avx512 exp", mvec512_sig, none, none},
      {"sigmoid", "aotc replica (clang v4)", replica_sig, none, none},
      {"sigmoid", "aotc replica (v4, 512-bit)", replica512_sig, none, none},
      {"sigmoid", "aotc object v4", nullptr, O(sigmoid, 1048576, 4), O(sigmoid, 16384, 4)},
      {"sigmoid", "aotc object v3", nullptr, O(sigmoid, 1048576, 3), O(sigmoid, 16384, 3)},
      {"sigmoid", "glibc expf scalar", libm_sig, none, none},
  };
  const size_t NB = 1048576;
  float *x = (float *)aligned_alloc(64, NB * 4), *y = (float *)aligned_alloc(64, NB * 4);
  printf("%-8s %-24s %-7s | %21s | %21s\n", "func", "impl", "input", "n=1048576 min / med", "n=16384 min / med");
  srand(1);
  for (auto &k : ks) {
    std::string tag = std::string(k.f) + " " + k.name;
    if (!strstr(tag.c_str(), filt)) continue;
    bool isLog = !strcmp(k.f, "log");
    for (int masked = 0; masked < 2; ++masked) {
      if (masked && isLog) continue;
      for (size_t i = 0; i < NB; ++i) {
        double u = rand() / (double)RAND_MAX;
        x[i] = masked ? -3.4028235e38f : isLog ? (float)exp(-7 + 14 * u) : (float)(-10 + 20 * u);
      }
      double r[4];
      size_t sizes[2] = {NB, 16384};
      for (int s = 0; s < 2; ++s) {
        size_t n = sizes[s];
        if (k.k) {
          timeit([&] { k.k(x, y, n); }, n, r[2 * s], r[2 * s + 1]);
        } else {
          Obj &o = s ? k.o16k : k.o1m;
          if (!o.ctx) o.ctx = o.c();
          const void *in[1] = {x};
          void *out[1] = {y};
          timeit([&] { o.e(o.ctx, in, out, scratch); }, n, r[2 * s], r[2 * s + 1]);
        }
      }
      printf("%-8s %-24s %-7s | %9.3f / %9.3f | %9.3f / %9.3f\n", k.f, k.name, masked ? "-3.4e38" : isLog ? "e^U(-7,7)" : "U(-10,10)", r[0], r[1], r[2], r[3]);
      fflush(stdout);
    }
  }
}
