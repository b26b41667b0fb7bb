// fuse-elementwise (O2): its rewrite, conditions and limits are in fuse_elementwise.h.
#include "passes/fusion/vertical/fuse_elementwise.h"

#include <algorithm>
#include <unordered_map>
#include <unordered_set>

#include "ir/constant_value.h"
#include "ir/op_class.h"
#include "passes/fusion/util/elementwise_support.h"
#include "passes/util/outline.h"
#include "passes/util/reader_copy.h"
#include "passes/util/shape_facts.h"
#include "patterns/quantized/contraction.h"

namespace fusionopt::passes {
namespace {

struct Caps {
  int64_t max_ops = 32;
  int64_t max_inputs = 16;
  int64_t max_outputs = 4;
};

class Grouper {
 public:
  Grouper(Graph& graph, PassContext& context, const Caps& caps, int64_t opset)
      : graph_(graph), context_(context), caps_(caps), opset_(opset), shapes_(graph) {
    size_t index = 0;
    for (const auto& node : graph.nodes()) position_[node.get()] = index++;
  }

  // The groups worth fusing (two members or more), each in graph order.
  std::vector<std::vector<Node*>> Form() {
    for (const auto& node : graph_.nodes()) {
      if (!Eligible(*node)) continue;
      Visit(node.get());
    }
    std::vector<std::vector<Node*>> result;
    for (auto& group : groups_) {
      if (group.size() >= 2) {
        result.push_back(std::move(group));
      } else if (group.size() == 1) {
        context_.Count("single_ops_left");
      }
    }
    std::sort(result.begin(), result.end(),
              [&](const auto& a, const auto& b) { return position_.at(a.front()) < position_.at(b.front()); });
    HandOnQuantized(result);
    return result;
  }

 private:
  bool Eligible(const Node& node) {
    if (ClassifyOp(node) != OpClass::kElementwise) return false;
    WhyNot why = WhyEngineCannotEvaluate(node, opset_);
    if (!why && (node.outputs().size() != 1 || node.output(0) == nullptr)) why = "not one output";
    if (why) context_.Rejected(node, why);
    return !why;
  }

  void Visit(Node* node) {
    std::vector<int> producer_groups;
    for (const Value* input : node->inputs()) {
      if (input == nullptr || input->producer() == nullptr) continue;
      auto it = group_of_.find(input->producer());
      if (it == group_of_.end()) continue;
      if (std::find(producer_groups.begin(), producer_groups.end(), it->second) == producer_groups.end()) {
        producer_groups.push_back(it->second);
      }
    }
    std::vector<Node*> joined = {node};
    std::vector<int> absorbed;
    if (producer_groups.size() > 1) {
      std::vector<Node*> all = joined;
      for (int id : producer_groups) all.insert(all.end(), groups_[id].begin(), groups_[id].end());
      if (!WhyIllegal(all)) {
        joined = std::move(all);
        absorbed = producer_groups;
      }
    }
    if (absorbed.empty()) {
      for (int id : producer_groups) {
        std::vector<Node*> candidate = joined;
        candidate.insert(candidate.end(), groups_[id].begin(), groups_[id].end());
        WhyNot why = WhyIllegal(candidate);
        if (why) {
          context_.Rejected(*node, why);
          continue;
        }
        joined = std::move(candidate);
        absorbed.push_back(id);
      }
    }
    int id = static_cast<int>(groups_.size());
    for (int old : absorbed) groups_[old].clear();
    std::sort(joined.begin(), joined.end(), [&](Node* a, Node* b) { return position_.at(a) < position_.at(b); });
    for (Node* member : joined) group_of_[member] = id;
    groups_.push_back(std::move(joined));
  }

