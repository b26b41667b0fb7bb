#include "passes/util/outline.h"

#include <algorithm>
#include <map>
#include <set>
#include <unordered_map>
#include <unordered_set>

#include "ir/constant_value.h"
#include "ir/op_class.h"
#include "text_format/text_format.h"

namespace fusionopt::passes {
std::vector<const Node*> InGraphOrder(const std::vector<const Node*>& nodes) {
  if (nodes.empty()) return {};
  const Graph& graph = *nodes.front()->graph();
  std::vector<const Node*> ordered;
  ordered.reserve(nodes.size());
  for (const Node* node : nodes) {
    if (node->graph() == &graph) ordered.push_back(node);
  }
  auto by_position = [&](const Node* a, const Node* b) { return graph.OrderKey(a) < graph.OrderKey(b); };
  std::sort(ordered.begin(), ordered.end(), by_position);
  ordered.erase(std::unique(ordered.begin(), ordered.end()), ordered.end());
  return ordered;
}

std::vector<Node*> InGraphOrder(const std::vector<Node*>& nodes) {
  std::vector<Node*> ordered;
  for (const Node* node : InGraphOrder(std::vector<const Node*>(nodes.begin(), nodes.end()))) {
    ordered.push_back(const_cast<Node*>(node));  // one of `nodes`, which are mutable
  }
  return ordered;
}

TensorPtr InlinableConstant(const Value& value) {
  TensorPtr tensor = ConstantValueOf(value, InitializerRule::kFeedsOverride);
  if (tensor == nullptr || tensor->dtype() == DataType::kString || tensor->NumElements() > 1) return nullptr;
  return tensor;
}

bool ReadOutside(const Value& value, const std::unordered_set<const Node*>& members) {
  if (value.is_graph_output()) return true;
  for (const Use& use : value.uses()) {
    if (!members.count(use.node)) return true;
  }
  return false;
}

namespace {

struct Outlined {
  std::unique_ptr<Graph> body;
  std::vector<Value*> inputs;   // the fused node's arguments
  std::vector<Value*> outputs;  // the fused node's results
};

// Body values holding the scalar constants BuildBody copies in: "c0", "c1", ...
constexpr const char* kCopiedConstantPrefix = "c";

Outlined BuildBody(const std::vector<Node*>& members, bool copy_scalar_constants) {
  std::unordered_set<const Node*> member_set(members.begin(), members.end());
  Outlined outlined;
  outlined.body = std::make_unique<Graph>();
  Graph& body = *outlined.body;
  std::unordered_map<const Value*, Value*> mapped;
  int constants = 0, temporaries = 0;
  for (Node* member : members) {
    for (Value* input : member->inputs()) {
      if (input == nullptr || mapped.count(input)) continue;
      if (TensorPtr constant = copy_scalar_constants ? InlinableConstant(*input) : nullptr) {
        Value* inlined = body.CreateValue(kCopiedConstantPrefix + std::to_string(constants++));
        Node* node = body.CreateNode("Constant", "", {}, {inlined});
        Attribute value;
        value.name = "value";
        value.kind = AttributeKind::kTensor;
        value.t = constant;
        node->SetAttribute(std::move(value));
        mapped[input] = inlined;
        continue;
      }
      Value* formal = body.CreateValue("x" + std::to_string(outlined.inputs.size()));
      body.AddInput(formal);
      outlined.inputs.push_back(input);
      mapped[input] = formal;
    }
    std::vector<Value*> inputs, outputs;
    for (Value* input : member->inputs()) inputs.push_back(input ? mapped.at(input) : nullptr);
    for (Value* output : member->outputs()) {
      if (output == nullptr) {
        outputs.push_back(nullptr);
        continue;
      }
      bool external = ReadOutside(*output, member_set);
      std::string name = external ? "y" + std::to_string(outlined.outputs.size()) : "t" + std::to_string(temporaries++);
      Value* copy = body.CreateValue(name);
      if (external) outlined.outputs.push_back(output);
      mapped[output] = copy;
      outputs.push_back(copy);
    }
    Node* copy = body.CreateNode(member->op_type(), member->domain(), inputs, outputs);
    for (const Attribute& attribute : member->attributes()) {
      FUSIONOPT_CHECK(attribute.g == nullptr && attribute.graphs.empty(), "members have no subgraphs");
      copy->SetAttribute(attribute.CopyWithoutGraphs());
    }
  }
  for (Value* output : outlined.outputs) body.AddOutput(mapped.at(output));
  return outlined;
}

void EnsureFusionDomain(Model& model) {
  if (!model.OpsetFor(kFusionDomain)) model.opsets.push_back(OpsetImport{std::string(kFusionDomain), 1, {}});
  // Model-local functions arrived with IR version 8.
  RaiseIrVersion(model, 8);
}

// The stretch of the node order from a group's first member to its last: in a topologically
// ordered graph only the nodes in it can lie on a path from one member to another.
class Span {
 public:
  Span(const Graph& graph, const std::vector<Node*>& members) : graph_(graph) {
    for (const Node* member : members) {
      if (member->graph() != &graph) continue;
      first_ = std::min(first_, graph.OrderKey(member));
      last_ = std::max(last_, graph.OrderKey(member));
    }
  }
  // `node`: a node of the graph.
  bool Contains(const Node* node) const {
    const uint64_t key = graph_.OrderKey(node);
    return first_ <= key && key <= last_;
  }

