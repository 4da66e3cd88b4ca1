//===- Fft.cpp - aotc_fft: discrete Fourier transforms through PocketFFT ----------===//
//
// aotc/kernels.h describes the call. PocketFFT's C++ header (pocketfft_hdronly, BSD-3; Debian
// ships it as pythran/pythonic/numpy/fft/pocketfft.hpp in python3-pythran, see
// docs/building.md) does the transforms, single-threaded: one call's arithmetic is the same
// whatever the caller's thread count. Its exceptions never leave this file.
//===----------------------------------------------------------------------===//
// Every standard header the PocketFFT header includes, first: their include guards keep the
// aligned_alloc macro below out of them.
#include <algorithm>
#include <array>
#include <cmath>
#include <complex>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <mutex>
#include <new>
#include <stdexcept>
#include <vector>

namespace {
/// PocketFFT (this version) calls aligned_alloc(64, n) with n not a multiple of 64, which C11
/// forbids (glibc accepts it; ASan reports it, as it should): the size is rounded up here.
void *pocketfftAlignedAlloc(size_t align, size_t size) { return std::aligned_alloc(align, (size + align - 1) / align * align); }
} // namespace

#define POCKETFFT_NO_MULTITHREADING
#define aligned_alloc pocketfftAlignedAlloc
#include <pythran/pythonic/numpy/fft/pocketfft.hpp>
#undef aligned_alloc

#include "aotc/abi.h"
#include "aotc/kernels.h"

#include <complex>
#include <cstdio>
#include <new>
#include <vector>

namespace {

int invalid(char *msg, int64_t size, const char *text) {
  if (msg && size > 0) std::snprintf(msg, (size_t)size, "%s", text);
  return AOTC_KERNELS_ERROR_INVALID;
}

/// Dense row-major byte strides of `shape` for elements of `item` bytes.
pocketfft::stride_t strides(const pocketfft::shape_t &shape, size_t item) {
  pocketfft::stride_t s(shape.size());
  ptrdiff_t st = (ptrdiff_t)item;
  for (size_t i = shape.size(); i-- > 0;) {
    s[i] = st;
    st *= (ptrdiff_t)shape[i];
  }
  return s;
}

template <typename T> void run(const aotc_fft_desc *d, const void *in, void *out) {
  pocketfft::shape_t shape(d->shape, d->shape + d->rank), axes(d->axes, d->axes + d->naxes);
  pocketfft::shape_t half = shape;
  half[axes.back()] = shape[axes.back()] / 2 + 1;
  const size_t c = sizeof(std::complex<T>), r = sizeof(T);
  T scale = (T)d->scale;
  switch (d->kind) {
  case AOTC_FFT_C2C:
    pocketfft::c2c(shape, strides(shape, c), strides(shape, c), axes, d->forward != 0,
                   static_cast<const std::complex<T> *>(in), static_cast<std::complex<T> *>(out), scale, 1);
    break;
  case AOTC_FFT_R2C: {
    // The half spectrum, into the first n/2 + 1 entries of each line of `out` (its own
    // strides: the half or the whole shape); then, for the whole spectrum, every entry
    // k > n/2 of the last axis is the conjugate of the entry at the mirrored index (n - k
    // there, (n_a - i) mod n_a along the other transformed axes).
    const pocketfft::shape_t &oshape = d->onesided ? half : shape;
    auto *o = static_cast<std::complex<T> *>(out);
    pocketfft::r2c(shape, strides(shape, r), strides(oshape, c), axes, pocketfft::FORWARD,
                   static_cast<const T *>(in), o, scale, 1);
    if (d->onesided) break;
    const size_t last = axes.back(), n = shape[last], rank = shape.size();
    std::vector<bool> transformed(rank, false);
    for (size_t a : axes) transformed[a] = true;
    std::vector<size_t> idx(rank, 0);
    size_t total = 1;
    for (size_t s : shape) total *= s;
    for (size_t flat = 0; flat < total; ++flat) {
      size_t rem = flat;
      for (size_t k = rank; k-- > 0;) idx[k] = rem % shape[k], rem /= shape[k];
      if (idx[last] <= n / 2) continue;
      size_t src = 0;
      for (size_t k = 0; k < rank; ++k) {
        size_t i = transformed[k] ? (shape[k] - idx[k]) % shape[k] : idx[k];
        src = src * shape[k] + i;
      }
      o[flat] = std::conj(o[src]);
    }
    break;
  }
  case AOTC_FFT_C2R:
    pocketfft::c2r(shape, strides(half, c), strides(shape, r), axes, pocketfft::BACKWARD,
                   static_cast<const std::complex<T> *>(in), static_cast<T *>(out), scale, 1);
    break;
  }
}

} // namespace

extern "C" int aotc_fft_check(const aotc_fft_desc *d, char *msg, int64_t msg_size) {
  if (!d) return invalid(msg, msg_size, "aotc_fft: NULL descriptor");
  if (d->dtype != AOTC_F32 && d->dtype != AOTC_F64) return invalid(msg, msg_size, "aotc_fft: dtype must be f32 or f64");
  if (d->kind < AOTC_FFT_C2C || d->kind > AOTC_FFT_C2R) return invalid(msg, msg_size, "aotc_fft: unknown kind");
  if (d->rank < 1 || d->rank > AOTC_FFT_MAX_RANK) return invalid(msg, msg_size, "aotc_fft: rank out of range");
  if (d->naxes < 1 || d->naxes > d->rank) return invalid(msg, msg_size, "aotc_fft: naxes out of range");
  for (int i = 0; i < d->rank; ++i)
    if (d->shape[i] < 0) return invalid(msg, msg_size, "aotc_fft: negative size");
  for (int i = 0; i < d->naxes; ++i) {
    if (d->axes[i] < 0 || d->axes[i] >= d->rank) return invalid(msg, msg_size, "aotc_fft: axis out of range");
    if (d->shape[d->axes[i]] < 1) return invalid(msg, msg_size, "aotc_fft: a transformed axis is empty");
    for (int j = 0; j < i; ++j)
      if (d->axes[j] == d->axes[i]) return invalid(msg, msg_size, "aotc_fft: an axis is repeated");
  }
  return AOTC_KERNELS_OK;
}

extern "C" int aotc_fft(const aotc_fft_desc *d, const void *in, void *out) {
  if (int rc = aotc_fft_check(d, nullptr, 0)) return rc;
  try {
    if (d->dtype == AOTC_F32)
      run<float>(d, in, out);
    else
      run<double>(d, in, out);
  } catch (const std::bad_alloc &) {
    return AOTC_KERNELS_ERROR_NO_MEMORY;
  } catch (...) {
    return AOTC_KERNELS_ERROR_INVALID;
  }
  return AOTC_KERNELS_OK;
}
