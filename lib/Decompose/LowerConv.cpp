//===- LowerConv.cpp - Lower rules: convolution and convolution_backward -----===//
//
// After lower(), a convolution is one of three regular-geometry primitives (include/aotc/Conv.h),
// each a library call in codegen, and its bias is a broadcast add that fuses into the consumer:
//   convolution(x, w, b, transposed=False)   -> convolution(x, w, None, ...) + b.view([K, 1, 1])
//   convolution(x, w, b, transposed=True)    -> aotc.conv_input_grad(x, w, y.sizes, ...) + b...
//   convolution_backward(dy, x, w, ...)      -> (conv_input_grad(dy, w, x.sizes),
//                                                conv_weight_grad(dy, x, w.sizes),
//                                                sum(dy, [0, 2, ...]))
//   transposed convolution_backward           -> (convolution(dy, w, None, transposed=False),
//                                                conv_weight_grad(x, dy, w.sizes),
//                                                sum(dy, [0, 2, ...]))
// output_mask entries that are False give nullptr (nobody may read them); results nobody reads
// are erased by the rewriter, so only the gradients the joint graph uses are computed.
//===----------------------------------------------------------------------===//
#include "Rules.h"

#include "aotc/Conv.h"

namespace aotc::rules {

using namespace rewrite;

namespace {

ConvShapeResult shapeOf(const Node &n, const Node *x, const Node *w, size_t sa) {
  ConvShapeResult s = convolutionShape(x->type().shape, w->type().shape, n.intListArg(sa), n.intListArg(sa + 1),
                                       n.intListArg(sa + 2), n.boolArg(sa + 3), n.intListArg(sa + 4),
                                       n.intArg(sa + 5));
  if (!s.error.empty()) nodeError(n, s.error);
  return s;
}

/// The attribute arguments of the aotc gradient primitives: stride, padding, dilation, groups.
std::vector<Arg> attrs(const ConvParams &p) { return {p.stride, p.padding, p.dilation, p.groups}; }

std::vector<Arg> cat(std::vector<Arg> a, const std::vector<Arg> &b) {
  a.insert(a.end(), b.begin(), b.end());
  return a;
}

/// y + bias broadcast over batch and space.
Node *addBias(Emitter &e, Node *y, Node *bias) {
  Shape s(y->type().rank() - 1, 1);
  s[0] = bias->type().shape[0];
  return e.add(y, e.view(bias, s));
}

} // namespace

Vals convolution(Emitter &e, Node &n) {
  Node *x = n.tensorArg(0), *w = n.tensorArg(1);
  Node *bias = n.isNoneArg(2) ? nullptr : n.tensorArg(2);
  ConvShapeResult s = shapeOf(n, x, w, 3);
  if (!s.params.transposed && !bias) return {}; // already the forward primitive
  Node *y;
  if (s.params.transposed)
    y = e.call("aotc.conv_input_grad.default", cat({x, w, s.output}, attrs(s.params)));
  else
    y = e.call("aten.convolution.default", {x, w, std::monostate{}, s.params.stride, s.params.padding,
                                            s.params.dilation, false, std::vector<int64_t>(s.params.stride.size(), 0),
                                            s.params.groups});
  return {bias ? addBias(e, y, bias) : y};
}

Vals convolutionBackward(Emitter &e, Node &n) {
  Node *dy = n.tensorArg(0), *x = n.tensorArg(1), *w = n.tensorArg(2);
  ConvShapeResult s = shapeOf(n, x, w, 4);
  const std::vector<bool> &mask = std::get<std::vector<bool>>(n.args[10]);
  const ConvParams &p = s.params;
  Vals r(3, nullptr);
  if (mask[0]) {
    if (p.transposed)
      r[0] = e.call("aten.convolution.default", {dy, w, std::monostate{}, p.stride, p.padding, p.dilation, false,
                                                 std::vector<int64_t>(p.stride.size(), 0), p.groups});
    else
      r[0] = e.call("aotc.conv_input_grad.default", cat({dy, w, x->type().shape}, attrs(p)));
  }
  if (mask[1]) {
    // Transposed: the regular convolution runs from dy's shape (its input) to x's (its output).
    r[1] = p.transposed ? e.call("aotc.conv_weight_grad.default", cat({x, dy, w->type().shape}, attrs(p)))
                        : e.call("aotc.conv_weight_grad.default", cat({dy, x, w->type().shape}, attrs(p)));
  }
  if (mask[2]) {
    std::vector<int64_t> dims = {0};
    for (int64_t d = 2; d < dy->type().rank(); ++d) dims.push_back(d);
    r[2] = e.sum(dy, dims, false);
  }
  return r;
}

} // namespace aotc::rules
