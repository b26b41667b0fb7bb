// lower-for-ort (`--runtime ort`, passes/conversion/ort/lower_for_ort.h), the driver and GELU: the
// conversion that ends the pipeline, a GELU epilogue written as BiasGelu, FastGelu or QuickGelu
// after its MatMul per provider, and what stays a function, with its reason. Norms, attention,
// rotary and packed projections: their own files here; every exporter form and the numbers
// against ORT: tests/python/test_runtime_ort.py.
#include <catch2/catch.hpp>

#include "ort_test_support.h"
#include "passes/conversion/ort/lower_for_ort.h"
#include "passes/conversion/ort/support.h"
#include "passes/pipeline.h"
#include "passes/registry.h"

namespace fusionopt {
namespace {

using pass_test::OpTypes;
using pass_test::ParseInferred;
using namespace ort_test;

}  // namespace

TEST_CASE("lower-for-ort: an erf GELU epilogue becomes MatMul then BiasGelu", "[passes][ort]") {
  auto model = OptimizedAtO3(Projection("erf"));
  REQUIRE(Has(OpTypes(*model->graph), "ai.fusionopt::FusedMatMulAddGelu"));
  auto report = passes::LowerForOrt(*model);
  REQUIRE(report.ok());
  REQUIRE(report->lowered.size() == 1);
  CHECK(report->lowered[0].written == "com.microsoft::BiasGelu");
  CHECK(report->lowered[0].function == "ai.fusionopt::FusedMatMulAddGelu");
  CHECK(OpTypes(*model->graph) == std::vector<std::string>{"MatMul", "com.microsoft::BiasGelu"});
  const Node& gelu = Only(*model->graph, "BiasGelu");
  CHECK(gelu.input(0)->producer()->op_type() == "MatMul");
  CHECK(gelu.input(1)->name() == "b");  // the bias initializer itself
  CHECK(gelu.output(0)->name() == "y");
  CHECK(model->functions.empty());
  CHECK(model->OpsetFor("com.microsoft") == 1);
}

TEST_CASE("lower-for-ort: a float16 GELU, its constants as float16 rounds them, becomes BiasGelu", "[passes][ort]") {
  // The float16 initializers hold √2 as 1.4140625, 1.1e-4 from it: within half a float16 ulp.
  auto model = OptimizedAtO3(Projection("erf", "float16"));
  auto report = passes::LowerForOrt(*model);
  REQUIRE(report.ok());
  REQUIRE(report->lowered.size() == 1);
  CHECK(report->lowered[0].written == "com.microsoft::BiasGelu");
  CHECK(OpTypes(*model->graph) == std::vector<std::string>{"MatMul", "com.microsoft::BiasGelu"});
  CHECK(Only(*model->graph, "BiasGelu").output(0)->dtype() == DataType::kFloat16);
}

TEST_CASE("lower-for-ort: a tanh GELU epilogue becomes FastGelu with its bias", "[passes][ort]") {
  auto model = OptimizedAtO3(Projection("tanh"));
  auto report = passes::LowerForOrt(*model);
  REQUIRE(report.ok());
  REQUIRE(report->lowered.size() == 1);
  CHECK(report->lowered[0].written == "com.microsoft::FastGelu");
  const Node& gelu = Only(*model->graph, "FastGelu");
  CHECK(gelu.inputs().size() == 2);
  CHECK(gelu.input(1)->name() == "b");
  // The scalars the GELU read went with it.
  for (const auto& node : model->graph->nodes()) CHECK(node->op_type() != "Constant");
}

TEST_CASE("lower-for-ort: a QuickGELU epilogue becomes QuickGelu with its alpha; a SiLU stays for ORT", "[passes][ort]") {
  for (const char* alpha : {"1.702", "1.0"}) {
    INFO(alpha);
    auto model = OptimizedAtO3(Header() + R"(graph main (float[N,4,8] %x) -> (float[N,4,16] %y)
  init float[8,16] %w = [)" + Weights() + R"(]
  init float[16] %b = [0.5, -0.5, 0.25, 0, 1, -1, 2, -2, 0.5, -0.5, 0.25, 0, 1, -1, 2, -2]
  init float[] %alpha = [)" + alpha + R"(]
{
  %m = MatMul(%x, %w) @matmul
  %h = Add(%m, %b) @bias
  %a = Mul(%h, %alpha) @scale
  %s = Sigmoid(%a) @sigmoid
  %y = Mul(%h, %s) @gate
}
)");
    auto report = passes::LowerForOrt(*model);
    REQUIRE(report.ok());
    std::vector<std::string> ops = OpTypes(*model->graph);
    if (std::string(alpha) == "1.0") {
      // alpha 1 is SiLU (the Mul by one is folded away): ORT fuses that itself, the group stays.
      CHECK(report->lowered.empty());
      CHECK_FALSE(Has(ops, "com.microsoft::QuickGelu"));
      continue;
    }
    REQUIRE(report->lowered.size() == 1);
    CHECK(report->lowered[0].written == "com.microsoft::QuickGelu");
    CHECK(Has(ops, "com.microsoft::QuickGelu"));
    const Node& quick = Only(*model->graph, "QuickGelu");
    CHECK(quick.GetFloat("alpha", 0.0f) == Approx(1.702f));
    for (const auto& node : model->graph->nodes()) CHECK(node->op_type() != "Sigmoid");
  }
}

TEST_CASE("lower-for-ort: groups ORT has no kernel for stay functions with a reason", "[passes][ort]") {
  // A float16 erf "GELU" whose √2 is the float16 one ulp above the rounded value (1.4150391,
  // not 1.4140625) is no GELU: no BiasGelu, and the groups say why they stay.
  std::string off_by_an_ulp = Projection("erf", "float16");
  off_by_an_ulp.replace(off_by_an_ulp.find("[1.4142135]"), 11, "[1.4150391]");
  auto half = OptimizedAtO3(off_by_an_ulp);
  auto report = passes::LowerForOrt(*half);
  REQUIRE(report.ok());
  CHECK(report->lowered.empty());
  REQUIRE_FALSE(report->kept.empty());
  for (const passes::OrtKeptGroup& kept : report->kept) CHECK_FALSE(kept.reason.empty());
  CHECK_FALSE(half->OpsetFor("com.microsoft").has_value());
  for (const auto& node : half->graph->nodes()) CHECK(node->domain() != "com.microsoft");

  auto plain = OptimizedAtO3(Header() + R"(graph main (float[N,8] %x, float[N,8] %z) -> (float[N,8] %y)
{
  %s = Mul(%x, %z) @mul
  %t = Add(%s, %x) @add
  %y = Relu(%t) @relu
}
)");
  const std::vector<std::string> before = OpTypes(*plain->graph);
  auto kept = passes::LowerForOrt(*plain);
  REQUIRE(kept.ok());
  CHECK(kept->lowered.empty());
  REQUIRE(kept->kept.size() == 1);
  CHECK(kept->kept[0].reason == "ORT has no kernel for this group (it inlines the function)");
  CHECK(OpTypes(*plain->graph) == before);
  CHECK(plain->functions.size() == 1);
}

TEST_CASE("lower-for-ort: a float16 FastGelu is written for the CUDA EP, not for the CPU EP", "[passes][ort]") {
  // The CPU EP has no float16 FastGelu kernel and expands it between Casts; BiasGelu it keeps.
  auto cuda = OptimizedAtO3(Projection("tanh", "float16"));
  auto on_cuda = passes::LowerForOrt(*cuda);
  REQUIRE(on_cuda.ok());
  REQUIRE(on_cuda->lowered.size() == 1);
  CHECK(on_cuda->lowered[0].written == "com.microsoft::FastGelu");
  auto cpu = OptimizedAtO3(Projection("tanh", "float16"));
  auto on_cpu = passes::LowerForOrt(*cpu, {passes::OrtProvider::kCpu, {}});
  REQUIRE(on_cpu.ok());
  CHECK(on_cpu->lowered.empty());
  REQUIRE(on_cpu->kept.size() == 1);
  CHECK(on_cpu->kept[0].reason == "inlined: CPU EP: no float16 FastGelu kernel (ORT expands it between Casts)");
  CHECK_FALSE(Has(OpTypes(*cpu->graph), "com.microsoft::FastGelu"));
  auto biased = OptimizedAtO3(Projection("erf", "float16"));
  auto biased_on_cpu = passes::LowerForOrt(*biased, {passes::OrtProvider::kCpu, {}});
  REQUIRE(biased_on_cpu.ok());
  REQUIRE(biased_on_cpu->lowered.size() == 1);
  CHECK(biased_on_cpu->lowered[0].written == "com.microsoft::BiasGelu");
}

TEST_CASE("lower-for-ort is the conversion that ends the pipeline under --runtime ort", "[passes][ort]") {
  CHECK(passes::ConversionsFor("ort") == std::vector<std::string>{"lower-for-ort"});
  CHECK(passes::ConversionsFor("").empty());
  for (const std::string runtime : {"ort", ""}) {
    INFO(runtime);
    auto model = ParseInferred(Projection("erf"));
    passes::PipelineOptions options;
    options.level = 3;
    options.runtime = runtime;
    int hook_calls = 0;
    bool ort_ops_before_hook = false;
    options.before_conversion = [&](Model& optimized) {
      for (const auto& node : optimized.graph->nodes()) ort_ops_before_hook |= node->domain() == passes::kOrtDomain;
      ++hook_calls;
      return Status::Ok();
    };
    auto report = passes::RunPipeline(*model, options);
    REQUIRE(report.ok());
    CHECK(hook_calls == 1);
    CHECK_FALSE(ort_ops_before_hook);  // the hook sees the portable groups fusionopt's runtime runs
    const passes::PassStatistics& last = report->passes.back();
    if (runtime.empty()) {
      CHECK(last.pass != "lower-for-ort");
      CHECK(OpTypes(*model->graph) == std::vector<std::string>{"ai.fusionopt::FusedMatMulAddGelu"});
      continue;
    }
    CHECK(last.pass == "lower-for-ort");
    CHECK(last.changed);
    CHECK(last.matches == 1);
    CHECK(last.counters.at("com.microsoft::BiasGelu") == 1);
    CHECK(OpTypes(*model->graph) == std::vector<std::string>{"MatMul", "com.microsoft::BiasGelu"});
    const std::string json = passes::ReportToJson(*report);
    CHECK(json.find("\"ort_lowering\"") != std::string::npos);
  }
  passes::PipelineOptions disabled;
  disabled.runtime = "ort";
  disabled.disabled = {"lower-for-ort"};
  CHECK(passes::ValidatePipelineOptions(disabled).code() == ErrorCode::kUsage);
}

}  // namespace fusionopt
