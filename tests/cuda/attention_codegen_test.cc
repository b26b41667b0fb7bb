// The attention generator (cuda_runtime/codegen/attention_codegen.h) on the bodies the
// fuse-attention pass outlines — BERT (three projections, additive mask), GPT-2 (one combined
// projection split three ways, causal Where mask), ViT (no mask), [B,H,S,D] operands — at static
// shapes: how Q, K, V, the mask and the output are addressed, the launch and shared memory,
// NVRTC compiles for sm_80 and sm_90; and the bodies it must decline.
#include <catch2/catch.hpp>

#include "attention_test_models.h"
#include "cuda_runtime/codegen/attention_codegen.h"
#include "family_codegen_test_support.h"
#include "passes/pipeline.h"
#include "passes/registry.h"

using namespace fusionopt;
using namespace fusionopt::cuda;
using namespace fusionopt::cuda::family_test;
using namespace fusionopt::attention_test;

namespace {

// `text` with its symbolic batch and sequence made static.
std::string Static(std::string text, int batch, int sequence) {
  for (auto [from, to] : {std::pair<std::string, std::string>{"[B,", "[" + std::to_string(batch) + ","},
                          {",S,", "," + std::to_string(sequence) + ","},
                          {",S]", "," + std::to_string(sequence) + "]"}}) {
    for (size_t at = text.find(from); at != std::string::npos; at = text.find(from, at + to.size())) {
      text.replace(at, from.size(), to);
    }
  }
  return text;
}

// The model after fuse-attention, and the typed body of its FusedAttention node.
struct Outlined {
  std::unique_ptr<Model> model;
  std::unique_ptr<Graph> body;
};

Outlined Outline(const std::string& text) {
  Outlined out;
  auto parsed = ParseModel(text);
  INFO(parsed.status().message());
  REQUIRE(parsed.ok());
  out.model = std::move(parsed).value();
  InferShapes(*out.model);
  const passes::PassInfo* info = passes::FindPass("fuse-attention");
  REQUIRE(info != nullptr);
  passes::PipelineOptions pipeline;
  pipeline.level = info->level;
  pipeline.only = {"fuse-attention"};
  auto report = passes::RunPipeline(*out.model, pipeline);
  INFO(report.status().message());
  REQUIRE(report.ok());
  InferShapes(*out.model);
  for (const auto& node : out.model->graph->nodes()) {
    if (node->domain() != kFusionDomain) continue;
    auto body = TypedBodyOf(*out.model, *node);
    INFO(body.status().message());
    REQUIRE(body.ok());
    out.body = std::move(body).value();
  }
  REQUIRE(out.body != nullptr);
  return out;
}

GeneratedProgram Generate(const Graph& body) {
  Result<GeneratedProgram> program = GenerateAttention(body, "FusedAttention_0");
  INFO(program.status().message());
  REQUIRE(program.ok());
  return std::move(program).value();
}

bool Contains(const std::string& text, const std::string& part) { return text.find(part) != std::string::npos; }

}  // namespace

TEST_CASE("attention: BERT-base heads, additive mask, merged output", "[cuda][attention]") {
  Outlined outlined = Outline(Static(WithHeads(Bert(), 12, 64), 2, 128));
  GeneratedProgram program = Generate(*outlined.body);
  RequireGood(program);
  const GeneratedKernel& kernel = program.kernels.at(0);
  // One CTA per (batch·head, 16 queries): 2·12·8.
  CHECK(kernel.grid == std::array<uint32_t, 3>{2 * 12 * 8, 1, 1});
  CHECK(kernel.block == std::array<uint32_t, 3>{128, 1, 1});
  // Q tile 16×64, K tile 32×65 (padded), V tile 32×64 floats.
  CHECK(kernel.shared_bytes == (16 * 64 + 32 * 65 + 32 * 64) * 4);
  // Q, K, V are [B,S,H·D]: batch stride S·768, head stride D, sequence stride 768.
  CHECK(Contains(program.source, "(long long)(b) * 98304LL + (long long)(h) * 64LL + (long long)(query) * 768LL"));
  // The [B,1,1,S] mask varies by batch and key only.
  CHECK(Contains(program.source, "(long long)b * 128LL + (long long)h * 0LL + (long long)query * 0LL + "
                                 "(long long)key * 1LL]"));
  // The merged [B,S,H·D] output.
  CHECK(Contains(program.source, "out0[(long long)b * 98304LL + (long long)h * 64LL + (long long)query * 768LL + d]"));
  CHECK(Contains(program.description, "additive mask"));
  // No global buffer for the scores: the only store is the output's.
  CHECK(program.workspace_bytes == 0);
  CHECK(ParameterNames(program.source, kernel.entry).back() == "out0");
}

