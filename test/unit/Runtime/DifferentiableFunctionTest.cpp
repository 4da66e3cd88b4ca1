//===- DifferentiableFunctionTest.cpp - runtime over a hand-written program -===//
//
// A fake aotc_program written in C++ stands in for a generated object:
//   inputs  w: f32[4] (parameter), x: f32[4] (user input, requires grad)
//   forward : s = w*x (in scratch), t = tanh(s) (saved), out0 = sum(t) (f32[]),
//             out1 = number of t > 0 (i64[], not differentiable)
//   backward: u = g*(1 - t^2) (in scratch), grad_w = u*x, grad_x = u*w
// Error 1: a non-NULL tangent for the integer output; error 2: |x| > 1000
// (the value = index, stored at scratch + 16 = error_value_offset), like a generated
// bounds check.
//===----------------------------------------------------------------------===//
#include "aotc/capi.h"
#include "aotc/runtime.h"

#include <catch2/catch.hpp>

#include <cmath>
#include <cstdint>
#include <cstring>
#include <thread>
#include <utility>

using namespace aotc::rt;

namespace {

const int64_t kShape4[] = {4};
const aotc_tensor_desc kInputs[] = {
    {"w", AOTC_F32, AOTC_ROLE_PARAMETER, 1, 1, kShape4, 4, 16, -1, 0},
    {"x", AOTC_F32, AOTC_ROLE_USER_INPUT, 1, 1, kShape4, 4, 16, -1, 0},
};
const aotc_tensor_desc kOutputs[] = {
    {"output_0", AOTC_F32, AOTC_ROLE_OUTPUT, 0, 0, nullptr, 1, 4, -1, 0},
    {"output_1", AOTC_I64, AOTC_ROLE_OUTPUT, 0, 0, nullptr, 1, 8, -1, 0},
};
const aotc_tensor_desc kGrads[] = {
    {"w", AOTC_F32, AOTC_ROLE_GRAD, 1, 0, kShape4, 4, 16, -1, 0},
    {"x", AOTC_F32, AOTC_ROLE_GRAD, 1, 0, kShape4, 4, 16, -1, 0},
};
const int32_t kGradIndex[] = {0, 1};
const char *const kErrors[] = {
    "node 'tangents_2' (placeholder): a tangent was given for a non-floating output",
    "node 'gather' (aten.gather.default): index out of range",
};
void setErrorValue(void *scratch, int64_t v) { std::memcpy(static_cast<char *>(scratch) + 16, &v, 8); }

// The fake's ABI context (a generated object keeps library state there); the test counts how
// often one is made and destroyed.
int gContextsCreated = 0, gContextsDestroyed = 0;
} // namespace
struct aotc_context {
  const void *owner;
};
namespace {
aotc_context *fakeCreate() {
  ++gContextsCreated;
  return new aotc_context{reinterpret_cast<const void *>(&fakeCreate)};
}
void fakeDestroy(aotc_context *c) {
  if (c) ++gContextsDestroyed;
  delete c;
}
bool badContext(aotc_context *c) { return !c || c->owner != reinterpret_cast<const void *>(&fakeCreate); }

int fakeForward(aotc_context *ctx, const void *const *in, void *const *out, void *saved, void *scratch) {
  if (badContext(ctx)) return AOTC_ERROR_CONTEXT;
  const float *w = static_cast<const float *>(in[0]);
  const float *x = static_cast<const float *>(in[1]);
  float *s = static_cast<float *>(scratch);
  float *t = static_cast<float *>(saved);
  for (int i = 0; i < 4; ++i) {
    if (std::fabs(x[i]) > 1000) {
      setErrorValue(scratch, i);
      return 2;
    }
    s[i] = w[i] * x[i];
  }
  float sum = 0;
  int64_t pos = 0;
  for (int i = 0; i < 4; ++i) {
    t[i] = std::tanh(s[i]);
    sum += t[i];
    pos += t[i] > 0;
  }
  *static_cast<float *>(out[0]) = sum;
  *static_cast<int64_t *>(out[1]) = pos;
  return 0;
}

int fakeBackward(aotc_context *ctx, const void *const *in, const void *saved, const void *const *tangents,
                 void *const *grads, void *scratch) {
  if (badContext(ctx)) return AOTC_ERROR_CONTEXT;
  if (tangents[1] != nullptr) {
    setErrorValue(scratch, 1);
    return 1;
  }
  const float *w = static_cast<const float *>(in[0]);
  const float *x = static_cast<const float *>(in[1]);
  const float *t = static_cast<const float *>(saved);
  float g = *static_cast<const float *>(tangents[0]);
  float *u = static_cast<float *>(scratch);
  for (int i = 0; i < 4; ++i)
    u[i] = g * (1 - t[i] * t[i]);
  for (int i = 0; i < 4; ++i) {
    static_cast<float *>(grads[0])[i] = u[i] * x[i];
    static_cast<float *>(grads[1])[i] = u[i] * w[i];
  }
  return 0;
}

const aotc_program kFake = {AOTC_ABI_VERSION, "fake", 2, kInputs, 2, kOutputs, 2, kGrads,
                            kGradIndex,       16,     24, fakeForward, fakeBackward, 2, kErrors,
                            16, "0123456789abcdef0123456789abcdef", 0, 0, fakeCreate, fakeDestroy, nullptr};

Tensor vec4(float a, float b, float c, float d) {
  Tensor t(DType::F32, {4});
  float v[4] = {a, b, c, d};
  for (int i = 0; i < 4; ++i)
    t.data<float>()[i] = v[i];
  return t;
}

/// Independent reference in double: loss and both gradients for cotangent g.
struct Ref {
  double loss;
  double gw[4], gx[4];
};
Ref reference(const Tensor &w, const Tensor &x, double g) {
  Ref r{0, {}, {}};
  for (int i = 0; i < 4; ++i) {
    double wi = w.at(i), xi = x.at(i), t = std::tanh(wi * xi);
    r.loss += t;
    r.gw[i] = g * (1 - t * t) * xi;
    r.gx[i] = g * (1 - t * t) * wi;
  }
  return r;
}

void checkGrads(const std::vector<Tensor> &grads, const Ref &r) {
  REQUIRE(grads.size() == 2);
  for (int i = 0; i < 4; ++i) {
    CHECK(grads[0].at(i) == Approx(r.gw[i]).epsilon(1e-5));
    CHECK(grads[1].at(i) == Approx(r.gx[i]).epsilon(1e-5));
  }
}

} // namespace

