// The pass test harness: see pass_harness.h.
#include "pass_harness.h"

#include "ir/op_class.h"

namespace fusionopt::pass_test {

void ExpectSameNumbers(const Model& original, const Model& rewritten, const SameNumbers& numbers) {
  std::unique_ptr<Model> inlined;
  const Model* compared = &rewritten;
  if (numbers.inline_fused) {
    inlined = InlineFusedNodes(rewritten);
    for (const auto& node : inlined->graph->nodes()) REQUIRE(node->domain() != kFusionDomain);
    compared = inlined.get();
  }
  if (numbers.bit_for_bit) {
    RequireClose(RunOnCpu(*compared, numbers.dims), RunOnCpu(original, numbers.dims), 0.0, 0.0);
  } else {
    ExpectSameOutputs(original, *compared, numbers.dims, numbers.tolerance);
  }
}

Rewritten ExpectRewrite(const std::string& text, const std::string& pass, const std::string& expected,
                        const Check& check) {
  Rewritten rewritten = Rewrite(text, pass, check.options);
  CHECK(rewritten.run.statistics.changed);
  CHECK(Print(*rewritten.model) == Canonical(expected));
  ExpectSameNumbers(*rewritten.original, *rewritten.model, check.numbers);
  return rewritten;
}

Rewritten ExpectRewriteOps(const std::string& text, const std::string& pass,
                           const std::vector<std::string>& expected_ops, const Check& check) {
  Rewritten rewritten = Rewrite(text, pass, check.options);
  CHECK(rewritten.run.statistics.changed);
  CHECK(OpTypes(*rewritten.model->graph) == expected_ops);
  ExpectSameNumbers(*rewritten.original, *rewritten.model, check.numbers);
  return rewritten;
}

PassRun ExpectUnchanged(const std::string& text, const std::string& pass, const std::string& reason,
                        const Options& options) {
  auto model = ParseInferred(text);
  const std::string printed = Print(*model);
  PassRun run = RunPass(*model, pass, options);
  CHECK_FALSE(run.statistics.changed);
  CHECK(Print(*model) == printed);
  INFO("reason: " << reason);
  if (!reason.empty()) CHECK(RejectionCount(run.statistics, reason) >= 1);
  return run;
}

}  // namespace fusionopt::pass_test
