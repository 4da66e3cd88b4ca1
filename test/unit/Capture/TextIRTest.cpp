// The textual IR: FX graph code parsing, printing, and print -> parse -> print.
#include "TestUtil.h"

#include "aotc/OpRegistry.h"
#include "aotc/TextIR.h"

using namespace aotc;
using namespace aotc::test;

namespace {

Program parse(const std::string &text) { return parseProgram(text, "t.fx"); }

const char *kSmall = R"(class GraphModule(torch.nn.Module):
    def forward(self, x: "f32[4, 8]", w: "f32[8, 16]", idx: "i64[4]"):
        # File: /m.py:5 in forward, code: return torch.relu(x @ w)
        mm: "f32[4, 16]" = torch.ops.aten.mm.default(x, w);  x = w = None
        relu: "f32[4, 16]" = torch.ops.aten.relu.default(mm);  mm = None
        return (relu,)
)";

} // namespace

TEST_CASE("FX text: placeholders, types, default requires_grad", "[textir]") {
  Program p = parse(kSmall);
  CHECK(p.stage == "capture");
  auto phs = p.forward.placeholders();
  REQUIRE(phs.size() == 3);
  CHECK(phs[0]->name == "x");
  CHECK(phs[0]->type().str() == "f32[4, 8]");
  CHECK(phs[0]->role == InputRole::UserInput);
  CHECK(phs[0]->requiresGrad);   // floating plain-FX input
  CHECK(phs[1]->requiresGrad);
  CHECK_FALSE(phs[2]->requiresGrad); // i64 input
  Node *mm = p.forward.find("mm");
  REQUIRE(mm);
  CHECK(mm->target == "aten.mm.default");
  CHECK(mm->type().str() == "f32[4, 16]");
  CHECK(mm->loc.line == 4);
  CHECK(mm->loc.col == 9);
  CHECK(mm->stackTrace == "File: /m.py:5 in forward, code: return torch.relu(x @ w)");
  auto outs = p.forward.outputs();
  REQUIRE(outs.size() == 1);
  CHECK(outs[0]->name == "relu");
}

TEST_CASE("FX text: real print_readable output of the MLP", "[textir]") {
  Program p = parseProgram(readFile(srcPath("examples/mlp/mlp.fx.txt")), "mlp.fx.txt");
  auto c = opCounts(p.forward);
  CHECK(c["aten.addmm.default"] == 2);
  CHECK(c["aten.permute.default"] == 2);
  CHECK(c["aten.ne.Scalar"] == 3);
  CHECK(c["aten.sum.dim_IntList"] == 2);
  CHECK(c["aten.scalar_tensor.default"] == 2);
  CHECK(p.forward.placeholders().size() == 6);
  CHECK(p.forward.find("target")->type().str() == "i64[64]");
  // keyword-only arguments: scalar_tensor(0, dtype = torch.int64, ...)
  Node *st = p.forward.find("scalar_tensor");
  CHECK(st->type().str() == "i64[]");
  Node *tc = p.forward.find("_to_copy");
  CHECK(tc->type().str() == "f32[]");
  CHECK(p.forward.find("sum_1")->type().str() == "i64[]"); // sum of bool -> int64
  CHECK(p.forward.find("div")->type().str() == "f32[]");
}

TEST_CASE("FX text: strides/device suffixes and print(ep) indentation", "[textir]") {
  Program a = parseProgram(readFile(srcPath("test/fixtures/fxtext/mlp.strides.fx.txt")), "s.fx");
  Program b = parseProgram(readFile(srcPath("test/fixtures/fxtext/mlp.print.txt")), "p.fx");
  Program c = parseProgram(readFile(srcPath("examples/mlp/mlp.fx.txt")), "mlp.fx.txt");
  CHECK(printProgram(a) == printProgram(c));
  CHECK(printProgram(b) == printProgram(c));
}

