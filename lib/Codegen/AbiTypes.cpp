//===- AbiTypes.cpp - The LLVM types of abi.h's descriptor structs ----------===//
//
// The one place the compiler spells the object's descriptor structs (runtime/include/aotc/
// abi.h) as LLVM struct types, field by field in abi.h's order. HostCommon.cpp (the CPU
// descriptor) and CudaHost.cpp (the CUDA one) build their constants with these types, and
// abiLayouts() gives their offsets under the target's data layout, which the unit test
// `ABI: the LLVM descriptor structs have abi.h's layout` compares with offsetof(abi.h).
//===----------------------------------------------------------------------===//
#include "CodegenInternal.h"

#include "aotc/AbiLayout.h"

#include "llvm/IR/DataLayout.h"
#include "llvm/IR/DerivedTypes.h"
#include "llvm/IR/LLVMContext.h"

namespace aotc {
namespace cg {

llvm::StructType *abiType(llvm::LLVMContext &C, AbiStruct s) {
  static const char *names[] = {"aotc_tensor_desc", "aotc_state_desc", "aotc_hyper_desc", "aotc_train",
                                "aotc_program",     "aotc_cuda_module", "aotc_cuda_gemm_desc",
                                "aotc_cuda_program", "aotc_kernel_desc", "aotc_bucket_desc", "aotc_comm"};
  const char *name = names[(int)s];
  if (llvm::StructType *t = llvm::StructType::getTypeByName(C, name)) return t;
  llvm::Type *p = llvm::PointerType::get(C, 0);
  llvm::Type *i32 = llvm::Type::getInt32Ty(C), *i64 = llvm::Type::getInt64Ty(C), *f64 = llvm::Type::getDoubleTy(C);
  std::vector<llvm::Type *> f;
  switch (s) {
  case AbiStruct::TensorDesc: // name dtype role rank requires_grad shape numel bytes updates_input reserved
    f = {p, i32, i32, i32, i32, p, i64, i64, i32, i32};
    break;
  case AbiStruct::StateDesc: // name dtype kind rank param_input shape numel bytes offset key
    f = {p, i32, i32, i32, i32, p, i64, i64, i64, p};
    break;
  case AbiStruct::HyperDesc: // name value min max max_open reserved
    f = {p, f64, f64, f64, i32, i32};
    break;
  case AbiStruct::Train: // optimizer config clip_grad_norm skip_nonfinite grad_accumulation reserved
                         // num_params param_inputs num_state num_hyper state hyper state_bytes
                         // scratch_bytes train_step num_buckets reserved2 buckets set_comm
                         // zero1_world reserved3 set_comm_zero1
    f = {p, p, f64, i32, i32, i32, i32, p, i32, i32, p, p, i64, i64, p, i32, i32, p, p, i32, i32, p};
    break;
  case AbiStruct::Program: // abi_version name num_inputs inputs num_outputs outputs num_grads grads
                           // grad_input_index saved_bytes scratch_bytes forward backward num_errors
                           // errors error_value_offset build_id flags reserved context_create
                           // context_destroy context_error train eval num_kernels reserved2 kernels
                           // profile_attach
    f = {i32, p, i32, p, i32, p, i32, p, p, i64, i64, p, p, i32, p, i64, p, i32, i32, p, p, p, p, p, i32, i32, p, p};
    break;
  case AbiStruct::CudaModule: // program program_id num_kernels kernel_names fatbin fatbin_bytes
                              // num_errors errors
    f = {p, i32, i32, p, p, i64, i32, p};
    break;
  case AbiStruct::CudaGemmDesc: // dtype trans_a trans_b allow_tf32 m n k lda ldb ldc batch stride_a
                                // stride_b stride_c alpha beta name
    f = {i32, i32, i32, i32, i64, i64, i64, i64, i64, i64, i64, i64, i64, i64, f64, f64, p};
    break;
  case AbiStruct::CudaProgram: // base forward backward archs tool_versions module
    f = {abiType(C, AbiStruct::Program), p, p, p, p, p};
    break;
  case AbiStruct::KernelDesc: // graph name kind ops bytes flops dtype trans m n k batch
    f = {p, p, p, p, i64, f64, i32, i32, i64, i64, i64, i64};
    break;
  case AbiStruct::BucketDesc: // dtype num_grads grads offset count start_after reserved
    f = {i32, i32, p, i64, i64, i32, i32};
    break;
  case AbiStruct::Comm: // self rank size allreduce_start test wait progress broadcast allreduce abort error
                        // reduce_scatter_start allgather_start
    f = {p, i32, i32, p, p, p, p, p, p, p, p, p, p};
    break;
  }
  return llvm::StructType::create(C, f, name);
}

} // namespace cg

std::vector<AbiLayout> abiLayouts(const std::string &dataLayout) {
  llvm::LLVMContext C;
  llvm::DataLayout dl(dataLayout);
  std::vector<AbiLayout> out;
  for (int s = 0; s <= (int)cg::AbiStruct::Comm; ++s) {
    llvm::StructType *t = cg::abiType(C, (cg::AbiStruct)s);
    const llvm::StructLayout *sl = dl.getStructLayout(t);
    AbiLayout l{t->getName().str(), sl->getSizeInBytes(), {}};
    for (unsigned i = 0; i < t->getNumElements(); ++i) l.offsets.push_back(sl->getElementOffset(i));
    out.push_back(std::move(l));
  }
  return out;
}

} // namespace aotc
