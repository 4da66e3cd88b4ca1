// Whole-range f32 ulp sweep and special-case table.
//   ulp sweep S   : every f32 bit pattern j*S (j = 0 .. ceil(2^32/S)-1; S=1: all 2^32)
//   ulp specials  : outputs for NaN, +-inf, +-0, finfo.min/max, denormals, thresholds
// Reference: double libm (exp, log, tanh, erf, 1/(1+exp(-x))). Error in f32 ulps of the
// reference: ulp(r) = 2^(floor(log2|r|) - 23), at least 2^-149 (denormals), at most 2^104;
// results and references beyond 2^128 count as 2^128 (so inf for a reference that rounds to
// inf is 0 error). NaN vs non-NaN is counted apart (nanmis), not in the ulp max.
#include "impls.h"
#include "allv4.h"
#include "allv3.h"
#include <omp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <vector>
#include <string>
#include <algorithm>

extern "C" int allv4_eval(aotc_context *, const void *const *, void *const *, void *);
extern "C" int allv3_eval(aotc_context *, const void *const *, void *const *, void *);

static const size_t CH = 65536;
enum { EXP, LOG, TANH, ERF, SIG, NF };
static const char *fname[NF] = {"exp", "log", "tanh", "erf", "sigmoid"};

struct Impl {
  int f;
  const char *name;
  kern_t k;     // NULL: output slot filled by the aotc object (obj = 4 or 3)
  int obj;
  int twin;     // index of an impl whose bits we compare against (-1 none)
};
static std::vector<Impl> impls;
static void add(int f, const char *n, kern_t k, int obj = 0, int twin = -1) { impls.push_back({f, n, k, obj, twin}); }

static void setup() {
  add(EXP, "sleef avx512 u10", sleef512_exp_u10);
  add(EXP, "sleef avx2 u10", sleef256_exp_u10, 0, (int)impls.size() - 1);
  add(EXP, "libmvec avx512", mvec512_exp);
  add(EXP, "libmvec avx2", mvec256_exp, 0, (int)impls.size() - 1);
  add(EXP, "aotc replica", replica_exp);
  add(EXP, "aotc object v4", nullptr, 4, (int)impls.size() - 1);
  add(EXP, "aotc object v3", nullptr, 3, (int)impls.size() - 1);
  add(EXP, "glibc expf", libm_exp);
  add(LOG, "sleef avx512 u10", sleef512_log_u10);
  add(LOG, "sleef avx2 u10", sleef256_log_u10, 0, (int)impls.size() - 1);
  add(LOG, "sleef avx512 u35", sleef512_log_u35);
  add(LOG, "sleef avx2 u35", sleef256_log_u35, 0, (int)impls.size() - 1);
  add(LOG, "libmvec avx512", mvec512_log);
  add(LOG, "libmvec avx2", mvec256_log, 0, (int)impls.size() - 1);
  add(LOG, "aotc replica", replica_log);
  add(LOG, "aotc object v4", nullptr, 4, (int)impls.size() - 1);
  add(LOG, "aotc object v3", nullptr, 3, (int)impls.size() - 1);
  add(LOG, "glibc logf", libm_log);
  add(TANH, "sleef avx512 u10", sleef512_tanh_u10);
  add(TANH, "sleef avx2 u10", sleef256_tanh_u10, 0, (int)impls.size() - 1);
  add(TANH, "sleef avx512 u35", sleef512_tanh_u35);
  add(TANH, "sleef avx2 u35", sleef256_tanh_u35, 0, (int)impls.size() - 1);
  add(TANH, "libmvec avx512", mvec512_tanh);
  add(TANH, "libmvec avx2", mvec256_tanh, 0, (int)impls.size() - 1);
  add(TANH, "aotc object v4 (MLIR)", nullptr, 4);
  add(TANH, "aotc object v3 (MLIR)", nullptr, 3, (int)impls.size() - 1);
  add(TANH, "glibc tanhf", libm_tanh);
  add(ERF, "sleef avx512 u10", sleef512_erf_u10);
  add(ERF, "sleef avx2 u10", sleef256_erf_u10, 0, (int)impls.size() - 1);
  add(ERF, "libmvec avx512", mvec512_erf);
  add(ERF, "libmvec avx2", mvec256_erf, 0, (int)impls.size() - 1);
  add(ERF, "aotc object v4 (MLIR)", nullptr, 4);
  add(ERF, "aotc object v3 (MLIR)", nullptr, 3, (int)impls.size() - 1);
  add(ERF, "glibc erff", libm_erf);
  add(SIG, "sleef avx512 u10 exp", sleef512_sig_u10);
  add(SIG, "sleef avx2 u10 exp", sleef256_sig_u10, 0, (int)impls.size() - 1);
  add(SIG, "libmvec avx512 exp", mvec512_sig);
  add(SIG, "libmvec avx2 exp", mvec256_sig, 0, (int)impls.size() - 1);
  add(SIG, "aotc replica exp", replica_sig);
  add(SIG, "aotc object v4", nullptr, 4, (int)impls.size() - 1);
  add(SIG, "aotc object v3", nullptr, 3, (int)impls.size() - 1);
  add(SIG, "glibc expf", libm_sig);
}

