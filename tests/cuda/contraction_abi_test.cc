// The contraction family through the C ABI: compile-only builds (no GPU needed) that plan and
// compile the epilogue and refuse to enqueue, and, with a GPU, results against the CPU runtime.
#include "contraction_test_models.h"

namespace {

// An fo_node_desc for the main graph's first node, with the storage it points into.
struct NodeDescription {
  std::string node_proto, function_proto;
  std::vector<std::vector<int64_t>> dims;
  std::vector<fo_tensor_desc> inputs, outputs;
  std::vector<const void*> constants;
  fo_node_desc desc{};
};

fo_tensor_desc TensorDesc(const Value* value, std::vector<std::vector<int64_t>>& storage) {
  if (value == nullptr) return fo_tensor_desc{0, 0, nullptr};
  storage.push_back(contraction_internal::DimsOf(*value));
  return fo_tensor_desc{static_cast<int32_t>(value->dtype()), static_cast<int32_t>(storage.back().size()),
                        storage.back().data()};
}

std::unique_ptr<NodeDescription> Describe(const Model& model) {
  const Node& node = *model.graph->nodes().front();
  auto description = std::make_unique<NodeDescription>();
  auto bytes = SerializeModel(model);
  REQUIRE(bytes.ok());
  onnx::ModelProto proto;
  REQUIRE(proto.ParseFromString(*bytes));
  description->node_proto = proto.graph().node(0).SerializeAsString();
  for (const onnx::FunctionProto& function : proto.functions()) {
    if (function.name() == node.op_type() && function.domain() == node.domain())
      description->function_proto = function.SerializeAsString();
  }
  description->dims.reserve(node.inputs().size() + node.outputs().size());  // TensorDesc points into it
  for (const Value* input : node.inputs()) {
    description->inputs.push_back(TensorDesc(input, description->dims));
    description->constants.push_back(input != nullptr && input->is_initializer() ? input->initializer()->bytes().data()
                                                                                 : nullptr);
  }
  for (const Value* output : node.outputs()) description->outputs.push_back(TensorDesc(output, description->dims));
  fo_node_desc& desc = description->desc;
  desc.struct_size = sizeof(fo_node_desc);
  desc.node_proto = description->node_proto.data();
  desc.node_proto_size = description->node_proto.size();
  desc.function_proto = description->function_proto.empty() ? nullptr : description->function_proto.data();
  desc.function_proto_size = description->function_proto.size();
  desc.default_opset = model.OpsetFor("").value_or(17);
  desc.num_inputs = description->inputs.size();
  desc.inputs = description->inputs.data();
  desc.constant_inputs = description->constants.data();
  desc.num_outputs = description->outputs.size();
  desc.outputs = description->outputs.data();
  return description;
}

struct ContextDeleter {
  void operator()(fo_context* context) const { fo_context_destroy(context); }
};
struct KernelDeleter {
  void operator()(fo_kernel* kernel) const { fo_kernel_destroy(kernel); }
};
using ContextPtr = std::unique_ptr<fo_context, ContextDeleter>;
using KernelPtr = std::unique_ptr<fo_kernel, KernelDeleter>;

ContextPtr CreateContext(int device) {
  fo_context_options options{};
  options.struct_size = sizeof(options);
  options.device = device;
  options.compile_arch = 90;
  options.cache_dir = "";
  fo_context* context = nullptr;
  const fo_status status = fo_context_create(&options, &context);
  INFO(fo_last_error_message());
  REQUIRE(status == FO_OK);
  return ContextPtr(context);
}

bool HasCudaDevice() {
  int count = 0;
  return cudaGetDeviceCount(&count) == cudaSuccess && count > 0;
}

cpu::RtTensor RandomInput(const Value& value, uint32_t seed) {
  cpu::RtTensor tensor = cpu::RtTensor::Allocate(value.dtype(), contraction_internal::DimsOf(value));
  REQUIRE((value.dtype() == DataType::kFloat || value.dtype() == DataType::kFloat16));
  std::mt19937 generator(seed);
  std::uniform_real_distribution<float> uniform(-1.0f, 1.0f);
  for (int64_t i = 0; i < tensor.NumElements(); ++i) {
    const float number = uniform(generator);
    if (value.dtype() == DataType::kFloat)
      tensor.data<float>()[i] = number;
    else
      tensor.data<uint16_t>()[i] = FloatToHalf(number);
  }
  return tensor;
}

double ElementOf(const std::vector<uint8_t>& bytes, DataType dtype, size_t i) {
  if (dtype == DataType::kFloat) return reinterpret_cast<const float*>(bytes.data())[i];
  return HalfToFloat(reinterpret_cast<const uint16_t*>(bytes.data())[i]);
}

// Runs the whole model on the CPU runtime and, with a GPU, its one node through the ABI on the
// same seeded inputs, and compares: |gpu - cpu| <= tolerance · (1 + |cpu|).
void CompareWithCpu(const std::string& text, const std::string& what, double tolerance) {
  auto model = Parse(text);
  std::vector<cpu::NamedTensor> feeds;
  uint32_t seed = 11;
  for (const Value* input : model->graph->inputs()) {
    if (!input->is_initializer()) feeds.push_back({input->name(), RandomInput(*input, seed++)});
  }
  auto session = cpu::Session::Create(*model);
  REQUIRE(session.ok());
  auto expected = (*session)->Run(feeds);
  INFO(expected.status().message());
  REQUIRE(expected.ok());
  // The CPU reference runs everywhere, so the models stay runnable on machines without a GPU.
  if (!HasCudaDevice()) {
    WARN("no CUDA device: skipped the GPU comparison of " + what + " with the CPU runtime");
    return;
  }

  ContextPtr context = CreateContext(0);
  auto description = Describe(*model);
  fo_kernel* raw_kernel = nullptr;
  fo_status status = fo_kernel_build(context.get(), &description->desc, &raw_kernel);
  INFO(what << ": " << fo_last_error_message());
  REQUIRE(status == FO_OK);
  KernelPtr kernel(raw_kernel);
  INFO(fo_kernel_describe(kernel.get()));
  size_t workspace_bytes = 0;
  REQUIRE(fo_kernel_workspace_size(kernel.get(), &workspace_bytes) == FO_OK);

  std::vector<void*> allocations;
  auto allocate = [&](size_t bytes) {
    void* pointer = nullptr;
    REQUIRE(fo_device_alloc(context.get(), std::max<size_t>(bytes, 1), &pointer) == FO_OK);
    allocations.push_back(pointer);
    return pointer;
  };
  const Node& node = *model->graph->nodes().front();
  std::vector<const void*> inputs;
  for (const Value* input : node.inputs()) {
    const void* host = nullptr;
    size_t bytes = 0;
    if (input->is_initializer()) {
      host = input->initializer()->bytes().data();
      bytes = input->initializer()->nbytes();
    } else {
      for (const cpu::NamedTensor& feed : feeds) {
        if (feed.name == input->name()) host = feed.tensor.raw(), bytes = feed.tensor.nbytes();
      }
    }
    REQUIRE(host != nullptr);
    void* device = allocate(bytes);
    REQUIRE(fo_copy_to_device(context.get(), device, host, bytes) == FO_OK);
    inputs.push_back(device);
  }
  std::vector<void*> outputs;
  for (const cpu::NamedTensor& result : *expected) outputs.push_back(allocate(result.tensor.nbytes()));
  void* workspace = workspace_bytes > 0 ? allocate(workspace_bytes) : nullptr;
  status = fo_kernel_enqueue(kernel.get(), inputs.data(), outputs.data(), workspace);
  INFO(fo_last_error_message());
  REQUIRE(status == FO_OK);
  REQUIRE(fo_synchronize(context.get()) == FO_OK);

  for (size_t o = 0; o < outputs.size(); ++o) {
    const cpu::RtTensor& reference = (*expected)[o].tensor;
    std::vector<uint8_t> actual(reference.nbytes());
    REQUIRE(fo_copy_to_host(context.get(), actual.data(), outputs[o], reference.nbytes()) == FO_OK);
    REQUIRE(fo_synchronize(context.get()) == FO_OK);
    double worst = 0;
    for (int64_t i = 0; i < reference.NumElements(); ++i) {
      const double want = reference.ValueAsDouble(i);
      worst =
          std::max(worst, std::abs(ElementOf(actual, reference.dtype(), size_t(i)) - want) / (1.0 + std::abs(want)));
    }
    INFO(what << " output " << o << ": worst relative difference " << worst);
    CHECK(worst <= tolerance);
  }
  for (void* pointer : allocations) CHECK(fo_device_free(context.get(), pointer) == FO_OK);
}

}  // namespace

