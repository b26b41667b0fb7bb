// exp of max-shifted values, vectorized: the inner loop of Softmax and LogSoftmax.
//
// The compiler cannot vectorize std::exp (no vector libm without -ffast-math), and a scalar
// call per element made Softmax six times slower than a reduction over the same bytes. The
// arguments here are x - max(row) <= 0 (or NaN), which keeps the float routine simple:
// exp(r + n ln2) = 2^n exp(r) with |r| <= ln2 / 2, exp(r) by its degree-7 Taylor polynomial
// (truncation error below 6e-9, so the result is within a few ulp of the exact value), and
// 2^n built in the exponent bits. Arguments below -87 (including -inf) give 0.
#pragma once

#include <cmath>
#include <cstdint>
#include <cstring>

namespace fusionopt::cpu::reduction {

namespace exp_detail {

constexpr int kWidth = 4;
using Floats = float __attribute__((vector_size(kWidth * sizeof(float))));
using Ints = int32_t __attribute__((vector_size(kWidth * sizeof(int32_t))));

constexpr float kMinArgument = -87.0f;  // exp(-87) is still a normal float
constexpr float kLog2E = 1.44269504088896341f;
constexpr float kLn2High = 0.693145751953125f;  // few mantissa bits: n * kLn2High is exact
constexpr float kLn2Low = 1.428606765330187045e-06f;
constexpr float kRoundMagic = 12582912.0f;  // 1.5 * 2^23: adding it rounds to an integer
constexpr int32_t kRoundMagicBits = 0x4B400000;  // its bit pattern; the integer is in the low bits

// mask ? a : b with a bitwise blend: the vector ?: operator is lowered element by element.
inline Floats Select(Ints mask, Floats a, Floats b) { return (Floats)(((Ints)a & mask) | ((Ints)b & ~mask)); }

// In place, by reference: 32-byte vectors passed by value would change the ABI without AVX.
inline void ExpNonPositive(Floats& x) {
  const Ints too_small = x < kMinArgument;
  const Floats clamped = Select(too_small, Floats{} + kMinArgument, x);  // NaN stays NaN
  const Floats shifted = clamped * kLog2E + kRoundMagic;
  const Floats n = shifted - kRoundMagic;
  const Ints exponent = (Ints)shifted - kRoundMagicBits;
  const Floats r = (clamped - n * kLn2High) - n * kLn2Low;
  Floats p = Floats{} + 1.0f / 5040.0f;
  p = p * r + 1.0f / 720.0f;
  p = p * r + 1.0f / 120.0f;
  p = p * r + 1.0f / 24.0f;
  p = p * r + 1.0f / 6.0f;
  p = p * r + 0.5f;
  p = p * r + 1.0f;
  p = p * r + 1.0f;
  const Ints scale_bits = (exponent + 127) << 23;
  x = Select(too_small, Floats{}, p * (Floats)scale_bits);
}

}  // namespace exp_detail

// values[i] = exp(values[i]) for arguments <= 0 (or NaN); results within a few ulp.
inline void ExpNonPositiveInPlace(float* values, int64_t n) {
  using exp_detail::Floats;
  using exp_detail::kWidth;
  int64_t i = 0;
  for (; i + kWidth <= n; i += kWidth) {
    Floats block;
    std::memcpy(&block, values + i, sizeof(block));
    exp_detail::ExpNonPositive(block);
    std::memcpy(values + i, &block, sizeof(block));
  }
  if (i < n) {
    Floats block{};
    std::memcpy(&block, values + i, static_cast<size_t>(n - i) * sizeof(float));
    exp_detail::ExpNonPositive(block);
    std::memcpy(values + i, &block, static_cast<size_t>(n - i) * sizeof(float));
  }
}

inline void ExpNonPositiveInPlace(double* values, int64_t n) {
  for (int64_t i = 0; i < n; ++i) values[i] = std::exp(values[i]);
}

}  // namespace fusionopt::cpu::reduction
