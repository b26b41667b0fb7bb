// `fusionopt bench` output: latency statistics, the per-kind breakdown, the stdout summary,
// the --json document and the --trace (Chrome trace) document.
#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include <algorithm>
#include <cmath>
#include <cstdio>

#include "cli/bench/bench.h"
#include "cli/commands.h"
#include "passes/util/outline.h"

namespace fusionopt::cli {
namespace {

using nlohmann::ordered_json;

// The nearest-rank percentile of sorted `values`: the smallest value with at least p% of
// the values at or below it.
double Percentile(const std::vector<double>& sorted, double percent) {
  auto rank = static_cast<size_t>(std::ceil(percent / 100.0 * static_cast<double>(sorted.size())));
  return sorted[std::clamp<size_t>(rank, 1, sorted.size()) - 1];
}

ordered_json OptionalNumber(const std::optional<double>& value) {
  return value ? ordered_json(*value) : ordered_json(nullptr);
}

ordered_json SideJson(const SideFigures& side) {
  return {{"kernels", side.kernels},
          {"kernels_executed", side.kernels_executed ? ordered_json(*side.kernels_executed) : ordered_json(nullptr)},
          {"nodes", side.nodes},
          {"peak_intermediate_bytes", side.peak_intermediate_bytes},
          {"intermediate_traffic_bytes", side.intermediate_traffic_bytes},
          {"first_inference", FirstInferenceJson(side.first_inference)},
          {"latency_ms",
           {{"min", side.latency.min_ms},
            {"p50", side.latency.p50_ms},
            {"p90", side.latency.p90_ms},
            {"p99", side.latency.p99_ms},
            {"mean", side.latency.mean_ms}}},
          {"throughput_per_s", side.latency.throughput_per_s}};
}

void AppendSideEvents(ordered_json& events, const SideFigures& side, int pid, const char* label,
                      std::chrono::steady_clock::time_point origin) {
  events.push_back({{"name", "process_name"}, {"ph", "M"}, {"pid", pid}, {"tid", 1}, {"args", {{"name", label}}}});
  for (const cpu::KernelEvent& event : side.trace) {
    ordered_json args = {{"op", OpLabel(*event.node)}};
    if (event.node->domain() == kFusionDomain) args["fused_nodes"] = passes::FusedNodeNames(*event.node);
    events.push_back({{"name", event.node->name()},
                      {"cat", event.node->op_type()},
                      {"ph", "X"},
                      {"ts", std::chrono::duration<double, std::micro>(event.start - origin).count()},
                      {"dur", event.duration_us},
                      {"pid", pid},
                      {"tid", 1},
                      {"args", args}});
  }
}

}  // namespace

ordered_json FirstInferenceJson(const std::optional<cuda::FirstInferenceCost>& cost) {
  if (!cost) return nullptr;
  return {{"plan_seconds", cost->plan_seconds},
          {"kernels_built", cost->kernels_built},
          {"modules_compiled", cost->modules_compiled},
          {"modules_from_cache", cost->modules_from_cache},
          {"compile_seconds", cost->compile_seconds}};
}

LatencyStats SummarizeLatencies(std::vector<double> latencies_ms) {
  FUSIONOPT_CHECK(!latencies_ms.empty(), "no latencies to summarize");
  std::sort(latencies_ms.begin(), latencies_ms.end());
  LatencyStats stats;
  stats.min_ms = latencies_ms.front();
  stats.p50_ms = Percentile(latencies_ms, 50);
  stats.p90_ms = Percentile(latencies_ms, 90);
  stats.p99_ms = Percentile(latencies_ms, 99);
  for (double ms : latencies_ms) stats.mean_ms += ms / static_cast<double>(latencies_ms.size());
  stats.throughput_per_s = stats.mean_ms > 0 ? 1000.0 / stats.mean_ms : 0;
  return stats;
}

std::string FusionKindOf(const Node& node, const std::map<std::string, std::string>& kinds) {
  if (node.domain() != kFusionDomain) return "";
  auto recorded = kinds.find(node.name());
  if (recorded != kinds.end() && !recorded->second.empty()) return recorded->second;
  std::string stem = node.op_type();
  size_t underscore = stem.rfind('_');
  if (underscore != std::string::npos && underscore + 1 < stem.size() &&
      stem.find_first_not_of("0123456789", underscore + 1) == std::string::npos) {
    stem.resize(underscore);
  }
  return stem;
}

std::vector<KindShare> BreakdownByKind(const Graph& graph, const std::unordered_map<const Node*, double>& node_ms,
                                       double inference_ms, const std::map<std::string, std::string>& kinds) {
  std::map<std::string, KindShare> by_kind;
  KindShare unfused{"unfused"};
  double nodes_ms = 0;
  for (const auto& node : graph.nodes()) {
    auto timing = node_ms.find(node.get());
    const double ms = timing == node_ms.end() ? 0.0 : timing->second;
    nodes_ms += ms;
    std::string kind = FusionKindOf(*node, kinds);
    KindShare& entry = kind.empty() ? unfused : by_kind[kind];
    entry.kind = kind.empty() ? "unfused" : kind;
    ++entry.nodes;
    entry.ms_per_inference += ms;
  }
  std::vector<KindShare> shares;
  for (auto& [kind, entry] : by_kind) shares.push_back(entry);
  std::sort(shares.begin(), shares.end(),
            [](const KindShare& a, const KindShare& b) { return a.ms_per_inference > b.ms_per_inference; });
  if (unfused.nodes > 0) shares.push_back(unfused);
  // The clock around the whole inference reads at least what the clocks around its nodes do.
  shares.push_back(KindShare{kOutsideNodes, 0, std::max(0.0, inference_ms - nodes_ms)});
  const double total_ms = std::max(inference_ms, nodes_ms);
  for (KindShare& entry : shares) entry.share = total_ms > 0 ? entry.ms_per_inference / total_ms : 0;
  return shares;
}

void PrintBenchSummary(const BenchResult& result) {
  std::string optimized = result.optimized_model.empty() ? fmt::format("-O{} in memory", result.level.value_or(0))
                                                         : OneLine(result.optimized_model);
  std::string where = result.backend == "cuda" ? "cuda: " + OneLine(result.device) + "; GPU time per inference"
                                              : fmt::format("cpu, {} threads", result.threads);
  std::printf("bench: %s vs %s (%s, %d warm-up + %d timed inferences per side, interleaved)\n",
              OneLine(result.model).c_str(), optimized.c_str(), where.c_str(), result.warmup, result.iterations);
  if (result.backend != "cuda") std::printf("host: %s\n", OneLine(result.device).c_str());
  std::printf("inputs: %s\n", OneLine(result.inputs).c_str());
  std::printf("verified: %s\n",
              result.verified ? ("outputs match (" + result.tolerance + ")").c_str() : "no (--no-verify)");
  if (!result.undone_fusions.empty()) {
    std::string undone;
    for (const auto& fusion : result.undone_fusions) undone += (undone.empty() ? "" : ", ") + fusion;
    std::printf("undone: %zu fusion(s) whose kernels made outputs differ, timed unfused: %s\n",
                result.undone_fusions.size(), OneLine(undone).c_str());
  }
  if (!result.slower_fusions.empty()) {
    // The first few name what kind of fusion loses here; --json lists every one.
    constexpr size_t kNamed = 3;
    std::string slower;
    for (size_t i = 0; i < std::min(kNamed, result.slower_fusions.size()); ++i) {
      slower += (slower.empty() ? "" : ", ") + result.slower_fusions[i];
    }
    if (result.slower_fusions.size() > kNamed) {
      slower += fmt::format(" and {} more (--json lists them)", result.slower_fusions.size() - kNamed);
    }
    std::printf("timed: %zu fusion(s) slower fused on this CPU than their members, undone: %s\n",
                result.slower_fusions.size(), OneLine(slower).c_str());
  }
  std::printf("%-10s %8s %8s %10s %11s %9s %9s %9s %9s %9s %11s\n", "", "kernels", "nodes", "peak MB",
              "traffic MB", "min ms", "p50 ms", "p90 ms", "p99 ms", "mean ms", "infer/s");
  for (const auto& [label, side] : {std::pair<const char*, const SideFigures*>{"original", &result.original},
                                    {"optimized", &result.optimized}}) {
    std::printf("%-10s %8lld %8lld %10.3f %11.3f %9.4f %9.4f %9.4f %9.4f %9.4f %11.1f\n", label,
                static_cast<long long>(side->kernels), static_cast<long long>(side->nodes),
                static_cast<double>(side->peak_intermediate_bytes) / 1e6,
                static_cast<double>(side->intermediate_traffic_bytes) / 1e6, side->latency.min_ms, side->latency.p50_ms,
                side->latency.p90_ms, side->latency.p99_ms, side->latency.mean_ms, side->latency.throughput_per_s);
  }
  if (result.original.kernels_executed && result.optimized.kernels_executed) {
    std::printf("kernels executed (CUPTI, library kernels included): original %llu, optimized %llu\n",
                static_cast<unsigned long long>(*result.original.kernels_executed),
                static_cast<unsigned long long>(*result.optimized.kernels_executed));
  }
  std::printf("speed-up: %.3fx (original p50 / optimized p50)\n", result.speedup);
  if (result.predicted_speedup) {
    std::printf("predicted speed-up (%s): %.3fx\n", result.target.c_str(), *result.predicted_speedup);
  } else {
    std::printf("predicted speed-up (%s): not predicted (%s)\n", result.target.c_str(), result.predicted_note.c_str());
  }
  std::printf("optimized time by fusion kind:\n");
  std::printf("  %-34s %6s %10s %7s\n", "kind", "nodes", "ms/infer", "share");
  double total_ms = 0;
  for (const KindShare& entry : result.breakdown) {
    std::printf("  %-34s %6lld %10.4f %6.1f%%\n", OneLine(entry.kind).c_str(), static_cast<long long>(entry.nodes),
                entry.ms_per_inference, 100.0 * entry.share);
    total_ms += entry.ms_per_inference;
  }
  if (!result.breakdown.empty()) {
    std::printf("  %-34s %6s %10.4f  (mean of %d profiled inferences; the timed mean is %.4f)\n", "total", "",
                total_ms, result.breakdown_runs, result.optimized.latency.mean_ms);
  }
  if (result.fail_if_slower) {
    bool passed = result.speedup >= *result.fail_if_slower;
    std::printf("gate: speed-up %.3fx %s %.3fx (--fail-if-slower)\n", result.speedup, passed ? ">=" : "<",
                *result.fail_if_slower);
  }
}

namespace {

// --roofline's kernels with the roof above each: attained over min(peak, intensity x bandwidth).
ordered_json RooflineJson(const BenchResult& result) {
  if (!result.roof) return nullptr;
  const passes::TargetProfile& roof = *result.roof;
  ordered_json sides = ordered_json::object();
  for (const RooflineSeries& series : result.roofline) {
    ordered_json kernels = ordered_json::array();
    for (const RooflinePoint& point : series.points) {
      const double ceiling = std::min(roof.peak_flops, point.intensity * roof.bandwidth);
      kernels.push_back({{"kernel", point.kernel},
                         {"op", point.op},
                         {"intensity", point.intensity},
                         {"attained_flops", point.attained_flops},
                         {"ms_per_inference", point.seconds * 1e3},
                         {"bound", point.intensity < roof.ridge_intensity() ? "memory" : "compute"},
                         {"fraction_of_roof", ceiling > 0 ? point.attained_flops / ceiling : 0.0}});
    }
    sides[series.label] = {{"kernels", kernels}, {"not_placed", series.unplaced}};
  }
  return {{"peak_flops", roof.peak_flops}, {"bandwidth", roof.bandwidth}, {"sides", sides}};
}

}  // namespace

std::string BenchJson(const BenchResult& result) {
  ordered_json breakdown = ordered_json::array();
  for (const KindShare& entry : result.breakdown) {
    breakdown.push_back({{"kind", entry.kind},
                         {"nodes", entry.nodes},
                         {"ms_per_inference", entry.ms_per_inference},
                         {"share", entry.share}});
  }
  ordered_json document = {
      {"model", result.model},
      {"optimized_model", result.optimized_model.empty() ? ordered_json(nullptr) : ordered_json(result.optimized_model)},
      {"level", result.level ? ordered_json(*result.level) : ordered_json(nullptr)},
      {"backend", result.backend},
      {"device", result.device.empty() ? ordered_json(nullptr) : ordered_json(result.device)},
      {"host", result.host_json.empty() ? ordered_json(nullptr) : ordered_json::parse(result.host_json)},
      {"inputs", result.inputs},
      {"defaulted_dims", result.defaulted_dims},
      {"target", result.target},
      {"threads", result.threads},
      {"warmup", result.warmup},
      {"iterations", result.iterations},
      {"seed", result.seed},
      {"verified", result.verified},
      {"tolerance", result.tolerance},
      {"undone_fusions", result.undone_fusions},
      {"slower_fusions", result.slower_fusions},
      {"original", SideJson(result.original)},
      {"optimized", SideJson(result.optimized)},
      {"speedup", result.speedup},
      {"predicted_speedup", OptionalNumber(result.predicted_speedup)},
      {"fusion_breakdown", breakdown},
      {"fusion_breakdown_runs", result.breakdown_runs},
      {"fail_if_slower", OptionalNumber(result.fail_if_slower)},
      {"passed", result.fail_if_slower ? ordered_json(result.speedup >= *result.fail_if_slower) : ordered_json(nullptr)},
      {"roofline", RooflineJson(result)}};
  return document.dump(2, ' ', false, nlohmann::json::error_handler_t::replace) + "\n";
}

std::string BenchTrace(const BenchResult& result) {
  std::chrono::steady_clock::time_point origin = std::chrono::steady_clock::time_point::max();
  for (const SideFigures* side : {&result.original, &result.optimized}) {
    for (const cpu::KernelEvent& event : side->trace) origin = std::min(origin, event.start);
  }
  ordered_json events = ordered_json::array();
  AppendSideEvents(events, result.original, 1, "original", origin);
  AppendSideEvents(events, result.optimized, 2, "optimized", origin);
  ordered_json document = {{"traceEvents", events}, {"displayTimeUnit", "ms"}};
  return document.dump(1, ' ', false, nlohmann::json::error_handler_t::replace) + "\n";
}

void PrintLevelRows(const BenchOptions& options, const std::vector<LevelRow>& rows, bool verified, size_t iterations) {
  std::printf("bench --compare-levels: %s (cpu, %zu timed inferences per level, round-robin)\n",
              OneLine(options.model).c_str(), iterations);
  std::printf("verified: %s\n", verified ? "every level's outputs match O0's (rtol 1e-4, atol 1e-5)" : "no (--no-verify)");
  std::printf("%-6s %8s %8s %11s %9s %9s %9s %12s %s\n", "level", "kernels", "nodes", "traffic MB", "p50 ms", "p90 ms",
              "p99 ms", "speed-up/O0", ("predicted (" + options.target + ")").c_str());
  const double base = rows.front().figures.latency.p50_ms;
  for (const LevelRow& row : rows) {
    const LatencyStats& latency = row.figures.latency;
    std::string predicted = row.predicted_speedup ? fmt::format("{:.3f}x", *row.predicted_speedup) : "-";
    std::printf("O%-5d %8lld %8lld %11.3f %9.4f %9.4f %9.4f %11.3fx %s\n", row.level,
                static_cast<long long>(row.figures.kernels), static_cast<long long>(row.figures.nodes),
                static_cast<double>(row.figures.intermediate_traffic_bytes) / 1e6, latency.p50_ms, latency.p90_ms,
                latency.p99_ms, latency.p50_ms > 0 ? base / latency.p50_ms : 0.0, predicted.c_str());
  }
}

std::string LevelsJson(const BenchOptions& options, const std::vector<LevelRow>& rows, bool verified) {
  ordered_json levels = ordered_json::array();
  const double base = rows.front().figures.latency.p50_ms;
  for (const LevelRow& row : rows) {
    ordered_json entry = SideJson(row.figures);
    entry["level"] = row.level;
    entry["speedup_over_o0"] = row.figures.latency.p50_ms > 0 ? base / row.figures.latency.p50_ms : 0.0;
    entry["predicted_speedup"] = row.predicted_speedup ? ordered_json(*row.predicted_speedup) : ordered_json(nullptr);
    levels.push_back(std::move(entry));
  }
  ordered_json document = {{"model", options.model}, {"target", options.target}, {"verified", verified},
                           {"levels", std::move(levels)}};
  return document.dump(2) + "\n";
}

}  // namespace fusionopt::cli
