// The fail-safe check of an optimized model (`fusionopt MODEL -o OUT --verify`, and every
// `fusionopt bench`): run the original and the optimized model on the CPU runtime with the
// same seeded inputs and, when an output differs, find the fusions responsible and undo them.
//
//   original  ──run──▶ reference outputs            (every call op by op: the oracle)
//   optimized ──run──▶ outputs ≠ reference?
//       bisect over the fused calls: a candidate set runs as fused kernels, the rest op by op
//       (their bodies are the original nodes), until the offending calls are isolated
//   offending call  →  inlined (passes/util/inline_call.h): the original nodes are back
//   re-verify the model as it will be written
//
// Besides the seeded inputs (compared within tolerance), value ranges real data has and random
// inputs do not are tried: inputs scaled ×100 (large logits) and inputs with a quarter of their
// elements set to -1e4 or -inf (attention masks). These are checked for new non-finite values
// only — an output element the original computes finite must be finite in the optimized model —
// because reassociation legitimately moves large values by more than the tolerance.
//
// Limits: only differences a fused kernel causes can be undone. A rewrite outside any fused
// call (folding, bypass, horizontal merges of plain ops), or a fused call whose body is itself
// wrong, still differs with every call op by op; the check then reports the difference and the
// model is not repaired. Calls InlineCall cannot expand are reported as not undone.
#pragma once

#include <functional>
#include <map>
#include <string>
#include <vector>

#include "cpu_runtime/engine/compare.h"
#include "cpu_runtime/engine/session.h"
#include "ir/graph.h"
#include "ir/status.h"

namespace fusionopt::verify {

struct FusionCheckOptions {
  cpu::Tolerance tolerance;
  // Complete input sets (at least one), compared within tolerance; the first also seeds the
  // value-range sets.
  std::vector<std::vector<cpu::NamedTensor>> feeds;
  bool check_value_ranges = true;
  int threads = 0;  // 0: all cores
  // Test hook (cpu::SessionOptions::fused_output_hook) for the optimized model's sessions.
  std::function<void(const Node& call, cpu::KernelContext& context)> fused_output_hook;
};

struct UndoneFusion {
  std::string node;                  // the fused call's name
  std::string function;              // ai.fusionopt::Name
  std::vector<std::string> members;  // the original nodes it replaced, now back
  std::string difference;            // what differed with it fused, alone
};

struct FusionCheckReport {
  int fused_calls = 0;     // ai.fusionopt calls in the optimized model
  int input_sets = 0;      // seeded sets plus value-range sets per check
  int checks = 0;          // times the optimized model (or a bisection candidate) was run
  std::string initial_difference;     // empty when the optimized model matched at once
  std::vector<UndoneFusion> undone;   // fusions undone, in graph order
  std::vector<std::string> not_undone;  // offending calls InlineCall could not expand
  bool matches = false;               // the model as it now is matches the original
  std::string remaining_difference;   // when !matches: what still differs
};

// Checks `optimized` against `original` and undoes the fusions that make it differ; see the
// header comment. `optimized` is modified only by inlining offending calls (and dropping
// functions nothing calls any more). An error means a model could not be run at all.
Result<FusionCheckReport> CheckAndRepairFusions(const Model& original, Model& optimized,
                                                const FusionCheckOptions& options);

// Seeded inputs for `model`'s graph inputs: floats uniform in [-1, 1), integers in {0, 1};
// symbolic dims take their size from `symbols`, else 1. One set per seed.
Result<std::vector<cpu::NamedTensor>> SeededFeeds(const Model& model,
                                                  const std::map<std::string, int64_t, std::less<>>& symbols,
                                                  uint64_t seed);

// The calls of ai.fusionopt functions `model` defines, in `graph` and its subgraphs, in order.
void CollectFusedCalls(const Model& model, const Graph& graph, std::vector<Node*>& calls);

// The report's JSON form (`--report`'s "verification" object, bench's JSON).
std::string FusionCheckToJson(const FusionCheckReport& report);

}  // namespace fusionopt::verify
