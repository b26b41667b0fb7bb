// Shared by the fuse-composites tests: run the pass on IR text, compare with the expected text
// (main graph and function bodies), check every body is recognised by patterns/composite/composite.h, and
// compare numbers with the original — inlined (the bodies are faithful copies) and run as is
// (the runtime's fused kernels).
#pragma once

#include <catch2/catch.hpp>

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "pass_harness.h"
#include "patterns/composite/composite.h"
#include "ir/op_class.h"
#include "text_format/text_format.h"

namespace fusionopt::fuse_composites_test {

using namespace fusionopt::pass_test;

inline constexpr const char* kPass = "fuse-composites";

// The rewritten model, the original and the pass's statistics and fusion records.
using Fused = Rewritten;

// Every function the pass created is recognised as the composite its fusion record names.
inline void ExpectBodiesRecognised(const Model& model, const std::vector<passes::FusionRecord>& fusions) {
  REQUIRE_FALSE(fusions.empty());
  for (const passes::FusionRecord& fusion : fusions) {
    const Function* function = model.FindFunction(kFusionDomain, fusion.function);
    REQUIRE(function != nullptr);
    INFO("function " << fusion.function << ":\n" << PrintGraph(*function->body));
    std::optional<FusedComposite> composite = RecognizeComposite(*function);
    REQUIRE(composite.has_value());
    CHECK(NameOf(composite->kind) == fusion.kind);
  }
}

// Runs the pass on `text`; checks the result prints as `expected`, its bodies are recognised,
// and it computes the original's numbers both inlined and run with its fused kernels.
inline Fused ExpectFusedComposite(const std::string& text, const std::string& expected,
                                  const std::map<std::string, int64_t>& symbols = {}) {
  Fused fused = pass_test::ExpectRewrite(text, kPass, expected, {.numbers = Inlined(symbols)});
  ExpectBodiesRecognised(*fused.model, fused.run.fusions);
  ExpectClose(RunOnCpu(*fused.model, OpenDims{symbols}), RunOnCpu(*fused.original, OpenDims{symbols}), {1e-4, 1e-5});
  return fused;
}

inline std::string Header(int64_t opset = 17) { return "ir_version 8\nopset \"\" " + std::to_string(opset) + "\n"; }

inline constexpr const char* kGammaBeta = R"(
  init float[8] %g = [1.0, 0.5, -1.0, 2.0, 1.5, 0.25, -0.5, 3.0]
  init float[8] %be = [0.1, -0.2, 0.3, 0.0, 0.5, -1.0, 0.25, 2.0]
)";

// BERT's residual add and LayerNorm as PyTorch exports them; `axes` and `eps` vary per test.
inline std::string BertLayerNorm(const std::string& signature, const std::string& axes = "[-1]",
                          const std::string& eps = "%eps = Constant() {value: tensor float[] [1e-12]} @eps") {
  return Header() + "graph main " + signature + kGammaBeta + R"({
  %s = Add(%a, %b) @add
  %m = ReduceMean(%s) {axes: )" + axes + R"(, keepdims: 1} @mean
  %d = Sub(%s, %m) @sub
  %two = Constant() {value: tensor float[] [2.0]} @two
  %q = Pow(%d, %two) @pow
  %v = ReduceMean(%q) {axes: )" + axes + R"(, keepdims: 1} @var
  )" + eps + R"(
  %e = Add(%v, %eps) @add_eps
  %r = Sqrt(%e) @sqrt
  %n = Div(%d, %r) @div
  %t = Mul(%n, %g) @mul_gamma
  %y = Add(%t, %be) @add_beta
}
)";
}

inline constexpr const char* kBertSignature = "(float[N,4,8] %a, float[N,4,8] %b) -> (float[N,4,8] %y)";

}  // namespace fusionopt::fuse_composites_test
