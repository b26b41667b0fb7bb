#include "ir/float16.h"

#include "ir/cpu_features.h"

#include <immintrin.h>

#include <cstring>

namespace fusionopt {

float HalfToFloat(uint16_t half) {
  uint32_t sign = (half >> 15) & 1, exponent = (half >> 10) & 0x1f, mantissa = half & 0x3ff;
  uint32_t bits;
  if (exponent == 0) {
    if (mantissa == 0) {
      bits = sign << 31;
    } else {
      int shift = 0;
      while ((mantissa & 0x400) == 0) { mantissa <<= 1; ++shift; }
      mantissa &= 0x3ff;
      bits = (sign << 31) | (static_cast<uint32_t>(127 - 15 - shift + 1) << 23) | (mantissa << 13);
    }
  } else if (exponent == 0x1f) {
    // IEEE conversion quiets a signaling NaN, as F16C's vcvtph2ps does.
    bits = (sign << 31) | 0x7f800000 | (mantissa << 13) | (mantissa != 0 ? 0x400000u : 0u);
  } else {
    bits = (sign << 31) | ((exponent + 127 - 15) << 23) | (mantissa << 13);
  }
  float out;
  std::memcpy(&out, &bits, sizeof(out));
  return out;
}

uint16_t FloatToHalf(float value) {
  uint32_t bits;
  std::memcpy(&bits, &value, sizeof(bits));
  uint32_t sign = (bits >> 16) & 0x8000;
  uint32_t exponent = (bits >> 23) & 0xff;
  uint32_t mantissa = bits & 0x7fffff;
  // A NaN keeps the top of its payload and comes out quiet, as F16C's vcvtps2ph does.
  if (exponent == 0xff) return static_cast<uint16_t>(sign | 0x7c00 | (mantissa ? 0x200 | (mantissa >> 13) : 0));
  int32_t half_exponent = static_cast<int32_t>(exponent) - 127 + 15;
  if (half_exponent >= 0x1f) return static_cast<uint16_t>(sign | 0x7c00);
  if (half_exponent <= 0) {
    if (half_exponent < -10) return static_cast<uint16_t>(sign);
    mantissa |= 0x800000;
    uint32_t shift = static_cast<uint32_t>(14 - half_exponent);
    uint32_t half_mantissa = mantissa >> shift;
    uint32_t remainder = mantissa & ((1u << shift) - 1);
    uint32_t halfway = 1u << (shift - 1);
    if (remainder > halfway || (remainder == halfway && (half_mantissa & 1))) ++half_mantissa;
    return static_cast<uint16_t>(sign | half_mantissa);
  }
  uint32_t half = sign | (static_cast<uint32_t>(half_exponent) << 10) | (mantissa >> 13);
  uint32_t remainder = mantissa & 0x1fff;
  if (remainder > 0x1000 || (remainder == 0x1000 && (half & 1))) ++half;  // round to nearest even
  return static_cast<uint16_t>(half);
}

float BFloat16ToFloat(uint16_t value) {
  uint32_t bits = static_cast<uint32_t>(value) << 16;
  float out;
  std::memcpy(&out, &bits, sizeof(out));
  return out;
}

uint16_t FloatToBFloat16(float value) {
  uint32_t bits;
  std::memcpy(&bits, &value, sizeof(bits));
  if ((bits & 0x7fffffff) > 0x7f800000) return static_cast<uint16_t>((bits >> 16) | 0x40);  // NaN
  uint32_t rounding = 0x7fff + ((bits >> 16) & 1);
  return static_cast<uint16_t>((bits + rounding) >> 16);
}

namespace {

__attribute__((target("avx,f16c"))) int64_t HalfToFloatF16c(const uint16_t* in, float* out, int64_t n) {
  int64_t i = 0;
  for (; i + 8 <= n; i += 8) {
    const __m128i half = _mm_loadu_si128(reinterpret_cast<const __m128i*>(in + i));
    _mm256_storeu_ps(out + i, _mm256_cvtph_ps(half));
  }
  return i;
}

__attribute__((target("avx,f16c"))) int64_t FloatToHalfF16c(const float* in, uint16_t* out, int64_t n) {
  int64_t i = 0;
  for (; i + 8 <= n; i += 8) {
    const __m128i half = _mm256_cvtps_ph(_mm256_loadu_ps(in + i), _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
    _mm_storeu_si128(reinterpret_cast<__m128i*>(out + i), half);
  }
  return i;
}

__attribute__((target("avx,f16c"))) int64_t RoundThroughHalfF16c(float* values, int64_t n) {
  int64_t i = 0;
  for (; i + 8 <= n; i += 8) {
    const __m128i half = _mm256_cvtps_ph(_mm256_loadu_ps(values + i), _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
    _mm256_storeu_ps(values + i, _mm256_cvtph_ps(half));
  }
  return i;
}

}  // namespace

void HalfToFloatN(const uint16_t* in, float* out, int64_t n) {
  int64_t done = CpuHasF16c() ? HalfToFloatF16c(in, out, n) : 0;
  for (; done < n; ++done) out[done] = HalfToFloat(in[done]);
}

void FloatToHalfN(const float* in, uint16_t* out, int64_t n) {
  int64_t done = CpuHasF16c() ? FloatToHalfF16c(in, out, n) : 0;
  for (; done < n; ++done) out[done] = FloatToHalf(in[done]);
}

void BFloat16ToFloatN(const uint16_t* in, float* out, int64_t n) {
  for (int64_t i = 0; i < n; ++i) out[i] = BFloat16ToFloat(in[i]);
}

void FloatToBFloat16N(const float* in, uint16_t* out, int64_t n) {
  for (int64_t i = 0; i < n; ++i) out[i] = FloatToBFloat16(in[i]);
}

void RoundThroughHalfN(float* values, int64_t n) {
  int64_t done = CpuHasF16c() ? RoundThroughHalfF16c(values, n) : 0;
  for (; done < n; ++done) values[done] = HalfToFloat(FloatToHalf(values[done]));
}

}  // namespace fusionopt
