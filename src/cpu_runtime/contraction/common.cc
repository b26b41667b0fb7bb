#include "cpu_runtime/contraction/common.h"

#include <algorithm>
#include <cstdlib>
#include <cstring>

#include "cpu_runtime/engine/host_cpu.h"
#include "ir/float16.h"

namespace fusionopt::cpu {

bool IsHalfPrecision(DataType dtype) {
  return dtype == DataType::kFloat16 || dtype == DataType::kBFloat16;
}

bool IsSupportedFloat(DataType dtype) {
  return dtype == DataType::kFloat || dtype == DataType::kDouble || IsHalfPrecision(dtype);
}

namespace {

// Half conversions run in blocks, spread over the threads when there are many.
constexpr int64_t kConvertBlock = 16384;

// `convert(in, out, n)` over `count` values in blocks.
template <typename From, typename To, typename Convert>
void ConvertInBlocks(const From* in, To* out, int64_t count, Convert convert) {
  const int64_t blocks = (count + kConvertBlock - 1) / kConvertBlock;
#pragma omp parallel for if (blocks > 4)
  for (int64_t block = 0; block < blocks; ++block) {
    const int64_t start = block * kConvertBlock;
    convert(in + start, out + start, std::min(kConvertBlock, count - start));
  }
}

void ConvertToFloat32(const RtTensor& source, float* out) {
  const int64_t count = source.NumElements();
  switch (source.dtype()) {
    case DataType::kFloat16: return ConvertInBlocks(source.data<uint16_t>(), out, count, HalfToFloatN);
    case DataType::kBFloat16: return ConvertInBlocks(source.data<uint16_t>(), out, count, BFloat16ToFloatN);
    default:
      for (int64_t i = 0; i < count; ++i) out[i] = static_cast<float>(source.ValueAsDouble(i));
  }
}

}  // namespace

RtTensor ToFloat32(const RtTensor& tensor, Allocator& allocator) {
  if (tensor.dtype() == DataType::kFloat) return tensor;
  RtTensor converted = allocator.Allocate(DataType::kFloat, tensor.dims());
  ConvertToFloat32(tensor, converted.data<float>());
  return converted;
}

RtTensor ConstantToFloat32(const TensorPtr& constant) {
  if (constant == nullptr) return RtTensor();
  RtTensor wrapped = RtTensor::WrapConstant(constant);
  if (wrapped.dtype() == DataType::kFloat) return wrapped;
  RtTensor converted = RtTensor::Allocate(DataType::kFloat, wrapped.dims());
  ConvertToFloat32(wrapped, converted.data<float>());
  return converted;
}

ConstantWeights ConstantWeightsLayout() {
  static const ConstantWeights layout = [] {
    const char* requested = std::getenv("FUSIONOPT_CPU_GEMM_WEIGHTS");
    if (requested != nullptr && std::strcmp(requested, "packed") == 0) return ConstantWeights::kPacked;
    if (requested != nullptr && std::strcmp(requested, "column-major") == 0) return ConstantWeights::kColumnMajor;
    return ThisHost().onednn_avx512 ? ConstantWeights::kPacked : ConstantWeights::kColumnMajor;
  }();
  return layout;
}

RtTensor TransposedMatrix(const RtTensor& matrix) {
  FUSIONOPT_CHECK(matrix.dtype() == DataType::kFloat && matrix.rank() >= 2, "a float32 matrix to transpose");
  std::vector<int64_t> dims = matrix.dims();
  const int64_t rows = dims[dims.size() - 2], columns = dims.back();
  std::swap(dims[dims.size() - 2], dims.back());
  RtTensor transposed = RtTensor::Allocate(DataType::kFloat, dims);
  const int64_t matrices = rows * columns == 0 ? 0 : matrix.NumElements() / (rows * columns);
  const float* in = matrix.data<float>();
  float* out = transposed.data<float>();
  for (int64_t index = 0; index < matrices; ++index) {
    const float* source = in + index * rows * columns;
    float* target = out + index * rows * columns;
    for (int64_t row = 0; row < rows; ++row) {
      for (int64_t column = 0; column < columns; ++column) target[column * rows + row] = source[row * columns + column];
    }
  }
  return transposed;
}

void ConvertFromFloat32(const RtTensor& source, const RtTensor& destination) {
  const float* in = source.data<float>();
  const int64_t count = source.NumElements();
  FUSIONOPT_CHECK(count == destination.NumElements(), "staged output keeps its size");
  switch (destination.dtype()) {
    case DataType::kFloat:
      if (in != destination.data<float>()) std::memcpy(destination.raw(), in, count * sizeof(float));
      return;
    case DataType::kFloat16: return ConvertInBlocks(in, destination.data<uint16_t>(), count, FloatToHalfN);
    case DataType::kBFloat16: return ConvertInBlocks(in, destination.data<uint16_t>(), count, FloatToBFloat16N);
    case DataType::kDouble: {
      double* out = destination.data<double>();
      for (int64_t i = 0; i < count; ++i) out[i] = in[i];
      return;
    }
    default:
      FUSIONOPT_CHECK(false, "float32 staging only produces floating outputs");
  }
}

std::vector<double> ValuesAsDoubles(const RtTensor& tensor) {
  std::vector<double> values(static_cast<size_t>(tensor.NumElements()));
  for (size_t i = 0; i < values.size(); ++i) values[i] = tensor.ValueAsDouble(static_cast<int64_t>(i));
  return values;
}

void StoreDoubles(const std::vector<double>& values, const RtTensor& destination) {
  FUSIONOPT_CHECK(static_cast<int64_t>(values.size()) == destination.NumElements(), "one value per element");
  if (destination.dtype() == DataType::kDouble) {
    std::copy(values.begin(), values.end(), destination.data<double>());
    return;
  }
  RtTensor staged = RtTensor::Allocate(DataType::kFloat, destination.dims());
  std::copy(values.begin(), values.end(), staged.data<float>());
  ConvertFromFloat32(staged, destination);
}

RtTensor& Float32Outputs::Output(size_t index, DataType dtype, std::vector<int64_t> dims) {
  if (dtype == DataType::kFloat) return context_.Output(index, DataType::kFloat, std::move(dims));
  RtTensor staged = context_.allocator->Allocate(DataType::kFloat, std::move(dims));
  staged_.push_back({index, dtype, std::move(staged)});
  return staged_.back().value;
}

void Float32Outputs::Finish() {
  for (const Staged& staged : staged_) {
    ConvertFromFloat32(staged.value, context_.Output(staged.index, staged.dtype, staged.value.dims()));
  }
  staged_.clear();
}

RtTensor Scratch(Allocator& allocator, size_t bytes) {
  if (bytes == 0) return RtTensor();
  return allocator.Allocate(DataType::kUint8, {static_cast<int64_t>(bytes)});
}

std::string DescribeTensor(const RtTensor& tensor) {
  return std::string(NameOf(tensor.dtype())) + DimsToString(tensor.dims());
}

}  // namespace fusionopt::cpu
