//===- ConvGeometry.cpp - Shapes of aten.convolution (include/aotc/Conv.h) ---===//
//
// The checks of aten/src/ATen/native/Convolution.cpp (check_shape_forward,
// conv_output_size, conv_input_size), with torch's messages where it has them.
//===----------------------------------------------------------------------===//
#include "aotc/Conv.h"

namespace aotc {

Shape ConvGeometry::inputShape() const {
  return spatialRank == 1 ? Shape{N, C, W} : Shape{N, C, H, W};
}
Shape ConvGeometry::weightShape() const {
  int64_t cg = groups ? C / groups : 0;
  return spatialRank == 1 ? Shape{K, cg, KW} : Shape{K, cg, KH, KW};
}
Shape ConvGeometry::outputShape() const {
  return spatialRank == 1 ? Shape{N, K, OW} : Shape{N, K, OH, OW};
}

namespace {

std::string listStr(const std::vector<int64_t> &v) {
  std::string s = "[";
  for (size_t i = 0; i < v.size(); ++i) s += (i ? ", " : "") + std::to_string(v[i]);
  return s + "]";
}

/// expand_param_if_needed: one value serves every spatial dim; otherwise exactly `rank`.
bool expand(const char *name, const std::vector<int64_t> &in, size_t rank, std::vector<int64_t> &out,
            std::string &err) {
  if (in.size() == 1) {
    out.assign(rank, in[0]);
    return true;
  }
  if (in.size() != rank) {
    err = std::string("expected ") + name + " to be a single integer value or a list of " +
          std::to_string(rank) + " values to match the convolution dimensions, but got " + name + "=" +
          listStr(in);
    return false;
  }
  out = in;
  return true;
}

} // namespace

ConvShapeResult convolutionShape(const Shape &input, const Shape &weight, const std::vector<int64_t> &stride,
                                 const std::vector<int64_t> &padding, const std::vector<int64_t> &dilation,
                                 bool transposed, const std::vector<int64_t> &outputPadding, int64_t groups) {
  ConvShapeResult r;
  std::string &err = r.error;
  if (input.size() != weight.size()) {
    err = "Expected " + std::to_string(weight.size()) + "-dimensional input for " + std::to_string(weight.size()) +
          "-dimensional weight " + shapeStr(weight) + ", but got " + std::to_string(input.size()) +
          "-dimensional input of size " + shapeStr(input) + " instead";
    return r;
  }
  if (input.size() != 3 && input.size() != 4) {
    err = "only 1-D and 2-D convolutions are supported (batched input [N, C, L] or [N, C, H, W]), got input " +
          shapeStr(input) + (input.size() == 5 ? " (3-D convolution)" : "");
    return r;
  }
  size_t sr = input.size() - 2;
  ConvParams &p = r.params;
  p.transposed = transposed;
  p.groups = groups;
  if (!expand("stride", stride, sr, p.stride, err) || !expand("padding", padding, sr, p.padding, err) ||
      !expand("dilation", dilation, sr, p.dilation, err))
    return r;
  if (outputPadding.empty()) p.outputPadding.assign(sr, 0);
  else if (!expand("output_padding", outputPadding, sr, p.outputPadding, err)) return r;
  if (groups <= 0) {
    err = "non-positive groups is not supported";
    return r;
  }
  for (size_t d = 0; d < sr; ++d) {
    if (p.stride[d] <= 0) err = "non-positive stride is not supported";
    else if (p.padding[d] < 0) err = "negative padding is not supported";
    else if (p.dilation[d] <= 0) err = "dilation should be greater than zero";
    else if (p.outputPadding[d] < 0) err = "negative output_padding is not supported";
    else if (transposed && p.outputPadding[d] >= p.stride[d] && p.outputPadding[d] >= p.dilation[d])
      err = "output padding must be smaller than either stride or dilation, but got output_padding=" +
            listStr(p.outputPadding) + ", stride=" + listStr(p.stride) + ", dilation=" + listStr(p.dilation);
    if (!err.empty()) return r;
  }
  int64_t outC;
  if (!transposed) {
    if (weight[0] % groups != 0) {
      err = "Given groups=" + std::to_string(groups) + ", expected weight to be divisible by " +
            std::to_string(groups) + " at dimension 0, but got weight of size " + shapeStr(weight) + " instead";
      return r;
    }
    if (input[1] != weight[1] * groups) {
      err = "Given groups=" + std::to_string(groups) + ", weight of size " + shapeStr(weight) + ", expected input" +
            shapeStr(input) + " to have " + std::to_string(weight[1] * groups) + " channels, but got " +
            std::to_string(input[1]) + " channels instead";
      return r;
    }
    outC = weight[0];
  } else {
    if (input[1] != weight[0]) {
      err = "Given transposed=1, weight of size " + shapeStr(weight) + ", expected input" + shapeStr(input) +
            " to have " + std::to_string(weight[0]) + " channels, but got " + std::to_string(input[1]) +
            " channels instead";
      return r;
    }
    if (weight[0] % groups != 0) {
      err = "Given groups=" + std::to_string(groups) + ", expected weight to be divisible by " +
            std::to_string(groups) + " at dimension 0, but got weight of size " + shapeStr(weight) + " instead";
      return r;
    }
    outC = weight[1] * groups;
  }
  r.output = {input[0], outC};
  for (size_t d = 0; d < sr; ++d) {
    int64_t in = input[2 + d], k = weight[2 + d], s = p.stride[d], pd = p.padding[d], dl = p.dilation[d];
    int64_t o;
    if (!transposed) {
      int64_t eff = dl * (k - 1) + 1;
      if (in + 2 * pd < eff) {
        Shape padded(input.begin() + 2, input.end());
        for (size_t e = 0; e < sr; ++e) padded[e] += 2 * p.padding[e];
        Shape ks(weight.begin() + 2, weight.end());
        for (size_t e = 0; e < sr; ++e) ks[e] = p.dilation[e] * (ks[e] - 1) + 1;
        err = "Calculated padded input size per channel: " + shapeStr(padded) + ". Kernel size: " + shapeStr(ks) +
              ". Kernel size can't be greater than actual input size";
        return r;
      }
      o = (in + 2 * pd - eff) / s + 1;
    } else {
      o = (in - 1) * s - 2 * pd + dl * (k - 1) + p.outputPadding[d] + 1;
      if (o <= 0) {
        err = "the transposed convolution's output would have size " + std::to_string(o) + " in spatial dim " +
              std::to_string(d) + " (input " + shapeStr(input) + ", weight " + shapeStr(weight) + ")";
        return r;
      }
    }
    r.output.push_back(o);
  }
  return r;
}

ConvGeometry regularGeometry(const Shape &input, const Shape &weight, const Shape &output, const ConvParams &p) {
  // Transposed: the regular convolution runs from the op's output to its input.
  const Shape &x = p.transposed ? output : input;
  const Shape &y = p.transposed ? input : output;
  ConvGeometry g;
  g.spatialRank = (int)input.size() - 2;
  g.N = x[0];
  g.C = x[1];
  g.K = y[1];
  g.groups = p.groups;
  bool two = g.spatialRank == 2;
  g.H = two ? x[2] : 1;
  g.W = x.back();
  g.OH = two ? y[2] : 1;
  g.OW = y.back();
  g.KH = two ? weight[2] : 1;
  g.KW = weight.back();
  g.strideH = two ? p.stride[0] : 1;
  g.strideW = p.stride.back();
  g.padH = two ? p.padding[0] : 0;
  g.padW = p.padding.back();
  g.dilH = two ? p.dilation[0] : 1;
  g.dilW = p.dilation.back();
  return g;
}

} // namespace aotc