TEST_CASE("FX text: multi-output op read through getitem", "[textir]") {
  Program p = parseProgram(readFile(srcPath("test/e2e/ln_gelu/ln_gelu.fx.txt")), "ln.fx");
  Node *ln = p.forward.find("native_layer_norm");
  REQUIRE(ln);
  CHECK(ln->types.size() == 3);
  CHECK(ln->types[0].str() == "f32[32, 128]");
  CHECK(ln->types[1].str() == "f32[32, 1]");
  Node *gi = p.forward.find("getitem");
  CHECK(gi->isGetitem());
  CHECK(gi->type().str() == "f32[32, 128]");
  CHECK(std::get<double>(ln->args[4]) == Approx(1e-5));
  // Printed without an annotation on the tuple, with the index access.
  std::string s = printProgram(p);
  CHECK(contains(s, "        native_layer_norm = torch.ops.aten.native_layer_norm.default(addmm, [128], "
                    "p_ln_weight, p_ln_bias, 1e-05)\n"));
  CHECK(contains(s, "        getitem: \"f32[32, 128]\" = native_layer_norm[0]\n"));
}

TEST_CASE("FX text: literals and keyword arguments", "[textir]") {
  Program p = parse(R"(class M(torch.nn.Module):
    def forward(self, x: "f32[2, 3]"):
        full: "f32[2, 3]" = torch.ops.aten.full.default([2, 3], -inf, dtype = torch.float32, layout = torch.strided, device = device(type='cpu'), pin_memory = False)
        maximum: "f32[2, 3]" = torch.ops.aten.maximum.default(x, full)
        mul: "f32[2, 3]" = torch.ops.aten.mul.Tensor(maximum, 0.5)
        add: "f32[2, 3]" = torch.ops.aten.add.Tensor(mul, x, alpha = 2)
        sum_1: "f32[2, 1]" = torch.ops.aten.sum.dim_IntList(add, [-1], True)
        gelu: "f32[2, 1]" = torch.ops.aten.gelu.default(sum_1, approximate = 'tanh')
        return [gelu, sum_1]
)");
  Node *full = p.forward.find("full");
  CHECK(std::isinf(std::get<double>(full->args[1])));
  CHECK(std::get<double>(full->args[1]) < 0);
  CHECK(std::get<int64_t>(p.forward.find("add")->args[2]) == 2);
  CHECK(std::get<std::string>(p.forward.find("gelu")->args[1]) == "tanh");
  CHECK(p.forward.outputs().size() == 2);
  std::string s = printProgram(p);
  // Defaults omitted, keyword-only arguments as `key = value`, FX spelling of literals.
  CHECK(contains(s, "torch.ops.aten.full.default([2, 3], -inf, dtype = torch.float32, layout = torch.strided, "
                    "device = device(type='cpu'), pin_memory = False)"));
  CHECK(contains(s, "torch.ops.aten.add.Tensor(mul, x, alpha = 2)"));
  CHECK(contains(s, "torch.ops.aten.sum.dim_IntList(add, [-1], True)"));
  CHECK(contains(s, "torch.ops.aten.gelu.default(sum_1, approximate = 'tanh')"));
  CHECK(contains(s, "return (gelu, sum_1)\n"));
  CHECK(printProgram(parse(s)) == s);
}

TEST_CASE("FX text: lines before class are ignored, log prefixes tolerated", "[textir]") {
  std::string text = std::string("V1130 10:00:00.000 123 torch/_functorch/_aot_autograd/x.py:1] [0/0] "
                                 "[__aot_graphs] TRACED GRAPH don't mind 'this\n ===== Forward graph 0 =====\n"
                                 " /x/_lazy_graph_module.py class GraphModule(torch.nn.Module):\n") +
                     std::string(kSmall).substr(std::string(kSmall).find('\n') + 1) +
                     "\nGraph signature: \n    # inputs\n    x: USER_INPUT\n";
  Program p = parse(text);
  CHECK(p.forward.find("relu"));
  CHECK(p.forward.find("mm")->loc.line == 6);
}

