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
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "ir/graph.h"
#include "ir/status.h"

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
};

struct PassStatistics {
  std::string pass;
  bool changed = false;
  int64_t matches = 0;
  std::map<std::string, Rejection> rejections;  // by reason
  std::map<std::string, int64_t> counters;      // pass-specific ("batchnorms_folded")
  int64_t nodes_before = 0;
  int64_t nodes_after = 0;
  double milliseconds = 0;
};

class Pass;

// What a running pass may read and report. One context per pass run.
class PassContext {
 public:
  PassContext(Model& model, const Pass& pass, const PassOptions& options, PassStatistics& statistics,
              std::vector<FusionRecord>& fusions)
      : model_(model), pass_(pass), options_(options), statistics_(statistics), fusions_(fusions) {}

  Model& model() { return model_; }

  // Option values: the command line's, else the pass's declared default. A value that does
  // not parse is a usage error naming the option.
  Result<int64_t> IntOption(std::string_view name) const;
  Result<double> FloatOption(std::string_view name) const;

  void Matched(int64_t count = 1) { statistics_.matches += count; }
  void Rejected(const Node& node, const std::string& reason);
  void Count(const std::string& counter, int64_t amount = 1) { statistics_.counters[counter] += amount; }
  void RecordFusion(FusionRecord record);

 private:
  std::string OptionText(std::string_view name) const;

  Model& model_;
  const Pass& pass_;
  const PassOptions& options_;
  PassStatistics& statistics_;
  std::vector<FusionRecord>& fusions_;
};

class Pass {
 public:
  virtual ~Pass() = default;
  virtual std::string_view name() const = 0;
  virtual std::string_view summary() const = 0;
  virtual std::vector<PassOptionInfo> options() const { return {}; }

  // Returns whether the model changed.
  virtual Result<bool> Run(Model& model, PassContext& context);

 protected:
  virtual Result<bool> RunOnGraph(Graph& graph, PassContext& context);
};

// Every graph of the model's main graph tree, subgraphs before the graphs that hold them.
std::vector<Graph*> GraphsInnermostFirst(Graph& graph);

}  // namespace fusionopt::passes
