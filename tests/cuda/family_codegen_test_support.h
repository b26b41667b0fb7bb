// Shared by the row, attention and data-movement/pooling generator tests: typed bodies from IR
// text, the launch-configuration and parameter-order checks every generated program must pass,
// and NVRTC compiles of each program for sm_80 and sm_90.
#pragma once

#include <catch2/catch.hpp>

#include <array>
#include <memory>
#include <string>
#include <vector>

#include "cuda_runtime/codegen/generated_kernel.h"
#include "cuda_runtime/codegen/typed_body.h"
#include "cuda_runtime/compile/nvrtc_compiler.h"
#include "shape_inference/shape_inference.h"
#include "text_format/text_format.h"

namespace fusionopt::cuda::family_test {

inline std::unique_ptr<Model> ParseTyped(const std::string& graph, int opset = 17) {
  auto parsed = ParseModel("ir_version 8\nopset \"\" " + std::to_string(opset) + "\n" + graph);
  INFO(parsed.status().message());
  REQUIRE(parsed.ok());
  std::unique_ptr<Model> model = std::move(parsed).value();
  InferShapes(*model);
  return model;
}

// The model's main graph as a typed body (every value must have a static shape).
inline const Graph& BodyOf(const Model& model) {
  Status typed = CheckFullyTyped(*model.graph);
  INFO(typed.message());
  REQUIRE(typed.ok());
  return *model.graph;
}

// The typed body of the model's only non-Constant node, as the plugin builds it (constant
// arguments folded into initializers).
inline std::unique_ptr<Graph> SingleNodeBody(const Model& model) {
  const Node* op = nullptr;
  for (const auto& node : model.graph->nodes()) {
    if (node->op_type() != "Constant") op = node.get();
  }
  REQUIRE(op != nullptr);
  auto body = TypedBodyOf(model, *op);
  INFO(body.status().message());
  REQUIRE(body.ok());
  return std::move(body).value();
}

// The parameter names of `entry` in `source`, in order.
inline std::vector<std::string> ParameterNames(const std::string& source, const std::string& entry) {
  const size_t open = source.find(entry + "(");
  REQUIRE(open != std::string::npos);
  const size_t close = source.find(')', open);
  std::vector<std::string> names;
  std::string list = source.substr(open + entry.size() + 1, close - open - entry.size() - 1);
  size_t start = 0;
  while (start < list.size()) {
    size_t comma = list.find(',', start);
    if (comma == std::string::npos) comma = list.size();
    std::string part = list.substr(start, comma - start);
    const size_t last = part.find_last_not_of(" \n");
    const size_t first = part.find_last_of(" *", last);
    if (last != std::string::npos) names.push_back(part.substr(first + 1, last - first));
    start = comma + 1;
  }
  return names;
}

inline uint64_t Product(const std::array<uint32_t, 3>& dims) {
  return uint64_t{dims[0]} * dims[1] * dims[2];
}

// Launch configurations a device accepts without opt-in, and one extern "C" entry per kernel.
inline void RequireSaneLaunch(const GeneratedProgram& program) {
  REQUIRE_FALSE(program.kernels.empty());
  CHECK_FALSE(program.description.empty());
  for (const GeneratedKernel& kernel : program.kernels) {
    INFO(kernel.entry);
    CHECK(Product(kernel.block) >= 1);
    CHECK(Product(kernel.block) <= 1024);
    CHECK(Product(kernel.block) % 32 == 0);
    CHECK(kernel.grid[0] >= 1);
    CHECK(kernel.grid[1] >= 1);
    CHECK(kernel.grid[2] >= 1);
    CHECK(kernel.grid[1] <= 65535);
    CHECK(kernel.shared_bytes <= 48 * 1024);
    CHECK(program.source.find("extern \"C\" __global__ void __launch_bounds__") != std::string::npos);
    CHECK(program.source.find(") " + kernel.entry + "(") != std::string::npos);
  }
}

// Compiles with NVRTC for sm_80 and sm_90; each entry must be in the PTX.
inline void RequireCompiles(const GeneratedProgram& program) {
  for (int arch : {80, 90}) {
    CompileOptions options;
    options.sm_arch = arch;
    Result<CompiledModule> module = CompileCuda(program.source, program.name, options);
    INFO("sm_" << arch << "\n" << program.source);
    INFO(module.status().message());
    REQUIRE(module.ok());
    for (const GeneratedKernel& kernel : program.kernels) {
      CHECK(module.value().ptx.find(".entry " + kernel.entry) != std::string::npos);
    }
  }
}

inline void RequireGood(const GeneratedProgram& program) {
  RequireSaneLaunch(program);
  RequireCompiles(program);
}

// `status` is Unsupported and its message contains `reason`.
inline void RequireDeclined(const Status& status, const std::string& reason) {
  INFO(status.message());
  REQUIRE(status.code() == ErrorCode::kUnsupported);
  CHECK(status.message().find(reason) != std::string::npos);
}

}  // namespace fusionopt::cuda::family_test
