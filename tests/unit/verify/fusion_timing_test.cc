// Measured fusion decisions (verify/fusion_timing.h): every fused call is timed fused and op
// by op; one slower fused than its members by the margin is inlined, the rest stay.
#include <cstdlib>
#include <filesystem>
#include <fstream>

#include "cpu_fused_test_helpers.h"
#include "verify/fusion_timing.h"
#include "scoped_env.h"
#include "scratch_dir.h"

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
    REQUIRE(pass_test::OutlineNodes(*model, group, "test").fused != nullptr);
  }
  return model;
}

verify::FusionTimingOptions Options(double margin, double floor_ms) {
  verify::FusionTimingOptions options;
  options.feeds = {{"x", Random(DataType::kFloat, {2, 8, 6, 6}, 83)}};
  options.rounds = 2;
  options.runs = 2;
  options.margin = margin;
  options.floor_ms = floor_ms;
  options.use_cache = false;  // the cases below that test the cache turn it on in a scratch folder
  return options;
}

// XDG_CACHE_HOME pointed at a scratch folder for one test, restored after it.
class ScratchCache {
 public:
  std::filesystem::path folder() const { return scratch_.path() / "fusionopt" / "fusion_timing"; }

 private:
  test_support::ScratchDir scratch_{"fusion_timing_cache"};
  test_support::ScopedEnv cache_home_{"XDG_CACHE_HOME", scratch_.path().c_str()};
};

size_t FusedCalls(const Model& model) {
  size_t calls = 0;
  for (const auto& node : model.graph->nodes()) calls += node->domain() == "ai.fusionopt";
  return calls;
}

}  // namespace

TEST_CASE("fusions no slower than their members by the margin stay fused", "[passes][fusion-timing]") {
  auto model = TwoFusions();
  auto report = verify::UndoSlowerFusions(*model, Options(/*margin=*/1e9, /*floor_ms=*/1e9));
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
  auto report = verify::UndoSlowerFusions(*model, options);
  REQUIRE(report.ok());
  REQUIRE(report->timed_calls == 2);
  REQUIRE(report->undone.size() == 2);
  for (const verify::TimedFusion& fusion : report->undone) {
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
  REQUIRE(verify::FusionTimingToJson(*report).find("\"timed_calls\":2") != std::string::npos);
}

TEST_CASE("a fusion is undone only when a second measurement agrees", "[passes][fusion-timing]") {
  // A margin no real measurement can meet either time: nothing is a candidate, nothing undone.
  auto model = TwoFusions();
  auto options = Options(/*margin=*/1e9, /*floor_ms=*/-1e9);
  auto report = verify::UndoSlowerFusions(*model, options);
  REQUIRE(report.ok());
  CHECK(report->undone.empty());
  CHECK(report->unconfirmed == 0);
  CHECK(verify::FusionTimingSummary(*report) ==
        "fusion timing: 0 of 2 fused calls slower fused on this CPU, undone (measured, not cached)");
}

TEST_CASE("decisions are cached per model structure, feeds and host, and read back unchanged",
          "[passes][fusion-timing]") {
  ScratchCache cache;
  auto options = Options(/*margin=*/-1.0, /*floor_ms=*/-1e9);  // both calls slower: both undone
  options.use_cache = true;
  auto first_model = TwoFusions();
  auto first = verify::UndoSlowerFusions(*first_model, options);
  REQUIRE(first.ok());
  REQUIRE(first->undone.size() == 2);
  CHECK_FALSE(first->from_cache);
  REQUIRE(std::filesystem::exists(first->cache_path));
  CHECK(std::filesystem::path(first->cache_path).parent_path() == cache.folder());

  // The same model again: read, not measured, with the same decisions and figures.
  auto second_model = TwoFusions();
  auto second = verify::UndoSlowerFusions(*second_model, options);
  REQUIRE(second.ok());
  CHECK(second->from_cache);
  CHECK(second->cache_path == first->cache_path);
  REQUIRE(second->undone.size() == 2);
  for (size_t i = 0; i < 2; ++i) {
    CHECK(second->undone[i].node == first->undone[i].node);
    CHECK(second->undone[i].fused_ms == first->undone[i].fused_ms);
  }
  CHECK(FusedCalls(*second_model) == 0);
  CHECK(verify::FusionTimingSummary(*second).find("decisions cached in " + first->cache_path) != std::string::npos);

  // Other settings (here the margin) are another key: measured afresh, nothing undone.
  auto strict = options;
  strict.margin = 1e9;
  strict.floor_ms = 1e9;
  auto third_model = TwoFusions();
  auto third = verify::UndoSlowerFusions(*third_model, strict);
  REQUIRE(third.ok());
  CHECK_FALSE(third->from_cache);
  CHECK(third->cache_path != first->cache_path);
  CHECK(third->undone.empty());
  CHECK(FusedCalls(*third_model) == 2);

  // A cache file that does not parse, or names a call the model lacks, is measured again.
  for (const std::string& contents : {std::string("not json"),
                                      std::string(R"({"format": 1, "undone": [{"node": "no_such_call"}]})")}) {
    std::ofstream(first->cache_path) << contents;
    auto model = TwoFusions();
    auto again = verify::UndoSlowerFusions(*model, options);
    REQUIRE(again.ok());
    CHECK_FALSE(again->from_cache);
    CHECK(again->undone.size() == 2);
  }
}
