// Tensors in files: serialized TensorProto (.pb, the ONNX backend-test layout) and NumPy
// .npy, for `fusionopt run` inputs and outputs and for test data.
#pragma once

#include <string>

#include "ir/status.h"
#include "ir/tensor.h"

namespace fusionopt {

// Reads a .npy (by extension) or a serialized TensorProto (anything else). The tensor's
// name (TensorProto.name, empty for .npy) is returned in `name` when given.
Result<TensorPtr> ReadTensorFile(const std::string& path, std::string* name = nullptr);

// Writes `tensor` as a serialized TensorProto named `name`, via a temporary file.
Status WriteTensorProtoFile(const Tensor& tensor, const std::string& name, const std::string& path);

}  // namespace fusionopt
