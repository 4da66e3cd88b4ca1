//===- ConvTest.cpp - libaotc_kernels' convolutions (aotc/kernels.h) ------===//
//
// oneDNN's f32 forward / input-grad / weight-grad against the f64 im2col path on the same
// (f32-valued) data, over 1-D, 2-D, strided with uneven sizes, padded, dilated, grouped,
// depthwise and 1x1 geometries: err = max|a - b| / max|b| below 1e-5. Then the state's
// primitive cache (a second call with a descriptor creates nothing), bit-for-bit repeat
// runs, and bad input (error codes and messages, never a crash).
//===----------------------------------------------------------------------===//
#include "aotc/abi.h"
#include "aotc/kernels.h"

#include <catch2/catch.hpp>

#include <cmath>
#include <cstdint>
#include <cstring>
#include <memory>
#include <string>
#include <vector>

namespace {

struct StateDeleter {
  void operator()(aotc_kernels_state *s) const { aotc_kernels_state_destroy(s); }
};
using State = std::unique_ptr<aotc_kernels_state, StateDeleter>;

/// A regular convolution's descriptor, output size from the formula of kernels.h.
aotc_conv_desc geometry(int64_t n, int64_t c, int64_t k, int64_t groups, int64_t h, int64_t w, int64_t kh,
                        int64_t kw, int64_t sh, int64_t sw, int64_t ph, int64_t pw, int64_t dh, int64_t dw) {
  aotc_conv_desc d{};
  d.dtype = AOTC_F32;
  d.n = n, d.c = c, d.k = k, d.groups = groups, d.h = h, d.w = w, d.kh = kh, d.kw = kw;
  d.stride_h = sh, d.stride_w = sw, d.pad_h = ph, d.pad_w = pw, d.dil_h = dh, d.dil_w = dw;
  d.oh = (h + 2 * ph - dh * (kh - 1) - 1) / sh + 1;
  d.ow = (w + 2 * pw - dw * (kw - 1) - 1) / sw + 1;
  return d;
}

struct Case {
  const char *name;
  aotc_conv_desc d;
};

std::vector<Case> cases() {
  return {
      {"1-D (h = kh = 1), padding 2", geometry(2, 3, 4, 1, 1, 17, 1, 5, 1, 1, 0, 2, 1, 1)},
      {"2-D 3x3 padding 1", geometry(2, 3, 5, 1, 9, 8, 3, 3, 1, 1, 1, 1, 1, 1)},
      {"stride 2, (h + 2p - k) % s != 0 in both dims", geometry(2, 4, 6, 1, 10, 8, 3, 3, 2, 2, 1, 1, 1, 1)},
      {"stride 3 x 2, uneven, no padding", geometry(3, 2, 3, 1, 11, 9, 3, 2, 3, 2, 0, 0, 1, 1)},
      {"padding 2 > kernel / 2", geometry(2, 3, 4, 1, 6, 7, 3, 3, 1, 1, 2, 2, 1, 1)},
      {"dilation 2, padding 2", geometry(2, 3, 4, 1, 12, 11, 3, 3, 1, 1, 2, 2, 2, 2)},
      {"dilation 2 x 3, stride 2, rectangular kernel", geometry(2, 4, 4, 1, 13, 15, 2, 3, 2, 2, 1, 2, 2, 3)},
      {"groups 2", geometry(2, 4, 6, 2, 8, 8, 3, 3, 1, 1, 1, 1, 1, 1)},
      {"groups 3, stride 2, dilation 2", geometry(2, 6, 9, 3, 11, 10, 3, 3, 2, 2, 2, 1, 2, 2)},
      {"depthwise (groups = c = k)", geometry(2, 8, 8, 8, 9, 9, 3, 3, 1, 1, 1, 1, 1, 1)},
      {"depthwise, channel multiplier 2, stride 2", geometry(2, 4, 8, 4, 10, 9, 3, 3, 2, 2, 1, 1, 1, 1)},
      {"1x1", geometry(2, 16, 8, 1, 7, 7, 1, 1, 1, 1, 0, 0, 1, 1)},
      {"1x1 stride 2", geometry(2, 16, 8, 1, 7, 8, 1, 1, 2, 2, 0, 0, 1, 1)},
      {"1-D stride 2 dilation 3 groups 2", geometry(3, 4, 6, 2, 1, 29, 1, 4, 1, 2, 0, 3, 1, 3)},
      {"ResNet-like 3x3, 32 channels", geometry(2, 32, 32, 1, 16, 16, 3, 3, 1, 1, 1, 1, 1, 1)},
      // Enough work for 4 batch chunks of 1, 2, 2, 2 entries (two primitives per role; the
      // weight gradient sums 4 partial gradients): ConvDnnl.c convChunks.
      {"batch 7 in uneven chunks, groups 2", geometry(7, 16, 32, 2, 12, 12, 3, 3, 1, 1, 1, 1, 1, 1)},
  };
}

/// Deterministic values in [-1, 1) (a 64-bit LCG), exactly representable in f32.
std::vector<float> values(int64_t count, uint64_t seed) {
  std::vector<float> v((size_t)count);
  uint64_t x = seed * 6364136223846793005ull + 1442695040888963407ull;
  for (auto &e : v) {
    x = x * 6364136223846793005ull + 1442695040888963407ull;
    e = (float)((int64_t)(x >> 40) - (1 << 23)) / (float)(1 << 23);
  }
  return v;
}

int64_t xElems(const aotc_conv_desc &d) { return d.n * d.c * d.h * d.w; }
int64_t wElems(const aotc_conv_desc &d) { return d.k * (d.c / d.groups) * d.kh * d.kw; }
int64_t yElems(const aotc_conv_desc &d) { return d.n * d.k * d.oh * d.ow; }

/// Operand sizes (a, b, c) of role `d.role`.
void sizes(const aotc_conv_desc &d, int64_t &a, int64_t &b, int64_t &c) {
  switch (d.role) {
  case AOTC_CONV_FORWARD: a = xElems(d), b = wElems(d), c = yElems(d); break;
  case AOTC_CONV_INPUT_GRAD: a = yElems(d), b = wElems(d), c = xElems(d); break;
  default: a = yElems(d), b = xElems(d), c = wElems(d); break;
  }
}

/// The f64 im2col result of `d` on a, b (aotc_conv with an f64 descriptor, no state).
std::vector<double> reference(aotc_conv_desc d, const std::vector<float> &a, const std::vector<float> &b,
                              int64_t cElems) {
  d.dtype = AOTC_F64;
  std::vector<double> a64(a.begin(), a.end()), b64(b.begin(), b.end()), c64((size_t)cElems, NAN);
  std::vector<double> ws((size_t)std::max<int64_t>(1, aotc_conv_workspace_elems(&d)));
  REQUIRE(aotc_conv(nullptr, &d, a64.data(), b64.data(), c64.data(), ws.data()) == AOTC_KERNELS_OK);
  return c64;
}

/// max|got - want| / max|want|.
double relErr(const std::vector<float> &got, const std::vector<double> &want) {
  double num = 0, den = 0;
  for (size_t i = 0; i < want.size(); ++i) {
    num = std::max(num, std::fabs((double)got[i] - want[i]));
    den = std::max(den, std::fabs(want[i]));
  }
  return std::isnan(num) ? INFINITY : den > 0 ? num / den : num;
}

const char *roleName(int32_t r) {
  return r == AOTC_CONV_FORWARD ? "forward" : r == AOTC_CONV_INPUT_GRAD ? "input_grad" : "weight_grad";
}

} // namespace

