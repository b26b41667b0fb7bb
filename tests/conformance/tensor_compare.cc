#include "tensor_compare.h"

#include <cinttypes>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <vector>

namespace fusionopt::conformance {
namespace {

using cpu::RtTensor;

bool IsComparedAsFloat(DataType dtype) {
  return dtype == DataType::kFloat || dtype == DataType::kDouble || dtype == DataType::kFloat16 ||
         dtype == DataType::kBFloat16;
}

bool FloatsMatch(double expected, double actual, const Tolerance& tolerance) {
  if (std::isnan(expected)) return std::isnan(actual);
  if (std::isinf(expected)) return actual == expected;
  if (!std::isfinite(actual)) return false;
  return std::fabs(actual - expected) <= tolerance.atol + tolerance.rtol * std::fabs(expected);
}

std::string FormatValue(const RtTensor& tensor, int64_t index) {
  char text[64];
  switch (tensor.dtype()) {
    case DataType::kFloat: case DataType::kDouble: case DataType::kFloat16: case DataType::kBFloat16:
      std::snprintf(text, sizeof(text), "%.9g", tensor.ValueAsDouble(index));
      break;
    case DataType::kInt64:
      std::snprintf(text, sizeof(text), "%" PRId64, tensor.data<int64_t>()[index]);
      break;
    case DataType::kUint64:
      std::snprintf(text, sizeof(text), "%" PRIu64, tensor.data<uint64_t>()[index]);
      break;
    case DataType::kBool:
      return tensor.data<uint8_t>()[index] ? "true" : "false";
    case DataType::kInt32: case DataType::kInt16: case DataType::kInt8: case DataType::kUint8:
    case DataType::kUint16: case DataType::kUint32:
      std::snprintf(text, sizeof(text), "%.0f", tensor.ValueAsDouble(index));
      break;
    default:  // float8, packed 4-bit, complex: show the raw byte
      std::snprintf(text, sizeof(text), "0x%02x", tensor.raw()[index]);
      break;
  }
  return text;
}

std::string IndexToString(int64_t flat, const std::vector<int64_t>& dims) {
  std::vector<int64_t> index(dims.size());
  for (size_t axis = dims.size(); axis-- > 0;) {
    if (dims[axis] > 0) {
      index[axis] = flat % dims[axis];
      flat /= dims[axis];
    }
  }
  return cpu::DimsToString(index);
}

// Element-wise comparison over `count` elements; `matches(i)` decides one element.
template <typename Matches>
std::optional<std::string> FirstMismatch(const RtTensor& expected, const RtTensor& actual, int64_t count,
                                         Matches matches, bool packed) {
  int64_t first = -1;
  int64_t differing = 0;
  for (int64_t i = 0; i < count; ++i) {
    if (matches(i)) continue;
    if (first < 0) first = i;
    ++differing;
  }
  if (first < 0) return std::nullopt;
  std::string where = packed ? "byte " + std::to_string(first)
                             : "index " + std::to_string(first) + " " + IndexToString(first, expected.dims());
  return "values differ at " + where + ": expected " + FormatValue(expected, first) + ", got " +
         FormatValue(actual, first) + " (" +
         std::to_string(differing) + " of " + std::to_string(count) + (packed ? " bytes" : " elements") +
         " differ)";
}

}  // namespace

std::optional<std::string> CompareTensors(const RtTensor& expected, const RtTensor& actual,
                                          const Tolerance& tolerance) {
  if (expected.dtype() != actual.dtype()) {
    return "dtype " + std::string(NameOf(actual.dtype())) + ", expected " + std::string(NameOf(expected.dtype()));
  }
  if (expected.dims() != actual.dims()) {
    return "shape " + cpu::DimsToString(actual.dims()) + ", expected " + cpu::DimsToString(expected.dims());
  }
  int64_t count = expected.NumElements();
  if (count == 0) return std::nullopt;
  if (IsComparedAsFloat(expected.dtype())) {
    bool in_float = expected.dtype() != DataType::kDouble;
    return FirstMismatch(expected, actual, count, [&](int64_t i) {
      double want = expected.ValueAsDouble(i);
      double got = actual.ValueAsDouble(i);
      if (in_float) return FloatsMatch(static_cast<float>(want), static_cast<float>(got), tolerance);
      return FloatsMatch(want, got, tolerance);
    }, false);
  }
  int bits = BitsOf(expected.dtype());
  if (bits % 8 != 0) {  // packed 4-bit types: compare the packed bytes
    return FirstMismatch(expected, actual, static_cast<int64_t>(expected.nbytes()),
                         [&](int64_t i) { return expected.raw()[i] == actual.raw()[i]; }, true);
  }
  size_t width = static_cast<size_t>(bits / 8);
  return FirstMismatch(expected, actual, count, [&](int64_t i) {
    return std::memcmp(expected.raw() + i * width, actual.raw() + i * width, width) == 0;
  }, false);
}

}  // namespace fusionopt::conformance
