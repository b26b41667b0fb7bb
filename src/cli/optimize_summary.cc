#include "cli/optimize_summary.h"

#include "cli/commands.h"

#include <spdlog/spdlog.h>

#include <filesystem>
#include <set>

#include "ir/model_summary.h"
#include "ir/op_class.h"

namespace fusionopt::cli {

OptimizeSummary SummarizeForOptimize(const Model& model) {
  OptimizeSummary summary;
  ModelSummary counts = Summarize(model);
  for (const auto& [domain, ops] : counts.op_histogram) {
    for (const auto& [op, count] : ops) summary.ops[domain.empty() ? op : domain + "::" + op] += count;
  }
  summary.nodes = counts.total_node_count;
  summary.launches = EstimateKernelLaunches(model);
  return summary;
}

uint64_t FileBytes(const std::string& path) {
  std::error_code error;
  uintmax_t size = std::filesystem::file_size(path, error);
  return error ? 0 : static_cast<uint64_t>(size);
}

uint64_t ExternalBytes(const Model& model) {
  uint64_t total = 0;
  for (const auto& location : model.external_data_files) {
    total += FileBytes((std::filesystem::path(model.base_dir) / location).string());
  }
  return total;
}

// Through the logger, so -q silences the table and every stderr line keeps its level prefix.
void PrintOptimizeSummary(const std::string& input, const std::string& output, int level,
                          const OptimizeSummary& before, const OptimizeSummary& after, double seconds) {
  spdlog::info("-O{}: {} -> {}", level, OneLine(input), OneLine(output));
  spdlog::info("  {:<40} {:>10} {:>10}", "", "before", "after");
  auto row = [](const std::string& label, long long a, long long b) {
    spdlog::info("  {:<40} {:>10} {:>10}", label, a, b);
  };
  row("nodes", before.nodes, after.nodes);
  row("estimated kernel launches", before.launches, after.launches);
  spdlog::info("  {:<40} {:>10.3f} {:>10.3f}", "model size (MB)", before.bytes / 1e6, after.bytes / 1e6);
  std::set<std::string> ops;
  for (const auto& [op, count] : before.ops) ops.insert(op);
  for (const auto& [op, count] : after.ops) ops.insert(op);
  for (const std::string& op : ops) {
    auto count = [&op](const OptimizeSummary& summary) {
      auto it = summary.ops.find(op);
      return it == summary.ops.end() ? 0LL : static_cast<long long>(it->second);
    };
    row("  " + OneLine(op), count(before), count(after));  // op types are model text
  }
  spdlog::info("wrote {} ({} nodes, {:.3f} MB) in {:.2f} s", OneLine(output), after.nodes, after.bytes / 1e6, seconds);
}

}  // namespace fusionopt::cli
