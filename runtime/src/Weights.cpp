//===- Weights.cpp - A program's weights file, checked against its build id ---===//
//
// This file implements readWeights (safetensors.h): the weights aotc wrote for one
// compile, refused when they come from another (docs/abi.md "Build id").
//===----------------------------------------------------------------------===//
#include "aotc/safetensors.h"

namespace aotc::rt {

SafetensorsFile readWeights(const aotc_program &program, const std::string &path) {
  SafetensorsFile f = readSafetensors(path);
  const std::string name = program.name ? program.name : "?";
  const std::string want = program.build_id ? program.build_id : "";
  auto it = f.metadata.find("aotc.build_id");
  const std::string got = it == f.metadata.end() ? "" : it->second;
  // A file without an id (a checkpoint written by safetensors.torch or any other tool) is
  // checked by names, dtypes and shapes only; one with another run's id is refused.
  if (!got.empty() && got != want)
    throw RuntimeError(path + " is from aotc build " + (got.empty() ? "(none)" : got) + " but the linked " +
                       name + "_program is build " + want +
                       ": the object and its weights come from different aotc runs; use the .o, .h "
                       "and .weights.safetensors of one run", AOTC_RT_ERROR_IO);
  for (int i = 0; i < program.num_inputs; ++i) {
    const aotc_tensor_desc &d = program.inputs[i];
    if (!aotc_role_is_weight(d.role)) continue;
    const Tensor *t = f.find(d.name);
    if (!t)
      throw RuntimeError(path + ": no tensor '" + d.name + "' (" + descTypeString(d) + ") for " + name +
                         "_program", AOTC_RT_ERROR_IO);
    if (!t->matches(d))
      throw RuntimeError(path + ": '" + d.name + "' is " + t->typeString() + ", " + name +
                         "_program expects " + descTypeString(d), AOTC_RT_ERROR_IO);
  }
  return f;
}

} // namespace aotc::rt
