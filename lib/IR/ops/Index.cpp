//===- Index.cpp - Index ops -------------------------------------------------===//
#include "Ops.h"

namespace aotc {
namespace ops {

void registerIndexOps(OpRegistry &r) {}

} // namespace ops
} // namespace aotc
