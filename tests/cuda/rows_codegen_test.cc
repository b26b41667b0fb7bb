// The row-kernel generator (cuda_runtime/codegen/rows_codegen.h): LayerNorm / RMSNorm with and
// without the residual prologue, Softmax with scale and masks, trailing-axis reductions — the
// launch shape each gets, the parameter order of the contract, the choices visible in the
// source, NVRTC compiles for sm_80 and sm_90 — and the bodies it must decline.
#include <catch2/catch.hpp>

#include "attention_test_models.h"
#include "cuda_runtime/codegen/rows_codegen.h"
#include "family_codegen_test_support.h"

using namespace fusionopt;
using namespace fusionopt::cuda;
using namespace fusionopt::cuda::family_test;

namespace {

GeneratedProgram Generate(const Graph& body, const std::string& name = "rows_kernel") {
  Result<GeneratedProgram> program = GenerateRows(body, name);
  INFO(program.status().message());
  REQUIRE(program.ok());
  return std::move(program).value();
}

std::string Literal(int count, const std::string& value) {
  std::string text;
  for (int i = 0; i < count; ++i) text += (i ? ", " : "") + value;
  return "[" + text + "]";
}

// BERT's residual LayerNorm as the exporter writes it: the sum is the first output.
std::string ResidualLayerNorm(const std::string& dtype, int width) {
  const std::string row = dtype + "[2,5," + std::to_string(width) + "]";
  return "graph main (" + row + " %a, " + row + " %b, " + dtype + "[" + std::to_string(width) + "] %gamma, " + dtype +
         "[" + std::to_string(width) + "] %beta) -> (" + row + " %sum, " + row + " %y) {\n"
         "  %sum = Add(%a, %b)\n"
         "  %mean = ReduceMean(%sum) {axes: [-1], keepdims: 1}\n"
         "  %d = Sub(%sum, %mean)\n"
         "  %two = Constant() {value: tensor " + dtype + "[] [2.0]}\n"
         "  %sq = Pow(%d, %two)\n"
         "  %var = ReduceMean(%sq) {axes: [-1], keepdims: 1}\n"
         "  %eps = Constant() {value: tensor " + dtype + "[] [1e-12]}\n"
         "  %ve = Add(%var, %eps)\n"
         "  %std = Sqrt(%ve)\n"
         "  %n = Div(%d, %std)\n"
         "  %g = Mul(%n, %gamma)\n"
         "  %y = Add(%g, %beta)\n"
         "}\n";
}

}  // namespace

TEST_CASE("rows: residual LayerNorm writes the sum and the norm from one kernel", "[cuda][rows]") {
  for (const std::string dtype : {"float", "float16", "bfloat16"}) {
    DYNAMIC_SECTION(dtype) {
      auto model = ParseTyped(ResidualLayerNorm(dtype, 768));
      GeneratedProgram program = Generate(BodyOf(*model), "FusedLayerNorm_1");
      RequireGood(program);
      const GeneratedKernel& kernel = program.kernels.at(0);
      CHECK(kernel.entry == "FusedLayerNorm_1");
      // 768 elements: 128 threads of 6 registers each, one CTA per row of the 10 rows.
      CHECK(kernel.block == std::array<uint32_t, 3>{128, 1, 1});
      CHECK(kernel.grid == std::array<uint32_t, 3>{10, 1, 1});
      CHECK(ParameterNames(program.source, kernel.entry) ==
            std::vector<std::string>{"in0", "in1", "in2", "in3", "out0", "out1"});
      CHECK(program.constant_inputs.empty());
      CHECK(program.description.find("residual") != std::string::npos);
      CHECK(program.source.find("out0[row * 768LL + j]") != std::string::npos);  // the residual sum
      CHECK(program.source.find("out1[row * 768LL + j]") != std::string::npos);  // the norm
      if (dtype == "float16") CHECK(program.source.find("__float2half_rn") != std::string::npos);
    }
  }
}

TEST_CASE("rows: LayerNormalization with constant gamma and beta reads them as constant inputs", "[cuda][rows]") {
  auto model = ParseTyped("graph main (float[3,4,16] %x) -> (float[3,4,16] %y)\n  init float[16] %gamma = " +
                          Literal(16, "1.5") + "\n  init float[16] %beta = " + Literal(16, "0.25") +
                          "\n{\n  %y = LayerNormalization(%x, %gamma, %beta) {axis: -1, epsilon: 0.00001}\n}\n");
  std::unique_ptr<Graph> body = SingleNodeBody(*model);
  GeneratedProgram program = Generate(*body);
  RequireGood(program);
  // The folded gamma and beta: the node's inputs stay parameters, the kernel reads the uploads.
  REQUIRE(program.constant_inputs.size() == 2);
  CHECK(program.constant_inputs[0].find("gamma") != std::string::npos);
  CHECK(program.constant_inputs[1].find("beta") != std::string::npos);
  CHECK(ParameterNames(program.source, program.kernels[0].entry) ==
        std::vector<std::string>{"in0", "in1", "in2", "c0", "c1", "out0"});
  CHECK(program.source.find("c0[") != std::string::npos);
  CHECK(program.source.find("in1[") == std::string::npos);
  // 16 elements: one warp per row, 4 rows per CTA, 12 rows.
  CHECK(program.kernels[0].block == std::array<uint32_t, 3>{32, 4, 1});
  CHECK(program.kernels[0].grid == std::array<uint32_t, 3>{3, 1, 1});
  CHECK(program.description.find("one warp per row") != std::string::npos);
}