TEST_CASE("the ABI context is created once per function, used by every call, destroyed with it") {
  int created = gContextsCreated, destroyed = gContextsDestroyed;
  {
    DifferentiableFunction f(kFake);
    CHECK(gContextsCreated == created + 1);
    Tensor w = vec4(0.5f, -1.0f, 2.0f, 0.25f), x = vec4(1.0f, 0.3f, -0.2f, 4.0f);
    for (int k = 0; k < 3; ++k) {
      auto r = f.forward({&w, &x});
      f.backward(r.state);
    }
    CHECK(gContextsCreated == created + 1);
    CHECK(gContextsDestroyed == destroyed);
    DifferentiableFunction g = std::move(f); // the context moves with the function
    auto r = g.forward({&w, &x});
    g.backward(r.state);
  }
  CHECK(gContextsCreated == created + 1);
  CHECK(gContextsDestroyed == destroyed + 1);
  // An entry point called with another program's context (or NULL) refuses to run.
  alignas(64) unsigned char buf[256] = {};
  CHECK(kFake.forward(nullptr, nullptr, nullptr, buf, buf) == AOTC_ERROR_CONTEXT);
}

TEST_CASE("two forwards into two saved states, backwards in reverse order, NaN scratch in between") {
  DifferentiableFunction f(kFake);
  Tensor w1 = vec4(0.5f, -1.0f, 2.0f, 0.25f), x1 = vec4(1.0f, 0.3f, -0.2f, 4.0f);
  Tensor w2 = vec4(-0.7f, 0.1f, 1.5f, -2.0f), x2 = vec4(0.9f, -3.0f, 0.4f, 0.05f);
  Ref r1 = reference(w1, x1, 1.0), r2 = reference(w2, x2, 2.5);

  f.poisonScratch();
  auto a = f.forward({&w1, &x1});
  f.poisonScratch();
  auto b = f.forward({&w2, &x2});
  f.poisonScratch();
  CHECK(a.outputs[0].at(0) == Approx(r1.loss).epsilon(1e-6));
  CHECK(b.outputs[0].at(0) == Approx(r2.loss).epsilon(1e-6));
  CHECK(a.outputs[1].dtype() == DType::I64);
  CHECK(a.outputs[1].at(0) == 2); // w1*x1 = 0.5, -0.3, -0.4, 1.0
  CHECK(b.outputs[1].at(0) == 1); // w2*x2 = -0.63, -0.3, 0.6, -0.1

  Tensor g2 = Tensor::full(DType::F32, {}, 2.5);
  auto gradsB = f.backward(b.state, {&g2, nullptr});
  f.poisonScratch();
  auto gradsA = f.backward(a.state); // default cotangent of the 0-d loss: 1
  checkGrads(gradsB, r2);
  checkGrads(gradsA, r1);
  CHECK_FALSE(a.state.valid());
  CHECK_THROWS_WITH(f.backward(a.state), Catch::Contains("was not consumed yet"));
}

