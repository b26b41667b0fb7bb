// Conversions between onnx.proto messages and IR pieces, shared by the loader and saver.
//
// "Residual" = the same message with every field the IR models cleared, serialized; merging
// it back into a freshly built message restores doc strings, metadata and fields of ONNX
// versions newer than the onnx.proto we compile against (kept as unknown fields).
#pragma once

#include <map>
#include <memory>
#include <string>

#include <onnx/onnx_pb.h>

#include "ir/graph.h"
#include "ir/mapped_file.h"
#include "ir/status.h"
#include "ir/tensor.h"

namespace fusionopt {

template <typename Message>
std::string ResidualOf(Message copy, void (*clear_modelled)(Message&)) {
  clear_modelled(copy);
  return copy.ByteSizeLong() == 0 ? std::string() : copy.SerializeAsString();
}

template <typename Message>
void RestoreResidual(const std::string& residual, Message& message) {
  if (!residual.empty()) {
    bool parsed = message.ParseFromString(residual);
    FUSIONOPT_CHECK(parsed, "residual was produced by SerializeAsString");
  }
}

// Resolves and maps external-data files for one model, confining them to its folder.
class ExternalDataResolver {
 public:
  explicit ExternalDataResolver(std::string base_dir) : base_dir_(std::move(base_dir)) {}
  Result<std::shared_ptr<MappedFile>> Open(const std::string& location);
  std::vector<std::string> OpenedLocations() const;

 private:
  std::string base_dir_;
  std::string real_base_;
  std::map<std::string, std::shared_ptr<MappedFile>> files_;
};

// Decodes a TensorProto. `proto` may be consumed: raw_data is moved out, not copied.
Result<Tensor> DecodeTensor(onnx::TensorProto& proto, ExternalDataResolver& resolver);

// Where the saver puts tensor bytes: embedded as raw_data, or appended to a data file.
class TensorSink {
 public:
  virtual ~TensorSink() = default;
  // Fills the data fields of `proto` (dims/dtype already set).
  virtual Status Store(const Tensor& tensor, onnx::TensorProto& proto) = 0;
};

void EncodeTensorHeader(const Tensor& tensor, onnx::TensorProto& proto);
void EncodeTensorDataInline(const Tensor& tensor, onnx::TensorProto& proto);

Result<ValueType> DecodeType(const onnx::TypeProto& proto);
void EncodeType(const ValueType& type, onnx::TypeProto& proto);

// Opset imports of the model and of its functions (function_codec.cc). The residual keeps
// the domain's presence, so an explicitly empty domain saves as it was read.
OpsetImport DecodeOpset(const onnx::OperatorSetIdProto& proto);
void EncodeOpset(const OpsetImport& opset, onnx::OperatorSetIdProto& proto);

}  // namespace fusionopt
