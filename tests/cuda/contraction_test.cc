// The contraction family (src/cuda_runtime/plugin/contraction*.{h,cc}): recognition and plan —
// which epilogue steps cuBLASLt / cuDNN fuse and which go to a generated kernel; sizes,
// transposes and batch strides of the row-major → column-major mapping; Conv geometry — the
// generated epilogues compiling with NVRTC, and reasons for what is declined.
// contraction_abi_test.cc builds them through the C ABI.
//
// The plan is internal to libfusionopt_cuda.so, which exports only the C ABI, so CMake compiles
// its device-free sources into this test binary as well.
#include "contraction_test_models.h"


TEST_CASE("contraction plan: MatMul + bias + tanh GELU is one cuBLASLt call, B shared and folded",
          "[cuda][contraction]") {
  ContractionPlan plan = PlanOf(MatMulBiasModel(kTanhGelu));
  const MatmulPlan& matmul = std::get<MatmulPlan>(plan.core);
  CHECK(matmul.m == 6);  // [2,3] rows of A against a 2-D B: one GEMM over 6 rows
  CHECK(matmul.n == 5);
  CHECK(matmul.k == 4);
  CHECK(matmul.batch == 1);
  CHECK(matmul.epilogue == MatmulEpilogue::kGeluTanhBias);
  CHECK(matmul.a.input == 0);
  CHECK(matmul.b.constant != nullptr);
  CHECK(matmul.bias.input == 2);
  CHECK(plan.absorbed_ops == std::vector<std::string>{"Add", "Gelu"});
  CHECK(plan.remainder == nullptr);
  CHECK(plan.library_result_output == 0);

  LtProblem lt = ColumnMajorProblem(matmul);
  CHECK(lt.m == 5);
  CHECK(lt.n == 6);
  CHECK(lt.k == 4);
  CHECK_FALSE(lt.first.transposed);
  CHECK(lt.first.rows == 5);  // B [4,5] row-major = column-major [5,4]
  CHECK(lt.first.cols == 4);
  CHECK(lt.first.ld == 5);
  CHECK(lt.second.rows == 4);  // A [6,4] row-major = column-major [4,6]
  CHECK(lt.second.cols == 6);
  CHECK(lt.second.ld == 4);
  CHECK(lt.output.rows == 5);
  CHECK(lt.output.cols == 6);
  CHECK(lt.output.ld == 5);
}

TEST_CASE("contraction plan: an erf GELU stays in a generated epilogue after cuBLASLt's bias", "[cuda][contraction]") {
  ContractionPlan plan = PlanOf(MatMulBiasModel(kErfGelu, 17));
  const MatmulPlan& matmul = std::get<MatmulPlan>(plan.core);
  CHECK(matmul.epilogue == MatmulEpilogue::kBias);
  CHECK(plan.absorbed_ops == std::vector<std::string>{"Add"});
  CHECK(plan.library_result_output == -1);  // the biased product lives in workspace
  REQUIRE(plan.remainder != nullptr);
  CHECK(OpsOf(*plan.remainder) == std::vector<std::string>{"Div", "Erf", "Add", "Mul", "Mul"});
  CHECK(plan.remainder->inputs().size() == 1);
  CHECK(plan.remainder_inputs.empty());
  CHECK(plan.remainder_outputs == std::vector<int>{0});
  CHECK(plan.remainder->initializers().size() == 3);  // the Constant scalars
  ExpectRemainderCompiles(plan);
}

