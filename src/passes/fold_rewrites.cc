#include "passes/fold_rewrites.h"

#include <set>

#include "ir/constant_value.h"
#include "ir/op_class.h"

namespace fusionopt::passes {

bool IsStandardDomain(const Node& node) { return node.domain().empty() || node.domain() == "ai.onnx"; }

TensorPtr FoldableConstant(const Value& value, const Model& model) {
  return ConstantValueOf(value, /*initializers_overridable=*/model.ir_version >= 4);
}

namespace {

// A fresh initializer's type is its tensor's, so later rewrites in the same pass can read it
// before shape inference runs again.
void SetTensorInitializer(Graph& graph, Value* value, TensorPtr tensor) {
  value->type().dtype = tensor->dtype();
  Shape shape;
  for (int64_t dim : tensor->dims()) shape.push_back(Dim::Known(dim));
  value->type().shape = std::move(shape);
  graph.SetInitializer(value, std::move(tensor));
}

}  // namespace

Value* AddInitializer(Graph& graph, const std::string& base, TensorPtr tensor) {
  Value* value = graph.CreateValue(graph.UniqueName(base));
  SetTensorInitializer(graph, value, std::move(tensor));
  return value;
}

Value* ReplaceByInitializer(Graph& graph, Value& value, TensorPtr tensor) {
  FUSIONOPT_CHECK(value.graph() == &graph && value.producer() != nullptr && !value.is_graph_output(),
                  "only a computed value that is not a graph output becomes an initializer");
  // Values cannot be renamed, so the readers move to a stand-in first; once the producer has
  // let go of the name, the initializer takes it and the stand-in goes.
  std::string name = value.name();
  Value* stand_in = AddInitializer(graph, name + "__folding", tensor);
  graph.ReplaceAllUses(&value, stand_in);
  Node* holder = graph.CreateNode("Identity", "", {}, {nullptr});
  graph.TransferProducer(&value, holder, 0);
  graph.RemoveNode(holder);  // drops `value`, freeing its name
  Value* folded = graph.CreateValue(name);
  SetTensorInitializer(graph, folded, std::move(tensor));
  graph.ReplaceAllUses(stand_in, folded);
  graph.RemoveInitializer(stand_in);
  return folded;
}

void RemoveIfUnused(std::vector<Value*> candidates) {
  // Removing one value can free another candidate (an operand read twice, or read again by
  // the producer just removed): freed pointers are remembered and skipped.
  std::set<const Value*> removed;
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
    if (producer == nullptr || !IsStandardDomain(*producer) || !IsPure(*producer)) continue;
    bool read = false;
    for (const Value* output : producer->outputs()) {
      if (output != nullptr && (!output->uses().empty() || output->is_graph_output())) read = true;
    }
    if (read) continue;
    for (const Value* output : producer->outputs()) removed.insert(output);
    candidates.insert(candidates.end(), producer->inputs().begin(), producer->inputs().end());
    graph.RemoveNode(producer);
  }
}

namespace {

void RemoveBackward(Graph& graph, const std::vector<Node*>& nodes) {
  for (auto it = nodes.rbegin(); it != nodes.rend(); ++it) graph.RemoveNode(*it);
}

}  // namespace

void AdoptChainResult(Graph& graph, Node& head, int index, const std::vector<Node*>& absorbed, Value& result) {
  // TransferProducer needs an empty slot: a two-slot holder parks `result` while the chain
  // goes, then takes `head`'s old output so `head` can produce `result`.
  Node* holder = graph.CreateNode("Identity", "", {}, {nullptr, nullptr});
  graph.TransferProducer(&result, holder, 0);
  RemoveBackward(graph, absorbed);
  graph.TransferProducer(head.output(static_cast<size_t>(index)), holder, 1);
  graph.TransferProducer(&result, &head, index);
  graph.RemoveNode(holder);
}

void ReplaceChain(Graph& graph, Node& replacement, int index, const std::vector<Node*>& replaced, Value& result) {
  graph.TransferProducer(&result, &replacement, index);
  RemoveBackward(graph, replaced);
}

bool OnlyReadBy(const Value& value, const Node& reader) {
  return !value.is_graph_output() && value.uses().size() == 1 && value.uses().front().node == &reader;
}

}  // namespace fusionopt::passes