TEST_CASE("contraction ABI: compile-only builds plan and compile the epilogue, and refuse to enqueue",
          "[cuda][contraction][abi]") {
  ContextPtr context = CreateContext(-1);
  SECTION("MatMul + bias + erf GELU: cuBLASLt plus one generated kernel") {
    auto model = Parse(MatMulBiasModel(kErfGelu, 17));
    auto description = Describe(*model);
    int supported = 0;
    REQUIRE(fo_node_supported(context.get(), &description->desc, &supported) == FO_OK);
    CHECK(supported == 1);
    fo_kernel* raw_kernel = nullptr;
    const fo_status status = fo_kernel_build(context.get(), &description->desc, &raw_kernel);
    INFO(fo_last_error_message());
    REQUIRE(status == FO_OK);
    KernelPtr kernel(raw_kernel);
    uint32_t launches = 0;
    REQUIRE(fo_kernel_launch_count(kernel.get(), &launches) == FO_OK);
    CHECK(launches == 2);
    CHECK_THAT(std::string(fo_kernel_describe(kernel.get())), Catch::Contains("cuBLASLt"));
    // Non-null stand-ins (never dereferenced): the ABI rejects null pointers before the kernel
    // is asked, and the kernel must be the one refusing here.
    alignas(256) static float stand_in[4];
    const void* inputs[3] = {stand_in, stand_in, stand_in};
    void* outputs[1] = {stand_in};
    size_t workspace_bytes = 0;
    REQUIRE(fo_kernel_workspace_size(kernel.get(), &workspace_bytes) == FO_OK);
    CHECK(workspace_bytes > 0);  // the library's cap plus the biased product the epilogue reads
    CHECK(fo_kernel_enqueue(kernel.get(), inputs, outputs, stand_in) == FO_CUDA_ERROR);
    CHECK_THAT(std::string(fo_last_error_message()), Catch::Contains("compile-only"));
  }
  SECTION("FusedConvAddRelu: one cuDNN call") {
    auto model = Parse(ConvAddReluModel());
    auto description = Describe(*model);
    fo_kernel* raw_kernel = nullptr;
    const fo_status status = fo_kernel_build(context.get(), &description->desc, &raw_kernel);
    INFO(fo_last_error_message());
    REQUIRE(status == FO_OK);
    KernelPtr kernel(raw_kernel);
    uint32_t launches = 0;
    REQUIRE(fo_kernel_launch_count(kernel.get(), &launches) == FO_OK);
    CHECK(launches == 1);
    CHECK_THAT(std::string(fo_kernel_describe(kernel.get())), Catch::Contains("cuDNN"));
  }
  SECTION("a 3-D Conv is not supported, with the reason") {
    auto model =
        Parse(SingleNode("(float[1,2,4,4,4] %x, float[3,2,1,1,1] %w) -> (float[1,3,4,4,4] %y)", "%y = Conv(%x, %w)"));
    auto description = Describe(*model);
    int supported = 1;
    REQUIRE(fo_node_supported(context.get(), &description->desc, &supported) == FO_OK);
    CHECK(supported == 0);
    CHECK_THAT(std::string(fo_last_error_message()), Catch::Contains("3-D Conv"));
  }
}

