//===- ConvCallTest.cpp - The object's convolution call and its library state -===//
//
// A program with one convolution, compiled and linked against a fake libaotc_kernels (C,
// built here): the ABI context creates the library state once and destroys it, every
// aotc_conv call gets that state, the descriptor and the operands, a failing call returns its
// node's error code with the library's status as the value, and the descriptor's
// context_error returns the library's text (abi.h, ABI 5). f32 needs no workspace, f64 an
// im2col one in scratch (aotc_conv_workspace_elems).
//===----------------------------------------------------------------------===//
#include "TestPrograms.h"

#include "aotc/kernels.h"

#include <catch2/catch.hpp>

#include <cstring>
#include <dlfcn.h>
#include <fstream>

using namespace cgtest;

namespace {

const char *kFakeKernels = R"(
#include <stdint.h>
#include <string.h>
struct aotc_kernels_state { int magic; };
static struct aotc_kernels_state the_state;
int fake_created, fake_destroyed, fake_calls, fake_fail_create, fake_status;
int64_t fake_desc[17];
const void *fake_ptrs[5];
void *aotc_kernels_state_create(void) {
  if (fake_fail_create) return 0;
  ++fake_created;
  return &the_state;
}
void aotc_kernels_state_destroy(void *s) { fake_destroyed += s == &the_state; }
const char *aotc_kernels_state_error(const void *s) {
  return s == &the_state && fake_status ? "oneDNN: dnnl_primitive_desc_create returned unimplemented" : 0;
}
int aotc_conv(void *s, const void *d, const void *a, const void *b, void *c, void *ws) {
  ++fake_calls;
  memcpy(fake_desc, d, 8 + 16 * 8);
  fake_ptrs[0] = s, fake_ptrs[1] = a, fake_ptrs[2] = b, fake_ptrs[3] = c, fake_ptrs[4] = ws;
  return s == &the_state ? fake_status : 99;
}
)";

/// y = convolution(x, w) with stride 2, padding 1 (forward only): x [2, 3, 7, 6], w [4, 3, 3, 3].
Program convProgram(DType dt) {
  Program p;
  p.stage = "partition";
  p.name = "cv";
  Graph &f = p.forward;
  Node *x = ph(f, "x", T(dt, {2, 3, 7, 6}), InputRole::UserInput);
  Node *w = ph(f, "w", T(dt, {4, 3, 3, 3}), InputRole::Parameter, false, "conv.weight");
  Node *y = buildCall(f, "convolution", "aten.convolution.default",
                      {x, w, std::monostate{}, std::vector<int64_t>{2, 2}, std::vector<int64_t>{1, 1},
                       std::vector<int64_t>{1, 1}, false, std::vector<int64_t>{0, 0}, int64_t(1)},
                      {});
  f.setOutputs({y});
  p.numForwardOutputs = 1;
  return p;
}

struct FakeLinked {
  std::string dir;
  void *fake = nullptr, *obj = nullptr;
  const aotc_program *prog = nullptr;
  ~FakeLinked() {
    if (obj) dlclose(obj);
    if (fake) dlclose(fake);
    if (!dir.empty()) std::system(("rm -rf '" + dir + "'").c_str());
  }
  template <class T> T *sym(const char *name) { return (T *)dlsym(fake, name); }
};

/// Compiles `p`, links it against the fake kernels library and loads both.
void load(FakeLinked &L, const Program &p) {
  char tmpl[] = "/tmp/aotc-conv-XXXXXX";
  L.dir = mkdtemp(tmpl);
  CodegenOptions o;
  o.name = p.name;
  Artifact art = compileProgram(p, o);
  std::ofstream(L.dir + "/k.o", std::ios::binary).write((const char *)art.object.data(), (std::streamsize)art.object.size());
  std::ofstream(L.dir + "/fake.c") << kFakeKernels;
  std::string d = "'" + L.dir + "'";
  REQUIRE(std::system(("clang-19 -shared -fPIC -o " + d + "/libfake.so " + d + "/fake.c").c_str()) == 0);
  REQUIRE(std::system(("clang-19 -shared -o " + d + "/k.so " + d + "/k.o " + d +
                       "/libfake.so -lopenblas -L/usr/lib/llvm-19/lib -lomp -Wl,-rpath,/usr/lib/llvm-19/lib -lm")
                          .c_str()) == 0);
  L.fake = dlopen((L.dir + "/libfake.so").c_str(), RTLD_NOW | RTLD_GLOBAL);
  REQUIRE(L.fake);
  L.obj = dlopen((L.dir + "/k.so").c_str(), RTLD_NOW | RTLD_LOCAL);
  REQUIRE(L.obj);
  L.prog = (const aotc_program *)dlsym(L.obj, (p.name + "_program").c_str());
  REQUIRE(L.prog);
}

} // namespace

