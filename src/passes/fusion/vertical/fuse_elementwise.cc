// fuse-elementwise (O2): connected producer→consumer groups of elementwise ops become one
// ai.fusionopt node that the elementwise engine evaluates in a single tiled pass.
//
//   %t = Mul(%x, %scale)    float[N,C]
//   %u = Add(%t, %bias)     float[N,C]    →   %y = ai.fusionopt::FusedElementwise_Mul_Add_Relu(%x, %scale, %bias)
//   %y = Relu(%u)           float[N,C]
//
// Members: elementwise ops of the default domain that the engine evaluates
// (elementwise_support.h: dtypes, op table, opset >= 7).
//
// Shapes: the engine evaluates every register at one index space — the broadcast of the
// group's inputs — and stores every output there. The rule that makes this exact: all values
// the group writes provably have one shape S (shape_facts.h: equal dims or symbols, or derived
// through the graph; '?' alone proves nothing, so such groups are cut rather than guessed).
// Then the index space is S: every input feeds a member that some output depends on, and an
// elementwise op's output contains its inputs' broadcast. A smaller member read only inside —
// a [1,C] Add feeding an [N,C] Mul — is recomputed per element of S; exact, because elementwise
// ops commute with broadcasting, and a few ops per element cost less than the launch and the
// round trip through memory they replace. A smaller value that is also read outside cannot be
// stored per element of S: the group is cut there.
//
// Intermediates with several readers: when every reader is in the group, nothing to do. When
// some are outside, the value becomes an extra output of the fused node: one write of the
// tensor inside the pass that computes it anyway. Cutting the group there costs the same write
// plus a launch and a read back, and recomputing it helps only an outside reader that is itself
// a fused group that could not take the producer — so the extra output is never worse, and the
// group is cut only when the value's shape is not S or the max-outputs cap is reached.
//
// Growth: nodes are visited in graph order; each joins its producers' groups — all of them at
// once when the union is legal, else one at a time in input order — and a union is legal when
// it stays within the caps, its outputs share one shape, and it is convex (no path leaves it and comes
// back, which would make the fused node depend on itself). Every state is checked as it stands,
// with not-yet-visited readers counted as outside, so a finished group is legal whatever its
// later neighbours do. A lone op is not fused: one kernel either way.
//
// Caps (options): max-ops 32, max-inputs 16 (distinct tensors read; scalar constants are
// compiled into the body and do not count), max-outputs 4. The engine keeps one 512-element
// tile of 8-byte lanes per register: 32 ops plus 16 inputs is about 48 registers, 192 KiB per
// thread, which stays in L2; beyond that every instruction of the tile reaches out to L3, and
// the traffic that fusion saves is paid back.
//
// Limits: a merge that would be legal only after a later node joins is refused (a [1,C] value
// read by two [N,C] ops stays a group of its own, computed once, rather than recomputed in
// both). Groups are decided on the graph as it was; outlining one can make a later one
// non-convex, and that one is then reported and left alone.
#include "passes/fusion/vertical/fuse_elementwise.h"

#include <algorithm>
#include <unordered_map>
#include <unordered_set>

#include "ir/constant_value.h"
#include "ir/op_class.h"
#include "passes/fusion/util/elementwise_support.h"
#include "passes/util/outline.h"
#include "passes/util/shape_facts.h"

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
    return result;
  }

 private:
  bool Eligible(const Node& node) {
    if (ClassifyOp(node) != OpClass::kElementwise) return false;
    std::string why = WhyEngineCannotEvaluate(node, opset_);
    if (why.empty() && (node.outputs().size() != 1 || node.output(0) == nullptr)) why = "not one output";
    if (!why.empty()) context_.Rejected(node, why);
    return why.empty();
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
      if (WhyIllegal(all).empty()) {
        joined = std::move(all);
        absorbed = producer_groups;
      }
    }
    if (absorbed.empty()) {
      for (int id : producer_groups) {
        std::vector<Node*> candidate = joined;
        candidate.insert(candidate.end(), groups_[id].begin(), groups_[id].end());
        std::string why = WhyIllegal(candidate);
        if (!why.empty()) {
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

  // Why `members` may not be one fused node as the graph stands, or "".
  std::string WhyIllegal(const std::vector<Node*>& members) const {
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
    return "";
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
    std::string why = WhyNotOutlinable(members);
    if (!why.empty()) {
      context.Rejected(*members.front(), why);
      continue;
    }
    if (!context.JudgeFusion(members).apply) continue;
    OutlineGroup(graph, FusionGroup{members, "elementwise", FunctionStem(members)}, context);
    context.Count("ops_fused", static_cast<int64_t>(members.size()));
    changed = true;
  }
  return changed;
}

}  // namespace fusionopt::passes
