#include "passes/util/bypass.h"

#include <algorithm>
#include <utility>

#include "passes/util/fold_rewrites.h"

namespace fusionopt::passes {

bool CanProduceInstead(const Graph& graph, const Value& doomed) {
  return doomed.graph() == &graph && doomed.producer() != nullptr && !doomed.is_graph_output() &&
         !doomed.is_graph_input() && !doomed.is_initializer();
}

void ProduceInstead(Graph& graph, Value& doomed, Value& kept) {
  FUSIONOPT_CHECK(CanProduceInstead(graph, doomed), "a computed value of this graph to replace");
  Node* producer = doomed.producer();
  int index = doomed.producer_output_index();
  graph.ReplaceAllUses(&doomed, &kept);
  graph.DetachProducer(&doomed);
  graph.TransferProducer(&kept, producer, index);
  graph.EraseValue(&doomed);
}

bool BypassChain(Graph& graph, const std::vector<Node*>& chain, Value& input, Value& output) {
  FUSIONOPT_CHECK(!chain.empty() && output.producer() == chain.back(), "a chain ending in its output");
  if (output.is_graph_output()) {
    bool computed_outside_chain = std::find(chain.begin(), chain.end(), input.producer()) == chain.end();
    if (!computed_outside_chain || !CanProduceInstead(graph, input)) return false;
  }
  std::vector<Value*> operands;
  for (Node* node : chain) {
    for (size_t i = 0; i < node->inputs().size(); ++i) {
      Value* operand = node->input(i);
      if (operand == &input) {
        node->ReplaceInput(static_cast<int>(i), nullptr);
      } else if (operand != nullptr && operand->graph() == &graph &&
                 std::find(chain.begin(), chain.end(), operand->producer()) == chain.end()) {
        operands.push_back(operand);
      }
    }
  }
  if (output.is_graph_output()) {
    ProduceInstead(graph, input, output);
  } else {
    graph.ReplaceAllUses(&output, &input);
  }
  for (auto it = chain.rbegin(); it != chain.rend(); ++it) graph.RemoveNode(*it);
  RemoveIfUnused(std::move(operands));
  return true;
}

}  // namespace fusionopt::passes
