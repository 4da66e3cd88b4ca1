//===- AbiLayoutTest.cpp - The compiler's descriptor structs match abi.h ----===//
//
// lib/Codegen/AbiTypes.cpp spells abi.h's structs as LLVM types; here each one's size and
// field offsets under the x86-64 data layout are held against offsetof/sizeof of abi.h, the
// C definition the runtime reads. The field lists below are this test's own, written from
// abi.h, an independent check of the compiler's copy (docs/abi.md "Layout").
//===----------------------------------------------------------------------===//
#include "aotc/AbiLayout.h"
#include "aotc/abi.h"

#include <catch2/catch.hpp>

#include <cstddef>
#include <map>

using namespace aotc;

#define F(T, f) uint64_t(offsetof(T, f))

TEST_CASE("ABI: the LLVM descriptor structs have abi.h's layout", "[abi]") {
  const std::map<std::string, std::pair<uint64_t, std::vector<uint64_t>>> want = {
      {"aotc_tensor_desc",
       {sizeof(aotc_tensor_desc),
        {F(aotc_tensor_desc, name), F(aotc_tensor_desc, dtype), F(aotc_tensor_desc, role), F(aotc_tensor_desc, rank),
         F(aotc_tensor_desc, requires_grad), F(aotc_tensor_desc, shape), F(aotc_tensor_desc, numel),
         F(aotc_tensor_desc, bytes), F(aotc_tensor_desc, updates_input), F(aotc_tensor_desc, reserved)}}},
      {"aotc_state_desc",
       {sizeof(aotc_state_desc),
        {F(aotc_state_desc, name), F(aotc_state_desc, dtype), F(aotc_state_desc, kind), F(aotc_state_desc, rank),
         F(aotc_state_desc, param_input), F(aotc_state_desc, shape), F(aotc_state_desc, numel),
         F(aotc_state_desc, bytes), F(aotc_state_desc, offset), F(aotc_state_desc, key)}}},
      {"aotc_hyper_desc",
       {sizeof(aotc_hyper_desc),
        {F(aotc_hyper_desc, name), F(aotc_hyper_desc, value), F(aotc_hyper_desc, min), F(aotc_hyper_desc, max),
         F(aotc_hyper_desc, max_open), F(aotc_hyper_desc, reserved)}}},
      {"aotc_train",
       {sizeof(aotc_train),
        {F(aotc_train, optimizer), F(aotc_train, config), F(aotc_train, clip_grad_norm), F(aotc_train, skip_nonfinite),
         F(aotc_train, grad_accumulation), F(aotc_train, reserved), F(aotc_train, num_params),
         F(aotc_train, param_inputs), F(aotc_train, num_state), F(aotc_train, num_hyper), F(aotc_train, state),
         F(aotc_train, hyper), F(aotc_train, state_bytes), F(aotc_train, scratch_bytes), F(aotc_train, train_step),
         F(aotc_train, num_buckets), F(aotc_train, reserved2), F(aotc_train, buckets), F(aotc_train, set_comm),
         F(aotc_train, zero1_world), F(aotc_train, reserved3), F(aotc_train, set_comm_zero1)}}},
      {"aotc_bucket_desc",
       {sizeof(aotc_bucket_desc),
        {F(aotc_bucket_desc, dtype), F(aotc_bucket_desc, num_grads), F(aotc_bucket_desc, grads),
         F(aotc_bucket_desc, offset), F(aotc_bucket_desc, count), F(aotc_bucket_desc, start_after),
         F(aotc_bucket_desc, reserved)}}},
      {"aotc_comm",
       {sizeof(aotc_comm),
        {F(aotc_comm, self), F(aotc_comm, rank), F(aotc_comm, size), F(aotc_comm, allreduce_start), F(aotc_comm, test),
         F(aotc_comm, wait), F(aotc_comm, progress), F(aotc_comm, broadcast), F(aotc_comm, allreduce),
         F(aotc_comm, abort), F(aotc_comm, error), F(aotc_comm, reduce_scatter_start), F(aotc_comm, allgather_start)}}},
      {"aotc_program",
       {sizeof(aotc_program),
        {F(aotc_program, abi_version), F(aotc_program, name), F(aotc_program, num_inputs), F(aotc_program, inputs),
         F(aotc_program, num_outputs), F(aotc_program, outputs), F(aotc_program, num_grads), F(aotc_program, grads),
         F(aotc_program, grad_input_index), F(aotc_program, saved_bytes), F(aotc_program, scratch_bytes),
         F(aotc_program, forward), F(aotc_program, backward), F(aotc_program, num_errors), F(aotc_program, errors),
         F(aotc_program, error_value_offset), F(aotc_program, build_id), F(aotc_program, flags),
         F(aotc_program, reserved), F(aotc_program, context_create), F(aotc_program, context_destroy),
         F(aotc_program, context_error), F(aotc_program, train), F(aotc_program, eval),
         F(aotc_program, num_kernels), F(aotc_program, reserved2), F(aotc_program, kernels),
         F(aotc_program, profile_attach)}}},
      {"aotc_kernel_desc",
       {sizeof(aotc_kernel_desc),
        {F(aotc_kernel_desc, graph), F(aotc_kernel_desc, name), F(aotc_kernel_desc, kind), F(aotc_kernel_desc, ops),
         F(aotc_kernel_desc, bytes), F(aotc_kernel_desc, flops), F(aotc_kernel_desc, dtype), F(aotc_kernel_desc, trans),
         F(aotc_kernel_desc, m), F(aotc_kernel_desc, n), F(aotc_kernel_desc, k), F(aotc_kernel_desc, batch)}}},
      {"aotc_cuda_module",
       {sizeof(aotc_cuda_module),
        {F(aotc_cuda_module, program), F(aotc_cuda_module, program_id), F(aotc_cuda_module, num_kernels),
         F(aotc_cuda_module, kernel_names), F(aotc_cuda_module, fatbin), F(aotc_cuda_module, fatbin_bytes),
         F(aotc_cuda_module, num_errors), F(aotc_cuda_module, errors)}}},
      {"aotc_cuda_gemm_desc",
       {sizeof(aotc_cuda_gemm_desc),
        {F(aotc_cuda_gemm_desc, dtype), F(aotc_cuda_gemm_desc, trans_a), F(aotc_cuda_gemm_desc, trans_b),
         F(aotc_cuda_gemm_desc, allow_tf32), F(aotc_cuda_gemm_desc, m), F(aotc_cuda_gemm_desc, n),
         F(aotc_cuda_gemm_desc, k), F(aotc_cuda_gemm_desc, lda), F(aotc_cuda_gemm_desc, ldb),
         F(aotc_cuda_gemm_desc, ldc), F(aotc_cuda_gemm_desc, batch), F(aotc_cuda_gemm_desc, stride_a),
         F(aotc_cuda_gemm_desc, stride_b), F(aotc_cuda_gemm_desc, stride_c), F(aotc_cuda_gemm_desc, alpha),
         F(aotc_cuda_gemm_desc, beta), F(aotc_cuda_gemm_desc, name)}}},
      {"aotc_cuda_program",
       {sizeof(aotc_cuda_program),
        {F(aotc_cuda_program, base), F(aotc_cuda_program, forward), F(aotc_cuda_program, backward),
         F(aotc_cuda_program, archs), F(aotc_cuda_program, tool_versions), F(aotc_cuda_program, module)}}},
  };
  const std::vector<AbiLayout> got = abiLayouts();
  REQUIRE(got.size() == want.size());
  for (const AbiLayout &l : got) {
    INFO(l.name);
    auto it = want.find(l.name);
    REQUIRE(it != want.end());
    CHECK(l.size == it->second.first);
    CHECK(l.offsets == it->second.second);
  }
}