  // A group that dequantizes an 8-bit value it hands on anyway, for readers in other groups,
  // hands on the 8-bit value alone: each reader's group dequantizes it itself with a copy of the
  // DequantizeLinear (one byte an element read instead of four written and read; YOLOv8's
  // residual stream, whose sum feeds the next bottleneck's Add and, quantized, its convolution).
  // Only where the value is already read outside the group (no output is added) and each
  // reader's group stays legal with the copy.
  void HandOnQuantized(std::vector<std::vector<Node*>>& groups) {
    std::unordered_map<const Node*, size_t> group_index;
    for (size_t g = 0; g < groups.size(); ++g) {
      for (const Node* member : groups[g]) group_index[member] = g;
    }
    for (size_t g = 0; g < groups.size(); ++g) {
      for (Node* dequantize : std::vector<Node*>(groups[g])) {
        if (!HandsOnQuantized(*dequantize, groups[g], group_index)) continue;
        Value* real = dequantize->output(0);
        std::vector<Node*> readers;
        for (const Use& use : real->uses()) {
          if (!group_index.count(use.node) || group_index.at(use.node) == g) continue;
          if (std::find(readers.begin(), readers.end(), use.node) == readers.end()) readers.push_back(use.node);
        }
        for (Node* reader : readers) CopyInto(*dequantize, *reader, groups[group_index.at(reader)], group_index);
        if (real->uses().empty()) {
          groups[g].erase(std::find(groups[g].begin(), groups[g].end(), dequantize));
          group_index.erase(dequantize);
          graph_.RemoveNode(dequantize);
        }
      }
    }
    groups.erase(std::remove_if(groups.begin(), groups.end(), [](const auto& group) { return group.size() < 2; }),
                 groups.end());
  }

  // Whether `dequantize`, a member of `group`, dequantizes an 8-bit value read outside the group
  // anyway with constant parameters, and its result is read outside only by other groups.
  bool HandsOnQuantized(const Node& dequantize, const std::vector<Node*>& group,
                        const std::unordered_map<const Node*, size_t>& group_index) const {
    if (!IsDefaultDomain(dequantize) || !quantized::IsDequantizeLinear(dequantize)) return false;
    const Value* quantized = dequantize.input(0);
    if (quantized == nullptr || !IsEightBitInteger(quantized->dtype())) return false;
    for (size_t i = 1; i < dequantize.inputs().size(); ++i) {
      if (dequantize.input(i) != nullptr && InlinableConstant(*dequantize.input(i)) == nullptr) return false;
    }
    const std::unordered_set<const Node*> members(group.begin(), group.end());
    const bool made_inside = quantized->producer() != nullptr && members.count(quantized->producer()) > 0;
    if (made_inside && !quantized->is_graph_output() && !ReadOutside(*quantized, members)) return false;
    const Value* real = dequantize.output(0);
    if (real->is_graph_output() || !ReadOutside(*real, members)) return false;
    return std::all_of(real->uses().begin(), real->uses().end(), [&](const Use& use) {
      return members.count(use.node) > 0 || group_index.count(use.node) > 0;
    });
  }

  // `reader` (a member of `group`) reads a copy of `dequantize` placed in its group, where the
  // group stays legal with it.
  void CopyInto(Node& dequantize, Node& reader, std::vector<Node*>& group,
                std::unordered_map<const Node*, size_t>& group_index) {
    Value* real = dequantize.output(0);
    Node* clone = CopyForReader(graph_, dequantize, reader);
    position_[clone] = position_.at(&reader);
    std::vector<Node*> candidate = group;
    candidate.insert(std::find(candidate.begin(), candidate.end(), &reader), clone);
    if (WhyIllegal(candidate)) {
      graph_.ReplaceAllUses(clone->output(0), real);
      graph_.RemoveNode(clone);
      return;
    }
    group = std::move(candidate);
    group_index[clone] = group_index.at(&reader);
    context_.Count("dequantizations_moved_to_readers");
  }

