// Measured fusion decisions (passes/fusion_timing.h): every fused call is timed fused and op
// by op; one slower fused than its members by the margin is inlined, the rest stay.
#include "cpu_fused_test_helpers.h"
#include "passes/fusion_timing.h"

using namespace fusionopt;
using namespace fusionopt::cpu;
using namespace fusionopt::fused_test;

namespace {

const std::string kModel = "ir_version 8\nopset \"\" 20\ngraph main (float[2,8,6,6] %x) -> (float[2,8,6,6] %y)\n" +
                           Init("float[8,8,3,3]", "w", 8 * 8 * 9, 81) + Init("float[8]", "b", 8, 82) + R"({
  %c = Conv(%x, %w, %b) {kernel_shape: [3, 3], pads: [1, 1, 1, 1]} @conv
  %r = Relu(%c) @relu
  %s = Sigmoid(%r) @sigmoid
  %y = Mul(%r, %s) @mul
}
)";

std::unique_ptr<Model> TwoFusions() {
  auto model = Parse(kModel);
  for (const std::vector<std::string>& group : {std::vector<std::string>{"conv", "relu"}, {"sigmoid", "mul"}}) {
    OutlineNamed pass(group, "test");
    pass_test::RunPassObject(*model, pass);
  }
  return model;
}

passes::FusionTimingOptions Options(double margin, double floor_ms) {
  passes::FusionTimingOptions options;
  options.feeds = {{"x", Random(DataType::kFloat, {2, 8, 6, 6}, 83)}};
  options.rounds = 2;
  options.runs = 2;
  options.margin = margin;
  options.floor_ms = floor_ms;
  return options;
}

size_t FusedCalls(const Model& model) {
  size_t calls = 0;
  for (const auto& node : model.graph->nodes()) calls += node->domain() == "ai.fusionopt";
  return calls;
}

}  // namespace

TEST_CASE("fusions no slower than their members by the margin stay fused", "[passes][fusion-timing]") {
  auto model = TwoFusions();
  auto report = passes::UndoSlowerFusions(*model, Options(/*margin=*/1e9, /*floor_ms=*/1e9));
  REQUIRE(report.ok());
  REQUIRE(report->timed_calls == 2);
  REQUIRE(report->undone.empty());
  REQUIRE(FusedCalls(*model) == 2);
  REQUIRE(model->functions.size() == 2);
}

TEST_CASE("a fusion slower fused than op by op is inlined and its function dropped", "[passes][fusion-timing]") {
  auto model = TwoFusions();
  const auto options = Options(/*margin=*/-1.0, /*floor_ms=*/-1e9);  // any fused time counts as slower
  auto expected = pass_test::RunWithFeeds(*Parse(kModel), options.feeds);
  auto report = passes::UndoSlowerFusions(*model, options);
  REQUIRE(report.ok());
  REQUIRE(report->timed_calls == 2);
  REQUIRE(report->undone.size() == 2);
  for (const passes::TimedFusion& fusion : report->undone) {
    REQUIRE(fusion.function.rfind("ai.fusionopt::", 0) == 0);
    REQUIRE(fusion.fused_ms > 0);
    REQUIRE(fusion.members_ms > 0);
  }
  REQUIRE(FusedCalls(*model) == 0);
  REQUIRE(model->functions.empty());
  REQUIRE(model->graph->nodes().size() == 4);
  // The values between the inlined ops keep their types: the cost model and later passes
  // (bench's predicted speed-up) need them, and nothing re-infers shapes after this pass.
  for (const auto& node : model->graph->nodes()) {
    for (const Value* output : node->outputs()) {
      INFO(output->name());
      REQUIRE(output->dtype() == DataType::kFloat);
      REQUIRE(output->shape().has_value());
      REQUIRE(output->shape()->size() == 4);
    }
  }
  pass_test::RequireClose(pass_test::RunWithFeeds(*model, options.feeds), expected, 0.0, 0.0);
  REQUIRE(passes::FusionTimingToJson(*report).find("\"timed_calls\":2") != std::string::npos);
}