TEST_CASE("oneDNN f32 convolutions match the f64 im2col path", "[kernels][conv]") {
  State s(aotc_kernels_state_create());
  REQUIRE(s);
  uint64_t seed = 1;
  for (const Case &cs : cases())
    for (int32_t role : {AOTC_CONV_FORWARD, AOTC_CONV_INPUT_GRAD, AOTC_CONV_WEIGHT_GRAD}) {
      aotc_conv_desc d = cs.d;
      d.role = role;
      INFO(cs.name << " " << roleName(role));
      REQUIRE(aotc_conv_check(&d, nullptr, 0) == AOTC_KERNELS_OK);
      CHECK(aotc_conv_workspace_elems(&d) == 0); // f32: the scratchpad is the state's
      int64_t na, nb, nc;
      sizes(d, na, nb, nc);
      std::vector<float> a = values(na, seed++), b = values(nb, seed++), c((size_t)nc, NAN);
      int rc = aotc_conv(s.get(), &d, a.data(), b.data(), c.data(), nullptr);
      INFO("message: " << (aotc_kernels_state_error(s.get()) ? aotc_kernels_state_error(s.get()) : "(none)"));
      REQUIRE(rc == AOTC_KERNELS_OK);
      std::vector<double> want = reference(d, a, b, nc);
      double err = relErr(c, want);
      INFO("err = " << err);
      CHECK(err < 1e-5);
      // The f32 im2col path (the benchmark's baseline) agrees as well.
      std::vector<float> ws((size_t)std::max<int64_t>(1, aotc_conv_im2col_workspace_elems(&d))), c2((size_t)nc, NAN);
      REQUIRE(aotc_conv_im2col(&d, a.data(), b.data(), c2.data(), ws.data()) == AOTC_KERNELS_OK);
      CHECK(relErr(c2, want) < 1e-5);
    }
  aotc_kernels_stats st;
  aotc_kernels_state_stats(s.get(), &st);
  CHECK(st.primitives == 3 * (int64_t)cases().size() + 3); // + the second chunk size of batch 7
  CHECK(st.cache_hits == 0);
  CHECK(aotc_kernels_state_error(s.get()) == nullptr);
}

