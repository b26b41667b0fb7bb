// `fusionopt optimize`: load, run the passes of the chosen level, save.
#include <CLI/CLI.hpp>
#include <spdlog/spdlog.h>

#include <algorithm>
#include <chrono>
#include <filesystem>
#include <iostream>
#include <map>
#include <nlohmann/json.hpp>

#include "cli/commands.h"
#include "cli/fail_safe.h"
#include "cli/measured_fusions.h"
#include "cli/optimize_summary.h"
#include "ir/atomic_file.h"
#include "text_format/text_format.h"
#include "onnx_io/model_io.h"
#include "passes/lower_for_ort.h"
#include "passes/pipeline.h"

namespace fusionopt::cli {
namespace {

namespace fs = std::filesystem;

bool SameFile(const std::string& a, const std::string& b) {
  std::error_code error;
  return fs::exists(a, error) && fs::exists(b, error) && fs::equivalent(a, b, error);
}

// Refuses destinations that would overwrite the input model or the files it reads from.
Status CheckDestination(const OptimizeOptions& options, const Model& model) {
  if (SameFile(options.input, options.output)) {
    return UsageError("refusing to overwrite the input model; choose another -o path");
  }
  fs::path output_dir = fs::path(options.output).parent_path();
  if (output_dir.empty()) output_dir = ".";
  std::error_code error;
  if (!fs::is_directory(output_dir, error)) {
    return IoError("output folder '" + output_dir.string() + "' does not exist");
  }
  if (fs::is_directory(options.output, error)) return IoError("is a directory");
  std::vector<std::string> written = {options.output};
  if (options.external_data) {
    written.push_back((output_dir / (options.external_name.empty()
                                         ? fs::path(options.output).filename().string() + ".data"
                                         : options.external_name)).string());
  }
  for (const auto& path : written) {
    if (SameFile(options.input, path)) return UsageError("refusing to overwrite the input model");
    for (const auto& location : model.external_data_files) {
      if (SameFile((fs::path(model.base_dir) / location).string(), path)) {
        return UsageError("refusing to overwrite the input's external data file '" + location + "'");
      }
    }
  }
  return Status::Ok();
}

Result<passes::PipelineOptions> PipelineOptionsFrom(const OptimizeOptions& options) {
  passes::PipelineOptions pipeline;
  pipeline.level = options.level;
  pipeline.only = options.only;
  pipeline.disabled = options.disabled;
  pipeline.dump_after = options.dump_after;
  pipeline.dump_dir = options.dump_dir;
  pipeline.check_each_pass = options.check_each_pass;
  pipeline.target = options.target;
  FUSIONOPT_ASSIGN_OR_RETURN(pipeline.dims, passes::ParseDimSettings(options.dims));
  for (const std::string& setting : options.pass_options) {
    size_t dot = setting.find('.');
    size_t equals = setting.find('=');
    if (dot == std::string::npos || equals == std::string::npos || dot == 0 || equals < dot + 2) {
      return UsageError("--pass-option '" + setting + "' is not PASS.NAME=VALUE");
    }
    pipeline.pass_options.Set(setting.substr(0, dot), setting.substr(dot + 1, equals - dot - 1),
                              setting.substr(equals + 1));
  }
  if (options.max_horizontal) {
    for (const char* pass : {"fuse-horizontal-contractions", "fuse-horizontal-elementwise"}) {
      if (!pipeline.pass_options.Find(pass, "max_members")) {
        pipeline.pass_options.Set(pass, "max_members", std::to_string(*options.max_horizontal));
      }
    }
  }
  if (options.runtime == "ort") {
    for (const std::string& pass : passes::PassesOrtRunsBetterWithout()) {
      if (std::find(pipeline.disabled.begin(), pipeline.disabled.end(), pass) == pipeline.disabled.end()) {
        pipeline.disabled.push_back(pass);
        spdlog::debug("--runtime ort: {} left out (ONNX Runtime runs the model faster without it; docs/ort.md)", pass);
      }
    }
    for (const passes::OrtPassOption& setting : passes::PassOptionsForOrt()) {
      if (!pipeline.pass_options.Find(setting.pass, setting.option)) {
        pipeline.pass_options.Set(setting.pass, setting.option, setting.value);
        spdlog::debug("--runtime ort: {}.{}={} (docs/ort.md)", setting.pass, setting.option, setting.value);
      }
    }
  }
  FUSIONOPT_RETURN_IF_ERROR(passes::ValidatePipelineOptions(pipeline));
  return pipeline;
}

// --verify: the optimized model against the input model, re-read (the input file is never
// modified, and the passes rewrote the first copy in place).
Result<passes::FusionCheckReport> VerifyOptimized(const OptimizeOptions& options, const passes::SymbolSizes& dims,
                                                  Model& optimized) {
  FUSIONOPT_ASSIGN_OR_RETURN(auto original, LoadModel(options.input));
  std::vector<std::vector<cpu::NamedTensor>> feeds;
  for (int run = 0; run < options.verify_runs; ++run) {
    FUSIONOPT_ASSIGN_OR_RETURN(auto set, passes::SeededFeeds(*original, dims, options.verify_seed + run));
    feeds.push_back(std::move(set));
  }
  return RunFailSafeCheck(*original, optimized, std::move(feeds), options.tolerance, /*threads=*/0,
                          /*announce_match=*/true);
}

std::string ReportWithChecks(const passes::PipelineReport& report, const std::optional<passes::FusionTimingReport>& timing,
                             const std::optional<passes::FusionCheckReport>& check,
                             const std::optional<passes::OrtLoweringReport>& ort) {
  std::string json = passes::ReportToJson(report);
  if (!check && !timing && !ort) return json;
  nlohmann::json combined = nlohmann::json::parse(json);
  if (timing) combined["fusion_timing"] = nlohmann::json::parse(passes::FusionTimingToJson(*timing));
  if (check) combined["verification"] = nlohmann::json::parse(passes::FusionCheckToJson(*check));
  if (ort) combined["ort_lowering"] = nlohmann::json::parse(passes::OrtLoweringToJson(*ort));
  return combined.dump(2);
}

// --runtime ort: the groups ONNX Runtime has kernels for, written as those kernels.
Result<std::optional<passes::OrtLoweringReport>> LowerForRuntime(const OptimizeOptions& options, Model& optimized) {
  if (options.runtime != "ort") return std::optional<passes::OrtLoweringReport>();
  passes::OrtLoweringOptions lowering{passes::OrtProviderForTarget(options.target), {}};
  FUSIONOPT_ASSIGN_OR_RETURN(lowering.dims, passes::ParseDimSettings(options.dims));
  FUSIONOPT_ASSIGN_OR_RETURN(passes::OrtLoweringReport report, passes::LowerForOrt(optimized, lowering));
  std::map<std::string, int> written;
  for (const passes::OrtLowering& lowered : report.lowered) ++written[lowered.written];
  std::string listed;
  for (const auto& [op, count] : written) listed += (listed.empty() ? "" : ", ") + op + " x" + std::to_string(count);
  spdlog::info("--runtime ort ({}): {} fused groups written as ORT kernels ({}), {} left as functions ORT inlines",
               passes::NameOf(lowering.provider), report.lowered.size(), listed.empty() ? "none" : listed,
               report.kept.size());
  for (const passes::OrtLowering& lowered : report.lowered) {
    if (!lowered.because.empty()) spdlog::debug("--runtime ort: {} as {}: {}", lowered.node, lowered.written, lowered.because);
  }
  for (const passes::OrtKeptGroup& kept : report.kept) {
    spdlog::debug("--runtime ort: kept {} ({}): {}", kept.node, kept.function, kept.reason);
  }
  return std::optional<passes::OrtLoweringReport>(std::move(report));
}

// --target cpu: the fusions slower on this CPU than their members undone (fusion_timing.h).
Result<std::optional<passes::FusionTimingReport>> TimeFusionsForCpu(const OptimizeOptions& options,
                                                                    const passes::SymbolSizes& dims, Model& optimized) {
  if (options.target != "cpu" || options.no_fusion_timing || options.level < 2) {
    return std::optional<passes::FusionTimingReport>();
  }
  // Timing fusionopt's runtime says nothing of ONNX Runtime's: the groups lowered become ORT
  // kernels and the rest ORT inlines, so a fusion undone here would only lose its ORT kernel
  // (the noisy timing had undone ViT's and Whisper's QKV and attention groups at random).
  if (options.runtime == "ort") {
    spdlog::info("fusion timing: skipped with --runtime ort (it times fusionopt's runtime, not ONNX Runtime)");
    return std::optional<passes::FusionTimingReport>();
  }
  FUSIONOPT_ASSIGN_OR_RETURN(auto feeds, passes::SeededFeeds(optimized, dims, options.verify_seed));
  FUSIONOPT_ASSIGN_OR_RETURN(passes::FusionTimingReport report,
                             UndoSlowerFusionsHere(optimized, std::move(feeds), /*threads=*/0));
  return std::optional<passes::FusionTimingReport>(std::move(report));
}

}  // namespace

void AddOptimizeOptions(CLI::App& command, OptimizeOptions& options) {
  command.add_option("model", options.input, "Input ONNX model")->required();
  command.add_option("-o,--output", options.output, "Where to write the optimized model")->required();
  command.add_option("-O,--level", options.level, "Optimization level 0-3 (default 2)")
      ->check(CLI::Range(0, 3));
  command.add_flag("--external-data", options.external_data,
                   "Store large tensors in a side file OUT.data (automatic above 2 GiB)");
  command.add_option("--external-data-threshold", options.external_threshold,
                     "Smallest tensor (bytes) moved to the side file (default 1024)")
      ->check(CLI::Validator(
          [](const std::string& text) {
            bool digits = !text.empty() && text.find_first_not_of("0123456789") == std::string::npos;
            return digits ? std::string() : "must be a number of bytes (0 or more)";
          },
          "BYTES"));
  command.add_option("--external-data-name", options.external_name,
                     "Side file name, in the output's folder (default OUT.data)");
  command.add_option("--only", options.only, "Run only this pass (repeatable; see --list-passes)");
  command.add_option("--disable", options.disabled, "Skip this pass (repeatable)");
  command.add_option("--pass-option", options.pass_options, "Set a pass option: PASS.NAME=VALUE (repeatable)");
  command.add_option("--max-horizontal", options.max_horizontal,
                     "Most members of one horizontal fusion (both horizontal passes' max_members; default 4)")
      ->check(CLI::Range(int64_t{2}, int64_t{64}));
  command.add_option("--dump-after", options.dump_after, "Write the IR text after this pass, or 'all'");
  command.add_option("--dump-dir", options.dump_dir, "Folder for --dump-after files (NN-PASS.ir)");
  command.add_option("--report", options.report, "Write per-pass statistics and every fusion as JSON");
  command.add_option("--runtime", options.runtime,
                     "What runs the output: portable (default; ai.fusionopt functions any runtime can inline) or ort "
                     "(the groups ONNX Runtime has kernels for written as its com.microsoft ops; docs/ort.md)")
      ->check(CLI::IsMember({"portable", "ort"}));
  command.add_option("--target", options.target,
                     "Cost-model target: t4, a100, h100 (default), h200, or cpu (this machine, measured); "
                     "at -O3 it decides every fusion; with cpu, each fused kernel is also timed here and a fusion "
                     "slower than its members undone; with --runtime ort, the execution provider the kernels are "
                     "picked for (cpu: the CPU EP; a GPU: the CUDA EP)");
  command.add_flag("--no-fusion-timing", options.no_fusion_timing,
                   "With --target cpu: keep every fusion the cost model chose, untimed");
  command.add_option("--dim", options.dims, "Size of a symbolic dim for the cost model (and, with --runtime ort, the key count that picks "
                     "the attention kernel): SYMBOL=N (repeatable; default 1)");
  AddStrictDimsOption(command, options.strict_dims);
  command.add_flag("--check-each-pass", options.check_each_pass,
                   "Verify the IR after every pass that changed it (always on in debug builds)");
  command.add_flag("--dump", options.dump, "Print the IR text of the result to stdout");
  CLI::Option* emit_cuda = command.add_option("--emit-cuda", options.emit_cuda,
                     "Also write the generated CUDA C++ of every fused node to this folder: one .cu file per "
                     "kernel (compiles alone with nvcc --ptx) and index.json; symbolic dims take their --dim sizes");
  command.add_option("--cuda-arch", options.cuda_arch,
                     "Compute capability x 10 that --emit-cuda generates for: 80 and up take the tensor-core kernels "
                     "(default: kernels any architecture compiles)")
      ->check(CLI::Range(50, 200))
      ->needs(emit_cuda);
  command.add_flag("--verify", options.verify,
                   "Fail-safe: run original and optimized on seeded inputs (plus large values and -1e4/-inf masks); "
                   "undo each fusion that makes an output differ, and write nothing (exit 5) if it still differs");
  command.add_option("--verify-runs", options.verify_runs, "Seeded input sets for --verify (default 2)")
      ->check(CLI::Range(1, 100));
  command.add_option("--verify-seed", options.verify_seed, "Seed of --verify's inputs (default 0)");
  command.add_option("--rtol", options.tolerance.rtol, "--verify's relative tolerance (default 1e-4)")
      ->check(CLI::NonNegativeNumber);
  command.add_option("--atol", options.tolerance.atol, "--verify's absolute tolerance (default 1e-5)")
      ->check(CLI::NonNegativeNumber);
  command.add_flag("--write-shapes", options.write_shapes,
                   "Record inferred dtypes/shapes of intermediate values as value_info");
}

int RunOptimize(const OptimizeOptions& options) {
  auto start = std::chrono::steady_clock::now();
  auto pipeline = PipelineOptionsFrom(options);
  if (!pipeline.ok()) return ReportError(options.input, pipeline.status());
  auto model = LoadModel(options.input);
  if (!model.ok()) return ReportError(options.input, model.status());
  Status destination = CheckDestination(options, **model);
  if (!destination.ok()) return ReportError(options.output, destination);
  if (!options.emit_cuda.empty() && options.runtime == "ort") {
    return ReportError(options.emit_cuda, UsageError("--emit-cuda generates the CUDA plugin's kernels; with --runtime ort "
                                                     "ONNX Runtime runs the model"));
  }
  if (!options.emit_cuda.empty()) {
    Status emit_dir = CheckEmitCudaDir(options.emit_cuda);
    if (!emit_dir.ok()) return ReportError(options.emit_cuda, emit_dir);
  }
  auto dims = DimsForModel(options.input, **model, pipeline->dims, options.strict_dims);
  if (!dims.ok()) return ReportError(options.input, dims.status());
  pipeline->dims = std::move(*dims);

  OptimizeSummary before = SummarizeForOptimize(**model);
  auto report = passes::RunPipeline(**model, *pipeline);
  if (!report.ok()) return ReportError(options.input, report.status());
  // Verified before timed: a fusion whose kernel is wrong is undone as wrong, never timed.
  std::optional<passes::FusionCheckReport> check;
  if (options.verify) {
    auto verified = VerifyOptimized(options, pipeline->dims, **model);
    if (!verified.ok()) return ReportError(options.input, verified.status());
    if (!verified->matches) {
      Status differs = StillDiffers(*verified);
      return ReportError(options.input, Status(differs.code(), differs.message() + "; nothing written"));
    }
    check = std::move(*verified);
  }
  auto timing = TimeFusionsForCpu(options, pipeline->dims, **model);
  if (!timing.ok()) return ReportError(options.input, timing.status());
  // Last: verification and timing ran the portable groups on fusionopt's runtime, which has no
  // ORT contrib kernels; the lowering itself is checked against ORT by the test suite.
  auto ort = LowerForRuntime(options, **model);
  if (!ort.ok()) return ReportError(options.input, ort.status());
  if (!options.report.empty()) {
    Status written = WriteFileAtomically(options.report, ReportWithChecks(*report, *timing, check, *ort));
    if (!written.ok()) return ReportError(options.report, written);
  }
  if (options.dump) std::cout << PrintModel(**model);

  SaveOptions save;
  save.external_data = options.external_data;
  save.external_threshold_bytes = options.external_threshold;
  save.external_file_name = options.external_name;
  save.write_inferred_value_info = options.write_shapes;
  auto saved = SaveModel(**model, options.output, save);
  if (!saved.ok()) return ReportError(options.output, saved.status());
  if (saved->external_data_forced) {
    spdlog::warn("the model exceeds protobuf's 2 GiB limit; tensor data written to {}", saved->data_file);
  }
  double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  OptimizeSummary after = SummarizeForOptimize(**model);
  before.bytes = FileBytes(options.input) + ExternalBytes(**model);
  after.bytes = saved->model_bytes + saved->external_bytes;
  PrintOptimizeSummary(options.input, options.output, options.level, before, after, seconds);
  if (!options.emit_cuda.empty()) {
    Status emitted = EmitCuda(**model, options.emit_cuda, pipeline->dims, options.cuda_arch);
    if (!emitted.ok()) return ReportError(options.emit_cuda, emitted);
  }
  return 0;
}

}  // namespace fusionopt::cli
