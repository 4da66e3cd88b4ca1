//===- Factory.cpp - Factory ops -------------------------------------------------===//
#include "Ops.h"

namespace aotc {
namespace ops {

void registerFactoryOps(OpRegistry &r) {}

} // namespace ops
} // namespace aotc