//===-- Round trips ----------------------------------------------------------===//

namespace {

/// x: f32[4, 8] (user input), w: f32[8, 16] (parameter fc.weight): loss = sum(relu(x @ w)).
void buildForward(Graph &g, bool withTangent) {
  Node *x = g.addPlaceholder("x", TensorType{DType::F32, {4, 8}}, InputRole::UserInput);
  Node *w = g.addPlaceholder("p_fc_weight", TensorType{DType::F32, {8, 16}}, InputRole::Parameter);
  w->fqn = "fc.weight";
  w->requiresGrad = true;
  Node *mm = buildCall(g, "mm", "aten.mm.default", {x, w}, {});
  mm->stackTrace = "File \"/m.py\", line 5, in forward\n    return (x @ self.fc.weight).relu().sum()";
  Node *relu = buildCall(g, "relu", "aten.relu.default", {mm}, {});
  relu->stackTrace = mm->stackTrace;
  Node *sum = buildCall(g, "sum_1", "aten.sum.dim_IntList", {relu, std::vector<int64_t>{}}, {});
  if (!withTangent) {
    g.setOutputs({sum});
    return;
  }
  Node *t = g.addPlaceholder("tangents_1", TensorType{DType::F32, {}}, InputRole::Tangent);
  Node *zero = buildCall(g, "scalar_tensor", "aten.scalar_tensor.default", {int64_t(0)},
                         {{"dtype", DTypeLit{DType::F32}}});
  Node *le = buildCall(g, "le", "aten.le.Scalar", {relu, int64_t(0)}, {});
  Node *exp = buildCall(g, "expand", "aten.expand.default", {t, std::vector<int64_t>{4, 16}}, {});
  Node *wh = buildCall(g, "where", "aten.where.self", {le, zero, exp}, {});
  Node *pt = buildCall(g, "permute", "aten.permute.default", {x, std::vector<int64_t>{1, 0}}, {});
  Node *gw = buildCall(g, "mm_1", "aten.mm.default", {pt, wh}, {});
  g.setOutputs({sum, gw});
}

void checkRoundTrip(const Program &p) {
  std::string a = printProgram(p);
  Program q = parseProgram(a, "a.aotc");
  std::string b = printProgram(q);
  INFO(a);
  CHECK(a == b);
  // The header survives.
  CHECK(q.stage == p.stage);
  CHECK(q.name == p.name);
  CHECK(q.numForwardOutputs == p.numForwardOutputs);
  CHECK(q.gradOf == p.gradOf);
  CHECK(q.saved == p.saved);
  CHECK(q.mutatedInputs == p.mutatedInputs);
  for (const Graph *gs : {&p.forward, &p.backward}) {
    const Graph &gq = gs == &p.forward ? q.forward : q.backward;
    auto pa = gs->placeholders(), pb = gq.placeholders();
    REQUIRE(pa.size() == pb.size());
    for (size_t i = 0; i < pa.size(); ++i) {
      CHECK(pa[i]->name == pb[i]->name);
      CHECK(pa[i]->role == pb[i]->role);
      CHECK(pa[i]->fqn == pb[i]->fqn);
      CHECK(pa[i]->requiresGrad == pb[i]->requiresGrad);
      CHECK(pa[i]->types == pb[i]->types);
    }
    REQUIRE(gs->nodes().size() == gq.nodes().size());
    for (size_t i = 0; i < gs->nodes().size(); ++i) {
      CHECK(gs->nodes()[i]->name == gq.nodes()[i]->name);
      CHECK(gs->nodes()[i]->types == gq.nodes()[i]->types);
      CHECK(gs->nodes()[i]->target == gq.nodes()[i]->target);
    }
  }
}

} // namespace

