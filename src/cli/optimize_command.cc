// `fusionopt optimize`: load, run the passes of the chosen level, save.
#include <CLI/CLI.hpp>
#include <spdlog/spdlog.h>

#include <chrono>
#include <filesystem>
#include <iostream>

#include "cli/commands.h"
#include "ir/text_format.h"
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
  command.add_flag("--dump", options.dump, "Print the IR text of the result to stdout");
  command.add_flag("--write-shapes", options.write_shapes,
                   "Record inferred dtypes/shapes of intermediate values as value_info");
}

int RunOptimize(const OptimizeOptions& options) {
  auto start = std::chrono::steady_clock::now();
  auto model = LoadModel(options.input);
  if (!model.ok()) return ReportError(options.input, model.status());
  Status destination = CheckDestination(options, **model);
  if (!destination.ok()) return ReportError(options.output, destination);

  if (options.dump) std::cout << PrintModel(**model);

  SaveOptions save;
  save.external_data = options.external_data;
  save.external_threshold_bytes = options.external_threshold;
  save.external_file_name = options.external_name;
  save.write_inferred_value_info = options.write_shapes;
  auto report = SaveModel(**model, options.output, save);
  if (!report.ok()) return ReportError(options.output, report.status());
  if (options.level > 0) {
    spdlog::warn("no passes exist yet for -O{}; the model was written as with -O0", options.level);
  }
  if (report->external_data_forced) {
    spdlog::warn("the model exceeds protobuf's 2 GiB limit; tensor data written to {}",
                 report->data_file);
  }
  double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  spdlog::info("wrote {} ({} nodes, {:.2f} MB{}) in {:.2f} s", options.output,
               (*model)->graph->num_nodes(), report->model_bytes / 1e6,
               report->external_data ? fmt::format(" + {:.2f} MB in {}", report->external_bytes / 1e6,
                                                   report->data_file)
                                     : "",
               seconds);
  return 0;
}

}  // namespace fusionopt::cli
