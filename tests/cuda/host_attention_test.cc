// Numbers without a GPU for the generated attention kernel on real exports: each committed
// fixture with attention (every form the layout derivation meets — combined and separate
// projections, causal and padding masks, rotary and grouped-query operands, torchvision's packed
// projection read through a view chain, T5's relative bias, Attention-23 with RotaryEmbedding,
// fp16) is optimized at -O3 and specialized to its manifest sizes as the CUDA backend plans it;
// the CPU runtime runs it, and for every fused attention call its inputs and the CPU's fused
// output are captured; the generated kernel then runs on those inputs on the host (host_kernel.h,
// cooperatively: shared memory, barriers and warp shuffles) and must give the same numbers.
#include <catch2/catch.hpp>

#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>

#include "cpu_runtime/engine/session.h"
#include "cuda_runtime/backend/cuda_session.h"
#include "cuda_runtime/codegen/family_codegen_support.h"
#include "cuda_runtime/codegen/generate.h"
#include "cuda_runtime/codegen/typed_body.h"
#include "host_kernel.h"
#include "onnx_io/model_io.h"
#include "passes/fusion_check.h"
#include "passes/pipeline.h"

namespace fusionopt::cuda {
namespace {

namespace fs = std::filesystem;

const fs::path kFixtures = fs::path(FUSIONOPT_SOURCE_DIR) / "models" / "real" / "fixtures";

struct Captured {
  const Node* call = nullptr;
  std::vector<cpu::RtTensor> inputs;
  cpu::RtTensor output;
};

// The fixture's feeds at its manifest sizes (seeded: floats in [-1, 1), integers 0 or 1).
std::vector<cpu::NamedTensor> ManifestFeeds(const Model& model, const std::string& file) {
  std::ifstream stream(kFixtures / "manifest.json");
  const nlohmann::json manifest = nlohmann::json::parse(stream);
  std::map<std::string, int64_t, std::less<>> symbols;
  for (const auto& entry : manifest["models"]) {
    if (entry["file"] != file) continue;
    for (const auto& input : entry["inputs"]) {
      for (const Value* value : model.graph->inputs()) {
        if (value->name() != input["name"] || !value->shape()) continue;
        for (size_t axis = 0; axis < value->shape()->size(); ++axis) {
          const Dim& dim = (*value->shape())[axis];
          if (dim.is_symbolic()) symbols[dim.symbol] = input["shape"][axis].get<int64_t>();
        }
      }
    }
  }
  REQUIRE_FALSE(symbols.empty());
  auto feeds = passes::SeededFeeds(model, symbols, 7);
  REQUIRE(feeds.ok());
  return *feeds;
}

void CheckAttentionOf(const std::string& file, double tolerance) {
  INFO(file);
  const fs::path path = kFixtures / file;
  if (!fs::exists(path)) {
    WARN(path.string() << " is missing: skipped");
    return;
  }
  auto loaded = LoadModel(path.string());
  REQUIRE(loaded.ok());
  passes::PipelineOptions options;
  options.level = 3;
  REQUIRE(passes::RunPipeline(**loaded, options).ok());
  const std::vector<cpu::NamedTensor> feeds = ManifestFeeds(**loaded, file);
  auto specialized = SpecializeForFeeds(**loaded, feeds);
  INFO(specialized.status().message());
  REQUIRE(specialized.ok());
  const Model& model = **specialized;

  int calls = 0;
  for (const auto& node : model.graph->nodes()) calls += node->op_type().rfind("FusedAttention", 0) == 0 ? 1 : 0;
  REQUIRE(calls > 0);
  std::vector<Captured> captured;
  cpu::SessionOptions session_options;
  session_options.fused_output_hook = [&](const Node& call, cpu::KernelContext& context) {
    if (call.op_type().rfind("FusedAttention", 0) != 0) return;
    Captured item{&call, {}, context.outputs[0]};
    for (const cpu::RtTensor* input : context.inputs) item.inputs.push_back(input ? *input : cpu::RtTensor());
    captured.push_back(std::move(item));
  };
  auto session = cpu::Session::Create(model, session_options);
  REQUIRE(session.ok());
  auto ran = (*session)->Run(feeds);
  INFO(ran.status().message());
  REQUIRE(ran.ok());
  REQUIRE(static_cast<int>(captured.size()) == calls);  // every call ran as the CPU's fused kernel

  for (const Captured& item : captured) {
    INFO("call " << item.call->name());
    REQUIRE(item.call->inputs().size() == item.inputs.size());
    auto body = TypedBodyOf(model, *item.call);
    INFO(body.status().message());
    REQUIRE(body.ok());
    auto program = GenerateKernel(**body, "attention_under_test");
    INFO(program.status().message());
    REQUIRE(program.ok());
    REQUIRE(program->description.rfind("flash attention", 0) == 0);
    std::vector<void*> arguments;
    for (const cpu::RtTensor& input : item.inputs) arguments.push_back(input.raw());
    for (const std::string& name : program->constant_inputs) {
      const Value* constant = (*body)->FindValue(name);
      REQUIRE((constant != nullptr && constant->is_initializer()));
      arguments.push_back(const_cast<uint8_t*>(constant->initializer()->bytes().data()));
    }
    cpu::RtTensor output = cpu::RtTensor::Allocate(item.output.dtype(), item.output.dims());
    arguments.push_back(output.raw());
    test_support::ScratchDir scratch("host_attention");
    HostKernel kernel(*program, scratch);
    kernel.LaunchCooperative(arguments);
    for (int64_t i = 0; i < output.NumElements(); ++i) {
      INFO("element " << i);
      REQUIRE(output.ValueAsDouble(i) == Approx(item.output.ValueAsDouble(i)).epsilon(tolerance).margin(tolerance));
    }
  }
}

}  // namespace

TEST_CASE("generated attention on real exports gives the CPU runtime's numbers", "[cuda][codegen][host][attention]") {
  SECTION("BERT, separate projections, padding mask (dynamo sdpa)") { CheckAttentionOf("bert_dynamo18_sdpa.onnx", 1e-5); }
  SECTION("BERT, TorchScript eager") { CheckAttentionOf("bert_torchscript17_eager.onnx", 1e-5); }
  SECTION("GPT-2, combined projection, causal mask") { CheckAttentionOf("gpt2_dynamo18_sdpa.onnx", 1e-5); }
  SECTION("GPT-2, TorchScript") { CheckAttentionOf("gpt2_torchscript17_sdpa.onnx", 1e-5); }
  SECTION("LLaMA, rotary and grouped-query K/V") { CheckAttentionOf("llama_dynamo18_sdpa.onnx", 1e-5); }
  SECTION("LLaMA fp16") { CheckAttentionOf("llama_dynamo18_sdpa_fp16.onnx", 2e-3); }
  SECTION("LLaMA, Attention-23 and RotaryEmbedding-23") { CheckAttentionOf("llama_dynamo23_sdpa.onnx", 1e-5); }
  SECTION("T5, relative position bias") { CheckAttentionOf("t5_encoder_dynamo18_sdpa.onnx", 1e-5); }
  SECTION("torchvision ViT, packed projection through a view chain") {
    CheckAttentionOf("vit_torchvision_dynamo18.onnx", 1e-5);
  }
  SECTION("torchvision ViT, TorchScript") { CheckAttentionOf("vit_torchvision_torchscript17.onnx", 1e-5); }
  SECTION("Whisper encoder") { CheckAttentionOf("whisper_encoder_dynamo18_sdpa.onnx", 1e-5); }
  SECTION("Swin, windowed attention with a relative bias") { CheckAttentionOf("swin_dynamo18_eager.onnx", 1e-5); }
}

}  // namespace fusionopt::cuda
