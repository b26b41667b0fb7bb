// The 8- and 4-bit float types of ONNX (float8e4m3fn, float8e4m3fnuz, float8e5m2,
// float8e5m2fnuz, float4e2m1): conversions from and to float32, as QuantizeLinear,
// DequantizeLinear and Cast define them.
//
// float32 → minifloat rounds to nearest even. Out of range: with `saturate` a value (or an
// infinity) becomes the largest finite value of its sign; without it, infinity where the type
// has one (e5m2), else NaN. float4e2m1 has neither, so it always saturates. NaN stays NaN:
// 0x7F/0xFF for e4m3fn, 0x7E/0xFE for e5m2 (what ml_dtypes writes, which ONNX's reference
// uses), 0x80 for the "fnuz" types (which have no negative zero either: -0 becomes 0).
#pragma once

#include <cstdint>

#include "ir/dtype.h"

namespace fusionopt {

// Whether `type` is one of the minifloats above.
bool IsMinifloat(DataType type);

// `code` (the low 4 bits for float4e2m1) of minifloat `type` as float32 (exact).
float MinifloatToFloat(DataType type, uint8_t code);
uint8_t FloatToMinifloat(DataType type, float value, bool saturate);

}  // namespace fusionopt
