#include "passes/util/fold_rewrites.h"

#include <set>

#include "ir/constant_value.h"
#include "ir/op_class.h"

namespace fusionopt::passes {


Value* AddInt64Initializer(Graph& graph, const std::string& base, const std::vector<int64_t>& values) {
  return AddInitializer(graph, base,
                        std::make_shared<const Tensor>(Tensor::FromValues<int64_t>(
                            DataType::kInt64, {static_cast<int64_t>(values.size())}, values)));
}

Node* CreateSplit(Graph& graph, Value* input, int64_t axis, const std::vector<int64_t>& sizes, int64_t opset,
                  const std::string& name_stem) {
  std::vector<Value*> inputs = {input};
  if (opset >= 13) inputs.push_back(AddInt64Initializer(graph, name_stem + "_sizes", sizes));
  Node* split = graph.CreateNode("Split", "", inputs, std::vector<Value*>(sizes.size(), nullptr),
                                 graph.UniqueNodeName(name_stem));
  split->SetAttribute(Attribute::Int("axis", axis));
  if (opset < 13) split->SetAttribute(Attribute::Ints("split", sizes));
  return split;
}

Value* ReplaceByInitializer(Graph& graph, Value& value, TensorPtr tensor) {
  FUSIONOPT_CHECK(value.graph() == &graph && value.producer() != nullptr && !value.is_graph_output(),
                  "only a computed value that is not a graph output becomes an initializer");
  // The value itself becomes the initializer: its name, type and readers stay.
  graph.DetachProducer(&value);
  SetTensorInitializer(graph, &value, std::move(tensor));
  return &value;
}

std::vector<const Node*> RemoveIfUnused(std::vector<Value*> candidates) {
  // Removing one value can free another candidate (an operand read twice, or read again by
  // the producer just removed): freed pointers are remembered and skipped.
  std::set<const Value*> removed;
  std::vector<const Node*> removed_nodes;
  while (!candidates.empty()) {
    Value* value = candidates.back();
    candidates.pop_back();
    if (value == nullptr || removed.count(value) != 0) continue;
    if (!value->uses().empty() || value->is_graph_output() || value->is_graph_input()) continue;
    Graph& graph = *value->graph();
    if (value->is_initializer()) {
      removed.insert(value);
      graph.RemoveInitializer(value);
      continue;
    }
    Node* producer = value->producer();
    if (producer == nullptr || !IsDefaultDomain(*producer) || !IsPure(*producer)) continue;
    bool read = false;
    for (const Value* output : producer->outputs()) {
      if (output != nullptr && (!output->uses().empty() || output->is_graph_output())) read = true;
    }
    if (read) continue;
    for (const Value* output : producer->outputs()) removed.insert(output);
    candidates.insert(candidates.end(), producer->inputs().begin(), producer->inputs().end());
    removed_nodes.push_back(producer);
    graph.RemoveNode(producer);
  }
  return removed_nodes;
}

namespace {

void RemoveBackward(Graph& graph, const std::vector<Node*>& nodes) {
  for (auto it = nodes.rbegin(); it != nodes.rend(); ++it) graph.RemoveNode(*it);
}

}  // namespace

void AdoptChainResult(Graph& graph, Node& head, int index, const std::vector<Node*>& absorbed, Value& result) {
  graph.DetachProducer(&result);
  RemoveBackward(graph, absorbed);
  Value* replaced = head.output(static_cast<size_t>(index));
  graph.DetachProducer(replaced);
  graph.TransferProducer(&result, &head, index);
  graph.EraseValue(replaced);
}

void ReplaceChain(Graph& graph, Node& replacement, int index, const std::vector<Node*>& replaced, Value& result) {
  graph.TransferProducer(&result, &replacement, index);
  RemoveBackward(graph, replaced);
}

bool OnlyReadBy(const Value& value, const Node& reader) {
  return !value.is_graph_output() && value.uses().size() == 1 && value.uses().front().node == &reader;
}

}  // namespace fusionopt::passes