TEST_CASE("contraction GPU: results match the CPU runtime", "[cuda][contraction][gpu]") {
  // cuBLASLt's GELU epilogue may use a faster tanh than the CPU's; everything else is float32
  // without TF32.
  CompareWithCpu(MatMulBiasModel(kTanhGelu), "MatMul + bias + tanh GELU", 1e-3);
  CompareWithCpu(MatMulBiasModel(kErfGelu, 17), "MatMul + bias + erf GELU (generated epilogue)", 1e-4);
  CompareWithCpu(SingleNode("(float[2,3,4] %a, float[4,5] %b) -> (float[2,3,5] %y)", "%y = MatMul(%a, %b)"),
                 "batched MatMul with a broadcast B", 1e-4);
  CompareWithCpu(SingleNode("(float[2,3,4] %a, float[2,4,5] %b) -> (float[2,3,5] %y)", "%y = MatMul(%a, %b)"),
                 "strided-batch MatMul", 1e-4);
  CompareWithCpu(SingleNode("(float[3,4] %a, float[5,4] %b, float[3,5] %c) -> (float[3,5] %y)",
                            "%y = Gemm(%a, %b, %c) {transB: 1, alpha: 0.5, beta: 2.0}"),
                 "Gemm transB with beta·C", 1e-4);
  CompareWithCpu(ConvAddReluModel(), "Conv + bias + residual + Relu", 1e-4);
  CompareWithCpu(
      MatMulEpilogueModel("  %s = Div(%m, %eight)\n  %t = Add(%s, %bias)\n  %u = Add(%r, %t)\n  %y = Relu(%u)\n"),
      "MatMul / 8 + bias + residual + Relu (alpha, BIAS, C, RELU)", 1e-4);
}

