// The measured fusion decisions (verify/fusion_timing.h) as optimizing for `--target cpu` and
// `bench` on the CPU backend use them: timing the fused calls on this CPU, undoing the slower
// ones, and saying so in one line.
#pragma once

#include <vector>

#include "cpu_runtime/engine/session.h"
#include "ir/graph.h"
#include "verify/fusion_timing.h"

namespace fusionopt::api {

// Undoes the fusions of `optimized` whose fused kernels run slower here than their members,
// logging one summary line (how many, and whether measured or read from the cache: info when
// it undid any, else debug) and each one undone (debug).
Result<verify::FusionTimingReport> UndoSlowerFusionsHere(Model& optimized, std::vector<cpu::NamedTensor> feeds,
                                                         int threads);

// "node (function, 1.23 ms fused vs 0.98 ms op by op)" for reports.
std::string DescribeSlowerFusion(const verify::TimedFusion& fusion);

}  // namespace fusionopt::api
