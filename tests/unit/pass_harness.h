// Shared by the pass tests: run one pass on a model written as IR text, compare the result
// with the expected text, and check numerically that the rewrite changed no output.
#pragma once

#include <catch2/catch.hpp>

#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "cpu_runtime/inputs.h"
#include "cpu_runtime/session.h"
#include "ir/shape_inference.h"
#include "ir/text_format.h"
#include "ir/verifier.h"
#include "passes/pass.h"

namespace pass_test {

// Parsed and shape-inferred, as the pipeline sees a loaded model.
inline std::unique_ptr<fusionopt::Model> Parse(const std::string& text) {
  auto model = fusionopt::ParseModel(text);
  INFO(model.status().message());
  REQUIRE(model.ok());
  fusionopt::InferShapes(**model);
  return std::move(model).value();
}

// The text as the printer writes it after shape inference: what a pass's result is compared
// with, so expected texts need not spell every inferred type.
inline std::string Canonical(const std::string& text) { return fusionopt::PrintModel(*Parse(text)); }

struct PassOutcome {
  std::unique_ptr<fusionopt::Model> model;
  bool changed = false;
  fusionopt::passes::PassStatistics statistics;
  std::string text;  // the result, printed

  int64_t Counter(const std::string& name) const {
    auto it = statistics.counters.find(name);
    return it == statistics.counters.end() ? 0 : it->second;
  }
  int64_t Rejections(const std::string& reason) const {
    auto it = statistics.rejections.find(reason);
    return it == statistics.rejections.end() ? 0 : it->second.count;
  }
};

// Runs pass P once on a model (RunPass: on `text`); the result must pass the IR verifier,
// and the pass's claim of change must match whether the printed model changed.
template <typename P>
PassOutcome RunPassOn(std::unique_ptr<fusionopt::Model> model) {
  PassOutcome outcome;
  outcome.model = std::move(model);
  std::string before = fusionopt::PrintModel(*outcome.model);
  P pass;
  fusionopt::passes::PassOptions options;
  std::vector<fusionopt::passes::FusionRecord> fusions;
  fusionopt::passes::PassContext context(*outcome.model, pass, options, outcome.statistics, fusions);
  auto changed = pass.Run(*outcome.model, context);
  INFO(changed.status().message());
  REQUIRE(changed.ok());
  outcome.changed = *changed;
  fusionopt::InferShapes(*outcome.model);
  fusionopt::Status valid = fusionopt::VerifyModel(*outcome.model);
  INFO(valid.message());
  REQUIRE(valid.ok());
  outcome.text = fusionopt::PrintModel(*outcome.model);
  CHECK(outcome.changed == (outcome.text != before));
  return outcome;
}

template <typename P>
PassOutcome RunPass(const std::string& text) {
  return RunPassOn<P>(Parse(text));
}

// Concrete dims for an input: known sizes as declared, each distinct symbol its own size
// (3, 4, 5, ... in order of first appearance), unknown dims 2.
inline std::vector<int64_t> FeedDims(const fusionopt::Value& input, std::map<std::string, int64_t>& symbols) {
  std::vector<int64_t> dims;
  REQUIRE(input.shape().has_value());
  for (const fusionopt::Dim& dim : *input.shape()) {
    if (dim.is_known()) {
      dims.push_back(dim.value);
    } else if (dim.is_symbolic()) {
      auto [it, added] = symbols.emplace(dim.symbol, 3 + static_cast<int64_t>(symbols.size()));
      dims.push_back(it->second);
    } else {
      dims.push_back(2);
    }
  }
  return dims;
}

inline std::vector<fusionopt::cpu::NamedTensor> RunModel(const fusionopt::Model& model, uint64_t seed,
                                                         fusionopt::cpu::RunStats* stats = nullptr) {
  auto session = fusionopt::cpu::Session::Create(model);
  INFO(session.status().message());
  REQUIRE(session.ok());
  std::map<std::string, int64_t> symbols;
  std::vector<fusionopt::cpu::NamedTensor> feeds;
  for (size_t i = 0; i < (*session)->inputs().size(); ++i) {
    const fusionopt::Value& input = *(*session)->inputs()[i];
    auto tensor = fusionopt::cpu::RandomTensor(input.dtype(), FeedDims(input, symbols), seed + i);
    REQUIRE(tensor.ok());
    feeds.push_back({input.name(), std::move(tensor).value()});
  }
  auto outputs = (*session)->Run(feeds, stats);
  INFO(outputs.status().message());
  REQUIRE(outputs.ok());
  return std::move(outputs).value();
}

// The rewritten model computes exactly what the original did (these passes reorder no
// arithmetic, so equal means bit-equal) on seeded random inputs. Returns the kernel counts
// of both runs, before and after.
inline std::pair<int64_t, int64_t> RequireSameOutputs(const std::string& original_text,
                                                      const fusionopt::Model& rewritten, uint64_t seed = 7) {
  auto original = Parse(original_text);
  fusionopt::cpu::RunStats before_stats, after_stats;
  auto expected = RunModel(*original, seed, &before_stats);
  auto actual = RunModel(rewritten, seed, &after_stats);
  REQUIRE(expected.size() == actual.size());
  for (size_t i = 0; i < expected.size(); ++i) {
    INFO("output " << expected[i].name);
    CHECK(actual[i].name == expected[i].name);
    REQUIRE(actual[i].tensor.dtype() == expected[i].tensor.dtype());
    REQUIRE(actual[i].tensor.dims() == expected[i].tensor.dims());
    for (int64_t k = 0; k < expected[i].tensor.NumElements(); ++k) {
      REQUIRE(actual[i].tensor.ValueAsDouble(k) == expected[i].tensor.ValueAsDouble(k));
    }
  }
  return {before_stats.kernels_launched, after_stats.kernels_launched};
}

}  // namespace pass_test
