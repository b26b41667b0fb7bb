// The per-node profile of one side of `fusionopt bench` (CPU runtime): the breakdown by fusion
// kind, the roofline (--roofline) and the kernel trace (--trace).
#pragma once

#include <unordered_map>
#include <vector>

#include "cli/bench/side.h"
#include "cpu_runtime/engine/session.h"

namespace fusionopt::cli {

using NodeTimes = std::unordered_map<const Node*, cpu::NodeTiming>;

// What `runs` profiled inferences of one side measured.
struct NodeProfile {
  // Each node's median over the runs, times `runs` (the summed form RooflinePoints divides). A
  // median, not a sum: on a shared host one descheduled call would otherwise put a 0.1 ms kernel
  // at 3 ms and far below its roof.
  NodeTimes median_times;
  // Each node's mean per inference, and the inferences' mean wall time: the breakdown by kind
  // adds up to the latter, as the timed runs' mean does (means add; medians do not).
  std::unordered_map<const Node*, double> mean_ms;
  double inference_mean_ms = 0;
};

// Each node of `side` timed over `runs` inferences (the profiled runs are not the timed ones).
Result<NodeProfile> ProfileNodes(Side& side, const std::vector<cpu::NamedTensor>& feeds, int runs);

struct ProfiledSide {
  const Side& side;
  const NodeTimes& times;
};

// --roofline: both sides' kernels on the roofline of the CPU they were timed on (the `cpu`
// profile; a GPU target's roof would not match CPU timings).
Status WriteRoofline(const BenchOptions& options, const ProfiledSide& original, const ProfiledSide& optimized,
                     const passes::SymbolSizes& symbols, int runs, BenchResult& result);

// One inference of `side` with every kernel it runs recorded (--trace).
Status TraceOne(Side& side, const std::vector<cpu::NamedTensor>& feeds, std::vector<cpu::KernelEvent>& events);

}  // namespace fusionopt::cli
