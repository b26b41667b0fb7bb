// IEEE half and bfloat16 conversions (float16 tensors are computed in float32).
#pragma once

#include <cstdint>

namespace fusionopt {

float HalfToFloat(uint16_t half);     // a NaN comes back quiet, its payload kept
uint16_t FloatToHalf(float value);  // round to nearest even; a NaN keeps its payload's top bits, quiet

// The same conversions for `n` values at once, with the CPU's F16C instructions where it has
// them (every AVX2 host): the same bits as the scalar functions, several times faster, which
// is what float16 models pay on every tensor they stage through float32.
void HalfToFloatN(const uint16_t* in, float* out, int64_t n);
void FloatToHalfN(const float* in, uint16_t* out, int64_t n);
// Each value rounded to the nearest half and back, in place: what storing a float16
// intermediate between two float32 computations does.
void RoundThroughHalfN(float* values, int64_t n);
float BFloat16ToFloat(uint16_t value);
uint16_t FloatToBFloat16(float value);  // round to nearest even
// The same for `n` values at once (plain loops the compiler vectorizes).
void BFloat16ToFloatN(const uint16_t* in, float* out, int64_t n);
void FloatToBFloat16N(const float* in, uint16_t* out, int64_t n);

// One of the two 16-bit float types, chosen at run time (bfloat16 when `bfloat16`, else half).
inline float SixteenBitToFloat(bool bfloat16, uint16_t bits) {
  return bfloat16 ? BFloat16ToFloat(bits) : HalfToFloat(bits);
}
inline uint16_t FloatToSixteenBit(bool bfloat16, float value) {
  return bfloat16 ? FloatToBFloat16(value) : FloatToHalf(value);
}
inline void SixteenBitToFloatN(bool bfloat16, const uint16_t* in, float* out, int64_t n) {
  return bfloat16 ? BFloat16ToFloatN(in, out, n) : HalfToFloatN(in, out, n);
}
inline void FloatToSixteenBitN(bool bfloat16, const float* in, uint16_t* out, int64_t n) {
  return bfloat16 ? FloatToBFloat16N(in, out, n) : FloatToHalfN(in, out, n);
}

}  // namespace fusionopt
