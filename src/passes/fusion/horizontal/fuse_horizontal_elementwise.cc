// fuse-horizontal-elementwise (O3): its rewrite, conditions and limits are in fuse_horizontal_elementwise.h.
#include "passes/fusion/horizontal/fuse_horizontal_elementwise.h"

#include <algorithm>
#include <unordered_set>

#include "ir/op_class.h"
#include "passes/fusion/util/elementwise_support.h"
#include "passes/util/fold_rewrites.h"
#include "passes/util/inline_call.h"
#include "passes/util/outline.h"
#include "passes/util/shape_facts.h"

namespace fusionopt::passes {
namespace {

// Same cap as the horizontal contractions: 4 members, the register-pressure knee the
// literature reports for merged kernels (4–6).
constexpr int64_t kDefaultMaxMembers = 4;

bool IsElementwiseBody(const Function& function) {
  for (const auto& node : function.body->nodes()) {
    if (node->op_type() != "Constant" && ClassifyOp(*node) != OpClass::kElementwise) return false;
  }
  return true;
}

// The iteration space of a candidate: the shape all its outputs share, or null.
const Shape* IterationSpace(const Node& node) {
  const Shape* space = nullptr;
  for (const Value* output : node.outputs()) {
    if (output == nullptr) continue;
    const Shape* shape = KnownRankShape(*output);
    if (shape == nullptr || (space != nullptr && !ProvablySameShape(*space, *shape))) return nullptr;
    space = shape;
  }
  return space;
}

// Whether nothing reads `values` any more, so RemoveIfUnused removes every one.
bool AllUnused(const std::vector<Value*>& values) {
  return std::all_of(values.begin(), values.end(), [](const Value* value) {
    return value->uses().empty() && !value->is_graph_output() && !value->is_graph_input();
  });
}

struct Group {
  const Shape* space;
  std::vector<Node*> members;
};

}  // namespace

std::vector<PassOptionInfo> FuseHorizontalElementwise::options() const {
  return {{"max_members", std::to_string(kDefaultMaxMembers), "most kernels merged into one"}};
}

namespace {

// The candidates in graph order, grouped: a node joins the first open group whose iteration
// space is provably its own and which it can join without a path leaving the group and
// re-entering it; a group holds `max_members` at most.
std::vector<Group> GroupBySpace(Graph& graph, const Model& model, int64_t max_members) {
  const int64_t opset = model.OpsetFor("").value_or(0);
  const LaunchFreeNodes launch_free = FindLaunchFreeNodes(graph, InitializerRuleOf(model));
  std::vector<Group> groups;
  // Indices of the groups with room for another member, in creation order: a node joins the
  // first that takes it, and skipping full groups one by one would be quadratic.
  std::vector<size_t> open_groups;
  for (const auto& owned : graph.nodes()) {
    Node* node = owned.get();
    const bool fused = node->domain() == kFusionDomain;
    if (fused) {
      const Function* function = model.FindFunction(node->domain(), node->op_type());
      if (function == nullptr || !IsElementwiseBody(*function)) continue;
    } else if (ClassifyOp(*node) != OpClass::kElementwise || launch_free.contains(node) ||
               WhyEngineCannotEvaluate(*node, opset)) {
      continue;
    }
    const Shape* space = IterationSpace(*node);
    if (space == nullptr) continue;
    auto open = std::find_if(open_groups.begin(), open_groups.end(), [&](size_t index) {
      const Group& group = groups[index];
      if (!ProvablySameShape(*group.space, *space)) return false;
      std::vector<Node*> joined = group.members;
      joined.push_back(node);
      return !LeavesAndReenters(joined);
    });
    if (open != open_groups.end()) {
      groups[*open].members.push_back(node);
      if (static_cast<int64_t>(groups[*open].members.size()) >= max_members) open_groups.erase(open);
    } else {
      groups.push_back({space, {node}});
      open_groups.push_back(groups.size() - 1);
    }
  }
  return groups;
}

// One group merged into one fused call: its fused members inlined, then all outlined together.
// Whether the graph changed (a group that cannot be outlined has its calls put back as they were).
bool MergeGroup(Graph& graph, const Group& group, PassContext& context) {
  Model& model = context.model();
  // Inlining and outlining again replace calls and ops that are not launch-free by one fused
  // call, so the cost model's launch-free nodes stay right across the whole rewrite (the
  // outliner alone sees the inlined state and cannot tell).
  const CostModel& costs = context.cost_model();
  const bool keeps_launch_free = costs.ReplacingKeepsLaunchFree(graph, group.members);
  const uint64_t revision_before = graph.revision();
  std::vector<Node*> nodes;
  std::vector<std::pair<std::string, std::vector<Node*>>> inlined_calls;  // function name, body ops
  std::vector<Value*> copied_constants;
  for (Node* member : group.members) {
    if (member->domain() != kFusionDomain) {
      nodes.push_back(member);
      continue;
    }
    const std::string function_name = member->op_type();
    const Function* function = model.FindFunction(member->domain(), function_name);
    InlinedCall inlined = InlineCall(graph, *member, *function);
    if (!inlined.done()) {
      context.Rejected(*member, "its body does not map back onto the nodes it replaced");
      continue;
    }
    nodes.insert(nodes.end(), inlined.members.begin(), inlined.members.end());
    for (Node* constant : inlined.constants) copied_constants.push_back(constant->output(0));
    inlined_calls.emplace_back(function_name, std::move(inlined.members));
  }
  const WhyNot why = WhyNotOutlinable(nodes);
  if (why) {
    context.Rejected(*nodes.front(), why);
    // Each inlined member becomes the fused node it was (its function is found again).
    for (const auto& [function_name, body] : inlined_calls) {
      OutlineGroup(graph, FusionGroup{body, "elementwise", function_name}, context);
    }
  } else {
    context.Matched();
    context.Count("kernels_merged", static_cast<int64_t>(group.members.size()));
    OutlineGroup(graph, FusionGroup{nodes, "horizontal_elementwise", "FusedHorizontal"}, context);
  }
  // The outliner copied the scalar constants into the new bodies; the inlined ones go.
  const bool constants_go = AllUnused(copied_constants);
  RemoveIfUnused(copied_constants);
  if (keeps_launch_free && constants_go) costs.AdoptRevision(graph, revision_before);
  return !why || !inlined_calls.empty();
}

}  // namespace

Result<bool> FuseHorizontalElementwise::RunOnGraph(Graph& graph, PassContext& context) {
  FUSIONOPT_ASSIGN_OR_RETURN(int64_t max_members, context.IntOption("max_members"));
  if (max_members < 2) return UsageError("fuse-horizontal-elementwise.max_members must be at least 2");
  bool changed = false;
  for (const Group& group : GroupBySpace(graph, context.model(), max_members)) {
    // The members as they are (fused calls cost as their bodies, reading and writing only the
    // calls' values) against the merged kernel.
    if (group.members.size() < 2 || !context.JudgeFusion(group.members).apply()) continue;
    changed = MergeGroup(graph, group, context) || changed;
  }
  return changed;
}

}  // namespace fusionopt::passes
