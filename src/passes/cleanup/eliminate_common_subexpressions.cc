// eliminate-common-subexpressions (O1): its rewrite, conditions and limits are in eliminate_common_subexpressions.h.
#include "passes/cleanup/eliminate_common_subexpressions.h"

#include <algorithm>
#include <bit>
#include <span>
#include <unordered_set>
#include <vector>

#include "ir/constant_value.h"
#include "ir/op_class.h"
#include "passes/util/attribute_equality.h"
#include "passes/util/bypass.h"
#include "passes/util/content_hash.h"
#include "passes/util/fold_rewrites.h"

namespace fusionopt::passes {
namespace {

uint64_t HashText(const std::string& text, uint64_t seed) {
  return HashBytes(std::span(reinterpret_cast<const uint8_t*>(text.data()), text.size()), seed);
}


uint64_t HashAttribute(const Attribute& attribute, uint64_t seed) {
  uint64_t hash = HashCombine(HashText(attribute.name, seed), static_cast<uint64_t>(attribute.kind));
  switch (attribute.kind) {
    case AttributeKind::kInt: return HashCombine(hash, static_cast<uint64_t>(attribute.i));
    case AttributeKind::kFloat: return HashCombine(hash, std::bit_cast<uint32_t>(attribute.f));
    case AttributeKind::kString: return HashText(attribute.s, hash);
    case AttributeKind::kInts:
      for (int64_t value : attribute.ints) hash = HashCombine(hash, static_cast<uint64_t>(value));
      return hash;
    case AttributeKind::kFloats:
      for (float value : attribute.floats) hash = HashCombine(hash, std::bit_cast<uint32_t>(value));
      return hash;
    case AttributeKind::kTensor: return attribute.t ? HashCombine(hash, HashTensorContent(*attribute.t)) : hash;
    default: return hash;  // rarer kinds are told apart by SameAttribute
  }
}

struct NodeKey {
  const Node* node;
};

struct HashNodeKey {
  size_t operator()(const NodeKey& key) const {
    const Node& node = *key.node;
    uint64_t hash = HashText(node.op_type(), HashText(node.domain(), 0));
    for (const Value* input : node.inputs()) hash = HashCombine(hash, reinterpret_cast<uintptr_t>(input));
    for (const Value* output : node.outputs()) hash = HashCombine(hash, output != nullptr ? 1 : 2);
    for (const Attribute* attribute : SortedAttributes(node)) hash = HashAttribute(*attribute, hash);
    return static_cast<size_t>(hash);
  }
};

struct SameNodeKey {
  bool operator()(const NodeKey& left, const NodeKey& right) const {
    const Node& a = *left.node;
    const Node& b = *right.node;
    if (a.domain() != b.domain() || a.op_type() != b.op_type() || a.inputs() != b.inputs() ||
        a.outputs().size() != b.outputs().size() || a.attributes().size() != b.attributes().size()) {
      return false;
    }
    for (size_t i = 0; i < a.outputs().size(); ++i) {
      if ((a.output(i) == nullptr) != (b.output(i) == nullptr)) return false;
    }
    return SameAttributes(a, b);
  }
};

// Whether `duplicate`'s outputs can be replaced by `kept`'s (slot by slot) without two graph
// outputs becoming one value, and without renaming a graph output.
bool CanMergeOutputs(const Graph& graph, const std::vector<Value*>& kept, const std::vector<Value*>& duplicate) {
  for (size_t i = 0; i < duplicate.size(); ++i) {
    if (duplicate[i] == nullptr || !duplicate[i]->is_graph_output()) continue;
    if (!CanProduceInstead(graph, *kept[i])) return false;
  }
  return true;
}

// Readers of each duplicate output read the kept one; a duplicate that is a graph output
// takes the kept one's place instead. The caller removes the duplicate's producer.
void MergeOutputs(Graph& graph, const std::vector<Value*>& kept, const std::vector<Value*>& duplicate) {
  for (size_t i = 0; i < duplicate.size(); ++i) {
    if (duplicate[i] == nullptr) continue;
    if (duplicate[i]->is_graph_output()) {
      ProduceInstead(graph, *kept[i], *duplicate[i]);
    } else {
      graph.ReplaceAllUses(duplicate[i], kept[i]);
    }
  }
}

class Eliminator {
 public:
  Eliminator(Graph& graph, PassContext& context) : graph_(graph), context_(context) {}

  bool Run() {
    MergeInitializers();
    std::vector<Node*> order;
    for (const auto& node : graph_.nodes()) order.push_back(node.get());
    for (Node* node : order) {
      if (!node->Subgraphs().empty() || node->outputs().empty()) continue;
      if (TensorPtr value = ConstantNodeValue(*node); value != nullptr && node->output(0) != nullptr) {
        MergeConstantNode(*node, std::move(value));
      } else {
        MergeNode(*node);
      }
    }
    return changed_;
  }

 private:
  void MergeInitializers() {
    std::vector<Value*> initializers = graph_.initializers();
    for (Value* initializer : initializers) {
      TensorPtr tensor = ConstantValueOf(*initializer, InitializerRuleOf(context_.model()));
      if (tensor == nullptr) continue;
      Value* kept = constants_.FindOrAdd(initializer, tensor);
      if (kept == nullptr || initializer->is_graph_output()) continue;
      graph_.ReplaceAllUses(initializer, kept);
      if (!initializer->is_graph_input()) graph_.RemoveInitializer(initializer);
      Merged("initializers_merged");
    }
  }

  void MergeConstantNode(Node& node, TensorPtr value) {
    Value* kept = constants_.FindOrAdd(node.output(0), std::move(value));
    if (kept == nullptr) return;
    if (!CanMergeOutputs(graph_, {kept}, {node.output(0)})) {
      context_.Rejected(node, "graph output cannot move to the kept value");
      return;
    }
    MergeOutputs(graph_, {kept}, {node.output(0)});
    graph_.RemoveNode(&node);
    Merged("constants_merged");
  }

  void MergeNode(Node& node) {
    auto [it, inserted] = nodes_.insert(NodeKey{&node});
    if (inserted) return;
    Node& kept = const_cast<Node&>(*it->node);
    if (!IsPure(node)) {
      context_.Rejected(node, "impure op");
      return;
    }
    // Copies: merging moves values between the two nodes' output slots.
    std::vector<Value*> kept_outputs = kept.outputs();
    std::vector<Value*> duplicate_outputs = node.outputs();
    if (!CanMergeOutputs(graph_, kept_outputs, duplicate_outputs)) {
      context_.Rejected(node, "graph output cannot move to the kept value");
      return;
    }
    MergeOutputs(graph_, kept_outputs, duplicate_outputs);
    graph_.RemoveNode(&node);
    Merged("nodes_merged");
  }

  void Merged(const std::string& counter) {
    context_.Matched();
    context_.Count(counter);
    changed_ = true;
  }

  Graph& graph_;
  PassContext& context_;
  TensorContentIndex constants_;
  std::unordered_set<NodeKey, HashNodeKey, SameNodeKey> nodes_;
  bool changed_ = false;
};

}  // namespace

Result<bool> EliminateCommonSubexpressions::RunOnGraph(Graph& graph, PassContext& context) {
  return Eliminator(graph, context).Run();
}

}  // namespace fusionopt::passes