TEST_CASE("attention: GPT-2's combined projection and causal mask, sequence tail", "[cuda][attention]") {
  // 100 queries: the last query tile holds 4 rows and the last key tile 4 keys.
  Outlined outlined = Outline(Static(WithHeads(Combined(true, "float[B,S,8] %context", "", 128), 12, 64), 1, 100));
  GeneratedProgram program = Generate(*outlined.body);
  RequireGood(program);
  CHECK(program.kernels[0].grid == std::array<uint32_t, 3>{12 * 7, 1, 1});
  // Q, K and V are column slices of the [B,S,2304] projection at 0, 768 and 1536 (a batch of one
  // has no stride of its own).
  CHECK(Contains(program.source, "[0LL + (long long)(b) * 0LL + (long long)(h) * 64LL + (long long)(query) * 2304LL"));
  CHECK(Contains(program.source, "[768LL + (long long)(b) * 0LL + (long long)(h) * 64LL + (long long)(key) * 2304LL"));
  CHECK(Contains(program.source, "[1536LL + (long long)(b) * 0LL"));
  CHECK(Contains(program.source, "query < 100"));
  CHECK(Contains(program.source, "key < 100"));
  CHECK(Contains(program.description, "boolean mask"));
}

TEST_CASE("attention: ViT without a mask; [B,H,S,D] operands with a broadcast mask", "[cuda][attention]") {
  SECTION("ViT") {
    Outlined outlined = Outline(Static(WithHeads(Vit(), 3, 32), 2, 197));
    GeneratedProgram program = Generate(*outlined.body);
    RequireGood(program);
    CHECK_FALSE(Contains(program.description, "mask"));
    CHECK(Contains(program.source, "s = s * "));
  }
  SECTION("heads first, K transposed inside, a [1,1,7,7] mask") {
    Outlined outlined = Outline(HeadsFirst("[1,1,7,7]", "2,3,7,40"));
    GeneratedProgram program = Generate(*outlined.body);
    RequireGood(program);
    // [B,H,S,D] = [2,3,7,40]: head stride 280, batch stride 840; output [B,H,Sq,Dv].
    CHECK(Contains(program.source, "(long long)(b) * 840LL + (long long)(h) * 280LL + (long long)(query) * 40LL"));
    CHECK(Contains(program.source, "out0[(long long)b * 840LL + (long long)h * 280LL + (long long)query * 40LL + d]"));
    // Dv = 40: two slots per lane, the second only partly used.
    CHECK(Contains(program.source, "acc[4][2]"));
    CHECK(Contains(program.source, "if (d < 40)"));
  }
}

TEST_CASE("attention: fp16 and bf16 storage with fp32 math", "[cuda][attention]") {
  for (const std::string dtype : {"float16", "bfloat16"}) {
    DYNAMIC_SECTION(dtype) {
      std::string text = HeadsFirst("[1,1,130,130]", "1,2,130,64");
      for (size_t at = text.find("float"); at != std::string::npos; at = text.find("float", at + dtype.size())) {
        text.replace(at, 5, dtype);
      }
      // fuse-attention outlines float32 only; the body is written as the graph itself.
      auto model = ParseTyped(text.substr(kHeader.size()));
      GeneratedProgram program = Generate(BodyOf(*model));
      RequireGood(program);
      CHECK(Contains(program.source, dtype == "float16" ? "__half2float(" : "__bfloat162float("));
      CHECK(Contains(program.source, dtype == "float16" ? "__float2half_rn(" : "__float2bfloat16_rn("));
    }
  }
}

