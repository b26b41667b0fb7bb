#include "api/measured_fusions.h"

#include <fmt/format.h>
#include <spdlog/spdlog.h>

namespace fusionopt::api {

std::string DescribeSlowerFusion(const verify::TimedFusion& fusion) {
  return fmt::format("{} ({}, {:.3f} ms fused vs {:.3f} ms op by op)", fusion.node, fusion.function, fusion.fused_ms,
                     fusion.members_ms);
}

Result<verify::FusionTimingReport> UndoSlowerFusionsHere(Model& optimized, std::vector<cpu::NamedTensor> feeds,
                                                         int threads) {
  verify::FusionTimingOptions options;
  options.feeds = std::move(feeds);
  options.threads = threads;
  FUSIONOPT_ASSIGN_OR_RETURN(verify::FusionTimingReport report, verify::UndoSlowerFusions(optimized, options));
  // Said by default only when it changed the model; -v says it always.
  spdlog::log(report.undone.empty() ? spdlog::level::debug : spdlog::level::info, "{}",
              verify::FusionTimingSummary(report));
  for (const verify::TimedFusion& fusion : report.undone) {
    spdlog::debug("fusion timing: undid {}: slower fused on this CPU", DescribeSlowerFusion(fusion));
  }
  return report;
}

}  // namespace fusionopt::api
