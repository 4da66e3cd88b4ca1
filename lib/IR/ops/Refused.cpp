//===- Refused.cpp - The ops aotc refuses by name, with the reason ---------------===//
//
// One home for every refusal by name: the Core ATen overloads aotc does not support (unit_IR
// "core ATen: ..." keeps them consistent with test/fixtures/core_aten.txt and the registry)
// and the ops outside Core ATen that torch's default decompositions leave in exported graphs
// (found by PyTorch's OpInfo database, tools/opinfo) and aotc does not support yet. Capture's
// "unknown op" diagnostic quotes the reason (lib/IR/Parser.cpp, lib/Capture/ExportJson.cpp);
// docs/ops.md shows the table. Delete an op's row when its registry entry lands (a test fails
// while both exist).
//===----------------------------------------------------------------------===//
#include "aotc/OpRegistry.h"

namespace aotc {

namespace {

const char *const kDynamic = "data-dependent output shape: refused until dynamic shapes (then an upper bound)";
const char *const kSym = "a symbolic-shape op: only graphs exported with dynamic shapes contain it; refused until "
                         "dynamic shapes";
const char *const kLapack =
    "linear algebra: not implemented yet (the LAPACK call on the extern path and its derivative rule; "
    "docs/linalg.md lists the linalg ops aotc supports)";

} // namespace

const std::vector<RefusedOp> &refusedOps() {
  static const std::vector<RefusedOp> t = {
      // Core ATen.
      {"aten.nonzero.default", kDynamic},
      {"aten.sym_numel.default", kSym},
      {"aten.sym_size.int", kSym},
      {"aten.sym_storage_offset.default", kSym},
      {"aten.sym_stride.int", kSym},
      // Outside Core ATen: data-dependent shapes.
      {"aten.masked_select.default", kDynamic},
      {"aten.nonzero_static.default",
       "a nonzero with a static bound: not implemented yet (it needs a prefix-count scan and a scatter of the "
       "positions; nonzero itself waits for dynamic shapes)"},
      {"aten.segment_reduce.default",
       "segment reductions over run-time lengths / offsets: not implemented yet (a scatter_reduce by a "
       "cumsum of the lengths would serve)"},
      // Linear algebra (LAPACK).
      {"aten.linalg_eig.default",
       "the general (non-symmetric) eigendecomposition: its eigenvalues and eigenvectors are complex, and "
       "complex tensors exist in aotc only around the FFTs (docs/complex.md); linalg.eigh (symmetric) is supported"},
      {"aten.linalg_householder_product.default", kLapack},
      {"aten.ormqr.default", kLapack},
      {"aten.linalg_matrix_sqrth.default", kLapack},
      {"aten.linalg_polar.default", kLapack},
      {"aten.linalg_matrix_exp.default",
       "matrix exponential: needs a Pade / scaling-and-squaring kernel and its derivative; not implemented yet"},
      // Pooling and resampling variants.
      {"aten._upsample_bilinear2d_aa.default",
       "antialiased bilinear resampling (torchvision's resize with antialias=True): not implemented yet; plain "
       "bilinear is"},
      {"aten.grid_sampler_3d.default", "3-D grid sampling: not implemented yet; grid_sampler_2d is"},
      // Others.
      {"aten.mode.default",
       "mode (the most frequent value along a dim): not implemented yet"},
      {"aten.nextafter.default",
       "nextafter steps a float by one ulp: needs bit-level float ops the kernel IR does not have yet"},
      {"aten.frexp.Tensor", "frexp's mantissa / exponent split needs bit-level float ops the kernel IR does not have yet"},
      {"aten._batch_norm_with_update_functional.default",
       "its fourth result (reserve) is a uint8 tensor, which aotc does not compute; torch.export's batch norm "
       "in training is _native_batch_norm_legit_functional, which is supported"},
      {"aten._to_sparse.default", "sparse tensors: not supported (aotc computes on dense tensors only)"},
      {"aten._to_sparse.sparse_dim", "sparse tensors: not supported (aotc computes on dense tensors only)"},
      {"torch_nn._linear_cross_entropy_batch_chunked_no_reduction.default",
       "torch's chunked linear + cross-entropy (a torch_nn op, not ATen): not implemented yet; F.linear followed "
       "by F.cross_entropy exports to supported ops"},
      {"aten.rrelu_with_noise_functional.default",
       "randomized leaky ReLU in training: not implemented yet (in eval mode torch exports leaky_relu)"},
  };
  return t;
}

const std::string *refusalReason(const std::string &target) {
  static const std::map<std::string, std::string> byTarget = [] {
    std::map<std::string, std::string> m;
    for (const RefusedOp &r : refusedOps()) m.emplace(r.target, r.reason);
    return m;
  }();
  std::string t = target.rfind("torch.ops.", 0) == 0 ? target.substr(10) : target;
  auto it = byTarget.find(t);
  return it == byTarget.end() ? nullptr : &it->second;
}

} // namespace aotc