TEST_CASE("the next forward reuses the saved area of the state backward consumed") {
  DifferentiableFunction f(kFake);
  Tensor w1 = vec4(0.5f, -1.0f, 2.0f, 0.25f), x1 = vec4(1.0f, 0.3f, -0.2f, 4.0f);
  Tensor w2 = vec4(-0.7f, 0.1f, 1.5f, -2.0f), x2 = vec4(0.9f, -3.0f, 0.4f, 0.05f);
  Ref r2 = reference(w2, x2, 1.0);
  auto a = f.forward({&w1, &x1});
  const uint8_t *area = a.state.saved().data();
  f.backward(a.state);
  auto b = f.forward({&w2, &x2}); // over the first step's saved values, not zeros
  CHECK(b.state.saved().data() == area);
  auto c = f.forward({&w1, &x1}); // b's area is still in use: a fresh one
  CHECK(c.state.saved().data() != area);
  CHECK(b.outputs[0].at(0) == Approx(r2.loss).epsilon(1e-6));
  checkGrads(f.backward(b.state), r2);
  f.backward(c.state);
}

TEST_CASE("names, indices and caller checks name the tensor") {
  DifferentiableFunction f(kFake);
  CHECK(f.inputIndex("x") == 1);
  CHECK(f.inputIndex("nope") == -1);
  CHECK(f.gradIndex("w") == 0);
  Tensor w = vec4(1, 2, 3, 4);
  Tensor xBad(DType::F32, {5});
  // Another size of a user input: the size was fixed at export, and the message says so.
  CHECK_THROWS_WITH(f.forward({&w, &xBad}), "fake: input 'x' (input 1) must be f32[4], got f32[5] (a user input's "
                                            "sizes were fixed when the model was exported, from the example input "
                                            "torch.export saw: export again with an example of this size; dynamic "
                                            "sizes are not supported yet)");
  Tensor xF64(DType::F64, {4});
  CHECK_THROWS_WITH(f.forward({&w, &xF64}), Catch::EndsWith("must be f32[4], got f64[4]")); // a dtype: no note
  Tensor wBad(DType::F32, {5});
  CHECK_THROWS_WITH(f.forward({&wBad, &xBad}), Catch::EndsWith("must be f32[4], got f32[5]")); // a parameter: no note
  CHECK_THROWS_WITH(f.forward({&w}), "fake: forward expects 2 inputs, got 1");
  CHECK_THROWS_WITH(f.forward({nullptr, &w}), Catch::Contains("parameter 'w' (input 0) is null"));

  Tensor x = vec4(1, 1, 1, 1);
  auto r = f.forward({&w, &x});
  Tensor g64 = Tensor::full(DType::F64, {}, 1.0);
  CHECK_THROWS_WITH(f.backward(r.state, {&g64}),
                    "fake: gradient of output 'output_0' (output 0) must be f32[], got f64[]");
  Tensor gi = Tensor::full(DType::I64, {}, 1.0);
  Tensor g = Tensor::full(DType::F32, {}, 1.0);
  CHECK_THROWS_WITH(f.backward(r.state, {&g, &gi}), Catch::Contains("not differentiable"));
  CHECK(r.state.valid()); // a rejected call does not consume the saved state
}