TEST_CASE("contraction plan: MatMul batch strides", "[cuda][contraction]") {
  SECTION("both operands batched") {
    ContractionPlan plan =
        PlanOf(SingleNode("(float[2,3,4] %a, float[2,4,5] %b) -> (float[2,3,5] %y)", "%y = MatMul(%a, %b)"));
    const MatmulPlan& matmul = std::get<MatmulPlan>(plan.core);
    CHECK(matmul.batch == 2);
    CHECK(matmul.m == 3);
    CHECK(matmul.stride_a == 12);
    CHECK(matmul.stride_b == 20);
    CHECK(matmul.stride_y == 15);
    CHECK(ColumnMajorProblem(matmul).first.batch_stride == 20);  // cuBLASLt's first operand is B
  }
  SECTION("a 2-D A shared by every batch of B: stride 0") {
    ContractionPlan plan =
        PlanOf(SingleNode("(float[3,4] %a, float[2,2,4,5] %b) -> (float[2,2,3,5] %y)", "%y = MatMul(%a, %b)"));
    const MatmulPlan& matmul = std::get<MatmulPlan>(plan.core);
    CHECK(matmul.batch == 4);
    CHECK(matmul.stride_a == 0);
    CHECK(matmul.stride_b == 20);
    CHECK(ColumnMajorProblem(matmul).second.batch_stride == 0);
  }
  SECTION("batch dims broadcast against each other: one strided batch per outer index") {
    ContractionPlan plan =
        PlanOf(SingleNode("(float[2,1,3,4] %a, float[1,3,4,5] %b) -> (float[2,3,3,5] %y)", "%y = MatMul(%a, %b)"));
    const MatmulPlan& matmul = std::get<MatmulPlan>(plan.core);
    CHECK(matmul.batch == 3);
    CHECK(matmul.stride_a == 0);  // A's one matrix per outer index serves B's three
    CHECK(matmul.stride_b == 20);
    CHECK(matmul.stride_y == 15);
    CHECK(matmul.outer_offsets == std::vector<std::array<int64_t, 3>>{{0, 0, 0}, {12, 0, 45}});
  }
  SECTION("multi-query: one K head against every query head, per batch") {
    ContractionPlan plan = PlanOf(
        SingleNode("(float[2,4,16,8] %q, float[2,1,8,16] %k) -> (float[2,4,16,16] %s)", "%s = MatMul(%q, %k)"));
    const MatmulPlan& matmul = std::get<MatmulPlan>(plan.core);
    CHECK(matmul.batch == 1);
    CHECK(matmul.m == 64);  // the four heads' rows share K: one GEMM per batch
    CHECK(matmul.outer_offsets == std::vector<std::array<int64_t, 3>>{{0, 0, 0}, {512, 128, 1024}});
  }
  SECTION("more outer batches than calls are worth") {
    Status status = PlanStatus(
        SingleNode("(float[5000,2,3,4] %a, float[5000,1,4,5] %b) -> (float[5000,2,3,5] %y)", "%y = MatMul(%a, %b)"));
    CHECK(status.code() == ErrorCode::kUnsupported);
    CHECK_THAT(status.message(), Catch::Contains("batch dims broadcast within an operand over 5000 outer batches"));
  }
  SECTION("a 1-D B: the output's last dim is m, so a one-value addend is no column bias") {
    ContractionPlan plan = PlanOf(FusedModel("(float[3,4] %a, float[4] %b, float[1] %c) -> (float[3] %y)",
                                             {"a", "b", "c"}, {"y"}, "  %m = MatMul(%a, %b)\n  %y = Add(%m, %c)\n"));
    CHECK(std::get<MatmulPlan>(plan.core).n == 1);
    CHECK(std::get<MatmulPlan>(plan.core).epilogue == MatmulEpilogue::kNone);
    REQUIRE(plan.remainder != nullptr);
    CHECK(OpsOf(*plan.remainder) == std::vector<std::string>{"Add"});
  }
  SECTION("a 1-D B with a residual of the output's shape: cuBLASLt's C") {
    ContractionPlan plan = PlanOf(FusedModel("(float[3,4] %a, float[4] %b, float[3] %c) -> (float[3] %y)",
                                             {"a", "b", "c"}, {"y"}, "  %m = MatMul(%a, %b)\n  %y = Add(%m, %c)\n"));
    CHECK(std::get<MatmulPlan>(plan.core).c.input == 2);
    CHECK(plan.remainder == nullptr);
  }
}

