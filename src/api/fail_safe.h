// Running the fail-safe check (verify/fusion_check.h), shared by optimizing with verification
// (the CLI's `--verify`, the C API's and Python's `verify`) and `bench`: running it, logging
// what it found and undid, and the test hook.
#pragma once

#include <string>
#include <vector>

#include "cpu_runtime/engine/session.h"
#include "ir/graph.h"
#include "verify/fusion_check.h"

namespace fusionopt::api {

// Environment variable naming a fused call whose CPU kernel output is deliberately perturbed
// (+1 on every element of its first output). A test hook: it lets the test suite plant a wrong
// fused kernel and watch the check catch it. It affects only the check's own runs, never what
// is written.
inline constexpr const char* kPlantWrongKernelVariable = "FUSIONOPT_TEST_PLANT_WRONG_FUSED_KERNEL";

// Runs the check of `optimized` against `original` on `feeds` and logs the outcome when the
// model matches: a line when it matched at once (info when `announce_match`, else debug: bench
// says so on stdout), else what differed and a warning per undone fusion. A model that still
// differs is logged by nobody here: the caller reports it as its one error line (StillDiffers).
Result<verify::FusionCheckReport> RunFailSafeCheck(const Model& original, Model& optimized,
                                                   std::vector<std::vector<cpu::NamedTensor>> feeds,
                                                   const cpu::Tolerance& tolerance, int threads, bool announce_match);

// The status to report when the model still differs after the check undid what it could: the
// difference, how many fusions were undone, and the offending calls that could not be.
Status StillDiffers(const verify::FusionCheckReport& report);

}  // namespace fusionopt::api
