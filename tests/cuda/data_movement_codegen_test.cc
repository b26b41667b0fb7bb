// The data-movement and pooling generators (cuda_runtime/codegen/data_movement_codegen.h,
// pooling_codegen.h) on single standard ops, typed the way the plugin types them (constant
// arguments folded): the index expressions folded into each kernel, launch configurations,
// parameter order, NVRTC compiles for sm_80 and sm_90; views and ops of other families declined.
#include <catch2/catch.hpp>

#include "cuda_runtime/codegen/data_movement_codegen.h"
#include "cuda_runtime/codegen/pooling_codegen.h"
#include "family_codegen_test_support.h"

using namespace fusionopt;
using namespace fusionopt::cuda;
using namespace fusionopt::cuda::family_test;

namespace {

// The program for the model's single op, through `generate`.
template <typename Generate>
GeneratedProgram ProgramOf(const std::string& graph, Generate generate, int opset = 17) {
  auto model = ParseTyped(graph, opset);
  std::unique_ptr<Graph> body = SingleNodeBody(*model);
  Result<GeneratedProgram> program = generate(*body, "op_kernel");
  INFO(program.status().message());
  REQUIRE(program.ok());
  RequireGood(program.value());
  return std::move(program).value();
}

GeneratedProgram Move(const std::string& graph, int opset = 17) { return ProgramOf(graph, GenerateDataMovement, opset); }
GeneratedProgram Pool(const std::string& graph, int opset = 17) { return ProgramOf(graph, GeneratePooling, opset); }

Status DeclinedMove(const std::string& graph, int opset = 17) {
  auto model = ParseTyped(graph, opset);
  return GenerateDataMovement(*SingleNodeBody(*model), "k").status();
}

bool Contains(const std::string& text, const std::string& part) { return text.find(part) != std::string::npos; }

}  // namespace

TEST_CASE("data movement: Transpose folds the permuted strides", "[cuda][data_movement]") {
  GeneratedProgram program = Move(R"(graph main (float[2,3,4] %x) -> (float[4,2,3] %y) {
  %y = Transpose(%x) {perm: [2, 0, 1]}
})");
  // Output (o0, o1, o2) reads input (o1, o2, o0): strides 12, 4, 1.
  CHECK(Contains(program.source, "[((long long)(o0) + (long long)(o1) * 12LL + (long long)(o2) * 4LL)]"));
  CHECK(program.kernels[0].block == std::array<uint32_t, 3>{256, 1, 1});
  CHECK(program.kernels[0].grid == std::array<uint32_t, 3>{1, 1, 1});
  CHECK(ParameterNames(program.source, "op_kernel") == std::vector<std::string>{"in0", "out0"});
  CHECK(Contains(program.source, "reinterpret_cast<unsigned int*>(out0)[i]"));
}

TEST_CASE("data movement: Concat, Split, Slice, Gather", "[cuda][data_movement]") {
  SECTION("Concat along axis 1 of three inputs") {
    GeneratedProgram program = Move(R"(graph main (float16[2,1,4] %a, float16[2,3,4] %b, float16[2,2,4] %c) -> (float16[2,6,4] %y) {
  %y = Concat(%a, %b, %c) {axis: 1}
})");
    CHECK(Contains(program.source, "if (o1 < 1) "));
    CHECK(Contains(program.source, "else if (o1 < 4) "));
    CHECK(Contains(program.source, "else if (o1 < 6) "));
    CHECK(Contains(program.source, "(long long)((o1 - 1)) * 4LL"));  // b's rows start at 1
    CHECK(ParameterNames(program.source, "op_kernel") == std::vector<std::string>{"in0", "in1", "in2", "out0"});
  }
  SECTION("Split into three outputs in one launch, sizes a constant input") {
    GeneratedProgram program = Move(R"(graph main (float[4,10] %x) -> (float[4,2] %a, float[4,3] %b, float[4,5] %c)
  init int64[3] %sizes = [2, 3, 5]
{
  %a, %b, %c = Split(%x, %sizes) {axis: -1}
})");
    REQUIRE(program.kernels.size() == 1);
    CHECK(Contains(program.source, "i < (int)40LL"));  // walks the input
    CHECK(Contains(program.source, "reinterpret_cast<unsigned int*>(out2)[((long long)(o0) * 5LL + (long long)((o1 - 5)))]"));
    CHECK(ParameterNames(program.source, "op_kernel") == std::vector<std::string>{"in0", "in1", "out0", "out1", "out2"});
  }
  SECTION("Slice with a negative step and a clamped end") {
    GeneratedProgram program = Move(R"(graph main (float[5,8] %x) -> (float[5,3] %y)
  init int64[1] %starts = [-1]
  init int64[1] %ends = [-100]
  init int64[1] %axes = [1]
  init int64[1] %steps = [-3]
{
  %y = Slice(%x, %starts, %ends, %axes, %steps)
})");
    // Column 7, then 4, then 1: 7 - 3·o1.
    CHECK(Contains(program.source, "[((long long)(o0) * 8LL + (long long)(o1) * -3LL + 7LL)]"));
  }
  SECTION("Slice whose starts are computed at run time reads them once per thread") {
    GeneratedProgram program = Move(R"(graph main (float[5,8] %x, int64[1] %starts) -> (float[5,4] %y)
  init int64[1] %ends = [8]
  init int64[1] %axes = [1]
{
  %y = Slice(%x, %starts, %ends, %axes)
})");
    CHECK(Contains(program.description, "run time"));
    CHECK(Contains(program.source, "long long start = (long long)in1[k];"));
    CHECK(Contains(program.source, "long long axis = (long long)c0[k];"));  // the folded axes
    CHECK(Contains(program.source, "first[1] + (long long)(o1) * step[1]"));
    CHECK(ParameterNames(program.source, "op_kernel") == std::vector<std::string>{"in0", "in1", "in2", "in3", "c0", "out0"});
  }
  SECTION("Gather on axis -2 with int64 indices, negatives wrapped") {
    GeneratedProgram program = Move(R"(graph main (float[3,7,4] %x, int64[2,5] %idx) -> (float[3,2,5,4] %y) {
  %y = Gather(%x, %idx) {axis: -2}
})");
    CHECK(Contains(program.source, "if (index < 0) index += 7LL;"));
    CHECK(Contains(program.source, "in1[((long long)(o1) * 5LL + (long long)(o2))]"));
    CHECK(Contains(program.source, "index * 4LL"));
    CHECK(Contains(program.source, "((long long)(o0) * 28LL + (long long)(o3))"));
  }
}

