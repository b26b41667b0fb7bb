#include "cuda_runtime/codegen/cuda_types.h"

namespace fusionopt::cuda {

std::optional<std::string_view> StorageType(DataType dtype) {
  switch (dtype) {
    case DataType::kFloat: return "float";
    case DataType::kDouble: return "double";
    case DataType::kFloat16: return "__half";
    case DataType::kBFloat16: return "__nv_bfloat16";
    case DataType::kInt8: return "signed char";
    case DataType::kUint8: return "unsigned char";
    case DataType::kInt16: return "short";
    case DataType::kUint16: return "unsigned short";
    case DataType::kInt32: return "int";
    case DataType::kUint32: return "unsigned int";
    case DataType::kInt64: return "long long";
    case DataType::kUint64: return "unsigned long long";
    case DataType::kBool: return "bool";
    default: return std::nullopt;
  }
}

std::optional<std::string_view> ComputeType(DataType dtype) {
  if (dtype == DataType::kFloat16 || dtype == DataType::kBFloat16) return "float";
  return StorageType(dtype);
}

std::string LoadAsCompute(DataType dtype, std::string_view expression) {
  if (dtype == DataType::kFloat16) return "__half2float(" + std::string(expression) + ")";
  if (dtype == DataType::kBFloat16) return "__bfloat162float(" + std::string(expression) + ")";
  return std::string(expression);
}

std::string StoreFromCompute(DataType dtype, std::string_view expression) {
  if (dtype == DataType::kFloat16) return "__float2half_rn(" + std::string(expression) + ")";
  if (dtype == DataType::kBFloat16) return "__float2bfloat16_rn(" + std::string(expression) + ")";
  return std::string(expression);
}

std::string_view SourcePrelude() {
  return "#include <cuda_fp16.h>\n"
         "#include <cuda_bf16.h>\n";
}

}  // namespace fusionopt::cuda
