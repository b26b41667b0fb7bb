#include "ir/function_body.h"

#include <unordered_set>

namespace fusionopt {
namespace {

class BodyCopier {
 public:
  // `call` null: a plain copy (no formal attributes to resolve).
  BodyCopier(const Node* call, std::unordered_set<const Value*> dropped)
      : call_(call), dropped_(std::move(dropped)) {}

  void Copy(const Graph& source, Graph& target) {
    target.set_name(source.name());
    for (const Value* input : source.inputs()) {
      if (!dropped_.count(input)) target.AddInput(CopyValue(*input, target));
    }
    for (const Value* initializer : source.initializers()) {
      Value* value = target.FindValue(initializer->name());
      if (value == nullptr) value = CopyValue(*initializer, target);
      target.SetInitializer(value, initializer->initializer());
    }
    for (const auto& node : source.nodes()) {
      for (const Value* output : node->outputs()) {
        if (output != nullptr) CopyValue(*output, target);
      }
    }
    for (const auto& node : source.nodes()) CopyNode(*node, target);
    for (const Value* output : source.outputs()) target.AddOutput(target.LookupValue(output->name()));
  }

 private:
  static Value* CopyValue(const Value& source, Graph& target) {
    Value* value = target.CreateValue(source.name());
    value->type() = source.type();
    return value;
  }

  // A dropped formal is found nowhere in the copy, so its readers get an omitted input.
  void CopyNode(const Node& source, Graph& target) {
    std::vector<Value*> inputs;
    std::vector<Value*> outputs;
    for (const Value* input : source.inputs()) {
      inputs.push_back(input != nullptr ? target.LookupValue(input->name()) : nullptr);
    }
    for (const Value* output : source.outputs()) {
      outputs.push_back(output != nullptr ? target.FindValue(output->name()) : nullptr);
    }
    Node* node = target.CreateNode(source.op_type(), source.domain(), inputs, outputs, source.name());
    for (const Attribute& attribute : source.attributes()) {
      if (attribute.ref_attr_name.empty()) {
        node->mutable_attributes().push_back(CopyAttribute(attribute, *node));
        continue;
      }
      const Attribute* given = call_ != nullptr ? call_->FindAttribute(attribute.ref_attr_name) : nullptr;
      // A graph-valued argument reads the caller's scope, which the copy does not have; a
      // caller's own reference has no value to give.
      if (given == nullptr || given->g || !given->graphs.empty() || !given->ref_attr_name.empty()) continue;
      Attribute resolved = CopyAttribute(*given, *node);
      resolved.name = attribute.name;
      node->mutable_attributes().push_back(std::move(resolved));
    }
  }

  Attribute CopyAttribute(const Attribute& source, Node& owner) {
    Attribute copy = source.CopyWithoutGraphs();
    if (source.g) copy.g = CopySubgraph(*source.g, owner);
    for (const auto& graph : source.graphs) copy.graphs.push_back(CopySubgraph(*graph, owner));
    return copy;
  }

  std::unique_ptr<Graph> CopySubgraph(const Graph& source, Node& owner) {
    auto copy = std::make_unique<Graph>();
    copy->AttachTo(&owner);
    Copy(source, *copy);
    return copy;
  }

  const Node* call_;
  std::unordered_set<const Value*> dropped_;  // formals of the source body the call omits
};

}  // namespace

std::unique_ptr<Graph> InstantiateFunctionBody(const Function& function, const Node& call, bool drop_omitted_inputs) {
  std::unordered_set<const Value*> dropped;
  if (drop_omitted_inputs) {
    const auto& formals = function.body->inputs();
    for (size_t i = 0; i < formals.size(); ++i) {
      if (call.input(i) == nullptr) dropped.insert(formals[i]);
    }
  }
  auto body = std::make_unique<Graph>();
  BodyCopier(&call, std::move(dropped)).Copy(*function.body, *body);
  return body;
}

std::unique_ptr<Graph> CopyGraph(const Graph& graph) {
  auto copy = std::make_unique<Graph>();
  BodyCopier(nullptr, {}).Copy(graph, *copy);
  return copy;
}

std::unique_ptr<Model> CopyModel(const Model& model) {
  auto copy = std::make_unique<Model>();
  copy->ir_version = model.ir_version;
  copy->opsets = model.opsets;
  copy->producer_name = model.producer_name;
  copy->producer_version = model.producer_version;
  copy->domain = model.domain;
  copy->model_version = model.model_version;
  copy->metadata = model.metadata;
  copy->residual = model.residual;
  copy->base_dir = model.base_dir;
  copy->external_data_files = model.external_data_files;
  for (const std::unique_ptr<Function>& function : model.functions) {
    auto copied = std::make_unique<Function>();
    copied->domain = function->domain;
    copied->name = function->name;
    copied->attribute_names = function->attribute_names;
    copied->opsets = function->opsets;
    copied->body = function->body != nullptr ? CopyGraph(*function->body) : nullptr;
    copied->residual = function->residual;
    copy->functions.push_back(std::move(copied));
  }
  if (model.graph != nullptr) copy->graph = CopyGraph(*model.graph);
  return copy;
}

}  // namespace fusionopt
