#include "ir/model_summary.h"

namespace fusionopt {
namespace {

void CountNodes(const Graph& graph, ModelSummary& summary) {
  for (const auto& node : graph.nodes()) {
    ++summary.total_node_count;
    ++summary.op_histogram[node->domain() == "ai.onnx" ? "" : node->domain()][node->op_type()];
    for (const Graph* subgraph : node->Subgraphs()) {
      ++summary.subgraph_count;
      CountNodes(*subgraph, summary);
    }
  }
}

}  // namespace

ModelSummary Summarize(const Model& model) {
  ModelSummary summary;
  const Graph& graph = *model.graph;
  for (const Value* input : graph.inputs()) {
    if (!input->is_initializer()) summary.inputs.push_back({input->name(), input->type()});
  }
  for (const Value* output : graph.outputs()) summary.outputs.push_back({output->name(), output->type()});
  summary.node_count = static_cast<int64_t>(graph.num_nodes());
  CountNodes(graph, summary);
  for (const Value* value : graph.initializers()) {
    ++summary.initializer_count;
    summary.parameter_count += value->initializer()->NumElements();
    summary.parameter_bytes += value->initializer()->nbytes();
  }
  return summary;
}

}  // namespace fusionopt
