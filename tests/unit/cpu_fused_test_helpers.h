// Shared by the fused-kernel tests: models outlined the way the O2 passes outline them, run
// fused, op by op, and unfused on seeded inputs, and compared.
#pragma once

#include <catch2/catch.hpp>

#include <cmath>
#include <random>
#include <sstream>
#include <string>
#include <vector>

#include "cpu_runtime/engine/session.h"
#include "ir/float16.h"
#include "pass_test_support.h"

namespace fusionopt::fused_test {

using pass_test::Parse;

// `text` with the named nodes outlined into one fused node (pass_test::OutlineNodes), which
// must succeed.
inline std::unique_ptr<Model> Outlined(const std::string& text, std::vector<std::string> names,
                                       std::string kind = "test") {
  auto model = Parse(text);
  const pass_test::Outlined outlined = pass_test::OutlineNodes(*model, std::move(names), std::move(kind));
  INFO(outlined.why_not);
  REQUIRE(outlined.fused != nullptr);
  return model;
}

inline cpu::RtTensor Random(DataType dtype, std::vector<int64_t> dims, uint32_t seed, float low = -2.0f,
                            float high = 2.0f) {
  cpu::RtTensor tensor = cpu::RtTensor::Allocate(dtype, std::move(dims));
  std::mt19937 generator(seed);
  std::uniform_real_distribution<float> uniform(low, high);
  for (int64_t i = 0; i < tensor.NumElements(); ++i) {
    const float value = uniform(generator);
    if (dtype == DataType::kFloat) tensor.data<float>()[i] = value;
    else if (dtype == DataType::kFloat16) tensor.data<uint16_t>()[i] = FloatToHalf(value);
    else if (dtype == DataType::kBFloat16) tensor.data<uint16_t>()[i] = FloatToBFloat16(value);
    else if (dtype == DataType::kBool) tensor.data<uint8_t>()[i] = value > 0.5f;
    else FAIL("Random: unsupported dtype");
  }
  return tensor;
}

// `count` seeded values in [-1, 1] as an IR text literal list.
inline std::string Literal(int count, uint32_t seed) {
  std::mt19937 generator(seed);
  std::uniform_real_distribution<float> uniform(-1.0f, 1.0f);
  std::ostringstream text;
  text << "[";
  for (int i = 0; i < count; ++i) text << (i ? ", " : "") << std::round(uniform(generator) * 1000.0f) / 1000.0f;
  text << "]";
  return text.str();
}

// An IR text initializer line: `type` %`name` holding `count` seeded values.
inline std::string Init(const std::string& type, const std::string& name, int count, uint32_t seed) {
  return "  init " + type + " %" + name + " = " + Literal(count, seed) + "\n";
}

struct Outcome {
  std::vector<cpu::NamedTensor> outputs;
  cpu::RunStats stats;
};

inline Outcome Run(const Model& model, const std::vector<cpu::NamedTensor>& feeds, bool fused_kernels = true) {
  cpu::SessionOptions options;
  options.fused_kernels = fused_kernels;
  Outcome outcome;
  outcome.outputs = pass_test::RunWithFeeds(model, feeds, options, &outcome.stats);
  return outcome;
}

// uint8 values of `dims` cycling through every byte (a quantized model's activations).
inline cpu::RtTensor Bytes(std::vector<int64_t> dims, uint32_t seed) {
  cpu::RtTensor tensor = cpu::RtTensor::Allocate(DataType::kUint8, std::move(dims));
  for (int64_t i = 0; i < tensor.NumElements(); ++i) tensor.data<uint8_t>()[i] = static_cast<uint8_t>((i * 97 + seed) % 256);
  return tensor;
}

// `model` run with activations handed on in convolution layouts or kept row-major, fused or op by op.
inline Outcome RunLayouts(const Model& model, const std::vector<cpu::NamedTensor>& feeds, bool conv_layouts,
                          bool fused = true) {
  cpu::SessionOptions options;
  options.conv_layouts = conv_layouts;
  options.fused_kernels = fused;
  Outcome outcome;
  outcome.outputs = pass_test::RunWithFeeds(model, feeds, options, &outcome.stats);
  return outcome;
}

inline void RequireIdentical(const std::vector<cpu::NamedTensor>& actual,
                             const std::vector<cpu::NamedTensor>& expected) {
  pass_test::RequireClose(actual, expected, 0.0, 0.0);
}

// The three runs every fusion test compares: the unfused model, and the outlined one fused
// and op by op.
struct Comparison {
  Outcome unfused, fused, op_by_op;
};

inline Comparison Compare(const std::string& text, const std::vector<std::string>& group,
                          const std::vector<cpu::NamedTensor>& feeds, double rtol = 1e-4, double atol = 1e-5) {
  auto original = Parse(text);
  auto outlined = Outlined(text, group);
  REQUIRE(outlined->functions.size() == 1);
  Comparison runs;
  runs.unfused = Run(*original, feeds);
  runs.fused = Run(*outlined, feeds, true);
  runs.op_by_op = Run(*outlined, feeds, false);
  pass_test::RequireClose(runs.fused.outputs, runs.unfused.outputs, rtol, atol);
  // The body runs the same kernels as the unfused graph.
  RequireIdentical(runs.op_by_op.outputs, runs.unfused.outputs);
  REQUIRE(runs.op_by_op.stats.kernels_launched == runs.unfused.stats.kernels_launched);
  return runs;
}

}  // namespace fusionopt::fused_test
