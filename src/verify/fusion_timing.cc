#include "verify/fusion_timing.h"

#include <fmt/format.h>

#include <algorithm>
#include <chrono>
#include <filesystem>
#include <fstream>
#include <limits>
#include <map>
#include <nlohmann/json.hpp>
#include <set>

#include "cpu_runtime/engine/host_cpu.h"
#include "ir/atomic_file.h"
#include "passes/util/content_hash.h"
#include "passes/cleanup/eliminate_dead_code.h"
#include "verify/fusion_check.h"
#include "passes/util/inline_call.h"
#include "passes/cost_model/target_profiles.h"
#include "shape_inference/shape_inference.h"

namespace fusionopt::verify {

using namespace passes;  // the rewrites it undoes and the profiles it reads are the passes'
namespace {

constexpr int kCacheFormat = 1;

// Per call: its fastest inference so far (ms).
using BestTimes = std::map<const Node*, double>;

// The two sessions, warmed up once, timed as often as the decisions need.
class CallTimer {
 public:
  static Result<CallTimer> Create(const Model& optimized, const FusionTimingOptions& options) {
    cpu::SessionOptions fused_options;
    fused_options.threads = options.threads;
    cpu::SessionOptions op_by_op_options = fused_options;
    op_by_op_options.fused_kernels = false;
    CallTimer timer(options);
    FUSIONOPT_ASSIGN_OR_RETURN(timer.fused_, cpu::Session::Create(optimized, fused_options));
    FUSIONOPT_ASSIGN_OR_RETURN(timer.op_by_op_, cpu::Session::Create(optimized, op_by_op_options));
    for (cpu::Session* session : {timer.fused_.get(), timer.op_by_op_.get()}) {
      FUSIONOPT_RETURN_IF_ERROR(session->Run(options.feeds).status());  // warm-up: primitives built, weights packed
    }
    return timer;
  }

  // `rounds` alternations of `runs` inferences per session; each call's best time both ways.
  Status Measure(const std::vector<Node*>& calls, BestTimes& fused, BestTimes& op_by_op) {
    for (int round = 0; round < options_.rounds; ++round) {
      FUSIONOPT_RETURN_IF_ERROR(Runs(*fused_, calls, fused));
      FUSIONOPT_RETURN_IF_ERROR(Runs(*op_by_op_, calls, op_by_op));
    }
    return Status::Ok();
  }

 private:
  explicit CallTimer(const FusionTimingOptions& options) : options_(options) {}

  Status Runs(cpu::Session& session, const std::vector<Node*>& calls, BestTimes& best) {
    for (int run = 0; run < options_.runs; ++run) {
      std::unordered_map<const Node*, cpu::NodeTiming> node_times;
      cpu::RunStats stats;
      stats.node_times = &node_times;
      FUSIONOPT_RETURN_IF_ERROR(session.Run(options_.feeds, &stats).status());
      for (const Node* call : calls) {
        auto it = node_times.find(call);
        const double ms = it == node_times.end() ? 0.0 : it->second.total_ms;
        auto [entry, added] = best.emplace(call, ms);
        if (!added) entry->second = std::min(entry->second, ms);
      }
    }
    return Status::Ok();
  }

