// `fusionopt bench`: the measured figures of one original-vs-optimized comparison, and how
// they are summarised, written as JSON and as a Chrome trace (bench_report.cc). The
// measuring itself lives in bench_command.cc; docs/bench.md documents flags, keys and exit codes.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <unordered_map>
#include <vector>

#include <nlohmann/json.hpp>

#include "cpu_runtime/engine/session.h"
#include "cuda_runtime/backend/cuda_session.h"
#include "ir/graph.h"
#include "cli/commands.h"
#include "passes/cost_model/cost_model.h"
#include "passes/pipeline.h"

namespace fusionopt::cli {

// `bench --fail-if-slower R` exits with this code when the speed-up is below R.
inline constexpr int kSlowerExitCode = 6;

struct LatencyStats {
  double min_ms = 0;
  double p50_ms = 0;
  double p90_ms = 0;
  double p99_ms = 0;
  double mean_ms = 0;
  double throughput_per_s = 0;  // inferences per second at the mean latency
};

// Nearest-rank percentiles (so p50 <= p90 <= p99 always) of `latencies_ms`, which must not be empty.
LatencyStats SummarizeLatencies(std::vector<double> latencies_ms);

// One side of the comparison (the original or the optimized model).
struct SideFigures {
  int64_t kernels = 0;  // kernels launched per inference (cpu::RunStats; on CUDA the plugin's launches)
  std::optional<uint64_t> kernels_executed;  // CUDA: kernels CUPTI saw run, library kernels included
  int64_t nodes = 0;    // nodes executed per inference
  uint64_t peak_intermediate_bytes = 0;
  uint64_t intermediate_traffic_bytes = 0;  // intermediates written and read per inference
  std::optional<cuda::FirstInferenceCost> first_inference;  // CUDA: what planning at these sizes cost
  LatencyStats latency;
  std::vector<cpu::KernelEvent> trace;  // the kernel launches of one traced inference
};

// A CUDA plan's first-inference cost as JSON (bench's sides, inspect --cuda); null without one.
nlohmann::ordered_json FirstInferenceJson(const std::optional<cuda::FirstInferenceCost>& cost);

// The optimized side's time per fusion kind: fused nodes of each kind, their time per
// inference and its share of the time spent in the main graph's nodes.
struct KindShare {
  std::string kind;  // the fusion's kind, or "unfused" for every node not calling a fusion
  int64_t nodes = 0;
  double ms_per_inference = 0;
  double share = 0;  // 0..1
};

// The kind of the ai.fusionopt node `node`: the pipeline report's kind when the model was
// optimized in memory (`kinds` maps node name to kind), else the called function's name
// without a trailing `_N` uniquifier (e.g. "FusedConvAddRelu"). Empty for other nodes.
std::string FusionKindOf(const Node& node, const std::map<std::string, std::string>& kinds);

// Groups `node_ms` (each node's mean time per inference) of `graph`'s own nodes by fusion kind,
// kinds in decreasing time, then "unfused", then "outside nodes": what the inferences' mean wall
// time `inference_ms` spent around the nodes (binding feeds, allocating, returning outputs), so
// the rows add up to the time an inference takes. Without it the rows summed to the kernels
// alone, and a reader compared that with the measured latency.
inline constexpr const char* kOutsideNodes = "outside nodes";
std::vector<KindShare> BreakdownByKind(const Graph& graph, const std::unordered_map<const Node*, double>& node_ms,
                                       double inference_ms, const std::map<std::string, std::string>& kinds);

// One kernel on the roofline (bench_roofline.cc): the cost model's FLOPs over its bytes, and
// those FLOPs over its measured time.
struct RooflinePoint {
  std::string kernel;  // node name
  std::string op;
  double intensity = 0;       // FLOP per byte
  double attained_flops = 0;  // FLOP/s
  double seconds = 0;         // time per inference (the median over the profiled runs)
};
struct RooflineSeries {
  std::string label;  // "original", "optimized"
  std::vector<RooflinePoint> points;
  int64_t unplaced = 0;  // kernels without FLOPs (data movement), of unknown cost, or not timed
};

struct BenchResult {
  std::string model;
  std::string backend = "cpu";  // "cpu" or "cuda"
  std::string device;           // CUDA: the device and library versions; CPU: the host (cpu::HostCpu)
  std::string host_json;        // CPU: the host as a JSON object
  std::string inputs;           // what both sides were fed (DescribeFeeds)
  std::vector<std::string> defaulted_dims;  // symbolic dims no --dim/--shape sized: 1
  std::string optimized_model;  // --optimized path; empty when optimized in memory
  std::optional<int> level;     // the -O level when optimized in memory
  std::string target;
  int threads = 0;
  int warmup = 0;
  int iterations = 0;  // timed inferences per side
  uint64_t seed = 0;
  bool verified = false;
  std::string tolerance = "rtol 1e-4, atol 1e-5";  // what "verified" compared within
  // What the fail-safe check (verify/fusion_check.h) undid before timing: "node (function)".
  std::vector<std::string> undone_fusions;
  // What the measured fusion decisions (verify/fusion_timing.h) undid: slower fused here.
  std::vector<std::string> slower_fusions;
  SideFigures original;
  SideFigures optimized;
  double speedup = 0;                       // original p50 / optimized p50
  std::optional<double> predicted_speedup;  // the cost model's, for `target`
  std::string predicted_note;               // why there is no prediction, when there is none
  std::vector<KindShare> breakdown;
  int breakdown_runs = 0;  // the profiled inferences behind it (separate from the timed ones)
  std::optional<double> fail_if_slower;
  // --roofline: the roof it was drawn against and both sides' kernels on it.
  std::optional<passes::TargetProfile> roof;
  std::vector<RooflineSeries> roofline;
};

// The human-readable summary printed to stdout.
void PrintBenchSummary(const BenchResult& result);

// The --json document (keys documented in docs/bench.md).
std::string BenchJson(const BenchResult& result);

// The --trace document: Chrome trace JSON with one complete event per kernel launch of the
// traced inference of each side (pid 1 original, pid 2 optimized), times in microseconds
// from the start of the original's traced inference.
std::string BenchTrace(const BenchResult& result);

// One row of `bench --compare-levels`.
struct LevelRow {
  int level = 0;
  SideFigures figures;
  std::optional<double> predicted_speedup;  // the cost model's, over the original (none at O0)
};
void PrintLevelRows(const BenchOptions& options, const std::vector<LevelRow>& rows, bool verified, size_t iterations);
std::string LevelsJson(const BenchOptions& options, const std::vector<LevelRow>& rows, bool verified);

// The kernels of `model`'s main graph that have FLOPs, bytes and a time in `node_times`
// (summed over `runs` inferences); `unplaced` counts the others.
std::vector<RooflinePoint> RooflinePoints(const Model& model, const passes::TargetProfile& profile,
                                          const passes::SymbolSizes& symbols,
                                          const std::unordered_map<const Node*, cpu::NodeTiming>& node_times, int runs,
                                          int64_t& unplaced);
// The SVG: log-log axes, `profile`'s roof, one marker per point (class "kernel", data-side =
// the series label, a <title> naming the kernel), a legend with each series' counts.
std::string RooflineSvg(const std::string& title, const passes::TargetProfile& profile,
                        const std::vector<RooflineSeries>& series);

}  // namespace fusionopt::cli