TEST_CASE("data movement: Expand, Tile, Pad, DepthToSpace, SpaceToDepth", "[cuda][data_movement]") {
  SECTION("Expand broadcasts by index arithmetic") {
    GeneratedProgram program = Move(R"(graph main (bool[3,1] %x) -> (bool[2,3,4] %y)
  init int64[3] %shape = [2, 3, 4]
{
  %y = Expand(%x, %shape)
})");
    CHECK(Contains(program.source, "reinterpret_cast<const unsigned char*>(in0)[((long long)(o1))]"));
  }
  SECTION("Tile wraps coordinates") {
    GeneratedProgram program = Move(R"(graph main (int64[2,3] %x) -> (int64[4,3] %y)
  init int64[2] %repeats = [2, 1]
{
  %y = Tile(%x, %repeats)
})");
    CHECK(Contains(program.source, "(long long)((o0 % 2)) * 3LL"));
    CHECK(Contains(program.source, "unsigned long long"));
  }
  SECTION("constant Pad: folded value bits, or the value read at run time") {
    GeneratedProgram folded = Move(R"(graph main (float[2,3] %x) -> (float[4,3] %y)
  init int64[4] %pads = [1, 0, 1, 0]
  init float[] %value = [1.0]
{
  %y = Pad(%x, %pads, %value)
})");
    CHECK(Contains(folded.source, "(unsigned int)1065353216ULL"));  // 1.0f
    GeneratedProgram runtime = Move(R"(graph main (float[2,3] %x, float[] %value) -> (float[2,1] %y)
  init int64[4] %pads = [0, 0, 0, -2]
{
  %y = Pad(%x, %pads, %value)
})");
    CHECK(Contains(runtime.source, "reinterpret_cast<const unsigned int*>(in2)[0]"));
    CHECK(Contains(runtime.source, "(long long)(0) - 0LL"));  // the cropped axis of size 1
  }
  SECTION("DepthToSpace CRD and SpaceToDepth") {
    GeneratedProgram to_space = Move(R"(graph main (float[1,8,2,3] %x) -> (float[1,2,4,6] %y) {
  %y = DepthToSpace(%x) {blocksize: 2, mode: "CRD"}
})");
    CHECK(Contains(to_space.description, "depth to space"));
    GeneratedProgram to_depth = Move(R"(graph main (float[1,2,4,6] %x) -> (float[1,8,2,3] %y) {
  %y = SpaceToDepth(%x) {blocksize: 2}
})");
    CHECK(Contains(to_depth.description, "space to depth"));
  }
}

