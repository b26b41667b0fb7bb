// Writes a ModelProto to a file with the bytes of its large initializers spliced into the
// stream straight from the IR's tensors, instead of copying each into a TensorProto's
// raw_data and serializing the copy (two passes over every weight, and as much fresh memory
// as the model again). Weights still mapped from an input's external-data file are copied
// file to file in the kernel.
//
// The file is byte for byte what protobuf would write had each held tensor's raw_data been
// set: fields are serialized in field-number order, so a held initializer's bytes go between
// its fields below raw_data (9) and those above it, the initializers between the graph's
// fields below `initializer` (5) and those above, and the graph likewise inside the model.
#pragma once

#include <cstdint>
#include <string>
#include <unordered_map>
#include <vector>

#include "ir/atomic_file.h"
#include "ir/status.h"
#include "ir/tensor.h"
#include "onnx/onnx_pb.h"

namespace fusionopt {

// Initializers of the model's main graph whose raw_data was left unset, and the tensor
// holding it.
using HeldTensorBytes = std::unordered_map<const onnx::TensorProto*, const Tensor*>;

// The model serialized in pieces around the held bytes. Construction takes `model` apart
// (its graph and the graph's initializers are serialized separately); do not use it after.
class SplicedModel {
 public:
  SplicedModel(onnx::ModelProto& model, const HeldTensorBytes& held);

  // The file's size once the held bytes are in.
  uint64_t size() const { return size_; }
  Status WriteTo(AtomicFile& file) const;

 private:
  struct Initializer {
    std::string bytes;           // serialized without the held raw_data
    size_t split = 0;            // where the raw_data field goes
    const Tensor* held = nullptr;
    uint64_t length = 0;         // serialized length with the held bytes
  };

  std::string model_bytes_;
  size_t model_split_ = 0;
  std::string graph_bytes_;
  size_t graph_split_ = 0;
  uint64_t graph_length_ = 0;
  std::vector<Initializer> initializers_;
  uint64_t size_ = 0;
};

}  // namespace fusionopt
