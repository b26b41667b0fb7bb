// Shared by the folding passes' tests: parse a model as the loader would leave it (shapes
// inferred), run one pass through the real pipeline (IR verified after it), print the result
// in full, and compare the numbers of two models on the same seeded inputs.
#pragma once

#include <catch2/catch.hpp>

#include <cstdio>
#include <map>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "cpu_runtime/compare.h"
#include "cpu_runtime/inputs.h"
#include "cpu_runtime/session.h"
#include "ir/shape_inference.h"
#include "ir/text_format.h"
#include "passes/pipeline.h"

namespace fusionopt::folding_test {

inline std::unique_ptr<Model> ParseInferred(const std::string& text) {
  auto model = ParseModel(text);
  INFO(model.status().message());
  REQUIRE(model.ok());
  InferShapes(**model);
  return std::move(model).value();
}

// Runs `pass` alone, as `fusionopt -O1 --only PASS --check-each-pass` does; options are
// {name, value} pairs of that pass.
inline passes::PassStatistics RunPass(Model& model, const std::string& pass,
                                      const std::vector<std::pair<std::string, std::string>>& options = {}) {
  passes::PipelineOptions pipeline;
  pipeline.level = 1;
  pipeline.only = {pass};
  pipeline.check_each_pass = true;
  for (const auto& [name, value] : options) pipeline.pass_options.Set(pass, name, value);
  auto report = passes::RunPipeline(model, pipeline);
  INFO(report.status().message());
  REQUIRE(report.ok());
  REQUIRE(report->passes.size() == 1);
  return report->passes.front();
}

// The printed model with every tensor written out.
inline std::string Print(const Model& model) {
  PrintOptions options;
  options.max_literal_elements = -1;
  return PrintModel(model, options);
}

// The canonical form of hand-written text: parsed and printed again.
inline std::string Canonical(const std::string& text) { return Print(*ParseInferred(text)); }

inline int64_t RejectionCount(const passes::PassStatistics& statistics, const std::string& reason) {
  auto it = statistics.rejections.find(reason);
  return it == statistics.rejections.end() ? 0 : it->second.count;
}

inline std::vector<cpu::NamedTensor> RunModel(const Model& model, uint64_t seed) {
  auto session = cpu::Session::Create(model);
  INFO(session.status().message());
  REQUIRE(session.ok());
  std::vector<cpu::NamedTensor> feeds;
  for (const Value* input : (*session)->inputs()) {
    auto dims = cpu::ConcreteDims(*input, {});
    REQUIRE(dims.ok());
    auto tensor = cpu::RandomTensor(input->dtype(), *dims, seed + feeds.size());
    REQUIRE(tensor.ok());
    feeds.push_back({input->name(), *tensor});
  }
  auto outputs = (*session)->Run(feeds);
  INFO(outputs.status().message());
  REQUIRE(outputs.ok());
  return std::move(outputs).value();
}

// `after` computes what `before` computes: every output, on the same seeded inputs, within
// the tolerance (the reference is `before`).
inline void ExpectSameNumbers(const Model& before, const Model& after, cpu::Tolerance tolerance = {1e-5, 1e-6},
                              uint64_t seed = 7) {
  std::vector<cpu::NamedTensor> expected = RunModel(before, seed);
  std::vector<cpu::NamedTensor> actual = RunModel(after, seed);
  REQUIRE(actual.size() == expected.size());
  for (size_t i = 0; i < actual.size(); ++i) {
    INFO("output " << expected[i].name);
    REQUIRE(actual[i].name == expected[i].name);
    cpu::Comparison comparison = cpu::Compare(actual[i].tensor, expected[i].tensor, tolerance);
    INFO("max abs error " << comparison.max_abs_error << ", max rel error " << comparison.max_rel_error);
    CHECK(comparison.same_shape);
    CHECK(comparison.same_dtype);
    CHECK(comparison.passed);
  }
}

// Runs `pass` on `text` and checks the result prints as `expected` and computes the same
// numbers as the original. Returns the pass statistics.
inline passes::PassStatistics ExpectRewrite(const std::string& text, const std::string& pass, const std::string& expected,
                                            const std::vector<std::pair<std::string, std::string>>& options = {},
                                            cpu::Tolerance tolerance = {1e-5, 1e-6}) {
  auto before = ParseInferred(text);
  auto after = ParseInferred(text);
  passes::PassStatistics statistics = RunPass(*after, pass, options);
  CHECK(statistics.changed);
  CHECK(Print(*after) == Canonical(expected));
  ExpectSameNumbers(*before, *after, tolerance);
  return statistics;
}

// A tensor literal of `count` deterministic values spread over [low, high] (varied per
// element and per `seed`, multiples of 1/64 so they print exactly).
inline std::string Spread(int count, int seed, double low = -1.0, double high = 1.0) {
  std::string text = "[";
  for (int i = 0; i < count; ++i) {
    int step = (i * 37 + seed * 11 + 5) % 64;
    double value = low + (high - low) * step / 63.0;
    value = static_cast<double>(static_cast<int64_t>(value * 64)) / 64.0;
    char buffer[32];
    std::snprintf(buffer, sizeof buffer, "%.6f", value);
    text += (i > 0 ? ", " : "") + std::string(buffer);
  }
  return text + "]";
}

// Op types of the main graph's nodes, in order.
inline std::vector<std::string> OpTypes(const Model& model) {
  std::vector<std::string> ops;
  for (const auto& node : model.graph->nodes()) ops.push_back(node->op_type());
  return ops;
}

// Runs `pass` on `text` (weights too large to spell out as expected text), checks the main
// graph's ops afterwards and that the numbers are unchanged. Returns the rewritten model.
inline std::unique_ptr<Model> ExpectRewriteOps(const std::string& text, const std::string& pass,
                                               const std::vector<std::string>& expected_ops,
                                               const std::vector<std::pair<std::string, std::string>>& options = {},
                                               cpu::Tolerance tolerance = {1e-5, 1e-6}) {
  auto before = ParseInferred(text);
  auto after = ParseInferred(text);
  passes::PassStatistics statistics = RunPass(*after, pass, options);
  CHECK(statistics.changed);
  CHECK(OpTypes(*after) == expected_ops);
  ExpectSameNumbers(*before, *after, tolerance);
  return after;
}

// Runs `pass` on `text`, checks it changed nothing (the printed model is the same) and
// rejected a candidate for `reason`.
inline void ExpectUnchanged(const std::string& text, const std::string& pass, const std::string& reason,
                            const std::vector<std::pair<std::string, std::string>>& options = {}) {
  auto model = ParseInferred(text);
  std::string printed = Print(*model);
  passes::PassStatistics statistics = RunPass(*model, pass, options);
  CHECK_FALSE(statistics.changed);
  CHECK(Print(*model) == printed);
  INFO("reason " << reason);
  CHECK(RejectionCount(statistics, reason) >= 1);
}

}  // namespace fusionopt::folding_test
