// FunctionProto ⇄ Function: model-local functions, for the loader and the saver.
//
// A function body is decoded as a graph: its formal inputs and outputs become the body's
// inputs and outputs, and its nodes go through the loader's graph decoding (passed in as
// `BodyDecoder`), so body nodes, attributes (ref_attr_name included) and If/Loop subgraphs
// are read exactly like those of the main graph.
//
// What the IR does not model stays in Function::residual: doc_string, and the fields of
// IR version 10+ that the onnx.proto we compile against does not know (attribute defaults,
// value_info, overload, metadata_props), which protobuf keeps as unknown fields. The types
// that value_info declares are also given to the body's values, so the body reads typed; the
// residual remains what is saved, which keeps a loaded function byte-identical. A function
// built by a pass has an empty residual and saves from its modelled fields alone.
#pragma once

#include <functional>
#include <memory>

#include <onnx/onnx_pb.h>

#include "ir/graph.h"
#include "ir/status.h"

namespace fusionopt {

// Builds a Graph from `body`, resolving node domains against `function`'s opset imports.
using BodyDecoder =
    std::function<Result<std::unique_ptr<Graph>>(onnx::GraphProto& body, const Function& function)>;

// Decodes every FunctionProto of `proto` into `model.functions`, in order, and validates
// them: bodies well formed, no duplicate (domain, name, overload), no function that calls
// itself directly or through others. Consumes the function bodies of `proto`.
Status DecodeFunctions(onnx::ModelProto& proto, const BodyDecoder& decode_body, Model& model);

// The FunctionProto of `function` without its nodes, which the saver encodes like graph
// nodes: residual first, then the modelled fields.
void EncodeFunctionSignature(const Function& function, onnx::FunctionProto& proto);

// "function 'domain::name'": how errors name a function.
std::string DescribeFunction(const Function& function);

}  // namespace fusionopt
