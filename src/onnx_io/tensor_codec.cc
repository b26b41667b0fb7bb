// TensorProto ⇄ Tensor and TypeProto ⇄ ValueType (external data is confined by external_data.cc).
#include <cstdlib>

#include "onnx_io/proto_codec.h"

namespace fusionopt {
namespace {

void ClearTensorModelled(onnx::TensorProto& proto) {
  proto.clear_dims();
  proto.clear_data_type();
  proto.clear_raw_data();
  proto.clear_float_data();
  proto.clear_int32_data();
  proto.clear_string_data();
  proto.clear_int64_data();
  proto.clear_double_data();
  proto.clear_uint64_data();
  proto.clear_external_data();
  proto.clear_data_location();
}

std::string DescribeTensor(const onnx::TensorProto& proto, DataType dtype) {
  std::string shape;
  for (int i = 0; i < proto.dims_size(); ++i) {
    shape += (i ? "," : "") + std::to_string(proto.dims(i));
  }
  std::string name = proto.name().empty() ? "tensor" : "tensor '" + proto.name() + "'";
  return name + " (" + std::string(NameOf(dtype)) + "[" + shape + "])";
}

template <typename Field>
std::vector<uint8_t> PackTyped(const Field& field, size_t element_bytes) {
  std::vector<uint8_t> bytes(static_cast<size_t>(field.size()) * element_bytes);
  for (int i = 0; i < field.size(); ++i) {
    auto value = field.Get(i);
    std::memcpy(bytes.data() + static_cast<size_t>(i) * element_bytes, &value, element_bytes);
  }
  return bytes;
}

bool IsSixBit(DataType dtype) { return dtype == DataType::kFloat6E2M3 || dtype == DataType::kFloat6E3M2; }

// 6-bit elements, one per int32 entry (bits 0-5), as raw data packs them: an LSB-first
// bitstream, four elements in three bytes.
std::vector<uint8_t> PackSixBit(const google::protobuf::RepeatedField<int32_t>& field) {
  std::vector<uint8_t> bytes((static_cast<size_t>(field.size()) * 6 + 7) / 8);
  for (int i = 0; i < field.size(); ++i) {
    const uint32_t value = static_cast<uint32_t>(field.Get(i)) & 0x3f;
    const size_t bit = static_cast<size_t>(i) * 6;
    bytes[bit / 8] |= static_cast<uint8_t>(value << (bit % 8));
    if (bit % 8 > 2) bytes[bit / 8 + 1] |= static_cast<uint8_t>(value >> (8 - bit % 8));
  }
  return bytes;
}

// Converts the typed repeated field that holds this dtype into raw little-endian bytes,
// and reports how many entries the field should have.
std::vector<uint8_t> TypedFieldBytes(const onnx::TensorProto& proto, DataType dtype) {
  switch (dtype) {
    case DataType::kFloat: case DataType::kComplex64:
      return PackTyped(proto.float_data(), 4);
    case DataType::kDouble: case DataType::kComplex128:
      return PackTyped(proto.double_data(), 8);
    case DataType::kInt64:
      return PackTyped(proto.int64_data(), 8);
    case DataType::kUint64:
      return PackTyped(proto.uint64_data(), 8);
    case DataType::kUint32:
      return PackTyped(proto.uint64_data(), 4);
    case DataType::kInt32:
      return PackTyped(proto.int32_data(), 4);
    case DataType::kInt16: case DataType::kUint16: case DataType::kFloat16:
    case DataType::kBFloat16:
      return PackTyped(proto.int32_data(), 2);
    case DataType::kFloat6E2M3: case DataType::kFloat6E3M2:
      return PackSixBit(proto.int32_data());
    default:  // 8-bit types, bool, packed 4-bit pairs and 2-bit quads: one byte per int32 entry
      return PackTyped(proto.int32_data(), 1);
  }
}

}  // namespace

// ---------------------------------------------------------------- tensors

namespace {

Result<Tensor> DecodeExternal(const onnx::TensorProto& proto, DataType dtype,
                              std::vector<int64_t> dims, uint64_t expected,
                              ExternalDataResolver& resolver) {
  std::string location;
  uint64_t offset = 0;
  std::optional<uint64_t> length;
  for (const auto& entry : proto.external_data()) {
    const std::string& key = entry.key();
    auto parse_number = [&](uint64_t& out) -> Status {
      char* end = nullptr;
      errno = 0;
      unsigned long long parsed = std::strtoull(entry.value().c_str(), &end, 10);
      if (entry.value().empty() || *end != '\0' || errno != 0 || entry.value()[0] == '-') {
        return InvalidModel("external data " + key + " '" + entry.value() + "' is not a number");
      }
      out = parsed;
      return Status::Ok();
    };
    if (key == "location") {
      location = entry.value();
    } else if (key == "offset") {
      FUSIONOPT_RETURN_IF_ERROR(parse_number(offset));
    } else if (key == "length") {
      uint64_t parsed = 0;
      FUSIONOPT_RETURN_IF_ERROR(parse_number(parsed));
      length = parsed;
    }
  }
  FUSIONOPT_ASSIGN_OR_RETURN(auto file, resolver.Open(location));
  if (length && *length != expected) {
    return InvalidModel("external data length " + std::to_string(*length) + " does not match " +
                        std::to_string(expected) + " bytes");
  }
  if (offset > file->size() || expected > file->size() - offset) {
    // Offset and size, not [begin, end): the end of a hostile offset wraps around.
    return InvalidModel("external data of " + std::to_string(expected) + " bytes at offset " +
                        std::to_string(offset) + " is past the end of '" + location + "' (" +
                        std::to_string(file->size()) + " bytes)");
  }
  return Tensor::Mapped(dtype, std::move(dims), std::move(file), offset, expected);
}

}  // namespace

Result<Tensor> DecodeTensor(onnx::TensorProto& proto, ExternalDataResolver& resolver) {
  if (!IsKnownDataType(proto.data_type())) {
    return InvalidModel("tensor '" + proto.name() + "' has unknown data type " +
                        std::to_string(proto.data_type()));
  }
  auto dtype = static_cast<DataType>(proto.data_type());
  std::vector<int64_t> dims(proto.dims().begin(), proto.dims().end());
  uint64_t count = 1;
  for (int64_t dim : dims) {
    if (dim < 0) return InvalidModel(DescribeTensor(proto, dtype) + " has a negative dimension");
    if (dim != 0 && count > (uint64_t{1} << 62) / static_cast<uint64_t>(dim)) {
      return InvalidModel(DescribeTensor(proto, dtype) + " has too many elements");
    }
    count *= static_cast<uint64_t>(dim);
  }
  // No tensor of a petabyte exists; beyond that, byte counts could also wrap around.
  constexpr uint64_t kMaxTensorBytes = uint64_t{1} << 50;
  uint64_t bits = 0;
  if (__builtin_mul_overflow(count, static_cast<uint64_t>(BitsOf(dtype)), &bits) || bits / 8 > kMaxTensorBytes) {
    return InvalidModel(DescribeTensor(proto, dtype) + " is larger than any tensor can be");
  }
  std::string residual = ResidualOf<onnx::TensorProto>(proto, ClearTensorModelled);
  auto finish = [&](Tensor tensor) -> Result<Tensor> {
    tensor.set_residual(std::move(residual));
    return tensor;
  };

  if (dtype == DataType::kString) {
    if (static_cast<uint64_t>(proto.string_data_size()) != count) {
      return InvalidModel(DescribeTensor(proto, dtype) + " has " +
                          std::to_string(proto.string_data_size()) + " strings, expected " +
                          std::to_string(count));
    }
    return finish(Tensor::Strings(std::move(dims), {proto.string_data().begin(),
                                                    proto.string_data().end()}));
  }
  uint64_t expected = ByteSizeOf(dtype, count);
  if (proto.data_location() == onnx::TensorProto::EXTERNAL) {
    auto tensor = DecodeExternal(proto, dtype, dims, expected, resolver);
    if (!tensor.ok()) return tensor.status().WithContext(DescribeTensor(proto, dtype));
    return finish(std::move(tensor).value());
  }
  if (proto.has_raw_data()) {
    if (proto.raw_data().size() != expected) {
      return InvalidModel(DescribeTensor(proto, dtype) + " has " +
                          std::to_string(proto.raw_data().size()) + " bytes of raw data, expected " +
                          std::to_string(expected));
    }
    // Take ownership of the protobuf's string instead of copying the bytes.
    std::shared_ptr<std::string> raw(proto.release_raw_data());
    const auto* data = reinterpret_cast<const uint8_t*>(raw->data());
    return finish(Tensor::Borrowed(dtype, std::move(dims), data, expected, std::move(raw)));
  }
  if (IsSixBit(dtype) && static_cast<uint64_t>(proto.int32_data_size()) != count) {
    return InvalidModel(DescribeTensor(proto, dtype) + " holds " + std::to_string(proto.int32_data_size()) +
                        " typed elements, expected " + std::to_string(count));
  }
  std::vector<uint8_t> bytes = TypedFieldBytes(proto, dtype);
  if (bytes.size() != expected) {
    return InvalidModel(DescribeTensor(proto, dtype) + " holds " + std::to_string(bytes.size()) +
                        " bytes of typed data, expected " + std::to_string(expected));
  }
  Tensor tensor = Tensor::Owned(dtype, std::move(dims), std::move(bytes));
  tensor.set_typed_storage(true);
  return finish(std::move(tensor));
}

void EncodeTensorHeader(const Tensor& tensor, onnx::TensorProto& proto) {
  RestoreResidual(tensor.residual(), proto);
  proto.set_data_type(static_cast<int32_t>(tensor.dtype()));
  for (int64_t dim : tensor.dims()) proto.add_dims(dim);
}

namespace {

template <typename Stored, typename Field>
void UnpackTyped(const Tensor& tensor, size_t element_bytes, Field& field) {
  auto bytes = tensor.bytes();
  for (size_t offset = 0; offset + element_bytes <= bytes.size(); offset += element_bytes) {
    Stored value = 0;
    std::memcpy(&value, bytes.data() + offset, element_bytes);  // little-endian host
    field.Add(value);
  }
}

// The inverse of PackSixBit.
void UnpackSixBit(const Tensor& tensor, google::protobuf::RepeatedField<int32_t>& field) {
  auto bytes = tensor.bytes();
  const int64_t count = tensor.NumElements();
  for (int64_t i = 0; i < count; ++i) {
    const size_t bit = static_cast<size_t>(i) * 6;
    uint32_t value = bytes[bit / 8] >> (bit % 8);
    if (bit % 8 > 2) value |= static_cast<uint32_t>(bytes[bit / 8 + 1]) << (8 - bit % 8);
    field.Add(static_cast<int32_t>(value & 0x3f));
  }
}

// The inverse of TypedFieldBytes.
void EncodeTypedFields(const Tensor& tensor, onnx::TensorProto& proto) {
  switch (tensor.dtype()) {
    case DataType::kFloat6E2M3: case DataType::kFloat6E3M2:
      return UnpackSixBit(tensor, *proto.mutable_int32_data());
    case DataType::kFloat: case DataType::kComplex64:
      return UnpackTyped<float>(tensor, 4, *proto.mutable_float_data());
    case DataType::kDouble: case DataType::kComplex128:
      return UnpackTyped<double>(tensor, 8, *proto.mutable_double_data());
    case DataType::kInt64: return UnpackTyped<int64_t>(tensor, 8, *proto.mutable_int64_data());
    case DataType::kUint64: return UnpackTyped<uint64_t>(tensor, 8, *proto.mutable_uint64_data());
    case DataType::kUint32: return UnpackTyped<uint64_t>(tensor, 4, *proto.mutable_uint64_data());
    case DataType::kInt32: return UnpackTyped<int32_t>(tensor, 4, *proto.mutable_int32_data());
    case DataType::kInt16: {
      auto bytes = tensor.bytes();  // sign-extend
      for (size_t i = 0; i + 2 <= bytes.size(); i += 2) {
        int16_t value;
        std::memcpy(&value, bytes.data() + i, 2);
        proto.add_int32_data(value);
      }
      return;
    }
    case DataType::kInt8:
      for (uint8_t byte : tensor.bytes()) proto.add_int32_data(static_cast<int8_t>(byte));
      return;
    case DataType::kUint16: case DataType::kFloat16: case DataType::kBFloat16:
      return UnpackTyped<uint32_t>(tensor, 2, *proto.mutable_int32_data());
    default:
      return UnpackTyped<uint32_t>(tensor, 1, *proto.mutable_int32_data());
  }
}

}  // namespace

void EncodeTensorDataInline(const Tensor& tensor, onnx::TensorProto& proto) {
  if (tensor.dtype() == DataType::kString) {
    for (const auto& value : tensor.strings()) proto.add_string_data(value);
    return;
  }
  if (tensor.typed_storage()) return EncodeTypedFields(tensor, proto);
  auto bytes = tensor.bytes();
  proto.set_raw_data(bytes.data(), bytes.size());
}

// ---------------------------------------------------------------- types

namespace {

void ClearTypeModelled(onnx::TypeProto& proto) { proto.clear_tensor_type(); }

}  // namespace

Result<ValueType> DecodeType(const onnx::TypeProto& proto) {
  ValueType type;
  if (!proto.has_tensor_type()) {
    if (proto.value_case() != onnx::TypeProto::VALUE_NOT_SET) type.opaque_type = proto.SerializeAsString();
    return type;
  }
  const auto& tensor_type = proto.tensor_type();
  int32_t elem_type = tensor_type.elem_type();
  if (elem_type != 0 && !IsKnownDataType(elem_type)) {
    return InvalidModel("unknown element type " + std::to_string(elem_type));
  }
  type.dtype = static_cast<DataType>(elem_type);
  if (tensor_type.has_shape()) {
    Shape shape;
    for (const auto& dim : tensor_type.shape().dim()) {
      if (dim.has_dim_value()) {
        if (dim.dim_value() < 0) return InvalidModel("negative dimension in a declared shape");
        shape.push_back(Dim::Known(dim.dim_value()));
      } else if (dim.has_dim_param()) {
        shape.push_back(Dim::Symbol(dim.dim_param()));
      } else {
        shape.push_back(Dim::Unknown());
      }
    }
    type.shape = std::move(shape);
  }
  type.residual = ResidualOf<onnx::TypeProto>(proto, ClearTypeModelled);
  return type;
}

void EncodeType(const ValueType& type, onnx::TypeProto& proto) {
  if (!type.is_tensor()) {
    bool parsed = proto.ParseFromString(type.opaque_type);
    FUSIONOPT_CHECK(parsed, "opaque type was serialized by the loader");
    return;
  }
  RestoreResidual(type.residual, proto);
  auto* tensor_type = proto.mutable_tensor_type();
  if (type.dtype != DataType::kUndefined) tensor_type->set_elem_type(static_cast<int32_t>(type.dtype));
  if (!type.shape) return;
  auto* shape = tensor_type->mutable_shape();
  for (const Dim& dim : *type.shape) {
    auto* out = shape->add_dim();
    if (dim.is_known()) out->set_dim_value(dim.value);
    else if (dim.is_symbolic()) out->set_dim_param(dim.symbol);
  }
}

}  // namespace fusionopt
