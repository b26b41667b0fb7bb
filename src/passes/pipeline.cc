#include "passes/pipeline.h"

#include <nlohmann/json.hpp>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <fstream>

#include "shape_inference/shape_inference.h"
#include "text_format/text_format.h"
#include "ir/verifier.h"
#include "passes/registry.h"

namespace fusionopt::passes {
namespace {

int64_t CountNodes(const Graph& graph) {
  int64_t count = 0;
  for (const auto& node : graph.nodes()) {
    ++count;
    for (const Graph* subgraph : node->Subgraphs()) count += CountNodes(*subgraph);
  }
  return count;
}

bool Contains(const std::vector<std::string>& names, const std::string& name) {
  return std::find(names.begin(), names.end(), name) != names.end();
}

bool Selected(const PipelineOptions& options, const std::string& name) {
  if (Contains(options.disabled, name)) return false;
  return options.only.empty() || Contains(options.only, name);
}

// The level's passes less the deselected ones, with consecutive repeats run once: a level
// ends with the cleanup the next one may begin with, and a selection can bring two runs of a
// pass together — the second would find nothing.
std::vector<std::string> PassesToRun(const PipelineOptions& options) {
  std::vector<std::string> passes;
  for (const std::string& name : PipelineFor(options.level)) {
    if (Selected(options, name) && (passes.empty() || passes.back() != name)) passes.push_back(name);
  }
  return passes;
}

Status Dump(const Model& model, const PipelineOptions& options, size_t index, const std::string& pass) {
  namespace fs = std::filesystem;
  char prefix[16];
  std::snprintf(prefix, sizeof prefix, "%02zu-", index);
  fs::path path = fs::path(options.dump_dir) / (prefix + pass + ".ir");
  std::ofstream out(path);
  out << PrintModel(model);
  if (!out) return IoError("cannot write the IR dump '" + path.string() + "'");
  return Status::Ok();
}

// IR 3 demands that every initializer be a graph input, and the passes add initializers (folded
// constants and weights): an optimized IR 3 model moves to IR 4, where the old listings are
// dropped (they were never feedable) and the weights the passes folded away go with them.
void MoveToIrFour(Model& model) {
  RaiseIrVersion(model, 4);
  Graph& graph = *model.graph;
  std::vector<Value*> initializers = graph.initializers();
  for (Value* initializer : initializers) {
    if (initializer->uses().empty() && !initializer->is_graph_input() && !initializer->is_graph_output()) {
      graph.RemoveInitializer(initializer);
    }
  }
}

bool ShouldCheck(const PipelineOptions& options) {
#ifndef NDEBUG
  return true;
#else
  return options.check_each_pass;
#endif
}

bool AnyChanged(const PipelineReport& report, size_t from) {
  return std::any_of(report.passes.begin() + static_cast<std::ptrdiff_t>(from), report.passes.end(),
                     [](const PassStatistics& pass) { return pass.changed; });
}

// One pass with its statistics, the IR check after a change and the --dump-after snapshot.
Status RunOnePass(const std::string& name, Model& model, const PipelineOptions& options, CostModel& cost_model,
                  PipelineReport& report) {
  const PassInfo* info = FindPass(name);
  FUSIONOPT_CHECK(info != nullptr, "the pipeline names a registered pass");
  std::unique_ptr<Pass> pass = info->create();
  PassStatistics statistics;
  statistics.pass = name;
  statistics.nodes_before = CountNodes(*model.graph);
  auto pass_start = std::chrono::steady_clock::now();
  PassContext context(model, *pass, options.pass_options, statistics, report.fusions);
  context.UseCostModel(cost_model, options.level >= 3);
  auto changed = pass->Run(model, context);
  if (!changed.ok()) return changed.status().WithContext("pass " + name);
  statistics.changed = *changed;
  statistics.milliseconds = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - pass_start).count();
  statistics.nodes_after = CountNodes(*model.graph);
  // New values get their types before the next pass matches on them.
  if (statistics.changed) {
    InferShapes(model);
    cost_model.ForgetConcreteShapes();
  }
  if (statistics.changed && ShouldCheck(options)) {
    Status valid = VerifyModel(model);
    if (!valid.ok()) return InternalError("pass " + name + " broke the IR: " + valid.message());
  }
  report.passes.push_back(std::move(statistics));
  if (options.dump_after == "all" || options.dump_after == name) {
    FUSIONOPT_RETURN_IF_ERROR(Dump(model, options, report.passes.size(), name));
  }
  return Status::Ok();
}

}  // namespace

