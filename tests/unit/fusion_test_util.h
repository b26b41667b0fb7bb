// Shared by the O2 fusion passes' tests. Besides running fused nodes on the CPU runtime, a
// fused model is checked the way a runtime that inlines functions sees it:
// InlineFusedNodes puts each function body back in place of its call, and the inlined model
// must compute what the original computes. That also checks the body is a faithful copy of
// the nodes it replaced.
#pragma once

#include <catch2/catch.hpp>

#include <cstdint>
#include <map>
#include <string>

#include "cpu_runtime/engine/compare.h"
#include "ir/op_class.h"
#include "pass_test_support.h"

namespace fusionopt::fusion_test {

using namespace fusionopt::pass_test;

// `optimized`, its fused nodes inlined, computes what `original` computes on the same inputs;
// symbolic dims take their size from `symbols`, 3 when not listed.
inline void ExpectSameNumbers(const Model& original, const Model& optimized,
                              const std::map<std::string, int64_t>& symbols = {},
                              cpu::Tolerance tolerance = {1e-5, 1e-6}) {
  std::unique_ptr<Model> inlined = InlineFusedNodes(optimized);
  for (const auto& node : inlined->graph->nodes()) REQUIRE(node->domain() != kFusionDomain);
  ExpectSameOutputs(original, *inlined, OpenDims{symbols}, tolerance);
}

// Runs `pass` on `text`; checks the result prints as `expected` and, inlined, keeps the numbers.
inline Rewritten ExpectFused(const std::string& text, const std::string& pass, const std::string& expected,
                             const Options& options = {}, const std::map<std::string, int64_t>& symbols = {}) {
  Rewritten fused = ExpectRewriteTo(text, pass, expected, options);
  ExpectSameNumbers(*fused.original, *fused.model, symbols);
  return fused;
}

}  // namespace fusionopt::fusion_test
