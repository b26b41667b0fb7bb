// `fusionopt inspect MODEL --cost`: every kernel one inference launches, on the roofline of a
// target profile (passes/cost_model/cost_model.h) — FLOPs, bytes to and from global memory, arithmetic
// intensity, memory- or compute-bound, predicted time — and the totals. For an optimized model
// (it calls fused functions) also the original's prediction, each fused node's body ops as
// separate kernels, and the predicted speed-up.
#include <spdlog/fmt/fmt.h>

#include <cmath>
#include <iostream>
#include <nlohmann/json.hpp>

#include "cli/commands.h"
#include "ir/graph.h"
#include "passes/cost_model/cost_model.h"

namespace fusionopt::cli {
namespace {

using nlohmann::ordered_json;
using passes::CostModel;
using passes::KernelCost;
using passes::ModelCost;

// 1234567 -> "1.23 M"; plain below 1000.
std::string Scaled(double value) {
  static const char* kPrefixes[] = {"", " k", " M", " G", " T", " P"};
  int prefix = 0;
  while (std::fabs(value) >= 1000 && prefix < 5) {
    value /= 1000;
    ++prefix;
  }
  return prefix == 0 ? fmt::format("{:.0f}", value) : fmt::format("{:.2f}{}", value, kPrefixes[prefix]);
}

std::string NodeLabel(const passes::CostedKernel& kernel) {
  std::string name = kernel.node->name().empty() ? "(unnamed)" : kernel.node->name();
  return OneLine(kernel.graph.empty() ? name : kernel.graph + "/" + name);
}

// Kernels a cost total covers: the known ones summed plus those of unknown cost.
int64_t KernelCount(const KernelCost& total, int64_t unknown) { return total.launches + unknown; }

// The original's prediction is only comparable when both sides left nothing out.
std::optional<double> Speedup(const ModelCost& cost) {
  if (cost.fused_calls == 0 || cost.unknown_kernels != 0 || cost.original_unknown_kernels != 0) return std::nullopt;
  if (cost.total.seconds <= 0) return std::nullopt;
  return cost.original_total.seconds / cost.total.seconds;
}

std::string SymbolList(const Model& model, const passes::SymbolSizes& dims) {
  std::string text;
  for (const std::string& symbol : passes::SymbolsOf(model)) {
    auto it = dims.find(symbol);
    text += (text.empty() ? "" : ", ") + OneLine(symbol) + "=" + std::to_string(it == dims.end() ? 1 : it->second);
  }
  return text.empty() ? "none" : text;
}

void PrintTable(const Model& model, const CostModel& costs, const ModelCost& cost) {
  const passes::TargetProfile& profile = costs.profile();
  std::cout << fmt::format("target:  {} - {}\n", profile.name, profile.description);
  std::cout << fmt::format("         {}FLOP/s, {}B/s, launch {:.2f} us, ridge {:.1f} FLOP/B, {} registers/thread\n",
                           Scaled(profile.peak_flops), Scaled(profile.bandwidth), profile.launch_overhead_s * 1e6,
                           profile.ridge_intensity(), profile.register_budget_per_thread);
  std::cout << fmt::format("dims:    {} (--dim SYMBOL=N; unlisted symbols are 1)\n", SymbolList(model, costs.symbols()));
  size_t node_width = 24, op_width = 12;
  for (const auto& kernel : cost.kernels) {
    node_width = std::max(node_width, NodeLabel(kernel).size());
    op_width = std::max(op_width, OneLine(OpLabel(*kernel.node)).size());
  }
  std::cout << fmt::format("{:<{}}  {:<{}}  {:>10}  {:>10}  {:>8}  {:<7}  {:>10}\n", "node", node_width, "op", op_width,
                           "FLOPs", "bytes", "FLOP/B", "bound", "time (us)");
  for (const auto& kernel : cost.kernels) {
    const KernelCost& k = kernel.cost;
    if (!k.known) {
      std::cout << fmt::format("{:<{}}  {:<{}}  {:>10}  {:>10}  {:>8}  {:<7}  {:>10}  unknown: {}\n", NodeLabel(kernel),
                               node_width, OneLine(OpLabel(*kernel.node)), op_width, "?", "?", "?", "?", "?",
                               OneLine(k.unknown_reason));
      continue;
    }
    std::string note = k.register_penalty > 1 ? fmt::format("  {} registers: x{:.2f}", k.registers, k.register_penalty) : "";
    std::cout << fmt::format("{:<{}}  {:<{}}  {:>10}  {:>10}  {:>8.2f}  {:<7}  {:>10.2f}{}\n", NodeLabel(kernel),
                             node_width, OneLine(OpLabel(*kernel.node)), op_width, Scaled(k.flops), Scaled(k.bytes()) + "B",
                             k.intensity(), passes::NameOf(costs.BoundOf(k)), k.seconds * 1e6, note);
  }
  std::cout << fmt::format("kernels: {} ({} of unknown cost, not in the totals; {} launch-free nodes not listed)\n",
                           cost.kernels.size(), cost.unknown_kernels, cost.launch_free_nodes);
  std::cout << fmt::format("total:   {}FLOP, {}B, predicted {:.2f} us\n", Scaled(cost.total.flops),
                           Scaled(cost.total.bytes()), cost.total.seconds * 1e6);
  if (cost.fused_calls == 0) return;
  std::cout << fmt::format("original (the {} fused nodes' bodies as separate kernels): {} kernels ({} of unknown cost), "
                           "{}FLOP, {}B, predicted {:.2f} us\n",
                           cost.fused_calls, KernelCount(cost.original_total, cost.original_unknown_kernels),
                           cost.original_unknown_kernels, Scaled(cost.original_total.flops),
                           Scaled(cost.original_total.bytes()), cost.original_total.seconds * 1e6);
  if (std::optional<double> speedup = Speedup(cost)) {
    std::cout << fmt::format("predicted speed-up: {:.2f}x\n", *speedup);
  } else {
    std::cout << "predicted speed-up: not predicted (kernels of unknown cost)\n";
  }
}

ordered_json CostJson(const KernelCost& cost) {
  if (!cost.known) {
    return {{"known", false}, {"unknown_reason", cost.unknown_reason}};
  }
  return {{"known", true},
          {"flops", cost.flops},
          {"bytes_read", cost.bytes_read},
          {"bytes_written", cost.bytes_written},
          {"seconds", cost.seconds}};
}

ordered_json TableJson(const std::string& path, const Model& model, const CostModel& costs, const ModelCost& cost) {
  const passes::TargetProfile& profile = costs.profile();
  ordered_json dims = ordered_json::object();
  for (const std::string& symbol : passes::SymbolsOf(model)) {
    auto it = costs.symbols().find(symbol);
    dims[symbol] = it == costs.symbols().end() ? 1 : it->second;
  }
  ordered_json kernels = ordered_json::array();
  for (const auto& kernel : cost.kernels) {
    const KernelCost& k = kernel.cost;
    ordered_json row = {{"node", kernel.node->name()},
                        {"graph", kernel.graph},
                        {"op", kernel.node->op_type()},
                        {"domain", kernel.node->domain()},
                        {"fused", kernel.fused_call},
                        {"known", k.known}};
    if (k.known) {
      row["flops"] = k.flops;
      row["bytes_read"] = k.bytes_read;
      row["bytes_written"] = k.bytes_written;
      row["intensity"] = k.intensity();
      row["bound"] = passes::NameOf(costs.BoundOf(k));
      row["registers"] = k.registers;
      row["register_penalty"] = k.register_penalty;
      row["seconds"] = k.seconds;
    } else {
      row["unknown_reason"] = k.unknown_reason;
    }
    if (kernel.fused_call) row["original"] = CostJson(kernel.unfused);
    kernels.push_back(std::move(row));
  }
  ordered_json totals = {{"kernels", cost.kernels.size()},
                         {"unknown_kernels", cost.unknown_kernels},
                         {"launch_free_nodes", cost.launch_free_nodes},
                         {"flops", cost.total.flops},
                         {"bytes_read", cost.total.bytes_read},
                         {"bytes_written", cost.total.bytes_written},
                         {"seconds", cost.total.seconds}};
  ordered_json original = nullptr;
  if (cost.fused_calls > 0) {
    original = {{"fused_nodes", cost.fused_calls},
                {"kernels", KernelCount(cost.original_total, cost.original_unknown_kernels)},
                {"unknown_kernels", cost.original_unknown_kernels},
                {"flops", cost.original_total.flops},
                {"bytes_read", cost.original_total.bytes_read},
                {"bytes_written", cost.original_total.bytes_written},
                {"seconds", cost.original_total.seconds}};
  }
  std::optional<double> speedup = Speedup(cost);
  return {{"file", path},
          {"target",
           {{"name", profile.name},
            {"description", profile.description},
            {"peak_flops", profile.peak_flops},
            {"bandwidth", profile.bandwidth},
            {"launch_overhead_s", profile.launch_overhead_s},
            {"register_budget_per_thread", profile.register_budget_per_thread},
            {"measured", profile.measured}}},
          {"dims", dims},
          {"kernels", kernels},
          {"totals", totals},
          {"original", original},
          {"predicted_speedup", speedup ? ordered_json(*speedup) : ordered_json(nullptr)}};
}

}  // namespace

int RunInspectCost(const InspectOptions& options, const Model& model) {
  auto parsed = passes::ParseDimSettings(options.dims);
  if (!parsed.ok()) return ReportError(options.input, parsed.status());
  auto dims = DimsForModel(options.input, model, std::move(*parsed), options.strict_dims);
  if (!dims.ok()) return ReportError(options.input, dims.status());
  auto profile = passes::FindTargetProfile(options.target);
  if (!profile.ok()) return ReportError(options.input, profile.status());
  CostModel costs(model, *profile, *dims);
  ModelCost cost = costs.CostOfModel();
  if (options.json) {
    std::cout << TableJson(options.input, model, costs, cost).dump(2, ' ', false, nlohmann::json::error_handler_t::replace)
              << "\n";
  } else {
    PrintTable(model, costs, cost);
  }
  return 0;
}

}  // namespace fusionopt::cli
