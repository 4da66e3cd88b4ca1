//===- Linalg.cpp - aotc_linalg: dense factorizations and solves through LAPACK -------===//
//
// aotc/kernels.h describes the call. The LAPACK routines are the Fortran ones the linked BLAS
// exports (OpenBLAS ships reference LAPACK with its own faster getrf / potrf; Debian has no
// lapacke.h next to it, so the few prototypes are declared here, LP64, with the hidden
// character-length arguments gfortran expects at the end). Each matrix is copied into a
// column-major work array, factorized there, and copied out row-major. The calling thread
// does everything (the runtime keeps OpenBLAS at one thread), so results do not depend on the
// caller's thread count.
//===----------------------------------------------------------------------===//
#include "aotc/abi.h"
#include "aotc/kernels.h"

#include <cblas.h>

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <cstring>
#include <limits>
#include <new>
#include <vector>

extern "C" {
void spotrf_(const char *, const int *, float *, const int *, int *, size_t);
void dpotrf_(const char *, const int *, double *, const int *, int *, size_t);
void sgetrf_(const int *, const int *, float *, const int *, int *, int *);
void dgetrf_(const int *, const int *, double *, const int *, int *, int *);
void sgetrs_(const char *, const int *, const int *, const float *, const int *, const int *, float *, const int *,
             int *, size_t);
void dgetrs_(const char *, const int *, const int *, const double *, const int *, const int *, double *, const int *,
             int *, size_t);
void ssyevd_(const char *, const char *, const int *, float *, const int *, float *, float *, const int *, int *,
             const int *, int *, size_t, size_t);
void dsyevd_(const char *, const char *, const int *, double *, const int *, double *, double *, const int *, int *,
             const int *, int *, size_t, size_t);
void sgesdd_(const char *, const int *, const int *, float *, const int *, float *, float *, const int *, float *,
             const int *, float *, const int *, int *, int *, size_t);
void dgesdd_(const char *, const int *, const int *, double *, const int *, double *, double *, const int *, double *,
             const int *, double *, const int *, int *, int *, size_t);
void sgeqrf_(const int *, const int *, float *, const int *, float *, float *, const int *, int *);
void dgeqrf_(const int *, const int *, double *, const int *, double *, double *, const int *, int *);
void sorgqr_(const int *, const int *, const int *, float *, const int *, const float *, float *, const int *, int *);
void dorgqr_(const int *, const int *, const int *, double *, const int *, const double *, double *, const int *, int *);
}