TEST_CASE("attention: fp16 and bf16 on tensor cores from sm_80, the scalar kernel before and for fp32", "[cuda][attention]") {
  auto typed = [](const std::string& dtype, const std::string& dims) {
    std::string text = HeadsFirst("[1,1,130,130]", dims);
    for (size_t at = text.find("float"); at != std::string::npos; at = text.find("float", at + dtype.size())) {
      text.replace(at, 5, dtype);
    }
    return ParseTyped(text.substr(kHeader.size()));
  };
  for (const std::string dtype : {"float16", "bfloat16"}) {
    DYNAMIC_SECTION(dtype) {
      auto model = typed(dtype, "1,2,130,64");
      Result<GeneratedProgram> program = GenerateAttention(BodyOf(*model), "FusedAttention_0", CodegenTarget{80});
      INFO(program.status().message());
      REQUIRE(program.ok());
      RequireGood(*program);
      CHECK(Contains(program->description, "tensor cores"));
      // 64 queries per CTA: ceil(130 / 64) = 3 tiles for each of 2 heads; Q and K rows of 64 + 8
      // halves, V transposed in rows of 32 + 8.
      CHECK(program->kernels[0].grid[0] == 6);
      CHECK(program->kernels[0].shared_bytes == ((64 + 32) * 72 + 64 * 40) * 2);
      const std::string instruction = std::string("mma.sync.aligned.m16n8k16.row.col.f32.") +
                                      (dtype == "float16" ? "f16.f16" : "bf16.bf16") + ".f32";
      CHECK(Contains(program->source, instruction));
      CompileOptions options;
      options.sm_arch = 80;
      Result<CompiledModule> module = CompileCuda(program->source, program->name, options);
      REQUIRE(module.ok());
      CHECK(Contains(module->ptx, "mma.sync.aligned.m16n8k16"));

      // Before sm_80, the scalar kernel.
      Result<GeneratedProgram> older = GenerateAttention(BodyOf(*model), "FusedAttention_0", CodegenTarget{75});
      REQUIRE(older.ok());
      CHECK_FALSE(Contains(older->description, "tensor cores"));
      CHECK_FALSE(Contains(older->source, "mma.sync"));
      // A head size the fragments do not tile is padded with zeros: Q·K's 40 to 48, V's 40 stays.
      auto odd = typed(dtype, "1,2,130,40");
      Result<GeneratedProgram> padded = GenerateAttention(BodyOf(*odd), "FusedAttention_0", CodegenTarget{90});
      REQUIRE(padded.ok());
      RequireGood(*padded);
      CHECK(Contains(padded->description, "tensor cores"));
      CHECK(padded->kernels[0].shared_bytes == ((64 + 32) * 56 + 40 * 40) * 2);
      CHECK(Contains(padded->source, "d < 40 ?"));
      // The largest head size a plan has (kMaxAttentionHeadDim) fits: 36 KiB of shared memory.
      auto widest = typed(dtype, "1,2,130,128");
      Result<GeneratedProgram> wide = GenerateAttention(BodyOf(*widest), "FusedAttention_0", CodegenTarget{90});
      REQUIRE(wide.ok());
      RequireGood(*wide);
      CHECK(Contains(wide->description, "tensor cores"));
      CHECK(wide->kernels[0].shared_bytes == ((64 + 32) * 136 + 128 * 40) * 2);
    }
  }
  SECTION("float32 stays on the scalar kernel") {
    auto model = ParseTyped(HeadsFirst("[1,1,130,130]", "1,2,130,64").substr(kHeader.size()));
    Result<GeneratedProgram> program = GenerateAttention(BodyOf(*model), "FusedAttention_0", CodegenTarget{90});
    REQUIRE(program.ok());
    CHECK_FALSE(Contains(program->description, "tensor cores"));
  }
}

TEST_CASE("attention: bodies it declines", "[cuda][attention]") {
  SECTION("head_dim 256") {
    Outlined outlined = Outline(HeadsFirst("[1,1,7,7]", "1,2,7,256"));
    RequireDeclined(GenerateAttention(*outlined.body, "k").status(), "head_dim 256");
  }
  SECTION("a row-kernel body") {
    auto model = ParseTyped(R"(graph main (float[2,4,8,8] %x) -> (float[2,4,8,8] %y) {
  %y = Softmax(%x) {axis: -1}
})");
    RequireDeclined(GenerateAttention(BodyOf(*model), "k").status(), "not a fused attention");
  }
  SECTION("an elementwise body") {
    auto model = ParseTyped("graph main (float[4,8] %x) -> (float[4,8] %y) {\n  %y = Relu(%x)\n}\n");
    RequireDeclined(GenerateAttention(BodyOf(*model), "k").status(), "not a fused attention");
  }
}