TEST_CASE("round trip: plain capture program", "[textir]") {
  Program p;
  p.stage = "capture";
  p.name = "tiny";
  buildForward(p.forward, false);
  checkRoundTrip(p);
  std::string s = printProgram(p);
  CHECK(contains(s, "# aotc: input forward p_fc_weight role=parameter fqn=fc.weight requires_grad=True\n"));
  CHECK(contains(s, "\n        # File: /m.py:5 in forward, code: return (x @ self.fc.weight).relu().sum()\n"));
  CHECK(contains(s, "torch.ops.aten.sum.dim_IntList(relu, [])"));
}

TEST_CASE("round trip: joint graph with tangents", "[textir]") {
  Program p;
  p.stage = "joint";
  p.name = "tiny";
  buildForward(p.forward, true);
  p.numForwardOutputs = 1;
  p.gradOf = {"p_fc_weight"};
  checkRoundTrip(p);
  Program q = parseProgram(printProgram(p), "j.aotc");
  CHECK(q.forward.find("tangents_1")->role == InputRole::Tangent);
  CHECK(q.forward.find("scalar_tensor")->type().str() == "f32[]");
  CHECK(contains(printProgram(p), "# No stacktrace found for following nodes\n"));
}

TEST_CASE("round trip: partitioned program (forward + backward)", "[textir]") {
  Program p;
  p.stage = "partition";
  p.name = "tiny";
  Graph &f = p.forward;
  Node *x = f.addPlaceholder("x", TensorType{DType::F32, {4, 8}}, InputRole::UserInput);
  Node *w = f.addPlaceholder("p_fc_weight", TensorType{DType::F32, {8, 16}}, InputRole::Parameter);
  w->fqn = "fc.weight";
  w->requiresGrad = true;
  Node *mm = buildCall(f, "mm", "aten.mm.default", {x, w}, {});
  Node *relu = buildCall(f, "relu", "aten.relu.default", {mm}, {});
  Node *sum = buildCall(f, "sum_1", "aten.sum.dim_IntList", {relu, std::vector<int64_t>{}}, {});
  f.setOutputs({sum, relu});
  Graph &b = p.backward;
  Node *bx = b.addPlaceholder("x", TensorType{DType::F32, {4, 8}}, InputRole::UserInput);
  Node *bw = b.addPlaceholder("p_fc_weight", TensorType{DType::F32, {8, 16}}, InputRole::Parameter);
  bw->fqn = "fc.weight";
  bw->requiresGrad = true;
  Node *br = b.addPlaceholder("relu", TensorType{DType::F32, {4, 16}}, InputRole::Saved);
  Node *t = b.addPlaceholder("tangents_1", TensorType{DType::F32, {}}, InputRole::Tangent);
  Node *le = buildCall(b, "le", "aten.gt.Scalar", {br, int64_t(0)}, {});
  Node *mask = buildCall(b, "mask", "aten._to_copy.default", {le}, {{"dtype", DTypeLit{DType::F32}}});
  Node *g = buildCall(b, "mul", "aten.mul.Tensor", {mask, t}, {});
  Node *pt = buildCall(b, "permute", "aten.permute.default", {bx, std::vector<int64_t>{1, 0}}, {});
  Node *gw = buildCall(b, "mm_1", "aten.mm.default", {pt, g}, {});
  (void)bw;
  b.setOutputs({gw});
  p.numForwardOutputs = 1;
  p.gradOf = {"p_fc_weight"};
  p.saved = {"relu"};
  checkRoundTrip(p);
  std::string s = printProgram(p);
  CHECK(contains(s, "\n    def backward(self, x: \"f32[4, 8]\", p_fc_weight: \"f32[8, 16]\", relu: \"f32[4, 16]\", "
                    "tangents_1: \"f32[]\"):\n"));
  CHECK(contains(s, "# aotc: input backward relu role=saved requires_grad=False\n"));
  CHECK(contains(s, "# aotc: saved relu\n"));
}

