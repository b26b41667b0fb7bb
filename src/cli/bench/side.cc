// One side of the comparison: see side.h.
#include "cli/bench/side.h"

#include <fmt/format.h>

#include "cpu_runtime/engine/compare.h"
#include "verify/quantization_steps.h"

namespace fusionopt::cli {
namespace {

// `actual` (what `subject` computed) against `expected` (the `reference`'s outputs) with verify's
// tolerances; a mismatch names the first differing output.
Status CompareOutputs(const std::vector<cpu::NamedTensor>& expected, const std::vector<cpu::NamedTensor>& actual,
                      const std::string& subject, const std::string& reference, const cpu::Tolerance& tolerance) {
  if (expected.size() != actual.size()) {
    return Status(ErrorCode::kMismatch, subject + " has " + std::to_string(actual.size()) + " outputs, " + reference +
                                            " " + std::to_string(expected.size()) + "; no speed-up reported");
  }
  for (size_t i = 0; i < expected.size(); ++i) {
    if (expected[i].name != actual[i].name) {
      return Status(ErrorCode::kMismatch, "output " + std::to_string(i) + " is '" + actual[i].name + "', " + reference +
                                              "'s is '" + expected[i].name + "'; no speed-up reported");
    }
    cpu::Comparison result = cpu::Compare(actual[i].tensor, expected[i].tensor, tolerance, expected[i].name);
    if (result.passed) continue;
    std::string detail = !result.same_dtype || !result.same_shape
                             ? "its dtype or shape differs"
                             : fmt::format("max_abs={:.3g} max_rel={:.3g}, beyond {}", result.max_abs_error,
                                           result.max_rel_error, tolerance.Describe());
    return Status(ErrorCode::kMismatch, "output '" + expected[i].name + "' of " + subject + " differs from " +
                                            reference + "'s (" + detail +
                                            "); no speed-up reported (--no-verify benches anyway)");
  }
  return Status::Ok();
}

}  // namespace

double LoopFraction(const BenchOptions& options, int i, std::chrono::steady_clock::time_point started) {
  if (options.time_s > 0) {
    return std::chrono::duration<double>(std::chrono::steady_clock::now() - started).count() / options.time_s;
  }
  return static_cast<double>(i) / options.iters;
}

Result<std::vector<cpu::NamedTensor>> RunOnce(Side& side, const std::vector<cpu::NamedTensor>& feeds,
                                              cpu::RunStats& stats) {
  return side.session->Run(feeds, &side.counts, &stats);  // the CPU's counts are per inference
}

Status CheckOutputsMatch(Side& original, Side& optimized, const std::vector<cpu::NamedTensor>& feeds) {
  // verify's defaults (rtol 1e-4, atol 1e-5), with quantization steps for a quantized model.
  const cpu::Tolerance tolerance = verify::ForReference(cpu::Tolerance(), original.model());
  cpu::RunStats stats;
  FUSIONOPT_ASSIGN_OR_RETURN(auto expected, RunOnce(original, feeds, stats));
  if (original.on_cuda()) {
    FUSIONOPT_ASSIGN_OR_RETURN(auto oracle, cpu::Session::Create(original.model()));
    FUSIONOPT_ASSIGN_OR_RETURN(auto on_cpu, oracle->Run(feeds));
    FUSIONOPT_RETURN_IF_ERROR(CompareOutputs(on_cpu, expected, "the original on CUDA", "the CPU runtime", tolerance));
  }
  FUSIONOPT_ASSIGN_OR_RETURN(auto actual, RunOnce(optimized, feeds, stats));
  return CompareOutputs(expected, actual, "the optimized model", "the original", tolerance);
}

passes::SymbolSizes SymbolsFromFeeds(const Side& side, const std::vector<cpu::NamedTensor>& feeds) {
  passes::SymbolSizes symbols;
  for (const Value* input : side.inputs()) {
    if (!input->shape()) continue;
    for (const auto& feed : feeds) {
      if (feed.name != input->name() || feed.tensor.dims().size() != input->shape()->size()) continue;
      for (size_t d = 0; d < input->shape()->size(); ++d) {
        const Dim& dim = (*input->shape())[d];
        if (dim.is_symbolic()) symbols.emplace(dim.symbol, feed.tensor.dims()[d]);
      }
    }
  }
  return symbols;
}

Result<Side> PrepareSide(std::unique_ptr<Model> model, const BenchOptions& options, bool cuda) {
  api::SessionConfig config;
  config.backend = cuda ? api::Backend::kCuda : api::Backend::kCpu;
  config.threads = options.threads;
  config.cuda_graph = options.cuda_graph;
  Side side;
  FUSIONOPT_ASSIGN_OR_RETURN(side.session, api::Session::Create(std::move(model), config));
  return side;
}

Status PlanAndCount(Side& side, const std::vector<cpu::NamedTensor>& feeds) {
  if (!side.on_cuda()) return Status::Ok();
  FUSIONOPT_ASSIGN_OR_RETURN(side.cuda_plan, side.session->cuda_session()->Plan(feeds));
  cuda::CudaSessionOptions counting;
  counting.count_executed_kernels = true;
  FUSIONOPT_ASSIGN_OR_RETURN(auto counter, cuda::CudaSession::Create(side.model(), counting));
  cuda::CudaRunStats stats;
  FUSIONOPT_RETURN_IF_ERROR(counter->Run(feeds, &stats).status());
  side.kernels_executed = stats.kernels_executed;
  return Status::Ok();
}

Status TimeOne(Side& side, const std::vector<cpu::NamedTensor>& feeds, bool record) {
  auto start = std::chrono::steady_clock::now();
  FUSIONOPT_ASSIGN_OR_RETURN(auto outputs, RunOnce(side, feeds, side.stats));
  double ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count();
  if (side.on_cuda()) ms = side.counts.device_ms;
  if (record) side.latencies_ms.push_back(ms);
  return Status::Ok();
}

Status MeasureInterleaved(const BenchOptions& options, Side& original, Side& optimized,
                          const std::vector<cpu::NamedTensor>& feeds) {
  for (int i = 0; i < options.warmup; ++i) {
    FUSIONOPT_RETURN_IF_ERROR(TimeOne(original, feeds, false).WithContext(options.model));
    FUSIONOPT_RETURN_IF_ERROR(TimeOne(optimized, feeds, false).WithContext("optimized model"));
  }
  const int iterations = options.time_s > 0 ? 0 : options.iters;
  const auto started = std::chrono::steady_clock::now();
  ProgressBar progress;
  for (int i = 0;; ++i) {
    if (options.time_s > 0) {
      double elapsed = std::chrono::duration<double>(std::chrono::steady_clock::now() - started).count();
      if (i > 0 && elapsed >= options.time_s) break;
    } else if (i >= iterations) {
      break;
    }
    Side& first = i % 2 == 0 ? original : optimized;
    Side& second = i % 2 == 0 ? optimized : original;
    FUSIONOPT_RETURN_IF_ERROR(TimeOne(first, feeds, true));
    FUSIONOPT_RETURN_IF_ERROR(TimeOne(second, feeds, true));
    progress.Update(LoopFraction(options, i + 1, started));
  }
  return Status::Ok();
}

SideFigures FiguresOf(const Side& side) {
  SideFigures figures;
  if (side.on_cuda()) {
    figures.kernels = side.counts.kernels_launched;
    figures.kernels_executed = side.kernels_executed;
    figures.nodes = static_cast<int64_t>(side.cuda_plan.nodes.size());
    figures.peak_intermediate_bytes = side.cuda_plan.peak_intermediate_bytes;
    figures.intermediate_traffic_bytes = side.cuda_plan.intermediate_traffic_bytes;
    figures.first_inference = side.cuda_plan.first_inference;
    figures.latency = SummarizeLatencies(side.latencies_ms);
    return figures;
  }
  figures.kernels = side.stats.kernels_launched;
  figures.nodes = side.stats.nodes_executed;
  figures.peak_intermediate_bytes = side.stats.peak_intermediate_bytes;
  figures.intermediate_traffic_bytes = side.stats.intermediate_traffic_bytes;
  figures.latency = SummarizeLatencies(side.latencies_ms);
  return figures;
}

}  // namespace fusionopt::cli
