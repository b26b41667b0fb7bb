#include "ir/dtype.h"

#include <array>

namespace fusionopt {
namespace {

struct TypeEntry {
  std::string_view name;
  int bits;
};

// Indexed by the enum value.
constexpr std::array<TypeEntry, kMaxKnownDataType + 1> kTypes = {{
    {"undefined", 0}, {"float", 32},    {"uint8", 8},         {"int8", 8},
    {"uint16", 16},   {"int16", 16},    {"int32", 32},        {"int64", 64},
    {"string", 0},    {"bool", 8},      {"float16", 16},      {"double", 64},
    {"uint32", 32},   {"uint64", 64},   {"complex64", 64},    {"complex128", 128},
    {"bfloat16", 16}, {"float8e4m3fn", 8}, {"float8e4m3fnuz", 8}, {"float8e5m2", 8},
    {"float8e5m2fnuz", 8}, {"uint4", 4}, {"int4", 4},         {"float4e2m1", 4},
    {"float8e8m0", 8}, {"uint2", 2},    {"int2", 2},          {"float6e2m3", 6},
    {"float6e3m2", 6},
}};

}  // namespace

bool IsKnownDataType(int32_t raw) { return raw > 0 && raw <= kMaxKnownDataType; }

int BitsOf(DataType type) {
  auto index = static_cast<int32_t>(type);
  return IsKnownDataType(index) ? kTypes[index].bits : 0;
}

uint64_t ByteSizeOf(DataType type, uint64_t count) {
  return (count * static_cast<uint64_t>(BitsOf(type)) + 7) / 8;
}

std::string_view NameOf(DataType type) {
  auto index = static_cast<int32_t>(type);
  return (index >= 0 && index <= kMaxKnownDataType) ? kTypes[index].name : "unknown";
}

std::optional<DataType> ParseDataType(std::string_view name) {
  for (int32_t i = 1; i <= kMaxKnownDataType; ++i) {
    if (kTypes[i].name == name) return static_cast<DataType>(i);
  }
  return std::nullopt;
}

bool IsFloatingPoint(DataType type) {
  switch (type) {
    case DataType::kFloat: case DataType::kDouble: case DataType::kFloat16:
    case DataType::kBFloat16: case DataType::kFloat8E4M3FN: case DataType::kFloat8E4M3FNUZ:
    case DataType::kFloat8E5M2: case DataType::kFloat8E5M2FNUZ: case DataType::kFloat4E2M1:
    case DataType::kFloat8E8M0: case DataType::kFloat6E2M3: case DataType::kFloat6E3M2:
      return true;
    default:
      return false;
  }
}

bool IsInteger(DataType type) {
  switch (type) {
    case DataType::kUint8: case DataType::kInt8: case DataType::kUint16: case DataType::kInt16:
    case DataType::kInt32: case DataType::kInt64: case DataType::kUint32:
    case DataType::kUint64: case DataType::kUint4: case DataType::kInt4: case DataType::kUint2:
    case DataType::kInt2:
      return true;
    default:
      return false;
  }
}

}  // namespace fusionopt