TEST_CASE("entry point error codes become exceptions naming the node and value") {
  DifferentiableFunction f(kFake);
  Tensor w = vec4(1, 2, 3, 4), x = vec4(0, 0, 5000, 0);
  CHECK_THROWS_WITH(f.forward({&w, &x}),
                    "fake_forward failed with code 2: node 'gather' (aten.gather.default): index "
                    "out of range (value 2)");
}

// ABI 5: a library call's failure (a convolution) adds the library's text, read from the
// context the call used (context_error), to the node's message.
const char *fakeContextError(const aotc_context *c) {
  return c && c->owner == reinterpret_cast<const void *>(&fakeCreate)
             ? "aotc_conv f32 forward ...: oneDNN: dnnl_primitive_desc_create(convolution forward) returned "
               "unimplemented"
             : nullptr;
}

TEST_CASE("a failed library call's message carries the context's error text") {
  aotc_program p = kFake;
  p.context_error = fakeContextError;
  DifferentiableFunction f(p);
  Tensor w = vec4(1, 2, 3, 4), x = vec4(0, 0, 5000, 0);
  CHECK_THROWS_WITH(f.forward({&w, &x}),
                    "fake_forward failed with code 2: node 'gather' (aten.gather.default): index "
                    "out of range (value 2): aotc_conv f32 forward ...: oneDNN: "
                    "dnnl_primitive_desc_create(convolution forward) returned unimplemented");
  // A NULL text (no library error) adds nothing.
  p.context_error = [](const aotc_context *) -> const char * { return nullptr; };
  DifferentiableFunction g(p);
  CHECK_THROWS_WITH(g.forward({&w, &x}), Catch::EndsWith("index out of range (value 2)"));
}

TEST_CASE("sgdStep subtracts lr * grad and checks pairs") {
  Tensor p = vec4(1, 2, 3, 4);
  std::vector<Tensor> g;
  g.push_back(vec4(10, -10, 0.5f, 0));
  sgdStep({&p}, g, 0.1);
  CHECK(p.at(0) == Approx(0.0).margin(1e-6));
  CHECK(p.at(1) == Approx(3.0));
  CHECK(p.at(2) == Approx(2.95));
  CHECK(p.at(3) == 4.0);
  Tensor q(DType::F32, {3});
  CHECK_THROWS_WITH(sgdStep({&q}, g, 0.1),
                    "sgdStep: parameter 0 is f32[3] but its gradient is f32[4]");
  CHECK_THROWS_WITH(sgdStep({&p, &q}, g, 0.1), "sgdStep: 2 parameters but 1 gradients");
}

TEST_CASE("a program with another ABI version is refused") {
  aotc_program old = kFake;
  old.abi_version = 99;
  CHECK_THROWS_WITH(DifferentiableFunction(old), Catch::Contains("has ABI version 99"));
}

TEST_CASE("buffers are 64-byte aligned and zero-initialized") {
  for (int64_t n : {0, 1, 63, 64, 1000}) {
    AlignedBuffer b(n);
    CHECK(reinterpret_cast<uintptr_t>(b.data()) % 64 == 0);
    for (int64_t i = 0; i < n; ++i)
      REQUIRE(b.data()[i] == 0);
  }
  CHECK_THROWS_AS(Tensor(DType::F32, {2, -1}), RuntimeError);
}

