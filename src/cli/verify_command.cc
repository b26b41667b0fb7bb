// `fusionopt verify`: run two models on the same inputs and compare every output.
#include <CLI/CLI.hpp>
#include <spdlog/spdlog.h>

#include <cmath>

#include "api/session.h"
#include "cli/commands.h"
#include "verify/quantization_steps.h"
#include "cli/thread_wait.h"
#include "cli/feeds.h"
#include "cpu_runtime/engine/compare.h"
#include "onnx_io/model_io.h"

namespace fusionopt::cli {
namespace {

// `value` rounded up to 3 significant digits: a bound printed with %.3g must itself pass. A
// required atol of 1.0004e-05 printed as "1e-05" would say the current atol of 1e-05 passes.
double RoundedUp(double value) {
  if (value <= 0 || !std::isfinite(value)) return value;
  const double scale = std::pow(10.0, std::floor(std::log10(value)) - 2);
  return std::ceil(value / scale) * scale;
}

Result<std::unique_ptr<api::Session>> Prepare(const std::string& path, int threads, bool cuda) {
  FUSIONOPT_ASSIGN_OR_RETURN(auto model, LoadModel(path));
  api::SessionConfig config;
  config.backend = cuda ? api::Backend::kCuda : api::Backend::kCpu;
  config.threads = threads;
  return api::Session::Create(std::move(model), config);
}

std::string OutputNames(const std::vector<cpu::NamedTensor>& outputs) {
  std::string names;
  for (const auto& output : outputs) names += (names.empty() ? "" : ", ") + output.name;
  return names;
}

}  // namespace

void AddVerifyOptions(CLI::App& command, VerifyOptions& options) {
  command.add_option("reference", options.reference, "Reference model (A)")->required();
  command.add_option("candidate", options.candidate, "Model to check against it (B)")->required();
  command.add_option("--rtol", options.tolerance.rtol, "Relative tolerance (default 1e-4)")->check(CLI::NonNegativeNumber);
  command.add_option("--atol", options.tolerance.atol, "Absolute tolerance (default 1e-5)")->check(CLI::NonNegativeNumber);
  command.add_option("--quantization-steps", options.tolerance.quantization_steps,
                     "A quantized model's outputs may also differ by this many steps of their quantization (default 2; "
                     "docs/quantization.md)")
      ->check(CLI::NonNegativeNumber);
  command.add_option("--runs", options.runs, "Runs with different seeded inputs (default 3)")->check(CLI::Range(1, 1000));
  command.add_option("--seed", options.feeds.seed, "Seed for the inputs (default 0)");
  command.add_option("--shape", options.feeds.shapes, "NAME=D1xD2x... for symbolic dims (default 1); repeatable");
  command.add_option("--input", options.feeds.input_files, "NAME=FILE for a fixed input; repeatable");
  command.add_option("--threads", options.threads, "Threads (default: all cores)")->check(CLI::NonNegativeNumber);
  AddThreadWaitOption(command);
  command.add_option("--backend", options.backend,
                     "Where the candidate runs: cpu (default) or cuda; the reference always runs on the CPU runtime")
      ->check(CLI::IsMember({"cpu", "cuda"}));
}

int RunVerify(const VerifyOptions& options) {
  auto reference = Prepare(options.reference, options.threads, /*cuda=*/false);
  if (!reference.ok()) return ReportError(options.reference, reference.status());
  auto candidate = Prepare(options.candidate, options.threads, options.backend == "cuda");
  if (!candidate.ok()) return ReportError(options.candidate, candidate.status());
  const cpu::Tolerance tolerance = verify::ForReference(options.tolerance, (*reference)->model());
  bool all_passed = true;
  for (int run = 0; run < options.runs; ++run) {
    auto feeds = MakeFeeds(**reference, options.feeds, static_cast<uint64_t>(run));
    if (!feeds.ok()) return ReportError(options.reference, feeds.status());
    auto expected = (*reference)->Run(*feeds);
    if (!expected.ok()) return ReportError(options.reference, expected.status());
    auto actual = (*candidate)->Run(*feeds);
    if (!actual.ok()) return ReportError(options.candidate, actual.status());
    if (OutputNames(*expected) != OutputNames(*actual)) {
      return ReportError(options.candidate, Status(ErrorCode::kMismatch, "outputs (" + OutputNames(*actual) +
                                                                           ") differ from the reference's (" +
                                                                           OutputNames(*expected) + ")"));
    }
    for (size_t i = 0; i < expected->size(); ++i) {
      const auto& want = (*expected)[i].tensor;
      const auto& got = (*actual)[i].tensor;
      cpu::Comparison result = cpu::Compare(got, want, tolerance, (*expected)[i].name);
      all_passed = all_passed && result.passed;
      if (!result.same_dtype || !result.same_shape) {
        std::printf("run %d  %-40s FAIL  %s%s vs reference %s%s\n", run, (*expected)[i].name.c_str(),
                    std::string(NameOf(got.dtype())).c_str(), cpu::DimsToString(got.dims()).c_str(),
                    std::string(NameOf(want.dtype())).c_str(), cpu::DimsToString(want.dims()).c_str());
        continue;
      }
      std::printf("run %d  %-40s %s  max_abs=%.3g max_rel=%.3g  passes with atol>=%.3g (rtol %.3g) or rtol>=%.3g (atol %.3g)%s\n",
                  run, (*expected)[i].name.c_str(), result.passed ? "PASS" : "FAIL", result.max_abs_error,
                  result.max_rel_error, RoundedUp(result.required_atol), tolerance.rtol, RoundedUp(result.required_rtol),
                  tolerance.atol + tolerance.QuantizationAllowance((*expected)[i].name, want),
                  result.passed ? "" : fmt::format("  ({} mismatches, first at element {})", result.mismatches,
                                                   result.first_mismatch).c_str());
    }
  }
  if (!all_passed) {
    std::fprintf(stderr, "error: %s: outputs differ from %s beyond %s\n", options.candidate.c_str(),
                 options.reference.c_str(), tolerance.Describe().c_str());
    return static_cast<int>(ErrorCode::kMismatch);
  }
  return 0;
}

}  // namespace fusionopt::cli
