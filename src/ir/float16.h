// IEEE half and bfloat16 conversions (float16 tensors are computed in float32).
#pragma once

#include <cstdint>

namespace fusionopt {

float HalfToFloat(uint16_t half);
uint16_t FloatToHalf(float value);  // round to nearest even
float BFloat16ToFloat(uint16_t value);
uint16_t FloatToBFloat16(float value);  // round to nearest even

}  // namespace fusionopt