TEST_CASE("contraction plan: Gemm transposes, alpha and beta·C", "[cuda][contraction]") {
  SECTION("transB with a full C: cuBLASLt's C and beta") {
    ContractionPlan plan = PlanOf(SingleNode("(float[3,4] %a, float[5,4] %b, float[3,5] %c) -> (float[3,5] %y)",
                                             "%y = Gemm(%a, %b, %c) {transB: 1, alpha: 0.5, beta: 2.0}"));
    const MatmulPlan& gemm = std::get<MatmulPlan>(plan.core);
    CHECK(gemm.trans_b);
    CHECK_FALSE(gemm.trans_a);
    CHECK(gemm.m == 3);
    CHECK(gemm.n == 5);
    CHECK(gemm.k == 4);
    CHECK(gemm.alpha == 0.5f);
    CHECK(gemm.beta == 2.0f);
    CHECK(gemm.c.input == 2);
    CHECK(plan.remainder == nullptr);
    LtProblem lt = ColumnMajorProblem(gemm);
    CHECK(lt.first.transposed);  // B stored [5,4] = column-major [4,5]; Bᵀ is its transpose
    CHECK(lt.first.rows == 4);
    CHECK(lt.first.cols == 5);
    CHECK(lt.first.ld == 4);
    CHECK_FALSE(lt.second.transposed);
  }
  SECTION("transA with a row-vector C and Relu: RELU_BIAS") {
    ContractionPlan plan =
        PlanOf(FusedModel("(float[4,3] %a, float[4,5] %b, float[1,5] %c) -> (float[3,5] %y)", {"a", "b", "c"}, {"y"},
                          "  %g = Gemm(%a, %b, %c) {transA: 1}\n  %y = Relu(%g)\n"));
    const MatmulPlan& gemm = std::get<MatmulPlan>(plan.core);
    CHECK(gemm.trans_a);
    CHECK(gemm.epilogue == MatmulEpilogue::kReluBias);
    CHECK(gemm.bias.input == 2);
    LtProblem lt = ColumnMajorProblem(gemm);
    CHECK(lt.second.transposed);
    CHECK(lt.second.rows == 3);  // A stored [4,3] = column-major [3,4] (ld 3)
    CHECK(lt.second.ld == 3);
  }
  SECTION("a column C is added by the generated epilogue") {
    ContractionPlan plan = PlanOf(SingleNode("(float[3,4] %a, float[4,5] %b, float[3,1] %c) -> (float[3,5] %y)",
                                             "%y = Gemm(%a, %b, %c) {beta: 0.25}"));
    const MatmulPlan& gemm = std::get<MatmulPlan>(plan.core);
    CHECK_FALSE(gemm.c.present());
    CHECK(gemm.epilogue == MatmulEpilogue::kNone);
    REQUIRE(plan.remainder != nullptr);
    CHECK(OpsOf(*plan.remainder) == std::vector<std::string>{"Mul", "Add"});
    CHECK(plan.remainder_inputs == std::vector<int>{2});
    CHECK(plan.remainder_outputs == std::vector<int>{0});
    ExpectRemainderCompiles(plan);
  }
}

TEST_CASE("contraction plan: scale, bias and residual before the activation all go to cuBLASLt",
          "[cuda][contraction]") {
  SECTION("D = relu(A·B/8 + bias + r): alpha, BIAS, C with beta 1, RELU") {
    ContractionPlan plan = PlanOf(
        MatMulEpilogueModel("  %s = Div(%m, %eight)\n  %t = Add(%s, %bias)\n  %u = Add(%r, %t)\n  %y = Relu(%u)\n"));
    const MatmulPlan& matmul = std::get<MatmulPlan>(plan.core);
    CHECK(matmul.alpha == 0.125f);
    CHECK(matmul.beta == 1.0f);
    CHECK(matmul.c.input == 4);
    CHECK(matmul.bias.input == 3);
    CHECK(matmul.epilogue == MatmulEpilogue::kReluBias);
    CHECK(plan.absorbed_ops == std::vector<std::string>{"Div", "Add", "Add", "Relu"});
    CHECK(plan.remainder == nullptr);
  }
  SECTION("a scale after the residual scales beta too") {
    ContractionPlan plan = PlanOf(MatMulEpilogueModel("  %u = Add(%m, %r)\n  %y = Mul(%u, %eight)\n"));
    const MatmulPlan& matmul = std::get<MatmulPlan>(plan.core);
    CHECK(matmul.alpha == 8.0f);
    CHECK(matmul.beta == 8.0f);
    CHECK(plan.remainder == nullptr);
  }
  SECTION("after the activation, or a scale after the bias: the generated epilogue") {
    ContractionPlan plan = PlanOf(MatMulEpilogueModel("  %t = Relu(%m)\n  %y = Add(%t, %r)\n"));
    CHECK(std::get<MatmulPlan>(plan.core).epilogue == MatmulEpilogue::kRelu);
    CHECK_FALSE(std::get<MatmulPlan>(plan.core).c.present());
    REQUIRE(plan.remainder != nullptr);
    CHECK(OpsOf(*plan.remainder) == std::vector<std::string>{"Add"});
    CHECK(plan.remainder_inputs == std::vector<int>{4});
    ExpectRemainderCompiles(plan);

    ContractionPlan scaled = PlanOf(MatMulEpilogueModel("  %t = Add(%m, %bias)\n  %y = Mul(%t, %eight)\n"));
    CHECK(std::get<MatmulPlan>(scaled.core).alpha == 1.0f);
    REQUIRE(scaled.remainder != nullptr);
    CHECK(OpsOf(*scaled.remainder) == std::vector<std::string>{"Mul"});
    CHECK(scaled.remainder->initializers().size() == 1);  // the constant 8
    ExpectRemainderCompiles(scaled);
  }
}

