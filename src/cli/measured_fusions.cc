#include "cli/measured_fusions.h"

#include <fmt/format.h>
#include <spdlog/spdlog.h>

namespace fusionopt::cli {

std::string DescribeSlowerFusion(const passes::TimedFusion& fusion) {
  return fmt::format("{} ({}, {:.3f} ms fused vs {:.3f} ms op by op)", fusion.node, fusion.function, fusion.fused_ms,
                     fusion.members_ms);
}

Result<passes::FusionTimingReport> UndoSlowerFusionsHere(Model& optimized, std::vector<cpu::NamedTensor> feeds,
                                                         int threads) {
  passes::FusionTimingOptions options;
  options.feeds = std::move(feeds);
  options.threads = threads;
  FUSIONOPT_ASSIGN_OR_RETURN(passes::FusionTimingReport report, passes::UndoSlowerFusions(optimized, options));
  spdlog::debug("fusion timing: {} fused calls timed on this CPU, {} slower than their members", report.timed_calls,
                report.undone.size());
  for (const passes::TimedFusion& fusion : report.undone) {
    spdlog::info("fusion timing: undid {}: slower fused on this CPU", DescribeSlowerFusion(fusion));
  }
  return report;
}

}  // namespace fusionopt::cli
