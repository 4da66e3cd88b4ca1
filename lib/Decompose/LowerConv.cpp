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
// A transposed convolution whose output_padding reaches the stride (legal while it stays below
// the dilation) has floor(output_padding / stride) more outputs in the regular convolution it is
// the adjoint of than its input has positions: its input (and, in the backward, the gradient
// that plays that role) is zero-padded at the end to that size, and the regular convolution's
// result cropped back.
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

/// Per spatial dim, how many outputs of the regular convolution a transposed one's input lacks:
/// floor(output_padding / stride) (0 unless output_padding >= stride).
std::vector<int64_t> extraOutputs(const ConvParams &p) {
  std::vector<int64_t> ex;
  for (size_t d = 0; d < p.stride.size(); ++d) ex.push_back(p.transposed ? p.outputPadding[d] / p.stride[d] : 0);
  return ex;
}

bool any(const std::vector<int64_t> &v) {
  for (int64_t x : v)
    if (x) return true;
  return false;
}

/// t zero-padded at the end of each spatial dim by ex (constant_pad_nd lists the last dim first).
Node *padEnd(Emitter &e, Node *t, const std::vector<int64_t> &ex) {
  if (!any(ex)) return t;
  std::vector<int64_t> pad;
  for (size_t k = ex.size(); k-- > 0;) pad.insert(pad.end(), {0, ex[k]});
  return e.call("aten.constant_pad_nd.default", {t, pad, 0.0});
}

/// t cropped to `shape` (a prefix of each dim).
Node *cropTo(Emitter &e, Node *t, const Shape &shape) {
  for (size_t d = 0; d < shape.size(); ++d)
    if (t->type().shape[d] != shape[d]) t = e.call("aten.slice.Tensor", {t, (int64_t)d, int64_t(0), shape[d], int64_t(1)});
  return t;
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
  if (s.params.transposed) {
    // The output's batch is the input's (a run-time size over a run-time batch).
    std::vector<Size> out(s.output.begin(), s.output.end());
    if (x->type().rank() == w->type().rank()) out[0] = sizeOf(x->type(), 0);
    y = e.call("aotc.conv_input_grad.default", cat({padEnd(e, x, extraOutputs(s.params)), w, values(out)}, attrs(s.params)),
               {}, {symArg(2, out)});
  }
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
      r[0] = cropTo(e, e.call("aten.convolution.default", {dy, w, std::monostate{}, p.stride, p.padding, p.dilation,
                                                           false, std::vector<int64_t>(p.stride.size(), 0), p.groups}),
                    x->type().shape);
    else
      r[0] = e.call("aotc.conv_input_grad.default", cat({dy, w, x->type().shape}, attrs(p)), {},
                    {symArg(2, sizesOf(x->type()))});
  }
  if (mask[1]) {
    // Transposed: the regular convolution runs from dy's shape (its input) to x's (its output).
    r[1] = p.transposed ? e.call("aotc.conv_weight_grad.default",
                                 cat({padEnd(e, x, extraOutputs(p)), dy, w->type().shape}, attrs(p)))
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
