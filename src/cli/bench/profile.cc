// The per-node profile of one side: see profile.h.
#include "cli/bench/profile.h"

#include <algorithm>
#include <filesystem>
#include <thread>

#include "ir/atomic_file.h"
#include "passes/cost_model/target_profiles.h"

namespace fusionopt::cli {

Result<NodeProfile> ProfileNodes(Side& side, const std::vector<cpu::NamedTensor>& feeds, int runs) {
  std::unordered_map<const Node*, std::vector<double>> per_run_ms;
  NodeProfile profile;
  double wall_ms = 0;
  for (int i = 0; i < runs; ++i) {
    NodeTimes one_run;
    cpu::RunStats profiled;
    profiled.node_times = &one_run;
    const auto start = std::chrono::steady_clock::now();
    FUSIONOPT_RETURN_IF_ERROR(RunOnce(side, feeds, profiled).status());
    wall_ms += std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count();
    for (const auto& [node, timing] : one_run) {
      per_run_ms[node].push_back(timing.total_ms);
      profile.median_times[node].calls += timing.calls;
      profile.mean_ms[node] += timing.total_ms / runs;
    }
  }
  profile.inference_mean_ms = wall_ms / runs;
  for (auto& [node, samples] : per_run_ms) {
    samples.resize(static_cast<size_t>(runs), 0.0);  // a node a run skipped (an untaken If branch) took 0 there
    std::nth_element(samples.begin(), samples.begin() + runs / 2, samples.end());
    profile.median_times[node].total_ms = samples[static_cast<size_t>(runs / 2)] * runs;
  }
  return profile;
}

Status WriteRoofline(const BenchOptions& options, const ProfiledSide& original, const ProfiledSide& optimized,
                     const passes::SymbolSizes& symbols, int runs, BenchResult& result) {
  FUSIONOPT_ASSIGN_OR_RETURN(passes::TargetProfile profile, passes::FindTargetProfile("cpu"));
  std::vector<RooflineSeries> series;
  for (const auto& [label, profiled] : {std::pair{"original", original}, std::pair{"optimized", optimized}}) {
    RooflineSeries one;
    one.label = label;
    one.points = RooflinePoints(profiled.side.model(), profile, symbols, profiled.times, runs, one.unplaced);
    series.push_back(std::move(one));
  }
  std::string title = std::filesystem::path(options.model).filename().string() + ": kernels on the roofline (" +
                      std::to_string(options.threads > 0 ? options.threads : std::thread::hardware_concurrency()) +
                      " threads)";
  FUSIONOPT_RETURN_IF_ERROR(WriteFileAtomically(options.roofline, RooflineSvg(title, profile, series)));
  result.roof = profile;
  result.roofline = std::move(series);
  return Status::Ok();
}

Status TraceOne(Side& side, const std::vector<cpu::NamedTensor>& feeds, std::vector<cpu::KernelEvent>& events) {
  cpu::RunStats stats;
  stats.kernel_events = &events;
  return RunOnce(side, feeds, stats).status();
}

}  // namespace fusionopt::cli
