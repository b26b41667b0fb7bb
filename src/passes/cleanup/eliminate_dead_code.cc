// eliminate-dead-code (O1): its rewrite, conditions and limits are in eliminate_dead_code.h.
#include "passes/cleanup/eliminate_dead_code.h"

#include <algorithm>
#include <string>
#include <unordered_map>
#include <unordered_set>
#include <vector>

#include "ir/op_class.h"

namespace fusionopt::passes {
namespace {

bool IsDead(const Node& node) {
  OpClass op_class = ClassifyOp(node);
  if (op_class == OpClass::kOpaque && !IsDefaultDomain(node)) return false;
  for (const Value* output : node.outputs()) {
    if (output != nullptr && (!output->uses().empty() || output->is_graph_output())) return false;
  }
  return true;
}

// Which model-local functions a walk over graphs reaches through their calls.
class CallReach {
 public:
  explicit CallReach(const Model& model) {
    for (const auto& function : model.functions) by_name_.emplace(Key(function->domain, function->name), function.get());
  }
  void Reach(const Function* function) {
    if (function != nullptr && reached_.insert(function).second) pending_.push_back(function);
  }
  // The functions `graph` and its subgraphs call, then those their bodies call, and so on.
  void Walk(const Graph& graph) {
    VisitCalls(graph);
    while (!pending_.empty()) {
      const Function* function = pending_.back();
      pending_.pop_back();
      VisitCalls(*function->body);
    }
  }
  bool Reached(const Function* function) const { return reached_.count(function) > 0; }

 private:
  static std::string Key(const std::string& domain, const std::string& name) { return domain + '\n' + name; }
  void VisitCalls(const Graph& graph) {
    for (const auto& node : graph.nodes()) {
      if (auto it = by_name_.find(Key(node->domain(), node->op_type())); it != by_name_.end()) Reach(it->second);
      for (const Graph* subgraph : node->Subgraphs()) VisitCalls(*subgraph);
    }
  }

  std::unordered_map<std::string, const Function*> by_name_;
  std::unordered_set<const Function*> reached_;
  std::vector<const Function*> pending_;
};

}  // namespace

int RemoveUncalledFusedFunctions(Model& model) {
  // One walk from the main graph and the model's own functions (which stay, so what they call
  // must stay too): time proportional to the model, however many functions it has.
  CallReach reach(model);
  for (const auto& function : model.functions) {
    if (function->domain != kFusionDomain) reach.Reach(function.get());
  }
  reach.Walk(*model.graph);
  auto& functions = model.functions;
  const size_t before = functions.size();
  functions.erase(std::remove_if(functions.begin(), functions.end(),
                                 [&](const std::unique_ptr<Function>& function) {
                                   return function->domain == kFusionDomain && !reach.Reached(function.get());
                                 }),
                  functions.end());
  return static_cast<int>(before - functions.size());
}

Result<bool> EliminateDeadCode::Run(Model& model, PassContext& context) {
  FUSIONOPT_ASSIGN_OR_RETURN(bool changed, Pass::Run(model, context));
  if (int removed = RemoveUncalledFusedFunctions(model); removed > 0) {
    context.Count("functions_removed", removed);
    changed = true;
  }
  return changed;
}

DeadCode RemoveDeadCode(Graph& graph) {
  DeadCode removed;
  std::vector<Node*> order;
  for (const auto& node : graph.nodes()) order.push_back(node.get());
  for (auto it = order.rbegin(); it != order.rend(); ++it) {
    if (!IsDead(**it)) continue;
    graph.RemoveNode(*it);
    ++removed.nodes;
  }
  std::vector<Value*> initializers = graph.initializers();
  for (Value* initializer : initializers) {
    if (initializer->uses().empty() && !initializer->is_graph_input() && !initializer->is_graph_output()) {
      graph.RemoveInitializer(initializer);
      ++removed.initializers;
    }
  }
  return removed;
}

Result<bool> EliminateDeadCode::RunOnGraph(Graph& graph, PassContext& context) {
  const DeadCode removed = RemoveDeadCode(graph);
  if (removed.nodes > 0) context.Count("nodes_removed", removed.nodes);
  if (removed.initializers > 0) context.Count("initializers_removed", removed.initializers);
  return removed.nodes > 0 || removed.initializers > 0;
}

}  // namespace fusionopt::passes
