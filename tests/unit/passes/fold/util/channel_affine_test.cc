// Folding a per-channel affine map into a contraction's weights (passes/fold/util/channel_affine.h),
// asked directly: which contractions can absorb one and why not, and the folded weights and
// bias of a Conv and of a Gemm with transB, number for number.
#include <catch2/catch.hpp>

#include "pass_test_support.h"
#include "passes/fold/util/channel_affine.h"

using namespace fusionopt;
using namespace fusionopt::passes;
using pass_test::FindNode;
using pass_test::ParseInferred;

namespace {

const ChannelAffine kAffine{{2.0, -0.5}, {1.0, 0.25}};  // s, t over 2 channels

std::vector<double> Values(const Value* value) {
  REQUIRE(value != nullptr);
  REQUIRE(value->initializer() != nullptr);
  return *value->initializer()->AsDoubles();
}

}  // namespace

TEST_CASE("channel affine: a Conv's weights scale per output channel, its bias becomes b·s + t", "[passes]") {
  auto model = ParseInferred(R"(ir_version 8
opset "" 17
graph main (float[1,1,2,2] %x) -> (float[1,2,1,1] %z)
  init float[2,1,2,2] %w = [1, 2, 3, 4, 5, 6, 7, 8]
  init float[2] %b = [0.5, -1]
  init float[2,1,1] %s = [2, -0.5]
{
  %y = Conv(%x, %w, %b) @conv
  %z = Mul(%y, %s) @scale
}
)");
  Node& conv = *FindNode(*model->graph, "conv");
  auto target = AnalyzeAffineTarget(conv, *model, /*allow_matmul=*/false);
  REQUIRE(target.ok());
  AffineTarget& found = *target;
  CHECK(found.channels == 2);
  CHECK_FALSE(WhyNotFold(found, kAffine, kDefaultMaterializeBytes));
  // The map stands for the Mul after it (and a shift the test adds to its bias).
  Node* scale = FindNode(*model->graph, "scale");
  FoldAffine(*model->graph, found, kAffine, {scale}, *scale->output(0));
  CHECK(pass_test::OpTypes(*model->graph) == std::vector<std::string>{"Conv"});
  CHECK(conv.output(0)->name() == "z");
  CHECK(Values(conv.input(1)) == std::vector<double>{2, 4, 6, 8, -2.5, -3, -3.5, -4});
  CHECK(Values(conv.input(2)) == std::vector<double>{0.5 * 2 + 1, -1 * -0.5 + 0.25});
}

TEST_CASE("channel affine: a Gemm with transB scales rows of B", "[passes]") {
  auto model = ParseInferred(R"(ir_version 8
opset "" 17
graph main (float[3,2] %a) -> (float[3,2] %z)
  init float[2,2] %w = [1, 2, 3, 4]
  init float[2] %s = [2, -0.5]
{
  %y = Gemm(%a, %w) {transB: 1} @gemm
  %z = Mul(%y, %s) @scale
}
)");
  Node& gemm = *FindNode(*model->graph, "gemm");
  auto target = AnalyzeAffineTarget(gemm, *model, false);
  REQUIRE(target.ok());
  Node* scale = FindNode(*model->graph, "scale");
  FoldAffine(*model->graph, *target, kAffine, {scale}, *scale->output(0));
  CHECK(Values(gemm.input(1)) == std::vector<double>{2, 4, -1.5, -2});  // row n of B is output channel n
  CHECK(Values(gemm.input(2)) == std::vector<double>{1.0, 0.25});       // no bias before: t
}

TEST_CASE("channel affine: near misses say why", "[passes]") {
  auto model = ParseInferred(R"(ir_version 8
opset "" 17
graph main (float[3,2] %a, float[2,2] %runtime) -> (float[3,2] %y, float[3,2] %z)
  init float[2,2] %w = [1, 2, 3, 4]
{
  %y = MatMul(%a, %w) @matmul
  %z = Gemm(%a, %runtime) @computed
}
)");
  auto matmul = AnalyzeAffineTarget(*FindNode(*model->graph, "matmul"), *model, /*allow_matmul=*/false);
  CHECK_FALSE(matmul.ok());
  CHECK(AnalyzeAffineTarget(*FindNode(*model->graph, "matmul"), *model, true).ok());
  auto computed = AnalyzeAffineTarget(*FindNode(*model->graph, "computed"), *model, false);
  REQUIRE_FALSE(computed.ok());
  CHECK(computed.why_not());
}
