#pragma once

#include <cstdint>
#include <optional>

namespace podshaper {

// Overflow-checked unsigned arithmetic: every size podshaper computes goes
// through these, so an absurd annotation is an error, never a wrapped number.
inline std::optional<uint64_t> checkedMul(uint64_t a, uint64_t b) {
  uint64_t r;
  if (__builtin_mul_overflow(a, b, &r)) return std::nullopt;
  return r;
}

inline std::optional<uint64_t> checkedAdd(uint64_t a, uint64_t b) {
  uint64_t r;
  if (__builtin_add_overflow(a, b, &r)) return std::nullopt;
  return r;
}

// ceil(a × b / c) without intermediate overflow; nullopt if c is 0 or the result overflows.
inline std::optional<uint64_t> mulDivCeil(uint64_t a, uint64_t b, uint64_t c) {
  __extension__ typedef unsigned __int128 u128;
  if (c == 0) return std::nullopt;
  u128 r = (static_cast<u128>(a) * b + c - 1) / c;
  if (r > UINT64_MAX) return std::nullopt;
  return static_cast<uint64_t>(r);
}

inline constexpr uint64_t kMiB = 1024ULL * 1024ULL;

// Rounds up to whole MiB and returns the count of MiB.
inline uint64_t ceilMiB(uint64_t bytes) { return bytes / kMiB + (bytes % kMiB != 0 ? 1 : 0); }

}  // namespace podshaper