TEST_CASE("rows: RMSNorm (decomposed) has no mean subtraction", "[cuda][rows]") {
  auto model = ParseTyped(R"(graph main (float[4,256] %x, float[256] %gamma) -> (float[4,256] %y) {
  %two = Constant() {value: tensor float[] [2.0]}
  %sq = Pow(%x, %two)
  %ms = ReduceMean(%sq) {axes: [-1], keepdims: 1}
  %eps = Constant() {value: tensor float[] [1e-6]}
  %mse = Add(%ms, %eps)
  %r = Sqrt(%mse)
  %n = Div(%x, %r)
  %y = Mul(%n, %gamma)
})");
  GeneratedProgram program = Generate(BodyOf(*model));
  RequireGood(program);
  CHECK(program.description.find("rmsnorm") != std::string::npos);
  CHECK(program.source.find("FoSum") != std::string::npos);
  CHECK(program.source.find("mean = FoRowReduce") == std::string::npos);
  // 256 elements: 32 threads of 8 registers, a warp per row.
  CHECK(program.kernels[0].block == std::array<uint32_t, 3>{32, 4, 1});
  CHECK(program.kernels[0].grid == std::array<uint32_t, 3>{1, 1, 1});
}

TEST_CASE("rows: Softmax of scaled, masked scores", "[cuda][rows]") {
  SECTION("additive mask broadcast over heads and rows, scale by division") {
    for (const std::string dtype : {"float", "float16"}) {
      auto model = ParseTyped("graph main (" + dtype + "[2,12,128,128] %s, " + dtype + "[2,1,1,128] %mask) -> (" +
                              dtype + "[2,12,128,128] %p) {\n  %c = Constant() {value: tensor " + dtype +
                              "[] [8.0]}\n  %z = Div(%s, %c)\n  %m = Add(%z, %mask)\n  %p = Softmax(%m) {axis: -1}\n}\n");
      GeneratedProgram program = Generate(BodyOf(*model));
      RequireGood(program);
      CHECK(program.kernels[0].block == std::array<uint32_t, 3>{32, 4, 1});
      CHECK(program.kernels[0].grid == std::array<uint32_t, 3>{2 * 12 * 128 / 4, 1, 1});
      CHECK(program.source.find("expf(") != std::string::npos);
      CHECK(program.source.find(" / ") != std::string::npos);
      // The mask is read at its broadcast offset: batch only (12·128 rows share one mask row).
      CHECK(program.source.find("in1[(") != std::string::npos);
      CHECK(program.description.find("additive mask") != std::string::npos);
    }
  }
  SECTION("Where mask with a -inf fill, scale by a product") {
    auto model = ParseTyped(R"(graph main (float[1,4,9,9] %s, bool[1,1,9,9] %allowed) -> (float[1,4,9,9] %p) {
  %c = Constant() {value: tensor float[] [0.125]}
  %z = Mul(%c, %s)
  %f = Constant() {value: tensor float[] [-inf]}
  %m = Where(%allowed, %z, %f)
  %p = Softmax(%m) {axis: 3}
})");
    GeneratedProgram program = Generate(BodyOf(*model));
    RequireGood(program);
    CHECK(program.source.find("== false) z = __int_as_float(0xff800000)") != std::string::npos);
    CHECK(program.description.find("Where mask") != std::string::npos);
  }
  SECTION("a long row takes a CTA") {
    auto model = ParseTyped(R"(graph main (float[3,5000] %x) -> (float[3,5000] %y) {
  %y = Softmax(%x) {axis: -1}
})");
    GeneratedProgram program = Generate(BodyOf(*model));
    RequireGood(program);
    CHECK(program.kernels[0].block == std::array<uint32_t, 3>{1024, 1, 1});
    CHECK(program.kernels[0].grid == std::array<uint32_t, 3>{3, 1, 1});
    CHECK(program.source.find("float v[5]") != std::string::npos);
  }
}

