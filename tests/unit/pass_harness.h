// The one harness every pass test runs a pass with (MLIR's `-pass | FileCheck` in one call):
// the pass by its registry name, alone, as `fusionopt --only PASS --check-each-pass` runs it on a
// model written as IR text; the result compared with the expected text (or its main graph's ops,
// where the weights are too large to spell); and its numbers compared with the original's on the
// same seeded inputs. A family's own checks (fuse_composites_test_helpers.h: every body is
// recognised as its composite) build on these.
#pragma once

#include <catch2/catch.hpp>

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "cpu_runtime/engine/compare.h"
#include "pass_test_support.h"

namespace fusionopt::pass_test {

// Every open dim 1, as `fusionopt run` feeds a model.
inline const OpenDims kEveryOpenDimOne{.symbols = {}, .other_symbols = 1, .unnamed = 1, .distinct_symbols = false};

// How a rewrite's numbers are compared with the original's on the same seeded inputs.
struct SameNumbers {
  OpenDims dims = kEveryOpenDimOne;
  cpu::Tolerance tolerance = {1e-5, 1e-6};
  // Compare the result with every fused call inlined (InlineFusedNodes): what a runtime that
  // inlines functions computes, and proof that each body is a faithful copy of what it replaced.
  bool inline_fused = false;
  // Element by element, the same bits (NaNs alike), for passes that reorder no arithmetic.
  bool bit_for_bit = false;
};

// Cleanup passes reorder no arithmetic: the same bits, each symbol its own size (3, 4, 5, ...) so
// a rewrite that confuses two symbols shows.
inline SameNumbers BitForBit() {
  return {.dims = {.symbols = {}, .other_symbols = 3, .unnamed = 2, .distinct_symbols = true}, .bit_for_bit = true};
}
// Fusion passes: the result inlined, symbolic dims from `symbols` (3 when not listed).
inline SameNumbers Inlined(const std::map<std::string, int64_t>& symbols = {},
                           cpu::Tolerance tolerance = {1e-5, 1e-6}) {
  return {.dims = OpenDims{symbols}, .tolerance = tolerance, .inline_fused = true};
}

struct Check {
  Options options = {};
  SameNumbers numbers = {};
};

// `rewritten` computes what `original` computes, as `numbers` says.
void ExpectSameNumbers(const Model& original, const Model& rewritten, const SameNumbers& numbers);

// Runs `pass` on `text`; checks it reports a change, the result prints as `expected`, and the
// numbers are the original's.
Rewritten ExpectRewrite(const std::string& text, const std::string& pass, const std::string& expected,
                        const Check& check = {});

// The same where the result is checked by its main graph's ops ("op" or "domain::op", in order).
Rewritten ExpectRewriteOps(const std::string& text, const std::string& pass,
                           const std::vector<std::string>& expected_ops, const Check& check = {});

// Runs `pass` on `text`; checks it changed nothing (reported and printed) and, unless `reason` is
// empty, rejected a candidate for `reason`.
PassRun ExpectUnchanged(const std::string& text, const std::string& pass, const std::string& reason = {},
                        const Options& options = {});

}  // namespace fusionopt::pass_test
