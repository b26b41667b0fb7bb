// Shared by the cleanup passes' tests (eliminate-no-ops, eliminate-common-subexpressions,
// merge-reshapes, share-duplicate-initializers): run one pass by itself on a model written as
// IR text, compare the result with the expected text, and check that the rewrite changed no
// output, bit for bit.
#pragma once

#include <catch2/catch.hpp>

#include <memory>
#include <string>

#include "shape_inference/shape_inference.h"
#include "ir/verifier.h"
#include "pass_test_support.h"

namespace fusionopt::pass_test {

struct PassOutcome : PassRun {
  std::unique_ptr<Model> model;
  bool changed = false;
  std::string text;  // the result, printed
};

// Runs pass P once on a model (RunPass: on `text`, parsed with shapes inferred); the result
// must pass the IR verifier, and the pass's claim of change must match whether the printed
// model changed.
template <typename P>
PassOutcome RunPassOn(std::unique_ptr<Model> model) {
  PassOutcome outcome;
  outcome.model = std::move(model);
  std::string before = Print(*outcome.model);
  P pass;
  static_cast<PassRun&>(outcome) = RunPassObject(*outcome.model, pass);
  outcome.changed = outcome.statistics.changed;
  InferShapes(*outcome.model);
  Status valid = VerifyModel(*outcome.model);
  INFO(valid.message());
  REQUIRE(valid.ok());
  outcome.text = Print(*outcome.model);
  CHECK(outcome.changed == (outcome.text != before));
  return outcome;
}

template <typename P>
PassOutcome RunPass(const std::string& text) {
  return RunPassOn<P>(ParseInferred(text));
}

// The rewritten model computes exactly what the original did (these passes reorder no
// arithmetic, so equal means bit-equal) on seeded random inputs, each symbolic dim its own size.
inline void RequireSameOutputs(const std::string& original_text, const Model& rewritten, uint64_t seed = 7) {
  const OpenDims distinct{.symbols = {}, .other_symbols = 3, .unnamed = 2, .distinct_symbols = true};
  auto expected = RunOnCpu(*ParseInferred(original_text), distinct, seed);
  auto actual = RunOnCpu(rewritten, distinct, seed);
  RequireClose(actual, expected, 0.0, 0.0);
}

// Pass P turns `before` into `after` and computes the same outputs.
template <typename P>
PassOutcome ExpectRewrite(const std::string& before, const std::string& after) {
  auto outcome = RunPass<P>(before);
  CHECK(outcome.changed);
  CHECK(outcome.text == Canonical(after));
  RequireSameOutputs(before, *outcome.model);
  return outcome;
}

// Pass P leaves `text` as it is.
template <typename P>
PassOutcome ExpectUnchanged(const std::string& text) {
  auto outcome = RunPass<P>(text);
  CHECK_FALSE(outcome.changed);
  CHECK(outcome.text == Canonical(text));
  return outcome;
}

}  // namespace fusionopt::pass_test