TEST_CASE("data movement: views and other families are declined", "[cuda][data_movement]") {
  SECTION("views launch nothing") {
    RequireDeclined(DeclinedMove(R"(graph main (float[2,3] %x) -> (float[6] %y)
  init int64[1] %shape = [6]
{
  %y = Reshape(%x, %shape)
})"), "a view: no kernel");
    RequireDeclined(DeclinedMove(R"(graph main (float[2,3] %x) -> (float[2,3] %y) {
  %y = Identity(%x)
})"), "a view: no kernel");
  }
  SECTION("an elementwise op") {
    RequireDeclined(DeclinedMove(R"(graph main (float[2,3] %x) -> (float[2,3] %y) {
  %y = Relu(%x)
})"), "not a data-movement op");
  }
}

TEST_CASE("pooling: windows with pads, strides, dilations, ceil_mode", "[cuda][pooling]") {
  SECTION("MaxPool 3x3 stride 2 pad 1 (ResNet's stem)") {
    GeneratedProgram program = Pool(R"(graph main (float[1,64,112,112] %x) -> (float[1,64,56,56] %y) {
  %y = MaxPool(%x) {kernel_shape: [3, 3], strides: [2, 2], pads: [1, 1, 1, 1]}
})");
    CHECK(Contains(program.source, "const int y = oh * 2 - 1 + kh * 1;"));
    CHECK(Contains(program.source, "if (count == 1 || value > result) result = value;"));
    CHECK(program.kernels[0].grid[0] == (64 * 56 * 56 + 255) / 256);
  }
  SECTION("dilated MaxPool with ceil_mode") {
    GeneratedProgram program = Pool(R"(graph main (float16[1,2,7,7] %x) -> (float16[1,2,3,3] %y) {
  %y = MaxPool(%x) {kernel_shape: [2, 2], strides: [2, 2], dilations: [2, 2], ceil_mode: 1}
})");
    CHECK(Contains(program.source, "kh * 2;"));
  }
  SECTION("AveragePool counting the padding") {
    GeneratedProgram program = Pool(R"(graph main (float[1,3,5,5] %x) -> (float[1,3,3,3] %y) {
  %y = AveragePool(%x) {kernel_shape: [3, 3], strides: [2, 2], pads: [1, 1, 1, 1], count_include_pad: 1}
})");
    CHECK(Contains(program.source, "padded_h += y >= -1 && y < 6;"));
    CHECK(Contains(program.source, "const int divisor = padded_h * padded_w;"));
  }
  SECTION("AveragePool SAME_UPPER resolves its pads") {
    GeneratedProgram program = Pool(R"(graph main (float[1,1,6,6] %x) -> (float[1,1,3,3] %y) {
  %y = AveragePool(%x) {kernel_shape: [3, 3], strides: [2, 2], auto_pad: "SAME_UPPER"}
})");
    // Total padding (3-1)·2 + 3 - 6 = 1: none before, one after.
    CHECK(Contains(program.source, "const int y = oh * 2 - 0 + kh * 1;"));
    CHECK(Contains(program.source, "result / (float)count"));
  }
}

TEST_CASE("pooling: global pools, and what pooling declines", "[cuda][pooling]") {
  SECTION("GlobalAveragePool: a warp per plane") {
    GeneratedProgram program = Pool(R"(graph main (float[2,2048,7,7] %x) -> (float[2,2048,1,1] %y) {
  %y = GlobalAveragePool(%x)
})");
    CHECK(program.kernels[0].block == std::array<uint32_t, 3>{256, 1, 1});
    CHECK(program.kernels[0].grid == std::array<uint32_t, 3>{2 * 2048 / 8, 1, 1});
    CHECK(Contains(program.source, "result / 49.0f"));
  }
  SECTION("GlobalMaxPool") {
    GeneratedProgram program = Pool(R"(graph main (bfloat16[1,3,4,4] %x) -> (bfloat16[1,3,1,1] %y) {
  %y = GlobalMaxPool(%x)
})");
    CHECK(Contains(program.source, "__float2bfloat16_rn(result)"));
  }
  SECTION("declined") {
    auto indices = ParseTyped(R"(graph main (float[1,1,4,4] %x) -> (float[1,1,2,2] %y, int64[1,1,2,2] %i) {
  %y, %i = MaxPool(%x) {kernel_shape: [2, 2], strides: [2, 2]}
})");
    RequireDeclined(GeneratePooling(*SingleNodeBody(*indices), "k").status(), "Indices");
    auto three_d = ParseTyped(R"(graph main (float[1,1,4,4,4] %x) -> (float[1,1,2,2,2] %y) {
  %y = MaxPool(%x) {kernel_shape: [2, 2, 2], strides: [2, 2, 2]}
})");
    RequireDeclined(GeneratePooling(*SingleNodeBody(*three_d), "k").status(), "2-D");
    auto transpose = ParseTyped(R"(graph main (float[2,3] %x) -> (float[3,2] %y) {
  %y = Transpose(%x)
})");
    RequireDeclined(GeneratePooling(*SingleNodeBody(*transpose), "k").status(), "not a pooling op");
    RequireDeclined(GenerateDataMovement(*SingleNodeBody(*indices), "k").status(), "not a data-movement op");
  }
}
