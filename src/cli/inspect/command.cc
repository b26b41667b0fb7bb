// `fusionopt inspect`: a summary of a model as text or JSON.
#include <CLI/CLI.hpp>

#include <cstdio>
#include <iostream>
#include <nlohmann/json.hpp>

#include "cli/commands.h"
#include "ir/model_summary.h"
#include "ir/op_class.h"
#include "onnx_io/model_io.h"
#include "passes/cost_model/cost_model.h"

namespace fusionopt::cli {
namespace {

using nlohmann::ordered_json;

// Shape as JSON: known dims as ints, symbols as strings, unknown as null; null for an
// unknown rank.
ordered_json ShapeJson(const std::optional<Shape>& shape) {
  if (!shape) return nullptr;
  ordered_json dims = ordered_json::array();
  for (const Dim& dim : *shape) {
    if (dim.is_known()) dims.push_back(dim.value);
    else if (dim.is_symbolic()) dims.push_back(dim.symbol);
    else dims.push_back(nullptr);
  }
  return dims;
}

std::string TypeText(const ValueType& type) {
  if (!type.is_tensor()) return "(non-tensor type)";
  std::string text(NameOf(type.dtype));
  return text + (type.shape ? ShapeToString(*type.shape) : "[unknown rank]");
}

ordered_json ValuesJson(const std::vector<ValueSummary>& values) {
  ordered_json out = ordered_json::array();
  for (const auto& value : values) {
    out.push_back({{"name", value.name},
                   {"dtype", value.type.is_tensor() ? std::string(NameOf(value.type.dtype)) : "non-tensor"},
                   {"shape", ShapeJson(value.type.shape)}});
  }
  return out;
}

// "domain:name" of each model-local function, in model order.
std::vector<std::string> FunctionNames(const Model& model) {
  std::vector<std::string> names;
  for (const auto& function : model.functions) names.push_back(function->domain + ":" + function->name);
  return names;
}

ordered_json SummaryJson(const std::string& path, const Model& model, const ModelSummary& summary) {
  ordered_json opsets = ordered_json::array();
  for (const auto& opset : model.opsets) opsets.push_back({{"domain", opset.domain}, {"version", opset.version}});
  ordered_json metadata = ordered_json::object();
  for (const auto& [key, value] : model.metadata) metadata[key] = value;
  return {{"file", path},
          {"ir_version", model.ir_version},
          {"producer_name", model.producer_name},
          {"producer_version", model.producer_version},
          {"domain", model.domain},
          {"model_version", model.model_version},
          {"opsets", opsets},
          {"inputs", ValuesJson(summary.inputs)},
          {"outputs", ValuesJson(summary.outputs)},
          {"node_count", summary.node_count},
          {"total_node_count", summary.total_node_count},
          {"subgraph_count", summary.subgraph_count},
          {"estimated_kernel_launches", EstimateKernelLaunches(model)},
          {"op_histogram", summary.op_histogram},
          {"initializer_count", summary.initializer_count},
          {"parameter_count", summary.parameter_count},
          {"parameter_bytes", summary.parameter_bytes},
          {"external_data_files", model.external_data_files},
          {"functions", FunctionNames(model)},
          {"metadata", metadata}};
}

void PrintText(const std::string& path, const Model& model, const ModelSummary& summary) {
  std::printf("model:      %s\n", path.c_str());
  std::printf("ir version: %lld\n", static_cast<long long>(model.ir_version));
  std::string opsets;
  for (const auto& opset : model.opsets) {
    opsets += (opsets.empty() ? "" : ", ") + (opset.domain.empty() ? std::string("ai.onnx") : opset.domain) +
              " " + std::to_string(opset.version);
  }
  std::printf("opsets:     %s\n", opsets.c_str());
  std::printf("producer:   %s %s\n", model.producer_name.c_str(), model.producer_version.c_str());
  std::printf("inputs:\n");
  for (const auto& value : summary.inputs) std::printf("  %-32s %s\n", value.name.c_str(), TypeText(value.type).c_str());
  std::printf("outputs:\n");
  for (const auto& value : summary.outputs) std::printf("  %-32s %s\n", value.name.c_str(), TypeText(value.type).c_str());
  std::printf("nodes:      %lld (%lld including %lld subgraphs)\n", static_cast<long long>(summary.node_count),
              static_cast<long long>(summary.total_node_count), static_cast<long long>(summary.subgraph_count));
  std::printf("kernels:    %lld estimated launches per inference (views and shape arithmetic launch none)\n",
              static_cast<long long>(EstimateKernelLaunches(model)));
  std::printf("parameters: %lld in %lld initializers, %.3f MB\n", static_cast<long long>(summary.parameter_count),
              static_cast<long long>(summary.initializer_count), summary.parameter_bytes / 1e6);
  for (const auto& file : model.external_data_files) std::printf("external data: %s\n", file.c_str());
  for (const auto& function : FunctionNames(model)) std::printf("function:   %s\n", function.c_str());
  std::printf("ops:\n");
  for (const auto& [domain, ops] : summary.op_histogram) {
    for (const auto& [op, count] : ops) {
      std::string label = domain.empty() ? op : domain + "::" + op;
      std::printf("  %-32s %lld\n", label.c_str(), static_cast<long long>(count));
    }
  }
}

}  // namespace

void AddInspectOptions(CLI::App& command, InspectOptions& options) {
  command.add_option("model", options.input, "ONNX model")->required();
  command.add_flag("--json", options.json, "Print JSON instead of text");
  CLI::Option* cost = command.add_flag(
      "--cost", options.cost, "Per-kernel roofline table: FLOPs, bytes, intensity, bound, predicted time");
  command.add_option("--target", options.target, "Cost-model target: t4, a100, h100 (default), h200, cpu")->needs(cost);
  command.add_option("--dim", options.dims, "Size of a symbolic dim: SYMBOL=N (repeatable; default 1)")->needs(cost);
  AddStrictDimsOption(command, options.strict_dims);
  CLI::Option* cuda = command.add_flag(
      "--cuda", options.cuda,
      "How each node would run on the CUDA backend: kernels generated and compiled, no GPU needed (exit 4 if any node cannot)");
  cuda->excludes(cost);
  command.add_option("--cuda-arch", options.cuda_arch, "Compute capability x 10 to plan --cuda for (default 90)")
      ->check(CLI::Range(50, 200))
      ->needs(cuda);
  command.add_option("--shape", options.shapes, "NAME=D1xD2x... input dims for --cuda (symbolic dims default to 1)")
      ->needs(cuda);
}

int RunInspect(const InspectOptions& options) {
  if (options.cost) {
    // Flags before files: a bad --target or --dim is reported whatever the model.
    Status target = passes::CheckTargetName(options.target);
    if (!target.ok()) return ReportError(options.input, target);
    auto dims = passes::ParseDimSettings(options.dims);
    if (!dims.ok()) return ReportError(options.input, dims.status());
  }
  auto model = LoadModel(options.input);
  if (!model.ok()) return ReportError(options.input, model.status());
  if (options.cost) return RunInspectCost(options, **model);
  if (options.cuda) return RunInspectCuda(options, **model);
  ModelSummary summary = Summarize(**model);
  if (options.json) {
    std::cout << SummaryJson(options.input, **model, summary).dump(2, ' ', false, nlohmann::json::error_handler_t::replace) << "\n";
  } else {
    PrintText(options.input, **model, summary);
  }
  return 0;
}

}  // namespace fusionopt::cli