Status ValidatePipelineOptions(const PipelineOptions& options) {
  auto known = [](const std::string& name, const char* flag) -> Status {
    if (FindPass(name) == nullptr) {
      return UsageError(std::string(flag) + " names '" + name + "', which is not a pass (see --list-passes)");
    }
    return Status::Ok();
  };
  auto optimization = [&known](const std::string& name, const char* flag) -> Status {
    FUSIONOPT_RETURN_IF_ERROR(known(name, flag));
    if (const std::string& runtime = FindPass(name)->runtime; !runtime.empty()) {
      return UsageError(std::string(flag) + " names '" + name + "', the conversion --runtime " + runtime +
                        " ends with; --only and --disable select optimization passes");
    }
    return Status::Ok();
  };
  for (const auto& name : options.only) FUSIONOPT_RETURN_IF_ERROR(optimization(name, "--only"));
  for (const auto& name : options.disabled) FUSIONOPT_RETURN_IF_ERROR(optimization(name, "--disable"));
  if (!options.runtime.empty() && ConversionsFor(options.runtime).empty()) {
    return UsageError("no conversion writes for runtime '" + options.runtime + "'");
  }
  if (!options.dump_after.empty() && options.dump_after != "all") {
    FUSIONOPT_RETURN_IF_ERROR(known(options.dump_after, "--dump-after"));
  }
  if (!options.dump_after.empty() && options.dump_dir.empty()) {
    return UsageError("--dump-after needs --dump-dir");
  }
  FUSIONOPT_RETURN_IF_ERROR(CheckTargetName(options.target));
  for (const auto& [symbol, size] : options.dims) {
    if (size < 1) return UsageError("--dim " + symbol + " needs a size >= 1");
  }
  for (const auto& [key, value] : options.pass_options.all()) {
    // Not a structured binding: clang before 16 cannot capture one in the lambda below.
    const std::string& pass = key.first;
    const std::string& option = key.second;
    FUSIONOPT_RETURN_IF_ERROR(known(pass, "--pass-option"));
    const auto& declared = FindPass(pass)->options;
    bool exists = std::any_of(declared.begin(), declared.end(), [&](const auto& info) { return info.name == option; });
    if (!exists) return UsageError("pass " + pass + " has no option '" + option + "'");
  }
  return Status::Ok();
}

Result<PipelineReport> RunPipeline(Model& model, const PipelineOptions& options) {
  FUSIONOPT_RETURN_IF_ERROR(ValidatePipelineOptions(options));
  auto start = std::chrono::steady_clock::now();
  FUSIONOPT_ASSIGN_OR_RETURN(TargetProfile profile, FindTargetProfile(options.target));
  CostModel cost_model(model, profile, options.dims);
  PipelineReport report;
  report.target = profile.name;
  if (!options.dump_after.empty()) {
    std::error_code error;
    std::filesystem::create_directories(options.dump_dir, error);
    FUSIONOPT_RETURN_IF_ERROR(Dump(model, options, 0, "input"));
  }
  for (const std::string& name : PassesToRun(options)) {
    FUSIONOPT_RETURN_IF_ERROR(RunOnePass(name, model, options, cost_model, report));
  }
  if (AnyChanged(report, 0) && model.ir_version < 4) MoveToIrFour(model);
  double hook_milliseconds = 0;
  if (options.before_conversion) {
    const auto hook_start = std::chrono::steady_clock::now();
    FUSIONOPT_RETURN_IF_ERROR(options.before_conversion(model));
    cost_model.ForgetConcreteShapes();  // the hook may have undone fusions
    hook_milliseconds = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - hook_start).count();
  }
  const size_t optimizations = report.passes.size();
  for (const std::string& name : ConversionsFor(options.runtime)) {
    FUSIONOPT_RETURN_IF_ERROR(RunOnePass(name, model, options, cost_model, report));
  }
  if (AnyChanged(report, optimizations) && model.ir_version < 4) MoveToIrFour(model);
  report.milliseconds =
      std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count() - hook_milliseconds;
  return report;
}

std::string ReportToJson(const PipelineReport& report) {
  using nlohmann::json;
  json passes = json::array();
  for (const PassStatistics& pass : report.passes) {
    json rejections = json::object();
    for (const auto& [reason, rejection] : pass.rejections) {
      rejections[reason] = {{"count", rejection.count}, {"examples", rejection.examples}};
    }
    json cost_rejections = json::array();
    for (const CostRejection& rejection : pass.cost_rejections) {
      cost_rejections.push_back({{"members", rejection.members},
                                 {"predicted_separate_us", rejection.predicted_separate_s * 1e6},
                                 {"predicted_fused_us", rejection.predicted_fused_s * 1e6},
                                 {"reason", rejection.reason}});
    }
    passes.push_back({{"pass", pass.pass},
                      {"changed", pass.changed},
                      {"matches", pass.matches},
                      {"rejections", rejections},
                      {"cost_rejections", cost_rejections},
                      {"counters", pass.counters},
                      {"nodes_before", pass.nodes_before},
                      {"nodes_after", pass.nodes_after},
                      {"milliseconds", pass.milliseconds}});
  }
  // Predictions in microseconds; null where the cost model could not cost the group.
  auto microseconds = [](double seconds) { return std::isnan(seconds) ? json(nullptr) : json(seconds * 1e6); };
  json fusions = json::array();
  for (const FusionRecord& fusion : report.fusions) {
    fusions.push_back({{"pass", fusion.pass},
                       {"node", fusion.node},
                       {"function", fusion.function},
                       {"kind", fusion.kind},
                       {"replaced", fusion.replaced},
                       {"predicted_separate_us", microseconds(fusion.predicted_separate_s)},
                       {"predicted_fused_us", microseconds(fusion.predicted_fused_s)}});
  }
  json document = {{"passes", passes},
                   {"fusions", fusions},
                   {"target", report.target},
                   {"milliseconds", report.milliseconds}};
  for (const PassStatistics& pass : report.passes) {
    for (const auto& [key, section] : pass.report_sections) document[key] = json::parse(section);
  }
  return document.dump(2) + "\n";
}

}  // namespace fusionopt::passes
