/*===- conv_bench.c - libaotc_kernels' convolutions: im2col vs oneDNN (not a test) -===*
 *
 *   bench_conv [N C H W K KH KW STRIDE PAD] [--reps R]     (default: 4 64 32 32 64 3 3 1 1, R 20)
 *   bench_conv --sweep     hashes of oneDNN's f32 results over a list of geometries and roles
 *
 * Times one convolution's forward, input gradient and weight gradient in f32 through the
 * im2col + cblas_sgemm path (aotc_conv_im2col, OpenBLAS pinned to one thread as the runtime
 * pins it) and through oneDNN (aotc_conv with a state: the primitive is made by a warm-up
 * call, outside the timing), and the f64 im2col path aotc_conv takes for f64. Threads:
 * OMP_NUM_THREADS. Prints the best and median of R calls, GFLOP/s (2*N*K*OH*OW*C/G*KH*KW
 * multiply-adds), and an FNV-1a hash of each result's bytes, so that runs with
 * OMP_NUM_THREADS=1 and 2 show whether the bits depend on the thread count; --sweep prints
 * only such hashes, for many geometries (diff the output of two thread counts).
 *===----------------------------------------------------------------------===*/
#define _POSIX_C_SOURCE 200112L
#include "aotc/abi.h"
#include "aotc/kernels.h"

#include <omp.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

void openblas_set_num_threads(int) __attribute__((weak));

static double now(void) {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return t.tv_sec + 1e-9 * t.tv_nsec;
}

static uint64_t fnv(const void *p, size_t n) {
  const unsigned char *b = p;
  uint64_t h = 1469598103934665603ull;
  for (size_t i = 0; i < n; ++i) h = (h ^ b[i]) * 1099511628211ull;
  return h;
}

static int cmpd(const void *a, const void *b) {
  double x = *(const double *)a, y = *(const double *)b;
  return x < y ? -1 : x > y;
}

static void *alloc(size_t bytes) {
  void *p = NULL;
  if (posix_memalign(&p, 64, bytes ? bytes : 64)) {
    fprintf(stderr, "out of memory\n");
    exit(1);
  }
  memset(p, 0, bytes);
  return p;
}

/* --sweep: one line per geometry and role, "<geometry> <role> <hash>" of oneDNN's result. */
static int sweep(void) {
  static const int64_t g[][14] = {
      /* n  c   k  groups h  w   kh kw sh sw ph pw dh dw */
      {1, 3, 8, 1, 31, 29, 3, 3, 1, 1, 1, 1, 1, 1},   {2, 16, 16, 1, 15, 15, 3, 3, 2, 2, 1, 1, 1, 1},
      {4, 64, 64, 1, 32, 32, 3, 3, 1, 1, 1, 1, 1, 1}, {1, 64, 64, 1, 32, 32, 3, 3, 1, 1, 1, 1, 1, 1},
      {3, 32, 64, 1, 16, 16, 1, 1, 1, 1, 0, 0, 1, 1}, {3, 32, 64, 1, 16, 16, 1, 1, 2, 2, 0, 0, 1, 1},
      {2, 32, 32, 32, 16, 16, 3, 3, 1, 1, 1, 1, 1, 1}, {2, 16, 32, 4, 14, 13, 3, 3, 2, 2, 2, 2, 2, 2},
      {5, 8, 12, 1, 1, 97, 1, 5, 1, 2, 0, 2, 1, 1},   {7, 3, 16, 1, 28, 28, 5, 5, 1, 1, 2, 2, 1, 1},
      {8, 128, 128, 1, 8, 8, 3, 3, 1, 1, 1, 1, 1, 1}, {1, 256, 512, 1, 4, 4, 3, 3, 2, 2, 1, 1, 1, 1},
  };
  aotc_kernels_state *s = aotc_kernels_state_create();
  for (size_t i = 0; i < sizeof g / sizeof g[0]; ++i) {
    const int64_t *v = g[i];
    aotc_conv_desc d = {AOTC_F32, 0, v[0], v[1], v[2], v[3], v[4], v[5], 0, 0, v[6], v[7], v[8], v[9], v[10], v[11], v[12], v[13]};
    d.oh = (d.h + 2 * d.pad_h - d.dil_h * (d.kh - 1) - 1) / d.stride_h + 1;
    d.ow = (d.w + 2 * d.pad_w - d.dil_w * (d.kw - 1) - 1) / d.stride_w + 1;
    int64_t nx = d.n * d.c * d.h * d.w, nw = d.k * d.c / d.groups * d.kh * d.kw, ny = d.n * d.k * d.oh * d.ow;
    for (int role = 0; role < 3; ++role) {
      d.role = role;
      int64_t na = role == 0 ? nx : ny, nb = role == 2 ? nx : nw, nc = role == 0 ? ny : role == 1 ? nx : nw;
      float *a = alloc(4 * (size_t)na), *b = alloc(4 * (size_t)nb), *c = alloc(4 * (size_t)nc);
      for (int64_t j = 0; j < na; ++j) a[j] = (float)((j * 7919) % 23 - 11) / 11;
      for (int64_t j = 0; j < nb; ++j) b[j] = (float)((j * 104729) % 19 - 9) / 9;
      int rc = aotc_conv(s, &d, a, b, c, NULL);
      printf("n=%lld c=%lld k=%lld g=%lld %lldx%lld k%lldx%lld s%lld p%lld d%lld role %d: %s %016llx\n",
             (long long)d.n, (long long)d.c, (long long)d.k, (long long)d.groups, (long long)d.h, (long long)d.w,
             (long long)d.kh, (long long)d.kw, (long long)d.stride_h, (long long)d.pad_h, (long long)d.dil_h, role,
             rc ? "FAILED" : "hash", (unsigned long long)fnv(c, 4 * (size_t)nc));
      free(a), free(b), free(c);
    }
  }
  aotc_kernels_state_destroy(s);
  return 0;
}

