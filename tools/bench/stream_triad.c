/* stream_triad.c - the STREAM triad a[i] = b[i] + s * c[i] (McCalpin's STREAM,
 * https://www.cs.virginia.edu/stream/ref.html, kernel "Triad") on float arrays,
 * the memory-bandwidth ceiling of scripts/bench.sh.
 *
 *   stream_triad [N] [ITERS]      defaults: N = 4096*8192 floats (128 MiB per array,
 *                                 the shape of the FX pointwise probe), ITERS = 10
 * Threads: OpenMP (OMP_NUM_THREADS); arrays are first-touched by the same static
 * schedule that runs the kernel. One untimed pass, then ITERS timed ones.
 * Bytes per pass, as STREAM counts them: 3 * N * 4 (read b, c; write a; no
 * write-allocate traffic counted). Prints one JSON object:
 *   {"n": N, "bytes": B, "threads": T, "times_s": [...], "gbs": [...]}   (GB = 1e9 bytes)
 * and checks the result (exit 1 when a value is wrong).
 */
#include <omp.h>
#include <stdio.h>
#include <stdlib.h>

int main(int argc, char **argv) {
  long n = argc > 1 ? atol(argv[1]) : 4096L * 8192L;
  int iters = argc > 2 ? atoi(argv[2]) : 10;
  float *a = aligned_alloc(64, ((size_t)n * 4 + 63) / 64 * 64);
  float *b = aligned_alloc(64, ((size_t)n * 4 + 63) / 64 * 64);
  float *c = aligned_alloc(64, ((size_t)n * 4 + 63) / 64 * 64);
  if (!a || !b || !c || n <= 0 || iters <= 0) {
    fprintf(stderr, "stream_triad: bad arguments or out of memory\n");
    return 2;
  }
  const float s = 3.0f;
#pragma omp parallel for schedule(static)
  for (long i = 0; i < n; ++i) {
    a[i] = 0.0f;
    b[i] = 1.0f;
    c[i] = 2.0f;
  }
  double *t = malloc(sizeof(double) * (iters + 1));
  for (int k = 0; k <= iters; ++k) {
    double t0 = omp_get_wtime();
#pragma omp parallel for schedule(static)
    for (long i = 0; i < n; ++i)
      a[i] = b[i] + s * c[i];
    t[k] = omp_get_wtime() - t0;
  }
  for (long i = 0; i < n; i += 4099)
    if (a[i] != 7.0f) {
      fprintf(stderr, "stream_triad: a[%ld] = %g, expected 7\n", i, a[i]);
      return 1;
    }
  double bytes = 3.0 * 4.0 * (double)n;
  printf("{\"n\": %ld, \"bytes\": %.0f, \"threads\": %d, \"times_s\": [", n, bytes,
         omp_get_max_threads());
  for (int k = 1; k <= iters; ++k)
    printf("%s%.6f", k > 1 ? ", " : "", t[k]);
  printf("], \"gbs\": [");
  for (int k = 1; k <= iters; ++k)
    printf("%s%.3f", k > 1 ? ", " : "", bytes / t[k] / 1e9);
  printf("]}\n");
  free(a);
  free(b);
  free(c);
  free(t);
  return 0;
}
