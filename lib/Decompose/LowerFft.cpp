//===- LowerFft.cpp - Lower rules: the FFT backward helpers -----------------------===//
//
// The helpers derivatives.yaml writes for _fft_r2c and _fft_c2r (lib/IR/ops/Fft.cpp; complex
// values as view_as_real pairs), as torch's fft_r2c_backward / fft_c2r_backward
// (FunctionsManual.cpp), in the three transform primitives:
//   aotc.fft_r2c_backward(g, dim, norm, onesided, sizes)
//       -> select(_fft_c2c(g zero-padded along dim[-1] to sizes[dim[-1]], dim, norm, False), -1, 0)
//   aotc.fft_c2r_backward(g, dim, norm)
//       -> _fft_r2c(g, dim, norm, True) * m,  m = 2 at entries 1 .. n - (n/2 + 1) of dim[-1], else 1
//          (m is [.., n/2 + 1 at dim[-1], .., 1 for the pair]: a constant of iota comparisons).
//===----------------------------------------------------------------------===//
#include "Rules.h"

namespace aotc::rules {

using namespace rewrite;

namespace {

std::vector<int64_t> wrappedDims(const Node &n, size_t arg, int64_t rank) {
  std::vector<int64_t> d;
  for (int64_t x : n.intListArg(arg)) d.push_back(wrapDimAt(n, x, rank));
  return d;
}

} // namespace

Vals fftR2cBackward(Emitter &e, Node &n) {
  Node *g = n.tensorArg(0);
  int64_t rank = g->type().rank() - 1; // the pair dim is last
  std::vector<int64_t> dims = wrappedDims(n, 1, rank);
  int64_t last = dims.back(), full = n.intListArg(4)[last], have = g->type().shape[last];
  Node *x = g;
  if (full > have) {
    // constant_pad_nd pads from the last dim backward: (0, 0) for the pair dim and every dim
    // after `last`, then (0, full - have) for `last`.
    std::vector<int64_t> pad(2 * (rank + 1 - last), 0);
    pad.back() = full - have;
    x = e.call("aten.constant_pad_nd.default", {x, pad, 0.0});
  }
  Node *c = e.call("aten._fft_c2c.default", {x, n.intListArg(1), n.intArg(2), false});
  return {e.call("aten.select.int", {c, (int64_t)-1, (int64_t)0})};
}

Vals fftC2rBackward(Emitter &e, Node &n) {
  Node *g = n.tensorArg(0);
  int64_t rank = g->type().rank();
  std::vector<int64_t> dims = wrappedDims(n, 1, rank);
  int64_t last = dims.back(), len = g->type().shape[last], half = len / 2 + 1;
  Node *r = e.call("aten._fft_r2c.default", {g, n.intListArg(1), n.intArg(2), true});
  if (len - half <= 0) return {r};
  // m[j] = 2 for 1 <= j <= len - half, else 1.
  DType dt = g->type().dtype;
  Node *j = e.call("aten.arange.start_step", {(int64_t)0, half, (int64_t)1}, {{"dtype", DTypeLit{DType::I64}}});
  Node *in = e.call("aten.logical_and.default", {e.call("aten.ge.Scalar", {j, (int64_t)1}),
                                                  e.call("aten.le.Scalar", {j, len - half})});
  Node *m = e.call("aten.where.self", {in, e.scalarTensor(2.0, dt), e.scalarTensor(1.0, dt)});
  Shape ms(rank + 1, 1);
  ms[last] = half;
  return {e.mul(r, e.view(m, ms))};
}

} // namespace aotc::rules
