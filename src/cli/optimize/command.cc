// `fusionopt optimize`: load, run the passes of the chosen level, save.
#include <CLI/CLI.hpp>
#include <spdlog/spdlog.h>

#include <chrono>
#include <filesystem>
#include <iostream>

#include "api/optimize.h"
#include "cli/commands.h"
#include "api/fail_safe.h"
#include "api/measured_fusions.h"
#include "cli/optimize/summary.h"
#include "ir/atomic_file.h"
#include "text_format/text_format.h"
#include "onnx_io/model_io.h"

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

}  // namespace

void AddOptimizeOptions(CLI::App& command, OptimizeOptions& options) {
  command.add_option("model", options.input, "Input ONNX model")->required();
  command.add_option("-o,--output", options.output, "Where to write the optimized model")->required();
  command.add_option("-O,--level", options.request.level, "Optimization level 0-3 (default 2)")
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
  command.add_option("--only", options.request.only, "Run only this pass (repeatable; see --list-passes)");
  command.add_option("--disable", options.request.disabled, "Skip this pass (repeatable)");
  command.add_option("--pass-option", options.request.pass_options, "Set a pass option: PASS.NAME=VALUE (repeatable)");
  command.add_option("--max-horizontal", options.request.max_horizontal,
                     "Most members of one horizontal fusion (both horizontal passes' max_members; default 4)")
      ->check(CLI::Range(int64_t{2}, int64_t{64}));
  command.add_option("--dump-after", options.request.dump_after, "Write the IR text after this pass, or 'all'");
  command.add_option("--dump-dir", options.request.dump_dir, "Folder for --dump-after files (NN-PASS.ir)");
  command.add_option("--report", options.report, "Write per-pass statistics and every fusion as JSON");
  command.add_option("--runtime", options.request.runtime,
                     "What runs the output: portable (default; ai.fusionopt functions any runtime can inline) or ort "
                     "(the groups ONNX Runtime has kernels for written as its com.microsoft ops; docs/ort.md)")
      ->check(CLI::IsMember({"portable", "ort"}));
  command.add_option("--target", options.request.target,
                     "Cost-model target: t4, a100, h100 (default), h200, or cpu (this machine, measured); "
                     "at -O3 it decides every fusion; with cpu, each fused kernel is also timed here and a fusion "
                     "slower than its members undone; with --runtime ort, the execution provider the kernels are "
                     "picked for (cpu: the CPU EP; a GPU: the CUDA EP)");
  command.add_flag("--no-fusion-timing", options.request.no_fusion_timing,
                   "With --target cpu: keep every fusion the cost model chose, untimed");
  command.add_option("--dim", options.request.dims, "Size of a symbolic dim for the cost model (and, with --runtime ort, the key count that picks "
                     "the attention kernel): SYMBOL=N (repeatable; default 1)");
  AddStrictDimsOption(command, options.request.strict_dims);
  command.add_flag("--check-each-pass", options.request.check_each_pass,
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
  command.add_flag("--verify", options.request.verify,
                   "Fail-safe: run original and optimized on seeded inputs (plus large values and -1e4/-inf masks); "
                   "undo each fusion that makes an output differ, and write nothing (exit 5) if it still differs");
  command.add_option("--verify-runs", options.request.verify_runs, "Seeded input sets for --verify (default 2)")
      ->check(CLI::Range(1, 100));
  command.add_option("--verify-seed", options.request.verify_seed, "Seed of --verify's inputs (default 0)");
  command.add_option("--rtol", options.request.tolerance.rtol, "--verify's relative tolerance (default 1e-4)")
      ->check(CLI::NonNegativeNumber);
  command.add_option("--quantization-steps", options.request.tolerance.quantization_steps,
                     "--verify: a quantized model's outputs may also differ by this many steps of their quantization "
                     "(default 2; docs/quantization.md)")
      ->check(CLI::NonNegativeNumber);
  command.add_option("--atol", options.request.tolerance.atol, "--verify's absolute tolerance (default 1e-5)")
      ->check(CLI::NonNegativeNumber);
  command.add_flag("--write-shapes", options.write_shapes,
                   "Record inferred dtypes/shapes of intermediate values as value_info");
}

int RunOptimize(const OptimizeOptions& options) {
  auto start = std::chrono::steady_clock::now();
  auto model = LoadModel(options.input);
  if (!model.ok()) return ReportError(options.input, model.status());
  Status destination = CheckDestination(options, **model);
  if (!destination.ok()) return ReportError(options.output, destination);
  if (!options.emit_cuda.empty() && options.request.runtime == "ort") {
    return ReportError(options.emit_cuda, UsageError("--emit-cuda generates the CUDA plugin's kernels; with --runtime ort "
                                                     "ONNX Runtime runs the model"));
  }
  if (!options.emit_cuda.empty()) {
    Status emit_dir = CheckEmitCudaDir(options.emit_cuda);
    if (!emit_dir.ok()) return ReportError(options.emit_cuda, emit_dir);
  }

  OptimizeSummary before = SummarizeForOptimize(**model);
  // --verify compares against the input file read again: it is never modified.
  auto outcome = api::Optimize(**model, options.request, [&] { return LoadModel(options.input); }, OneLine(options.input));
  if (!outcome.ok()) {
    const Status& status = outcome.status();
    if (status.code() == ErrorCode::kMismatch) {
      return ReportError(options.input, Status(status.code(), status.message() + "; nothing written"));
    }
    return ReportError(options.input, status);
  }
  if (!options.report.empty()) {
    Status written = WriteFileAtomically(options.report, outcome->report_json);
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
  PrintOptimizeSummary(options.input, options.output, options.request.level, before, after, seconds);
  if (!options.emit_cuda.empty()) {
    Status emitted = EmitCuda(**model, options.emit_cuda, outcome->dims, options.cuda_arch);
    if (!emitted.ok()) return ReportError(options.emit_cuda, emitted);
  }
  return 0;
}

}  // namespace fusionopt::cli
