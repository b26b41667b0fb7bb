#include "onnx_io/node_signature.h"

#include <algorithm>
#include <string>

#include "onnx_io/operator_schemas.h"

namespace fusionopt {
namespace {

std::string CountRange(int min, int max) {
  if (min == max) return std::to_string(min);
  if (max == OperatorSchema::kUnbounded) return "at least " + std::to_string(min);
  return std::to_string(min) + " to " + std::to_string(max);
}

std::string Plural(int count, const char* noun) {
  return std::to_string(count) + " " + noun + (count == 1 ? "" : "s");
}

}  // namespace

Status CheckNodeSignature(const onnx::NodeProto& node, int64_t opset) {
  const OperatorSchema* schema = FindOperatorSchema(node.domain(), node.op_type(), opset);
  if (schema == nullptr) return Status::Ok();
  const std::string op = node.op_type() + "-" + std::to_string(schema->since_version);
  const int inputs = node.input_size(), outputs = node.output_size();
  if (inputs < schema->min_inputs || inputs > schema->max_inputs) {
    return InvalidModel("has " + Plural(inputs, "input") + "; " + op + " takes " +
                        CountRange(schema->min_inputs, schema->max_inputs));
  }
  const std::string_view formals = schema->inputs;
  for (int i = 0; i < inputs && !formals.empty(); ++i) {
    const char formal = formals[std::min<size_t>(static_cast<size_t>(i), formals.size() - 1)];
    if (node.input(i).empty() && formal != 'O') {
      return InvalidModel("leaves input " + std::to_string(i) + " ('" + std::string(schema->InputName(static_cast<size_t>(i))) +
                          "') empty; " + op + " requires it");
    }
  }
  if (outputs < schema->min_outputs || outputs > schema->max_outputs) {
    return InvalidModel("has " + Plural(outputs, "output") + "; " + op + " has " +
                        CountRange(schema->min_outputs, schema->max_outputs));
  }
  return Status::Ok();
}

}  // namespace fusionopt
