/* sgemm.c - OpenBLAS cblas_sgemm throughput, the GEMM ceiling of scripts/bench.sh.
 *
 *   sgemm M,K,N [M,K,N ...]
 * For each shape: C[M,N] = A[M,K] @ B[K,N] (row-major, no transposes, alpha 1,
 * beta 0). One untimed call, then calls until 0.3 s have passed (at least 5, at
 * most 200). Threads: OPENBLAS_NUM_THREADS (OpenBLAS reads it at load); the
 * value in effect is printed. Prints one JSON object:
 *   {"openblas_threads": T, "config": "...", "shapes": [{"m":..,"k":..,"n":..,
 *    "flops": 2*M*N*K, "times_s": [...], "gflops": [...]}, ...]}
 */
#include <cblas.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

extern int openblas_get_num_threads(void);
extern char *openblas_get_config(void);

static double now(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return ts.tv_sec + 1e-9 * ts.tv_nsec;
}

int main(int argc, char **argv) {
  if (argc < 2) {
    fprintf(stderr, "usage: sgemm M,K,N [M,K,N ...]\n");
    return 2;
  }
  printf("{\"openblas_threads\": %d, \"config\": \"%s\", \"shapes\": [", openblas_get_num_threads(),
         openblas_get_config());
  for (int s = 1; s < argc; ++s) {
    long m, k, n;
    if (sscanf(argv[s], "%ld,%ld,%ld", &m, &k, &n) != 3 || m <= 0 || k <= 0 || n <= 0) {
      fprintf(stderr, "sgemm: bad shape '%s' (want M,K,N)\n", argv[s]);
      return 2;
    }
    float *a = malloc(sizeof(float) * m * k), *b = malloc(sizeof(float) * k * n),
          *c = malloc(sizeof(float) * m * n);
    for (long i = 0; i < m * k; ++i)
      a[i] = (float)((i % 7) - 3) * 0.25f;
    for (long i = 0; i < k * n; ++i)
      b[i] = (float)((i % 5) - 2) * 0.5f;
    cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, m, n, k, 1.0f, a, k, b, n, 0.0f, c, n);
    double ts[200];
    int cnt = 0;
    double start = now();
    while (cnt < 200 && (cnt < 5 || now() - start < 0.3)) {
      double t0 = now();
      cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, m, n, k, 1.0f, a, k, b, n, 0.0f, c,
                  n);
      ts[cnt++] = now() - t0;
    }
    double flops = 2.0 * m * n * k;
    printf("%s{\"m\": %ld, \"k\": %ld, \"n\": %ld, \"flops\": %.0f, \"times_s\": [", s > 1 ? ", " : "",
           m, k, n, flops);
    for (int i = 0; i < cnt; ++i)
      printf("%s%.7f", i ? ", " : "", ts[i]);
    printf("], \"gflops\": [");
    for (int i = 0; i < cnt; ++i)
      printf("%s%.3f", i ? ", " : "", flops / ts[i] / 1e9);
    printf("]}");
    free(a);
    free(b);
    free(c);
  }
  printf("]}\n");
  return 0;
}
