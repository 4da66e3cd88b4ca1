//===- Fft.cpp - _fft_r2c, _fft_c2r, _fft_c2c and their backward helpers ----------===//
//
// Complex tensors are their view_as_real from capture on (docs/complex.md): a
// complex64 tensor of shape S is an f32 tensor of shape S + [2], (re, im) interleaved, and
// these ops are defined on that representation:
//   _fft_r2c(x [S], dim, normalization, onesided) -> [S'] + [2]   (S' = S with the last of
//       `dim` halved to n/2 + 1 when onesided): the forward DFT (sign -1) over `dim`;
//   _fft_c2r(X [S'] + [2], dim, normalization, last_dim_size n) -> [S]: the backward DFT
//       (sign +1) of the Hermitian signal whose first n/2 + 1 entries along the last of `dim`
//       are X (the imaginary parts of the zero and Nyquist frequencies are ignored);
//   _fft_c2c(X [S] + [2], dim, normalization, forward) -> [S] + [2].
// normalization (torch's fft_norm_mode): 0 none, 1 1/sqrt(N), 2 1/N, N = the product of the
// signal sizes along `dim` (c2r: of the output). Library calls (libaotc_kernels' aotc_fft,
// PocketFFT; lib/Codegen/Fusion.cpp defineFft). The backward helpers (derivatives.yaml; lowered
// to the three primitives by lib/Decompose/LowerFft.cpp), torch's fft_r2c_backward and
// fft_c2r_backward on this representation:
//   aotc::fft_r2c_backward(g, dim, normalization, onesided, input_sizes S) = real(c2c(g
//       zero-padded along the last of `dim` to its size in S, inverse)) -> real [S];
//   aotc::fft_c2r_backward(g [S], dim, normalization) = r2c(g, onesided) with entries
//       1 .. n - (n/2 + 1) of the last of `dim` doubled (their mirrors fold onto them).
// The references below are O(n^2) DFTs in float64, independent of PocketFFT.
//===----------------------------------------------------------------------===//
#include "Ops.h"

#include "aotc/Fft.h"

#include <complex>
#include <numbers>

