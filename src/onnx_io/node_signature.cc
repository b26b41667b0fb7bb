#include "onnx_io/node_signature.h"

#include <algorithm>
#include <limits>
#include <string>

#include <onnx/defs/schema.h>

namespace fusionopt {
namespace {

// The last opset of `domain` the linked ONNX library has schemas for; 0 when it has none.
int LastKnownOpset(const std::string& domain) {
  const auto& ranges = onnx::OpSchemaRegistry::DomainToVersionRange::Instance().Map();
  auto it = ranges.find(domain);
  return it == ranges.end() ? 0 : it->second.second;
}

std::string CountRange(int min, int max) {
  if (min == max) return std::to_string(min);
  if (max == std::numeric_limits<int>::max()) return "at least " + std::to_string(min);
  return std::to_string(min) + " to " + std::to_string(max);
}

std::string Plural(int count, const char* noun) {
  return std::to_string(count) + " " + noun + (count == 1 ? "" : "s");
}

}  // namespace

Status CheckNodeSignature(const onnx::NodeProto& node, int64_t opset) {
  const std::string domain = node.domain() == "ai.onnx" ? "" : node.domain();
  if (domain != "" && domain != "ai.onnx.ml") return Status::Ok();
  if (opset > LastKnownOpset(domain)) return Status::Ok();
  const onnx::OpSchema* schema = onnx::OpSchemaRegistry::Schema(node.op_type(), static_cast<int>(opset), domain);
  if (schema == nullptr) return Status::Ok();
  const std::string op = node.op_type() + "-" + std::to_string(schema->SinceVersion());
  const int inputs = node.input_size(), outputs = node.output_size();
  if (inputs < schema->min_input() || inputs > schema->max_input()) {
    return InvalidModel("has " + Plural(inputs, "input") + "; " + op + " takes " +
                        CountRange(schema->min_input(), schema->max_input()));
  }
  const auto& formals = schema->inputs();
  for (int i = 0; i < inputs && !formals.empty(); ++i) {
    const auto& formal = formals[std::min<size_t>(static_cast<size_t>(i), formals.size() - 1)];
    if (node.input(i).empty() && formal.GetOption() != onnx::OpSchema::Optional) {
      return InvalidModel("leaves input " + std::to_string(i) + " ('" + formal.GetName() + "') empty; " + op +
                          " requires it");
    }
  }
  if (outputs < schema->min_output() || outputs > schema->max_output()) {
    return InvalidModel("has " + Plural(outputs, "output") + "; " + op + " has " +
                        CountRange(schema->min_output(), schema->max_output()));
  }
  return Status::Ok();
}

}  // namespace fusionopt