  // Why `members` may not be one fused node as the graph stands, or "".
  WhyNot WhyIllegal(const std::vector<Node*>& members) const {
    if (static_cast<int64_t>(members.size()) > caps_.max_ops) return "group would exceed max-ops";
    std::unordered_set<const Node*> member_set(members.begin(), members.end());
    std::unordered_set<const Value*> inputs;
    std::vector<const Value*> outputs;
    for (const Node* member : members) {
      for (const Value* input : member->inputs()) {
        if (input == nullptr || member_set.count(input->producer()) || InlinableConstant(*input) != nullptr) continue;
        inputs.insert(input);
      }
      if (ReadOutside(*member->output(0), member_set)) outputs.push_back(member->output(0));
    }
    if (static_cast<int64_t>(inputs.size()) > caps_.max_inputs) return "group would exceed max-inputs";
    if (static_cast<int64_t>(outputs.size()) > caps_.max_outputs) return "group would exceed max-outputs";
    for (const Value* output : outputs) {
      if (!shapes_.Same(*output, *outputs.front())) return "outputs do not provably share one shape";
    }
    if (MayReenter(members, member_set) && LeavesAndReenters(members)) return "group would not be convex";
    return {};
  }

  // Cheap pre-check of convexity: a path can come back only through an outside reader placed
  // before the last member.
  bool MayReenter(const std::vector<Node*>& members, const std::unordered_set<const Node*>& member_set) const {
    size_t last = 0;
    for (const Node* member : members) last = std::max(last, position_.at(member));
    for (const Node* member : members) {
      for (const Use& use : member->output(0)->uses()) {
        const Node* reader = graph_.EnclosingNode(use.node);
        if (reader != nullptr && !member_set.count(reader) && position_.at(reader) < last) return true;
      }
    }
    return false;
  }

  Graph& graph_;
  PassContext& context_;
  Caps caps_;
  int64_t opset_;
  RuntimeShapes shapes_;
  std::unordered_map<const Node*, size_t> position_;
  std::unordered_map<const Node*, int> group_of_;
  std::vector<std::vector<Node*>> groups_;  // emptied when absorbed into a later group
};

// "FusedElementwise_Mul_Add_Relu"; long groups name their first four ops and the rest's count.
std::string FunctionStem(const std::vector<Node*>& members) {
  constexpr size_t kNamedOps = 4;
  std::string name = "FusedElementwise";
  for (size_t i = 0; i < members.size() && i < kNamedOps; ++i) name += "_" + members[i]->op_type();
  if (members.size() > kNamedOps) name += "_" + std::to_string(members.size() - kNamedOps) + "more";
  return name;
}

}  // namespace

std::vector<PassOptionInfo> FuseElementwise::options() const {
  return {{"max-ops", "32", "most ops in one fused group"},
          {"max-inputs", "16", "most distinct tensors a group reads (scalar constants not counted)"},
          {"max-outputs", "4", "most values a group writes"}};
}

Result<bool> FuseElementwise::RunOnGraph(Graph& graph, PassContext& context) {
  Caps caps;
  FUSIONOPT_ASSIGN_OR_RETURN(caps.max_ops, context.IntOption("max-ops"));
  FUSIONOPT_ASSIGN_OR_RETURN(caps.max_inputs, context.IntOption("max-inputs"));
  FUSIONOPT_ASSIGN_OR_RETURN(caps.max_outputs, context.IntOption("max-outputs"));
  if (caps.max_ops < 2 || caps.max_inputs < 1 || caps.max_outputs < 1) {
    return UsageError("fuse-elementwise needs max-ops >= 2, max-inputs >= 1 and max-outputs >= 1");
  }
  int64_t opset = context.model().OpsetFor("").value_or(0);
  Grouper grouper(graph, context, caps, opset);
  bool changed = false;
  for (const std::vector<Node*>& members : grouper.Form()) {
    WhyNot why = WhyNotOutlinable(members);
    if (why) {
      context.Rejected(*members.front(), why);
      continue;
    }
    if (!context.JudgeFusion(members).apply()) continue;
    OutlineGroup(graph, FusionGroup{members, "elementwise", FunctionStem(members)}, context);
    context.Count("ops_fused", static_cast<int64_t>(members.size()));
    changed = true;
  }
  return changed;
}

}  // namespace fusionopt::passes
