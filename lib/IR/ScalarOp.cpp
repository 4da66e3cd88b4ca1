//===- ScalarOp.cpp - Names of the scalar operations ------------------------===//
#include "aotc/ScalarOp.h"

namespace aotc {

const char *scalarOpName(ScalarOp op) {
  static const char *names[] = {"const", "load", "reg", "cast", "neg", "abs", "exp", "log",
                                "tanh",  "sqrt", "erf", "not",  "add", "sub", "mul", "div",
                                "pow",   "max",  "min", "eq",   "ne",  "lt",  "le",  "gt",
                                "ge",    "and",  "or",  "select", "index", "sin",
                                "cos",   "log1p", "expm1", "atan2", "philox", "tan", "asin", "acos",
                                "atan", "sinh", "cosh", "asinh", "acosh", "atanh", "log2", "log10",
                                "floor", "ceil", "trunc", "round", "fmod", "remainder", "special"};
  static_assert(sizeof names / sizeof names[0] == (int)ScalarOp::Special + 1, "one name per ScalarOp");
  return names[(int)op];
}

bool isLibmScalarOp(ScalarOp op) {
  switch (op) {
  case ScalarOp::Exp: case ScalarOp::Log: case ScalarOp::Tanh: case ScalarOp::Erf: case ScalarOp::Pow:
  case ScalarOp::Sin: case ScalarOp::Cos: case ScalarOp::Log1p: case ScalarOp::Expm1: case ScalarOp::Atan2:
  case ScalarOp::Tan: case ScalarOp::Asin: case ScalarOp::Acos: case ScalarOp::Atan: case ScalarOp::Sinh:
  case ScalarOp::Cosh: case ScalarOp::Asinh: case ScalarOp::Acosh: case ScalarOp::Atanh: case ScalarOp::Log2:
  case ScalarOp::Log10: case ScalarOp::Fmod: case ScalarOp::Remainder: case ScalarOp::Special:
    return true;
  default:
    return false;
  }
}

} // namespace aotc
