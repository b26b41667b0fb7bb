#include "ir/constant_value.h"

namespace fusionopt {

TensorPtr ConstantNodeValue(const Node& node) {
  if (node.op_type() != "Constant" || !(node.domain().empty() || node.domain() == "ai.onnx")) {
    return nullptr;
  }
  for (const Attribute& attribute : node.attributes()) {
    const std::string& name = attribute.name;
    if (name == "value" && attribute.kind == AttributeKind::kTensor) return attribute.t;
    if (name == "value_int" && attribute.kind == AttributeKind::kInt) {
      return std::make_shared<Tensor>(Tensor::FromValues<int64_t>(DataType::kInt64, {}, {attribute.i}));
    }
    if (name == "value_ints" && attribute.kind == AttributeKind::kInts) {
      auto count = static_cast<int64_t>(attribute.ints.size());
      return std::make_shared<Tensor>(Tensor::FromValues<int64_t>(DataType::kInt64, {count}, attribute.ints));
    }
    if (name == "value_float" && attribute.kind == AttributeKind::kFloat) {
      return std::make_shared<Tensor>(Tensor::FromValues<float>(DataType::kFloat, {}, {attribute.f}));
    }
    if (name == "value_floats" && attribute.kind == AttributeKind::kFloats) {
      auto count = static_cast<int64_t>(attribute.floats.size());
      return std::make_shared<Tensor>(Tensor::FromValues<float>(DataType::kFloat, {count}, attribute.floats));
    }
    if (name == "value_string" && attribute.kind == AttributeKind::kString) {
      return std::make_shared<Tensor>(Tensor::Strings({}, {attribute.s}));
    }
    if (name == "value_strings" && attribute.kind == AttributeKind::kStrings) {
      auto count = static_cast<int64_t>(attribute.strings.size());
      return std::make_shared<Tensor>(Tensor::Strings({count}, attribute.strings));
    }
  }
  return nullptr;
}

TensorPtr ConstantValueOf(const Value& value, bool initializers_overridable) {
  if (value.is_initializer()) {
    return value.is_graph_input() && initializers_overridable ? nullptr : value.initializer();
  }
  const Node* producer = value.producer();
  return producer != nullptr ? ConstantNodeValue(*producer) : nullptr;
}

}  // namespace fusionopt
