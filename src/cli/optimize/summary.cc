#include "cli/optimize/summary.h"

#include "cli/commands.h"

#include <spdlog/spdlog.h>

#include <algorithm>
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
  std::set<std::string> ops;
  for (const auto& [op, count] : before.ops) ops.insert(OneLine(op));  // op types are model text
  for (const auto& [op, count] : after.ops) ops.insert(OneLine(op));
  size_t width = 32;  // the label column fits the longest fused op name
  for (const std::string& op : ops) width = std::max(width, op.size() + 2);
  auto row = [width](const std::string& label, const std::string& a, const std::string& b) {
    spdlog::info("  {:<{}} {:>10} {:>10}", label, width, a, b);
  };
  row("", "before", "after");
  row("nodes", std::to_string(before.nodes), std::to_string(after.nodes));
  row("estimated kernel launches", std::to_string(before.launches), std::to_string(after.launches));
  row("model size (MB)", fmt::format("{:.3f}", before.bytes / 1e6), fmt::format("{:.3f}", after.bytes / 1e6));
  for (const std::string& op : ops) {
    auto count = [&op](const OptimizeSummary& summary) {
      for (const auto& [name, value] : summary.ops) {
        if (OneLine(name) == op) return std::to_string(value);
      }
      return std::string("0");
    };
    row("  " + op, count(before), count(after));
  }
  spdlog::info("wrote {} ({} nodes, {:.3f} MB) in {:.2f} s", OneLine(output), after.nodes, after.bytes / 1e6, seconds);
}

}  // namespace fusionopt::cli
