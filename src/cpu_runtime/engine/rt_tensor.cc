#include "cpu_runtime/engine/rt_tensor.h"

#include <cmath>
#include <cstring>
#include <limits>

#include "ir/status.h"

namespace fusionopt::cpu {

RtTensor RtTensor::WrapConstant(const TensorPtr& constant) {
  FUSIONOPT_CHECK(constant->dtype() != DataType::kString, "string tensors are not computed");
  // Aliasing constructor: the pointer is the constant's bytes, the owner is the constant.
  std::shared_ptr<uint8_t> storage(constant, const_cast<uint8_t*>(constant->bytes().data()));
  return RtTensor(constant->dtype(), constant->dims(), std::move(storage));
}

RtTensor RtTensor::Allocate(DataType dtype, std::vector<int64_t> dims) {
  int64_t count = 1;
  for (int64_t dim : dims) count *= dim;
  uint64_t bytes = ByteSizeOf(dtype, static_cast<uint64_t>(count));
  std::shared_ptr<uint8_t> storage(new uint8_t[bytes > 0 ? bytes : 1](), std::default_delete<uint8_t[]>());
  return RtTensor(dtype, std::move(dims), std::move(storage));
}

int64_t RtTensor::NumElements() const {
  int64_t count = 1;
  for (int64_t dim : dims_) count *= dim;
  return count;
}

RtTensor RtTensor::Reshaped(std::vector<int64_t> dims) const {
  FUSIONOPT_CHECK(row_major(), "only a row-major tensor has views");
  RtTensor view(dtype_, std::move(dims), storage_);
  FUSIONOPT_CHECK(view.NumElements() == NumElements(), "a view keeps the element count");
  return view;
}

namespace {

// A double outside int64's range (Slice's INT64_MAX "to the end" is 2^63 as a double) or NaN
// has no int64 value: converting it is undefined behaviour, so it saturates (NaN gives 0).
int64_t SaturatingInt64(double value) {
  constexpr double kTwoTo63 = 9223372036854775808.0;
  if (std::isnan(value)) return 0;
  if (value >= kTwoTo63) return std::numeric_limits<int64_t>::max();
  if (value < -kTwoTo63) return std::numeric_limits<int64_t>::min();
  return static_cast<int64_t>(value);
}

}  // namespace

std::vector<int64_t> RtTensor::ToInt64s() const {
  std::vector<int64_t> out(static_cast<size_t>(NumElements()));
  if (out.empty()) return out;  // an empty tensor may have no storage to copy from
  if (dtype_ == DataType::kInt64) {
    std::memcpy(out.data(), raw(), out.size() * sizeof(int64_t));  // exact
    return out;
  }
  for (size_t i = 0; i < out.size(); ++i) out[i] = SaturatingInt64(ValueAsDouble(static_cast<int64_t>(i)));
  return out;
}

double RtTensor::ValueAsDouble(int64_t i) const {
  switch (dtype_) {
    case DataType::kFloat: return data<float>()[i];
    case DataType::kDouble: return data<double>()[i];
    case DataType::kFloat16: return HalfToFloat(data<uint16_t>()[i]);
    case DataType::kBFloat16: return BFloat16ToFloat(data<uint16_t>()[i]);
    case DataType::kInt64: return static_cast<double>(data<int64_t>()[i]);
    case DataType::kInt32: return data<int32_t>()[i];
    case DataType::kInt16: return data<int16_t>()[i];
    case DataType::kInt8: return data<int8_t>()[i];
    case DataType::kUint8: case DataType::kBool: return data<uint8_t>()[i];
    case DataType::kUint16: return data<uint16_t>()[i];
    case DataType::kUint32: return data<uint32_t>()[i];
    case DataType::kUint64: return static_cast<double>(data<uint64_t>()[i]);
    default: return 0.0;
  }
}

std::string DimsToString(const std::vector<int64_t>& dims) {
  std::string out = "[";
  for (size_t i = 0; i < dims.size(); ++i) out += (i ? "," : "") + std::to_string(dims[i]);
  return out + "]";
}

}  // namespace fusionopt::cpu
