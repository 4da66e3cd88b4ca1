/* gemm_libs.c - f32 GEMM libraries at given shapes: the measurement behind the compiler's
 * --cpu-gemm=auto rule (docs/stage-codegen.md "GEMM libraries").
 *
 *   bench_gemm_libs M,K,N,OP[,BATCH[,COLS]] ...   OP: NN, NT, TN or TT (op(A), op(B))
 *     GFLOP/s of C[M,N] = op(A) op(B), row-major, alpha 1, beta 0, per BATCH entries:
 *     OpenBLAS cblas_sgemm for the whole GEMM and per 128-row blocks (128-column with
 *     COLS = 1), and libaotc_kernels' aotc_onednn_sgemm (oneDNN) the same two ways. Each
 *     figure is the median of >= 5 timed calls (0.15 s), best of 3 rounds.
 *   bench_gemm_libs --bits OP COUNT
 *     COUNT random shapes (M, N <= 1500, K <= 3000; some M <= 64, some K <= 48): whether
 *     aotc_onednn_sgemm of the whole GEMM and of two row pieces (and two column pieces), at
 *     random split points, give the same bytes; prints how many differ.
 * Threads: OPENBLAS_NUM_THREADS / OMP_NUM_THREADS (1 for the table in the docs).
 */
#include <aotc/kernels.h>
#include <cblas.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

static double now(void) {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return t.tv_sec + 1e-9 * t.tv_nsec;
}
static int cmpd(const void *a, const void *b) {
  double x = *(const double *)a, y = *(const double *)b;
  return x < y ? -1 : x > y;
}
typedef void (*gemm_fn)(int, int, int, int, int, int, float, const float *, int, const float *, int, float,
                        float *, int);
static void openblas(int o, int ta, int tb, int m, int n, int k, float al, const float *a, int lda, const float *b,
                     int ldb, float be, float *c, int ldc) {
  cblas_sgemm((enum CBLAS_ORDER)o, (enum CBLAS_TRANSPOSE)ta, (enum CBLAS_TRANSPOSE)tb, m, n, k, al, a, lda, b, ldb,
              be, c, ldc);
}
typedef struct { int m, n, k, ta, tb, batch, cols; } shape;

