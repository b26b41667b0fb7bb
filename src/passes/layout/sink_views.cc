// sink-views (O1): its rewrite, conditions and limits are in sink_views.h.
#include "passes/layout/sink_views.h"

#include <algorithm>
#include <unordered_set>

#include "ir/constant_value.h"
#include "ir/op_class.h"
#include "passes/util/fold_rewrites.h"
#include "passes/util/outline.h"

namespace fusionopt::passes {
namespace {

bool IsScalarConstant(const Value* value, InitializerRule initializers) {
  TensorPtr tensor = value != nullptr ? ConstantValueOf(*value, initializers) : nullptr;
  return tensor != nullptr && tensor->NumElements() == 1 && tensor->dims().size() <= 1;
}

bool IsViewOp(const Node& node) {
  return IsDefaultDomain(node) && (node.op_type() == "Reshape" || node.op_type() == "Flatten" ||
                                    node.op_type() == "Squeeze" || node.op_type() == "Unsqueeze");
}

struct Region {
  std::vector<Node*> nodes;  // in graph order
  Value* result = nullptr;   // the one value read outside
};

// The elementwise region fed by `viewed`, or nullopt when it is not closed as the rewrite needs.
std::optional<Region> RegionAfter(const Graph& graph, Value& viewed, InitializerRule initializers) {
  std::unordered_set<const Value*> inside = {&viewed};
  std::unordered_set<const Node*> members;
  // A reader joins once every input is inside or a scalar constant: readers whose other inputs
  // are not computed yet are reached again from those.
  auto joins = [&](const Node* node) {
    if (members.count(node) || node->graph() != &graph || !IsDefaultDomain(*node) ||
        ClassifyOp(*node) != OpClass::kElementwise || node->outputs().size() != 1 || node->output(0) == nullptr) {
      return false;
    }
    return std::all_of(node->inputs().begin(), node->inputs().end(), [&](const Value* input) {
      return input == nullptr || inside.count(input) || IsScalarConstant(input, initializers);
    });
  };
  std::vector<Node*> frontier;
  for (const Use& use : viewed.uses()) {
    if (joins(use.node)) frontier.push_back(use.node);
  }
  while (!frontier.empty()) {
    Node* node = frontier.back();
    frontier.pop_back();
    if (!joins(node)) continue;
    members.insert(node);
    inside.insert(node->output(0));
    for (const Use& use : node->output(0)->uses()) {
      if (joins(use.node)) frontier.push_back(use.node);
    }
  }
  // The view goes: every reader of it must be in the region.
  for (const Use& use : viewed.uses()) {
    if (!members.count(use.node)) return std::nullopt;
  }
  Region region;
  for (const auto& node : graph.nodes()) {
    if (members.count(node.get())) region.nodes.push_back(node.get());
  }
  for (Node* node : region.nodes) {
    Value* output = node->output(0);
    if (output->is_graph_output()) return std::nullopt;
    for (const Use& use : output->uses()) {
      if (members.count(use.node)) continue;
      if (region.result != nullptr && region.result != output) return std::nullopt;  // two results
      region.result = output;
    }
  }
  if (region.result == nullptr) return std::nullopt;
  return region;
}

bool WorthMoving(const Value& input, const Region& region) {
  const Node* producer = input.producer();
  if (producer != nullptr && IsDefaultDomain(*producer) && ClassifyOp(*producer) == OpClass::kContraction) return true;
  return std::all_of(region.result->uses().begin(), region.result->uses().end(),
                     [](const Use& use) { return IsViewOp(*use.node) && use.input_index == 0; });
}

// `view` below `region`: the region reads the view's input, and a copy of the view turns the
// region's result back into what its readers saw.
void Sink(Graph& graph, Node& view, const Region& region) {
  Value& input = *view.input(0);
  Value& viewed = *view.output(0);
  for (Node* node : region.nodes) {
    for (size_t i = 0; i < node->inputs().size(); ++i) {
      if (node->input(i) == &viewed) node->ReplaceInput(static_cast<int>(i), &input);
    }
  }
  // Region values now have the input's shape (elementwise with scalars); the result keeps its
  // name for the readers outside, produced by the moved view.
  Value* result = region.result;
  Node* producer = result->producer();
  const int index = result->producer_output_index();
  Value* inner = graph.CreateValue(graph.UniqueName(result->name() + "_unviewed"));
  inner->type().dtype = result->dtype();
  inner->type().shape = input.shape();
  const std::vector<Use> uses = result->uses();
  for (const Use& use : uses) {
    if (std::find(region.nodes.begin(), region.nodes.end(), use.node) != region.nodes.end()) {
      use.node->ReplaceInput(use.input_index, inner);
    }
  }
  graph.DetachProducer(result);
  graph.TransferProducer(inner, producer, index);
  for (Node* node : region.nodes) {
    Value* value = node->output(0);
    if (value == inner || value == nullptr) continue;
    value->type().shape = input.shape();
    // A value_info the exporter wrote for the viewed shape would contradict the new one.
    if (value->is_declared()) value->set_declared_type(value->type());
  }
  Node* moved = graph.CreateNode("Reshape", "", {inner, view.input(1)}, {nullptr}, UniqueNodeName(graph, view.name()));
  for (const Attribute& attribute : view.attributes()) moved->SetAttribute(attribute.CopyWithoutGraphs());
  graph.TransferProducer(result, moved, 0);
  graph.RemoveNode(&view);  // the caller sorts the graph: the moved view was appended
}

}  // namespace

Result<bool> SinkViews::RunOnGraph(Graph& graph, PassContext& context) {
  std::vector<Node*> views;
  for (const auto& node : graph.nodes()) {
    if (node->op_type() == "Reshape" && IsDefaultDomain(*node) && node->inputs().size() == 2 &&
        node->input(0) != nullptr && node->output(0) != nullptr && !node->output(0)->is_graph_output() &&
        !node->output(0)->uses().empty()) {
      views.push_back(node.get());
    }
  }
  bool changed = false;
  for (Node* view : views) {
    std::optional<Region> region = RegionAfter(graph, *view->output(0), InitializerRuleOf(context.model()));
    if (!region) continue;
    if (!WorthMoving(*view->input(0), *region)) {
      context.Rejected(*view, "neither a contraction before it nor views after the elementwise ops");
      continue;
    }
    Sink(graph, *view, *region);
    context.Matched();
    context.Count("views_sunk");
    changed = true;
  }
  if (changed) FUSIONOPT_RETURN_IF_ERROR(graph.SortTopologically());
  return changed;
}

}  // namespace fusionopt::passes
