// The fail-safe check (verify/fusion_check.h): a wrong fused kernel planted through the test
// hook is found by bisection, its fusion undone, and the model that remains matches the
// original; a correct optimization is left alone; a difference no fused call causes is
// reported, not "repaired".
#include <catch2/catch.hpp>

#include <cmath>

#include "cpu_runtime/engine/compare.h"
#include "ir/op_class.h"
#include "onnx_io/model_io.h"
#include "pass_harness.h"
#include "pass_test_support.h"
#include "verify/fusion_check.h"
#include "passes/util/outline.h"
#include "passes/pipeline.h"
#include "scratch_dir.h"

namespace fusionopt {
namespace {

using pass_test::ParseInferred;

// Three fusions at O3: MatMul+Add+Relu (contraction epilogue); its result, read twice, feeds
// Mul+Add+Tanh (elementwise) and a scaled Softmax (a row kernel).
std::string ModelText(const std::string& bias = "0.25, -0.5, 0.125") {
  return R"(
ir_version 8
opset "" 17
graph main (float[2,4] %a, float[2,3] %s) -> (float[2,3] %y, float[2,3] %z)
  init float[4,3] %w = [0.5, -0.25, 0.75, 0.125, -0.5, 1.0, 0.25, 0.375, -0.75, 1.25, -0.125, 0.625]
  init float[3] %bias = [)" + bias + R"(]
  init float[] %two = [2.0]
  init float[] %half = [0.5]
{
  %m = MatMul(%a, %w) @matmul
  %h = Add(%m, %bias) @bias
  %r = Relu(%h) @relu
  %p = Mul(%r, %s) @mul
  %q = Add(%p, %half) @add
  %z = Tanh(%q) @tanh
  %u = Mul(%r, %two) @scale
  %y = Softmax(%u) {axis: -1} @softmax
}
)";
}

std::unique_ptr<Model> Optimized(const std::string& text) { return pass_test::ParseOptimized(text, 3); }

std::vector<const Node*> FusedCalls(const Model& model) {
  std::vector<const Node*> calls;
  for (const auto& node : model.graph->nodes()) {
    if (node->domain() == kFusionDomain) calls.push_back(node.get());
  }
  return calls;
}

bool HasNodeNamed(const Model& model, const std::string& name) {
  for (const auto& node : model.graph->nodes()) {
    if (node->name() == name) return true;
  }
  return false;
}

verify::FusionCheckOptions CheckOptions(const Model& original) {
  verify::FusionCheckOptions options;
  for (uint64_t seed = 0; seed < 2; ++seed) {
    auto feeds = verify::SeededFeeds(original, {}, seed);
    REQUIRE(feeds.ok());
    options.feeds.push_back(*feeds);
  }
  return options;
}

// A hook adding `delta` to the first output of the calls named in `names`.
std::function<void(const Node&, cpu::KernelContext&)> Perturbing(std::vector<std::string> names, float delta) {
  return [names, delta](const Node& call, cpu::KernelContext& context) {
    if (std::find(names.begin(), names.end(), call.name()) == names.end()) return;
    cpu::RtTensor& output = context.outputs.front();
    cpu::RtTensor copy = cpu::RtTensor::Allocate(output.dtype(), output.dims());
    for (int64_t i = 0; i < output.NumElements(); ++i) copy.data<float>()[i] = output.data<float>()[i] + delta;
    output = copy;
  };
}

TEST_CASE("the fail-safe check leaves a correct optimization alone", "[fusion-check]") {
  auto original = ParseInferred(ModelText());
  auto optimized = Optimized(ModelText());
  const size_t calls = FusedCalls(*optimized).size();
  REQUIRE(calls >= 2);
  auto report = verify::CheckAndRepairFusions(*original, *optimized, CheckOptions(*original));
  REQUIRE(report.ok());
  CHECK(report->matches);
  CHECK(report->initial_difference.empty());
  CHECK(report->undone.empty());
  CHECK(report->fused_calls == static_cast<int>(calls));
  CHECK(report->input_sets == 5);  // two seeded, three value-range sets
  CHECK(report->checks == 1);
  CHECK(FusedCalls(*optimized).size() == calls);
}

TEST_CASE("a planted wrong fused kernel is found, its fusion undone, and the result matches", "[fusion-check]") {
  auto original = ParseInferred(ModelText());
  auto optimized = Optimized(ModelText());
  std::vector<const Node*> calls = FusedCalls(*optimized);
  REQUIRE(calls.size() >= 2);
  const std::string wrong = calls[1]->name();
  const std::string function = calls[1]->op_type();
  const std::vector<std::string> members = passes::FusedNodeNames(*calls[1]);
  REQUIRE(!members.empty());

  verify::FusionCheckOptions options = CheckOptions(*original);
  options.fused_output_hook = Perturbing({wrong}, 1.0f);
  auto report = verify::CheckAndRepairFusions(*original, *optimized, options);
  REQUIRE(report.ok());
  CHECK(report->initial_difference.find("differs on seeded inputs 1") != std::string::npos);
  REQUIRE(report->undone.size() == 1);
  CHECK(report->undone[0].node == wrong);
  CHECK(report->undone[0].members == members);
  CHECK(report->not_undone.empty());
  CHECK(report->matches);
  CHECK(report->remaining_difference.empty());

  // The offending call is gone and its original nodes are back; the other fusions stay.
  CHECK(FusedCalls(*optimized).size() == calls.size() - 1);
  CHECK_FALSE(HasNodeNamed(*optimized, wrong));
  for (const auto& member : members) CHECK(HasNodeNamed(*optimized, member));
  CHECK(optimized->FindFunction(kFusionDomain, function) == nullptr);
  // Function bodies are untyped: the restored members' values are typed again, for the cost
  // model and whatever reads the repaired model next.
  for (const auto& node : optimized->graph->nodes()) {
    for (const Value* output : node->outputs()) {
      INFO(output->name());
      CHECK(output->dtype() == DataType::kFloat);
      CHECK(output->shape().has_value());
    }
  }

  // The repaired model, saved and read back, computes what the original computes.
  test_support::ScratchDir scratch("fusion_check");
  REQUIRE(SaveModel(*optimized, (scratch / "repaired.onnx").string()).ok());
  auto reloaded = LoadModel((scratch / "repaired.onnx").string());
  REQUIRE(reloaded.ok());
  pass_test::ExpectSameNumbers(*original, **reloaded, {.dims = pass_test::OpenDims{}});
}

TEST_CASE("two wrong fused kernels are both undone", "[fusion-check]") {
  auto original = ParseInferred(ModelText());
  auto optimized = Optimized(ModelText());
  std::vector<const Node*> calls = FusedCalls(*optimized);
  REQUIRE(calls.size() >= 3);
  const std::vector<std::string> wrong = {calls.front()->name(), calls.back()->name()};
  verify::FusionCheckOptions options = CheckOptions(*original);
  options.fused_output_hook = Perturbing(wrong, 0.5f);
  auto report = verify::CheckAndRepairFusions(*original, *optimized, options);
  REQUIRE(report.ok());
  REQUIRE(report->undone.size() == 2);
  CHECK(report->undone[0].node == wrong[0]);
  CHECK(report->undone[1].node == wrong[1]);
  CHECK(report->matches);
  CHECK(FusedCalls(*optimized).size() == calls.size() - 2);
  pass_test::ExpectSameNumbers(*original, *optimized, {.dims = pass_test::OpenDims{}});
}

TEST_CASE("a kernel that overflows only on large values is caught by the value-range inputs", "[fusion-check]") {
  auto original = ParseInferred(ModelText());
  auto optimized = Optimized(ModelText());
  std::vector<const Node*> calls = FusedCalls(*optimized);
  const std::string wrong = calls.front()->name();
  verify::FusionCheckOptions options = CheckOptions(*original);
  // Right on ordinary inputs; infinite where an input is large, as a softmax that skips the
  // max subtraction would be.
  options.fused_output_hook = [wrong](const Node& call, cpu::KernelContext& context) {
    if (call.name() != wrong) return;
    bool large = false;
    for (const cpu::RtTensor* input : context.inputs) {
      if (input == nullptr || input->dtype() != DataType::kFloat) continue;
      for (int64_t i = 0; i < input->NumElements(); ++i) large = large || std::abs(input->data<float>()[i]) > 10;
    }
    if (!large) return;
    cpu::RtTensor& output = context.outputs.front();
    cpu::RtTensor copy = cpu::RtTensor::Allocate(output.dtype(), output.dims());
    for (int64_t i = 0; i < output.NumElements(); ++i) copy.data<float>()[i] = INFINITY;
    output = copy;
  };
  auto report = verify::CheckAndRepairFusions(*original, *optimized, options);
  REQUIRE(report.ok());
  CHECK(report->initial_difference.find("NaN/Inf values where the original's are finite") != std::string::npos);
  CHECK(report->initial_difference.find("x100") != std::string::npos);
  REQUIRE(report->undone.size() == 1);
  CHECK(report->undone[0].node == wrong);
  CHECK(report->matches);

  SECTION("without the value-range inputs the seeded ones miss it") {
    auto again = Optimized(ModelText());
    options.check_value_ranges = false;
    auto unchecked = verify::CheckAndRepairFusions(*original, *again, options);
    REQUIRE(unchecked.ok());
    CHECK(unchecked->matches);
    CHECK(unchecked->undone.empty());
  }
}

TEST_CASE("a difference no fused call causes is reported, and nothing is undone", "[fusion-check]") {
  auto original = ParseInferred(ModelText());
  // Another bias: every fused call run op by op still differs.
  auto optimized = Optimized(ModelText("0.25, -0.5, 0.5"));
  const size_t calls = FusedCalls(*optimized).size();
  auto report = verify::CheckAndRepairFusions(*original, *optimized, CheckOptions(*original));
  REQUIRE(report.ok());
  CHECK_FALSE(report->matches);
  CHECK(report->undone.empty());
  CHECK(report->remaining_difference.find("with every fused call run op by op") != std::string::npos);
  CHECK(FusedCalls(*optimized).size() == calls);
}

TEST_CASE("seeded feeds size symbolic dims from the given symbols", "[fusion-check]") {
  auto model = ParseInferred(R"(
ir_version 8
opset "" 17
graph main (float[N,4] %a, int64[N] %ids) -> (float[N,4] %y)
{
  %y = Relu(%a)
}
)");
  auto feeds = verify::SeededFeeds(*model, {{"N", 5}}, 3);
  REQUIRE(feeds.ok());
  REQUIRE(feeds->size() == 2);
  CHECK((*feeds)[0].tensor.dims() == std::vector<int64_t>{5, 4});
  CHECK((*feeds)[1].tensor.dims() == std::vector<int64_t>{5});
  auto defaults = verify::SeededFeeds(*model, {}, 3);
  REQUIRE(defaults.ok());
  CHECK((*defaults)[0].tensor.dims() == std::vector<int64_t>{1, 4});
  auto same = verify::SeededFeeds(*model, {{"N", 5}}, 3);
  CHECK(cpu::Compare((*same)[0].tensor, (*feeds)[0].tensor, {0, 0}).passed);
}

}  // namespace
}  // namespace fusionopt
