// How ONNX dtypes appear in generated CUDA C++: the storage type in global memory, and the
// type arithmetic is done in (fp16 and bf16 are stored as themselves and computed in fp32).
#pragma once

#include <optional>
#include <string>
#include <string_view>

#include "ir/dtype.h"

namespace fusionopt::cuda {

// The CUDA C++ type a tensor of `dtype` is stored as ("float", "__half", "__nv_bfloat16",
// "long long", "bool", ...); nullopt for dtypes generated kernels do not handle (strings,
// complex, 4-bit and 8-bit floats).
std::optional<std::string_view> StorageType(DataType dtype);

// The type values of `dtype` are computed in: "float" for float, fp16 and bf16, else the
// storage type.
std::optional<std::string_view> ComputeType(DataType dtype);

// Expressions converting between the two: `expression` of storage type to compute type and
// back (identity where they are the same type).
std::string LoadAsCompute(DataType dtype, std::string_view expression);
std::string StoreFromCompute(DataType dtype, std::string_view expression);

// What every generated source starts with: the fp16/bf16 headers NVRTC provides, and
// fixed-width integer names (NVRTC has no <cstdint>).
std::string_view SourcePrelude();

}  // namespace fusionopt::cuda
