// The CUDA runtime's pure parts (runtime/cuda/CudaRuntimeInternal.h), without a GPU:
// the row-major -> column-major cuBLASLt mapping is executed with a reference column-major
// GEMM (BLAS semantics, as cuBLASLt computes) and compared with a row-major reference
// (cblas semantics, what the descriptor means) on every transpose combination, padded
// leading dimensions and a strided batch; and the device-error message.
#include "CudaRuntimeInternal.h"

#include <catch2/catch.hpp>

#include <cstring>
#include <vector>

namespace {

using aotc::cuda::LtOperand;

/// Column-major element (r, c) of op(X): X stored rows x cols with leading dimension ld.
double opAt(const std::vector<double> &x, int64_t base, const LtOperand &o, int64_t r, int64_t c) {
  return o.trans ? x[base + c + r * o.ld] : x[base + r + c * o.ld];
}

/// C = op(A) op(B), column-major, as cuBLASLt does with the LtGemm's layouts.
void columnMajorGemm(const aotc::cuda::LtGemm &g, int64_t batch, const std::vector<double> &A,
                     const std::vector<double> &B, std::vector<double> &C) {
  for (int64_t bi = 0; bi < batch; ++bi)
    for (int64_t j = 0; j < g.n; ++j)
      for (int64_t i = 0; i < g.m; ++i) {
        double acc = 0;
        for (int64_t p = 0; p < g.k; ++p)
          acc += opAt(A, bi * g.a.batchStride, g.a, i, p) * opAt(B, bi * g.b.batchStride, g.b, p, j);
        C[bi * g.c.batchStride + i + j * g.c.ld] = acc;
      }
}

/// The descriptor's meaning: cblas_dgemm(CblasRowMajor, ...) per batch entry.
void rowMajorGemm(const aotc_cuda_gemm_desc &g, const std::vector<double> &A, const std::vector<double> &B,
                  std::vector<double> &C) {
  for (int64_t bi = 0; bi < g.batch; ++bi)
    for (int64_t i = 0; i < g.m; ++i)
      for (int64_t j = 0; j < g.n; ++j) {
        double acc = 0;
        for (int64_t p = 0; p < g.k; ++p) {
          double a = g.trans_a ? A[bi * g.stride_a + p * g.lda + i] : A[bi * g.stride_a + i * g.lda + p];
          double b = g.trans_b ? B[bi * g.stride_b + j * g.ldb + p] : B[bi * g.stride_b + p * g.ldb + j];
          acc += a * b;
        }
        C[bi * g.stride_c + i * g.ldc + j] = acc;
      }
}

} // namespace

TEST_CASE("cuBLASLt layouts of a row-major GEMM compute the same C", "[cuda]") {
  const int64_t m = 5, n = 7, k = 3, batch = 2;
  for (int ta = 0; ta < 2; ++ta)
    for (int tb = 0; tb < 2; ++tb) {
      aotc_cuda_gemm_desc g{};
      g.dtype = AOTC_F64;
      g.trans_a = ta;
      g.trans_b = tb;
      g.m = m;
      g.n = n;
      g.k = k;
      g.lda = (ta ? m : k) + 2; // padded rows
      g.ldb = (tb ? k : n) + 1;
      g.ldc = n + 3;
      g.batch = batch;
      g.stride_a = (ta ? k : m) * g.lda + 4;
      g.stride_b = (tb ? n : k) * g.ldb;
      g.stride_c = m * g.ldc + 2;
      std::vector<double> A(batch * g.stride_a + 8), B(batch * g.stride_b + 8);
      for (size_t i = 0; i < A.size(); ++i) A[i] = (double)((i * 37) % 11) - 5;
      for (size_t i = 0; i < B.size(); ++i) B[i] = (double)((i * 53) % 13) - 6;
      std::vector<double> want(batch * g.stride_c + 8, -99.0), got = want;
      rowMajorGemm(g, A, B, want);
      aotc::cuda::LtGemm lt = aotc::cuda::columnMajor(g);
      INFO("trans_a=" << ta << " trans_b=" << tb);
      // Shapes as cuBLASLt checks them: op(A) is m x k, op(B) k x n, C m x n, ld >= rows.
      CHECK((lt.a.trans ? lt.a.cols : lt.a.rows) == lt.m);
      CHECK((lt.a.trans ? lt.a.rows : lt.a.cols) == lt.k);
      CHECK((lt.b.trans ? lt.b.cols : lt.b.rows) == lt.k);
      CHECK((lt.b.trans ? lt.b.rows : lt.b.cols) == lt.n);
      CHECK(lt.c.rows == lt.m);
      CHECK(lt.c.cols == lt.n);
      CHECK(lt.a.ld >= lt.a.rows);
      CHECK(lt.b.ld >= lt.b.rows);
      CHECK(lt.c.ld >= lt.c.rows);
      columnMajorGemm(lt, batch, B, A, got); // cuBLASLt's A is the descriptor's B
      CHECK(got == want);
    }
}

TEST_CASE("a device error word names the node and the value", "[cuda]") {
  const char *errors[] = {"node 'gather' (aten.gather): index out of range [0, 10)", "other"};
  aotc_cuda_module m{};
  m.program = "mlp";
  m.num_errors = 2;
  m.errors = errors;
  const int64_t word[4] = {1, 1000000, 42, 0};
  CHECK(aotc::cuda::describeDeviceError(word, &m) ==
        "mlp: node 'gather' (aten.gather): index out of range [0, 10) (value 1000000)");
  const int64_t none[4] = {0, 0, 0, 0};
  CHECK(aotc::cuda::describeDeviceError(none, &m).empty());
  const int64_t bad[4] = {7, -1, 99, 0};
  CHECK(aotc::cuda::describeDeviceError(bad, &m) == "device error 7 (value -1) of an unknown program (id 99)");
  CHECK(aotc::cuda::describeDeviceError(word, nullptr).find("unknown program (id 42)") != std::string::npos);
}
