#include "passes/util/inline_call.h"

#include <algorithm>

#include <unordered_map>
#include <unordered_set>

#include "ir/function_body.h"
#include "passes/util/outline.h"

namespace fusionopt::passes {
namespace {

// Whether every body output is produced by a body node, and no value is returned twice.
bool OutputsAreProduced(const Graph& body) {
  std::unordered_set<const Value*> seen;
  for (const Value* output : body.outputs()) {
    if (output == nullptr || output->producer() == nullptr || !seen.insert(output).second) return false;
  }
  for (const auto& node : body.nodes()) {
    if (!node->Subgraphs().empty()) return false;
  }
  return true;
}

}  // namespace

InlinedCall InlineCall(Graph& graph, Node& call, const Function& function) {
  std::unique_ptr<Graph> body = InstantiateFunctionBody(function, call);
  if (!OutputsAreProduced(*body) || body->outputs().size() < call.outputs().size()) return {};
  const std::vector<std::string> names = FusedNodeNames(call);
  const auto member_count = std::count_if(body->nodes().begin(), body->nodes().end(),
                                          [](const auto& node) { return !IsCopiedConstant(*node); });
  if (static_cast<size_t>(member_count) != names.size()) return {};
  std::unordered_map<const Value*, Value*> mapped;
  for (size_t i = 0; i < body->inputs().size(); ++i) mapped[body->inputs()[i]] = call.input(i);
  std::unordered_map<const Value*, Value*> returned;  // body output -> the call's value
  for (size_t i = 0; i < call.outputs().size(); ++i) returned[body->outputs()[i]] = call.output(i);

  struct Transfer {
    Value* value;
    Node* producer;
    int index;
  };
  std::vector<Transfer> transfers;
  InlinedCall inlined;
  size_t next_name = 0;
  for (const auto& node : body->nodes()) {
    const bool copied_constant = IsCopiedConstant(*node);
    std::vector<Value*> inputs;
    for (const Value* input : node->inputs()) inputs.push_back(input == nullptr ? nullptr : mapped.at(input));
    std::vector<Value*> outputs;
    std::vector<std::pair<Value*, int>> pending;
    for (size_t i = 0; i < node->outputs().size(); ++i) {
      const Value* output = node->output(i);
      if (output == nullptr) {
        outputs.push_back(nullptr);
        continue;
      }
      auto call_value = returned.find(output);
      if (call_value != returned.end() && call_value->second != nullptr) {
        outputs.push_back(nullptr);  // the call's own value moves here below
        pending.emplace_back(call_value->second, static_cast<int>(i));
        mapped[output] = call_value->second;
      } else {
        outputs.push_back(graph.CreateValue(graph.UniqueName(output->name())));
        mapped[output] = outputs.back();
      }
    }
    const std::string name =
        copied_constant ? UniqueNodeName(graph, call.name() + "/" + node->output(0)->name()) : names[next_name++];
    Node* copy = graph.CreateNode(node->op_type(), node->domain(), inputs, outputs, name);
    for (const Attribute& attribute : node->attributes()) copy->SetAttribute(attribute.CopyWithoutGraphs());
    graph.MoveBefore(copy, &call);
    for (const auto& [value, index] : pending) transfers.push_back({value, copy, index});
    (copied_constant ? inlined.constants : inlined.members).push_back(copy);
  }
  for (const Transfer& transfer : transfers) graph.TransferProducer(transfer.value, transfer.producer, transfer.index);
  graph.RemoveNode(&call);
  return inlined;
}

}  // namespace fusionopt::passes
