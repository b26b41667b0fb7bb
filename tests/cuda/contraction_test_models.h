// Shared by the contraction family's tests (contraction_test.cc: the plans;
// contraction_abi_test.cc: builds through the C ABI and, with a GPU, results): seeded literals
// and the small models both use.
#pragma once

#include <catch2/catch.hpp>
#include <cuda_runtime.h>
#include <onnx/onnx_pb.h>
#include <cmath>
#include <random>
#include <sstream>
#include "cpu_runtime/engine/session.h"
#include "cuda_runtime/codegen/generate.h"
#include "cuda_runtime/codegen/typed_body.h"
#include "cuda_runtime/compile/nvrtc_compiler.h"
#include "fusionopt/plugin.h"
#include "ir/float16.h"
#include "text_format/text_format.h"
#include "cuda_runtime/library/plan.h"
#include "onnx_io/model_io.h"

using namespace fusionopt;
using namespace fusionopt::cuda;

namespace contraction_test {

// `count` seeded values in [-1, 1] as an IR text literal.
inline std::string Literal(int count, uint32_t seed) {
  std::mt19937 generator(seed);
  std::uniform_real_distribution<float> uniform(-1.0f, 1.0f);
  std::ostringstream text;
  text << "[";
  for (int i = 0; i < count; ++i) text << (i ? ", " : "") << std::round(uniform(generator) * 1000.0f) / 1000.0f;
  return text.str() + "]";
}

inline std::unique_ptr<Model> Parse(const std::string& text) {
  auto model = ParseModel(text);
  INFO(model.status().message());
  REQUIRE(model.ok());
  return std::move(model).value();
}

// The typed body of the main graph's first node.
inline std::unique_ptr<Graph> BodyOf(const Model& model) {
  REQUIRE(model.graph->num_nodes() >= 1);
  auto body = TypedBodyOf(model, *model.graph->nodes().front());
  INFO(body.status().message());
  REQUIRE(body.ok());
  return std::move(body).value();
}

inline ContractionPlan PlanOf(const std::string& text) {
  auto model = Parse(text);
  auto body = BodyOf(*model);
  auto plan = PlanContraction(*body);
  INFO(plan.status().message());
  REQUIRE(plan.ok());
  return std::move(plan).value();
}

inline Status PlanStatus(const std::string& text) {
  auto model = Parse(text);
  auto body = BodyOf(*model);
  return PlanContraction(*body).status();
}

inline std::vector<std::string> OpsOf(const Graph& graph) {
  std::vector<std::string> ops;
  for (const auto& node : graph.nodes()) ops.push_back(node->op_type());
  return ops;
}

// The remainder generated and compiled for sm_80 and sm_90.
inline void ExpectRemainderCompiles(const ContractionPlan& plan) {
  REQUIRE(plan.remainder != nullptr);
  auto program = GenerateKernel(*plan.remainder, "contraction_test_epilogue");
  INFO(program.status().message());
  REQUIRE(program.ok());
  for (int arch : {80, 90}) {
    CompileOptions options;
    options.sm_arch = arch;
    auto compiled = CompileCuda(program->source, program->name, options);
    INFO(compiled.status().message());
    CHECK(compiled.ok());
    if (compiled.ok()) CHECK(compiled->ptx.find(".entry") != std::string::npos);
  }
}

// ---- models

inline std::string SingleNode(const std::string& signature, const std::string& node, int opset = 17) {
  return "ir_version 8\nopset \"\" " + std::to_string(opset) + "\ngraph main " + signature + "\n{\n  " + node + "\n}\n";
}

inline std::string Join(const std::vector<std::string>& names) {
  std::string text;
  for (size_t i = 0; i < names.size(); ++i) text += (i ? ", %" : "%") + names[i];
  return text;
}

// The main graph is one call of ai.fusionopt::Fused on its inputs `inputs` (initializers
// among them are folded into the body as constants); the function's formals have the same
// names, so `body` reads and writes them directly.
inline std::string FusedModel(const std::string& signature, const std::vector<std::string>& inputs,
                       const std::vector<std::string>& outputs, const std::string& body, const std::string& inits = "",
                       int opset = 17) {
  return "ir_version 8\nopset \"\" " + std::to_string(opset) + "\nopset \"ai.fusionopt\" 1\ngraph main " + signature +
         "\n" + inits + "{\n  " + Join(outputs) + " = ai.fusionopt::Fused(" + Join(inputs) + ")\n}\n" +
         "function ai.fusionopt::Fused (" + Join(inputs) + ") -> (" + Join(outputs) + ") opset \"\" " +
         std::to_string(opset) + " {\n" + body + "}\n";
}

// MatMul [2,3,4]·[4,5] (constant B), + bias fed at run time, then `activation` lines writing %y.
inline std::string MatMulBiasModel(const std::string& activation, int opset = 20) {
  return FusedModel("(float[2,3,4] %a, float[5] %bias) -> (float[2,3,5] %y)", {"a", "w", "bias"}, {"y"},
                    "  %t0 = MatMul(%a, %w)\n  %t1 = Add(%t0, %bias)\n" + activation,
                    "  init float[4,5] %w = " + Literal(20, 1) + "\n", opset);
}

const char* const kTanhGelu = "  %y = Gelu(%t1) {approximate: \"tanh\"}\n";
const char* const kErfGelu = R"(  %s2 = Constant() {value: tensor float[] [1.4142135]}
  %one = Constant() {value: tensor float[] [1.0]}
  %half = Constant() {value: tensor float[] [0.5]}
  %d = Div(%t1, %s2)
  %e = Erf(%d)
  %p = Add(%e, %one)
  %m = Mul(%t1, %p)
  %y = Mul(%m, %half)
)";

// relu(conv(x, w, b) + z): the FusedConvAddRelu shape.
inline std::string ConvAddReluModel() {
  return FusedModel(
      "(float[2,4,8,8] %x, float[2,6,8,8] %z) -> (float[2,6,8,8] %y)", {"x", "w", "b", "z"}, {"y"},
      "  %t0 = Conv(%x, %w, %b) {kernel_shape: [3, 3], pads: [1, 1, 1, 1]}\n  %t1 = Add(%t0, %z)\n  %y = Relu(%t1)\n",
      "  init float[6,4,3,3] %w = " + Literal(216, 2) + "\n  init float[6] %b = " + Literal(6, 3) + "\n");
}

// MatMul [3,4]·[4,5], then `epilogue` over %m writing %y; %bias [5] and the residual %r [3,5] are fed
// at run time, %eight is a constant.
inline std::string MatMulEpilogueModel(const std::string& epilogue) {
  return FusedModel("(float[3,4] %a, float[4,5] %b, float[5] %bias, float[3,5] %r) -> (float[3,5] %y)",
                    {"a", "b", "eight", "bias", "r"}, {"y"}, "  %m = MatMul(%a, %b)\n" + epilogue,
                    "  init float[] %eight = [8.0]\n");
}

}  // namespace contraction_test

using namespace contraction_test;
