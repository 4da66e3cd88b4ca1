//===- Composite.cpp - Composite ops -------------------------------------------------===//
#include "Ops.h"

namespace aotc {
namespace ops {

void registerCompositeOps(OpRegistry &r) {}

} // namespace ops
} // namespace aotc
