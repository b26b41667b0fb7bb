// Shared by the folding passes' tests: run one pass through the real pipeline on a model as the
// loader would leave it, compare the result, printed in full, with the expected text, and
// compare the numbers of the two models on the same seeded inputs (every open dim 1, as
// `fusionopt run` feeds a model).
#pragma once

#include <catch2/catch.hpp>

#include <cstdint>
#include <cstdio>
#include <memory>
#include <string>
#include <vector>

#include "cpu_runtime/engine/compare.h"
#include "pass_test_support.h"

namespace fusionopt::folding_test {

using namespace fusionopt::pass_test;

inline const OpenDims kEveryOpenDimOne{.symbols = {}, .other_symbols = 1, .unnamed = 1, .distinct_symbols = false};

// Runs `pass` on `text` and checks the result prints as `expected` and computes the same
// numbers as the original. Returns the pass statistics.
inline passes::PassStatistics ExpectRewrite(const std::string& text, const std::string& pass, const std::string& expected,
                                            const Options& options = {}, cpu::Tolerance tolerance = {1e-5, 1e-6}) {
  Rewritten rewritten = ExpectRewriteTo(text, pass, expected, options);
  ExpectSameOutputs(*rewritten.original, *rewritten.model, kEveryOpenDimOne, tolerance);
  return rewritten.run.statistics;
}

// Runs `pass` on `text` (weights too large to spell out as expected text), checks the main
// graph's ops afterwards and that the numbers are unchanged. Returns the rewritten model.
inline std::unique_ptr<Model> ExpectRewriteOps(const std::string& text, const std::string& pass,
                                               const std::vector<std::string>& expected_ops,
                                               const Options& options = {}, cpu::Tolerance tolerance = {1e-5, 1e-6}) {
  Rewritten rewritten = Rewrite(text, pass, options);
  CHECK(rewritten.run.statistics.changed);
  CHECK(OpTypes(*rewritten.model->graph) == expected_ops);
  ExpectSameOutputs(*rewritten.original, *rewritten.model, kEveryOpenDimOne, tolerance);
  return std::move(rewritten.model);
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

}  // namespace fusionopt::folding_test
