// What the CUDA session's planning (session_plan.cc) and running (cuda_session.cc) share: a
// plan's storages and steps, and how values and nodes are sized and labelled. Internal to
// the backend.
#pragma once

#include <onnx/onnx_pb.h>

#include <cstdint>
#include <memory>
#include <string>
#include <unordered_map>
#include <vector>

#include "cuda_runtime/backend/cuda_session.h"

namespace fusionopt::cuda {

// Device memory for values: one buffer per storage; views share their input's storage.
struct Storage {
  void* pointer = nullptr;
  uint64_t bytes = 0;
  bool constant = false;  // an initializer or Constant node's value, uploaded once
};

// One plan: the specialized model, its kernels in node order, and where every value lives.
struct CudaSession::Prepared {
  struct Step {
    const Node* node = nullptr;
    fo_kernel* kernel = nullptr;
    std::vector<int> inputs, outputs;  // storage per input/output, -1 when omitted
    std::vector<uint64_t> input_offsets, output_offsets;  // bytes into that storage
    uint32_t launches = 0;
  };
  std::unique_ptr<Model> model;
  onnx::ModelProto proto;  // the specialized model serialized: nodes are described from it
  std::vector<Storage> storages;
  std::unordered_map<const Value*, int> storage_of;
  std::unordered_map<const Value*, uint64_t> offset_of;  // bytes into the storage; 0 when absent
  std::vector<Step> steps;
  std::vector<int> input_storages, output_storages;
  std::vector<uint64_t> output_offsets;
  std::vector<std::vector<int64_t>> output_dims;
  void* workspace = nullptr;
  fo_graph* graph = nullptr;  // this plan's inference captured, with cuda_graph
  CudaPlanSummary summary;
};

namespace session_internal {

// A value's dims, which the specialized model must know.
Result<std::vector<int64_t>> StaticDims(const Value& value);
uint64_t BytesOf(const Value& value, const std::vector<int64_t>& dims);

}  // namespace session_internal
}  // namespace fusionopt::cuda
