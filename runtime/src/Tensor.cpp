//===- Tensor.cpp - Dtypes, aligned buffers and owning tensors -------------===//
//
// This file implements the value types of runtime.h: AlignedBuffer (64-byte
// aligned, zero-filled storage) and Tensor (dtype + shape + storage).
//===----------------------------------------------------------------------===//
#include "aotc/runtime.h"

#if defined(__has_feature)
#if __has_feature(address_sanitizer)
#define AOTC_HAS_ASAN 1
#endif
#endif
#ifndef AOTC_HAS_ASAN
#define AOTC_HAS_ASAN 0
#endif
#if defined(__SANITIZE_ADDRESS__) || AOTC_HAS_ASAN
#include <sanitizer/asan_interface.h>
#endif

#include <cstdlib>
#include <cstring>
#include <new>

namespace aotc::rt {

int64_t itemSize(DType dt) {
  switch (dt) {
  case DType::F32: return 4;
  case DType::F64: return 8;
  case DType::I64: return 8;
  case DType::Bool: return 1;
  case DType::I32: return 4;
  case DType::U8: return 1;
  }
  throw RuntimeError("aotc runtime: invalid dtype " + std::to_string((int)dt));
}

const char *dtypeName(DType dt) {
  switch (dt) {
  case DType::F32: return "f32";
  case DType::F64: return "f64";
  case DType::I64: return "i64";
  case DType::Bool: return "b8";
  case DType::I32: return "i32";
  case DType::U8: return "u8";
  }
  return "?";
}

const char *safetensorsDTypeName(DType dt) {
  switch (dt) {
  case DType::F32: return "F32";
  case DType::F64: return "F64";
  case DType::I64: return "I64";
  case DType::Bool: return "BOOL";
  case DType::I32: return "I32";
  case DType::U8: return "U8";
  }
  return "?";
}

DType dtypeFromAbi(int32_t abiDType) {
  if (abiDType < AOTC_F32 || abiDType > AOTC_U8)
    throw RuntimeError("aotc runtime: unknown aotc_dtype value " + std::to_string(abiDType));
  return static_cast<DType>(abiDType);
}

std::string typeString(DType dt, const std::vector<int64_t> &shape) {
  std::string s = dtypeName(dt);
  s += "[";
  for (size_t i = 0; i < shape.size(); ++i) {
    if (i)
      s += ", ";
    s += std::to_string(shape[i]);
  }
  return s + "]";
}

std::string fixedSizeNote(const aotc_tensor_desc &d, int32_t dtype, int32_t rank) {
  if (d.role != AOTC_ROLE_USER_INPUT || dtype != d.dtype || rank != d.rank) return "";
  return " (a user input's sizes were fixed when the model was exported, from the example input "
         "torch.export saw: export again with an example of this size; dynamic sizes are not "
         "supported yet)";
}

std::string descTypeString(const aotc_tensor_desc &desc) {
  std::vector<int64_t> shape(desc.shape, desc.shape + desc.rank);
  return typeString(dtypeFromAbi(desc.dtype), shape);
}

//===----------------------------------------------------------------------===//
// AlignedBuffer
//===----------------------------------------------------------------------===//

void AlignedBuffer::Free::operator()(uint8_t *p) const { std::free(p); }

AlignedBuffer::AlignedBuffer(int64_t bytes) {
  if (bytes < 0)
    throw RuntimeError("aotc runtime: negative buffer size " + std::to_string(bytes));
  // aligned_alloc needs a size that is a multiple of the alignment, and a
  // non-zero one so that data() is a valid pointer for empty tensors too.
  int64_t rounded = (bytes + AOTC_ALIGNMENT - 1) / AOTC_ALIGNMENT * AOTC_ALIGNMENT;
  if (rounded == 0)
    rounded = AOTC_ALIGNMENT;
  void *p = std::aligned_alloc(AOTC_ALIGNMENT, (size_t)rounded);
  if (!p)
    throw std::bad_alloc();
  std::memset(p, 0, (size_t)rounded);
#if defined(__SANITIZE_ADDRESS__) || AOTC_HAS_ASAN
  // The rounding tail is not the tensor's: a kernel touching it is reported, as a
  // malloc'ed buffer's redzone would be (the address suite).
  ASAN_POISON_MEMORY_REGION(static_cast<uint8_t *>(p) + bytes, (size_t)(rounded - bytes));
#endif
  ptr_.reset(static_cast<uint8_t *>(p));
  size_ = bytes;
}

void AlignedBuffer::fill(uint8_t byte) {
  if (ptr_)
    std::memset(ptr_.get(), byte, (size_t)size_);
}

//===----------------------------------------------------------------------===//
// Tensor
//===----------------------------------------------------------------------===//

Tensor::Tensor(DType dtype, std::vector<int64_t> shape) : dtype_(dtype), shape_(std::move(shape)) {
  itemSize(dtype); // validates the dtype
  numel_ = 1;
  for (int64_t d : shape_) {
    if (d < 0)
      throw RuntimeError("aotc runtime: negative dimension in " + rt::typeString(dtype_, shape_));
    numel_ *= d;
  }
  buf_ = AlignedBuffer(bytes());
}

Tensor Tensor::fromBytes(DType dtype, std::vector<int64_t> shape, const void *bytes,
                         int64_t numBytes) {
  Tensor t(dtype, std::move(shape));
  if (numBytes != t.bytes())
    throw RuntimeError("aotc runtime: " + t.typeString() + " needs " + std::to_string(t.bytes()) +
                       " bytes, got " + std::to_string(numBytes));
  if (numBytes)
    std::memcpy(t.data(), bytes, (size_t)numBytes);
  return t;
}

Tensor Tensor::like(const aotc_tensor_desc &desc) {
  return Tensor(dtypeFromAbi(desc.dtype), std::vector<int64_t>(desc.shape, desc.shape + desc.rank));
}

Tensor Tensor::full(DType dtype, std::vector<int64_t> shape, double value) {
  Tensor t(dtype, std::move(shape));
  for (int64_t i = 0; i < t.numel(); ++i) {
    switch (dtype) {
    case DType::F32: t.data<float>()[i] = (float)value; break;
    case DType::F64: t.data<double>()[i] = value; break;
    case DType::I64: t.data<int64_t>()[i] = (int64_t)value; break;
    case DType::Bool: t.data<uint8_t>()[i] = value != 0 ? 1 : 0; break;
    case DType::I32: t.data<int32_t>()[i] = (int32_t)value; break;
    case DType::U8: t.data<uint8_t>()[i] = (uint8_t)value; break;
    }
  }
  return t;
}

double Tensor::at(int64_t i) const {
  if (i < 0 || i >= numel_)
    throw RuntimeError("aotc runtime: index " + std::to_string(i) + " out of range for " +
                       typeString());
  switch (dtype_) {
  case DType::F32: return data<float>()[i];
  case DType::F64: return data<double>()[i];
  case DType::I64: return (double)data<int64_t>()[i];
  case DType::Bool: return data<uint8_t>()[i] ? 1.0 : 0.0;
  case DType::I32: return (double)data<int32_t>()[i];
  case DType::U8: return (double)data<uint8_t>()[i];
  }
  return 0;
}

bool Tensor::matches(const aotc_tensor_desc &desc) const {
  if ((int32_t)dtype_ != desc.dtype || (int64_t)shape_.size() != desc.rank)
    return false;
  for (int32_t i = 0; i < desc.rank; ++i)
    if (shape_[i] != desc.shape[i])
      return false;
  return true;
}

Tensor Tensor::clone() const { return fromBytes(dtype_, shape_, data(), bytes()); }

} // namespace aotc::rt