TEST_CASE("contraction plan: Conv + bias + residual + Relu is one cuDNN fused call", "[cuda][contraction]") {
  ContractionPlan plan = PlanOf(ConvAddReluModel());
  const ConvPlan& conv = std::get<ConvPlan>(plan.core);
  CHECK(conv.x_dims == std::array<int64_t, 4>{2, 4, 8, 8});
  CHECK(conv.w_dims == std::array<int64_t, 4>{6, 4, 3, 3});
  CHECK(conv.y_dims == std::array<int64_t, 4>{2, 6, 8, 8});
  CHECK(conv.pads == std::array<int64_t, 2>{1, 1});
  CHECK(conv.bias.constant != nullptr);
  CHECK(conv.residual.input == 3);
  CHECK(conv.relu);
  CHECK(conv.fused());
  CHECK(plan.absorbed_ops == std::vector<std::string>{"Add", "Relu"});
  CHECK(plan.remainder == nullptr);
}

TEST_CASE("contraction plan: Conv geometry and what cuDNN cannot fuse", "[cuda][contraction]") {
  SECTION("groups, strides, dilations, SAME_UPPER; a Sigmoid goes to the generated epilogue") {
    ContractionPlan plan =
        PlanOf(FusedModel("(float[1,4,9,9] %x, float[4,2,3,3] %w) -> (float[1,4,5,5] %y)", {"x", "w"}, {"y"},
                          "  %c = Conv(%x, %w) {group: 2, strides: [2, 2], dilations: [2, 2], auto_pad: "
                          "\"SAME_UPPER\"}\n  %y = Sigmoid(%c)\n"));
    const ConvPlan& conv = std::get<ConvPlan>(plan.core);
    CHECK(conv.groups == 2);
    CHECK(conv.strides == std::array<int64_t, 2>{2, 2});
    CHECK(conv.dilations == std::array<int64_t, 2>{2, 2});
    CHECK(conv.pads == std::array<int64_t, 2>{2, 2});  // total 4 = (5-1)·2 + 5 - 9, split evenly
    CHECK_FALSE(conv.fused());
    REQUIRE(plan.remainder != nullptr);
    CHECK(OpsOf(*plan.remainder) == std::vector<std::string>{"Sigmoid"});
    ExpectRemainderCompiles(plan);
  }
  SECTION("a per-channel bias Add without Relu: fused with IDENTITY") {
    ContractionPlan plan =
        PlanOf(FusedModel("(float[1,2,5,5] %x, float[3,2,1,1] %w, float[3,1,1] %b) -> (float[1,3,5,5] %y)",
                          {"x", "w", "b"}, {"y"}, "  %c = Conv(%x, %w)\n  %y = Add(%c, %b)\n"));
    const ConvPlan& conv = std::get<ConvPlan>(plan.core);
    CHECK(conv.bias.input == 2);
    CHECK_FALSE(conv.relu);
    CHECK(conv.fused());
    CHECK(plan.remainder == nullptr);
  }
  SECTION("a 1-D Conv is the 2-D Conv of height 1: Whisper's stem, stride 2 with a [M,1] bias Add and a residual") {
    ContractionPlan plan = PlanOf(FusedModel(
        "(float[2,16,32] %x, float[8,16,3] %w, float[8,1] %b, float[2,8,16] %r) -> (float[2,8,16] %y)",
        {"x", "w", "b", "r"}, {"y"},
        "  %c = Conv(%x, %w) {pads: [1, 1], strides: [2]}\n  %d = Add(%c, %b)\n  %y = Add(%d, %r)\n"));
    const ConvPlan& conv = std::get<ConvPlan>(plan.core);
    CHECK(conv.x_dims == std::array<int64_t, 4>{2, 16, 1, 32});
    CHECK(conv.w_dims == std::array<int64_t, 4>{8, 16, 1, 3});
    CHECK(conv.y_dims == std::array<int64_t, 4>{2, 8, 1, 16});
    CHECK(conv.pads == std::array<int64_t, 2>{0, 1});
    CHECK(conv.strides == std::array<int64_t, 2>{1, 2});
    CHECK(conv.bias.input == 2);
    CHECK(conv.residual.input == 3);
    CHECK(plan.remainder == nullptr);
  }
  SECTION("a 1-D Conv padded on one side only is declined like a 2-D one") {
    Status status = PlanStatus(SingleNode("(float[1,4,8] %x, float[4,4,3] %w) -> (float[1,4,7] %y)",
                                          "%y = Conv(%x, %w) {pads: [0, 1]}"));
    CHECK(status.code() == ErrorCode::kUnsupported);
    CHECK_THAT(status.message(), Catch::Contains("asymmetric"));
  }
  SECTION("asymmetric SAME padding is declined") {
    Status status = PlanStatus(SingleNode("(float[1,4,8,8] %x, float[4,4,3,3] %w) -> (float[1,4,4,4] %y)",
                                          "%y = Conv(%x, %w) {strides: [2, 2], auto_pad: \"SAME_UPPER\"}"));
    CHECK(status.code() == ErrorCode::kUnsupported);
    CHECK_THAT(status.message(), Catch::Contains("asymmetric"));
  }
}