TEST_CASE("rows: trailing-axis reductions", "[cuda][rows]") {
  SECTION("each op, keepdims both ways") {
    for (const std::string op : {"ReduceMean", "ReduceSum", "ReduceMax", "ReduceMin"}) {
      for (int keepdims : {0, 1}) {
        DYNAMIC_SECTION(op << " keepdims " << keepdims) {
          const std::string out = keepdims ? "float[6,7,1]" : "float[6,7]";
          auto model = ParseTyped("graph main (float[6,7,300] %x) -> (" + out + " %y) {\n  %y = " + op +
                                  "(%x) {axes: [-1], keepdims: " + std::to_string(keepdims) + "}\n}\n");
          GeneratedProgram program = Generate(*SingleNodeBody(*model));
          RequireGood(program);
          CHECK(ParameterNames(program.source, program.kernels[0].entry) == std::vector<std::string>{"in0", "out0"});
          // 300 elements: 64 threads, one CTA per row.
          CHECK(program.kernels[0].block == std::array<uint32_t, 3>{64, 1, 1});
          CHECK(program.kernels[0].grid == std::array<uint32_t, 3>{42, 1, 1});
          CHECK((program.source.find("/ 300.0f") != std::string::npos) == (op == "ReduceMean"));
        }
      }
    }
  }
  SECTION("axes as a constant input (opset 18), two trailing axes") {
    auto model = ParseTyped(R"(graph main (float16[2,3,4,5] %x) -> (float16[2,3] %y)
  init int64[2] %axes = [-1, 2]
{
  %y = ReduceSum(%x, %axes) {keepdims: 0}
})", 18);
    GeneratedProgram program = Generate(*SingleNodeBody(*model));
    RequireGood(program);
    CHECK(program.description.find("of 20") != std::string::npos);
    CHECK(program.kernels[0].grid == std::array<uint32_t, 3>{2, 1, 1});  // 6 rows, 4 per CTA
  }
}

TEST_CASE("rows: bodies of other families and unsupported forms are declined with a reason", "[cuda][rows]") {
  SECTION("an elementwise op") {
    auto model = ParseTyped("graph main (float[4,8] %x) -> (float[4,8] %y) {\n  %y = Relu(%x)\n}\n");
    RequireDeclined(GenerateRows(BodyOf(*model), "k").status(), "no LayerNorm");
  }
  SECTION("a data-movement op") {
    auto model = ParseTyped("graph main (float[4,8] %x) -> (float[8,4] %y) {\n  %y = Transpose(%x)\n}\n");
    RequireDeclined(GenerateRows(BodyOf(*model), "k").status(), "no LayerNorm");
  }
  SECTION("an attention body") {
    auto model = ParseTyped(attention_test::HeadsFirst("[1,1,7,7]").substr(attention_test::kHeader.size()));
    RequireDeclined(GenerateRows(BodyOf(*model), "k").status(), "no LayerNorm");
  }
  SECTION("GELU is elementwise") {
    auto model = ParseTyped(R"(graph main (float[4,8] %x) -> (float[4,8] %y) {
  %y = Gelu(%x)
})", 20);
    RequireDeclined(GenerateRows(BodyOf(*model), "k").status(), "elementwise");
  }
  SECTION("Softmax over a non-last axis") {
    auto model = ParseTyped(R"(graph main (float[2,3,4] %x) -> (float[2,3,4] %y) {
  %y = Softmax(%x) {axis: 1}
})");
    RequireDeclined(GenerateRows(BodyOf(*model), "k").status(), "only the last axis");
  }
  SECTION("Softmax relying on the opset's default axis") {
    auto model = ParseTyped(R"(graph main (float[2,3,4] %x) -> (float[2,3,4] %y) {
  %y = Softmax(%x)
})");
    RequireDeclined(GenerateRows(BodyOf(*model), "k").status(), "default axis");
  }
  SECTION("a reduction over a leading axis") {
    auto model = ParseTyped(R"(graph main (float[2,3,4] %x) -> (float[3,4] %y) {
  %y = ReduceSum(%x) {axes: [0], keepdims: 0}
})", 12);
    RequireDeclined(GenerateRows(*SingleNodeBody(*model), "k").status(), "trailing run");
  }
  SECTION("a reduction of integers") {
    auto model = ParseTyped(R"(graph main (int32[2,3,4] %x) -> (int32[2,3,1] %y) {
  %y = ReduceMax(%x) {axes: [-1], keepdims: 1}
})");
    RequireDeclined(GenerateRows(*SingleNodeBody(*model), "k").status(), "int32");
  }
  SECTION("a row longer than the register budget") {
    auto model = ParseTyped(R"(graph main (float[2,40000] %x) -> (float[2,40000] %y) {
  %y = Softmax(%x) {axis: -1}
})");
    RequireDeclined(GenerateRows(BodyOf(*model), "k").status(), "longer than 32768");
  }
}