static double ref(int f, double x) {
  switch (f) {
  case EXP: return exp(x);
  case LOG: return log(x);
  case TANH: return tanh(x);
  case ERF: return erf(x);
  default: return 1.0 / (1.0 + exp(-x));
  }
}

struct Stat {
  double maxerr = 0; float argx = 0; double maxden = 0; float argden = 0;
  uint64_t gt1 = 0, gt05 = 0, nanmis = 0, twindiff = 0, n = 0;
};

// Vectorizable: e[i] = ulp error, 0 for equal or both NaN, -1 for a NaN mismatch.
static void ulperr(const float *__restrict y, const double *__restrict r, double *__restrict e, size_t n) {
  const double big = 0x1p128;
  for (size_t i = 0; i < n; ++i) {
    double yd = y[i], rr = r[i];
    int yn = yd != yd, rn = rr != rr;
    double ya = copysign(fabs(yd) < big ? fabs(yd) : big, yd);
    double ra = copysign(fabs(rr) < big ? fabs(rr) : big, rr);
    uint64_t ab; double fa = fabs(ra); memcpy(&ab, &fa, 8);
    int64_t ex = (int64_t)(ab >> 52) - 1023;
    ex = ex < -126 ? -126 : ex > 127 ? 127 : ex;
    uint64_t ub = (uint64_t)(ex - 23 + 1023) << 52; double ulp; memcpy(&ulp, &ub, 8);
    double err = fabs(ya - ra) / ulp;
    err = (yd == rr || (yn & rn)) ? 0.0 : err;
    e[i] = (yn ^ rn) ? -1.0 : err;
  }
}

