// `fusionopt bench`: how much faster the optimized model runs than the original, measured so
// the figure can be trusted — the same seeded inputs for both, warm-up first, the two sides
// interleaved (one inference each, alternating which goes first) so drift in clock speed or
// machine load hits both alike, percentiles rather than a single time, and outputs checked
// to match before any speed-up is reported. Both sides run on the CPU runtime or both on the
// CUDA backend (--backend; docs/cuda.md).
#include <CLI/CLI.hpp>
#include <spdlog/spdlog.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <thread>

#include "api/fail_safe.h"
#include "api/measured_fusions.h"
#include "cli/bench/bench.h"
#include "verify/quantization_steps.h"
#include "cli/bench/profile.h"
#include "cli/bench/side.h"
#include "cli/commands.h"
#include "cli/feeds.h"
#include "cli/thread_wait.h"
#include "cpu_runtime/engine/compare.h"
#include "cpu_runtime/engine/host_cpu.h"
#include "cuda_runtime/backend/cuda_session.h"
#include "ir/atomic_file.h"
#include "onnx_io/model_io.h"
#include "passes/cost_model/cost_model.h"
#include "passes/cost_model/target_profiles.h"

namespace fusionopt::cli {
namespace {

// Inferences per side used for the per-node profile behind the fusion-kind breakdown: they
// are separate from the timed runs, whose latencies must not include the profiling clock reads.
constexpr int kMaxProfiledRuns = 20;

// The cost model's predicted speed-up of `optimized` over the original it was made from,
// as `inspect --cost` computes it.
void PredictSpeedup(const Model& optimized, const std::string& target, const passes::SymbolSizes& symbols,
                    BenchResult& result) {
  auto profile = passes::FindTargetProfile(target);
  if (!profile.ok()) {
    result.predicted_note = profile.status().message();
    return;
  }
  passes::SymbolSizes known;
  for (const auto& [symbol, size] : symbols) {
    passes::SymbolSizes one = {{symbol, size}};
    if (passes::CheckDimSymbols(optimized, one).ok()) known.emplace(symbol, size);
  }
  passes::CostModel costs(optimized, *profile, known);
  passes::ModelCost cost = costs.CostOfModel();
  if (cost.fused_calls == 0) {
    result.predicted_note = "the optimized model has no fused nodes";
  } else if (cost.unknown_kernels != 0 || cost.original_unknown_kernels != 0) {
    result.predicted_note = "kernels of unknown cost";
  } else if (cost.total.seconds <= 0) {
    result.predicted_note = "zero predicted time";
  } else {
    result.predicted_speedup = cost.original_total.seconds / cost.total.seconds;
  }
}

Result<std::unique_ptr<Model>> OptimizeAt(const BenchOptions& options, int level,
                                          std::map<std::string, std::string>& kinds) {
  // A fresh copy of the input: the original side keeps the model exactly as loaded.
  FUSIONOPT_ASSIGN_OR_RETURN(std::unique_ptr<Model> model, LoadModel(options.model));
  passes::PipelineOptions pipeline;
  pipeline.level = level;
  pipeline.target = options.target;
  pipeline.dims = options.feeds.dims;  // -O3 decides for the sizes it is timed at
  FUSIONOPT_RETURN_IF_ERROR(passes::ValidatePipelineOptions(pipeline));
  FUSIONOPT_ASSIGN_OR_RETURN(passes::PipelineReport report, passes::RunPipeline(*model, pipeline));
  for (const passes::FusionRecord& fusion : report.fusions) kinds[fusion.node] = fusion.kind;
  return model;
}

Result<std::unique_ptr<Model>> OptimizedModel(const BenchOptions& options, std::map<std::string, std::string>& kinds) {
  if (!options.optimized.empty()) return LoadModel(options.optimized);
  return OptimizeAt(options, options.level, kinds);
}

// A benchmark at batch 1 and sequence 1 measures something else than the user meant: say so.
void WarnDefaultedDims(const std::string& model, const std::vector<std::string>& defaulted) {
  if (defaulted.empty()) return;
  std::string names;
  for (const std::string& name : defaulted) names += (names.empty() ? "" : ", ") + name;
  spdlog::warn("{}: symbolic dim(s) {} defaulted to 1; size them with --dim NAME=SIZE or --shape", model, names);
}

Result<std::vector<cpu::NamedTensor>> FeedsFor(const Model& model, const FeedOptions& options) {
  std::vector<const Value*> inputs;
  for (const Value* input : model.graph->inputs()) {
    if (!input->is_initializer()) inputs.push_back(input);
  }
  return MakeFeeds(inputs, options);
}

// On the CPU backend, after the fail-safe check and before anything is timed: the fusions
// whose fused kernels run slower here than their members are undone (verify/fusion_timing.h),
// so -O3 never loses to the ops it fused. Their descriptions go to `undone` when given.
Status UndoSlowerFusionsForBench(const BenchOptions& options, int level, Model& optimized,
                                 std::vector<std::string>* undone) {
  if (options.no_fusion_timing || level < 2) return Status::Ok();
  FUSIONOPT_ASSIGN_OR_RETURN(auto feeds, FeedsFor(optimized, options.feeds));
  FUSIONOPT_ASSIGN_OR_RETURN(verify::FusionTimingReport report,
                             api::UndoSlowerFusionsHere(optimized, std::move(feeds), options.threads));
  if (undone != nullptr) {
    for (const verify::TimedFusion& fusion : report.undone) undone->push_back(api::DescribeSlowerFusion(fusion));
  }
  return Status::Ok();
}

// The fail-safe check on the CPU runtime before anything is timed: fusions whose kernels make
// an output differ are undone (and listed in the result), so the speed-up reported is that of
// a model that computes what the original does; a difference no undo removes is an error.
Status CheckAndRepair(const BenchOptions& options, const Model& original, Model& optimized, BenchResult& result) {
  FUSIONOPT_ASSIGN_OR_RETURN(auto feeds, FeedsFor(original, options.feeds));
  cpu::Tolerance tolerance;  // verify's defaults, as CompareOutputs
  FUSIONOPT_ASSIGN_OR_RETURN(verify::FusionCheckReport report,
                             api::RunFailSafeCheck(original, optimized, {std::move(feeds)}, tolerance, options.threads,
                                              /*announce_match=*/false));
  if (!report.matches) {
    Status differs = api::StillDiffers(report);
    return Status(differs.code(), differs.message() + "; no speed-up reported (--no-verify benches anyway)");
  }
  for (const auto& undone : report.undone) result.undone_fusions.push_back(undone.node + " (" + undone.function + ")");
  return Status::Ok();
}

// --dim's sizes for the feeds (and -O3's decisions), checked against the model's symbols: a
// symbol it lacks is a warning (one list of dims serves every model in a CI job) unless
// --strict-dims.
Status ResolveDims(const Model& model, BenchOptions& options) {
  if (options.dims.empty()) return Status::Ok();
  FUSIONOPT_ASSIGN_OR_RETURN(passes::SymbolSizes parsed, passes::ParseDimSettings(options.dims));
  FUSIONOPT_ASSIGN_OR_RETURN(options.feeds.dims, DimsForModel(options.model, model, std::move(parsed), options.strict_dims));
  options.dims.clear();  // resolved
  return Status::Ok();
}

// --compare-levels: the model at O0..O3, each checked against O0 (unless --no-verify), timed
// round-robin (one inference per level in turn) on the same inputs; one row per level.
int RunCompareLevels(const BenchOptions& options) {
  constexpr int kLevels = 4;
  std::vector<Side> sides;
  for (int level = 0; level < kLevels; ++level) {
    std::map<std::string, std::string> kinds;
    auto model = OptimizeAt(options, level, kinds);
    if (!model.ok()) return ReportError(options.model, model.status());
    Status timed = UndoSlowerFusionsForBench(options, level, **model, nullptr);
    if (!timed.ok()) return ReportError(options.model, timed.WithContext("-O" + std::to_string(level)));
    auto side = PrepareSide(std::move(*model), options, /*cuda=*/false);
    if (!side.ok()) return ReportError(options.model, side.status().WithContext("-O" + std::to_string(level)));
    sides.push_back(std::move(*side));
  }
  std::vector<std::string> defaulted;
  auto feeds = MakeFeeds(sides[0].inputs(), options.feeds, 0, &defaulted);
  if (!feeds.ok()) return ReportError(options.model, feeds.status());
  WarnDefaultedDims(options.model, defaulted);
  for (int level = 1; level < kLevels && !options.no_verify; ++level) {
    Status match = CheckOutputsMatch(sides[0], sides[static_cast<size_t>(level)], *feeds);
    if (!match.ok()) return ReportError(options.model, match.WithContext("-O" + std::to_string(level)));
  }
  for (int i = 0; i < options.warmup; ++i) {
    for (Side& side : sides) {
      Status warm = TimeOne(side, *feeds, false);
      if (!warm.ok()) return ReportError(options.model, warm);
    }
  }
  const auto started = std::chrono::steady_clock::now();
  ProgressBar progress;
  for (int i = 0;; ++i) {
    const double elapsed = std::chrono::duration<double>(std::chrono::steady_clock::now() - started).count();
    if (options.time_s > 0 ? (i > 0 && elapsed >= options.time_s) : i >= options.iters) break;
    for (int k = 0; k < kLevels; ++k) {  // the level that goes first rotates
      Status timed = TimeOne(sides[static_cast<size_t>((i + k) % kLevels)], *feeds, true);
      if (!timed.ok()) return ReportError(options.model, timed);
    }
    progress.Update(LoopFraction(options, i + 1, started));
  }
  progress.Clear();
  std::vector<LevelRow> rows;
  for (int level = 0; level < kLevels; ++level) {
    const Side& side = sides[static_cast<size_t>(level)];
    BenchResult prediction;
    if (level > 0) PredictSpeedup(side.model(), options.target, SymbolsFromFeeds(sides[0], *feeds), prediction);
    rows.push_back({level, FiguresOf(side), prediction.predicted_speedup});
  }
  PrintLevelRows(options, rows, !options.no_verify, sides[0].latencies_ms.size());
  if (!options.json.empty()) {
    Status written = WriteFileAtomically(options.json, LevelsJson(options, rows, !options.no_verify));
    if (!written.ok()) return ReportError(options.json, written);
  }
  return 0;
}

}  // namespace

void AddBenchOptions(CLI::App& command, BenchOptions& options) {
  command.add_option("model", options.model, "Original ONNX model")->required();
  auto* level = command.add_option("-O,--level", options.level, "Optimize in memory at this level 0-3 (default 3)")
                    ->check(CLI::Range(0, 3));
  command.add_option("--optimized", options.optimized, "Use this optimized model instead of optimizing in memory")
      ->excludes(level);
  command.add_option("--warmup", options.warmup, "Untimed inferences per side first (default 5)")
      ->check(CLI::Range(0, 1000000));
  auto* iters = command.add_option("--iters", options.iters, "Timed inferences per side (default 50)")
                    ->check(CLI::Range(1, 10000000));
  command.add_option("--time", options.time_s, "Time inferences for this many seconds instead of --iters")
      ->check(CLI::PositiveNumber)
      ->excludes(iters);
  command.add_option("--shape", options.feeds.shapes, "NAME=D1xD2x... for symbolic dims (default 1); repeatable");
  command.add_option("--dim", options.dims,
                     "SYMBOL=N: size of a symbolic dim in every input that has it, for the feeds and -O3's decisions "
                     "(repeatable; --shape wins for the input it names; other symbolic dims are 1)");
  AddStrictDimsOption(command, options.strict_dims);
  command.add_option("--seed", options.feeds.seed, "Seed for the random inputs (default 0)");
  command.add_option("--threads", options.threads, "Threads (default: all cores)")->check(CLI::NonNegativeNumber);
  AddThreadWaitOption(command);
  command.add_option("--target", options.target,
                     "Cost-model target for -O3's decisions and the predicted speed-up (default h100)");
  command.add_option("--json", options.json, "Write the figures as JSON (docs/bench.md)");
  command.add_option("--trace", options.trace, "Write a Chrome trace of one inference per side");
  command.add_option("--roofline", options.roofline,
                     "Write an SVG of every kernel of both sides on this CPU's roofline (intensity vs attained FLOP/s)");
  command.add_option("--fail-if-slower", options.fail_if_slower, "Exit 6 when the speed-up is below this ratio")
      ->check(CLI::PositiveNumber);
  command.add_flag("--no-verify", options.no_verify, "Skip the output check (report a speed-up even if outputs differ)");
  command.add_flag("--no-fusion-timing", options.no_fusion_timing,
                   "CPU backend: keep every fusion the cost model chose instead of undoing those slower here");
  command.add_option("--backend", options.backend, "auto (default), cpu or cuda")
                      ->check(CLI::IsMember({"auto", "cpu", "cuda"}));
  command.add_flag("--cuda-graph", options.cuda_graph,
                   "CUDA backend: capture one inference of each side as a CUDA Graph and time its replays");
  command.add_flag("--compare-levels", options.compare_levels, "One row per level O0..O3 (each verified against O0)")
      ->excludes(level)
      ->excludes(command.get_option("--optimized"))
      ->excludes(command.get_option("--trace"))
      ->excludes(command.get_option("--roofline"))
      ->excludes(command.get_option("--fail-if-slower"));
}

// The summary, the --json and --trace files, and the --fail-if-slower gate.
int Report(const BenchOptions& options, const BenchResult& result) {
  PrintBenchSummary(result);
  if (!options.json.empty()) {
    Status written = WriteFileAtomically(options.json, BenchJson(result));
    if (!written.ok()) return ReportError(options.json, written);
  }
  if (!options.trace.empty()) {
    Status written = WriteFileAtomically(options.trace, BenchTrace(result));
    if (!written.ok()) return ReportError(options.trace, written);
  }
  if (options.fail_if_slower && result.speedup < *options.fail_if_slower) {
    std::fprintf(stderr, "error: %s: speed-up %.3fx is below --fail-if-slower %g\n", OneLine(options.model).c_str(),
                 result.speedup, *options.fail_if_slower);
    return kSlowerExitCode;
  }
  return 0;
}

// --backend auto: CUDA when the plugin loads and a GPU answers, else the CPU runtime (the
// the summary's first line names the backend measured; -v logs why CUDA was not used).
bool UseCuda(const BenchOptions& options) {
  if (options.backend != "auto") return options.backend == "cuda";
  Model empty;
  empty.graph = std::make_unique<Graph>();
  auto probe = cuda::CudaSession::Create(empty, {});
  if (!probe.ok()) spdlog::debug("--backend auto: the CPU runtime ({})", probe.status().message());
  return probe.ok();
}

Status CheckCudaOptions(const BenchOptions& options, bool cuda) {
  if (!cuda && options.cuda_graph) return UsageError("--cuda-graph needs the CUDA backend");
  if (cuda && (!options.trace.empty() || !options.roofline.empty() || options.compare_levels)) {
    return UsageError("--trace, --roofline and --compare-levels are for the CPU runtime (use --backend cpu)");
  }
  return Status::Ok();
}

namespace {

// The run's settings and both sides' figures, and the cost model's predicted speed-up.
void RecordRun(const BenchOptions& options, const Side& original, const Side& optimized,
               const std::vector<cpu::NamedTensor>& feeds, BenchResult& result) {
  result.model = options.model;
  result.optimized_model = options.optimized;
  if (options.optimized.empty()) result.level = options.level;
  result.target = options.target;
  result.threads = options.threads > 0 ? options.threads : static_cast<int>(std::thread::hardware_concurrency());
  result.warmup = options.warmup;
  result.iterations = static_cast<int>(original.latencies_ms.size());
  result.seed = options.feeds.seed;
  result.original = FiguresOf(original);
  result.optimized = FiguresOf(optimized);
  result.speedup = result.optimized.latency.p50_ms > 0 ? result.original.latency.p50_ms / result.optimized.latency.p50_ms
                                                       : 0;
  result.fail_if_slower = options.fail_if_slower;
  PredictSpeedup(optimized.model(), options.target, SymbolsFromFeeds(original, feeds), result);
}

// CUDA: the plans' figures and CUPTI's kernel counts, then the report.
int FinishOnCuda(const BenchOptions& options, Side& original, Side& optimized, const std::vector<cpu::NamedTensor>& feeds,
                 BenchResult& result) {
  Status counted = PlanAndCount(original, feeds);
  if (counted.ok()) counted = PlanAndCount(optimized, feeds);
  if (!counted.ok()) return ReportError(options.model, counted);
  result.original = FiguresOf(original);
  result.optimized = FiguresOf(optimized);
  result.device = original.session->Description();
  return Report(options, result);
}

// CPU: the optimized side's breakdown by fusion kind, the roofline and the trace when asked for,
// then the report.
int FinishOnCpu(const BenchOptions& options, Side& original, Side& optimized, const std::vector<cpu::NamedTensor>& feeds,
                const std::map<std::string, std::string>& kinds, BenchResult& result) {
  const std::string& optimized_label = options.optimized.empty() ? options.model : options.optimized;
  const int profiled_runs = std::min(kMaxProfiledRuns, result.iterations);
  auto optimized_profile = ProfileNodes(optimized, feeds, profiled_runs);
  if (!optimized_profile.ok()) return ReportError(optimized_label, optimized_profile.status());
  result.breakdown = BreakdownByKind(*optimized.model().graph, optimized_profile->mean_ms,
                                     optimized_profile->inference_mean_ms, kinds);
  result.breakdown_runs = profiled_runs;
  if (!options.roofline.empty()) {
    auto original_profile = ProfileNodes(original, feeds, profiled_runs);
    if (!original_profile.ok()) return ReportError(options.model, original_profile.status());
    Status drawn = WriteRoofline(options, {original, original_profile->median_times},
                                 {optimized, optimized_profile->median_times},
                                 SymbolsFromFeeds(original, feeds), profiled_runs, result);
    if (!drawn.ok()) return ReportError(options.roofline, drawn);
  }

  if (!options.trace.empty()) {
    Status traced = TraceOne(original, feeds, result.original.trace);
    if (traced.ok()) traced = TraceOne(optimized, feeds, result.optimized.trace);
    if (!traced.ok()) return ReportError(options.model, traced);
  }

  return Report(options, result);
}

}  // namespace

int RunBench(const BenchOptions& given) {
  BenchOptions options = given;  // --dim is resolved against the model below
  const bool cuda = UseCuda(options);
  Status cuda_options = CheckCudaOptions(options, cuda);
  if (!cuda_options.ok()) return ReportError(options.model, cuda_options);
  Status target = passes::CheckTargetName(options.target);
  if (!target.ok()) return ReportError(options.model, target);
  auto original_model = LoadModel(options.model);
  if (!original_model.ok()) return ReportError(options.model, original_model.status());
  Status dims = ResolveDims(**original_model, options);
  if (!dims.ok()) return ReportError(options.model, dims);
  if (options.compare_levels) return RunCompareLevels(options);
  std::map<std::string, std::string> kinds;  // fused node name -> fusion kind (in-memory optimization)
  auto optimized_model = OptimizedModel(options, kinds);
  const std::string& optimized_label = options.optimized.empty() ? options.model : options.optimized;
  if (!optimized_model.ok()) return ReportError(optimized_label, optimized_model.status());
  BenchResult result;
  // Repaired before timed: a fusion whose kernel is wrong is undone as wrong, never timed.
  if (!options.no_verify) {
    Status checked = CheckAndRepair(options, **original_model, **optimized_model, result);
    if (!checked.ok()) return ReportError(optimized_label, checked);
  }
  if (!cuda && options.optimized.empty()) {
    Status timed = UndoSlowerFusionsForBench(options, options.level, **optimized_model, &result.slower_fusions);
    if (!timed.ok()) return ReportError(options.model, timed);
  }
  auto original = PrepareSide(std::move(*original_model), options, cuda);
  if (!original.ok()) return ReportError(options.model, original.status());
  auto optimized = PrepareSide(std::move(*optimized_model), options, cuda);
  if (!optimized.ok()) return ReportError(optimized_label, optimized.status());
  auto feeds = MakeFeeds(original->inputs(), options.feeds, 0, &result.defaulted_dims);
  if (!feeds.ok()) return ReportError(options.model, feeds.status());
  WarnDefaultedDims(options.model, result.defaulted_dims);
  result.inputs = DescribeFeeds(*feeds);

  result.backend = cuda ? "cuda" : "cpu";
  if (!cuda) {
    result.device = cpu::ThisHost().Describe();
    result.host_json = cpu::ThisHost().ToJson();
  }
  if (!options.no_verify) {
    Status match = CheckOutputsMatch(*original, *optimized, *feeds);
    if (!match.ok()) return ReportError(optimized_label, match);
    result.verified = true;
    result.tolerance = verify::ForReference(cpu::Tolerance(), original->model()).Describe();
  }
  Status measured = MeasureInterleaved(options, *original, *optimized, *feeds);
  if (!measured.ok()) return ReportError(options.model, measured);

  RecordRun(options, *original, *optimized, *feeds, result);

  if (cuda) return FinishOnCuda(options, *original, *optimized, *feeds, result);
  return FinishOnCpu(options, *original, *optimized, *feeds, kinds, result);
}

}  // namespace fusionopt::cli