TEST_CASE("the state creates a primitive once per descriptor and reuses it", "[kernels][conv]") {
  State s(aotc_kernels_state_create());
  REQUIRE(s);
  aotc_kernels_stats st;
  aotc_kernels_state_stats(s.get(), &st);
  CHECK((st.primitives == 0 && st.cache_hits == 0 && st.scratchpad_bytes == 0));
  aotc_conv_desc d = geometry(2, 8, 8, 1, 12, 12, 3, 3, 1, 1, 1, 1, 1, 1);
  std::vector<float> x = values(xElems(d), 7), w = values(wElems(d), 8), y((size_t)yElems(d)), y2 = y;
  REQUIRE(aotc_conv(s.get(), &d, x.data(), w.data(), y.data(), nullptr) == AOTC_KERNELS_OK);
  aotc_kernels_state_stats(s.get(), &st);
  CHECK((st.primitives == 1 && st.cache_hits == 0));
  // The same descriptor: nothing new, the same bits (a fixed thread count).
  REQUIRE(aotc_conv(s.get(), &d, x.data(), w.data(), y2.data(), nullptr) == AOTC_KERNELS_OK);
  aotc_kernels_state_stats(s.get(), &st);
  CHECK((st.primitives == 1 && st.cache_hits == 1));
  CHECK(std::memcmp(y.data(), y2.data(), y.size() * sizeof(float)) == 0);
  // Another role, then another shape: one new primitive each; every call after is a hit.
  aotc_conv_desc g = d;
  g.role = AOTC_CONV_WEIGHT_GRAD;
  std::vector<float> dw((size_t)wElems(d));
  REQUIRE(aotc_conv(s.get(), &g, y.data(), x.data(), dw.data(), nullptr) == AOTC_KERNELS_OK);
  aotc_conv_desc e = geometry(1, 8, 8, 1, 12, 12, 3, 3, 1, 1, 1, 1, 1, 1);
  REQUIRE(aotc_conv(s.get(), &e, x.data(), w.data(), y.data(), nullptr) == AOTC_KERNELS_OK);
  for (int i = 0; i < 3; ++i) {
    REQUIRE(aotc_conv(s.get(), &d, x.data(), w.data(), y.data(), nullptr) == AOTC_KERNELS_OK);
    REQUIRE(aotc_conv(s.get(), &g, y.data(), x.data(), dw.data(), nullptr) == AOTC_KERNELS_OK);
  }
  aotc_kernels_state_stats(s.get(), &st);
  CHECK((st.primitives == 3 && st.cache_hits == 7));
  CHECK(st.scratchpad_bytes >= 0);
  // A second state has a cache of its own.
  State t(aotc_kernels_state_create());
  REQUIRE(aotc_conv(t.get(), &d, x.data(), w.data(), y2.data(), nullptr) == AOTC_KERNELS_OK);
  aotc_kernels_state_stats(t.get(), &st);
  CHECK((st.primitives == 1 && st.cache_hits == 0));
  CHECK(std::memcmp(y.data(), y2.data(), y.size() * sizeof(float)) == 0);
}

TEST_CASE("a batch of zero entries writes zero weight gradients and nothing else", "[kernels][conv]") {
  State s(aotc_kernels_state_create());
  for (int32_t dt : {AOTC_F32, AOTC_F64}) {
    aotc_conv_desc d = geometry(0, 2, 3, 1, 5, 5, 3, 3, 1, 1, 1, 1, 1, 1);
    d.dtype = dt;
    d.role = AOTC_CONV_WEIGHT_GRAD;
    double dummy[8] = {0};
    std::vector<double> dw((size_t)wElems(d), 7.0);
    REQUIRE(aotc_conv(s.get(), &d, dummy, dummy, dw.data(), dummy) == AOTC_KERNELS_OK);
    size_t bytes = (size_t)wElems(d) * (dt == AOTC_F32 ? 4 : 8);
    std::vector<unsigned char> zero(bytes, 0);
    CHECK(std::memcmp(dw.data(), zero.data(), bytes) == 0);
  }
}

