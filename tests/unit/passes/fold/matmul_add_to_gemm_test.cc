// matmul-add-to-gemm: a 2-D MatMul and its bias Add become one Gemm; batched MatMuls, shared
// products, biases that would broadcast the output and dtypes Gemm lacks stay, with reasons.
#include "pass_harness.h"

using namespace fusionopt;
using namespace fusionopt::pass_test;

namespace {

constexpr const char* kPass = "matmul-add-to-gemm";

// MatMul(a: `a_type`, w: float[3,4]) + Add(bias: `bias_type`), the bias a graph input.
std::string MatMulAdd(const std::string& a_type, const std::string& bias_type, const std::string& add = "Add(%m, %bias)",
                      int opset = 17) {
  return "ir_version 8\nopset \"\" " + std::to_string(opset) + "\ngraph main (" + a_type + " %a, " + bias_type +
         R"( %bias) -> (float %y)
  init float[3,4] %w = )" +
         Spread(12, 1) + R"(
{
  %m = MatMul(%a, %w) @matmul
  %y = )" + add + R"( @add
}
)";
}

}  // namespace

TEST_CASE("matmul-add-to-gemm turns MatMul + bias Add into Gemm, bias on either side", "[passes]") {
  const std::string expected = R"(
ir_version 8
opset "" 17
graph main (float[2,3] %a, float[4] %bias) -> (float %y)
  init float[3,4] %w = )" + Spread(12, 1) + R"(
{
  %y = Gemm(%a, %w, %bias) @matmul
}
)";
  ExpectRewrite(MatMulAdd("float[2,3]", "float[4]"), kPass, expected);
  ExpectRewrite(MatMulAdd("float[2,3]", "float[4]", "Add(%bias, %m)"), kPass, expected);
}

TEST_CASE("matmul-add-to-gemm accepts every one-way broadcast of the bias, symbolic rows included", "[passes]") {
  for (const char* bias : {"float[1,4]", "float[2,4]", "float[2,1]", "float[]", "float[1]"}) {
    INFO(bias);
    ExpectRewriteOps(MatMulAdd("float[2,3]", bias), kPass, {"Gemm"});
  }
  ExpectRewriteOps(MatMulAdd("float[M,3]", "float[M,4]"), kPass, {"Gemm"});
  ExpectRewriteOps(MatMulAdd("float[M,3]", "float[4]"), kPass, {"Gemm"});
}

TEST_CASE("matmul-add-to-gemm keeps batched MatMuls", "[passes]") {
  ExpectUnchanged(MatMulAdd("float[2,5,3]", "float[4]"), kPass, "batched MatMul (A of rank > 2; Gemm is 2-D)");
  ExpectUnchanged(MatMulAdd("float[B,S,3]", "float[4]"), kPass, "batched MatMul (A of rank > 2; Gemm is 2-D)");
}

TEST_CASE("matmul-add-to-gemm needs a bias that leaves the output shape as it is", "[passes]") {
  ExpectUnchanged(MatMulAdd("float[2,3]", "float[3,4]"), kPass, "bias does not broadcast one way to [M, N]");
  ExpectUnchanged(MatMulAdd("float[2,3]", "float[5,2,4]"), kPass, "bias does not broadcast one way to [M, N]");
  // Rows M against a bias of N rows: the symbols differ, so they may too.
  ExpectUnchanged(MatMulAdd("float[M,3]", "float[N,4]"), kPass, "bias does not broadcast one way to [M, N]");
  ExpectUnchanged(MatMulAdd("float[2,3]", "float"), kPass, "bias does not broadcast one way to [M, N]");
}

TEST_CASE("matmul-add-to-gemm leaves shared products, 1-D operands, other dtypes and old opsets", "[passes]") {
  ExpectUnchanged(R"(
ir_version 8
opset "" 17
graph main (float[2,3] %a, float[4] %bias) -> (float[2,4] %y, float[2,4] %r)
  init float[3,4] %w = )" + Spread(12, 1) + R"(
{
  %m = MatMul(%a, %w) @matmul
  %y = Add(%m, %bias) @add
  %r = Relu(%m) @relu
}
)",
                  kPass, "MatMul output has other readers or is a graph output");
  ExpectUnchanged(R"(
ir_version 8
opset "" 17
graph main (float[2,3] %a, float[2] %bias) -> (float[2] %y)
  init float[3] %v = [1.0, 2.0, 3.0]
{
  %m = MatMul(%a, %v) @matmul
  %y = Add(%m, %bias) @add
}
)",
                  kPass, "A or B is not 2-D");
  ExpectUnchanged(R"(
ir_version 8
opset "" 17
graph main (int32[2,3] %a, int32[3,4] %w, int32[4] %bias) -> (int32[2,4] %y)
{
  %m = MatMul(%a, %w) @matmul
  %y = Add(%m, %bias) @add
}
)",
                  kPass, "dtype Gemm does not take at this opset");
  ExpectUnchanged(MatMulAdd("float[2,3]", "float[4]", "Add(%m, %bias)", 6), kPass, "Gemm before opset 7");
  ExpectUnchanged(MatMulAdd("float", "float[4]"), kPass, "rank of A or B unknown");
}
