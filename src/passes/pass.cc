#include "passes/pass.h"

#include <algorithm>
#include <charconv>
#include <cstdio>

namespace fusionopt::passes {

void PassOptions::Set(const std::string& pass, const std::string& name, const std::string& value) {
  values_[{pass, name}] = value;
}

std::optional<std::string> PassOptions::Find(std::string_view pass, std::string_view name) const {
  auto it = values_.find({std::string(pass), std::string(name)});
  if (it == values_.end()) return std::nullopt;
  return it->second;
}

std::string PassContext::OptionText(std::string_view name) const {
  if (auto given = options_.Find(pass_.name(), name)) return *given;
  for (const PassOptionInfo& info : pass_.options()) {
    if (info.name == name) return info.default_value;
  }
  FUSIONOPT_CHECK(false, "pass " + std::string(pass_.name()) + " reads undeclared option " + std::string(name));
}

Result<int64_t> PassContext::IntOption(std::string_view name) const {
  std::string text = OptionText(name);
  int64_t value = 0;
  auto [end, error] = std::from_chars(text.data(), text.data() + text.size(), value);
  if (error != std::errc() || end != text.data() + text.size()) {
    return UsageError("option " + std::string(pass_.name()) + "." + std::string(name) + " needs an integer, got '" +
                      text + "'");
  }
  return value;
}

Result<double> PassContext::FloatOption(std::string_view name) const {
  std::string text = OptionText(name);
  double value = 0;
  auto [end, error] = std::from_chars(text.data(), text.data() + text.size(), value);
  if (error != std::errc() || end != text.data() + text.size()) {
    return UsageError("option " + std::string(pass_.name()) + "." + std::string(name) + " needs a number, got '" +
                      text + "'");
  }
  return value;
}

void PassContext::Rejected(const Node& node, const WhyNot& why) { Rejected(node.name(), why); }

void PassContext::Rejected(const std::string& node_name, const WhyNot& why) {
  FUSIONOPT_CHECK(static_cast<bool>(why), "a rejection has a reason");
  Rejection& rejection = statistics_.rejections[why.reason()];
  ++rejection.count;
  if (rejection.examples.size() < Rejection::kMaxExamples) rejection.examples.push_back(node_name);
}

void PassContext::RecordFusion(FusionRecord record) {
  record.pass = std::string(pass_.name());
  std::vector<std::string> replaced = record.replaced;
  std::sort(replaced.begin(), replaced.end());
  if (!judged_members_.empty() && replaced == judged_members_) {
    record.predicted_separate_s = judged_.predicted_separate_s;
    record.predicted_fused_s = judged_.predicted_fused_s;
  }
  judged_members_.clear();
  fusions_.push_back(std::move(record));
}

PassContext::~PassContext() = default;

FusedFunctionIndex& PassContext::fused_functions() {
  if (fused_functions_ == nullptr) fused_functions_ = std::make_unique<FusedFunctionIndex>();
  return *fused_functions_;
}

const CostModel& PassContext::cost_model() {
  if (cost_model_ == nullptr) {
    auto profile = FindTargetProfile(kDefaultTarget);
    FUSIONOPT_CHECK(profile.ok(), "the default target is a published profile");
    own_cost_model_ = std::make_unique<CostModel>(model_, *profile);
    cost_model_ = own_cost_model_.get();
  }
  return *cost_model_;
}

void PassContext::UseCostModel(const CostModel& cost_model, bool gate_fusions) {
  cost_model_ = &cost_model;
  gate_fusions_ = gate_fusions;
}

namespace {

std::string Microseconds(double seconds) {
  char text[32];
  std::snprintf(text, sizeof text, "%.2f us", seconds * 1e6);
  return text;
}

}  // namespace

FusionVerdict PassContext::JudgeFusion(const std::vector<Node*>& members) {
  FUSIONOPT_CHECK(!members.empty(), "a fusion candidate has members");
  const CostModel& costs = cost_model();
  KernelCost separate = costs.SeparateCost(members);
  KernelCost fused = costs.GroupCost(members);
  FusionVerdict verdict;
  verdict.predicted = separate.known && fused.known;
  if (verdict.predicted) {
    verdict.predicted_separate_s = separate.seconds;
    verdict.predicted_fused_s = fused.seconds;
  }
  judged_members_.clear();
  if (gate_fusions_ && verdict.predicted && fused.seconds >= separate.seconds) {
    verdict.refused = "cost model: fused " + Microseconds(fused.seconds) + " >= separate " + Microseconds(separate.seconds);
    // The rejection key stays constant so refusals count together; the numbers are in the
    // verdict and the CostRejection.
    Rejected(*members.front(), kCostModelRejection);
    CostRejection rejection{{}, separate.seconds, fused.seconds, verdict.refused.reason()};
    for (const Node* member : members) rejection.members.push_back(member->name());
    statistics_.cost_rejections.push_back(std::move(rejection));
    return verdict;
  }
  for (const Node* member : members) judged_members_.push_back(member->name());
  std::sort(judged_members_.begin(), judged_members_.end());
  judged_ = verdict;
  return verdict;
}

std::vector<Graph*> GraphsInnermostFirst(Graph& graph) {
  std::vector<Graph*> graphs;
  for (const auto& node : graph.nodes()) {
    for (Graph* subgraph : node->Subgraphs()) {
      std::vector<Graph*> nested = GraphsInnermostFirst(*subgraph);
      graphs.insert(graphs.end(), nested.begin(), nested.end());
    }
  }
  graphs.push_back(&graph);
  return graphs;
}

Result<bool> Pass::Run(Model& model, PassContext& context) {
  bool changed = false;
  for (Graph* graph : GraphsInnermostFirst(*model.graph)) {
    FUSIONOPT_ASSIGN_OR_RETURN(bool graph_changed, RunOnGraph(*graph, context));
    changed = changed || graph_changed;
  }
  return changed;
}

Result<bool> Pass::RunOnGraph(Graph& graph, PassContext& context) {
  FUSIONOPT_CHECK(false, "pass " + std::string(name()) + " overrides neither Run nor RunOnGraph");
}

}  // namespace fusionopt::passes
