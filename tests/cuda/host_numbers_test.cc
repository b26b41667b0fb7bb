// Numbers without a GPU for the generators whose threads do not cooperate — data movement,
// window pooling, LRN, BatchNormalization lowered to elementwise: each single-op model's kernel
// is generated as the plugin would generate it, run on the host (host_kernel.h) and compared
// with the CPU runtime on the same random inputs.
#include <catch2/catch.hpp>

#include <cstring>

#include "cpu_runtime/engine/inputs.h"
#include "cpu_runtime/engine/session.h"
#include "cuda_runtime/codegen/family_codegen_support.h"
#include "cuda_runtime/codegen/generate.h"
#include "cuda_runtime/codegen/lower_batchnorm.h"
#include "cuda_runtime/codegen/typed_body.h"
#include "host_kernel.h"
#include "text_format/text_format.h"

namespace fusionopt::cuda {
namespace {

// Runs the model's only node through its generated kernel on the host and through the CPU
// runtime, on the same seeded inputs, and requires equal outputs (`tolerance` relative, `margin`
// absolute).
void CheckAgainstCpu(const std::string& text, double tolerance = 1e-6, double margin = 1e-6) {
  auto parsed = ParseModel(text);
  INFO(parsed.status().message());
  REQUIRE(parsed.ok());
  const Model& model = **parsed;
  auto typed = TypedBodyOf(model, *model.graph->nodes().front());
  INFO(typed.status().message());
  REQUIRE(typed.ok());
  std::unique_ptr<Graph> lowered = LowerBatchNormalization(**typed);
  const Graph& body = lowered ? *lowered : **typed;
  auto program = GenerateKernel(body, "under_test");
  INFO(program.status().message());
  REQUIRE(program.ok());
  REQUIRE(program->kernels.size() == 1);
  REQUIRE(program->workspace_bytes == 0);

  std::vector<cpu::NamedTensor> feeds;
  uint64_t seed = 11;
  for (const Value* input : model.graph->inputs()) {
    if (input->is_initializer()) continue;
    auto tensor = cpu::RandomTensor(input->dtype(), StaticDims(*input), seed++);
    REQUIRE(tensor.ok());
    feeds.push_back({input->name(), *tensor});
  }
  auto session = cpu::Session::Create(model);
  REQUIRE(session.ok());
  auto expected = (*session)->Run(feeds);
  REQUIRE(expected.ok());

  // Parameters in the contract's order: every body input (a folded constant's own bytes), the
  // constants read through pointers, the outputs.
  std::vector<void*> arguments;
  for (size_t i = 0; i < body.inputs().size(); ++i) {
    const Value* argument = model.graph->nodes().front()->input(i);
    void* pointer = nullptr;
    for (auto& feed : feeds) {
      if (argument != nullptr && feed.name == argument->name()) pointer = feed.tensor.raw();
    }
    if (pointer == nullptr && argument != nullptr && argument->is_initializer()) {
      pointer = const_cast<uint8_t*>(argument->initializer()->bytes().data());
    }
    arguments.push_back(pointer);
  }
  for (const std::string& name : program->constant_inputs) {
    const Value* constant = body.FindValue(name);
    REQUIRE(constant != nullptr);
    REQUIRE(constant->is_initializer());
    arguments.push_back(const_cast<uint8_t*>(constant->initializer()->bytes().data()));
  }
  std::vector<cpu::RtTensor> outputs;
  for (const Value* output : body.outputs()) outputs.push_back(cpu::RtTensor::Allocate(output->dtype(), StaticDims(*output)));
  for (auto& output : outputs) arguments.push_back(output.raw());

  test_support::ScratchDir scratch("host_numbers");
  HostKernel kernel(*program, scratch);
  kernel.Launch(arguments);
  for (size_t o = 0; o < outputs.size(); ++o) {
    const cpu::RtTensor& want = (*expected)[o].tensor;
    REQUIRE(want.dims() == outputs[o].dims());
    for (int64_t i = 0; i < want.NumElements(); ++i) {
      INFO("output " << o << " element " << i);
      REQUIRE(outputs[o].ValueAsDouble(i) == Approx(want.ValueAsDouble(i)).epsilon(tolerance).margin(margin));
    }
  }
}

std::string Model1(const std::string& signature, const std::string& inits, const std::string& node, int opset = 17) {
  return "ir_version 8\nopset \"\" " + std::to_string(opset) + "\ngraph g " + signature + "\n" + inits + "{\n  " + node +
         "\n}\n";
}

}  // namespace

TEST_CASE("generated data movement kernels give the CPU runtime's numbers", "[cuda][codegen][host]") {
  CheckAgainstCpu(Model1("(float[2,3,4] %x) -> (float[4,2,3] %y)", "", "%y = Transpose(%x) {perm: [2, 0, 1]}"));
  CheckAgainstCpu(Model1("(float[2,3,4] %a, float[2,5,4] %b) -> (float[2,8,4] %y)", "", "%y = Concat(%a, %b) {axis: 1}"));
  CheckAgainstCpu(Model1("(float[6,7] %x) -> (float[3,3] %y)",
                         "  init int64[2] %starts = [5, 1]\n  init int64[2] %ends = [0, 7]\n"
                         "  init int64[2] %axes = [0, 1]\n  init int64[2] %steps = [-2, 2]\n",
                         "%y = Slice(%x, %starts, %ends, %axes, %steps)"));
  CheckAgainstCpu(Model1("(float[5,3] %x) -> (float[2,2,3] %y)", "  init int64[2,2] %i = [0, -1, 4, 2]\n",
                         "%y = Gather(%x, %i) {axis: 0}"));
  CheckAgainstCpu(Model1("(float[3,1] %x) -> (float[2,3,4] %y)", "  init int64[3] %s = [2, 1, 4]\n", "%y = Expand(%x, %s)"));
  CheckAgainstCpu(Model1("(float[2,3] %x) -> (float[4,6] %y)", "  init int64[4] %p = [1, 2, 1, 1]\n  init float[] %v = [0.5]\n",
                         "%y = Pad(%x, %p, %v) {mode: \"constant\"}"));
  CheckAgainstCpu(Model1("(float[2,3] %x) -> (float[4,9] %y)", "  init int64[2] %r = [2, 3]\n", "%y = Tile(%x, %r)"));
}

TEST_CASE("generated GatherElements and GatherND give the CPU runtime's numbers", "[cuda][codegen][host]") {
  CheckAgainstCpu(Model1("(float[3,5] %x) -> (float[3,4] %y)", "  init int64[3,4] %i = [0, 4, -1, 2, 1, 1, 3, 0, 4, 2, -5, 3]\n",
                         "%y = GatherElements(%x, %i) {axis: 1}"));
  CheckAgainstCpu(Model1("(float[4,3] %x) -> (float[2,3] %y)", "  init int32[2,3] %i = [3, 0, 1, -4, 2, 0]\n",
                         "%y = GatherElements(%x, %i) {axis: 0}"));
  // The dynamo exporter's mask expansion: [B,S] gathered by [B,1,1,S,2] coordinates.
  CheckAgainstCpu(Model1("(float[2,3] %x) -> (float[2,1,1,3] %y)",
                         "  init int64[2,1,1,3,2] %i = [0, 0, 0, 1, 0, 2, 1, 0, 1, 1, 1, -1]\n", "%y = GatherND(%x, %i)"));
  CheckAgainstCpu(Model1("(float[2,3,4] %x) -> (float[2,4] %y)", "  init int64[2,1] %i = [2, 0]\n",
                         "%y = GatherND(%x, %i) {batch_dims: 1}"));
  CheckAgainstCpu(Model1("(float[3,4,2] %x) -> (float[2,2] %y)", "  init int64[2,2] %i = [0, 3, 2, 1]\n", "%y = GatherND(%x, %i)"));
}

TEST_CASE("generated CumSum and strided-axis softmax give the CPU runtime's numbers", "[cuda][codegen][host]") {
  CheckAgainstCpu(Model1("(float[2,5,3] %x) -> (float[2,5,3] %y)", "  init int64[] %a = [1]\n", "%y = CumSum(%x, %a)"), 1e-5);
  CheckAgainstCpu(Model1("(float[2,5,3] %x) -> (float[2,5,3] %y)", "  init int64[] %a = [-1]\n",
                         "%y = CumSum(%x, %a) {exclusive: 1, reverse: 1}"),
                  1e-5);
  CheckAgainstCpu(Model1("(int64[2,6] %x) -> (int64[2,6] %y)", "  init int32[] %a = [1]\n", "%y = CumSum(%x, %a)"));
  // YOLO's distribution focal loss head: a softmax over the 16 bins of axis 1.
  CheckAgainstCpu(Model1("(float[1,16,4,6] %x) -> (float[1,16,4,6] %y)", "", "%y = Softmax(%x) {axis: 1}", 13), 1e-5);
  CheckAgainstCpu(Model1("(float[2,5,3] %x) -> (float[2,5,3] %y)", "", "%y = LogSoftmax(%x) {axis: -2}", 13), 1e-5);
}

TEST_CASE("generated Resize gives the CPU runtime's numbers", "[cuda][codegen][host]") {
  // YOLOv8's upsample: nearest, asymmetric, floor, scales [1,1,2,2].
  CheckAgainstCpu(Model1("(float[1,2,3,3] %x) -> (float[1,2,6,6] %y)", "  init float[4] %s = [1.0, 1.0, 2.0, 2.0]\n",
                         "%y = Resize(%x, , %s) {mode: \"nearest\", coordinate_transformation_mode: \"asymmetric\", "
                         "nearest_mode: \"floor\"}",
                         18));
  CheckAgainstCpu(Model1("(float[1,2,4,5] %x) -> (float[1,2,7,3] %y)", "  init int64[4] %z = [1, 2, 7, 3]\n",
                         "%y = Resize(%x, , , %z) {mode: \"linear\"}", 18),
                  1e-5);
  CheckAgainstCpu(Model1("(float[1,1,4,4] %x) -> (float[1,1,6,6] %y)", "  init int64[4] %z = [1, 1, 6, 6]\n",
                         "%y = Resize(%x, , , %z) {mode: \"cubic\", coordinate_transformation_mode: \"align_corners\", "
                         "exclude_outside: 1}",
                         18),
                  1e-5);
  CheckAgainstCpu(Model1("(float[1,1,5,5] %x) -> (float[1,1,3,3] %y)", "  init float[8] %r = [0, 0, 0.1, 0.2, 1, 1, 1.2, 0.9]\n"
                         "  init int64[4] %z = [1, 1, 3, 3]\n",
                         "%y = Resize(%x, %r, , %z) {mode: \"linear\", coordinate_transformation_mode: \"tf_crop_and_resize\", "
                         "extrapolation_value: 2.5}",
                         18),
                  1e-5);
  // double: the weights are compiled in exactly (a decimal literal would lose their last bits).
  CheckAgainstCpu(Model1("(double[1,1,5,7] %x) -> (double[1,1,3,4] %y)", "  init int64[4] %z = [1, 1, 3, 4]\n",
                         "%y = Resize(%x, , , %z) {mode: \"cubic\"}", 18),
                  1e-13, 1e-15);
  CheckAgainstCpu(Model1("(float16[1,2,3,4] %x) -> (float16[1,2,6,8] %y)", "  init float[4] %s = [1.0, 1.0, 2.0, 2.0]\n",
                         "%y = Resize(%x, , %s) {mode: \"linear\", coordinate_transformation_mode: \"pytorch_half_pixel\"}", 18),
                  1e-3);
}

TEST_CASE("generated RotaryEmbedding gives the CPU runtime's numbers", "[cuda][codegen][host]") {
  CheckAgainstCpu(Model1("(float[2,3,4,8] %x, float[2,4,4] %c, float[2,4,4] %s) -> (float[2,3,4,8] %y)", "",
                         "%y = RotaryEmbedding(%x, %c, %s)", 23),
                  1e-5);
  CheckAgainstCpu(Model1("(float[2,4,12] %x, float[1,4,2] %c, float[1,4,2] %s) -> (float[2,4,12] %y)", "",
                         "%y = RotaryEmbedding(%x, %c, %s) {num_heads: 2, interleaved: 1, rotary_embedding_dim: 4}", 23),
                  1e-5);
  CheckAgainstCpu(Model1("(float16[1,2,3,8] %x, float16[1,3,4] %c, float16[1,3,4] %s) -> (float16[1,2,3,8] %y)", "",
                         "%y = RotaryEmbedding(%x, %c, %s)", 23),
                  1e-3);
}

TEST_CASE("generated window pooling kernels give the CPU runtime's numbers", "[cuda][codegen][host]") {
  CheckAgainstCpu(Model1("(float[1,2,7,7] %x) -> (float[1,2,4,4] %y)", "",
                         "%y = MaxPool(%x) {kernel_shape: [3, 3], strides: [2, 2], pads: [1, 1, 1, 1]}"));
  CheckAgainstCpu(Model1("(float[1,2,6,6] %x) -> (float[1,2,3,3] %y)", "",
                         "%y = AveragePool(%x) {kernel_shape: [3, 3], strides: [2, 2], pads: [1, 1, 1, 1], "
                         "count_include_pad: 1}"));
  CheckAgainstCpu(Model1("(float[1,2,6,6] %x) -> (float[1,2,3,3] %y)", "",
                         "%y = AveragePool(%x) {kernel_shape: [3, 3], strides: [2, 2], pads: [1, 1, 1, 1]}"));
}

TEST_CASE("generated LRN gives the CPU runtime's numbers", "[cuda][codegen][host]") {
  CheckAgainstCpu(Model1("(float[2,7,3,3] %x) -> (float[2,7,3,3] %y)", "",
                         "%y = LRN(%x) {size: 5, alpha: 0.0001, beta: 0.75, bias: 1.0}"),
                  1e-5);
  CheckAgainstCpu(Model1("(float[1,4,2,2] %x) -> (float[1,4,2,2] %y)", "", "%y = LRN(%x) {size: 2, alpha: 0.5, beta: 0.5}"),
                  1e-5);
}

TEST_CASE("BatchNormalization lowered and generated gives the CPU runtime's numbers", "[cuda][codegen][host]") {
  CheckAgainstCpu(Model1("(float[2,3,4,5] %x) -> (float[2,3,4,5] %y)",
                         "  init float[3] %s = [1.5, 0.25, -2.0]\n  init float[3] %b = [0.1, 0.2, 0.3]\n"
                         "  init float[3] %m = [0.5, -1.0, 2.0]\n  init float[3] %v = [4.0, 0.01, 1.0]\n",
                         "%y = BatchNormalization(%x, %s, %b, %m, %v) {epsilon: 0.001}"),
                  1e-5);
}

TEST_CASE("an LRN of a dtype the generator does not take is refused with the dtype named", "[cuda][codegen]") {
  auto parsed = ParseModel(Model1("(double[1,4,2,2] %x) -> (double[1,4,2,2] %y)", "", "%y = LRN(%x) {size: 3}"));
  REQUIRE(parsed.ok());
  auto typed = TypedBodyOf(**parsed, *(*parsed)->graph->nodes().front());
  REQUIRE(typed.ok());
  auto program = GenerateKernel(**typed, "lrn");
  REQUIRE_FALSE(program.ok());
  REQUIRE_THAT(program.status().message(), Catch::Matchers::Contains("LRN of double"));
}

}  // namespace fusionopt::cuda
