//===- Matmul.cpp - mm, addmm, bmm -------------------------------------------===//
//
// Shape checks as in aten/src/ATen/native/LinearAlgebra.cpp (addmm_impl_cpu_,
// bmm_out_or_baddbmm_): operands of one dtype, inner dims equal.
// addmm(self, m1, m2, beta, alpha) = beta * self + alpha * (m1 @ m2), with self
// broadcast to [n, m]; beta == 0 ignores self (NaN included), as ATen does.
//===----------------------------------------------------------------------===//
#include "Ops.h"

namespace aotc {
namespace ops {
namespace {

using Types = std::vector<TensorType>;

void sameDType(const Node &n, const TensorType &a, const TensorType &b) {
  if (a.dtype != b.dtype)
    nodeError(n, std::string("expected both operands to have the same dtype, but got ") + dtypeTorchName(a.dtype) +
                     " != " + dtypeTorchName(b.dtype));
}

/// C[b, i, j] = sum_k A[b, i, k] * B[b, k, j] on row-major buffers.
void matmulRef(const double *A, const double *B, double *C, int64_t batch, int64_t n, int64_t k, int64_t m) {
  for (int64_t b = 0; b < batch; ++b)
    for (int64_t i = 0; i < n; ++i)
      for (int64_t j = 0; j < m; ++j) {
        double s = 0;
        for (int64_t p = 0; p < k; ++p) s += A[(b * n + i) * k + p] * B[(b * k + p) * m + j];
        C[(b * n + i) * m + j] = s;
      }
}

} // namespace

void registerMatmulOps(OpRegistry &r) {
  {
    OpDef &d = r.add("mm(Tensor self, Tensor mat2) -> Tensor", OpCategory::Matmul);
    d.primitive = true;
    d.infer = [](const Node &n) -> Types {
      TensorType a = argType(n, 0), b = argType(n, 1);
      if (a.rank() != 2 || b.rank() != 2) nodeError(n, "mm expects 2-D tensors, got " + a.str() + " and " + b.str());
      if (a.shape[1] != b.shape[0])
        nodeError(n, "mat1 and mat2 shapes cannot be multiplied (" + std::to_string(a.shape[0]) + "x" +
                         std::to_string(a.shape[1]) + " and " + std::to_string(b.shape[0]) + "x" +
                         std::to_string(b.shape[1]) + ")");
      sameDType(n, a, b);
      return {{a.dtype, {a.shape[0], b.shape[1]}}};
    };
    setEval(d, [](const Node &n, const RefArgs &a) {
      const RefTensor &A = *a[0], &B = *a[1];
      RefTensor C(n.types[0].dtype, n.types[0].shape);
      matmulRef(A.data.data(), B.data.data(), C.data.data(), 1, A.shape[0], A.shape[1], B.shape[1]);
      return C;
    });
  }
  {
    OpDef &d = r.add("addmm(Tensor self, Tensor mat1, Tensor mat2, *, Scalar beta=1, Scalar alpha=1) -> Tensor",
                     OpCategory::Matmul);
    d.primitive = true;
    d.infer = [](const Node &n) -> Types {
      TensorType s = argType(n, 0), a = argType(n, 1), b = argType(n, 2);
      if (a.rank() != 2 || b.rank() != 2) nodeError(n, "addmm expects 2-D mat1 and mat2, got " + a.str() + " and " + b.str());
      if (a.shape[1] != b.shape[0])
        nodeError(n, "mat1 and mat2 shapes cannot be multiplied (" + std::to_string(a.shape[0]) + "x" +
                         std::to_string(a.shape[1]) + " and " + std::to_string(b.shape[0]) + "x" +
                         std::to_string(b.shape[1]) + ")");
      sameDType(n, a, b);
      sameDType(n, s, a);
      Shape out = {a.shape[0], b.shape[1]};
      auto bs = broadcastShapes(s.shape, out);
      if (!bs || *bs != out)
        nodeError(n, "self of shape " + shapeStr(s.shape) + " cannot be broadcast to " + shapeStr(out));
      return {{a.dtype, out}};
    };
    setEval(d, [](const Node &n, const RefArgs &a) {
      const RefTensor &S = *a[0], &A = *a[1], &B = *a[2];
      double beta = n.scalarArg(3), alpha = n.scalarArg(4);
      RefTensor C(n.types[0].dtype, n.types[0].shape);
      matmulRef(A.data.data(), B.data.data(), C.data.data(), 1, A.shape[0], A.shape[1], B.shape[1]);
      auto map = broadcastIndexMap(S.shape, C.shape);
      for (int64_t k = 0; k < C.numel(); ++k)
        C.data[k] = castValue(C.dtype, alpha * C.data[k] + (beta == 0 ? 0.0 : beta * S.data[map[k]]));
      return C;
    });
  }
  {
    OpDef &d = r.add("bmm(Tensor self, Tensor mat2) -> Tensor", OpCategory::Matmul);
    d.primitive = true;
    d.infer = [](const Node &n) -> Types {
      TensorType a = argType(n, 0), b = argType(n, 1);
      if (a.rank() != 3 || b.rank() != 3) nodeError(n, "bmm expects 3-D tensors, got " + a.str() + " and " + b.str());
      if (a.shape[0] != b.shape[0] || a.shape[2] != b.shape[1])
        nodeError(n, "bmm: incompatible shapes " + shapeStr(a.shape) + " and " + shapeStr(b.shape));
      sameDType(n, a, b);
      return {{a.dtype, {a.shape[0], a.shape[1], b.shape[2]}}};
    };
    setEval(d, [](const Node &n, const RefArgs &a) {
      const RefTensor &A = *a[0], &B = *a[1];
      RefTensor C(n.types[0].dtype, n.types[0].shape);
      matmulRef(A.data.data(), B.data.data(), C.data.data(), A.shape[0], A.shape[1], A.shape[2], B.shape[2]);
      return C;
    });
  }
}

} // namespace ops
} // namespace aotc