static void sweep(uint64_t S) {
  uint64_t total = ((1ull << 32) + S - 1) / S;
  uint64_t nch = (total + CH - 1) / CH;
  int nt = omp_get_max_threads();
  std::vector<std::vector<Stat>> st(nt, std::vector<Stat>(impls.size()));
#pragma omp parallel
  {
    int t = omp_get_thread_num();
    float *x = (float *)aligned_alloc(64, CH * 4);
    double *r = (double *)aligned_alloc(64, CH * 8 * NF);
    std::vector<float *> y(impls.size());
    for (auto &p : y) p = (float *)aligned_alloc(64, CH * 4);
    float *o4[NF], *o3[NF];
    for (int f = 0; f < NF; ++f) { o4[f] = (float *)aligned_alloc(64, CH * 4); o3[f] = (float *)aligned_alloc(64, CH * 4); }
    aotc_context *c4 = allv4_context_create(), *c3 = allv3_context_create();
    void *scr = aligned_alloc(64, 4096);
    double *ebuf = (double *)aligned_alloc(64, CH * 8);
#pragma omp for schedule(dynamic, 1)
    for (uint64_t c = 0; c < nch; ++c) {
      size_t n = CH;
      for (size_t i = 0; i < CH; ++i) {
        uint64_t j = c * CH + i;
        if (j >= total) j = 0; // pad the last chunk with pattern 0 (counted once more: harmless)
        uint32_t b = (uint32_t)(j * S);
        memcpy(&x[i], &b, 4);
      }
      for (int f = 0; f < NF; ++f) {
        bool used = false;
        for (auto &im : impls) used |= im.f == f;
        if (used) for (size_t i = 0; i < n; ++i) r[f * CH + i] = ref(f, (double)x[i]);
      }
      const void *in[1] = {x};
      void *out4[NF] = {o4[0], o4[1], o4[2], o4[3], o4[4]};
      void *out3[NF] = {o3[0], o3[1], o3[2], o3[3], o3[4]};
      bool any4 = false, any3 = false;
      for (auto &im : impls) { any4 |= im.obj == 4; any3 |= im.obj == 3; }
      if (any4) allv4_eval(c4, in, out4, scr);
      if (any3) allv3_eval(c3, in, out3, scr);
      for (size_t k = 0; k < impls.size(); ++k) {
        const Impl &im = impls[k];
        float *yy = im.k ? y[k] : (im.obj == 4 ? o4[im.f] : o3[im.f]);
        if (im.k) im.k(x, yy, n);
        else y[k] = yy;
        const double *rr = r + im.f * CH;
        Stat &s = st[t][k];
        ulperr(yy, rr, ebuf, n);
        double mn = 0, md = 0; uint64_t g1 = 0, g05 = 0, nm = 0;
        for (size_t i = 0; i < n; ++i) {
          double e = ebuf[i];
          int den = fabs(rr[i]) < 0x1p-126 && rr[i] != 0;
          nm += e < 0; g1 += e > 1; g05 += e > 0.5;
          double en = den ? 0 : e, ed = den ? e : 0;
          mn = mn > en ? mn : en; md = md > ed ? md : ed;
        }
        s.n += n; s.nanmis += nm; s.gt1 += g1; s.gt05 += g05;
        if (mn > s.maxerr || md > s.maxden)
          for (size_t i = 0; i < n; ++i) {
            int den = fabs(rr[i]) < 0x1p-126 && rr[i] != 0;
            if (!den && ebuf[i] > s.maxerr) { s.maxerr = ebuf[i]; s.argx = x[i]; }
            if (den && ebuf[i] > s.maxden) { s.maxden = ebuf[i]; s.argden = x[i]; }
          }
        if (im.twin >= 0) {
          const float *z = y[im.twin];
          for (size_t i = 0; i < n; ++i) s.twindiff += memcmp(&yy[i], &z[i], 4) != 0 && !(yy[i] != yy[i] && z[i] != z[i]);
        }
      }
    }
  }
  printf("sweep: stride %llu, %llu patterns per function\n", (unsigned long long)S, (unsigned long long)total);
  printf("%-8s %-24s %12s %16s %10s %14s %10s %10s %8s %10s\n", "func", "impl", "max_normal", "at_x", "max_den", "den_at_x", ">0.5ulp", ">1ulp", "nanmis", "vs_prev");
  for (size_t k = 0; k < impls.size(); ++k) {
    Stat a;
    for (int t = 0; t < nt; ++t) {
      Stat &s = st[t][k];
      if (s.maxerr > a.maxerr) { a.maxerr = s.maxerr; a.argx = s.argx; }
      if (s.maxden > a.maxden) { a.maxden = s.maxden; a.argden = s.argden; }
      a.gt1 += s.gt1; a.gt05 += s.gt05; a.nanmis += s.nanmis; a.twindiff += s.twindiff; a.n += s.n;
    }
    char tw[32] = "-";
    if (impls[k].twin >= 0) snprintf(tw, sizeof tw, "%llu", (unsigned long long)a.twindiff);
    printf("%-8s %-24s %12.6g %16.9g %10.4g %14.6g %10llu %10llu %8llu %10s\n", fname[impls[k].f], impls[k].name, a.maxerr, a.argx,
           a.maxden, a.argden, (unsigned long long)a.gt05, (unsigned long long)a.gt1, (unsigned long long)a.nanmis, tw);
  }
}

