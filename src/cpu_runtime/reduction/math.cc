#include <cstring>

#include "cpu_runtime/reduction/math.h"

#include "cpu_runtime/engine/vector_isa.h"

namespace fusionopt::cpu::reduction {
namespace {

constexpr float kMinArgument = -87.0f;  // exp(-87) is still a normal float
constexpr float kLog2E = 1.44269504088896341f;
constexpr float kLn2High = 0.693145751953125f;  // few mantissa bits: n * kLn2High is exact
constexpr float kLn2Low = 1.428606765330187045e-06f;
constexpr float kRoundMagic = 12582912.0f;       // 1.5 * 2^23: adding it rounds to an integer
constexpr int32_t kRoundMagicBits = 0x4B400000;  // its bit pattern; the integer is in the low bits

// GCC vector extensions; the sizes are spelled out because GCC ignores vector_size on a
// dependent type inside a template.
using Floats4 = float __attribute__((vector_size(16)));
using Ints4 = int32_t __attribute__((vector_size(16)));
using Floats8 = float __attribute__((vector_size(32)));
using Ints8 = int32_t __attribute__((vector_size(32)));
using Floats16 = float __attribute__((vector_size(64)));
using Ints16 = int32_t __attribute__((vector_size(64)));

// exp of `count` <= vector-width values. Always inlined, so each vector width is compiled
// under its caller's target (out of line, a 64-byte vector in baseline code is emulated). Selects are bitwise blends: the vector ?: operator
// is lowered element by element. No vector-typed parameters, which would change the ABI
// between the SSE2, AVX2 and AVX-512 builds.
template <typename Floats, typename Ints>
[[gnu::always_inline]] inline void ExpBlock(const float* in, float shift, float* out, int64_t count) {
  Floats x{};
  std::memcpy(&x, in, static_cast<size_t>(count) * sizeof(float));
  x -= shift;
  const Ints too_small = x < kMinArgument;
  const Floats clamped = (Floats)(((Ints)(Floats{} + kMinArgument) & too_small) | ((Ints)x & ~too_small));
  const Floats shifted = clamped * kLog2E + kRoundMagic;
  const Floats whole = shifted - kRoundMagic;
  const Ints exponent = (Ints)shifted - kRoundMagicBits;
  const Floats r = (clamped - whole * kLn2High) - whole * kLn2Low;
  Floats p = Floats{} + 1.0f / 5040.0f;
  p = p * r + 1.0f / 720.0f;
  p = p * r + 1.0f / 120.0f;
  p = p * r + 1.0f / 24.0f;
  p = p * r + 1.0f / 6.0f;
  p = p * r + 0.5f;
  p = p * r + 1.0f;
  p = p * r + 1.0f;
  const Ints scale_bits = (exponent + 127) << 23;
  const Floats result = (Floats)((Ints)(p * (Floats)scale_bits) & ~too_small);
  std::memcpy(out, &result, static_cast<size_t>(count) * sizeof(float));
}

template <typename Floats, typename Ints>
[[gnu::always_inline]] inline void ExpLoop(const float* in, float shift, float* out, int64_t n) {
  constexpr int64_t kWidth = sizeof(Floats) / sizeof(float);
  static_assert(sizeof(Ints) == sizeof(Floats) && kWidth > 1, "vector types expected");
  int64_t i = 0;
  for (; i + kWidth <= n; i += kWidth) ExpBlock<Floats, Ints>(in + i, shift, out + i, kWidth);
  if (i < n) ExpBlock<Floats, Ints>(in + i, shift, out + i, n - i);
}

__attribute__((target("avx2"))) void ExpLoopAvx2(const float* in, float shift, float* out, int64_t n) {
  ExpLoop<Floats8, Ints8>(in, shift, out, n);
}

__attribute__((target("avx512f,avx512dq,avx512bw,avx512vl"))) void ExpLoopAvx512(const float* in, float shift,
                                                                                  float* out, int64_t n) {
  ExpLoop<Floats16, Ints16>(in, shift, out, n);
}

}  // namespace

void ExpShifted(const float* in, float shift, float* out, int64_t n) {
  switch (ActiveVectorIsa()) {
    case VectorIsa::kAvx512: return ExpLoopAvx512(in, shift, out, n);
    case VectorIsa::kAvx2: return ExpLoopAvx2(in, shift, out, n);
    case VectorIsa::kBaseline: return ExpLoop<Floats4, Ints4>(in, shift, out, n);
  }
}

}  // namespace fusionopt::cpu::reduction