TEST_CASE("round trip: real fixtures through the text IR", "[textir]") {
  for (const char *f : {"examples/mlp/mlp.fx.txt", "test/e2e/ln_gelu/ln_gelu.fx.txt",
                        "test/fixtures/aot/mlp.forward.mincut.txt", "test/fixtures/aot/ln_gelu.forward.default.txt"}) {
    INFO(f);
    Program p = parseProgram(readFile(srcPath(f)), f);
    std::string a = printProgram(p);
    CHECK(printProgram(parseProgram(a, "x")) == a);
  }
}

TEST_CASE("round trip: mutated inputs header", "[textir]") {
  Program p = parse(kSmall);
  p.mutatedInputs = {{0, "x"}};
  checkRoundTrip(p);
}

//===-- Errors ---------------------------------------------------------------===//

TEST_CASE("FX text errors are located and named", "[textir][errors]") {
  auto err = [](const std::string &body) {
    std::string text = "class M(torch.nn.Module):\n    def forward(self, x: \"f32[4, 8]\", w: \"f32[8, 16]\"):\n" +
                       body;
    return userErrorOf([&] { parseProgram(text, "e.fx"); });
  };
  CHECK(err("        mm: \"f32[4, 16]\" = torch.ops.aten.mm.default(x, w\n        return (mm,)\n") ==
        "e.fx:3:53: error: '(' was never closed");
  CHECK(contains(err("        mm = torch.ops.aten.mm.default(x, q)\n        return (mm,)\n"),
                 "e.fx:3:43: error: undefined name 'q'"));
  CHECK(contains(err("        mm = torch.ops.aten.nope.default(x, w)\n        return (mm,)\n"),
                 "e.fx:3:14: error: unknown op 'torch.ops.aten.nope.default'"));
  CHECK(contains(err("        mm: \"f32[4, 15]\" = torch.ops.aten.mm.default(x, w)\n        return (mm,)\n"),
                 "e.fx:3:9: error: node 'mm' (aten.mm.default): annotated type f32[4, 15] does not match "
                 "the inferred type f32[4, 16]"));
  CHECK(contains(err("        mm = torch.ops.aten.mm.default(x, w)\n        mm = torch.ops.aten.relu.default(mm)\n"
                     "        return (mm,)\n"),
                 "e.fx:4:9: error: duplicate name 'mm'"));
  CHECK(contains(err("        mm = torch.ops.aten.mm.default(x, w, x)\n        return (mm,)\n"),
                 "e.fx:3:46: error: op 'aten.mm.default' takes at most 2 positional arguments, got 3"));
  CHECK(contains(err("        mm = torch.ops.aten.mm.default(x)\n        return (mm,)\n"),
                 "missing argument 'mat2'"));
  CHECK(contains(err("        mm = torch.ops.aten.mm.default(x, w)\n        return pytree.tree_unflatten([mm], self._out_spec)\n"),
                 "e.fx:4:16: error: pytree-structured outputs are not supported"));
  CHECK(contains(err("        c = self._tensor_constant0\n        return (c,)\n"),
                 "e.fx:3:13: error: get_attr 'self._tensor_constant0'"));
  CHECK(contains(err("        mm = torch.ops.aten.mm.default(x, w)\n"), "has no return statement"));
  CHECK(contains(err("        s = torch.ops.aten.sum.dim_IntList(x, [1], dtype = torch.bfloat16)\n        return (s,)\n"),
                 "e.fx:3:60: error: unsupported dtype 'torch.bfloat16'"));
  CHECK(contains(err("        mm = x + w\n        return (mm,)\n"), "e.fx:3:16: error: unsupported Python operator '+'"));
}

