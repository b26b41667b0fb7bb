// `fusionopt inspect MODEL --cuda`: the CUDA backend's plan for a model — which kernel every
// node gets (generated and compiled by NVRTC, or a cuBLASLt/cuDNN call), which nodes are views
// or constants, and which cannot run and why — made in a compile-only plugin context, so it
// needs the plugin library and the toolkit's NVRTC but no GPU. CI uses it to check that
// every model would run.
#include <CLI/CLI.hpp>
#include <nlohmann/json.hpp>

#include <cstdio>
#include <iostream>

#include "cli/bench/bench.h"
#include "cli/commands.h"
#include "cli/feeds.h"
#include "cuda_runtime/backend/cuda_session.h"

namespace fusionopt::cli {
namespace {

using nlohmann::ordered_json;

ordered_json PlanJson(const std::string& path, int arch, const cuda::CudaPlanSummary& plan) {
  ordered_json nodes = ordered_json::array();
  for (const cuda::PlannedNode& node : plan.nodes) {
    nodes.push_back({{"node", node.node},
                     {"op", node.op},
                     {"implementation", node.unsupported.empty() ? ordered_json(node.implementation) : nullptr},
                     {"launches", node.launches},
                     {"unsupported", node.unsupported.empty() ? nullptr : ordered_json(node.unsupported)}});
  }
  ordered_json inlined = ordered_json::array();
  for (const auto& [node, reason] : plan.inlined_because) inlined.push_back({{"node", node}, {"reason", reason}});
  return {{"file", path},
          {"arch", arch},
          {"kernels", plan.kernels},
          {"launches_per_inference", plan.launches_per_inference},
          {"unsupported", plan.unsupported},
          {"fused_nodes_inlined", plan.fused_nodes_inlined},
          {"inlined", inlined},
          {"first_inference", FirstInferenceJson(plan.first_inference)},
          {"peak_intermediate_bytes", plan.peak_intermediate_bytes},
          {"workspace_bytes", plan.workspace_bytes},
          {"nodes", nodes}};
}

void PrintPlan(const cuda::CudaPlanSummary& plan, int arch) {
  std::printf("%-40s %-36s %8s  %s\n", "node", "op", "launches", "implementation");
  for (const cuda::PlannedNode& node : plan.nodes) {
    std::string how = node.unsupported.empty() ? node.implementation : "UNSUPPORTED: " + node.unsupported;
    std::printf("%-40s %-36s %8u  %s\n", node.node.c_str(), node.op.c_str(), node.launches, OneLine(how).c_str());
  }
  for (const auto& [node, reason] : plan.inlined_because) {
    std::printf("fused node %s runs as its body's ops: %s\n", node.c_str(), OneLine(reason).c_str());
  }
  std::printf("sm_%d: %lld kernels, %lld launches per inference, %lld nodes unsupported, %lld fused nodes run as "
              "their body's ops; intermediates peak at %.2f MB, workspace %.2f MB\n",
              arch, static_cast<long long>(plan.kernels), static_cast<long long>(plan.launches_per_inference),
              static_cast<long long>(plan.unsupported), static_cast<long long>(plan.fused_nodes_inlined),
              plan.peak_intermediate_bytes / 1e6, plan.workspace_bytes / 1e6);
  const cuda::FirstInferenceCost& cost = plan.first_inference;
  std::printf("first inference at these sizes: planned in %.2f s, %lld kernels built, %lld programs compiled by NVRTC "
              "and %lld read from the cache (%.2f s)\n",
              cost.plan_seconds, static_cast<long long>(cost.kernels_built), static_cast<long long>(cost.modules_compiled),
              static_cast<long long>(cost.modules_from_cache), cost.compile_seconds);
}

}  // namespace

int RunInspectCuda(const InspectOptions& options, const Model& model) {
  cuda::CudaSessionOptions session_options;
  session_options.device = -1;  // compile-only
  session_options.compile_arch = options.cuda_arch;
  auto session = cuda::CudaSession::Create(model, session_options);
  if (!session.ok()) return ReportError(options.input, session.status());
  FeedOptions feed_options;
  feed_options.shapes = options.shapes;
  auto feeds = MakeFeeds((*session)->inputs(), feed_options);
  if (!feeds.ok()) return ReportError(options.input, feeds.status());
  auto plan = (*session)->Plan(*feeds);
  if (!plan.ok()) return ReportError(options.input, plan.status());
  if (options.json) {
    std::cout << PlanJson(options.input, options.cuda_arch, *plan).dump(2) << "\n";
  } else {
    PrintPlan(*plan, options.cuda_arch);
  }
  if (plan->unsupported > 0) {
    return ReportError(options.input, Unsupported(std::to_string(plan->unsupported) +
                                                  " node(s) have no CUDA kernel (listed above)"));
  }
  return 0;
}

}  // namespace fusionopt::cli