namespace {
// A program whose forward updates its buffer (x <- x + 1, as buf.add_(1)): out[1] is the new
// value of in[1] (updates_input = 1), loss = sum(w * x) with the old x.
const aotc_tensor_desc kMutInputs[] = {
    {"w", AOTC_F32, AOTC_ROLE_PARAMETER, 1, 1, kShape4, 4, 16, -1, 0},
    {"buf", AOTC_F32, AOTC_ROLE_BUFFER, 1, 0, kShape4, 4, 16, -1, 0},
};
const aotc_tensor_desc kMutOutputs[] = {
    {"loss", AOTC_F32, AOTC_ROLE_OUTPUT, 0, 0, nullptr, 1, 4, -1, 0},
    {"add", AOTC_F32, AOTC_ROLE_OUTPUT, 1, 0, kShape4, 4, 16, 1, 0},
};
const aotc_tensor_desc kMutGrads[] = {{"w", AOTC_F32, AOTC_ROLE_GRAD, 1, 0, kShape4, 4, 16, -1, 0}};
const int32_t kMutGradIndex[] = {0};
int mutForward(aotc_context *ctx, const void *const *in, void *const *out, void *, void *) {
  if (badContext(ctx)) return AOTC_ERROR_CONTEXT;
  const float *w = static_cast<const float *>(in[0]), *b = static_cast<const float *>(in[1]);
  float s = 0;
  for (int i = 0; i < 4; ++i) {
    s += w[i] * b[i];
    static_cast<float *>(out[1])[i] = b[i] + 1;
  }
  *static_cast<float *>(out[0]) = s;
  return 0;
}
int mutBackward(aotc_context *ctx, const void *const *in, const void *, const void *const *tangents,
                void *const *grads, void *) {
  if (badContext(ctx)) return AOTC_ERROR_CONTEXT;
  if (tangents[1] != nullptr) return 1; // a mutated input's new value takes no tangent
  float g = *static_cast<const float *>(tangents[0]);
  for (int i = 0; i < 4; ++i)
    static_cast<float *>(grads[0])[i] = g * static_cast<const float *>(in[1])[i];
  return 0;
}
const char *const kMutErrors[] = {"a tangent was passed for the mutated buffer"};
const aotc_program kMut = {AOTC_ABI_VERSION, "mut", 2, kMutInputs, 2, kMutOutputs, 1, kMutGrads,
                           kMutGradIndex, 0, 0, mutForward, mutBackward, 1, kMutErrors, -1,
                           "0123456789abcdef0123456789abcdef", 0, 0, fakeCreate, fakeDestroy, nullptr};
} // namespace

TEST_CASE("writeBack copies a mutated buffer's new value after the backward and takes no tangent") {
  DifferentiableFunction f(kMut);
  Tensor w = vec4(1, 2, 3, 4), buf = vec4(0.5f, 0, -1, 2);
  auto r = f.forward({&w, &buf});
  CHECK(r.outputs[0].at(0) == Approx(0.5 - 3 + 8));
  CHECK_THROWS_WITH(f.backward(r.state, {nullptr, &r.outputs[1]}),
                    Catch::Contains("output 'add' (output 1) is the new value of input 'buf', not differentiable"));
  std::vector<Tensor> g = f.backward(r.state); // the tangent of out[1] is NULL
  CHECK(g[0].at(0) == 0.5);                     // d loss / d w = the buffer's value *before* the step
  CHECK(buf.at(0) == 0.5f);                     // nothing written yet
  CHECK(f.writeBack({&w, &buf}, r.outputs) == 1);
  for (int i = 0; i < 4; ++i) CHECK(buf.at(i) == (double)(std::vector<float>{1.5f, 1, 0, 3}[i]));
  CHECK(w.at(0) == 1.0f); // only the updated input changes
  CHECK_THROWS_WITH(f.writeBack({&w}, r.outputs), Catch::Contains("writeBack needs 2 inputs and 2 outputs, got 1 and 2"));
  Tensor wrong(DType::F32, {3});
  CHECK_THROWS_WITH(f.writeBack({&w, &wrong}, r.outputs),
                    Catch::Contains("writeBack of buffer 'buf' needs f32[4], got input f32[3]"));
  DifferentiableFunction plain(kFake);
  Tensor x = vec4(1, 1, 1, 1);
  auto p = plain.forward({&w, &x});
  CHECK(plain.writeBack({&w, &x}, p.outputs) == 0);
}

