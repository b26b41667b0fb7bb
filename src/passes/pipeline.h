// Runs a level's passes over a model: selection (--only / --disable), timing and statistics,
// the IR check after every pass that changed the model, and --dump-after snapshots.
#pragma once

#include <functional>
#include <string>
#include <vector>

#include "ir/graph.h"
#include "ir/status.h"
#include "passes/cost_model/cost_model.h"
#include "passes/pass.h"

namespace fusionopt::passes {

struct PipelineOptions {
  int level = 2;
  std::vector<std::string> only;      // when non-empty, run just these (in pipeline order)
  std::vector<std::string> disabled;  // never run these
  // Verify the IR after each pass that changed it (always on in debug builds).
  bool check_each_pass = false;
  // Write the IR text after passes to dump_dir: a pass name, or "all".
  std::string dump_after;
  std::string dump_dir;
  PassOptions pass_options;
  // The cost model's target profile (target_profiles.h) and symbolic dim sizes (`--dim`).
  // Fusion passes consult it at every level; from level 3 it decides (PassContext::JudgeFusion).
  std::string target = std::string(kDefaultTarget);
  SymbolSizes dims;
  // The runtime the model is written for: "" (fusionopt's) or "ort", whose conversion
  // (lower-for-ort) ends the pipeline.
  std::string runtime;
  // Runs on the optimized model before the conversions (the CLI verifies and times the
  // fusions there: fusionopt's runtime has no kernels for what a conversion writes). An error
  // stops the pipeline as it is.
  std::function<Status(Model&)> before_conversion;
};

struct PipelineReport {
  std::vector<PassStatistics> passes;  // one per pass run, in order
  std::vector<FusionRecord> fusions;
  std::string target;  // the cost model's profile
  double milliseconds = 0;
};

// Checks that every pass named by --only/--disable/--pass-option exists and that each option
// is one the pass declares, and that the target is a known profile; a usage error otherwise.
Status ValidatePipelineOptions(const PipelineOptions& options);

// Runs the pipeline. A pass error stops it (the model may be partly rewritten: callers save
// nothing then); a broken invariant is an internal error naming the pass.
Result<PipelineReport> RunPipeline(Model& model, const PipelineOptions& options);

// The report as JSON (the --report format; docs/passes.md documents the keys).
std::string ReportToJson(const PipelineReport& report);

}  // namespace fusionopt::passes
