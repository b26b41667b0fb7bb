#include "cuda_runtime/codegen/typed_body.h"

#include "ir/constant_value.h"
#include "ir/function_body.h"
#include "ir/op_class.h"
#include "shape_inference/shape_inference.h"

namespace fusionopt::cuda {
namespace {

bool StaticallyTyped(const Value& value) {
  const ValueType& type = value.type();
  if (!type.is_tensor() || type.dtype == DataType::kUndefined || !type.shape) return false;
  for (const Dim& dim : *type.shape) {
    if (!dim.is_known()) return false;
  }
  return true;
}

// A graph holding a copy of `node`: its inputs and outputs become the graph's.
std::unique_ptr<Graph> SingleNodeBody(const Node& node) {
  auto body = std::make_unique<Graph>();
  body->set_name(node.name().empty() ? node.op_type() : node.name());
  std::vector<Value*> inputs, outputs;
  for (size_t i = 0; i < node.inputs().size(); ++i) {
    const Value* argument = node.input(i);
    // A value read twice (Mul(x, x)) still gets one body input per node input, as the contract says.
    Value* input = body->CreateValue(body->UniqueName(argument ? argument->name() : "omitted_" + std::to_string(i)));
    if (argument) input->type() = argument->type();
    body->AddInput(input);
    inputs.push_back(argument ? input : nullptr);
  }
  for (size_t i = 0; i < node.outputs().size(); ++i) {
    const Value* result = node.output(i);
    Value* output = body->CreateValue(body->UniqueName(result ? result->name() : "unused_" + std::to_string(i)));
    if (result) output->type() = result->type();
    body->AddOutput(output);
    outputs.push_back(output);
  }
  Node* copy = body->CreateNode(node.op_type(), node.domain(), inputs, outputs, node.name());
  for (const Attribute& attribute : node.attributes()) copy->mutable_attributes().push_back(attribute.CopyWithoutGraphs());
  return body;
}

// Constant arguments become initializers the body's nodes read instead of the input.
void FoldConstantArguments(const Model& model, const Node& node, Graph& body) {
  std::vector<Value*> parameters = body.inputs();
  for (size_t i = 0; i < parameters.size() && i < node.inputs().size(); ++i) {
    const Value* argument = node.input(i);
    if (argument == nullptr) continue;
    TensorPtr constant = ConstantValueOf(*argument, InitializerRuleOf(model));
    if (constant == nullptr) continue;
    Value* folded = body.CreateValue(body.UniqueName(parameters[i]->name() + "_constant"));
    folded->type() = parameters[i]->type();
    body.SetInitializer(folded, constant);
    body.ReplaceAllUses(parameters[i], folded);
  }
}

// Softmax, LogSoftmax and Hardmax before opset 13 coerce the input to 2-D at `axis` (default
// 1) and normalize over the whole flattened block; from 13 on they normalize along `axis`
// (default -1). A typed body carries no opset (kTypedBodyOpset), so the axis is written out in
// the modern sense — possible when the block after the axis is all ones, where the two agree; otherwise the
// node is refused rather than given the other meaning.
Status SpellOutSoftmaxAxis(const Model& model, Graph& body) {
  for (const auto& node : body.nodes()) {
    const std::string& op = node->op_type();
    if (!IsDefaultDomain(*node) || (op != "Softmax" && op != "LogSoftmax" && op != "Hardmax")) continue;
    const int64_t opset = model.OpsetFor("").value_or(13);
    const Value* x = node->input(0);
    if (x == nullptr || !x->shape()) continue;  // CheckFullyTyped reports it
    const int64_t rank = static_cast<int64_t>(x->shape()->size());
    int64_t axis = node->GetInt("axis", opset >= 13 ? -1 : 1);
    if (axis < 0) axis += rank;
    if (opset < 13) {
      for (int64_t d = axis + 1; d < rank; ++d) {
        const Dim& dim = (*x->shape())[static_cast<size_t>(d)];
        if (!dim.is_known() || dim.value != 1) {
          return Unsupported(op + " of opset " + std::to_string(opset) + " normalizes the flattened dims " +
                             std::to_string(axis) + ".. together; only the single-axis meaning (opset 13) is generated");
        }
      }
    }
    Attribute* existing = nullptr;
    for (Attribute& attribute : node->mutable_attributes()) {
      if (attribute.name == "axis") existing = &attribute;
    }
    if (existing == nullptr) {
      node->mutable_attributes().emplace_back();
      existing = &node->mutable_attributes().back();
      existing->name = "axis";
      existing->kind = AttributeKind::kInt;
    }
    existing->i = axis;
  }
  return Status::Ok();
}

}  // namespace

Status CheckFullyTyped(const Graph& body) {
  auto check = [](const Value* value, const char* role) -> Status {
    if (value == nullptr || StaticallyTyped(*value)) return Status::Ok();
    return Unsupported(std::string(role) + " '" + value->name() + "' has no static shape and dtype");
  };
  for (const Value* input : body.inputs()) {
    if (input != nullptr && input->uses().empty()) continue;  // a folded constant's parameter
    FUSIONOPT_RETURN_IF_ERROR(check(input, "input"));
  }
  for (const auto& node : body.nodes()) {
    for (const Value* output : node->outputs()) FUSIONOPT_RETURN_IF_ERROR(check(output, "value"));
  }
  for (const Value* output : body.outputs()) FUSIONOPT_RETURN_IF_ERROR(check(output, "output"));
  return Status::Ok();
}

Result<std::unique_ptr<Graph>> TypedBodyOf(const Model& model, const Node& node) {
  std::unique_ptr<Graph> body;
  if (const Function* function = model.FindFunction(node.domain(), node.op_type())) {
    if (function->body == nullptr) return Unsupported("function " + node.op_type() + " has no body");
    body = InstantiateFunctionBody(*function, node);
    for (size_t i = 0; i < body->inputs().size() && i < node.inputs().size(); ++i) {
      if (node.input(i) != nullptr) body->inputs()[i]->type() = node.input(i)->type();
    }
  } else if (node.domain() == kFusionDomain) {
    return Unsupported("the model defines no function " + node.domain() + "::" + node.op_type());
  } else {
    body = SingleNodeBody(node);
  }
  FoldConstantArguments(model, node, *body);
  InferShapes(*body, model);
  // The call's results are typed by the model's own inference; they fill in what the body's
  // inference could not.
  for (size_t i = 0; i < body->outputs().size() && i < node.outputs().size(); ++i) {
    const Value* result = node.output(i);
    if (result != nullptr && !StaticallyTyped(*body->outputs()[i])) body->outputs()[i]->type() = result->type();
  }
  FUSIONOPT_RETURN_IF_ERROR(CheckFullyTyped(*body));
  FUSIONOPT_RETURN_IF_ERROR(SpellOutSoftmaxAxis(model, *body));
  return body;
}

}  // namespace fusionopt::cuda