namespace aotc {

double fftScale(int64_t mode, const Shape &signal, const std::vector<int64_t> &dims) {
  double N = 1;
  for (int64_t d : dims) N *= (double)signal[d];
  return mode == 0 ? 1.0 : mode == 1 ? 1.0 / std::sqrt(N) : 1.0 / N;
}

namespace ops {
namespace {

using Types = std::vector<TensorType>;
using cd = std::complex<double>;

/// The transformed dims of argument `i` against a logical rank, wrapped; nodeError when empty,
/// out of range or repeated. The last stays last (R2C / C2R halve it).
std::vector<int64_t> fftDims(const Node &n, size_t i, int64_t rank, const char *op) {
  std::vector<int64_t> out;
  for (int64_t d : n.intListArg(i)) {
    int64_t w = wrapDimOrError(n, d, rank);
    for (int64_t e : out)
      if (e == w) nodeError(n, std::string(op) + ": dim " + std::to_string(w) + " appears multiple times in the list of dims");
    out.push_back(w);
  }
  if (out.empty()) nodeError(n, std::string(op) + ": expected at least one dim to transform");
  return out;
}

int64_t normMode(const Node &n, size_t i, const char *op) {
  int64_t m = n.intArg(i);
  if (m < 0 || m > 2) nodeError(n, std::string(op) + ": normalization must be 0, 1 or 2, got " + std::to_string(m));
  return m;
}

/// A complex (pair) argument: floating, last dim 2, logical rank >= 1. Returns the logical shape.
Shape complexShape(const Node &n, const TensorType &t, const char *op) {
  requireFloating(n, t.dtype, op);
  if (t.rank() < 2 || t.shape.back() != 2)
    nodeError(n, std::string(op) + ": expected a complex tensor (its view_as_real, last dim 2) of rank >= 1, got " +
                     t.str());
  return Shape(t.shape.begin(), t.shape.end() - 1);
}

Shape withPair(Shape s) {
  s.push_back(2);
  return s;
}

void requireSignal(const Node &n, const Shape &s, const std::vector<int64_t> &dims, const char *op) {
  for (int64_t d : dims)
    if (s[d] < 1)
      nodeError(n, std::string(op) + ": Invalid number of data points (" + std::to_string(s[d]) + ") specified");
}

// ---- float64 references -------------------------------------------------------------------
/// Complex values of a pair RefTensor (logical shape = its shape without the trailing 2).
std::vector<cd> toComplex(const RefTensor &t) {
  std::vector<cd> v((size_t)t.numel() / 2);
  for (size_t k = 0; k < v.size(); ++k) v[k] = {t.data[2 * k], t.data[2 * k + 1]};
  return v;
}
RefTensor fromComplex(DType dt, const Shape &s, const std::vector<cd> &v, double scale) {
  RefTensor t(dt, withPair(s));
  for (size_t k = 0; k < v.size(); ++k) t.data[2 * k] = v[k].real() * scale, t.data[2 * k + 1] = v[k].imag() * scale;
  return t;
}
/// In place: the DFT along `dim` of every line of `a` (logical shape `s`), sign -1 or +1.
void dftAlong(std::vector<cd> &a, const Shape &s, int64_t dim, int sign) {
  Along al(s, dim);
  std::vector<cd> line((size_t)al.len);
  const double w = sign * 2 * std::numbers::pi / (double)al.len;
  for (int64_t o = 0; o < al.outer; ++o)
    for (int64_t i = 0; i < al.inner; ++i) {
      for (int64_t k = 0; k < al.len; ++k) {
        cd acc = 0;
        for (int64_t j = 0; j < al.len; ++j)
          acc += a[(size_t)al.at(o, j, i)] * std::polar(1.0, w * (double)((j * k) % al.len));
        line[(size_t)k] = acc;
      }
      for (int64_t k = 0; k < al.len; ++k) a[(size_t)al.at(o, k, i)] = line[(size_t)k];
    }
}
/// Entries [0, len) of `a` (shape s) along `dim`, zero-padded when len > s[dim].
std::vector<cd> resizeAlong(const std::vector<cd> &a, const Shape &s, int64_t dim, int64_t len, Shape &out) {
  out = s;
  out[dim] = len;
  Along src(s, dim), dst(out, dim);
  std::vector<cd> r((size_t)numelOf(out));
  for (int64_t o = 0; o < dst.outer; ++o)
    for (int64_t j = 0; j < std::min(len, s[dim]); ++j)
      for (int64_t i = 0; i < dst.inner; ++i) r[(size_t)dst.at(o, j, i)] = a[(size_t)src.at(o, j, i)];
  return r;
}
/// torch's c2r on complex `a` of logical shape `s` (onesided along the last of dims): c2c
/// backward over the other dims, then the Hermitian real transform of length n.
RefTensor refC2r(DType dt, std::vector<cd> a, Shape s, const std::vector<int64_t> &dims, int64_t n, double scale) {
  for (size_t i = 0; i + 1 < dims.size(); ++i) dftAlong(a, s, dims[i], +1);
  int64_t last = dims.back();
  Shape os = s;
  os[last] = n;
  RefTensor out(dt, os);
  Along src(s, last), dst(os, last);
  for (int64_t o = 0; o < dst.outer; ++o)
    for (int64_t i = 0; i < dst.inner; ++i)
      for (int64_t j = 0; j < n; ++j) {
        double acc = 0;
        for (int64_t k = 0; k < n; ++k) {
          // Entry k of the full spectrum: X[k] for k <= n/2, conj(X[n - k]) above; the zero
          // (and, n even, Nyquist) entries count as real.
          int64_t kk = k <= n / 2 ? k : n - k;
          cd x = a[(size_t)src.at(o, kk, i)];
          if (kk == 0 || 2 * kk == n) x = x.real();
          if (k > n / 2) x = std::conj(x);
          acc += (x * std::polar(1.0, 2 * std::numbers::pi * (double)((j * k) % n) / (double)n)).real();
        }
        out.data[(size_t)dst.at(o, j, i)] = acc * scale;
      }
  return out;
}
/// torch's r2c on real `x` (logical shape s): forward DFT over dims, halved along the last.
std::vector<cd> refR2c(const RefTensor &x, const std::vector<int64_t> &dims, bool onesided, Shape &os) {
  std::vector<cd> a(x.data.begin(), x.data.end());
  for (int64_t d : dims) dftAlong(a, x.shape, d, -1);
  if (!onesided) {
    os = x.shape;
    return a;
  }
  return resizeAlong(a, x.shape, dims.back(), x.shape[dims.back()] / 2 + 1, os);
}

/// The pairs an r2c transform of real argument 0 over dims (argument 1) makes, normalization
/// argument 2 checked: the last dim halved to n/2 + 1 when `onesided`.
TensorType r2cType(const Node &n, bool onesided, const char *op) {
  TensorType x = argType(n, 0);
  requireFloating(n, x.dtype, op);
  if (x.rank() < 1) nodeError(n, std::string(op) + ": expected a tensor of rank >= 1");
  std::vector<int64_t> dims = fftDims(n, 1, x.rank(), op);
  normMode(n, 2, op);
  requireSignal(n, x.shape, dims, op);
  Shape s = x.shape;
  if (onesided) s[dims.back()] = s[dims.back()] / 2 + 1;
  return {x.dtype, withPair(s)};
}

} // namespace

void registerFftOps(OpRegistry &r) {
  {
    OpDef &d = r.add("_fft_r2c(Tensor self, int[] dim, int normalization, bool onesided) -> Tensor", OpCategory::Fft);
    d.primitive = true;
    d.infer = [](const Node &n) -> Types { return {r2cType(n, n.boolArg(3), "_fft_r2c")}; };
    setEval(d, [](const Node &n, const RefArgs &a) {
      const RefTensor &x = *a.at(0);
      std::vector<int64_t> dims = fftDims(n, 1, (int64_t)x.shape.size(), "_fft_r2c");
      Shape os;
      std::vector<cd> v = refR2c(x, dims, n.boolArg(3), os);
      return fromComplex(n.types[0].dtype, os, v, fftScale(n.intArg(2), x.shape, dims));
    });
  }
  {
    OpDef &d = r.add("_fft_c2r(Tensor self, int[] dim, int normalization, SymInt last_dim_size) -> Tensor",
                     OpCategory::Fft);
    d.primitive = true;
    d.infer = [](const Node &n) -> Types {
      TensorType x = argType(n, 0);
      Shape s = complexShape(n, x, "_fft_c2r");
      std::vector<int64_t> dims = fftDims(n, 1, (int64_t)s.size(), "_fft_c2r");
      normMode(n, 2, "_fft_c2r");
      int64_t len = n.intArg(3), last = dims.back();
      if (len < 1) nodeError(n, "_fft_c2r: Invalid number of data points (" + std::to_string(len) + ") specified");
      if (s[last] != len / 2 + 1)
        nodeError(n, "_fft_c2r: the input's size along dim " + std::to_string(last) + " is " + std::to_string(s[last]) +
                         ", expected last_dim_size / 2 + 1 = " + std::to_string(len / 2 + 1) +
                         " (torch.fft.irfft resizes its input to this before the call)");
      requireSignal(n, s, dims, "_fft_c2r");
      s[last] = len;
      return {{x.dtype, s}};
    };
    setEval(d, [](const Node &n, const RefArgs &a) {
      const RefTensor &x = *a.at(0);
      Shape s(x.shape.begin(), x.shape.end() - 1);
      std::vector<int64_t> dims = fftDims(n, 1, (int64_t)s.size(), "_fft_c2r");
      return refC2r(n.types[0].dtype, toComplex(x), s, dims, n.intArg(3),
                    fftScale(n.intArg(2), n.types[0].shape, dims));
    });
  }
  {
    OpDef &d = r.add("_fft_c2c(Tensor self, SymInt[] dim, int normalization, bool forward) -> Tensor", OpCategory::Fft);
    d.primitive = true;
    d.infer = [](const Node &n) -> Types {
      TensorType x = argType(n, 0);
      Shape s = complexShape(n, x, "_fft_c2c");
      std::vector<int64_t> dims = fftDims(n, 1, (int64_t)s.size(), "_fft_c2c");
      normMode(n, 2, "_fft_c2c");
      requireSignal(n, s, dims, "_fft_c2c");
      return {x};
    };
    setEval(d, [](const Node &n, const RefArgs &a) {
      const RefTensor &x = *a.at(0);
      Shape s(x.shape.begin(), x.shape.end() - 1);
      std::vector<int64_t> dims = fftDims(n, 1, (int64_t)s.size(), "_fft_c2c");
      std::vector<cd> v = toComplex(x);
      for (int64_t dd : dims) dftAlong(v, s, dd, n.boolArg(3) ? -1 : +1);
      return fromComplex(n.types[0].dtype, s, v, fftScale(n.intArg(2), s, dims));
    });
  }
  {
    OpDef &d = r.add("aotc::fft_r2c_backward(Tensor grad, int[] dim, int normalization, bool onesided, "
                     "SymInt[] input_sizes) -> Tensor",
                     OpCategory::Composite);
    d.infer = [](const Node &n) -> Types {
      TensorType g = argType(n, 0);
      Shape s = complexShape(n, g, "fft_r2c_backward");
      std::vector<int64_t> dims = fftDims(n, 1, (int64_t)s.size(), "fft_r2c_backward");
      normMode(n, 2, "fft_r2c_backward");
      const Shape &in = n.intListArg(4);
      int64_t last = dims.back();
      Shape expect = in;
      if (in.size() == s.size() && n.boolArg(3)) expect[last] = in[last] / 2 + 1;
      if (expect != s)
        nodeError(n, "fft_r2c_backward: a gradient of shape " + shapeStr(s) + " does not match input_sizes " +
                         shapeStr(in));
      return {{g.dtype, in}};
    };
    setEval(d, [](const Node &n, const RefArgs &a) {
      const RefTensor &g = *a.at(0);
      Shape s(g.shape.begin(), g.shape.end() - 1), full;
      std::vector<int64_t> dims = fftDims(n, 1, (int64_t)s.size(), "fft_r2c_backward");
      std::vector<cd> v = resizeAlong(toComplex(g), s, dims.back(), n.intListArg(4)[dims.back()], full);
      for (int64_t dd : dims) dftAlong(v, full, dd, +1);
      RefTensor out(n.types[0].dtype, full);
      double sc = fftScale(n.intArg(2), full, dims);
      for (size_t k = 0; k < v.size(); ++k) out.data[k] = v[k].real() * sc;
      return out;
    });
  }
  {
    OpDef &d = r.add("aotc::fft_c2r_backward(Tensor grad, int[] dim, int normalization) -> Tensor",
                     OpCategory::Composite);
    d.infer = [](const Node &n) -> Types { return {r2cType(n, true, "fft_c2r_backward")}; };
    setEval(d, [](const Node &n, const RefArgs &a) {
      const RefTensor &g = *a.at(0);
      std::vector<int64_t> dims = fftDims(n, 1, (int64_t)g.shape.size(), "fft_c2r_backward");
      Shape os;
      std::vector<cd> v = refR2c(g, dims, true, os);
      int64_t last = dims.back(), len = g.shape[last], h = os[last];
      Along al(os, last);
      for (int64_t o = 0; o < al.outer; ++o)
        for (int64_t j = 1; j <= len - h; ++j)
          for (int64_t i = 0; i < al.inner; ++i) v[(size_t)al.at(o, j, i)] *= 2.0;
      return fromComplex(n.types[0].dtype, os, v, fftScale(n.intArg(2), g.shape, dims));
    });
  }
}

} // namespace ops
} // namespace aotc
