#include "ir/verifier.h"

#include <algorithm>
#include <unordered_set>

#include "ir/op_class.h"

namespace fusionopt {
namespace {

bool IsAncestorOrSelf(const Graph* candidate, const Graph* graph) {
  for (const Graph* g = graph; g != nullptr; g = g->parent()) {
    if (g == candidate) return true;
  }
  return false;
}

std::string Quoted(const Value& value) { return "value '" + value.name() + "'"; }

class Verifier {
 public:
  explicit Verifier(const Model& model) : model_(model) {}

  Status VerifyGraph(const Graph& graph, const std::vector<OpsetImport>& opsets) {
    std::unordered_set<const Value*> defined;
    for (const Value* input : graph.inputs()) defined.insert(input);
    for (const Value* initializer : graph.initializers()) defined.insert(initializer);
    for (const auto& node : graph.nodes()) {
      FUSIONOPT_RETURN_IF_ERROR(VerifyNode(graph, *node, defined, opsets).WithContext(DescribeNode(*node)));
      for (const Value* output : node->outputs()) {
        if (output != nullptr) defined.insert(output);
      }
    }
    for (const Value* output : graph.outputs()) {
      if (output == nullptr) return InternalError("graph '" + graph.name() + "' has a null output");
      if (!defined.count(output) && output->graph() == &graph) {
        return InternalError("graph output " + Quoted(*output) + " is not defined");
      }
    }
    for (const Value* value : graph.AllValues()) FUSIONOPT_RETURN_IF_ERROR(VerifyUses(*value));
    return Status::Ok();
  }

  Status VerifyFunctions() {
    for (const auto& function : model_.functions) {
      std::string where = "function " + function->domain + "::" + function->name;
      if (function->body == nullptr) return InternalError(where + " has no body");
      FUSIONOPT_RETURN_IF_ERROR(VerifyGraph(*function->body, function->opsets).WithContext(where));
    }
    return Status::Ok();
  }

 private:
  Status VerifyNode(const Graph& graph, const Node& node,
              const std::unordered_set<const Value*>& defined, const std::vector<OpsetImport>& opsets) {
    if (node.graph() != &graph) return InternalError("is listed in a graph that does not own it");
    for (size_t i = 0; i < node.inputs().size(); ++i) {
      const Value* input = node.input(i);
      if (input == nullptr) continue;
      if (!IsAncestorOrSelf(input->graph(), &graph)) {
        return InternalError("input " + Quoted(*input) + " belongs to an unrelated graph");
      }
      if (input->graph() == &graph && !defined.count(input)) {
        return InternalError("reads " + Quoted(*input) + " before it is defined (not in topological order)");
      }
      Use use{const_cast<Node*>(&node), static_cast<int>(i)};
      if (std::count(input->uses().begin(), input->uses().end(), use) != 1) {
        return InternalError("input " + std::to_string(i) + " (" + Quoted(*input) + ") is missing from its use list");
      }
    }
    for (size_t i = 0; i < node.outputs().size(); ++i) {
      const Value* output = node.output(i);
      if (output == nullptr) continue;
      if (output->graph() != &graph || output->producer() != &node ||
          output->producer_output_index() != static_cast<int>(i)) {
        return InternalError("output " + Quoted(*output) + " does not name this node as its producer");
      }
    }
    FUSIONOPT_RETURN_IF_ERROR(VerifyDomain(node, opsets));
    for (const Graph* subgraph : node.Subgraphs()) {
      if (subgraph->parent() != &graph || subgraph->owner_node() != &node) {
        return InternalError("subgraph '" + subgraph->name() + "' is not attached to this node");
      }
      FUSIONOPT_RETURN_IF_ERROR(VerifyGraph(*subgraph, opsets).WithContext("subgraph '" + subgraph->name() + "'"));
    }
    return Status::Ok();
  }

  Status VerifyDomain(const Node& node, const std::vector<OpsetImport>& opsets) {
    auto imported = std::any_of(opsets.begin(), opsets.end(), [&](const OpsetImport& opset) {
      auto canonical = [](std::string_view d) { return d == "ai.onnx" ? std::string_view{} : d; };
      return canonical(opset.domain) == canonical(node.domain());
    });
    const Function* function = model_.FindFunction(node.domain(), node.op_type());
    if (!imported && function == nullptr) {
      return InternalError("domain '" + node.domain() + "' has no opset import");
    }
    if (node.domain() != kFusionDomain) return Status::Ok();
    if (!imported) return InternalError("the model does not import domain ai.fusionopt");
    if (function == nullptr) return InternalError("calls function " + node.op_type() + ", which the model lacks");
    if (node.inputs().size() > function->body->inputs().size() ||
        node.outputs().size() > function->body->outputs().size()) {
      return InternalError("passes more arguments or results than function " + node.op_type() + " declares");
    }
    return Status::Ok();
  }

  static Status VerifyUses(const Value& value) {
    for (const Use& use : value.uses()) {
      if (use.node == nullptr || use.node->input(static_cast<size_t>(use.input_index)) != &value) {
        return InternalError(Quoted(value) + " lists a use by a node that does not read it");
      }
    }
    if (value.producer() != nullptr &&
        value.producer()->output(static_cast<size_t>(value.producer_output_index())) != &value) {
      return InternalError(Quoted(value) + " names a producer that does not write it");
    }
    return Status::Ok();
  }

  const Model& model_;
};

}  // namespace

Status VerifyModel(const Model& model) {
  if (model.graph == nullptr) return InternalError("the model has no graph");
  Verifier verifier(model);
  FUSIONOPT_RETURN_IF_ERROR(verifier.VerifyGraph(*model.graph, model.opsets));
  return verifier.VerifyFunctions();
}

}  // namespace fusionopt