TEST_CASE("FX text: dynamic shapes are rejected", "[textir][errors]") {
  CHECK(userErrorOf([] {
          parseProgram("class M(torch.nn.Module):\n    def forward(self, s0: \"Sym(s0)\", x: \"f32[s0, 4]\"):\n"
                       "        return (x,)\n",
                       "d.fx");
        }) == "d.fx:2:28: error: input 's0': symbolic value 'Sym(s0)': dynamic shapes not supported yet");
  CHECK(userErrorOf([] {
          parseProgram("class M(torch.nn.Module):\n    def forward(self, x: \"f32[s0, 4]\"):\n        return (x,)\n",
                       "d.fx");
        }) == "d.fx:2:31: error: input 'x': symbolic dimension 's0' without run-time sizes in the header (a dynamic "
              "export: compile its .pt2, docs/dynamic-shapes.md)");
  CHECK(contains(userErrorOf([] {
                   parseProgram("class M(torch.nn.Module):\n    def forward(self, x: \"bf16[4]\"):\n        return (x,)\n",
                                "d.fx");
                 }),
                 "unsupported dtype 'bf16'"));
}

TEST_CASE("aotc header errors", "[textir][errors]") {
  CHECK(contains(userErrorOf([] { parseProgram(std::string("# aotc: stage nope\n") + kSmall, "h"); }),
                 "h:1:1: error: unknown stage 'nope'"));
  CHECK(contains(userErrorOf([] {
                   parseProgram(std::string("# aotc: input forward zz role=user_input requires_grad=False\n") + kSmall, "h");
                 }),
                 "'# aotc: input' names 'zz', which is not an input of forward"));
  CHECK(contains(userErrorOf([] { parseProgram(std::string("# aotc: grad_of relu\n") + kSmall, "h"); }),
                 "grad_of names 'relu', which is not a forward input"));
  CHECK(contains(userErrorOf([] { parseProgram("just some text\n", "h"); }), "h: error: no FX graph found"));
}

TEST_CASE("looksLikeFxText", "[textir]") {
  CHECK(looksLikeFxText(kSmall));
  CHECK_FALSE(looksLikeFxText("{\"graph_module\": 1}"));
}

TEST_CASE("aotc header: stage output contracts are checked", "[textir][errors]") {
  // A joint program must return num_forward_outputs + one gradient per grad_of entry.
  std::string joint = std::string("# aotc: stage joint\n# aotc: num_forward_outputs 1\n# aotc: grad_of w\n") + kSmall;
  CHECK(contains(userErrorOf([&] { parseProgram(joint, "j"); }),
                 "j: error: a 'joint' program must return num_forward_outputs (1) + one gradient per grad_of "
                 "entry (1) values; 'def forward' returns 1"));
  // A partition program needs a backward whose saved inputs match the header.
  std::string part = std::string("# aotc: stage partition\n") + kSmall;
  CHECK(contains(userErrorOf([&] { parseProgram(part, "p"); }), "a 'partition' program needs a 'def backward'"));
  std::string part2 = std::string("# aotc: stage partition\n# aotc: saved mm\n") +
                      "class M(torch.nn.Module):\n"
                      "    def forward(self, x: \"f32[2]\"):\n"
                      "        mm: \"f32[2]\" = torch.ops.aten.relu.default(x)\n"
                      "        return (mm,)\n\n"
                      "    def backward(self, x: \"f32[2]\", mm: \"f32[2]\"):\n"
                      "        return ()\n";
  CHECK(contains(userErrorOf([&] { parseProgram(part2, "p"); }),
                 "saved tensor 'mm' is not a role=saved input of 'def backward'"));
  // With the role, the same text is a valid (empty-gradient) partition program.
  Program ok = parseProgram("# aotc: input backward mm role=saved requires_grad=False\n" + part2, "p");
  CHECK(ok.backward.find("mm")->role == InputRole::Saved);
  CHECK(ok.saved == std::vector<std::string>{"mm"});
}

TEST_CASE("FX text: TORCH_LOGS joint graphs with pytree inputs are rejected clearly", "[textir][errors]") {
  CHECK(contains(userErrorOf([] {
                   parseProgram(readFile(srcPath("test/fixtures/aot/mlp.joint.txt")), "joint.txt");
                 }),
                 "joint.txt:2:23: error: input 'primals' is a pytree (a TORCH_LOGS joint graph"));
}
