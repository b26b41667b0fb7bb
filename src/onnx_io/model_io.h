// Loading and saving ONNX models: protobuf ⇄ IR.
//
// Load validates what the IR relies on (names resolve, no cycles, opsets imported, external
// data confined to the model's folder and within the file) and reports the first problem as
// a Status naming it. Save writes to a temporary file in the destination folder and renames
// it into place, so a failed or interrupted save never leaves a half-written model.
#pragma once

#include <cstdint>
#include <memory>
#include <string>

#include "ir/graph.h"
#include "ir/status.h"

namespace fusionopt {

struct LoadOptions {
  // Run dtype/shape inference after loading (unknown ops keep their declared value_info).
  bool infer_shapes = true;
};

Result<std::unique_ptr<Model>> LoadModel(const std::string& path, const LoadOptions& options = {});
// Parses an in-memory ModelProto; external data resolves against `base_dir`.
Result<std::unique_ptr<Model>> LoadModelFromBytes(std::string bytes, const std::string& base_dir,
                                                  const LoadOptions& options = {});

struct SaveOptions {
  // Store tensors of at least `external_threshold_bytes` in a side file `<output>.data`.
  bool external_data = false;
  uint64_t external_threshold_bytes = 1024;
  // Data file name, relative to the output's folder; default "<output file name>.data".
  std::string external_file_name;
  // Write the inferred shapes of intermediate values as value_info (inputs/outputs always
  // keep what they declared).
  bool write_inferred_value_info = false;
};

// Protobuf cannot serialize a message of 2 GiB or more; above this much tensor data the
// saver switches to external data on its own.
constexpr uint64_t kAutoExternalDataBytes = (uint64_t{2} << 30) - (uint64_t{64} << 20);

struct SaveReport {
  bool external_data = false;       // tensor data went to a side file
  bool external_data_forced = false;  // ... because the model would exceed protobuf's 2 GiB
  std::string data_file;            // its path, when external_data
  uint64_t model_bytes = 0;         // size of the .onnx file written
  uint64_t external_bytes = 0;      // bytes written to the data file
};

Result<SaveReport> SaveModel(const Model& model, const std::string& path,
                             const SaveOptions& options = {});

// The model as serialized ModelProto bytes with every tensor embedded, for in-memory hand-offs
// (the CUDA backend describes nodes to the plugin with them). Unsupported at protobuf's 2 GiB.
Result<std::string> SerializeModel(const Model& model);

}  // namespace fusionopt
