#include "passes/pass.h"

#include <charconv>

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

void PassContext::Rejected(const Node& node, const std::string& reason) {
  Rejection& rejection = statistics_.rejections[reason];
  ++rejection.count;
  if (rejection.examples.size() < Rejection::kMaxExamples) rejection.examples.push_back(node.name());
}

void PassContext::RecordFusion(FusionRecord record) {
  record.pass = std::string(pass_.name());
  fusions_.push_back(std::move(record));
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
