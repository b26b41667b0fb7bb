// BatchNormalization lowered to a multiply-add for the CUDA generators: the structure of the
// rewrite, the same numbers as the CPU runtime's BatchNormalization, and the bodies it leaves
// alone.
#include <catch2/catch.hpp>

#include <cmath>

#include "cpu_runtime/engine/inputs.h"
#include "cpu_runtime/engine/session.h"
#include "cuda_runtime/codegen/generate.h"
#include "cuda_runtime/codegen/lower_batchnorm.h"
#include "cuda_runtime/codegen/typed_body.h"
#include "text_format/text_format.h"

using namespace fusionopt;

namespace {

std::string BatchNormModel(const std::string& extra_attribute = "", const std::string& mean_source = "init") {
  std::string mean = mean_source == "init" ? "  init float[3] %mean = [0.5, -1.0, 2.0]\n" : "";
  std::string inputs = mean_source == "init" ? "" : ", float[3] %mean";
  return "ir_version 8\nopset \"\" 17\ngraph bn (float[2,3,4,5] %x" + inputs + ") -> (float[2,3,4,5] %y)\n" +
         "  init float[3] %scale = [1.5, 0.25, -2.0]\n  init float[3] %bias = [0.1, 0.2, 0.3]\n" + mean +
         "  init float[3] %var = [4.0, 0.01, 1.0]\n{\n" +
         "  %y = BatchNormalization(%x, %scale, %bias, %mean, %var) {epsilon: 0.001" + extra_attribute + "}\n}\n";
}

// The lowered body of the model's one node, wrapped in a model the CPU runtime can run.
std::unique_ptr<Model> LoweredModel(const Model& model) {
  auto body = cuda::TypedBodyOf(model, *model.graph->nodes().front());
  REQUIRE(body.ok());
  std::unique_ptr<Graph> lowered = cuda::LowerBatchNormalization(**body);
  if (!lowered) return nullptr;
  auto wrapped = std::make_unique<Model>();
  wrapped->ir_version = 8;
  wrapped->opsets = model.opsets;
  wrapped->graph = std::move(lowered);
  return wrapped;
}

}  // namespace

TEST_CASE("inference BatchNormalization lowers to Mul and Add with [C,1,1] constants", "[cuda][codegen]") {
  auto model = ParseModel(BatchNormModel());
  REQUIRE(model.ok());
  std::unique_ptr<Model> lowered = LoweredModel(**model);
  REQUIRE(lowered != nullptr);
  std::vector<std::string> ops;
  for (const auto& node : lowered->graph->nodes()) ops.push_back(node->op_type());
  REQUIRE(ops == std::vector<std::string>{"Mul", "Add"});
  const Node& mul = *lowered->graph->nodes().front();
  const TensorPtr multiplier = mul.input(1)->initializer();
  REQUIRE(multiplier != nullptr);
  REQUIRE(multiplier->dims() == std::vector<int64_t>{3, 1, 1});
  // a = scale / sqrt(var + eps): channel 1 is 0.25 / sqrt(0.011).
  REQUIRE(multiplier->values<float>()[1] == Approx(0.25 / std::sqrt(0.011)).epsilon(1e-6));

  SECTION("the numbers equal the CPU runtime's BatchNormalization") {
    auto x = cpu::RandomTensor(DataType::kFloat, {2, 3, 4, 5}, 7);
    REQUIRE(x.ok());
    auto reference = cpu::Session::Create(**model);
    auto candidate = cpu::Session::Create(*lowered);
    REQUIRE(reference.ok());
    REQUIRE(candidate.ok());
    auto want = (*reference)->Run({{"x", *x}});
    // The typed body keeps one input per node input; the constant ones are no longer read.
    std::vector<cpu::NamedTensor> feeds = {{"x", *x}};
    for (const char* name : {"scale", "bias", "mean", "var"}) feeds.push_back({name, cpu::RtTensor::Allocate(DataType::kFloat, {3})});
    auto got = (*candidate)->Run(feeds);
    INFO((got.ok() ? std::string() : got.status().message()));
    REQUIRE(want.ok());
    REQUIRE(got.ok());
    const float* expected = (*want)[0].tensor.data<float>();
    const float* actual = (*got)[0].tensor.data<float>();
    for (int i = 0; i < 120; ++i) REQUIRE(actual[i] == Approx(expected[i]).epsilon(1e-5).margin(1e-6));
  }
  SECTION("the elementwise generator takes the lowered body") {
    auto program = cuda::GenerateKernel(*lowered->graph, "bn");
    REQUIRE(program.ok());
    REQUIRE(program->kernels.size() == 1);
  }
}

TEST_CASE("BatchNormalization the lowering cannot fold is left alone", "[cuda][codegen]") {
  SECTION("training mode") {
    auto model = ParseModel(BatchNormModel(", training_mode: 1"));
    REQUIRE(model.ok());
    REQUIRE(LoweredModel(**model) == nullptr);
  }
  SECTION("a mean fed at run time") {
    auto model = ParseModel(BatchNormModel("", "input"));
    REQUIRE(model.ok());
    REQUIRE(LoweredModel(**model) == nullptr);
  }
  SECTION("a body without BatchNormalization") {
    auto model = ParseModel("ir_version 8\nopset \"\" 17\ngraph r (float[4] %x) -> (float[4] %y)\n{\n  %y = Relu(%x)\n}\n");
    REQUIRE(model.ok());
    REQUIRE(LoweredModel(**model) == nullptr);
  }
}
