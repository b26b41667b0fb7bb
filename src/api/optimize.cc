#include "api/optimize.h"

#include <spdlog/spdlog.h>

#include <algorithm>
#include <nlohmann/json.hpp>

#include "api/fail_safe.h"
#include "api/measured_fusions.h"
#include "passes/cost_model/cost_model.h"
#include "passes/conversion/ort/lower_for_ort.h"
#include "passes/pipeline.h"

namespace fusionopt::api {
namespace {

Result<passes::PipelineOptions> PipelineOptionsFrom(const OptimizeRequest& request) {
  passes::PipelineOptions pipeline;
  pipeline.level = request.level;
  pipeline.only = request.only;
  pipeline.disabled = request.disabled;
  pipeline.dump_after = request.dump_after;
  pipeline.dump_dir = request.dump_dir;
  pipeline.check_each_pass = request.check_each_pass;
  pipeline.target = request.target;
  pipeline.runtime = request.runtime == "ort" ? "ort" : "";
  if (request.level < 0 || request.level > 3) {
    return UsageError("level " + std::to_string(request.level) + " is not 0, 1, 2 or 3");
  }
  if (request.runtime != "portable" && request.runtime != "ort") {
    return UsageError("runtime '" + request.runtime + "' is not portable or ort");
  }
  if (request.verify_runs < 1) return UsageError("verify_runs must be at least 1");
  FUSIONOPT_ASSIGN_OR_RETURN(pipeline.dims, passes::ParseDimSettings(request.dims));
  for (const std::string& setting : request.pass_options) {
    size_t dot = setting.find('.');
    size_t equals = setting.find('=');
    if (dot == std::string::npos || equals == std::string::npos || dot == 0 || equals < dot + 2) {
      return UsageError("pass option '" + setting + "' is not PASS.NAME=VALUE");
    }
    pipeline.pass_options.Set(setting.substr(0, dot), setting.substr(dot + 1, equals - dot - 1),
                              setting.substr(equals + 1));
  }
  if (request.max_horizontal) {
    for (const char* pass : {"fuse-horizontal-contractions", "fuse-horizontal-elementwise"}) {
      if (!pipeline.pass_options.Find(pass, "max_members")) {
        pipeline.pass_options.Set(pass, "max_members", std::to_string(*request.max_horizontal));
      }
    }
  }
  if (request.runtime == "ort") {
    for (const std::string& pass : passes::PassesOrtRunsBetterWithout()) {
      if (std::find(pipeline.disabled.begin(), pipeline.disabled.end(), pass) == pipeline.disabled.end()) {
        pipeline.disabled.push_back(pass);
        spdlog::debug("--runtime ort: {} left out (ONNX Runtime runs the model faster without it; docs/ort.md)", pass);
      }
    }
    for (const passes::OrtPassOption& setting : passes::PassOptionsForOrt()) {
      if (!pipeline.pass_options.Find(setting.pass, setting.option)) {
        pipeline.pass_options.Set(setting.pass, setting.option, setting.value);
        spdlog::debug("--runtime ort: {}.{}={} (docs/ort.md)", setting.pass, setting.option, setting.value);
      }
    }
  }
  FUSIONOPT_RETURN_IF_ERROR(passes::ValidatePipelineOptions(pipeline));
  return pipeline;
}

// The optimized model against the original, re-read (the passes rewrote the first copy in place).
Result<verify::FusionCheckReport> VerifyOptimized(const OptimizeRequest& request, const passes::SymbolSizes& dims,
                                                  const OriginalModel& original_model, Model& optimized) {
  FUSIONOPT_ASSIGN_OR_RETURN(auto original, original_model());
  std::vector<std::vector<cpu::NamedTensor>> feeds;
  for (int run = 0; run < request.verify_runs; ++run) {
    FUSIONOPT_ASSIGN_OR_RETURN(auto set, verify::SeededFeeds(*original, dims, request.verify_seed + run));
    feeds.push_back(std::move(set));
  }
  return RunFailSafeCheck(*original, optimized, std::move(feeds), request.tolerance, /*threads=*/0,
                          /*announce_match=*/true);
}

std::string ReportWithChecks(const passes::PipelineReport& report, const std::optional<verify::FusionTimingReport>& timing,
                             const std::optional<verify::FusionCheckReport>& check) {
  std::string json = passes::ReportToJson(report);
  if (!check && !timing) return json;
  nlohmann::json combined = nlohmann::json::parse(json);
  if (timing) combined["fusion_timing"] = nlohmann::json::parse(verify::FusionTimingToJson(*timing));
  if (check) combined["verification"] = nlohmann::json::parse(verify::FusionCheckToJson(*check));
  return combined.dump(2);
}

// What lower-for-ort wrote and kept, from its report section (runtime "ort" only).
void LogOrtLowering(const OptimizeRequest& request, const passes::PipelineReport& report) {
  auto pass = std::find_if(report.passes.begin(), report.passes.end(),
                           [](const passes::PassStatistics& one) { return one.pass == "lower-for-ort"; });
  if (pass == report.passes.end()) return;
  const nlohmann::json lowering =
      nlohmann::json::parse(pass->report_sections.at(std::string(passes::kOrtLoweringSection)));
  std::map<std::string, int> written;
  for (const auto& lowered : lowering["lowered"]) ++written[lowered["written"].get<std::string>()];
  std::string listed;
  for (const auto& [op, count] : written) listed += (listed.empty() ? "" : ", ") + op + " x" + std::to_string(count);
  spdlog::info("--runtime ort ({}): {} fused groups written as ORT kernels ({}), {} left as functions ORT inlines",
               passes::NameOf(passes::OrtProviderForTarget(request.target)), lowering["lowered"].size(),
               listed.empty() ? "none" : listed, lowering["kept"].size());
  for (const auto& lowered : lowering["lowered"]) {
    if (lowered.contains("because")) {
      spdlog::debug("--runtime ort: {} as {}: {}", lowered["node"].get<std::string>(),
                    lowered["written"].get<std::string>(), lowered["because"].get<std::string>());
    }
  }
  for (const auto& kept : lowering["kept"]) {
    spdlog::debug("--runtime ort: kept {} ({}): {}", kept["node"].get<std::string>(),
                  kept["function"].get<std::string>(), kept["reason"].get<std::string>());
  }
}

// target cpu: the fusions slower on this CPU than their members undone (fusion_timing.h).
Result<std::optional<verify::FusionTimingReport>> TimeFusionsForCpu(const OptimizeRequest& request,
                                                                    const passes::SymbolSizes& dims, Model& optimized) {
  if (request.target != "cpu" || request.no_fusion_timing || request.level < 2) {
    return std::optional<verify::FusionTimingReport>();
  }
  // Timing fusionopt's runtime says nothing of ONNX Runtime's: the groups lowered become ORT
  // kernels and the rest ORT inlines, so a fusion undone here would only lose its ORT kernel
  // (the noisy timing had undone ViT's and Whisper's QKV and attention groups at random).
  if (request.runtime == "ort") {
    spdlog::info("fusion timing: skipped with --runtime ort (it times fusionopt's runtime, not ONNX Runtime)");
    return std::optional<verify::FusionTimingReport>();
  }
  FUSIONOPT_ASSIGN_OR_RETURN(auto feeds, verify::SeededFeeds(optimized, dims, request.verify_seed));
  FUSIONOPT_ASSIGN_OR_RETURN(verify::FusionTimingReport report,
                             UndoSlowerFusionsHere(optimized, std::move(feeds), /*threads=*/0));
  return std::optional<verify::FusionTimingReport>(std::move(report));
}

}  // namespace

Result<DimSizes> DimsForModel(const std::string& source, const Model& model, DimSizes dims, bool strict) {
  if (strict) {
    FUSIONOPT_RETURN_IF_ERROR(passes::CheckDimSymbols(model, dims));
    return dims;
  }
  const std::set<std::string> symbols = passes::SymbolsOf(model);
  std::string known;
  for (const std::string& name : symbols) known += (known.empty() ? "" : ", ") + name;
  for (auto it = dims.begin(); it != dims.end();) {
    if (symbols.count(it->first)) {
      ++it;
      continue;
    }
    spdlog::warn("{}: --dim {}: the model has no symbolic dim '{}' (its symbols: {}); ignored (--strict-dims makes "
                 "this an error)", source, it->first, it->first, known.empty() ? "none" : known);
    it = dims.erase(it);
  }
  return dims;
}

Result<OptimizeOutcome> Optimize(Model& model, const OptimizeRequest& request, const OriginalModel& original,
                                 const std::string& source) {
  FUSIONOPT_ASSIGN_OR_RETURN(passes::PipelineOptions pipeline, PipelineOptionsFrom(request));
  FUSIONOPT_ASSIGN_OR_RETURN(pipeline.dims, DimsForModel(source, model, std::move(pipeline.dims), request.strict_dims));
  // Verified before timed: a fusion whose kernel is wrong is undone as wrong, never timed. Both
  // run before the conversion to --runtime ort (fusionopt's runtime has no ORT contrib kernels;
  // the lowering itself is checked against ORT by the test suite).
  std::optional<verify::FusionCheckReport> check;
  std::optional<verify::FusionTimingReport> timing;
  pipeline.before_conversion = [&](Model& optimized) -> Status {
    if (request.verify) {
      FUSIONOPT_ASSIGN_OR_RETURN(verify::FusionCheckReport verified,
                                 VerifyOptimized(request, pipeline.dims, original, optimized));
      if (!verified.matches) return StillDiffers(verified);
      check = std::move(verified);
    }
    FUSIONOPT_ASSIGN_OR_RETURN(timing, TimeFusionsForCpu(request, pipeline.dims, optimized));
    return Status::Ok();
  };
  FUSIONOPT_ASSIGN_OR_RETURN(passes::PipelineReport report, passes::RunPipeline(model, pipeline));
  LogOrtLowering(request, report);
  OptimizeOutcome outcome;
  outcome.report_json = ReportWithChecks(report, timing, check);
  outcome.dims = pipeline.dims;
  return outcome;
}

}  // namespace fusionopt::api
