// `fusionopt run`: execute a model on the CPU runtime with given or seeded random inputs.
#include <CLI/CLI.hpp>
#include <spdlog/spdlog.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <filesystem>
#include <map>
#include <unordered_map>
#include <vector>

#include "api/session.h"
#include "cuda_runtime/backend/cuda_session.h"
#include "cli/commands.h"
#include "cli/thread_wait.h"
#include "cli/feeds.h"
#include "cpu_runtime/contraction/winograd.h"
#include "cpu_runtime/fused/program.h"
#include "onnx_io/model_io.h"
#include "onnx_io/tensor_files.h"

namespace fusionopt::cli {
namespace {

std::string Summary(const cpu::NamedTensor& output) {
  const cpu::RtTensor& tensor = output.tensor;
  double lo = INFINITY, hi = -INFINITY, sum = 0;
  int64_t count = tensor.NumElements();
  for (int64_t i = 0; i < count; ++i) {
    double value = tensor.ValueAsDouble(i);
    lo = std::min(lo, value);
    hi = std::max(hi, value);
    sum += value;
  }
  return fmt::format("{} {}{} min={:.6g} max={:.6g} mean={:.6g}", output.name, NameOf(tensor.dtype()),
                     cpu::DimsToString(tensor.dims()), count ? lo : 0.0, count ? hi : 0.0,
                     count ? sum / static_cast<double>(count) : 0.0);
}

// The run's tensor as an IR tensor over the same bytes (no copy) for the file writer.
Tensor AsIrTensor(const cpu::RtTensor& tensor) {
  return Tensor::Borrowed(tensor.dtype(), tensor.dims(), tensor.raw(), tensor.nbytes(), tensor.storage());
}

// The nodes that took longest per timed run, then the time per op type: where to look first.
void PrintProfile(const std::unordered_map<const Node*, cpu::NodeTiming>& node_times, const Graph& main_graph,
                  int runs, int top) {
  const size_t listed = top == 0 ? node_times.size() : static_cast<size_t>(top);
  std::vector<std::pair<const Node*, cpu::NodeTiming>> nodes(node_times.begin(), node_times.end());
  std::sort(nodes.begin(), nodes.end(), [](const auto& a, const auto& b) { return a.second.total_ms > b.second.total_ms; });
  std::map<std::string, std::pair<double, int64_t>> per_op;  // ms, nodes
  double total_ms = 0;
  for (const auto& [node, timing] : nodes) {
    if (node->graph() == &main_graph) total_ms += timing.total_ms;  // body nodes run inside a main-graph node
    auto& entry = per_op[OpLabel(*node)];
    entry.first += timing.total_ms;
    ++entry.second;
  }
  auto share = [&](double ms) { return total_ms > 0 ? 100.0 * ms / total_ms : 0.0; };
  std::printf("profile: %zu nodes, %.4f ms per run in nodes (mean of %d timed runs)\n", nodes.size(), total_ms / runs,
              runs);
  std::printf("%10s %7s %7s  %-40s %s\n", "ms/run", "share", "calls", "op", "node");
  for (size_t i = 0; i < std::min(listed, nodes.size()); ++i) {
    const auto& [node, timing] = nodes[i];
    std::printf("%10.4f %6.1f%% %7lld  %-40s %s\n", timing.total_ms / runs, share(timing.total_ms),
                static_cast<long long>(timing.calls / runs), OpLabel(*node).c_str(), node->name().c_str());
  }
  std::vector<std::pair<std::string, std::pair<double, int64_t>>> ops(per_op.begin(), per_op.end());
  std::sort(ops.begin(), ops.end(), [](const auto& a, const auto& b) { return a.second.first > b.second.first; });
  std::printf("%10s %7s %7s  %s\n", "ms/run", "share", "nodes", "op type");
  for (const auto& [op, totals] : ops) {
    std::printf("%10.4f %6.1f%% %7lld  %s\n", totals.first / runs, share(totals.first),
                static_cast<long long>(totals.second), op.c_str());
  }
}


// What a backend hands back from the warm-up and timed runs.
struct Executed {
  std::vector<cpu::NamedTensor> outputs;
  std::vector<double> latencies_ms;  // timed runs only
  std::string launches;              // the kernels line logged at info level
};

// Output files, the per-output summary, the kernels line and (when timed) the latency line.
int ReportOutputs(const RunOptions& options, const Executed& executed) {
  if (!options.output_dir.empty()) {
    std::error_code error;
    std::filesystem::create_directories(options.output_dir, error);  // a new folder, as users expect
    if (!std::filesystem::is_directory(options.output_dir, error)) {
      return ReportError(options.output_dir, IoError(error ? "output folder cannot be created: " + error.message()
                                                           : "exists and is not a folder"));
    }
    for (size_t i = 0; i < executed.outputs.size(); ++i) {
      const auto& output = executed.outputs[i];
      std::string path = (std::filesystem::path(options.output_dir) / ("output_" + std::to_string(i) + ".pb")).string();
      Status status = WriteTensorProtoFile(AsIrTensor(output.tensor), output.name, path);
      if (!status.ok()) return ReportError(path, status);
    }
  }
  for (const auto& output : executed.outputs) std::printf("%s\n", Summary(output).c_str());
  std::vector<double> latencies_ms = executed.latencies_ms;
  std::sort(latencies_ms.begin(), latencies_ms.end());
  double mean = 0;
  for (double ms : latencies_ms) mean += ms / static_cast<double>(latencies_ms.size());
  spdlog::info("{}", executed.launches);
  // With timing requested, a latency line goes to stdout in a fixed format scripts parse.
  if (options.repeat > 1 || options.warmup > 0) {
    std::printf("latency_ms runs=%zu min=%.4f median=%.4f mean=%.4f\n", latencies_ms.size(), latencies_ms.front(),
                latencies_ms[latencies_ms.size() / 2], mean);
  }
  return 0;
}

}  // namespace

void AddRunOptions(CLI::App& command, RunOptions& options) {
  command.add_option("model", options.model, "ONNX model")->required();
  command.add_option("--input", options.feeds.input_files, "NAME=FILE (.pb TensorProto or .npy); repeatable");
  command.add_option("--shape", options.feeds.shapes, "NAME=D1xD2x... for symbolic dims (default 1); repeatable");
  command.add_option("--seed", options.feeds.seed, "Seed for inputs not given (default 0)");
  command.add_option("--output-dir", options.output_dir, "Write output_<i>.pb files here");
  command.add_option("--threads", options.threads, "Threads (default: all cores)")->check(CLI::NonNegativeNumber);
  AddThreadWaitOption(command);
  command.add_option("--warmup", options.warmup, "Untimed runs first (default 0)")->check(CLI::NonNegativeNumber);
  command.add_option("--repeat", options.repeat, "Timed runs; latency min/median/mean is printed (default 1)")
      ->check(CLI::Range(1, 1000000));
  command.add_flag("--op-by-op", options.op_by_op,
                   "Run each fused node's body op by op instead of as one fused kernel (debugging, comparisons)");
  command.add_flag("--profile", options.profile,
                   "Print the time per node (the slowest --profile-top) and per op type over the timed runs");
  command.add_option("--profile-top", options.profile_top, "Nodes --profile lists, slowest first (default 25; 0: all)")
      ->check(CLI::NonNegativeNumber);
  auto* backend = command.add_option("--backend", options.backend, "cpu (default) or cuda (docs/cuda.md)")
                      ->check(CLI::IsMember({"cpu", "cuda"}));
  command.add_flag("--cuda-graph", options.cuda_graph, "With --backend cuda: replay one captured inference as a CUDA Graph")
      ->needs(backend);
}

namespace {

template <typename RunOnce>
Result<Executed> TimeRuns(const RunOptions& options, RunOnce&& run_once) {
  Executed executed;
  for (int i = 0; i < options.warmup + options.repeat; ++i) {
    auto start = std::chrono::steady_clock::now();
    FUSIONOPT_ASSIGN_OR_RETURN(executed.outputs, run_once(i));
    double ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count();
    if (i >= options.warmup) executed.latencies_ms.push_back(ms);
  }
  return executed;
}

// The kernels line: the CPU runtime's counts and layouts, or the CUDA device.
std::string LaunchesLine(api::Session& session, const cpu::RunStats& stats, int64_t winograd_runs,
                         int64_t table_runs, int64_t runs, bool replayed_graph) {
  if (session.backend() == api::Backend::kCuda) {
    return fmt::format("{} kernels launched on {}{}", stats.kernels_launched, session.Description(),
                       replayed_graph ? " (as one CUDA Graph)" : "");
  }
  return fmt::format("{} kernels launched, {} nodes, peak intermediate memory {:.2f} MB, intermediate traffic {:.2f} MB, "
                     "{} activations handed on in convolution layouts, {} convolutions by Winograd F(4x4,3x3), "
                     "{} elementwise programs reading 256-entry tables; idle threads {}",
                     stats.kernels_launched, stats.nodes_executed, stats.peak_intermediate_bytes / 1e6,
                     stats.intermediate_traffic_bytes / 1e6, stats.conv_layout_outputs,
                     winograd_runs / std::max<int64_t>(runs, 1), table_runs / std::max<int64_t>(runs, 1),
                     ThreadWaitDescription());
}

int RunOn(const RunOptions& options, std::unique_ptr<Model> model) {
  const bool cuda = options.backend == "cuda";
  if (cuda && (options.profile || options.op_by_op)) {
    return ReportError(options.model, UsageError("--profile and --op-by-op are for the CPU runtime"));
  }
  api::SessionConfig config;
  config.backend = cuda ? api::Backend::kCuda : api::Backend::kCpu;
  config.threads = options.threads;
  config.fused_kernels = !options.op_by_op;
  config.cuda_graph = options.cuda_graph;
  auto session = api::Session::Create(std::move(model), config);
  if (!session.ok()) return ReportError(options.model, session.status());
  auto feeds = MakeFeeds(**session, options.feeds);
  if (!feeds.ok()) return ReportError(options.model, feeds.status());
  cpu::RunStats stats;
  api::RunCounts counts;
  std::unordered_map<const Node*, cpu::NodeTiming> node_times;
  const int64_t winograd_before = cpu::winograd::RunsSoFar();
  const int64_t tables_before = cpu::FusedProgram::TableRunsSoFar();
  auto executed = TimeRuns(options, [&](int i) {
    if (options.profile && i == options.warmup) stats.node_times = &node_times;
    return (*session)->Run(*feeds, &counts, &stats);
  });
  if (!executed.ok()) return ReportError(options.model, executed.status());
  stats.kernels_launched = counts.kernels_launched;
  executed->launches = LaunchesLine(**session, stats, cpu::winograd::RunsSoFar() - winograd_before,
                                    cpu::FusedProgram::TableRunsSoFar() - tables_before,
                                    options.warmup + options.repeat, counts.replayed_graph);
  int code = ReportOutputs(options, *executed);
  if (code == 0 && options.profile) PrintProfile(node_times, *(*session)->model().graph, options.repeat, options.profile_top);
  return code;
}

}  // namespace

int RunRun(const RunOptions& options) {
  auto model = LoadModel(options.model);
  if (!model.ok()) return ReportError(options.model, model.status());
  return RunOn(options, std::move(*model));
}

}  // namespace fusionopt::cli