//===--- The C API (aotc/capi.h) over the same fake program ---------------===//

namespace {

std::vector<Tensor> pair(const Tensor &a, const Tensor &b) {
  std::vector<Tensor> v;
  v.push_back(a.clone());
  v.push_back(b.clone());
  return v;
}

/// The calling thread's last error as (status, message).
std::pair<int, std::string> lastError() {
  aotc_rt_error_info info{};
  int st = aotc_rt_last_error_info(&info);
  return {st, info.message};
}

} // namespace

TEST_CASE("C API: forward and backward on caller buffers match the reference and the C++ class") {
  REQUIRE(aotc_rt_abi_version() == AOTC_ABI_VERSION);
  aotc_rt_function *fn = nullptr;
  REQUIRE(aotc_rt_function_create(&kFake, &fn) == AOTC_RT_OK);
  Tensor w = vec4(0.5f, -1.0f, 2.0f, 0.25f), x = vec4(1.0f, 0.3f, -0.2f, 4.0f);
  Tensor loss(DType::F32, {}), pos(DType::I64, {}), gw(DType::F32, {4}), gx(DType::F32, {4});
  AlignedBuffer saved(kFake.saved_bytes);
  aotc_rt_tensor in[] = {w.ref(), x.ref()}, out[] = {loss.ref(), pos.ref()}, grads[] = {gw.ref(), gx.ref()};
  REQUIRE(aotc_rt_forward(fn, in, 2, out, 2, saved.data(), saved.size()) == AOTC_RT_OK);
  const Ref r = reference(w, x, 1.0);
  CHECK(loss.at(0) == Approx(r.loss).epsilon(1e-6));
  // No tangents: the 0-d loss gets 1, the integer output NULL.
  REQUIRE(aotc_rt_backward(fn, in, 2, saved.data(), saved.size(), nullptr, 0, grads, 2) == AOTC_RT_OK);
  checkGrads(pair(gw, gx), r);
  // An explicit cotangent 2 (and a NULL entry for the integer output).
  Tensor two = Tensor::full(DType::F32, {}, 2.0);
  aotc_rt_tensor tans[] = {two.ref(), {nullptr, AOTC_I64, 0, nullptr}};
  REQUIRE(aotc_rt_backward(fn, in, 2, saved.data(), saved.size(), tans, 2, grads, 2) == AOTC_RT_OK);
  checkGrads(pair(gw, gx), reference(w, x, 2.0));
  // The C++ class on Tensors gives the same bits.
  DifferentiableFunction f(kFake);
  auto fr = f.forward({&w, &x});
  CHECK(std::memcmp(fr.outputs[0].data(), loss.data(), 4) == 0);
  aotc_rt_function_destroy(fn);
  aotc_rt_function_destroy(nullptr);
}

