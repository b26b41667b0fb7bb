// Measured fusion decisions for the CPU runtime (`fusionopt MODEL --target cpu`, and every
// `fusionopt bench` on the CPU backend): a fusion whose fused kernel runs slower here than
// its members do is undone, so -O3 never makes a model slower where this CPU runs it.
//
//   optimized model ──two sessions──▶ every fused call as one kernel | every call op by op
//   alternate them over `rounds` rounds of `runs` timed inferences on the same feeds
//   per call: its fastest inference fused vs op by op (the call node's wall time either way)
//   fused > op by op × (1 + margin), and by more than floor_ms, in this measurement and again
//   in a second one of the candidates only  →  inlined (inline_call.h)
//
// Decisions must not follow the noise of a shared host: a neighbour's job only ever adds time,
// so each side's best inference is the figure (a median still moves when most inferences are
// disturbed), and a fusion is undone only when a second, independent measurement agrees.
// Decisions are cached per host, model structure, input shapes, threads and settings in
// <cache>/fusion_timing/ (passes::CacheDirectory(); delete the folder to measure afresh), so
// the same model on the same host is written the same way every time.
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

namespace fusionopt::verify {

struct FusionTimingOptions {
  std::vector<cpu::NamedTensor> feeds;  // one complete input set
  int threads = 0;                      // 0: all cores
  int rounds = 3;                       // alternations of the two sessions
  int runs = 3;                         // timed inferences per session per round
  double margin = 0.10;                 // how much slower a fused kernel may be (noise)
  double floor_ms = 0.02;               // and by how much at least, per inference
  bool use_cache = true;                // read and write decisions under CacheDirectory()
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
  int unconfirmed = 0;              // slower in the first measurement only: kept fused
  std::string cache_path;           // where the decisions are cached; empty when not cached
  bool from_cache = false;          // the decisions were read there, not measured
};

// One line: how many calls were timed, how many undone, and where the decisions came from.
std::string FusionTimingSummary(const FusionTimingReport& report);

// Times every fused call of `optimized` both ways and inlines those slower fused; see above.
Result<FusionTimingReport> UndoSlowerFusions(Model& optimized, const FusionTimingOptions& options);

// The report's JSON form (`--report`'s "fusion_timing" object, bench's JSON).
std::string FusionTimingToJson(const FusionTimingReport& report);

}  // namespace fusionopt::verify
