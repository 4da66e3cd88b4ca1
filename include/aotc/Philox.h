//===- Philox.h - Philox 4x32-10, aotc's counter-based random numbers -*- C++ -*-===//
//
// The one definition of aotc's random bits (docs/randomness.md). Philox 4x32-10 (Salmon et
// al., "Parallel Random Numbers: As Easy as 1, 2, 3", SC11; Random123's philox4x32 with 10
// rounds) maps a 128-bit counter and a 64-bit key to four 32-bit words. aotc draws element i
// (row-major linear index) of a random tensor from
//
//   counter = {lo32(i), hi32(i), lo32(offset), hi32(offset)},  key = {lo32(seed), hi32(seed)}
//
// where (seed, offset) is the step's RNG state (an input of role rng_state, i64[2]) with
// the random node's stream number added to the offset. So the bits depend only on (seed,
// offset, i): not on the target, the thread count or the schedule. Word 0 gives an f32 in
// [0, 1) as (w0 & 0xFFFFFF) * 2^-24; an f64 takes (w0 | w1 << 32) & (2^53 - 1), times 2^-53.
//
// Header-only and MLIR-free: the f64 reference (lib/IR/ops/Random.cpp), the unit tests and
// tools use it; codegen emits the same rounds as scalar instructions (ScalarEmit.cpp), and
// tools/export/philox.py is the Python twin the golden generator replays in torch.
//===----------------------------------------------------------------------===//
#pragma once

#include <array>
#include <cstdint>

namespace aotc::philox {

constexpr uint32_t kM0 = 0xD2511F53u, kM1 = 0xCD9E8D57u; ///< Round multipliers.
constexpr uint32_t kW0 = 0x9E3779B9u, kW1 = 0xBB67AE85u; ///< Key schedule (Weyl) increments.
constexpr int kRounds = 10;

using Counter = std::array<uint32_t, 4>;
using Key = std::array<uint32_t, 2>;

/// Philox 4x32 with `rounds` rounds (10 for aotc): Random123's philox4x32_R.
constexpr Counter philox4x32(Counter c, Key k, int rounds = kRounds) {
  for (int r = 0; r < rounds; ++r) {
    if (r > 0) {
      k[0] += kW0;
      k[1] += kW1;
    }
    uint64_t p0 = (uint64_t)kM0 * c[0], p1 = (uint64_t)kM1 * c[2];
    c = {(uint32_t)(p1 >> 32) ^ c[1] ^ k[0], (uint32_t)p1, (uint32_t)(p0 >> 32) ^ c[3] ^ k[1], (uint32_t)p0};
  }
  return c;
}

/// The four words of element `index` of a tensor drawn with (seed, offset).
constexpr Counter elementWords(uint64_t seed, uint64_t offset, uint64_t index) {
  return philox4x32({(uint32_t)index, (uint32_t)(index >> 32), (uint32_t)offset, (uint32_t)(offset >> 32)},
                    {(uint32_t)seed, (uint32_t)(seed >> 32)});
}

/// Element `index`'s uniform f32 value in [0, 1), exactly representable (24 bits).
constexpr float uniformF32(uint64_t seed, uint64_t offset, uint64_t index) {
  return (float)(elementWords(seed, offset, index)[0] & 0xFFFFFFu) * 0x1p-24f;
}

/// Element `index`'s uniform f64 value in [0, 1) (53 bits).
constexpr double uniformF64(uint64_t seed, uint64_t offset, uint64_t index) {
  Counter w = elementWords(seed, offset, index);
  uint64_t bits = ((uint64_t)w[0] | ((uint64_t)w[1] << 32)) & ((1ull << 53) - 1);
  return (double)bits * 0x1p-53;
}

} // namespace aotc::philox