static void specials() {
  float vals[] = {NAN, INFINITY, -INFINITY, 0.0f, -0.0f, -3.4028235e38f, 3.4028235e38f, 1e-45f, -1e-45f, 1e-40f, 1.1754944e-38f,
                  88.72283f, 88.722839f, 88.72284f, 89.0f, -87.33654f, -87.3365479f, -100.0f, -103.97208f, -103.972084f, -104.0f, -150.0f,
                  -1.0f, 1.0f, 9.0f, 10.0f, 4.0f, -4.0f};
  const size_t nv = sizeof vals / sizeof vals[0];
  float x[CH] __attribute__((aligned(64)));
  for (size_t i = 0; i < CH; ++i) x[i] = vals[i % nv];
  static float o4[NF][CH] __attribute__((aligned(64))), o3[NF][CH] __attribute__((aligned(64)));
  const void *in[1] = {x};
  void *out4[NF] = {o4[0], o4[1], o4[2], o4[3], o4[4]};
  void *out3[NF] = {o3[0], o3[1], o3[2], o3[3], o3[4]};
  char scr[4096] __attribute__((aligned(64)));
  allv4_eval(allv4_context_create(), in, out4, scr);
  allv3_eval(allv3_context_create(), in, out3, scr);
  static float y[CH] __attribute__((aligned(64)));
  // Compact: per impl, the special inputs whose result is not bitwise the f32 rounding of
  // the double reference (NaN == NaN; -0 != +0).
  for (auto &im : impls) {
    const float *yy = y;
    if (im.k) im.k(x, y, CH);
    else yy = im.obj == 4 ? o4[im.f] : o3[im.f];
    printf("%-8s %-24s", fname[im.f], im.name);
    int bad = 0;
    for (size_t i = 0; i < nv; ++i) {
      float rf = (float)ref(im.f, vals[i]);
      if (rf != rf && yy[i] != yy[i]) continue;
      if (memcmp(&rf, &yy[i], 4) == 0) continue;
      double r = ref(im.f, vals[i]), e;
      ulperr(&yy[i], &r, &e, 1);
      printf(" | x=%.9g: %.9g (ref %.9g, %.3g ulp)", vals[i], yy[i], rf, e);
      ++bad;
    }
    printf(bad ? "\n" : " all %zu specials exact\n", nv);
  }
}

int main(int argc, char **argv) {
  setup();
  // ONLY=substring list "exp/aotc replica,log/aotc replica": keep impls whose "func/name" starts with one.
  if (const char *only = getenv("ONLY")) {
    std::vector<Impl> keep;
    std::string o = std::string(",") + only + ",";
    for (auto &im : impls) {
      std::string t = std::string(fname[im.f]) + "/" + im.name;
      size_t p = 0; bool ok = false;
      while ((p = o.find(',', p)) != std::string::npos && p + 1 < o.size()) {
        size_t q = o.find(',', p + 1);
        std::string pre = o.substr(p + 1, q - p - 1);
        if (!pre.empty() && t.compare(0, pre.size(), pre) == 0) ok = true;
        p = q;
      }
      if (ok) keep.push_back({im.f, im.name, im.k, im.obj, -1});
    }
    impls = keep;
  }
  if (argc > 1 && !strcmp(argv[1], "specials")) specials();
  else sweep(argc > 2 ? strtoull(argv[2], 0, 10) : 1);
}
