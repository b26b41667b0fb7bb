// Conversions between onnx.proto messages and IR pieces, shared by the loader and saver.
//
// "Residual" = the same message with every field the IR models cleared, serialized; merging
// it back into a freshly built message restores doc strings, metadata and fields of ONNX
// versions newer than the onnx.proto we compile against (kept as unknown fields).
#pragma once

#include <map>
#include <memory>
#include <optional>
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

// Resolves and maps external-data files for one model, confining them to its folder
// (external_data.cc): each file is opened beneath an fd of the folder with
// openat2(RESOLVE_BENEATH), so neither `..`, an absolute path, a symlink leading out nor a
// rename racing the check can reach a file outside; the opened fd itself is checked (a
// regular file, one link, not the model file) and mapped.
class ExternalDataResolver {
 public:
  // The model file's identity, so a location naming the model itself is refused.
  struct FileIdentity {
    uint64_t device = 0;
    uint64_t inode = 0;
  };
  explicit ExternalDataResolver(std::string base_dir, std::optional<FileIdentity> model_file = {})
      : base_dir_(std::move(base_dir)), model_file_(model_file) {}
  ~ExternalDataResolver();
  ExternalDataResolver(const ExternalDataResolver&) = delete;
  ExternalDataResolver& operator=(const ExternalDataResolver&) = delete;

  Result<std::shared_ptr<MappedFile>> Open(const std::string& location);
  std::vector<std::string> OpenedLocations() const;

 private:
  Result<int> OpenBeneathFolder(const std::string& location);
  Result<int> OpenByCheckedRealPath(const std::string& location);
  Status CheckOpenedFile(int fd, const std::string& location) const;

  std::string base_dir_;
  std::optional<FileIdentity> model_file_;
  int folder_fd_ = -1;
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
