// Moving values between tensor memory and tile registers: the lane each dtype computes in,
// loads and stores converting between storage and lane, and rounding results to storage.
#include <algorithm>
#include <type_traits>

#include "cpu_runtime/elementwise/internal.h"

namespace fusionopt::cpu::ew {

bool Computes(DataType dtype) { return LaneOf(dtype).has_value(); }

std::optional<Lane> LaneOf(DataType dtype) {
  switch (dtype) {
    case DataType::kFloat: case DataType::kFloat16: case DataType::kBFloat16: return Lane::kF32;
    case DataType::kDouble: return Lane::kF64;
    case DataType::kBool: return Lane::kBool;
    case DataType::kInt8: case DataType::kInt16: case DataType::kInt32: case DataType::kInt64:
    case DataType::kUint8: case DataType::kUint16: case DataType::kUint32: case DataType::kUint64:
      return Lane::kI64;
    default: return std::nullopt;
  }
}

DataType LaneStorage(DataType dtype) {
  switch (*LaneOf(dtype)) {
    case Lane::kF32: return DataType::kFloat;
    case Lane::kF64: return DataType::kDouble;
    case Lane::kI64: return DataType::kInt64;
    case Lane::kBool: return DataType::kBool;
  }
  return dtype;
}

bool StoredAsLane(DataType dtype, Lane lane) {
  switch (dtype) {
    case DataType::kFloat: return lane == Lane::kF32;
    case DataType::kDouble: return lane == Lane::kF64;
    case DataType::kInt64: return lane == Lane::kI64;
    case DataType::kBool: return lane == Lane::kBool;
    default: return false;
  }
}

namespace {

template <typename Src, typename Dst>
void LoadRun(Dst* dst, const Src* src, int64_t stride, int n) {
  if (stride == 0) {
    Dst value = static_cast<Dst>(src[0]);
    std::fill(dst, dst + n, value);
  } else {
    for (int i = 0; i < n; ++i) dst[i] = static_cast<Dst>(src[i]);
  }
}

template <typename Dst, typename Convert>
void LoadRunConverted(Dst* dst, const uint16_t* src, int64_t stride, int n, Convert convert) {
  if (stride == 0) {
    std::fill(dst, dst + n, static_cast<Dst>(convert(src[0])));
  } else {
    for (int i = 0; i < n; ++i) dst[i] = static_cast<Dst>(convert(src[i]));
  }
}

// Copies `n` elements of `input` starting at element `offset` (stride 0 or 1) into `dst`,
// converting to the register's lane.
template <typename Dst>
void LoadTyped(Dst* dst, const RtTensor& input, int64_t offset, int64_t stride, int n) {
  const uint8_t* base = input.raw();
  switch (input.dtype()) {
    case DataType::kFloat: return LoadRun(dst, reinterpret_cast<const float*>(base) + offset, stride, n);
    case DataType::kDouble: return LoadRun(dst, reinterpret_cast<const double*>(base) + offset, stride, n);
    case DataType::kFloat16:
      if constexpr (std::is_same_v<Dst, float>) {
        if (stride == 1) return HalfToFloatN(reinterpret_cast<const uint16_t*>(base) + offset, dst, n);
      }
      return LoadRunConverted(dst, reinterpret_cast<const uint16_t*>(base) + offset, stride, n, HalfToFloat);
    case DataType::kBFloat16:
      return LoadRunConverted(dst, reinterpret_cast<const uint16_t*>(base) + offset, stride, n, BFloat16ToFloat);
    case DataType::kInt64: return LoadRun(dst, reinterpret_cast<const int64_t*>(base) + offset, stride, n);
    case DataType::kInt32: return LoadRun(dst, reinterpret_cast<const int32_t*>(base) + offset, stride, n);
    case DataType::kInt16: return LoadRun(dst, reinterpret_cast<const int16_t*>(base) + offset, stride, n);
    case DataType::kInt8: return LoadRun(dst, reinterpret_cast<const int8_t*>(base) + offset, stride, n);
    case DataType::kUint64: return LoadRun(dst, reinterpret_cast<const uint64_t*>(base) + offset, stride, n);
    case DataType::kUint32: return LoadRun(dst, reinterpret_cast<const uint32_t*>(base) + offset, stride, n);
    case DataType::kUint16: return LoadRun(dst, reinterpret_cast<const uint16_t*>(base) + offset, stride, n);
    case DataType::kUint8: case DataType::kBool:
      return LoadRun(dst, reinterpret_cast<const uint8_t*>(base) + offset, stride, n);
    default: FUSIONOPT_CHECK(false, "dtype validated by the builder");
  }
}

template <typename Src, typename Dst>
void StoreRun(Dst* dst, const Src* src, int n) {
  for (int i = 0; i < n; ++i) dst[i] = static_cast<Dst>(src[i]);
}

template <typename Src>
void StoreTyped(const Src* src, RtTensor& output, int64_t offset, int n) {
  uint8_t* base = output.raw();
  switch (output.dtype()) {
    case DataType::kFloat: return StoreRun(reinterpret_cast<float*>(base) + offset, src, n);
    case DataType::kDouble: return StoreRun(reinterpret_cast<double*>(base) + offset, src, n);
    case DataType::kFloat16:
      if constexpr (std::is_same_v<Src, float>) return FloatToHalfN(src, reinterpret_cast<uint16_t*>(base) + offset, n);
      for (int i = 0; i < n; ++i) reinterpret_cast<uint16_t*>(base)[offset + i] = FloatToHalf(static_cast<float>(src[i]));
      return;
    case DataType::kBFloat16:
      for (int i = 0; i < n; ++i) {
        reinterpret_cast<uint16_t*>(base)[offset + i] = FloatToBFloat16(static_cast<float>(src[i]));
      }
      return;
    case DataType::kInt64: return StoreRun(reinterpret_cast<int64_t*>(base) + offset, src, n);
    case DataType::kInt32: return StoreRun(reinterpret_cast<int32_t*>(base) + offset, src, n);
    case DataType::kInt16: return StoreRun(reinterpret_cast<int16_t*>(base) + offset, src, n);
    case DataType::kInt8: return StoreRun(reinterpret_cast<int8_t*>(base) + offset, src, n);
    case DataType::kUint64: return StoreRun(reinterpret_cast<uint64_t*>(base) + offset, src, n);
    case DataType::kUint32: return StoreRun(reinterpret_cast<uint32_t*>(base) + offset, src, n);
    case DataType::kUint16: return StoreRun(reinterpret_cast<uint16_t*>(base) + offset, src, n);
    case DataType::kUint8: return StoreRun(reinterpret_cast<uint8_t*>(base) + offset, src, n);
    case DataType::kBool:
      for (int i = 0; i < n; ++i) base[offset + i] = src[i] != Src(0);
      return;
    default: FUSIONOPT_CHECK(false, "dtype validated by the builder");
  }
}

}  // namespace

void Load(const TileRegisters& regs, int reg, const RtTensor& input, int64_t offset, int64_t stride,
          int at, int n) {
  switch (regs.lane(reg)) {
    case Lane::kF32: return LoadTyped(regs.at<float>(reg) + at, input, offset, stride, n);
    case Lane::kF64: return LoadTyped(regs.at<double>(reg) + at, input, offset, stride, n);
    case Lane::kI64: return LoadTyped(regs.at<int64_t>(reg) + at, input, offset, stride, n);
    case Lane::kBool: return LoadTyped(regs.at<uint8_t>(reg) + at, input, offset, stride, n);
  }
}

void Store(const TileRegisters& regs, int reg, RtTensor& output, int64_t offset, int n) {
  switch (regs.lane(reg)) {
    case Lane::kF32: return StoreTyped(regs.at<float>(reg), output, offset, n);
    case Lane::kF64: return StoreTyped(regs.at<double>(reg), output, offset, n);
    case Lane::kI64: return StoreTyped(regs.at<int64_t>(reg), output, offset, n);
    case Lane::kBool: return StoreTyped(regs.at<uint8_t>(reg), output, offset, n);
  }
}

TileRegisters::TileRegisters(const Program& program, int capacity)
    : capacity_(capacity),
      storage_(program.register_dtypes.size() * static_cast<size_t>(capacity)),
      bound_(program.register_dtypes.size(), nullptr),
      dtypes_(program.register_dtypes) {
  for (DataType dtype : dtypes_) lanes_.push_back(*LaneOf(dtype));
}

void RoundToStorage(DataType dtype, void* values, int n) {
  auto wrap = [&](auto narrow) {
    auto* v = static_cast<int64_t*>(values);
    for (int i = 0; i < n; ++i) v[i] = static_cast<int64_t>(static_cast<decltype(narrow)>(v[i]));
  };
  switch (dtype) {
    case DataType::kFloat16: return RoundThroughHalfN(static_cast<float*>(values), n);
    case DataType::kBFloat16: {
      auto* v = static_cast<float*>(values);
      for (int i = 0; i < n; ++i) v[i] = BFloat16ToFloat(FloatToBFloat16(v[i]));
      return;
    }
    case DataType::kInt32: return wrap(int32_t{});
    case DataType::kInt16: return wrap(int16_t{});
    case DataType::kInt8: return wrap(int8_t{});
    case DataType::kUint32: return wrap(uint32_t{});
    case DataType::kUint16: return wrap(uint16_t{});
    case DataType::kUint8: return wrap(uint8_t{});
    default: return;
  }
}

}  // namespace fusionopt::cpu::ew