TEST_CASE("C API: bad arguments are refused with a status and a message naming the tensor, and nothing runs") {
  aotc_rt_function *fn = nullptr;
  REQUIRE(aotc_rt_function_create(&kFake, &fn) == AOTC_RT_OK);
  Tensor w = vec4(1, 2, 3, 4), x = vec4(1, 1, 1, 1), x5(DType::F32, {5}), x64(DType::F64, {4});
  Tensor loss(DType::F32, {}), pos(DType::I64, {});
  AlignedBuffer saved(kFake.saved_bytes);
  aotc_rt_tensor out[] = {loss.ref(), pos.ref()};
  auto forward = [&](std::vector<aotc_rt_tensor> in) {
    return aotc_rt_forward(fn, in.data(), (int32_t)in.size(), out, 2, saved.data(), saved.size());
  };
  CHECK(forward({w.ref()}) == AOTC_RT_ERROR_ARGUMENT);
  CHECK(lastError().second == "fake: forward expects 2 inputs, got 1");
  CHECK(forward({w.ref(), x5.ref()}) == AOTC_RT_ERROR_ARGUMENT);
  CHECK(lastError().second == "fake: input 'x' (input 1) must be f32[4], got f32[5] (a user input's sizes were "
                              "fixed when the model was exported, from the example input torch.export saw: export "
                              "again with an example of this size; dynamic sizes are not supported yet)");
  CHECK(forward({w.ref(), x64.ref()}) == AOTC_RT_ERROR_ARGUMENT);
  CHECK(lastError().second == "fake: input 'x' (input 1) must be f32[4], got f64[4]");
  aotc_rt_tensor nul = w.ref();
  nul.data = nullptr;
  CHECK(forward({nul, x.ref()}) == AOTC_RT_ERROR_ARGUMENT);
  CHECK(lastError().second == "fake: parameter 'w' (input 0) is null");
  AlignedBuffer raw(64 + 16);
  aotc_rt_tensor odd = x.ref();
  odd.data = raw.data() + 4;
  CHECK(forward({w.ref(), odd}) == AOTC_RT_ERROR_ARGUMENT);
  CHECK_THAT(lastError().second, Catch::StartsWith("fake: input 'x' (input 1) is not 64-byte aligned"));
  CHECK(aotc_rt_forward(fn, nullptr, 2, out, 2, saved.data(), saved.size()) == AOTC_RT_ERROR_ARGUMENT);
  CHECK(aotc_rt_forward(fn, std::vector<aotc_rt_tensor>{w.ref(), x.ref()}.data(), 2, out, 2, saved.data(), 8) ==
        AOTC_RT_ERROR_ARGUMENT);
  CHECK(lastError().second == "fake: the saved area must be 16 bytes, got 8");
  CHECK(aotc_rt_forward(nullptr, nullptr, 0, nullptr, 0, nullptr, 0) == AOTC_RT_ERROR_ARGUMENT);
  CHECK(lastError().second == "aotc_rt_forward: fn is NULL");
  // A tangent for the integer output.
  Tensor gi = Tensor::full(DType::I64, {}, 1.0), gw(DType::F32, {4}), gx(DType::F32, {4});
  aotc_rt_tensor in[] = {w.ref(), x.ref()}, grads[] = {gw.ref(), gx.ref()};
  aotc_rt_tensor tans[] = {{nullptr, AOTC_F32, 0, nullptr}, gi.ref()};
  REQUIRE(forward({w.ref(), x.ref()}) == AOTC_RT_OK);
  CHECK(aotc_rt_backward(fn, in, 2, saved.data(), saved.size(), tans, 2, grads, 2) == AOTC_RT_ERROR_ARGUMENT);
  CHECK_THAT(lastError().second, Catch::Contains("output 'output_1' (output 1) is i64[], not differentiable"));
  CHECK(aotc_rt_backward(fn, in, 2, saved.data(), saved.size(), nullptr, 0, grads, 1) == AOTC_RT_ERROR_ARGUMENT);
  CHECK(lastError().second == "fake: backward expects 2 gradients, got 1");
  // This fake has no eval entry point.
  CHECK(aotc_rt_eval(fn, in, 2, out, 2) == AOTC_RT_ERROR_ABI);
  aotc_rt_function_destroy(fn);
}

