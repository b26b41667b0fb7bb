// The input and output counts of standard ONNX nodes, checked against the operator schemas
// (onnx_io/operator_schemas.h, generated from the ONNX library: every version through opset 28)
// when a model is loaded: a Mul with one input, or a Split with no output, is refused with the
// node's name instead of reaching a pass or kernel that indexes operands the node does not have.
//
// Limits: only the default and ai.onnx.ml domains. Ops the table does not know (contrib
// domains, model-local functions, ops newer than onnx 1.23) are not checked here.
#pragma once

#include <cstdint>

#include <onnx/onnx_pb.h>

#include "ir/status.h"

namespace fusionopt {

// `opset` is the version the node's domain is imported at, in the model or in the function
// whose body holds the node. Positions left empty ("") count, as in ONNX.
Status CheckNodeSignature(const onnx::NodeProto& node, int64_t opset);

}  // namespace fusionopt