  FusionTimingOptions options_;
  std::unique_ptr<cpu::Session> fused_, op_by_op_;
};

bool SlowerFused(double fused_ms, double members_ms, const FusionTimingOptions& options) {
  return fused_ms > members_ms * (1.0 + options.margin) && fused_ms - members_ms > options.floor_ms;
}

// The calls slower fused in both of two independent measurements, with the second's figures.
Result<std::vector<std::pair<Node*, TimedFusion>>> MeasureSlowerCalls(const Model& optimized,
                                                                      const FusionTimingOptions& options,
                                                                      const std::vector<Node*>& calls,
                                                                      int& unconfirmed) {
  FUSIONOPT_ASSIGN_OR_RETURN(CallTimer timer, CallTimer::Create(optimized, options));
  BestTimes fused, op_by_op;
  FUSIONOPT_RETURN_IF_ERROR(timer.Measure(calls, fused, op_by_op));
  std::vector<Node*> candidates;
  for (Node* call : calls) {
    if (SlowerFused(fused[call], op_by_op[call], options)) candidates.push_back(call);
  }
  std::vector<std::pair<Node*, TimedFusion>> slower;
  if (candidates.empty()) return slower;
  BestTimes fused_again, op_by_op_again;
  FUSIONOPT_RETURN_IF_ERROR(timer.Measure(candidates, fused_again, op_by_op_again));
  for (Node* call : candidates) {
    if (!SlowerFused(fused_again[call], op_by_op_again[call], options)) {
      ++unconfirmed;
      continue;
    }
    slower.push_back({call, TimedFusion{call->name(), std::string(call->domain()) + "::" + call->op_type(),
                                        fused_again[call], op_by_op_again[call]}});
  }
  return slower;
}

uint64_t HashText(uint64_t seed, std::string_view text) {
  return HashBytes(std::span<const uint8_t>(reinterpret_cast<const uint8_t*>(text.data()), text.size()), seed);
}

uint64_t HashValue(uint64_t seed, const Value* value) {
  if (value == nullptr) return HashCombine(seed, 0);
  seed = HashText(seed, value->name());
  seed = HashCombine(seed, static_cast<uint64_t>(value->dtype()));
  if (value->shape()) seed = HashText(seed, ShapeToString(*value->shape()));
  return seed;
}

uint64_t HashGraph(uint64_t seed, const Graph& graph) {
  for (const auto& node : graph.nodes()) {
    seed = HashText(HashText(HashText(seed, node->domain()), node->op_type()), node->name());
    for (const Value* input : node->inputs()) seed = HashValue(seed, input);
    for (const Value* output : node->outputs()) seed = HashValue(seed, output);
    for (const auto& subgraph : node->Subgraphs()) seed = HashGraph(seed, *subgraph);
  }
  return seed;
}

// What the decisions depend on: the model's structure (not its weights' values), the feeds'
// dims, the host, the threads and the settings. Any change measures afresh.
std::string CacheKey(const Model& model, const FusionTimingOptions& options) {
  uint64_t key = HashGraph(kCacheFormat, *model.graph);
  for (const auto& function : model.functions) {
    key = HashText(HashText(key, function->domain), function->name);
    key = HashGraph(key, *function->body);
  }
  for (const cpu::NamedTensor& feed : options.feeds) {
    key = HashText(key, feed.name);
    key = HashCombine(key, static_cast<uint64_t>(feed.tensor.dtype()));
    for (int64_t dim : feed.tensor.dims()) key = HashCombine(key, static_cast<uint64_t>(dim));
  }
  key = HashText(key, cpu::ThisHost().Describe());
  key = HashText(key, fmt::format("{}|{}|{}|{}|{}", options.threads, options.rounds, options.runs, options.margin,
                                  options.floor_ms));
  return fmt::format("{:016x}", key);
}

std::string CachePath(const Model& model, const FusionTimingOptions& options) {
  const std::string directory = CacheDirectory();
  if (!options.use_cache || directory.empty()) return "";
  return (std::filesystem::path(directory) / "fusion_timing" / (CacheKey(model, options) + ".json")).string();
}

// The cached decisions, when the file exists, parses and names only calls the model has.
std::optional<std::vector<std::pair<Node*, TimedFusion>>> ReadDecisions(const std::string& path,
                                                                        const std::vector<Node*>& calls) {
  std::ifstream in(path);
  if (!in) return std::nullopt;
  nlohmann::json cache = nlohmann::json::parse(in, nullptr, /*allow_exceptions=*/false);
  if (!cache.is_object() || cache.value("format", 0) != kCacheFormat || !cache.contains("undone") ||
      !cache["undone"].is_array()) {
    return std::nullopt;
  }
  std::map<std::string, Node*> by_name;
  for (Node* call : calls) by_name.emplace(call->name(), call);
  std::vector<std::pair<Node*, TimedFusion>> decisions;
  for (const nlohmann::json& entry : cache["undone"]) {
    if (!entry.is_object()) return std::nullopt;
    auto call = by_name.find(entry.value("node", ""));
    if (call == by_name.end()) return std::nullopt;
    decisions.push_back({call->second, TimedFusion{call->first, entry.value("function", ""),
                                                   entry.value("fused_ms", 0.0), entry.value("members_ms", 0.0)}});
  }
  return decisions;
}

nlohmann::ordered_json UndoneJson(const FusionTimingReport& report) {
  nlohmann::ordered_json undone = nlohmann::ordered_json::array();
  for (const TimedFusion& fusion : report.undone) {
    undone.push_back({{"node", fusion.node},
                      {"function", fusion.function},
                      {"fused_ms", fusion.fused_ms},
                      {"members_ms", fusion.members_ms}});
  }
  return undone;
}

// A cache that cannot be written is no error: the next run measures again.
void WriteDecisions(const std::string& path, const FusionTimingReport& report) {
  nlohmann::ordered_json cache = {{"format", kCacheFormat},
                                  {"host", cpu::ThisHost().Describe()},
                                  {"timed_calls", report.timed_calls},
                                  {"undone", UndoneJson(report)}};
  std::error_code error;
  std::filesystem::create_directories(std::filesystem::path(path).parent_path(), error);
  if (!error) (void)WriteFileAtomically(path, cache.dump(1) + "\n");
}

}  // namespace

Result<FusionTimingReport> UndoSlowerFusions(Model& optimized, const FusionTimingOptions& options) {
  FusionTimingReport report;
  std::vector<Node*> calls;
  CollectFusedCalls(optimized, *optimized.graph, calls);
  report.timed_calls = static_cast<int>(calls.size());
  if (calls.empty()) return report;
  report.cache_path = CachePath(optimized, options);
  std::optional<std::vector<std::pair<Node*, TimedFusion>>> slower;
  if (!report.cache_path.empty()) slower = ReadDecisions(report.cache_path, calls);
  report.from_cache = slower.has_value();
  if (!slower) {
    FUSIONOPT_ASSIGN_OR_RETURN(slower, MeasureSlowerCalls(optimized, options, calls, report.unconfirmed));
  }
  // The sessions are gone: the graph may change now.
  for (auto& [call, fusion] : *slower) {
    const Function* function = optimized.FindFunction(call->domain(), call->op_type());
    if (function != nullptr && InlineCall(*call->graph(), *call, *function).done()) {
      report.undone.push_back(std::move(fusion));
    }
  }
  if (!report.from_cache && !report.cache_path.empty()) WriteDecisions(report.cache_path, report);
  if (!report.undone.empty()) {
    RemoveUncalledFusedFunctions(optimized);
    InferShapes(optimized);  // function bodies are untyped: the inlined ops' values get their types here
  }
  return report;
}

std::string FusionTimingSummary(const FusionTimingReport& report) {
  std::string source = report.from_cache     ? "decisions cached in " + report.cache_path
                       : report.cache_path.empty() ? std::string("measured, not cached")
                                                   : "measured, cached in " + report.cache_path;
  std::string unconfirmed =
      report.unconfirmed > 0 ? fmt::format(", {} more slower once but not when timed again, kept", report.unconfirmed)
                             : "";
  return fmt::format("fusion timing: {} of {} fused calls slower fused on this CPU, undone{} ({})",
                     report.undone.size(), report.timed_calls, unconfirmed, source);
}

std::string FusionTimingToJson(const FusionTimingReport& report) {
  nlohmann::ordered_json json = {{"timed_calls", report.timed_calls},
                                 {"undone", UndoneJson(report)},
                                 {"unconfirmed", report.unconfirmed},
                                 {"from_cache", report.from_cache},
                                 {"cache", report.cache_path.empty() ? nlohmann::ordered_json(nullptr)
                                                                     : nlohmann::ordered_json(report.cache_path)}};
  return json.dump();
}

}  // namespace fusionopt::verify
