// shape_facts' ReshapeOperand: the Reshape operand that spells a target from an input's shape at
// every run, the rule merge-reshapes and unflatten-batch-matmuls share, and the targets it
// refuses because some size would leave the operand meaning something else.
#include <catch2/catch.hpp>

#include "passes/util/shape_facts.h"
#include "shape_inference_test_helpers.h"

using namespace fusionopt;
using passes::ReshapeOperand;
using Operand = std::optional<std::vector<int64_t>>;

namespace {

Shape Of(std::string_view text) { return testing::ParseShape(text); }

}  // namespace

TEST_CASE("ReshapeOperand spells known sizes, copies symbols in place and infers one dim beside known sizes", "[passes]") {
  CHECK(ReshapeOperand(Of("[B,4,S]"), Of("[B,4,S,1]")) == Operand({0, 4, 0, 1}));
  CHECK(ReshapeOperand(Of("[6,4]"), Of("[2,3,4]")) == Operand({2, 3, 4}));
  CHECK(ReshapeOperand(Of("[B,12]"), Of("[B,3,4]")) == Operand({0, 3, 4}));
  CHECK(ReshapeOperand(Of("[2,N]"), Of("[N,2]")) == Operand({-1, 2}));  // N is the count over 2
}

TEST_CASE("ReshapeOperand refuses what some run would read differently", "[passes]") {
  // A -1 beside a copied dim: where B is 0 the -1 is undefined, and the original was not.
  CHECK(ReshapeOperand(Of("[B,8]"), Of("[B,S,2]")) == std::nullopt);
  // S moved off its position cannot be copied (BLOOM's ALiBi [B,4,S] as [B,4,1,S]: an Unsqueeze).
  CHECK(ReshapeOperand(Of("[B,4,S]"), Of("[B,4,1,S]")) == std::nullopt);
  CHECK(ReshapeOperand(Of("[A,B]"), Of("[B,A]")) == std::nullopt);  // two dims to infer
  CHECK(ReshapeOperand(Of("[0,4]"), Of("[0,2,2]")) == std::nullopt);  // a known 0 means "copy"
}
