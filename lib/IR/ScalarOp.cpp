//===- ScalarOp.cpp - Names of the scalar operations ------------------------===//
#include "aotc/ScalarOp.h"

namespace aotc {

const char *scalarOpName(ScalarOp op) {
  static const char *names[] = {"const", "load", "reg", "cast", "neg", "abs", "exp", "log",
                                "tanh",  "sqrt", "erf", "not",  "add", "sub", "mul", "div",
                                "pow",   "max",  "min", "eq",   "ne",  "lt",  "le",  "gt",
                                "ge",    "and",  "or",  "select", "index", "sin",
                                "cos",   "log1p", "expm1", "atan2", "philox"};
  return names[(int)op];
}

} // namespace aotc
