//===- InPlace.cpp - InPlace ops -------------------------------------------------===//
#include "Ops.h"

namespace aotc {
namespace ops {

void registerInPlaceOps(OpRegistry &r) {}

} // namespace ops
} // namespace aotc