/* One GEMM per batch entry: whole (block 0) or in blocks of `block` rows / columns. */
static void run(gemm_fn f, const shape *s, int block, const float *a, const float *b, float *c) {
  int lda = s->ta ? s->m : s->k, ldb = s->tb ? s->k : s->n;
  for (int e = 0; e < s->batch; ++e) {
    const float *A = a + (size_t)e * s->m * s->k, *B = b + (size_t)e * s->k * s->n;
    float *C = c + (size_t)e * s->m * s->n;
    int ext = s->cols ? s->n : s->m, step = block ? block : ext;
    for (int p = 0; p < ext; p += step) {
      int len = ext - p < step ? ext - p : step;
      if (s->cols)
        f(CblasRowMajor, s->ta ? CblasTrans : CblasNoTrans, s->tb ? CblasTrans : CblasNoTrans, s->m, len, s->k, 1.f,
          A, lda, B + (s->tb ? (size_t)p * ldb : (size_t)p), ldb, 0.f, C + p, s->n);
      else
        f(CblasRowMajor, s->ta ? CblasTrans : CblasNoTrans, s->tb ? CblasTrans : CblasNoTrans, len, s->n, s->k, 1.f,
          A + (s->ta ? (size_t)p : (size_t)p * lda), lda, B, ldb, 0.f, C + (size_t)p * s->n, s->n);
    }
  }
}
static double seconds(gemm_fn f, const shape *s, int block, const float *a, const float *b, float *c) {
  double best = 1e30;
  for (int round = 0; round < 3; ++round) {
    double ts[64];
    int cnt = 0;
    run(f, s, block, a, b, c);
    double start = now();
    while (cnt < 64 && (cnt < 5 || now() - start < 0.15)) {
      double t0 = now();
      run(f, s, block, a, b, c);
      ts[cnt++] = now() - t0;
    }
    qsort(ts, cnt, sizeof ts[0], cmpd);
    if (ts[cnt / 2] < best) best = ts[cnt / 2];
  }
  return best;
}
static unsigned seed = 777;
static int rnd(int lo, int hi) {
  seed = seed * 1103515245u + 12345u;
  return lo + (int)((seed >> 4) % (unsigned)(hi - lo + 1));
}
static float *values(size_t n) {
  float *p = malloc(n * sizeof *p);
  for (size_t i = 0; i < n; ++i) p[i] = (float)rnd(0, 65535) / 65536.f - 0.5f;
  return p;
}
static int bits(int ta, int tb, int count) {
  int differ = 0;
  for (int it = 0; it < count; ++it) {
    shape s = {rnd(1, 1500), rnd(1, 1500), rnd(1, 3000), ta, tb, 1, 0};
    if (it % 4 == 0) s.m = rnd(1, 64);
    if (it % 5 == 0) s.k = rnd(1, 48);
    float *a = values((size_t)s.m * s.k), *b = values((size_t)s.k * s.n);
    float *c[3];
    for (int i = 0; i < 3; ++i) c[i] = calloc((size_t)s.m * s.n, sizeof(float));
    int lda = ta ? s.m : s.k, ldb = tb ? s.k : s.n, TA = ta ? CblasTrans : CblasNoTrans,
        TB = tb ? CblasTrans : CblasNoTrans;
    aotc_onednn_sgemm(CblasRowMajor, TA, TB, s.m, s.n, s.k, 1.f, a, lda, b, ldb, 0.f, c[0], s.n);
    int r = rnd(1, s.m), q = rnd(1, s.n);
    aotc_onednn_sgemm(CblasRowMajor, TA, TB, r, s.n, s.k, 1.f, a, lda, b, ldb, 0.f, c[1], s.n);
    if (s.m > r)
      aotc_onednn_sgemm(CblasRowMajor, TA, TB, s.m - r, s.n, s.k, 1.f, a + (ta ? (size_t)r : (size_t)r * lda), lda,
                        b, ldb, 0.f, c[1] + (size_t)r * s.n, s.n);
    aotc_onednn_sgemm(CblasRowMajor, TA, TB, s.m, q, s.k, 1.f, a, lda, b, ldb, 0.f, c[2], s.n);
    if (s.n > q)
      aotc_onednn_sgemm(CblasRowMajor, TA, TB, s.m, s.n - q, s.k, 1.f, a, lda, b + (tb ? (size_t)q * ldb : (size_t)q),
                        ldb, 0.f, c[2] + q, s.n);
    size_t bytes = (size_t)s.m * s.n * sizeof(float);
    differ += memcmp(c[0], c[1], bytes) != 0 || memcmp(c[0], c[2], bytes) != 0;
    free(a);
    free(b);
    for (int i = 0; i < 3; ++i) free(c[i]);
  }
  printf("%c%c: %d of %d shapes give other bytes when split\n", ta ? 'T' : 'N', tb ? 'T' : 'N', differ, count);
  return 0;
}
int main(int argc, char **argv) {
  if (argc == 4 && strcmp(argv[1], "--bits") == 0 && strlen(argv[2]) == 2)
    return bits(argv[2][0] == 'T', argv[2][1] == 'T', atoi(argv[3]));
  if (argc < 2) {
    fprintf(stderr, "usage: bench_gemm_libs M,K,N,OP[,BATCH[,COLS]] ... | --bits OP COUNT\n");
    return 2;
  }
  printf("%-24s %10s %10s %10s %10s   (GFLOP/s)\n", "M,K,N,OP[,BATCH,COLS]", "ob-whole", "ob-blocks", "dnnl-whole",
         "dnnl-blocks");
  for (int i = 1; i < argc; ++i) {
    shape s = {0, 0, 0, 0, 0, 1, 0};
    char op[3] = {0};
    if (sscanf(argv[i], "%d,%d,%d,%2[NT],%d,%d", &s.m, &s.k, &s.n, op, &s.batch, &s.cols) < 4 || s.m <= 0 ||
        s.k <= 0 || s.n <= 0 || s.batch <= 0 || strlen(op) != 2) {
      fprintf(stderr, "bench_gemm_libs: bad shape '%s' (want M,K,N,OP[,BATCH[,COLS]])\n", argv[i]);
      return 2;
    }
    s.ta = op[0] == 'T';
    s.tb = op[1] == 'T';
    size_t na = (size_t)s.m * s.k * s.batch, nb = (size_t)s.k * s.n * s.batch, nc = (size_t)s.m * s.n * s.batch;
    float *a = values(na), *b = values(nb), *c = calloc(nc, sizeof(float));
    double gf = 2.0 * s.m * s.n * s.k * s.batch / 1e9;
    printf("%-24s %10.1f %10.1f %10.1f %10.1f\n", argv[i], gf / seconds(openblas, &s, 0, a, b, c),
           gf / seconds(openblas, &s, 128, a, b, c), gf / seconds(aotc_onednn_sgemm, &s, 0, a, b, c),
           gf / seconds(aotc_onednn_sgemm, &s, 128, a, b, c));
    free(a);
    free(b);
    free(c);
  }
  return 0;
}