TEST_CASE("contraction GPU: the other library paths match the CPU runtime", "[cuda][contraction][gpu]") {
  CompareWithCpu(SingleNode("(float[3,4] %a, float[4,5] %b, float[3,1] %c) -> (float[3,5] %y)",
                            "%y = Gemm(%a, %b, %c) {beta: 0.25}"),
                 "Gemm with a column C (generated epilogue)", 1e-4);
  CompareWithCpu(
      FusedModel("(float[1,4,9,9] %x, float[4,2,3,3] %w) -> (float[1,4,5,5] %y)", {"x", "w"}, {"y"},
                 "  %c = Conv(%x, %w) {group: 2, strides: [2, 2], dilations: [2, 2], auto_pad: \"SAME_UPPER\"}\n"
                 "  %y = Sigmoid(%c)\n"),
      "grouped strided dilated Conv + generated Sigmoid", 1e-4);
  CompareWithCpu(FusedModel("(float[1,2,5,5] %x, float[3,2,1,1] %w, float[3,1,1] %b) -> (float[1,3,5,5] %y)",
                            {"x", "w", "b"}, {"y"}, "  %c = Conv(%x, %w)\n  %y = Add(%c, %b)\n"),
                 "Conv + bias with IDENTITY activation", 1e-4);
  CompareWithCpu(SingleNode("(float16[4,64] %a, float16[64,32] %b) -> (float16[4,32] %y)", "%y = MatMul(%a, %b)"),
                 "float16 MatMul", 1e-2);
  CompareWithCpu(SingleNode("(float16[1,8,6,6] %x, float16[4,8,3,3] %w) -> (float16[1,4,4,4] %y)", "%y = Conv(%x, %w)"),
                 "float16 Conv", 1e-2);
  CompareWithCpu(FusedModel("(float16[1,8,6,6] %x, float16[4,8,3,3] %w, float16[4] %b) -> (float16[1,4,6,6] %y)",
                            {"x", "w", "b"}, {"y"},
                            "  %c = Conv(%x, %w, %b) {pads: [1, 1, 1, 1]}\n  %y = Relu(%c)\n"),
                 "float16 Conv + bias + Relu (fused call)", 1e-2);
}
