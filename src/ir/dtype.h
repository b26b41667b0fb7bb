// Element types, numbered exactly as onnx.TensorProto.DataType so conversion is a cast.
#pragma once

#include <cstdint>
#include <optional>
#include <string_view>

namespace fusionopt {

enum class DataType : int32_t {
  kUndefined = 0,
  kFloat = 1,
  kUint8 = 2,
  kInt8 = 3,
  kUint16 = 4,
  kInt16 = 5,
  kInt32 = 6,
  kInt64 = 7,
  kString = 8,
  kBool = 9,
  kFloat16 = 10,
  kDouble = 11,
  kUint32 = 12,
  kUint64 = 13,
  kComplex64 = 14,
  kComplex128 = 15,
  kBFloat16 = 16,
  kFloat8E4M3FN = 17,
  kFloat8E4M3FNUZ = 18,
  kFloat8E5M2 = 19,
  kFloat8E5M2FNUZ = 20,
  kUint4 = 21,
  kInt4 = 22,
  kFloat4E2M1 = 23,
  kFloat8E8M0 = 24,   // IR 12
  kUint2 = 25,        // IR 13
  kInt2 = 26,
  kFloat6E2M3 = 27,   // IR 14
  kFloat6E3M2 = 28,
};

constexpr int32_t kMaxKnownDataType = 28;

// True for every value the ONNX spec (IR version <= 14) defines, kUndefined excluded.
bool IsKnownDataType(int32_t raw);

// Storage bits of one element (4, 2 and 6 for the packed 4-bit, 2-bit and 6-bit types, 0 for
// strings/undefined).
int BitsOf(DataType type);

// Bytes needed for `count` elements in raw (packed, little-endian) layout.
uint64_t ByteSizeOf(DataType type, uint64_t count);

// Lower-case ONNX spelling used by the text form and `inspect`: float, int64, float16, ...
std::string_view NameOf(DataType type);
std::optional<DataType> ParseDataType(std::string_view name);

bool IsFloatingPoint(DataType type);
bool IsInteger(DataType type);
// uint8 or int8: the types 8-bit quantized tensors and the integer kernels take.
inline bool IsEightBitInteger(DataType type) { return type == DataType::kUint8 || type == DataType::kInt8; }

}  // namespace fusionopt
