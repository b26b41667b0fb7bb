// The pass interface (DESIGN.md §7: XLA's Run -> StatusOr<bool changed>, MLIR's named
// options, statistics and match-failure reasons).
//
// A pass rewrites a Model in place and says whether it changed anything; it must not claim a
// change it did not make (the pipeline verifies the IR after every reported change and skips
// the check otherwise). Most passes rewrite one graph at a time: they override RunOnGraph,
// and the default Run calls it on every subgraph (innermost first) and then the main graph.
// Bodies of model-local functions are never rewritten: a fused node's body is its meaning.
#pragma once

#include <cstdint>
#include <limits>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "ir/graph.h"
#include "ir/status.h"
#include "ir/why_not.h"
#include "passes/cost_model/cost_model.h"
#include "passes/fused_function_index.h"

namespace fusionopt::passes {

// A named, typed-by-convention option of a pass: `--pass-option PASS.NAME=VALUE`.
struct PassOptionInfo {
  std::string name;
  std::string default_value;
  std::string help;
};

// Values given on the command line, by pass and option name.
class PassOptions {
 public:
  void Set(const std::string& pass, const std::string& name, const std::string& value);
  std::optional<std::string> Find(std::string_view pass, std::string_view name) const;
  const std::map<std::pair<std::string, std::string>, std::string>& all() const { return values_; }

 private:
  std::map<std::pair<std::string, std::string>, std::string> values_;
};

// Why a candidate was not rewritten; counted per reason, with a few example nodes.
struct Rejection {
  int64_t count = 0;
  std::vector<std::string> examples;  // node names, at most kMaxExamples
  static constexpr size_t kMaxExamples = 5;
};

// One fused node of the result and what it replaced (for --report).
struct FusionRecord {
  std::string pass;
  std::string node;                   // the ai.fusionopt node's name
  std::string function;               // the function it calls
  std::string kind;                   // "elementwise", "contraction_epilogue", "layernorm", ...
  std::vector<std::string> replaced;  // names of the original nodes, in graph order
  // The cost model's prediction (PassContext::JudgeFusion) for the replaced nodes as separate
  // kernels and as this one; NaN when the pass did not ask or a shape was unknown.
  double predicted_separate_s = std::numeric_limits<double>::quiet_NaN();
  double predicted_fused_s = std::numeric_limits<double>::quiet_NaN();
};

// A fusion candidate the cost model refused (at O3), for --report.
struct CostRejection {
  std::vector<std::string> members;  // node names
  double predicted_separate_s = 0;
  double predicted_fused_s = 0;
  std::string reason;
};

struct PassStatistics {
  std::string pass;
  bool changed = false;
  int64_t matches = 0;
  std::map<std::string, Rejection> rejections;  // by reason
  std::map<std::string, int64_t> counters;      // pass-specific ("batchnorms_folded")
  std::vector<CostRejection> cost_rejections;   // candidates JudgeFusion refused
  // Top-level --report sections the pass wrote, by key: a JSON document each (lower-for-ort:
  // "ort_lowering", each group written or kept and why).
  std::map<std::string, std::string> report_sections;
  int64_t nodes_before = 0;
  int64_t nodes_after = 0;
  double milliseconds = 0;
};

class Pass;

// The rejection reason (PassStatistics::rejections key) of every group the cost model refuses.
inline constexpr const char* kCostModelRejection = "cost model: fused not faster than separate";

// What the cost model says about fusing a group (PassContext::JudgeFusion).
struct FusionVerdict {
  WhyNot refused;          // empty: outline the group; else "cost model: fused 3.20 us >= separate 2.90 us"
  bool predicted = false;  // both sides could be costed (every shape known)
  double predicted_separate_s = std::numeric_limits<double>::quiet_NaN();  // members as their own kernels
  double predicted_fused_s = std::numeric_limits<double>::quiet_NaN();     // the group as one kernel

