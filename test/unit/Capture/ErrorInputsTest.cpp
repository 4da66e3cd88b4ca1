// Every malformed input under test/lit/errors/Inputs is a located user error
// (the lit tests check the same messages through the CLI).
#include "TestUtil.h"

#include "aotc/Stages.h"

using namespace aotc;
using namespace aotc::test;

TEST_CASE("error inputs: each malformed file gives its user error", "[capture][errors]") {
  const std::pair<const char *, const char *> cases[] = {
      {"arity.fx.txt",
       R"(:5:83: error: op 'aten.addmm.default' takes at most 3 positional arguments, got 6)"},
      {"arity.json",
       R"(arity.json: error: node 'addmm' (aten.addmm.default): missing argument 'mat2')"},
      {"cycle.json",
       R"(cycle.json: error: node 'permute' (aten.permute.default): the graph has a cycle: 'permute' -> 'addmm' -> 'relu' -> 'permute')"},
      {"dangling.json",
       R"(dangling.json: error: node 'relu' (aten.relu.default): reads 'mm', which no input or node defines (dangling reference))"},
      {"dtype.fx.txt",
       R"(dtype.fx.txt:2:27: error: input 'x': unsupported dtype 'bf16')"},
      {"dtype.json",
       R"(dtype.json: error: tensor 'x': unsupported dtype float16 (ScalarType 6)"},
      {"duplicate.fx.txt",
       R"(duplicate.fx.txt:6:9: error: duplicate name 'permute')"},
      {"duplicate.json",
       R"(duplicate.json: error: node 'relu' (aten.relu.default): duplicate name 'addmm')"},
      {"dynamic.fx.txt",
       R"(dynamic.fx.txt:2:28: error: input 's0': symbolic value 'Sym(s0)': dynamic shapes not supported yet)"},
      {"dynamic.json",
       "dynamic.json: error: dynamic export: run-time sizes without an upper bound:\n  s0 in [0, inf]: x:0"},
      {"dynamic_dim.fx.txt",
       R"(dynamic_dim.fx.txt:2:31: error: input 'x': symbolic dimension 's0' without run-time sizes in the header (a dynamic export: compile its .pt2, docs/dynamic-shapes.md))"},
      {"header.aotc.txt",
       R"(header.aotc.txt:2:1: error: grad_of names 'nothere', which is not a forward input)"},
      {"invalid.json",
       R"(invalid.json:1:161: error: invalid JSON: syntax error)"},
      {"meta_mismatch.json",
       R"(meta_mismatch.json: error: node 'addmm' (aten.addmm.default): exported meta of 'addmm' says f32[4, 15] but aotc infers f32[4, 16])"},
      {"mismatch.fx.txt",
       R"(mismatch.fx.txt:5:9: error: node 'addmm' (aten.addmm.default): annotated type f32[4, 8] does not match the inferred type f32[4, 16])"},
      {"missing_arg.fx.txt",
       R"(missing_arg.fx.txt:5:9: error: node 'addmm' (aten.addmm.default): missing argument 'mat2')"},
      {"missing_weight.pt2",
       R"(missing_weight.pt2: error: missing weight file 'data/weights/weight_1' for parameter 'fc.bias')"},
      {"old_layout.pt2",
       R"(old_layout.pt2: error: this archive uses the torch 2.6/2.7 torch.export.save layout)"},
      {"pytree_return.fx.txt",
       R"(pytree_return.fx.txt:6:16: error: pytree-structured outputs are not supported)"},
      {"schema_version.json",
       R"(schema_version.json: error: unsupported schema_version 7.20)"},
      {"short_weight.pt2",
       R"(short_weight.pt2: error: weight file 'data/weights/weight_0' for parameter 'fc.weight' has 400 bytes, but f32[16, 8] needs 512)"},
      {"syntax.fx.txt",
       R"(syntax.fx.txt:5:59: error: '(' was never closed)"},
      {"syntax_operator.fx.txt",
       R"(syntax_operator.fx.txt:6:65: error: unsupported Python operator '+')"},
      {"tensor_constant.fx.txt",
       R"(tensor_constant.fx.txt:3:29: error: get_attr 'self._tensor_constant0' (a tensor constant) has no type annotation)"},
      {"training.json",
       R"(training.json: error: this ExportedProgram is in the TRAINING dialect)"},
      {"truncated.pt2",
       R"(truncated.pt2: error: cannot read the .pt2 archive)"},
      {"undefined.fx.txt",
       R"(undefined.fx.txt:6:58: error: undefined name 'adddmm')"},
      {"unknown_op.fx.txt",
       R"(unknown_op.fx.txt:6:30: error: unknown op 'torch.ops.aten.frobnicate.default')"},
      {"unknown_op.json",
       R"(unknown_op.json: error: node 'relu' (aten.frobnicate.default): unknown op 'torch.ops.aten.frobnicate.default')"},
      {"unknown_op.pt2",
       R"(unknown_op.pt2:models/model.json: error: node 'relu' (aten.frobnicate.default): unknown op)"},
      {"wrong_format.pt2",
       R"(wrong_format.pt2: error: wrong archive_format 'aoti' (expected 'pt2')"},
  };
  for (auto [file, msg] : cases) {
    std::string path = srcPath(std::string("test/lit/errors/Inputs/") + file);
    INFO(path);
    std::string got = userErrorOf([&] { capture(path, {}); });
    INFO(got);
    CHECK(contains(got, msg));
  }
}
