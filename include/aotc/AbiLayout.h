//===- AbiLayout.h - The layout of the object's descriptor structs -*- C++ -*-===//
//
// The compiler emits the descriptor structs of runtime/include/aotc/abi.h (aotc_program,
// aotc_tensor_desc, aotc_train, ...) as LLVM constants whose types are spelled in one place,
// lib/Codegen/AbiTypes.cpp. abiLayouts() gives those types' sizes and field offsets under a
// data layout, so that a test can hold them against abi.h's offsetof and sizeof: the C
// header and the compiler's copy cannot drift apart unnoticed (docs/abi.md "Layout").
//===----------------------------------------------------------------------===//
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace aotc {

struct AbiLayout {
  std::string name;              ///< The C struct's name, e.g. "aotc_program".
  uint64_t size = 0;             ///< sizeof, bytes.
  std::vector<uint64_t> offsets; ///< offsetof of each field, bytes, in abi.h's order.
};

/// x86-64 Linux (the CPU target's data layout, also the host's for the CUDA object).
constexpr const char *kX86_64DataLayout = "e-m:e-p270:32:32-p271:32:32-p272:64:64-i64:64-i128:128-f80:128-n8:16:32:64-S128";

/// Every descriptor struct the compiler emits, laid out under `dataLayout`.
std::vector<AbiLayout> abiLayouts(const std::string &dataLayout = kX86_64DataLayout);

} // namespace aotc