namespace {

/// A workspace size LAPACK reported as a T: rounded up with a margin (a float32 query can be one
/// ulp short above 2^24, before LAPACK 3.11's sroundup_lwork). Throws std::bad_alloc when it
/// does not fit an int.
template <class T> int lworkOf(T q) {
  double w = std::ceil((double)q * (1.0 + 4.0 * std::numeric_limits<T>::epsilon()));
  if (!(w < (double)std::numeric_limits<int>::max())) throw std::bad_alloc();
  return std::max(1, (int)w);
}

template <class T> struct Lapack;
template <> struct Lapack<float> {
  static void potrf(const char *u, const int *n, float *a, const int *l, int *i) { spotrf_(u, n, a, l, i, 1); }
  static void getrf(const int *m, const int *n, float *a, const int *l, int *p, int *i) { sgetrf_(m, n, a, l, p, i); }
  static void getrs(const char *t, const int *n, const int *r, const float *a, const int *l, const int *p, float *b,
                    const int *lb, int *i) {
    sgetrs_(t, n, r, a, l, p, b, lb, i, 1);
  }
  static void syevd(const char *j, const char *u, const int *n, float *a, const int *l, float *w, float *wk,
                    const int *lw, int *iw, const int *liw, int *i) {
    ssyevd_(j, u, n, a, l, w, wk, lw, iw, liw, i, 1, 1);
  }
  static void gesdd(const char *j, const int *m, const int *n, float *a, const int *l, float *s, float *u,
                    const int *lu, float *vt, const int *lv, float *wk, const int *lw, int *iw, int *i) {
    sgesdd_(j, m, n, a, l, s, u, lu, vt, lv, wk, lw, iw, i, 1);
  }
  static void geqrf(const int *m, const int *n, float *a, const int *l, float *t, float *wk, const int *lw, int *i) {
    sgeqrf_(m, n, a, l, t, wk, lw, i);
  }
  static void orgqr(const int *m, const int *n, const int *k, float *a, const int *l, const float *t, float *wk,
                    const int *lw, int *i) {
    sorgqr_(m, n, k, a, l, t, wk, lw, i);
  }
  static void trsm(CBLAS_SIDE s, CBLAS_UPLO u, CBLAS_DIAG d, int m, int n, const float *a, int lda, float *b, int ldb) {
    cblas_strsm(CblasRowMajor, s, u, CblasNoTrans, d, m, n, 1.0f, a, lda, b, ldb);
  }
};
template <> struct Lapack<double> {
  static void potrf(const char *u, const int *n, double *a, const int *l, int *i) { dpotrf_(u, n, a, l, i, 1); }
  static void getrf(const int *m, const int *n, double *a, const int *l, int *p, int *i) { dgetrf_(m, n, a, l, p, i); }
  static void getrs(const char *t, const int *n, const int *r, const double *a, const int *l, const int *p, double *b,
                    const int *lb, int *i) {
    dgetrs_(t, n, r, a, l, p, b, lb, i, 1);
  }
  static void syevd(const char *j, const char *u, const int *n, double *a, const int *l, double *w, double *wk,
                    const int *lw, int *iw, const int *liw, int *i) {
    dsyevd_(j, u, n, a, l, w, wk, lw, iw, liw, i, 1, 1);
  }
  static void gesdd(const char *j, const int *m, const int *n, double *a, const int *l, double *s, double *u,
                    const int *lu, double *vt, const int *lv, double *wk, const int *lw, int *iw, int *i) {
    dgesdd_(j, m, n, a, l, s, u, lu, vt, lv, wk, lw, iw, i, 1);
  }
  static void geqrf(const int *m, const int *n, double *a, const int *l, double *t, double *wk, const int *lw,
                    int *i) {
    dgeqrf_(m, n, a, l, t, wk, lw, i);
  }
  static void orgqr(const int *m, const int *n, const int *k, double *a, const int *l, const double *t, double *wk,
                    const int *lw, int *i) {
    dorgqr_(m, n, k, a, l, t, wk, lw, i);
  }
  static void trsm(CBLAS_SIDE s, CBLAS_UPLO u, CBLAS_DIAG d, int m, int n, const double *a, int lda, double *b,
                   int ldb) {
    cblas_dtrsm(CblasRowMajor, s, u, CblasNoTrans, d, m, n, 1.0, a, lda, b, ldb);
  }
};

/// Row-major [r, c] at `src` -> column-major (leading dimension r) at `dst`, and back.
template <class T> void toColMajor(const T *src, int64_t r, int64_t c, T *dst) {
  for (int64_t i = 0; i < r; ++i)
    for (int64_t j = 0; j < c; ++j) dst[j * r + i] = src[i * c + j];
}
template <class T> void fromColMajor(const T *src, int64_t r, int64_t c, int64_t ld, T *dst) {
  for (int64_t i = 0; i < r; ++i)
    for (int64_t j = 0; j < c; ++j) dst[i * c + j] = src[j * ld + i];
}

/// The sizes of one batch entry's packed output (kernels.h).
int64_t outElems(const aotc_linalg_desc *d) {
  const int64_t m = d->m, n = d->n, k = std::min(m, n);
  switch (d->kind) {
  case AOTC_LINALG_CHOLESKY: return n * n + 1;
  case AOTC_LINALG_TRISOLVE:
  case AOTC_LINALG_LU_SOLVE: return n * d->nrhs;
  case AOTC_LINALG_LU: return m * n + k + 1;
  case AOTC_LINALG_EIGH: return n + (d->compute_uv ? n * n : 0);
  case AOTC_LINALG_SVD: return k + (d->compute_uv ? m * (d->full ? m : k) + (d->full ? n : k) * n : 0);
  case AOTC_LINALG_QR: return (d->full == 2 ? 0 : m * (d->full == 1 ? m : k)) + (d->full == 1 ? m : k) * n;
  case AOTC_LINALG_PERM: return m * m;
  }
  return -1;
}
int64_t inElems(const aotc_linalg_desc *d) {
  return d->kind == AOTC_LINALG_PERM ? 0 : d->m * d->n; // operand a
}

bool valid(const aotc_linalg_desc *d) {
  if (d->dtype != AOTC_F32 && d->dtype != AOTC_F64) return false;
  if (d->kind < AOTC_LINALG_CHOLESKY || d->kind > AOTC_LINALG_PERM) return false;
  if (d->batch < 0 || d->m < 0 || d->n < 0 || d->nrhs < 0) return false;
  const int64_t kMax = std::numeric_limits<int>::max();
  if (d->m > kMax || d->n > kMax || d->nrhs > kMax || d->m * std::max<int64_t>(d->n, d->nrhs) > kMax) return false;
  bool square = d->kind == AOTC_LINALG_CHOLESKY || d->kind == AOTC_LINALG_TRISOLVE || d->kind == AOTC_LINALG_LU_SOLVE ||
                d->kind == AOTC_LINALG_EIGH;
  if (square && d->m != d->n) return false;
  if (d->kind == AOTC_LINALG_QR && (d->full < 0 || d->full > 2)) return false;
  return true;
}

template <class T> struct Call {
  const aotc_linalg_desc *d;
  int firstInfo = 0; ///< the first failing entry's info (check)

  void noteInfo(int info) {
    if (info > 0 && !firstInfo) firstInfo = info;
  }

  void cholesky(const T *a, T *out) {
    const int n = (int)d->n;
    std::vector<T> w((size_t)n * n);
    toColMajor(a, n, n, w.data());
    const char uplo = d->upper ? 'U' : 'L';
    int info = 0;
    if (n > 0) Lapack<T>::potrf(&uplo, &n, w.data(), &n, &info);
    fromColMajor(w.data(), n, n, n, out);
    for (int i = 0; i < n; ++i)
      for (int j = 0; j < n; ++j)
        if (d->upper ? j < i : j > i) out[(size_t)i * n + j] = 0;
    out[(size_t)n * n] = (T)info;
    noteInfo(info);
  }

  void trisolve(const T *a, const T *b, T *out) {
    const int n = (int)d->n, r = (int)d->nrhs;
    std::memcpy(out, b, sizeof(T) * (size_t)n * r);
    if (n == 0 || r == 0) return;
    // Row-major: X is [n, r] (left) or [r, n] (right).
    Lapack<T>::trsm(d->left ? CblasLeft : CblasRight, d->upper ? CblasUpper : CblasLower,
                    d->unit ? CblasUnit : CblasNonUnit, d->left ? n : r, d->left ? r : n, a, n, out,
                    d->left ? r : n);
  }

  void lu(const T *a, T *out) {
    const int m = (int)d->m, n = (int)d->n, k = std::min(m, n);
    std::vector<T> w((size_t)m * n);
    std::vector<int> piv((size_t)std::max(k, 1));
    toColMajor(a, m, n, w.data());
    int info = 0;
    if (m > 0 && n > 0) Lapack<T>::getrf(&m, &n, w.data(), &m, piv.data(), &info);
    fromColMajor(w.data(), m, n, m, out);
    for (int i = 0; i < k; ++i) out[(size_t)m * n + i] = (T)piv[(size_t)i];
    out[(size_t)m * n + k] = (T)info;
    noteInfo(info);
  }

  bool luSolve(const T *lu, const int64_t *piv, const T *b, T *out) {
    const int n = (int)d->n, r = (int)d->nrhs;
    if (n == 0 || r == 0) return true;
    std::vector<T> a((size_t)n * n), x((size_t)n * r);
    toColMajor(lu, n, n, a.data());
    // left: A X = B, X [n, r]; right: X A = B <=> A^T X^T = B^T, X^T [n, r] column-major is X
    // row-major [r, n] as is.
    if (d->left) toColMajor(b, n, r, x.data());
    else std::memcpy(x.data(), b, sizeof(T) * (size_t)n * r);
    const bool trans = d->left ? d->adjoint : !d->adjoint;
    const char t = trans ? 'T' : 'N';
    std::vector<int> p((size_t)n);
    for (int i = 0; i < n; ++i) {
      if (piv[i] < 1 || piv[i] > n) return false; // getrs would read and write out of bounds
      p[(size_t)i] = (int)piv[i];
    }
    int info = 0;
    Lapack<T>::getrs(&t, &n, &r, a.data(), &n, p.data(), x.data(), &n, &info);
    if (d->left) fromColMajor(x.data(), n, r, n, out);
    else std::memcpy(out, x.data(), sizeof(T) * (size_t)n * r);
    return true;
  }

  bool eigh(const T *a, T *out) {
    const int n = (int)d->n;
    if (n == 0) return true;
    std::vector<T> w((size_t)n * n);
    toColMajor(a, n, n, w.data());
    const char jobz = d->compute_uv ? 'V' : 'N', uplo = d->upper ? 'U' : 'L';
    int info = 0, lwork = -1, liwork = -1, iq = 0;
    T q = 0;
    Lapack<T>::syevd(&jobz, &uplo, &n, w.data(), &n, out, &q, &lwork, &iq, &liwork, &info);
    lwork = lworkOf(q), liwork = std::max(1, iq);
    std::vector<T> work((size_t)lwork);
    std::vector<int> iwork((size_t)liwork);
    Lapack<T>::syevd(&jobz, &uplo, &n, w.data(), &n, out, work.data(), &lwork, iwork.data(), &liwork, &info);
    if (info < 0) return false;
    if (d->compute_uv) fromColMajor(w.data(), n, n, n, out + n);
    if (info > 0) std::fill(out, out + outElems(d), std::numeric_limits<T>::quiet_NaN());
    noteInfo(info);
    return true;
  }

  bool svd(const T *a, T *out) {
    const int m = (int)d->m, n = (int)d->n, k = std::min(m, n);
    if (k == 0) {
      // Nothing to decompose; a full U / Vh of an empty matrix is the identity (as LAPACK's).
      if (d->compute_uv && d->full) {
        T *u = out, *vh = out + (size_t)m * m;
        std::fill(out, out + outElems(d), T(0));
        for (int i = 0; i < m; ++i) u[(size_t)i * m + i] = 1;
        for (int i = 0; i < n; ++i) vh[(size_t)i * n + i] = 1;
      }
      return true;
    }
    std::vector<T> w((size_t)m * n);
    toColMajor(a, m, n, w.data());
    const int uc = d->full ? m : k, vr = d->full ? n : k;
    const char jobz = !d->compute_uv ? 'N' : d->full ? 'A' : 'S';
    std::vector<T> u(d->compute_uv ? (size_t)m * uc : 1), vt(d->compute_uv ? (size_t)vr * n : 1), s((size_t)k);
    const int ldu = std::max(m, 1), ldvt = std::max(vr, 1);
    std::vector<int> iwork((size_t)8 * k);
    int info = 0, lwork = -1;
    T q = 0;
    Lapack<T>::gesdd(&jobz, &m, &n, w.data(), &m, s.data(), u.data(), &ldu, vt.data(), &ldvt, &q, &lwork,
                     iwork.data(), &info);
    lwork = lworkOf(q);
    std::vector<T> work((size_t)lwork);
    Lapack<T>::gesdd(&jobz, &m, &n, w.data(), &m, s.data(), u.data(), &ldu, vt.data(), &ldvt, work.data(), &lwork,
                     iwork.data(), &info);
    if (info < 0) return false;
    T *o = out;
    if (d->compute_uv) {
      fromColMajor(u.data(), m, uc, m, o);
      o += (size_t)m * uc;
    }
    std::copy(s.begin(), s.end(), o);
    o += k;
    if (d->compute_uv) fromColMajor(vt.data(), vr, n, vr, o);
    if (info > 0) std::fill(out, out + outElems(d), std::numeric_limits<T>::quiet_NaN());
    noteInfo(info);
    return true;
  }

  bool qr(const T *a, T *out) {
    const int m = (int)d->m, n = (int)d->n, k = std::min(m, n);
    const int mode = d->full, qc = mode == 1 ? m : k, rr = mode == 1 ? m : k;
    // Q needs qc columns of the reflectors' product: a work array of max(n, qc) columns.
    const int wc = std::max(n, qc);
    std::vector<T> w((size_t)std::max(m, 1) * std::max(wc, 1), T(0));
    toColMajor(a, m, n, w.data());
    std::vector<T> tau((size_t)std::max(k, 1));
    int info = 0, lwork = -1;
    const int lda = std::max(m, 1);
    T q = 0;
    if (m > 0 && n > 0) {
      Lapack<T>::geqrf(&m, &n, w.data(), &lda, tau.data(), &q, &lwork, &info);
      lwork = lworkOf(q);
      std::vector<T> work((size_t)lwork);
      Lapack<T>::geqrf(&m, &n, w.data(), &lda, tau.data(), work.data(), &lwork, &info);
      if (info < 0) return false;
    }
    // R: the upper triangle of the first rr rows.
    T *r = out + (mode == 2 ? 0 : (size_t)m * qc);
    for (int i = 0; i < rr; ++i)
      for (int j = 0; j < n; ++j) r[(size_t)i * n + j] = j >= i && i < m ? w[(size_t)j * m + i] : T(0);
    if (mode == 2) return true;
    if (m > 0 && qc > 0) {
      if (k == 0) {
        std::fill(w.begin(), w.end(), T(0));
        for (int i = 0; i < std::min(m, qc); ++i) w[(size_t)i * m + i] = 1;
      } else {
        lwork = -1;
        Lapack<T>::orgqr(&m, &qc, &k, w.data(), &lda, tau.data(), &q, &lwork, &info);
        lwork = lworkOf(q);
        std::vector<T> work((size_t)lwork);
        Lapack<T>::orgqr(&m, &qc, &k, w.data(), &lda, tau.data(), work.data(), &lwork, &info);
        if (info < 0) return false;
      }
    }
    fromColMajor(w.data(), m, qc, m, out);
    return true;
  }

  void perm(const int64_t *piv, T *out) {
    const int64_t m = d->m, k = std::min(d->m, d->n);
    std::vector<int64_t> p((size_t)m);
    for (int64_t i = 0; i < m; ++i) p[(size_t)i] = i;
    // Row i of A went to row piv[i] - 1 (in order): A = P L U with P[p[j], j] = 1.
    for (int64_t i = 0; i < k; ++i) {
      int64_t j = (int64_t)piv[i] - 1;
      if (j >= 0 && j < m) std::swap(p[(size_t)i], p[(size_t)j]);
    }
    std::fill(out, out + m * m, T(0));
    for (int64_t j = 0; j < m; ++j) out[p[(size_t)j] * m + j] = 1;
  }

  int run(const void *av, const void *bv, const void *cv, void *ov) {
    const T *a = static_cast<const T *>(av);
    T *o = static_cast<T *>(ov);
    const int64_t ia = inElems(d), oe = outElems(d), n = d->n, r = d->nrhs;
    for (int64_t e = 0; e < d->batch; ++e) {
      const T *ae = a ? a + e * ia : nullptr;
      T *oe_ = o + e * oe;
      switch (d->kind) {
      case AOTC_LINALG_CHOLESKY: cholesky(ae, oe_); break;
      case AOTC_LINALG_TRISOLVE: trisolve(ae, static_cast<const T *>(bv) + e * n * r, oe_); break;
      case AOTC_LINALG_LU: lu(ae, oe_); break;
      case AOTC_LINALG_LU_SOLVE:
        if (!luSolve(ae, static_cast<const int64_t *>(bv) + e * n, static_cast<const T *>(cv) + e * n * r, oe_))
          return AOTC_KERNELS_ERROR_INVALID;
        break;
      case AOTC_LINALG_EIGH:
        if (!eigh(ae, oe_)) return AOTC_KERNELS_ERROR_INVALID;
        break;
      case AOTC_LINALG_SVD:
        if (!svd(ae, oe_)) return AOTC_KERNELS_ERROR_INVALID;
        break;
      case AOTC_LINALG_QR:
        if (!qr(ae, oe_)) return AOTC_KERNELS_ERROR_INVALID;
        break;
      case AOTC_LINALG_PERM: perm(static_cast<const int64_t *>(bv) + e * std::min(d->m, d->n), oe_); break;
      }
    }
    // eigh and svd always check (torch's have no _ex form: a failed iteration raises).
    bool check = d->check || d->kind == AOTC_LINALG_EIGH || d->kind == AOTC_LINALG_SVD;
    if (check && firstInfo > 0) return AOTC_KERNELS_LINALG_INFO + firstInfo;
    return AOTC_KERNELS_OK;
  }
};

} // namespace

extern "C" int aotc_linalg(const aotc_linalg_desc *d, const void *a, const void *b, const void *c, void *out) {
  if (!d || !valid(d)) return AOTC_KERNELS_ERROR_INVALID;
  if (d->batch == 0 || outElems(d) == 0) return AOTC_KERNELS_OK;
  try {
    if (d->dtype == AOTC_F32) return Call<float>{d}.run(a, b, c, out);
    return Call<double>{d}.run(a, b, c, out);
  } catch (const std::bad_alloc &) {
    return AOTC_KERNELS_ERROR_NO_MEMORY;
  }
}
