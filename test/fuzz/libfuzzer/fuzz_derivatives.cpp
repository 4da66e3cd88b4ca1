//===- fuzz_derivatives.cpp - libFuzzer harness: --derivatives YAML ---------===//
//
// The input is a --derivatives file: DerivativeRules::loadString reads it on top of the
// built-in rules (as loadDerivativeRules does). When it loads, the joint graph of a fixed
// small program that uses the common ops (the fuzzed rules replace the built-in ones for
// their ops) is built with those rules, as `aotc --derivatives=F` would: a formula that
// does not fit its op must be a user error, never an internal one or a crash.
//===----------------------------------------------------------------------===//
#include "FuzzCommon.h"

#include "aotc/Autodiff.h"
#include "aotc/Stages.h"

using namespace aotc;

namespace {

// Every input requires grad; the ops are those the seeds' rules are for.
const char *kProgram = R"(class GraphModule(torch.nn.Module):
    def forward(self, x: "f32[3, 4]", w: "f32[4, 2]", b: "f32[2]", y: "f32[3, 2]"):
        mm: "f32[3, 2]" = torch.ops.aten.mm.default(x, w)
        add: "f32[3, 2]" = torch.ops.aten.add.Tensor(mm, b)
        relu: "f32[3, 2]" = torch.ops.aten.relu.default(add)
        mul: "f32[3, 2]" = torch.ops.aten.mul.Tensor(relu, y)
        exp: "f32[3, 2]" = torch.ops.aten.exp.default(mul)
        tanh: "f32[3, 2]" = torch.ops.aten.tanh.default(exp)
        sub: "f32[3, 2]" = torch.ops.aten.sub.Tensor(tanh, y)
        div: "f32[3, 2]" = torch.ops.aten.div.Tensor(sub, 2.0)
        _log_softmax: "f32[3, 2]" = torch.ops.aten._log_softmax.default(div, 1, False)
        permute: "f32[2, 3]" = torch.ops.aten.permute.default(_log_softmax, [1, 0])
        sum_1: "f32[2]" = torch.ops.aten.sum.dim_IntList(permute, [1])
        mean: "f32[]" = torch.ops.aten.mean.default(sum_1)
        return (mean,)
)";

} // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  static const Program base = [] {
    Program p = parseProgram(kProgram, "derivatives-harness.fx.txt");
    functionalize(p);
    decompose(p);
    return p;
  }();
  std::string text(reinterpret_cast<const char *>(data), size);
  DerivativeRules alone;
  if (!fuzz::accepted("derivatives", [&] { alone.loadString(text, "fuzz.yaml"); }))
    return 0;
  // Loaded on its own: now on top of the built-in rules, as --derivatives does.
  DerivativeRules rules = DerivativeRules::builtin();
  rules.loadString(text, "fuzz.yaml");
  Program p = base.clone();
  if (fuzz::accepted("derivatives (joint)", [&] { buildJoint(p, rules); }))
    fuzz::checkTextRoundTrip(p, "derivatives (joint)");
  return 0;
}