TEST_CASE("C API: an entry point's error code and value reach the error info") {
  aotc_program p = kFake;
  p.context_error = fakeContextError;
  aotc_rt_function *fn = nullptr;
  REQUIRE(aotc_rt_function_create(&p, &fn) == AOTC_RT_OK);
  Tensor w = vec4(1, 2, 3, 4), x = vec4(0, 0, 0, 5000), loss(DType::F32, {}), pos(DType::I64, {});
  AlignedBuffer saved(p.saved_bytes);
  aotc_rt_tensor in[] = {w.ref(), x.ref()}, out[] = {loss.ref(), pos.ref()};
  CHECK(aotc_rt_forward(fn, in, 2, out, 2, saved.data(), saved.size()) == AOTC_RT_ERROR_PROGRAM);
  aotc_rt_error_info info{};
  CHECK(aotc_rt_last_error_info(&info) == AOTC_RT_ERROR_PROGRAM);
  CHECK(info.entry_code == 2);
  CHECK(info.value == 3);
  CHECK(std::string(info.entry) == "forward");
  CHECK(std::string(info.node_message) == "node 'gather' (aten.gather.default): index out of range");
  CHECK_THAT(std::string(info.library_message), Catch::StartsWith("aotc_conv f32 forward"));
  CHECK_THAT(std::string(aotc_rt_last_error()), Catch::StartsWith("fake_forward failed with code 2"));
  // Errors are per thread: another thread has none.
  std::string other = "unset";
  std::thread([&] { other = aotc_rt_last_error(); }).join();
  CHECK(other.empty());
  aotc_rt_function_destroy(fn);
}

TEST_CASE("C API: programs are checked, another major version is refused, another minor runs") {
  CHECK(aotc_rt_program_check(nullptr) == AOTC_RT_ERROR_ABI);
  aotc_program p = kFake;
  p.abi_version = (AOTC_ABI_MINOR + 1) << 16 | AOTC_ABI_MAJOR; // a newer minor: compatible additions
  CHECK(aotc_rt_program_check(&p) == AOTC_RT_OK);
  p.abi_version = AOTC_ABI_MAJOR + 1;
  CHECK(aotc_rt_program_check(&p) == AOTC_RT_ERROR_ABI);
  const std::string next = std::to_string(AOTC_ABI_MAJOR + 1) + ".0";
  CHECK_THAT(std::string(aotc_rt_last_error()),
             Catch::Contains("has ABI version " + next + ", this runtime runs major version " +
                             std::to_string(AOTC_ABI_MAJOR)));
  CHECK_THROWS_WITH(DifferentiableFunction(p), Catch::Contains("has ABI version " + next));
  p.abi_version = AOTC_ABI_MAJOR - 1;
  CHECK(aotc_rt_program_check(&p) == AOTC_RT_ERROR_ABI);
  p = kFake;
  p.num_inputs = -1;
  CHECK(aotc_rt_program_check(&p) == AOTC_RT_ERROR_ABI);
  CHECK_THAT(std::string(aotc_rt_last_error()), Catch::Contains("invalid descriptor (inputs: count -1"));
  p = kFake;
  p.error_value_offset = 20; // + 8 > scratch_bytes 24
  CHECK(aotc_rt_program_check(&p) == AOTC_RT_ERROR_ABI);
  aotc_rt_function *fn = reinterpret_cast<aotc_rt_function *>(1);
  CHECK(aotc_rt_function_create(&p, &fn) == AOTC_RT_ERROR_ABI);
  CHECK(fn == nullptr);
}

TEST_CASE("C API: the descriptor as JSON") {
  size_t needed = 0;
  CHECK(aotc_rt_program_describe(&kFake, nullptr, 0, &needed) == AOTC_RT_ERROR_ARGUMENT);
  REQUIRE(needed > 100);
  std::string buf(needed, '\0');
  REQUIRE(aotc_rt_program_describe(&kFake, buf.data(), buf.size(), &needed) == AOTC_RT_OK);
  const std::string j = buf.c_str();
  CHECK_THAT(j, Catch::Contains(R"("name":"fake")"));
  CHECK_THAT(j, Catch::Contains(R"({"bytes":16,"dtype":0,"name":"x","numel":4,"requires_grad":1,"role":2,"shape":[4],"updates_input":-1})"));
  CHECK_THAT(j, Catch::Contains(R"("grad_input_index":[0,1])"));
  CHECK_THAT(j, Catch::Contains(R"("train":null)"));
  CHECK_THAT(j, Catch::Contains(R"("has_eval":false)"));
}
