// The input and output counts of standard ONNX nodes, checked against the operator schemas
// of the ONNX library (libonnx's OpSchemaRegistry) when a model is loaded: a Mul with one
// input, or a Split with no output, is refused with the node's name instead of reaching a
// pass or kernel that indexes operands the node does not have.
//
// Limits: only the default and ai.onnx.ml domains, and only at opsets the library knows
// (Debian 12's ONNX 1.12: opset 17, ai.onnx.ml 3). A newer op version may take more inputs
// than the library's last one (ReduceMean-18 reads axes as an input), so nodes of newer
// opsets are left to the passes' and kernels' own checks. Ops the library does not know
// (contrib domains, model-local functions, ops newer than it) are not checked here.
#pragma once

#include <cstdint>

#include <onnx/onnx_pb.h>

#include "ir/status.h"

namespace fusionopt {

// `opset` is the version the node's domain is imported at, in the model or in the function
// whose body holds the node. Positions left empty ("") count, as in ONNX.
Status CheckNodeSignature(const onnx::NodeProto& node, int64_t opset);

}  // namespace fusionopt
