#include "passes/fusion_timing.h"

#include <algorithm>
#include <map>
#include <nlohmann/json.hpp>

#include "passes/eliminate_dead_code.h"
#include "passes/fusion_check.h"
#include "passes/inline_call.h"
#include "shape_inference/shape_inference.h"

namespace fusionopt::passes {
namespace {

using CallTimes = std::map<const Node*, std::vector<double>>;  // per call: ms per inference, per round

// `runs` timed inferences of `session` (after the warm-up the caller did); each call's mean
// wall time per inference joins `times`.
Status TimeRound(cpu::Session& session, const FusionTimingOptions& options, const std::vector<Node*>& calls,
                 CallTimes& times) {
  std::unordered_map<const Node*, cpu::NodeTiming> node_times;
  cpu::RunStats stats;
  stats.node_times = &node_times;
  for (int run = 0; run < options.runs; ++run) FUSIONOPT_RETURN_IF_ERROR(session.Run(options.feeds, &stats).status());
  for (const Node* call : calls) {
    auto it = node_times.find(call);
    times[call].push_back(it == node_times.end() ? 0.0 : it->second.total_ms / options.runs);
  }
  return Status::Ok();
}

double Median(std::vector<double> values) {
  std::sort(values.begin(), values.end());
  return values.empty() ? 0.0 : values[values.size() / 2];
}

// Both sessions alternated; each call's median round time fused and op by op.
Status TimeCalls(const Model& optimized, const FusionTimingOptions& options, const std::vector<Node*>& calls,
                 CallTimes& fused, CallTimes& op_by_op) {
  cpu::SessionOptions fused_options;
  fused_options.threads = options.threads;
  cpu::SessionOptions op_by_op_options = fused_options;
  op_by_op_options.fused_kernels = false;
  FUSIONOPT_ASSIGN_OR_RETURN(auto fused_session, cpu::Session::Create(optimized, fused_options));
  FUSIONOPT_ASSIGN_OR_RETURN(auto op_by_op_session, cpu::Session::Create(optimized, op_by_op_options));
  for (cpu::Session* session : {fused_session.get(), op_by_op_session.get()}) {
    FUSIONOPT_RETURN_IF_ERROR(session->Run(options.feeds).status());  // warm-up: primitives built, weights packed
  }
  for (int round = 0; round < options.rounds; ++round) {
    FUSIONOPT_RETURN_IF_ERROR(TimeRound(*fused_session, options, calls, fused));
    FUSIONOPT_RETURN_IF_ERROR(TimeRound(*op_by_op_session, options, calls, op_by_op));
  }
  return Status::Ok();
}

}  // namespace

Result<FusionTimingReport> UndoSlowerFusions(Model& optimized, const FusionTimingOptions& options) {
  FusionTimingReport report;
  std::vector<Node*> calls;
  CollectFusedCalls(optimized, *optimized.graph, calls);
  report.timed_calls = static_cast<int>(calls.size());
  if (calls.empty()) return report;
  CallTimes fused, op_by_op;
  FUSIONOPT_RETURN_IF_ERROR(TimeCalls(optimized, options, calls, fused, op_by_op));
  // The sessions are gone: the graph may change now.
  for (Node* call : calls) {
    const double fused_ms = Median(fused[call]), members_ms = Median(op_by_op[call]);
    if (fused_ms <= members_ms * (1.0 + options.margin) || fused_ms - members_ms <= options.floor_ms) continue;
    const Function* function = optimized.FindFunction(call->domain(), call->op_type());
    TimedFusion slower{call->name(), std::string(call->domain()) + "::" + call->op_type(), fused_ms, members_ms};
    if (function != nullptr && InlineCall(*call->graph(), *call, *function).done()) {
      report.undone.push_back(std::move(slower));
    }
  }
  if (!report.undone.empty()) {
    RemoveUncalledFusedFunctions(optimized);
    InferShapes(optimized);  // function bodies are untyped: the inlined ops' values get their types here
  }
  return report;
}

std::string FusionTimingToJson(const FusionTimingReport& report) {
  nlohmann::ordered_json undone = nlohmann::ordered_json::array();
  for (const TimedFusion& fusion : report.undone) {
    undone.push_back({{"node", fusion.node},
                      {"function", fusion.function},
                      {"fused_ms", fusion.fused_ms},
                      {"members_ms", fusion.members_ms}});
  }
  nlohmann::ordered_json json = {{"timed_calls", report.timed_calls}, {"undone", undone}};
  return json.dump();
}

}  // namespace fusionopt::passes