TEST_CASE("contraction plan: float16 and bfloat16", "[cuda][contraction]") {
  CHECK(std::get<MatmulPlan>(
            PlanOf(SingleNode("(float16[4,8] %a, float16[8,2] %b) -> (float16[4,2] %y)", "%y = MatMul(%a, %b)")).core)
            .dtype == DataType::kFloat16);
  CHECK(
      std::get<MatmulPlan>(
          PlanOf(SingleNode("(bfloat16[4,8] %a, bfloat16[8,2] %b) -> (bfloat16[4,2] %y)", "%y = MatMul(%a, %b)")).core)
          .dtype == DataType::kBFloat16);
  CHECK(std::get<ConvPlan>(PlanOf(SingleNode("(float16[1,8,6,6] %x, float16[4,8,3,3] %w) -> (float16[1,4,4,4] %y)",
                                             "%y = Conv(%x, %w)"))
                               .core)
            .dtype == DataType::kFloat16);
  Status status = PlanStatus(
      SingleNode("(bfloat16[1,8,6,6] %x, bfloat16[4,8,3,3] %w) -> (bfloat16[1,4,4,4] %y)", "%y = Conv(%x, %w)"));
  CHECK(status.code() == ErrorCode::kUnsupported);
  CHECK_THAT(status.message(), Catch::Contains("bfloat16"));
}

TEST_CASE("contraction plan: what the family declines, and why", "[cuda][contraction]") {
  SECTION("two contractions") {
    Status status = PlanStatus(FusedModel("(float[2,4] %a, float[4,4] %b) -> (float[2,4] %y)", {"a", "b"}, {"y"},
                                          "  %t0 = MatMul(%a, %b)\n  %y = MatMul(%t0, %b)\n"));
    CHECK(status.code() == ErrorCode::kUnsupported);
    CHECK_THAT(status.message(), Catch::Contains("two contractions"));
  }
  SECTION("3-D Conv") {
    Status status = PlanStatus(
        SingleNode("(float[1,2,4,4,4] %x, float[3,2,1,1,1] %w) -> (float[1,3,4,4,4] %y)", "%y = Conv(%x, %w)"));
    CHECK(status.code() == ErrorCode::kUnsupported);
    CHECK_THAT(status.message(), Catch::Contains("3-D Conv"));
  }
  SECTION("MatMul on int8") {
    Status status = PlanStatus(SingleNode("(int8[2,3] %a, int8[3,4] %b) -> (int8[2,4] %y)", "%y = MatMul(%a, %b)"));
    CHECK(status.code() == ErrorCode::kUnsupported);
    CHECK_THAT(status.message(), Catch::Contains("int8"));
  }
  SECTION("ConvTranspose") {
    Status status = PlanStatus(
        SingleNode("(float[1,2,4,4] %x, float[2,3,3,3] %w) -> (float[1,3,6,6] %y)", "%y = ConvTranspose(%x, %w)"));
    CHECK(status.code() == ErrorCode::kUnsupported);
    CHECK_THAT(status.message(), Catch::Contains("ConvTranspose"));
  }
  SECTION("an operand computed in the body (a prologue)") {
    Status status = PlanStatus(FusedModel("(float[2,4] %a, float[4,3] %b) -> (float[2,3] %y)", {"a", "b"}, {"y"},
                                          "  %r = Relu(%a)\n  %y = MatMul(%r, %b)\n"));
    CHECK(status.code() == ErrorCode::kUnsupported);
    CHECK_THAT(status.message(), Catch::Contains("prologue"));
  }
}

TEST_CASE("contraction plan: Describe names the library and the split", "[cuda][contraction]") {
  CHECK_THAT(PlanOf(MatMulBiasModel(kTanhGelu)).Describe(), Catch::Contains("cuBLASLt MatMul float m=6 n=5 k=4"));
  CHECK_THAT(PlanOf(MatMulBiasModel(kErfGelu, 17)).Describe(), Catch::Contains("generated epilogue of 5 ops"));
  CHECK_THAT(PlanOf(ConvAddReluModel()).Describe(), Catch::Contains("cuDNN Conv"));
}