 private:
  const Graph& graph_;
  uint64_t first_ = UINT64_MAX, last_ = 0;
};

}  // namespace

std::string UniqueNodeName(const Graph& graph, const std::string& stem) { return graph.UniqueNodeName(stem); }

bool LeavesAndReenters(const std::vector<Node*>& nodes) {
  const Graph* graph = nodes.front()->graph();
  std::unordered_set<const Node*> members(nodes.begin(), nodes.end());
  const Span span(*graph, nodes);

  std::vector<const Node*> frontier;
  std::unordered_set<const Node*> seen;
  auto visit_readers = [&](const Node* node) {
    for (const Value* output : node->outputs()) {
      if (output == nullptr) continue;
      for (const Use& use : output->uses()) {
        const Node* reader = graph->EnclosingNode(use.node);
        if (reader != nullptr && seen.insert(reader).second) frontier.push_back(reader);
      }
    }
  };
  for (const Node* member : nodes) visit_readers(member);
  while (!frontier.empty()) {
    const Node* node = frontier.back();
    frontier.pop_back();
    if (members.count(node)) continue;  // a direct edge inside the group
    if (!span.Contains(node)) continue;  // after the last member: cannot reach one
    for (const Value* output : node->outputs()) {
      if (output == nullptr) continue;
      for (const Use& use : output->uses()) {
        const Node* reader = graph->EnclosingNode(use.node);
        if (reader != nullptr && members.count(reader)) return true;
      }
    }
    visit_readers(node);
  }
  return false;
}

WhyNot WhyNotOutlinable(const std::vector<Node*>& nodes) {
  if (nodes.empty()) return "empty group";
  std::unordered_set<const Node*> members;
  for (const Node* node : nodes) {
    if (!members.insert(node).second) return "a node is listed twice";
    if (node->graph() != nodes.front()->graph()) return "members in different graphs";
    if (!node->Subgraphs().empty()) return "member has subgraphs";
    if (!IsPure(*node)) return "member is not a pure op";
    if (ClassifyOp(*node) == OpClass::kFused) return "member is already fused";
  }
  bool read_outside = false;
  for (const Node* node : nodes) {
    for (const Value* output : node->outputs()) {
      if (output != nullptr && ReadOutside(*output, members)) read_outside = true;
    }
  }
  if (!read_outside) return "nothing outside the group reads it";
  if (LeavesAndReenters(nodes)) return "a path leaves the group and re-enters it";
  return {};
}

std::unique_ptr<Graph> OutlinedBody(const std::vector<Node*>& nodes) { return BuildBody(InGraphOrder(nodes), true).body; }

Node* OutlineGroup(Graph& graph, const FusionGroup& group, PassContext& context) {
  const WhyNot why = WhyNotOutlinable(group.nodes);
  FUSIONOPT_CHECK(!why, "the pass checked legality: " + why.reason());
  FUSIONOPT_CHECK(group.nodes.front()->graph() == &graph, "members belong to the graph");
  Model& model = context.model();
  std::vector<Node*> members = InGraphOrder(group.nodes);
  const CostModel& costs = context.cost_model();
  const bool keeps_launch_free = costs.ReplacingKeepsLaunchFree(graph, members);
  const uint64_t revision_before = graph.revision();
  Outlined outlined = BuildBody(members, group.copy_scalar_constants);
  std::string text = PrintGraph(*outlined.body);
  auto [function, function_name] = context.fused_functions().FindOrName(model, group.name, text);
  if (function == nullptr) {
    auto created = std::make_unique<Function>();
    created->domain = std::string(kFusionDomain);
    created->name = function_name;
    created->attribute_names = {kFusedNodesAttribute};
    std::set<std::string> domains;
    for (const Node* member : members) domains.insert(member->domain());
    for (const OpsetImport& opset : model.opsets) {
      if (domains.count(opset.domain == "ai.onnx" ? "" : opset.domain)) created->opsets.push_back(opset);
    }
    created->body = std::move(outlined.body);
    model.functions.push_back(std::move(created));
    context.fused_functions().Add(model, model.functions.back().get(), std::move(text));
  }
  EnsureFusionDomain(model);

  Node* fused = graph.CreateNode(function_name, std::string(kFusionDomain), outlined.inputs,
                                 std::vector<Value*>(outlined.outputs.size(), nullptr),
                                 UniqueNodeName(graph, group.name));
  Attribute names;
  names.name = kFusedNodesAttribute;
  names.kind = AttributeKind::kStrings;
  for (const Node* member : members) names.strings.push_back(member->name());
  std::vector<std::string> replaced = names.strings;
  fused->SetAttribute(std::move(names));
  for (size_t i = 0; i < outlined.outputs.size(); ++i) {
    graph.TransferProducer(outlined.outputs[i], fused, static_cast<int>(i));
  }
  // Where the last member stood: every input is computed by then, and dumps keep reading in
  // the model's order. The sort below repairs the rare reader placed between members.
  graph.MoveBefore(fused, graph.NodeAfter(members.back()));
  // A reader of a member's result that stood between the members now precedes the fused
  // node; only then is a sort needed (sorting after every fusion would make outlining
  // quadratic on large graphs).
  const Span span(graph, members);
  const std::unordered_set<const Node*> member_set(members.begin(), members.end());
  bool reader_precedes = false;
  for (const Value* output : outlined.outputs) {
    for (const Use& use : output->uses()) {
      const Node* reader = graph.EnclosingNode(use.node);
      reader_precedes = reader_precedes || (reader != fused && span.Contains(reader) && !member_set.count(reader));
    }
  }
  for (auto it = members.rbegin(); it != members.rend(); ++it) graph.RemoveNode(*it);
  if (reader_precedes) {
    Status sorted = graph.SortTopologically();
    FUSIONOPT_CHECK(sorted.ok(), "a convex group keeps the graph acyclic: " + sorted.message());
  }
  if (keeps_launch_free) costs.AdoptRevision(graph, revision_before);

  context.Matched();
  context.RecordFusion(FusionRecord{"", fused->name(), function_name, group.kind, std::move(replaced)});
  return fused;
}

bool IsCopiedConstant(const Node& body_node) {
  if (body_node.op_type() != "Constant" || body_node.outputs().size() != 1 || body_node.output(0) == nullptr) return false;
  const std::string& name = body_node.output(0)->name();
  const std::string prefix = kCopiedConstantPrefix;
  return name.size() > prefix.size() && name.compare(0, prefix.size(), prefix) == 0 &&
         std::all_of(name.begin() + static_cast<std::ptrdiff_t>(prefix.size()), name.end(),
                     [](char c) { return c >= '0' && c <= '9'; });
}

std::vector<std::string> FusedNodeNames(const Node& node) {
  if (node.domain() != kFusionDomain) return {};
  const Attribute* names = node.FindAttribute(kFusedNodesAttribute);
  return names != nullptr && names->kind == AttributeKind::kStrings ? names->strings : std::vector<std::string>{};
}

}  // namespace fusionopt::passes