int main(int argc, char **argv) {
  if (argc == 2 && !strcmp(argv[1], "--sweep")) return sweep();
  int64_t v[9] = {4, 64, 32, 32, 64, 3, 3, 1, 1};
  int reps = 20, nv = 0;
  for (int i = 1; i < argc; ++i) {
    if (!strcmp(argv[i], "--reps") && i + 1 < argc) reps = atoi(argv[++i]);
    else if (nv < 9) v[nv++] = atoll(argv[i]);
  }
  if (reps < 1 || reps > 10000 || (nv != 0 && nv != 9)) {
    fprintf(stderr, "usage: bench_conv [N C H W K KH KW STRIDE PAD] [--reps R]\n");
    return 2;
  }
  if (openblas_set_num_threads) openblas_set_num_threads(1);
  aotc_conv_desc d = {AOTC_F32, 0, v[0], v[1], v[4], 1, v[2], v[3], 0, 0, v[5], v[6], v[7], v[7], v[8], v[8], 1, 1};
  d.oh = (d.h + 2 * d.pad_h - (d.kh - 1) - 1) / d.stride_h + 1;
  d.ow = (d.w + 2 * d.pad_w - (d.kw - 1) - 1) / d.stride_w + 1;
  char msg[256];
  if (aotc_conv_check(&d, msg, sizeof msg)) {
    fprintf(stderr, "bad geometry: %s\n", msg);
    return 2;
  }
  const int64_t nx = d.n * d.c * d.h * d.w, nw = d.k * d.c * d.kh * d.kw, ny = d.n * d.k * d.oh * d.ow;
  const double flops = 2.0 * (double)ny * (double)(d.c * d.kh * d.kw);
  printf("conv n=%lld c=%lld %lldx%lld k=%lld %lldx%lld stride %lld pad %lld -> %lldx%lld; OMP_NUM_THREADS=%d; "
         "%d reps; %.3f GFLOP per call\n",
         (long long)d.n, (long long)d.c, (long long)d.h, (long long)d.w, (long long)d.k, (long long)d.kh,
         (long long)d.kw, (long long)d.stride_h, (long long)d.pad_h, (long long)d.oh, (long long)d.ow,
         omp_get_max_threads(), reps, flops * 1e-9);
  aotc_kernels_state *s = aotc_kernels_state_create();
  double *t = malloc(sizeof(double) * (size_t)reps);
  for (int role = 0; role < 3; ++role) {
    aotc_conv_desc r = d;
    r.role = role;
    int64_t na = role == AOTC_CONV_FORWARD ? nx : ny, nb = role == AOTC_CONV_WEIGHT_GRAD ? nx : nw;
    int64_t nc = role == AOTC_CONV_FORWARD ? ny : role == AOTC_CONV_INPUT_GRAD ? nx : nw;
    static const char *names[] = {"forward", "input_grad", "weight_grad"};
    for (int path = 0; path < 3; ++path) { /* 0 im2col f32, 1 oneDNN f32, 2 im2col f64 */
      size_t es = path == 2 ? 8 : 4;
      r.dtype = path == 2 ? AOTC_F64 : AOTC_F32;
      void *a = alloc(es * na), *b = alloc(es * nb), *c = alloc(es * nc);
      int64_t nws = aotc_conv_im2col_workspace_elems(&r);
      void *ws = alloc(es * (size_t)nws);
      for (int64_t i = 0; i < na; ++i)
        if (path == 2) ((double *)a)[i] = (double)((i * 7919) % 23 - 11) / 11;
        else ((float *)a)[i] = (float)((i * 7919) % 23 - 11) / 11;
      for (int64_t i = 0; i < nb; ++i)
        if (path == 2) ((double *)b)[i] = (double)((i * 104729) % 19 - 9) / 9;
        else ((float *)b)[i] = (float)((i * 104729) % 19 - 9) / 9;
      int rc = 0;
      for (int k = -1; k < reps && !rc; ++k) { /* k = -1: warm-up (oneDNN makes its primitive) */
        double t0 = now();
        rc = path == 1 ? aotc_conv(s, &r, a, b, c, NULL) : aotc_conv_im2col(&r, a, b, c, ws);
        if (k >= 0) t[k] = now() - t0;
      }
      if (rc) {
        fprintf(stderr, "%s failed: %d %s\n", names[role], rc, aotc_kernels_state_error(s) ? aotc_kernels_state_error(s) : "");
        return 1;
      }
      qsort(t, (size_t)reps, sizeof *t, cmpd);
      printf("  %-11s %-12s best %8.3f ms  median %8.3f ms  %6.1f GFLOP/s  hash %016llx\n", names[role],
             path == 0 ? "im2col f32" : path == 1 ? "oneDNN f32" : "im2col f64", t[0] * 1e3, t[reps / 2] * 1e3,
             flops / t[0] * 1e-9, (unsigned long long)fnv(c, es * (size_t)nc));
      free(a), free(b), free(c), free(ws);
    }
  }
  aotc_kernels_stats st;
  aotc_kernels_state_stats(s, &st);
  printf("  oneDNN primitives %lld, cache hits %lld, scratchpad %lld bytes\n", (long long)st.primitives,
         (long long)st.cache_hits, (long long)st.scratchpad_bytes);
  aotc_kernels_state_destroy(s);
  free(t);
  return 0;
}