TEST_CASE("bad convolution descriptors are errors with a message, never crashes", "[kernels][conv]") {
  State s(aotc_kernels_state_create());
  REQUIRE(s);
  std::vector<float> buf(4096, 1.0f), ws(4096);
  auto fails = [&](aotc_conv_desc d, int code, const std::string &words) {
    INFO(words);
    float before = buf[0];
    CHECK(aotc_conv(s.get(), &d, buf.data(), buf.data(), buf.data() + 2048, ws.data()) == code);
    CHECK(buf[0] == before);
    const char *m = aotc_kernels_state_error(s.get());
    REQUIRE(m != nullptr);
    CHECK(std::string(m).find(words) != std::string::npos);
  };
  aotc_conv_desc ok = geometry(1, 4, 4, 2, 6, 6, 3, 3, 1, 1, 1, 1, 1, 1);
  aotc_conv_desc d = ok;
  d.groups = 3;
  fails(d, AOTC_KERNELS_ERROR_INVALID, "groups=3 does not divide c=4 and k=4");
  d = ok, d.oh = 5;
  fails(d, AOTC_KERNELS_ERROR_INVALID, "output size 5 x 6, expected 6 x 6");
  d = ok, d.kh = 9, d.pad_h = 0;
  fails(d, AOTC_KERNELS_ERROR_INVALID, "larger than the padded input");
  d = ok, d.stride_w = 0;
  fails(d, AOTC_KERNELS_ERROR_INVALID, "stride and dilation must be >= 1");
  d = ok, d.dtype = AOTC_I64;
  fails(d, AOTC_KERNELS_ERROR_INVALID, "neither f32 nor f64");
  d = ok, d.role = 7;
  fails(d, AOTC_KERNELS_ERROR_INVALID, "unknown role 7");
  d = ok, d.c = -4;
  fails(d, AOTC_KERNELS_ERROR_INVALID, "sizes must be positive");
  d = ok, d.n = INT64_C(1) << 40, d.c = d.k = INT64_C(1) << 30, d.groups = 1;
  fails(d, AOTC_KERNELS_ERROR_INVALID, "too large");
  // The message names the call.
  d = ok, d.groups = 3, d.role = AOTC_CONV_WEIGHT_GRAD;
  fails(d, AOTC_KERNELS_ERROR_INVALID, "aotc_conv f32 weight_grad n=1 c=4 k=4 groups=3");
  // NULL operands, an f64 call without its workspace, an f32 call without a state.
  CHECK(aotc_conv(s.get(), &ok, nullptr, buf.data(), buf.data(), nullptr) == AOTC_KERNELS_ERROR_INVALID);
  CHECK(std::string(aotc_kernels_state_error(s.get())).find("a NULL operand") != std::string::npos);
  aotc_conv_desc f = ok;
  f.dtype = AOTC_F64;
  std::vector<double> dbuf(4096);
  CHECK(aotc_conv(s.get(), &f, dbuf.data(), dbuf.data(), dbuf.data() + 2048, nullptr) == AOTC_KERNELS_ERROR_INVALID);
  CHECK(std::string(aotc_kernels_state_error(s.get())).find("no workspace") != std::string::npos);
  CHECK(aotc_conv(nullptr, &ok, buf.data(), buf.data(), buf.data() + 2048, nullptr) == AOTC_KERNELS_ERROR_NO_STATE);
  CHECK(aotc_conv(s.get(), nullptr, buf.data(), buf.data(), buf.data(), nullptr) == AOTC_KERNELS_ERROR_INVALID);
  CHECK(aotc_conv_im2col(&d, buf.data(), buf.data(), buf.data(), ws.data()) == AOTC_KERNELS_ERROR_INVALID);
  // The state still works after errors; nothing was cached for them.
  std::vector<float> y(4096);
  CHECK(aotc_conv(s.get(), &ok, buf.data(), buf.data(), y.data(), nullptr) == AOTC_KERNELS_OK);
  aotc_kernels_stats st;
  aotc_kernels_state_stats(s.get(), &st);
  CHECK(st.primitives == 1);
  aotc_kernels_state_destroy(nullptr);
  CHECK(aotc_kernels_state_error(nullptr) == nullptr);
}
