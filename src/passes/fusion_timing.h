// Measured fusion decisions for the CPU runtime (`fusionopt MODEL --target cpu`, and every
// `fusionopt bench` on the CPU backend): a fusion whose fused kernel runs slower here than
// its members do is undone, so -O3 never makes a model slower where this CPU runs it.
//
//   optimized model ──two sessions──▶ every fused call as one kernel | every call op by op
//   alternate them over `rounds` rounds of `runs` timed inferences on the same feeds
//   per call: median round time fused vs op by op (the call node's wall time either way)
//   fused > op by op × (1 + margin), and by more than floor_ms  →  inlined (inline_call.h)
//
// The cost model decides what to fuse for a GPU roofline; this pass is its check on the CPU
// it runs on. Limits: a call's op-by-op time is that of its body in the op-by-op session,
// whose neighbours run op by op as well (their layouts, not the fused run's); a call that runs
// in a loop body is timed over all its iterations. Calls InlineCall cannot expand stay fused.
#pragma once

#include <string>
#include <vector>

#include "cpu_runtime/engine/session.h"
#include "ir/graph.h"
#include "ir/status.h"

namespace fusionopt::passes {

struct FusionTimingOptions {
  std::vector<cpu::NamedTensor> feeds;  // one complete input set
  int threads = 0;                      // 0: all cores
  int rounds = 3;                       // alternations of the two sessions
  int runs = 3;                         // timed inferences per session per round
  double margin = 0.10;                 // how much slower a fused kernel may be (noise)
  double floor_ms = 0.02;               // and by how much at least, per inference
};

struct TimedFusion {
  std::string node;      // the fused call's name
  std::string function;  // ai.fusionopt::Name
  double fused_ms = 0;   // per inference, median over the rounds
  double members_ms = 0;
};

struct FusionTimingReport {
  int timed_calls = 0;
  std::vector<TimedFusion> undone;  // slower fused than op by op, now inlined
};

// Times every fused call of `optimized` both ways and inlines those slower fused; see above.
Result<FusionTimingReport> UndoSlowerFusions(Model& optimized, const FusionTimingOptions& options);

// The report's JSON form (`--report`'s "fusion_timing" object, bench's JSON).
std::string FusionTimingToJson(const FusionTimingReport& report);

}  // namespace fusionopt::passes
