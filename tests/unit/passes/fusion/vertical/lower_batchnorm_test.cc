// lower-batchnorm: an inference BatchNormalization that no contraction absorbed becomes a
// per-channel Mul and Add with the folded constants (same numbers, float32 and float16); a
// training-mode one, computed statistics and an input of unknown channels stay, with reasons.
#include "pass_harness.h"

using namespace fusionopt;
using namespace fusionopt::pass_test;

namespace {

constexpr const char* kPass = "lower-batchnorm";

// DenseNet's pre-activation: BatchNormalization then Relu of a graph input.
std::string PreActivation(const std::string& x_type = "float[2,3,4,4]", const std::string& attributes = "",
                          const std::string& mean = "%mean") {
  const std::string dtype = x_type.substr(0, x_type.find('['));
  return R"(ir_version 8
opset "" 17
graph main ()" + x_type + R"( %x, float[3] %runtime_mean) -> ()" + dtype + R"( %y)
  init )" + dtype + R"([3] %gamma = [1.5, -0.5, 2.0]
  init )" + dtype + R"([3] %beta = [0.25, 0.0, -1.0]
  init )" + dtype + R"([3] %mean = [0.5, -0.25, 1.0]
  init )" + dtype + R"([3] %var = [0.25, 1.0, 4.0]
{
  %n = BatchNormalization(%x, %gamma, %beta, )" + mean + R"(, %var))" + attributes + R"( @bn
  %y = Relu(%n) @relu
}
)";
}

}  // namespace

TEST_CASE("lower-batchnorm writes a BatchNormalization as a per-channel Mul and Add", "[passes]") {
  for (const char* type : {"float[2,3,4,4]", "float[N,3,5]", "float16[2,3,4,4]"}) {
    INFO(type);
    auto model =
        ExpectRewriteOps(PreActivation(type), kPass, {"Mul", "Add", "Relu"}, {.numbers = {.tolerance = {1e-3, 1e-3}}})
            .model;
    const Node& mul = *model->graph->nodes().front();
    CHECK(mul.name() == "bn_scale");
    // [C, 1, ...]: one dim fewer than the input, broadcast over the dims after the channels.
    const size_t rank = std::string(type).find("5]") != std::string::npos ? 3 : 4;
    CHECK(mul.input(1)->shape()->size() == rank - 1);
    CHECK((*mul.input(1)->shape())[0] == Dim::Known(3));
  }
  Rewritten rewritten = Rewrite(PreActivation(), kPass);
  CHECK(rewritten.Counter("batchnorms_lowered") == 1);
}

TEST_CASE("lower-batchnorm leaves training mode, computed statistics and unknown channels", "[passes]") {
  ExpectUnchanged(PreActivation("float[2,3,4,4]", " {training_mode: 1}"), kPass, "training mode");
  ExpectUnchanged(PreActivation("float[2,3,4,4]", "", "%runtime_mean"), kPass, "non-constant statistics");
  ExpectUnchanged(PreActivation("float[2,C,4,4]"), kPass, "channel count unknown");
}
