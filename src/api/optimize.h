// Optimizing a model in memory, as `fusionopt optimize` does: the pass pipeline of a level, the
// fail-safe check, the fusions measured on this CPU and the ONNX Runtime lowering, with the
// report as JSON. The CLI, the C API (include/fusionopt/runtime.h) and through it the Python
// package call this; they add only where the model comes from and where it goes.
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "cpu_runtime/engine/compare.h"
#include "ir/graph.h"
#include "ir/status.h"

namespace fusionopt::api {

struct OptimizeRequest {
  int level = 2;
  std::vector<std::string> only;          // run only these passes
  std::vector<std::string> disabled;      // skip these passes
  std::vector<std::string> pass_options;  // PASS.NAME=VALUE
  // max_members of both horizontal passes (an explicit pass option wins).
  std::optional<int64_t> max_horizontal;
  std::string dump_after;                 // a pass name or "all": write the IR after it
  std::string dump_dir;
  bool check_each_pass = false;
  std::string target = "h100";            // the cost model's profile (passes/cost_model/target_profiles.h)
  bool no_fusion_timing = false;          // with target cpu: keep every fusion untimed
  std::vector<std::string> dims;          // SYMBOL=N sizes of symbolic dims
  bool strict_dims = false;               // a dims symbol the model lacks is an error, not a warning
  // The fail-safe check (verify/fusion_check.h) against the original model.
  bool verify = false;
  int verify_runs = 2;                    // seeded input sets (value-range sets come on top)
  uint64_t verify_seed = 0;
  cpu::Tolerance tolerance;
  // "portable" (fused groups as ai.fusionopt functions any runtime can inline) or "ort" (the
  // groups ONNX Runtime has kernels for written as those; passes/conversion/ort/lower_for_ort.h).
  std::string runtime = "portable";
};

struct OptimizeOutcome {
  std::string report_json;                          // per-pass statistics, every fusion, the checks
  std::map<std::string, int64_t, std::less<>> dims;  // the symbolic dim sizes the passes used
};

// The model as it was before optimizing, for the fail-safe check (the passes rewrite the model
// in place): a file read again, or bytes parsed again.
using OriginalModel = std::function<Result<std::unique_ptr<Model>>()>;

// Optimizes `model` in place. A bad request is an error before the model changes; any later
// error (a pass failing, the fail-safe check finding the model still different after undoing
// what it could: ErrorCode::kMismatch) leaves it part-way, and the caller writes nothing.
// `source` names the model in warnings.
Result<OptimizeOutcome> Optimize(Model& model, const OptimizeRequest& request, const OriginalModel& original,
                                 const std::string& source);

// `dims` restricted to the symbols `model` has. A symbol it lacks is a usage error when
// `strict`; otherwise a warning naming `source`, and the setting is dropped (a CI job passes one
// list of dims to every model it optimizes).
using DimSizes = std::map<std::string, int64_t, std::less<>>;  // passes::SymbolSizes
Result<DimSizes> DimsForModel(const std::string& source, const Model& model, DimSizes dims, bool strict);

}  // namespace fusionopt::api
