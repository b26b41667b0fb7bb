// The plugin library's C ABI (include/fusionopt/plugin.h), tested the way hosts use it: the
// library is dlopen'ed and every fo_* function resolved by name. Needs no GPU: argument
// validation, error reporting, a compile-only context (support decisions and NVRTC builds for
// sm_80/sm_90), and every fused node of models/ at O3 built through the ABI.
#include <catch2/catch.hpp>
#include <cuda_runtime.h>

#include <cstring>
#include <map>
#include <string>
#include <vector>

#include "have_device.h"
#include "ir/op_class.h"
#include "plugin_test_support.h"

namespace fusionopt::plugin_test {
namespace {

const PluginApi& Api() {
  const PluginApi& api = PluginApi::Get();
  INFO("dlopen: " << api.error);
  for (const std::string& name : api.missing) INFO("missing export " << name);
  REQUIRE(api.ok());
  return api;
}

std::string LastError() { return PluginApi::Get().fo_last_error_message(); }

ValueType TensorType(std::vector<int64_t> dims, DataType dtype = DataType::kFloat) {
  ValueType type;
  type.dtype = dtype;
  type.shape.emplace();
  for (int64_t size : dims) type.shape->push_back(Dim::Known(size));
  return type;
}

onnx::NodeProto MakeNode(const std::string& op, std::vector<std::string> inputs, std::vector<std::string> outputs,
                         const std::string& domain = "") {
  onnx::NodeProto node;
  node.set_op_type(op);
  node.set_domain(domain);
  node.set_name(op + "_0");
  for (const std::string& input : inputs) node.add_input(input);
  for (const std::string& output : outputs) node.add_output(output);
  return node;
}

// z = Relu(x + y): the smallest fused elementwise body.
onnx::FunctionProto AddReluFunction() {
  onnx::FunctionProto function;
  function.set_domain("ai.fusionopt");
  function.set_name("FusedAddRelu");
  function.add_input("x");
  function.add_input("y");
  function.add_output("z");
  *function.add_node() = MakeNode("Add", {"x", "y"}, {"t"});
  *function.add_node() = MakeNode("Relu", {"t"}, {"z"});
  onnx::OperatorSetIdProto* opset = function.add_opset_import();
  opset->set_domain("");
  opset->set_version(17);
  return function;
}

NodeRequest MakeRequest(const onnx::NodeProto& node, const onnx::FunctionProto* function,
                        const std::vector<ValueType>& inputs, const std::vector<ValueType>& outputs) {
  NodeRequest request;
  request.label = node.op_type();
  request.node_proto = node.SerializeAsString();
  if (function != nullptr) request.function_proto = function->SerializeAsString();
  NodeRequest::Describe(inputs, request.input_dims, request.inputs);
  NodeRequest::Describe(outputs, request.output_dims, request.outputs);
  return request;
}

NodeRequest AddReluRequest(DataType dtype = DataType::kFloat) {
  static const onnx::FunctionProto function = AddReluFunction();
  return MakeRequest(MakeNode("FusedAddRelu", {"a", "b"}, {"c"}, "ai.fusionopt"), &function,
                     {TensorType({2, 3}, dtype), TensorType({3}, dtype)}, {TensorType({2, 3}, dtype)});
}

struct CompileOnlyContext {
  ContextHolder holder;
  explicit CompileOnlyContext(int arch = 90) {
    fo_context_options options = CompileOnlyOptions(arch);
    REQUIRE(Api().fo_context_create(&options, &holder.context) == FO_OK);
    REQUIRE(holder.context != nullptr);
  }
  fo_context* get() const { return holder.context; }
};

// Supported (1/0) with the reason, or the status when the call itself failed.
struct Verdict {
  fo_status status;
  int supported;
  std::string reason;
};
Verdict Support(fo_context* context, const NodeRequest& request) {
  fo_node_desc desc = request.desc();
  int supported = -1;
  fo_status status = Api().fo_node_supported(context, &desc, &supported);
  return {status, supported, LastError()};
}

void RequireInvalid(fo_status status, const std::string& expected_text) {
  INFO("message: " << LastError());
  CHECK(status == FO_INVALID_ARGUMENT);
  CHECK(LastError().find(expected_text) != std::string::npos);
}

TEST_CASE("plugin: the library loads and exports its C ABI", "[plugin]") {
  const PluginApi& api = Api();
  CHECK(api.fo_abi_version() == FO_PLUGIN_ABI_VERSION);
  CHECK(std::string(api.fo_status_name(FO_OK)) == "FO_OK");
  CHECK(std::string(api.fo_status_name(FO_INVALID_ARGUMENT)) == "FO_INVALID_ARGUMENT");
  CHECK(std::string(api.fo_status_name(FO_UNSUPPORTED)) == "FO_UNSUPPORTED");
  CHECK(std::string(api.fo_status_name(FO_CUDA_ERROR)) == "FO_CUDA_ERROR");
  CHECK(std::string(api.fo_status_name(FO_COMPILE_ERROR)) == "FO_COMPILE_ERROR");
  CHECK(std::string(api.fo_status_name(FO_INTERNAL_ERROR)) == "FO_INTERNAL_ERROR");
  CHECK(std::string(api.fo_status_name(static_cast<fo_status>(42))) == "FO_UNKNOWN_STATUS");
}

TEST_CASE("plugin: every entry point rejects NULL arguments with a message", "[plugin]") {
  const PluginApi& api = Api();
  CompileOnlyContext context;
  fo_context* ctx = context.get();
  fo_context_options options = CompileOnlyOptions();
  fo_context* created = nullptr;
  fo_counters counters{};
  int supported = 0;
  fo_kernel* kernel = nullptr;
  size_t bytes = 0;
  uint32_t launches = 0;
  void* pointer = nullptr;
  float milliseconds = 0;
  NodeRequest request = AddReluRequest();
  fo_node_desc desc = request.desc();
  char host[4] = {};

  RequireInvalid(api.fo_context_create(nullptr, &created), "fo_context_create: options is NULL");
  RequireInvalid(api.fo_context_create(&options, nullptr), "context is NULL");
  RequireInvalid(api.fo_context_counters(nullptr, &counters), "fo_context_counters: context is NULL");
  RequireInvalid(api.fo_context_counters(ctx, nullptr), "counters is NULL");
  RequireInvalid(api.fo_context_reset_counters(nullptr), "context is NULL");
  fo_build_stats stats{};
  stats.struct_size = sizeof(stats);
  RequireInvalid(api.fo_context_build_stats(nullptr, &stats), "fo_context_build_stats: context is NULL");
  RequireInvalid(api.fo_context_build_stats(ctx, nullptr), "stats is NULL");
  stats.struct_size = 8;
  RequireInvalid(api.fo_context_build_stats(ctx, &stats), "struct_size 8 is too small");
  RequireInvalid(api.fo_node_supported(nullptr, &desc, &supported), "context is NULL");
  RequireInvalid(api.fo_node_supported(ctx, nullptr, &supported), "node is NULL");
  RequireInvalid(api.fo_node_supported(ctx, &desc, nullptr), "supported is NULL");
  RequireInvalid(api.fo_kernel_build(nullptr, &desc, &kernel), "context is NULL");
  RequireInvalid(api.fo_kernel_build(ctx, nullptr, &kernel), "node is NULL");
  RequireInvalid(api.fo_kernel_build(ctx, &desc, nullptr), "kernel is NULL");
  RequireInvalid(api.fo_kernel_workspace_size(nullptr, &bytes), "kernel is NULL");
  RequireInvalid(api.fo_kernel_launch_count(nullptr, &launches), "kernel is NULL");
  RequireInvalid(api.fo_kernel_enqueue(nullptr, nullptr, nullptr, nullptr), "kernel is NULL");
  RequireInvalid(api.fo_device_alloc(nullptr, 16, &pointer), "context is NULL");
  RequireInvalid(api.fo_device_alloc(ctx, 16, nullptr), "pointer is NULL");
  RequireInvalid(api.fo_device_free(nullptr, nullptr), "context is NULL");
  RequireInvalid(api.fo_copy_to_device(nullptr, host, host, 4), "context is NULL");
  RequireInvalid(api.fo_copy_to_device(ctx, nullptr, host, 4), "device is NULL");
  RequireInvalid(api.fo_copy_to_host(ctx, nullptr, host, 4), "host is NULL");
  RequireInvalid(api.fo_copy_device_to_device(ctx, host, nullptr, 4), "source is NULL");
  RequireInvalid(api.fo_synchronize(nullptr), "context is NULL");
  RequireInvalid(api.fo_timer_start(nullptr), "context is NULL");
  RequireInvalid(api.fo_timer_stop(ctx, nullptr), "milliseconds is NULL");
  RequireInvalid(api.fo_timer_stop(nullptr, &milliseconds), "context is NULL");
  RequireInvalid(api.fo_graph_begin_capture(nullptr), "context is NULL");
  RequireInvalid(api.fo_graph_end_capture(nullptr), "context is NULL");
  RequireInvalid(api.fo_graph_replay(nullptr), "context is NULL");
  RequireInvalid(api.fo_graph_discard(nullptr), "context is NULL");
  fo_graph* graph = nullptr;
  RequireInvalid(api.fo_graph_end_capture_new(nullptr, &graph), "context is NULL");
  RequireInvalid(api.fo_graph_end_capture_new(ctx, nullptr), "graph is NULL");
  RequireInvalid(api.fo_graph_launch(nullptr), "graph is NULL");
  CHECK(graph == nullptr);

  CHECK(created == nullptr);
  CHECK(kernel == nullptr);
  // Destroys and describes accept NULL.
  api.fo_context_destroy(nullptr);
  api.fo_kernel_destroy(nullptr);
  api.fo_graph_destroy(nullptr);
  CHECK(std::string(api.fo_context_describe(nullptr)).empty());
  CHECK(api.fo_context_stream(nullptr) == nullptr);
  CHECK(std::string(api.fo_kernel_describe(nullptr)).empty());
  // A successful call leaves no message behind.
  REQUIRE(api.fo_context_counters(ctx, &counters) == FO_OK);
  CHECK(LastError().empty());
}

TEST_CASE("plugin: context options are validated", "[plugin]") {
  const PluginApi& api = Api();
  fo_context* context = nullptr;
  fo_context_options options = CompileOnlyOptions();
  options.struct_size = 4;
  RequireInvalid(api.fo_context_create(&options, &context), "struct_size is 4");
  options = CompileOnlyOptions();
  options.device = -2;
  RequireInvalid(api.fo_context_create(&options, &context), "device -2");
  options = CompileOnlyOptions(7);
  RequireInvalid(api.fo_context_create(&options, &context), "compile_arch 7");
  CHECK(context == nullptr);
}

TEST_CASE("plugin: a device context fails cleanly without a GPU", "[plugin]") {
  const PluginApi& api = Api();
  const bool have_device = test_support::HaveCudaDevice();
  fo_context_options options = CompileOnlyOptions();
  options.device = 0;
  ContextHolder context;
  fo_status status = api.fo_context_create(&options, &context.context);
  INFO("message: " << LastError());
  if (have_device) {
    REQUIRE(status == FO_OK);
    CHECK(std::string(api.fo_context_describe(context.context)).find("sm_") != std::string::npos);
    CHECK(api.fo_context_stream(context.context) != nullptr);
    return;
  }
  CHECK(status == FO_CUDA_ERROR);
  CHECK(context.context == nullptr);
  CHECK(LastError().find("fo_context_create: ") == 0);
  CHECK(LastError().size() > std::strlen("fo_context_create: "));
  // A device that cannot exist is refused the same way.
  options.device = 4096;
  CHECK(api.fo_context_create(&options, &context.context) == FO_CUDA_ERROR);
}

TEST_CASE("plugin: a compile-only context touches no device", "[plugin]") {
  const PluginApi& api = Api();
  CompileOnlyContext context(80);
  fo_context* ctx = context.get();
  const std::string description = api.fo_context_describe(ctx);
  INFO(description);
  CHECK(description.find("compile-only") != std::string::npos);
  CHECK(api.fo_context_stream(ctx) == nullptr);  // no device, no stream
  CHECK(description.find("sm_80") != std::string::npos);
  CHECK(description.find("NVRTC") != std::string::npos);
  CHECK(description.find("cuDNN") != std::string::npos);

  fo_counters counters{};
  REQUIRE(api.fo_context_counters(ctx, &counters) == FO_OK);
  CHECK(counters.launches == 0);
  CHECK(counters.kernels_executed == UINT64_MAX);
  CHECK(api.fo_context_reset_counters(ctx) == FO_OK);

  // Building a kernel is counted, compile-only too.
  fo_build_stats before{};
  before.struct_size = sizeof(before);
  REQUIRE(api.fo_context_build_stats(ctx, &before) == FO_OK);
  NodeRequest request = AddReluRequest();
  fo_node_desc desc = request.desc();
  fo_kernel* kernel = nullptr;
  REQUIRE(api.fo_kernel_build(ctx, &desc, &kernel) == FO_OK);
  api.fo_kernel_destroy(kernel);
  fo_build_stats after{};
  after.struct_size = sizeof(after);
  REQUIRE(api.fo_context_build_stats(ctx, &after) == FO_OK);
  CHECK(after.kernels_built == before.kernels_built + 1);
  CHECK(after.modules_compiled + after.modules_from_cache == before.modules_compiled + before.modules_from_cache + 1);
  CHECK(after.build_seconds > before.build_seconds);

  void* pointer = reinterpret_cast<void*>(0x1000);
  char host[8] = {};
  float milliseconds = 0;
  auto require_cuda_error = [&](fo_status status) {
    INFO("message: " << LastError());
    CHECK(status == FO_CUDA_ERROR);
    CHECK(LastError().find("compile-only") != std::string::npos);
  };
  require_cuda_error(api.fo_device_alloc(ctx, 64, &pointer));
  CHECK(pointer == nullptr);
  require_cuda_error(api.fo_device_free(ctx, host));
  require_cuda_error(api.fo_copy_to_device(ctx, host, host, sizeof(host)));
  require_cuda_error(api.fo_copy_to_host(ctx, host, host, sizeof(host)));
  require_cuda_error(api.fo_copy_device_to_device(ctx, host, host, sizeof(host)));
  require_cuda_error(api.fo_synchronize(ctx));
  require_cuda_error(api.fo_timer_start(ctx));
  require_cuda_error(api.fo_timer_stop(ctx, &milliseconds));
  require_cuda_error(api.fo_graph_begin_capture(ctx));
  require_cuda_error(api.fo_graph_end_capture(ctx));
  require_cuda_error(api.fo_graph_replay(ctx));
  require_cuda_error(api.fo_graph_discard(ctx));
  fo_graph* graph = reinterpret_cast<fo_graph*>(&milliseconds);  // must be cleared
  require_cuda_error(api.fo_graph_end_capture_new(ctx, &graph));
  CHECK(graph == nullptr);
}

TEST_CASE("plugin: fo_node_supported decides without building", "[plugin]") {
  CompileOnlyContext context;
  SECTION("a fused elementwise node, float and float16") {
    for (DataType dtype : {DataType::kFloat, DataType::kFloat16}) {
      Verdict verdict = Support(context.get(), AddReluRequest(dtype));
      INFO(NameOf(dtype) << ": " << verdict.reason);
      CHECK(verdict.status == FO_OK);
      CHECK(verdict.supported == 1);
    }
  }
  SECTION("a standard elementwise op") {
    Verdict verdict = Support(context.get(), MakeRequest(MakeNode("Mul", {"a", "a"}, {"b"}), nullptr,
                                                          {TensorType({4, 8}), TensorType({4, 8})}, {TensorType({4, 8})}));
    INFO(verdict.reason);
    CHECK(verdict.status == FO_OK);
    CHECK(verdict.supported == 1);
  }
  SECTION("an op nobody knows") {
    Verdict verdict = Support(context.get(), MakeRequest(MakeNode("NoSuchOp", {"a"}, {"b"}), nullptr,
                                                          {TensorType({4})}, {TensorType({4})}));
    INFO(verdict.reason);
    CHECK(verdict.status == FO_OK);
    CHECK(verdict.supported == 0);
    CHECK(verdict.reason.find("NoSuchOp") != std::string::npos);
  }
  SECTION("a view") {
    Verdict verdict = Support(context.get(), MakeRequest(MakeNode("Flatten", {"a"}, {"b"}), nullptr,
                                                          {TensorType({2, 3, 4})}, {TensorType({2, 12})}));
    CHECK(verdict.status == FO_OK);
    CHECK(verdict.supported == 0);
    CHECK(verdict.reason.find("a view: the host aliases the input") != std::string::npos);
  }
  SECTION("input shapes that do not broadcast") {
    static const onnx::FunctionProto function = AddReluFunction();
    Verdict verdict = Support(context.get(), MakeRequest(MakeNode("FusedAddRelu", {"a", "b"}, {"c"}, "ai.fusionopt"),
                                                          &function, {TensorType({2, 3}), TensorType({4})},
                                                          {TensorType({2, 3})}));
    INFO(verdict.reason);
    CHECK(verdict.status == FO_OK);
    CHECK(verdict.supported == 0);
    CHECK(verdict.reason.find("broadcast") != std::string::npos);
  }
}

TEST_CASE("plugin: malformed node descriptions are FO_INVALID_ARGUMENT", "[plugin]") {
  const PluginApi& api = Api();
  CompileOnlyContext context;
  int supported = 0;
  auto check = [&](const NodeRequest& request, const std::string& expected, auto&& edit) {
    fo_node_desc desc = request.desc();
    edit(desc);
    RequireInvalid(api.fo_node_supported(context.get(), &desc, &supported), expected);
    fo_kernel* kernel = nullptr;
    RequireInvalid(api.fo_kernel_build(context.get(), &desc, &kernel), expected);
    CHECK(kernel == nullptr);
  };
  NodeRequest good = AddReluRequest();
  check(good, "struct_size", [](fo_node_desc& desc) { desc.struct_size = 8; });
  check(good, "node_proto is empty", [](fo_node_desc& desc) { desc.node_proto = nullptr; });
  check(good, "not a serialized onnx.NodeProto", [](fo_node_desc& desc) {
    static const char garbage[] = "\xff\xff\xff\xff";
    desc.node_proto = garbage;
    desc.node_proto_size = 4;
  });
  check(good, "num_inputs is 1 but the NodeProto has 2", [](fo_node_desc& desc) { desc.num_inputs = 1; });
  check(good, "num_outputs is 2", [](fo_node_desc& desc) {
    static fo_tensor_desc two[2];
    two[0] = desc.outputs[0];
    two[1] = desc.outputs[0];
    desc.outputs = two;
    desc.num_outputs = 2;
  });
  check(good, "no function_proto", [](fo_node_desc& desc) {
    desc.function_proto = nullptr;
    desc.function_proto_size = 0;
  });
  {
    NodeRequest request = AddReluRequest();
    request.inputs[1].dtype = 99;
    check(request, "unknown dtype code 99", [](fo_node_desc&) {});
  }
  {
    NodeRequest request = AddReluRequest();
    request.inputs[0].dims = nullptr;
    check(request, "rank 2 but dims is NULL", [](fo_node_desc&) {});
  }
  {
    NodeRequest request = AddReluRequest();
    request.input_dims[0][1] = -1;
    check(request, "dims must be static", [](fo_node_desc&) {});
  }
  {
    NodeRequest request = AddReluRequest();
    request.output_dims[0][1] = 4;
    check(request, "the desc says float[2,4]", [](fo_node_desc&) {});
  }
  {
    onnx::FunctionProto other = AddReluFunction();
    other.set_name("FusedSomethingElse");
    NodeRequest request = AddReluRequest();
    request.function_proto = other.SerializeAsString();
    check(request, "function_proto defines ai.fusionopt::FusedSomethingElse", [](fo_node_desc&) {});
  }
}

TEST_CASE("plugin: fo_kernel_build compiles in a compile-only context", "[plugin]") {
  const PluginApi& api = Api();
  for (int arch : {80, 90}) {
    CompileOnlyContext context(arch);
    NodeRequest request = AddReluRequest();
    fo_node_desc desc = request.desc();
    KernelHolder kernel;
    fo_status status = api.fo_kernel_build(context.get(), &desc, &kernel.kernel);
    INFO("sm_" << arch << ": " << LastError());
    REQUIRE(status == FO_OK);
    REQUIRE(kernel.kernel != nullptr);
    const std::string description = api.fo_kernel_describe(kernel.kernel);
    INFO(description);
    CHECK(description.find("compile-only, sm_" + std::to_string(arch)) != std::string::npos);
    uint32_t launches = 0;
    REQUIRE(api.fo_kernel_launch_count(kernel.kernel, &launches) == FO_OK);
    CHECK(launches >= 1);
    size_t workspace = 1;
    REQUIRE(api.fo_kernel_workspace_size(kernel.kernel, &workspace) == FO_OK);
    CHECK(workspace == 0);

    float a[6], b[3], c[6];
    const void* inputs[] = {a, b};
    void* outputs[] = {c};
    CHECK(api.fo_kernel_enqueue(kernel.kernel, inputs, outputs, nullptr) == FO_CUDA_ERROR);
    CHECK(LastError().find("compile-only") != std::string::npos);
    const void* missing[] = {a, nullptr};
    RequireInvalid(api.fo_kernel_enqueue(kernel.kernel, missing, outputs, nullptr), "input 1 is NULL");
    RequireInvalid(api.fo_kernel_enqueue(kernel.kernel, inputs, nullptr, nullptr), "outputs is NULL");
    fo_counters counters{};
    REQUIRE(api.fo_context_counters(context.get(), &counters) == FO_OK);
    CHECK(counters.launches == 0);  // nothing was launched
  }
}

TEST_CASE("plugin: fo_kernel_build reports unsupported nodes", "[plugin]") {
  const PluginApi& api = Api();
  CompileOnlyContext context;
  NodeRequest view = MakeRequest(MakeNode("Identity", {"a"}, {"b"}), nullptr, {TensorType({5})}, {TensorType({5})});
  fo_node_desc desc = view.desc();
  KernelHolder kernel;
  CHECK(api.fo_kernel_build(context.get(), &desc, &kernel.kernel) == FO_UNSUPPORTED);
  CHECK(kernel.kernel == nullptr);
  CHECK(LastError().find("a view") != std::string::npos);
}

// Fused functions whose bodies are elementwise chains or normalization/activation composites:
// the generated families must take every one.
bool MustBuild(const std::string& op_type) {
  for (const char* family : {"Elementwise", "LayerNorm", "RMSNorm", "Softmax"}) {
    if (op_type.find(family) != std::string::npos) return true;
  }
  return op_type.find("Gelu") != std::string::npos && op_type.find("MatMul") == std::string::npos &&
         op_type.find("Gemm") == std::string::npos && op_type.find("Conv") == std::string::npos;
}

TEST_CASE("plugin: every fused node of the models at O3 through the ABI, compile-only", "[plugin][models]") {
  const PluginApi& api = Api();
  CompileOnlyContext context;
  int built = 0, unsupported = 0, untyped = 0;
  std::string reasons;
  for (const std::string& path : ModelPaths()) {
    std::string error;
    std::unique_ptr<Model> model = LoadBoundModel(path, 3, error);
    INFO(path << ": " << error);
    REQUIRE(model != nullptr);
    SavedProtos saved;
    REQUIRE(SaveProtos(*model, saved, error));
    for (const auto& node : model->graph->nodes()) {
      if (node->domain() != "ai.fusionopt") continue;
      NodeRequest request;
      if (!RequestFor(*model, *node, saved, request)) {
        ++untyped;
        WARN(path << ": " << request.label << " has no static types");
        continue;
      }
      fo_node_desc desc = request.desc();
      KernelHolder kernel;
      fo_status status = api.fo_kernel_build(context.get(), &desc, &kernel.kernel);
      const std::string outcome = status == FO_OK ? api.fo_kernel_describe(kernel.kernel) : LastError();
      INFO(request.label << ": " << api.fo_status_name(status) << ": " << outcome);
      if (status == FO_OK) {
        ++built;
      } else {
        CHECK(status == FO_UNSUPPORTED);
        ++unsupported;
        reasons += "\n  " + std::filesystem::path(path).filename().string() + ": " + outcome;
      }
      if (MustBuild(node->op_type())) CHECK(status == FO_OK);
      // fo_node_supported agrees with the build.
      int supported = -1;
      REQUIRE(api.fo_node_supported(context.get(), &desc, &supported) == FO_OK);
      CHECK(supported == (status == FO_OK ? 1 : 0));
    }
  }
  WARN("fused nodes at O3: " << built << " built, " << unsupported << " unsupported, " << untyped << " untyped"
                              << reasons);
  CHECK(built > 0);
  CHECK(untyped == 0);
}

TEST_CASE("plugin: every standard op of the models at O0 through the ABI, compile-only", "[plugin][models]") {
  const PluginApi& api = Api();
  CompileOnlyContext context;
  int built = 0, unsupported = 0, launch_free = 0;
  std::map<std::string, std::string> unsupported_ops;  // op type -> one reason
  for (const std::string& path : ModelPaths()) {
    std::string error;
    std::unique_ptr<Model> model = LoadBoundModel(path, 0, error);
    INFO(path << ": " << error);
    REQUIRE(model != nullptr);
    SavedProtos saved;
    REQUIRE(SaveProtos(*model, saved, error));
    for (const auto& node : model->graph->nodes()) {
      const OpClass op_class = ClassifyOp(*node);
      if (op_class == OpClass::kView || op_class == OpClass::kShape) {
        ++launch_free;
        continue;
      }
      NodeRequest request;
      REQUIRE(RequestFor(*model, *node, saved, request));
      fo_node_desc desc = request.desc();
      KernelHolder kernel;
      fo_status status = api.fo_kernel_build(context.get(), &desc, &kernel.kernel);
      INFO(request.label << ": " << api.fo_status_name(status) << ": " << LastError());
      // A compile or internal error is a bug in the library, whatever the op.
      CHECK((status == FO_OK || status == FO_UNSUPPORTED));
      if (status == FO_OK) {
        ++built;
      } else {
        ++unsupported;
        unsupported_ops.emplace(node->op_type(), LastError());
      }
    }
  }
  std::string reasons;
  for (const auto& [op, reason] : unsupported_ops) reasons += "\n  " + op + ": " + reason;
  WARN("standard ops at O0: " << built << " built, " << unsupported << " unsupported, " << launch_free
                              << " views or host-side" << reasons);
  CHECK(built > 0);
}

}  // namespace
}  // namespace fusionopt::plugin_test
