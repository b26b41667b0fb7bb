#include "ir/minifloat.h"

#include <algorithm>
#include <cmath>
#include <limits>

#include "ir/status.h"

namespace fusionopt {
namespace {

struct Format {
  int bits;           // 8, or 4 for float4e2m1
  int mantissa_bits;
  int bias;
  bool has_inf;       // e5m2: exponent all ones, mantissa 0
  bool fnuz;          // NaN is 0x80 alone; no negative zero
  bool has_nan;       // float4e2m1 has none
  uint8_t max_code;   // the largest finite positive value
  uint8_t nan_code;   // positive NaN (the sign bit is added for the non-fnuz types)

  uint8_t sign_bit() const { return static_cast<uint8_t>(1u << (bits - 1)); }
  int min_normal_exponent() const { return 1 - bias; }
};

Format FormatOf(DataType type) {
  switch (type) {
    case DataType::kFloat8E4M3FN: return {8, 3, 7, false, false, true, 0x7E, 0x7F};
    case DataType::kFloat8E4M3FNUZ: return {8, 3, 8, false, true, true, 0x7F, 0x80};
    case DataType::kFloat8E5M2: return {8, 2, 15, true, false, true, 0x7B, 0x7E};
    case DataType::kFloat8E5M2FNUZ: return {8, 2, 16, false, true, true, 0x7F, 0x80};
    case DataType::kFloat4E2M1: return {4, 1, 1, false, false, false, 0x7, 0x7};
    default: FUSIONOPT_CHECK(false, "a minifloat type");
  }
  return {};
}

float Decode(const Format& format, uint8_t code) {
  const uint8_t sign = code & format.sign_bit();
  const uint8_t magnitude = code & static_cast<uint8_t>(format.sign_bit() - 1);
  if (format.fnuz && code == 0x80) return std::numeric_limits<float>::quiet_NaN();
  const int exponent = magnitude >> format.mantissa_bits;
  const int mantissa = magnitude & ((1 << format.mantissa_bits) - 1);
  const int all_ones = (1 << (format.bits - 1 - format.mantissa_bits)) - 1;
  if (format.has_inf && exponent == all_ones) {
    const float special = mantissa == 0 ? std::numeric_limits<float>::infinity() : std::numeric_limits<float>::quiet_NaN();
    return sign ? -special : special;
  }
  if (format.has_nan && !format.fnuz && !format.has_inf && magnitude == format.nan_code) {
    return std::numeric_limits<float>::quiet_NaN();
  }
  const double value = exponent == 0
                           ? std::ldexp(mantissa, format.min_normal_exponent() - format.mantissa_bits)
                           : std::ldexp((1 << format.mantissa_bits) + mantissa, exponent - format.bias - format.mantissa_bits);
  return static_cast<float>(sign ? -value : value);
}

// What a value beyond the largest finite one becomes.
uint8_t Overflow(const Format& format, uint8_t sign, bool saturate) {
  if (saturate || !format.has_nan) return sign | format.max_code;
  if (format.has_inf) return sign | static_cast<uint8_t>(format.max_code + 1);  // e5m2: 0x7C
  return format.fnuz ? format.nan_code : sign | format.nan_code;
}

uint8_t Encode(const Format& format, float value, bool saturate) {
  if (std::isnan(value)) {
    if (!format.has_nan) return format.max_code;
    return format.fnuz ? format.nan_code : static_cast<uint8_t>((std::signbit(value) ? format.sign_bit() : 0) | format.nan_code);
  }
  const uint8_t sign = std::signbit(value) ? format.sign_bit() : 0;
  const uint8_t zero = format.fnuz ? 0 : sign;
  const double magnitude = std::abs(static_cast<double>(value));
  if (std::isinf(magnitude)) return Overflow(format, sign, saturate);
  if (magnitude == 0) return zero;
  // Count quanta of the binade (or of the subnormal range) and round to nearest even.
  const int exponent = std::max(std::ilogb(magnitude), format.min_normal_exponent());
  const int quantum = exponent - format.mantissa_bits;
  const double quanta = std::nearbyint(std::ldexp(magnitude, -quantum));
  if (std::ldexp(quanta, quantum) > Decode(format, format.max_code)) return Overflow(format, sign, saturate);
  if (quanta == 0) return zero;
  // Quanta past the binade's top carry into the exponent field: the code is (binade << m) + quanta.
  const int code = ((exponent - format.min_normal_exponent()) << format.mantissa_bits) + static_cast<int>(quanta);
  return static_cast<uint8_t>(sign | code);
}

}  // namespace

bool IsMinifloat(DataType type) {
  return type == DataType::kFloat8E4M3FN || type == DataType::kFloat8E4M3FNUZ || type == DataType::kFloat8E5M2 ||
         type == DataType::kFloat8E5M2FNUZ || type == DataType::kFloat4E2M1;
}

float MinifloatToFloat(DataType type, uint8_t code) { return Decode(FormatOf(type), code); }

uint8_t FloatToMinifloat(DataType type, float value, bool saturate) { return Encode(FormatOf(type), value, saturate); }

}  // namespace fusionopt
