#include "cpu_runtime/engine/inputs.h"

#include <random>

namespace fusionopt::cpu {

Result<std::pair<std::string, std::vector<int64_t>>> ParseShapeSpec(const std::string& spec) {
  size_t split = spec.rfind('=');
  if (split == std::string::npos || split == 0 || split + 1 == spec.size()) {
    return UsageError("shape '" + spec + "' is not NAME=D1xD2x...");
  }
  std::vector<int64_t> dims;
  std::string text = spec.substr(split + 1);
  size_t start = 0;
  while (start <= text.size()) {
    size_t end = text.find('x', start);
    std::string part = text.substr(start, end == std::string::npos ? std::string::npos : end - start);
    if (part.empty() || part.find_first_not_of("0123456789") != std::string::npos || part.size() > 12) {
      return UsageError("shape '" + spec + "' is not NAME=D1xD2x...");
    }
    dims.push_back(std::stoll(part));
    if (end == std::string::npos) break;
    start = end + 1;
  }
  return std::make_pair(spec.substr(0, split), dims);
}

Result<std::vector<int64_t>> ConcreteDims(const Value& input,
                                          const std::map<std::string, std::vector<int64_t>>& overrides) {
  const std::optional<Shape>& shape = input.shape();
  auto override_it = overrides.find(input.name());
  if (override_it != overrides.end()) {
    const std::vector<int64_t>& dims = override_it->second;
    if (shape && shape->size() != dims.size()) {
      return UsageError("--shape for '" + input.name() + "' has rank " + std::to_string(dims.size()) +
                        ", the model declares " + ShapeToString(*shape));
    }
    for (size_t axis = 0; shape && axis < dims.size(); ++axis) {
      if ((*shape)[axis].is_known() && (*shape)[axis].value != dims[axis]) {
        return UsageError("--shape for '" + input.name() + "' contradicts the declared " + ShapeToString(*shape));
      }
    }
    return dims;
  }
  if (!shape) return UsageError("input '" + input.name() + "' has an unknown rank; give it with --shape");
  std::vector<int64_t> dims;
  for (const Dim& dim : *shape) dims.push_back(dim.is_known() ? dim.value : 1);
  return dims;
}

Result<RtTensor> RandomTensor(DataType dtype, const std::vector<int64_t>& dims, uint64_t seed) {
  RtTensor tensor = RtTensor::Allocate(dtype, dims);
  std::mt19937_64 engine(seed);
  std::uniform_real_distribution<float> real(-1.0f, 1.0f);
  int64_t count = tensor.NumElements();
  auto fill = [&](auto* data, auto make) {
    for (int64_t i = 0; i < count; ++i) data[i] = make();
  };
  switch (dtype) {
    case DataType::kFloat: fill(tensor.data<float>(), [&] { return real(engine); }); break;
    case DataType::kDouble: fill(tensor.data<double>(), [&] { return static_cast<double>(real(engine)); }); break;
    case DataType::kFloat16: fill(tensor.data<uint16_t>(), [&] { return FloatToHalf(real(engine)); }); break;
    case DataType::kBFloat16: fill(tensor.data<uint16_t>(), [&] { return FloatToBFloat16(real(engine)); }); break;
    case DataType::kInt64: fill(tensor.data<int64_t>(), [&] { return static_cast<int64_t>(engine() & 1); }); break;
    case DataType::kInt32: fill(tensor.data<int32_t>(), [&] { return static_cast<int32_t>(engine() & 1); }); break;
    case DataType::kInt16: case DataType::kUint16:
      fill(tensor.data<uint16_t>(), [&] { return static_cast<uint16_t>(engine() & 1); });
      break;
    case DataType::kInt8: case DataType::kUint8: case DataType::kBool:
      fill(tensor.data<uint8_t>(), [&] { return static_cast<uint8_t>(engine() & 1); });
      break;
    case DataType::kUint32: fill(tensor.data<uint32_t>(), [&] { return static_cast<uint32_t>(engine() & 1); }); break;
    case DataType::kUint64: fill(tensor.data<uint64_t>(), [&] { return static_cast<uint64_t>(engine() & 1); }); break;
    default:
      return Unsupported("cannot make random " + std::string(NameOf(dtype)) + " data; give the input with --input");
  }
  return tensor;
}

}  // namespace fusionopt::cpu