  bool apply() const { return !refused; }
};

// What a running pass may read and report. One context per pass run.
class PassContext {
 public:
  PassContext(Model& model, const Pass& pass, const PassOptions& options, PassStatistics& statistics,
              std::vector<FusionRecord>& fusions)
      : model_(model), pass_(pass), options_(options), statistics_(statistics), fusions_(fusions) {}
  ~PassContext();

  Model& model() { return model_; }

  // Option values: the command line's, else the pass's declared default. A value that does
  // not parse is a usage error naming the option.
  Result<int64_t> IntOption(std::string_view name) const;
  Result<double> FloatOption(std::string_view name) const;

  void Matched(int64_t count = 1) { statistics_.matches += count; }
  // A candidate left alone, and why (never empty): counted under the reason.
  void Rejected(const Node& node, const WhyNot& why);
  // The same for a candidate known by name (one the pass has removed since).
  void Rejected(const std::string& node_name, const WhyNot& why);
  void AddReportSection(const std::string& key, std::string json) { statistics_.report_sections[key] = std::move(json); }
  void Count(const std::string& counter, int64_t amount = 1) { statistics_.counters[counter] += amount; }
  void RecordFusion(FusionRecord record);

  // The pipeline's cost model (its --target and --dim). A context the pipeline did not set up
  // (a pass run by hand) makes one on first use: h100, symbolic dims 1, fusions never gated.
  const CostModel& cost_model();
  // Called by the pipeline: the model to use, and whether JudgeFusion may refuse (level >= 3).
  void UseCostModel(const CostModel& cost_model, bool gate_fusions);

  // Every fusion pass asks this right before OutlineGroup, with the group it is about to
  // outline (pure nodes of one graph, any order):
  //
  //   if (!context.JudgeFusion(members).apply()) continue;  // refused: already reported
  //   OutlineGroup(graph, FusionGroup{members, kind, name}, context);
  //
  // It predicts the members as separate kernels and as one (CostModel::SeparateCost and
  // GroupCost). At O3 a group predicted no faster fused is refused: the verdict says why,
  // and the refusal is reported here (Rejected with kCostModelRejection, and a CostRejection
  // with both predictions and the verdict's reason), so the caller only skips the group.
  // Below O3, or when a shape is unknown, the verdict always applies. An applied verdict's
  // predictions go into the next FusionRecord recorded (RecordFusion, which OutlineGroup
  // calls) whose `replaced` names the same nodes.
  FusionVerdict JudgeFusion(const std::vector<Node*>& members);

  // OutlineGroup's index of the model's fused functions by body, built on first use.
  FusedFunctionIndex& fused_functions();

 private:
  std::string OptionText(std::string_view name) const;

  Model& model_;
  const Pass& pass_;
  const PassOptions& options_;
  PassStatistics& statistics_;
  std::vector<FusionRecord>& fusions_;
  const CostModel* cost_model_ = nullptr;
  std::unique_ptr<CostModel> own_cost_model_;  // when the pipeline gave none
  bool gate_fusions_ = false;
  // The last applied verdict and its members' names (sorted), for the next RecordFusion.
  std::vector<std::string> judged_members_;
  FusionVerdict judged_;
  std::unique_ptr<FusedFunctionIndex> fused_functions_;
};

class Pass {
 public:
  virtual ~Pass() = default;
  virtual std::string_view name() const = 0;
  virtual std::string_view summary() const = 0;
  // The rewrite as before → after in IR text, 2-11 lines (the pass's header states it above the
  // class; --list-passes --verbose prints it).
  virtual std::string_view rewrite() const = 0;
  virtual std::vector<PassOptionInfo> options() const { return {}; }

  // Returns whether the model changed.
  virtual Result<bool> Run(Model& model, PassContext& context);

 protected:
  virtual Result<bool> RunOnGraph(Graph& graph, PassContext& context);
};

// Every graph of the model's main graph tree, subgraphs before the graphs that hold them.
std::vector<Graph*> GraphsInnermostFirst(Graph& graph);

}  // namespace fusionopt::passes