TEST_CASE("a convolution calls aotc_conv with the context's library state, a failure is the node's error") {
  for (DType dt : {DType::F32, DType::F64}) {
    INFO((dt == DType::F32 ? "f32" : "f64"));
    FakeLinked L;
    load(L, convProgram(dt));
    const aotc_program &P = *L.prog;
    int *created = L.sym<int>("fake_created"), *destroyed = L.sym<int>("fake_destroyed");
    int *calls = L.sym<int>("fake_calls"), *status = L.sym<int>("fake_status");
    int *failCreate = L.sym<int>("fake_fail_create");
    int64_t *desc = L.sym<int64_t>("fake_desc");
    const void **ptrs = L.sym<const void *>("fake_ptrs");
    REQUIRE((created && destroyed && calls && status && failCreate && desc && ptrs));
    REQUIRE(P.abi_version == AOTC_ABI_VERSION);
    REQUIRE(P.context_error);
    REQUIRE(P.num_errors == 1);
    CHECK(std::string(P.errors[0]) == "node 'convolution' (aten.convolution.default): the convolution failed in "
                                       "libaotc_kernels (the value is aotc_conv's status, aotc/kernels.h; the ABI "
                                       "context's error text says why)");
    CHECK(P.error_value_offset == 8);

    aotc_context *ctx = P.context_create();
    REQUIRE(ctx);
    CHECK((*created == 1 && *destroyed == 0));
    size_t es = dt == DType::F32 ? 4 : 8;
    Buf x = Buf((int64_t)2 * 3 * 7 * 6 * es), w = Buf((int64_t)4 * 3 * 3 * 3 * es), y = Buf((int64_t)2 * 4 * 4 * 3 * es);
    Buf scratch = Buf((int64_t)(size_t)P.scratch_bytes);
    const void *in[2] = {x.get(), w.get()};
    void *out[1] = {y.get()};
    *status = 0;
    CHECK(P.forward(ctx, in, out, nullptr, scratch.get()) == 0);
    CHECK(*calls == 1);
    CHECK(P.context_error(ctx) == nullptr);
    // The call: the state, then {dtype, role, n, c, k, groups, h, w, oh, ow, kh, kw, sH, sW, pH, pW, dH, dW}.
    aotc_conv_desc got;
    std::memcpy(&got, desc, sizeof got);
    aotc_conv_desc want = {dt == DType::F32 ? AOTC_F32 : AOTC_F64, AOTC_CONV_FORWARD, 2, 3, 4, 1, 7, 6, 4, 3, 3, 3,
                           2, 2, 1, 1, 1, 1};
    CHECK(std::memcmp(&got, &want, sizeof got) == 0);
    CHECK(ptrs[0] != nullptr);
    CHECK((ptrs[1] == x.get() && ptrs[2] == w.get() && ptrs[3] == y.get()));
    // aotc_conv_workspace_elems (kernels.h), planned by the compiler: none for f32 (oneDNN's
    // scratchpad is the state's), the im2col columns n * c/g * kh * kw * oh * ow for f64.
    if (dt == DType::F32) {
      CHECK(ptrs[4] == nullptr);
    } else {
      int64_t wsElems = 2 * 3 * 9 * 4 * 3;
      REQUIRE(ptrs[4] != nullptr);
      const char *ws = (const char *)ptrs[4], *base = (const char *)scratch.get();
      CHECK((ws >= base + 16 && ws + wsElems * 8 <= base + P.scratch_bytes));
    }
    // A failing call: the node's code, the status as the value, the library's text.
    *status = AOTC_KERNELS_ERROR_DNNL;
    int rc = P.forward(ctx, in, out, nullptr, scratch.get());
    CHECK(rc == 1);
    int64_t value = 0;
    std::memcpy(&value, (const char *)scratch.get() + P.error_value_offset, 8);
    CHECK(value == AOTC_KERNELS_ERROR_DNNL);
    REQUIRE(P.context_error(ctx) != nullptr);
    CHECK(std::string(P.context_error(ctx)) == "oneDNN: dnnl_primitive_desc_create returned unimplemented");
    CHECK(P.context_error(nullptr) == nullptr);
    // A context of another program has no text here, and is refused by the entry points.
    aotc_context *fake = (aotc_context *)scratch.get();
    CHECK(P.context_error(fake) == nullptr);
    CHECK(*created == 1); // the state was made once, in context_create
    P.context_destroy(ctx);
    CHECK(*destroyed == 1);
    P.context_destroy(nullptr);
    CHECK(*destroyed == 1);
    // No state, no context.
    *failCreate = 1;
    CHECK(P.context_create() == nullptr);
  }
}

TEST_CASE("a program without convolutions has no library state and no library text") {
  auto L = compileAndLoad(linearReluSum());
  REQUIRE(L->prog);
  REQUIRE(L->prog->context_error);
  aotc_context *ctx = L->prog->context_create();
  REQUIRE(ctx);
  CHECK(L->prog->context_error(ctx) == nullptr);
  L->prog->context_destroy(ctx);
}
