// From an fo_node_desc (plugin.h) to what the builders work on. The node's NodeProto and
// FunctionProto bytes, with the input and output descs, become a one-node ONNX model —
// inputs typed from the descs, constant inputs as initializers holding the host bytes,
// outputs typed from the descs, opset imports for the default domain (default_opset),
// ai.fusionopt 1, the node's own domain and the function's imports — which the project's
// loader decodes exactly as it decodes any model. Its node then becomes a typed body
// (codegen/typed_body.h).
//
// Errors: a malformed desc (struct_size too small, null pointers with non-zero counts,
// negative dims, rank without dims, unknown dtype codes, counts that do not match the
// NodeProto, a function whose name is not the node's) is InvalidModel (FO_INVALID_ARGUMENT);
// so is an output desc that disagrees with what the node computes. Shapes the body cannot
// type statically are Unsupported.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "fusionopt/plugin.h"
#include "ir/graph.h"
#include "ir/status.h"

namespace fusionopt::cuda {

struct ParsedNode {
  std::unique_ptr<Model> model;  // the one-node model
  const Node* node = nullptr;    // its node
  std::string name;              // the node's name, or its op type: labels kernels and messages
};

// A desc the plugin may rewrite before parsing, with the storage its pointers need.
// Softmax, LogSoftmax or Hardmax whose normalized elements are one contiguous run is described
// as over the last axis of a shape that makes that run the row: over an axis only unit dims
// follow (SqueezeNet's final Softmax on [1,1000,1,1]), and before opset 13 over any axis, whose
// coercion to 2-D at the axis normalizes the flattened block of every axis from it on. The row
// kernels take the last axis only, and every host gets the kernel without knowing why. From
// opset 13 on, an axis that non-unit dims follow is left as it is (the lines family's).
struct NormalizedDesc {
  fo_node_desc desc{};
  std::string node_proto;
  std::vector<fo_tensor_desc> inputs, outputs;
  std::vector<int64_t> row_dims;
};
// `desc` as it is, or rewritten as above; `desc` must have passed validation (ParseNodeDesc
// validates first and calls this).
void NormalizeRowAxis(const fo_node_desc& desc, NormalizedDesc& normalized);

// Validates `desc` and decodes the node with its inputs and outputs typed; `normalized` holds
// the desc as decoded (see NormalizeRowAxis), which TypedBodyFor checks against.
Result<ParsedNode> ParseNodeDesc(const fo_node_desc& desc, NormalizedDesc& normalized);

// The node's typed body, checked against the output descs.
Result<std::unique_ptr<Graph>> TypedBodyFor(const ParsedNode& parsed, const fo_node_desc& desc);

// "float32[2,3]" for messages.
std::string DescribeTensorDesc(const fo_tensor_desc& tensor);

}  // namespace fusionopt::cuda
