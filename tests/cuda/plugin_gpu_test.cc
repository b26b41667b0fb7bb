// The plugin library on a GPU, through its C ABI: every kernel a model needs — each fused node
// at O3 and each standard op at O0 and O3 — run on the inputs the CPU runtime saw for that node
// in a whole-model run with seeded random feeds, and compared with the CPU runtime's output
// element by element; launch and CUPTI counters; CUDA graph capture and replay; the timer.
// Without a device every case WARNs what it skipped and returns.
#include <catch2/catch.hpp>
#include <cuda_runtime.h>

#include <cmath>
#include <cstring>
#include <map>
#include <string>
#include <vector>

#include "cpu_runtime/engine/inputs.h"
#include "have_device.h"
#include "cpu_runtime/engine/session.h"
#include "ir/float16.h"
#include "ir/op_class.h"
#include "plugin_test_support.h"

namespace fusionopt::plugin_test {
namespace {

const PluginApi& Api() {
  const PluginApi& api = PluginApi::Get();
  INFO("dlopen: " << api.error);
  REQUIRE(api.ok());
  return api;
}

std::string LastError() { return PluginApi::Get().fo_last_error_message(); }

struct DeviceContext {
  ContextHolder holder;
  test_support::ScratchDir cache{"plugin_gpu_cache"};
  std::string cache_dir = cache.path().string();
  explicit DeviceContext(bool count_executed) {
    fo_context_options options{};
    options.struct_size = sizeof(options);
    options.device = 0;
    options.cache_dir = cache_dir.c_str();
    options.count_executed_kernels = count_executed ? 1 : 0;
    fo_status status = Api().fo_context_create(&options, &holder.context);
    INFO(LastError());
    REQUIRE(status == FO_OK);
  }
  fo_context* get() const { return holder.context; }
};

// Device memory freed with the test.
struct DeviceMemory {
  fo_context* context = nullptr;
  std::vector<void*> pointers;
  ~DeviceMemory() {
    for (void* pointer : pointers) PluginApi::Get().fo_device_free(context, pointer);
  }
  void* Allocate(size_t bytes) {
    void* pointer = nullptr;
    REQUIRE(PluginApi::Get().fo_device_alloc(context, bytes == 0 ? 1 : bytes, &pointer) == FO_OK);
    pointers.push_back(pointer);
    return pointer;
  }
  void* Upload(const cpu::RtTensor& tensor) {
    void* pointer = Allocate(tensor.nbytes());
    if (tensor.nbytes() > 0) REQUIRE(PluginApi::Get().fo_copy_to_device(context, pointer, tensor.raw(), tensor.nbytes()) == FO_OK);
    return pointer;
  }
};

struct Tolerance {
  double rtol, atol;
};
Tolerance ToleranceFor(DataType dtype) {
  if (dtype == DataType::kFloat16 || dtype == DataType::kBFloat16) return {1e-2, 1e-3};
  if (IsFloatingPoint(dtype)) return {1e-4, 1e-5};
  return {0, 0};
}

// How far `actual` is from `expected`: elements outside tolerance and the worst excess.
struct Comparison {
  int64_t mismatches = 0;
  double max_abs_error = 0;
  int64_t first_bad = -1;
};
Comparison Compare(const cpu::RtTensor& expected, const cpu::RtTensor& actual) {
  Comparison result;
  const Tolerance tolerance = ToleranceFor(expected.dtype());
  for (int64_t i = 0; i < expected.NumElements(); ++i) {
    const double e = expected.ValueAsDouble(i), a = actual.ValueAsDouble(i);
    if (std::isnan(e) && std::isnan(a)) continue;
    const double error = std::fabs(e - a);
    if (!(error <= tolerance.atol + tolerance.rtol * std::fabs(e))) {
      if (result.first_bad < 0) result.first_bad = i;
      ++result.mismatches;
    }
    if (error > result.max_abs_error || std::isnan(error)) result.max_abs_error = error;
  }
  return result;
}

// Every value of `model` as the CPU runtime computes it from seeded random feeds: each node
// output is made a graph output for the run.
std::map<std::string, cpu::RtTensor> ReferenceValues(Model& model) {
  std::map<std::string, cpu::RtTensor> values;
  for (const Value* initializer : model.graph->initializers()) {
    values[initializer->name()] = cpu::RtTensor::WrapConstant(initializer->initializer());
  }
  for (const auto& node : model.graph->nodes()) {
    for (Value* output : node->outputs()) {
      if (output != nullptr && !output->is_graph_output()) model.graph->AddOutput(output);
    }
  }
  auto session = cpu::Session::Create(model);
  INFO(session.status().message());
  REQUIRE(session.ok());
  std::vector<cpu::NamedTensor> feeds;
  uint64_t seed = 7;
  for (const Value* input : (*session)->inputs()) {
    auto dims = cpu::ConcreteDims(*input, {});
    REQUIRE(dims.ok());
    auto tensor = cpu::RandomTensor(input->dtype(), *dims, seed++);
    REQUIRE(tensor.ok());
    values[input->name()] = *tensor;
    feeds.push_back({input->name(), std::move(tensor).value()});
  }
  auto outputs = (*session)->Run(feeds);
  INFO(outputs.status().message());
  REQUIRE(outputs.ok());
  for (cpu::NamedTensor& output : *outputs) values[output.name] = std::move(output.tensor);
  return values;
}

struct NodeTally {
  int compared = 0, unsupported = 0, skipped = 0;
  uint64_t launches = 0;
  std::string unsupported_reasons;
};

// Runs `node`'s kernel on the reference inputs and compares each output.
void CheckNode(fo_context* context, const Model& model, const Node& node, const SavedProtos& saved,
               const std::map<std::string, cpu::RtTensor>& values, NodeTally& tally) {
  const PluginApi& api = Api();
  NodeRequest request;
  if (!RequestFor(model, node, saved, request)) {
    ++tally.skipped;
    return;
  }
  fo_node_desc desc = request.desc();
  KernelHolder kernel;
  fo_status status = api.fo_kernel_build(context, &desc, &kernel.kernel);
  INFO(request.label << ": " << api.fo_status_name(status) << ": " << LastError());
  if (status == FO_UNSUPPORTED) {
    ++tally.unsupported;
    tally.unsupported_reasons += "\n  " + LastError();
    return;
  }
  // A failure here is one kernel's bug: reported, and the other nodes still run.
  CHECK(status == FO_OK);
  if (status != FO_OK) return;
  INFO("kernel: " << api.fo_kernel_describe(kernel.kernel));
  DeviceMemory memory{context, {}};
  std::vector<const void*> inputs;
  for (const Value* input : node.inputs()) {
    if (input == nullptr) {
      inputs.push_back(nullptr);
      continue;
    }
    auto found = values.find(input->name());
    REQUIRE(found != values.end());
    inputs.push_back(memory.Upload(found->second));
  }
  std::vector<void*> outputs;
  std::vector<cpu::RtTensor> results;
  for (size_t i = 0; i < node.outputs().size(); ++i) {
    const Value* output = node.output(i);
    if (output == nullptr) {
      outputs.push_back(nullptr);
      results.emplace_back();
      continue;
    }
    results.push_back(cpu::RtTensor::Allocate(output->dtype(), request.output_dims[i]));
    outputs.push_back(memory.Allocate(results.back().nbytes()));
  }
  size_t workspace_bytes = 0;
  REQUIRE(api.fo_kernel_workspace_size(kernel.kernel, &workspace_bytes) == FO_OK);
  void* workspace = workspace_bytes > 0 ? memory.Allocate(workspace_bytes) : nullptr;
  status = api.fo_kernel_enqueue(kernel.kernel, inputs.data(), outputs.data(), workspace);
  INFO("enqueue: " << LastError());
  CHECK(status == FO_OK);
  if (status != FO_OK) return;
  uint32_t launches = 0;
  REQUIRE(api.fo_kernel_launch_count(kernel.kernel, &launches) == FO_OK);
  tally.launches += launches;
  for (size_t i = 0; i < results.size(); ++i) {
    if (outputs[i] == nullptr || results[i].nbytes() == 0) continue;
    REQUIRE(api.fo_copy_to_host(context, results[i].raw(), outputs[i], results[i].nbytes()) == FO_OK);
  }
  status = api.fo_synchronize(context);
  INFO("synchronize: " << LastError());
  REQUIRE(status == FO_OK);  // a kernel that faulted leaves the context unusable
  for (size_t i = 0; i < results.size(); ++i) {
    if (outputs[i] == nullptr) continue;
    auto expected = values.find(node.output(i)->name());
    REQUIRE(expected != values.end());
    REQUIRE(expected->second.dims() == results[i].dims());
    Comparison comparison = Compare(expected->second, results[i]);
    INFO("output " << i << " '" << node.output(i)->name() << "': " << comparison.mismatches << " of "
                   << results[i].NumElements() << " outside tolerance, max abs error " << comparison.max_abs_error
                   << ", first at " << comparison.first_bad);
    CHECK(comparison.mismatches == 0);
  }
  ++tally.compared;
}

bool LaunchesNothing(const Node& node) {
  const OpClass op_class = ClassifyOp(node);
  return op_class == OpClass::kView || op_class == OpClass::kShape;
}

TEST_CASE("plugin GPU: every kernel of the models matches the CPU runtime", "[plugin][gpu]") {
  if (!test_support::HaveCudaDevice()) {
    WARN("no CUDA device: skipped running every model's fused and standard-op kernels against the CPU runtime");
    return;
  }
  const PluginApi& api = Api();
  DeviceContext context(false);
  WARN(api.fo_context_describe(context.get()));
  for (const std::string& path : ModelPaths()) {
    for (int level : {0, 3}) {
      std::string error;
      std::unique_ptr<Model> model = LoadBoundModel(path, level, error);
      INFO(path << " at O" << level << ": " << error);
      REQUIRE(model != nullptr);
      std::map<std::string, cpu::RtTensor> values = ReferenceValues(*model);
      SavedProtos saved;
      REQUIRE(SaveProtos(*model, saved, error));
      REQUIRE(api.fo_context_reset_counters(context.get()) == FO_OK);
      NodeTally tally;
      for (const auto& node : model->graph->nodes()) {
        if (!LaunchesNothing(*node)) CheckNode(context.get(), *model, *node, saved, values, tally);
      }
      fo_counters counters{};
      REQUIRE(api.fo_context_counters(context.get(), &counters) == FO_OK);
      CHECK(counters.launches == tally.launches);
      WARN(std::filesystem::path(path).filename().string()
           << " O" << level << ": " << tally.compared << " kernels match the CPU runtime, " << tally.unsupported
           << " unsupported, " << tally.skipped << " without static types; " << counters.launches << " launches"
           << tally.unsupported_reasons);
      if (level == 3) {
        for (const auto& node : model->graph->nodes()) {
          // Every fused node of the benchmark models must run on the GPU.
          if (node->domain() == "ai.fusionopt") CHECK(tally.unsupported_reasons.find(node->name() + ":") == std::string::npos);
        }
      }
    }
  }
}

// c = Relu(a + b) for a [2,3] and b [3], as a fused node; and d = c * c as a standard op.
struct TwoKernels {
  NodeRequest add_relu, square;
  KernelHolder first, second;
};

void BuildTwoKernels(fo_context* context, TwoKernels& kernels) {
  onnx::FunctionProto function;
  function.set_domain("ai.fusionopt");
  function.set_name("FusedAddRelu");
  function.add_input("x");
  function.add_input("y");
  function.add_output("z");
  onnx::NodeProto* add = function.add_node();
  add->set_op_type("Add");
  add->add_input("x");
  add->add_input("y");
  add->add_output("t");
  onnx::NodeProto* relu = function.add_node();
  relu->set_op_type("Relu");
  relu->add_input("t");
  relu->add_output("z");
  function.add_opset_import()->set_version(17);
  onnx::NodeProto call;
  call.set_domain("ai.fusionopt");
  call.set_op_type("FusedAddRelu");
  call.add_input("a");
  call.add_input("b");
  call.add_output("c");
  onnx::NodeProto square;
  square.set_op_type("Mul");
  square.add_input("c");
  square.add_input("c");
  square.add_output("d");

  auto typed = [](std::vector<int64_t> dims) {
    ValueType type;
    type.dtype = DataType::kFloat;
    type.shape.emplace();
    for (int64_t size : dims) type.shape->push_back(Dim::Known(size));
    return type;
  };
  kernels.add_relu.node_proto = call.SerializeAsString();
  kernels.add_relu.function_proto = function.SerializeAsString();
  NodeRequest::Describe({typed({2, 3}), typed({3})}, kernels.add_relu.input_dims, kernels.add_relu.inputs);
  NodeRequest::Describe({typed({2, 3})}, kernels.add_relu.output_dims, kernels.add_relu.outputs);
  kernels.square.node_proto = square.SerializeAsString();
  NodeRequest::Describe({typed({2, 3}), typed({2, 3})}, kernels.square.input_dims, kernels.square.inputs);
  NodeRequest::Describe({typed({2, 3})}, kernels.square.output_dims, kernels.square.outputs);
  fo_node_desc first = kernels.add_relu.desc(), second = kernels.square.desc();
  REQUIRE(Api().fo_kernel_build(context, &first, &kernels.first.kernel) == FO_OK);
  REQUIRE(Api().fo_kernel_build(context, &second, &kernels.second.kernel) == FO_OK);
}

TEST_CASE("plugin GPU: counters, timer and CUDA graph replay", "[plugin][gpu]") {
  if (!test_support::HaveCudaDevice()) {
    WARN("no CUDA device: skipped launch/CUPTI counters, the event timer and CUDA graph capture and replay");
    return;
  }
  const PluginApi& api = Api();
  DeviceContext context(true);
  TwoKernels kernels;
  BuildTwoKernels(context.get(), kernels);
  const std::vector<float> a = {-1, 2, -3, 4, -5, 6}, b = {0.5f, -1.5f, 2.5f};
  std::vector<float> expected(6);
  for (int i = 0; i < 6; ++i) {
    const float c = std::max(a[i] + b[i % 3], 0.0f);
    expected[i] = c * c;
  }
  DeviceMemory memory{context.get(), {}};
  void* da = memory.Allocate(sizeof(float) * 6);
  void* db = memory.Allocate(sizeof(float) * 3);
  void* dc = memory.Allocate(sizeof(float) * 6);
  void* dd = memory.Allocate(sizeof(float) * 6);
  REQUIRE(api.fo_copy_to_device(context.get(), da, a.data(), sizeof(float) * 6) == FO_OK);
  REQUIRE(api.fo_copy_to_device(context.get(), db, b.data(), sizeof(float) * 3) == FO_OK);
  const void* first_inputs[] = {da, db};
  void* first_outputs[] = {dc};
  const void* second_inputs[] = {dc, dc};
  void* second_outputs[] = {dd};
  auto enqueue_both = [&] {
    REQUIRE(api.fo_kernel_enqueue(kernels.first.kernel, first_inputs, first_outputs, nullptr) == FO_OK);
    REQUIRE(api.fo_kernel_enqueue(kernels.second.kernel, second_inputs, second_outputs, nullptr) == FO_OK);
  };
  auto read_result = [&] {
    std::vector<float> result(6, -1);
    REQUIRE(api.fo_copy_to_host(context.get(), result.data(), dd, sizeof(float) * 6) == FO_OK);
    REQUIRE(api.fo_synchronize(context.get()) == FO_OK);
    return result;
  };
  uint32_t first_launches = 0, second_launches = 0;
  REQUIRE(api.fo_kernel_launch_count(kernels.first.kernel, &first_launches) == FO_OK);
  REQUIRE(api.fo_kernel_launch_count(kernels.second.kernel, &second_launches) == FO_OK);
  const uint64_t per_inference = first_launches + second_launches;

  REQUIRE(api.fo_context_reset_counters(context.get()) == FO_OK);
  REQUIRE(api.fo_timer_start(context.get()) == FO_OK);
  enqueue_both();
  float milliseconds = -1;
  REQUIRE(api.fo_timer_stop(context.get(), &milliseconds) == FO_OK);
  CHECK(milliseconds >= 0);
  CHECK(read_result() == expected);
  fo_counters counters{};
  REQUIRE(api.fo_context_counters(context.get(), &counters) == FO_OK);
  CHECK(counters.launches == per_inference);
  INFO(LastError());
  CHECK(counters.kernels_executed == per_inference);  // generated kernels: one execution per launch

  // Captured once, replayed twice: same result, and each replay counts its launches.
  REQUIRE(api.fo_device_alloc(context.get(), 16, nullptr) == FO_INVALID_ARGUMENT);
  REQUIRE(api.fo_context_reset_counters(context.get()) == FO_OK);
  std::vector<float> zeros(6, 0.0f);
  REQUIRE(api.fo_copy_to_device(context.get(), dd, zeros.data(), sizeof(float) * 6) == FO_OK);
  REQUIRE(api.fo_synchronize(context.get()) == FO_OK);
  REQUIRE(api.fo_graph_begin_capture(context.get()) == FO_OK);
  CHECK(api.fo_graph_begin_capture(context.get()) == FO_INVALID_ARGUMENT);  // one capture at a time
  CHECK(api.fo_synchronize(context.get()) == FO_INVALID_ARGUMENT);          // would break the capture
  enqueue_both();
  REQUIRE(api.fo_graph_end_capture(context.get()) == FO_OK);
  CHECK(read_result() == zeros);  // capturing ran nothing
  REQUIRE(api.fo_graph_replay(context.get()) == FO_OK);
  CHECK(read_result() == expected);
  REQUIRE(api.fo_copy_to_device(context.get(), dd, zeros.data(), sizeof(float) * 6) == FO_OK);
  REQUIRE(api.fo_graph_replay(context.get()) == FO_OK);
  CHECK(read_result() == expected);
  REQUIRE(api.fo_context_counters(context.get(), &counters) == FO_OK);
  CHECK(counters.launches == 2 * per_inference);
  CHECK(counters.kernels_executed == 2 * per_inference);
  REQUIRE(api.fo_graph_discard(context.get()) == FO_OK);
  CHECK(api.fo_graph_replay(context.get()) == FO_INVALID_ARGUMENT);

  // Graphs the host keeps: two captures of different work (one per input shape, for a host),
  // replayed in any order, each counting its own launches, the context's own graph untouched.
  fo_graph* both = nullptr;
  fo_graph* first_only = nullptr;
  REQUIRE(api.fo_graph_begin_capture(context.get()) == FO_OK);
  enqueue_both();
  REQUIRE(api.fo_graph_end_capture_new(context.get(), &both) == FO_OK);
  REQUIRE(api.fo_graph_begin_capture(context.get()) == FO_OK);
  REQUIRE(api.fo_kernel_enqueue(kernels.first.kernel, first_inputs, first_outputs, nullptr) == FO_OK);
  REQUIRE(api.fo_graph_end_capture_new(context.get(), &first_only) == FO_OK);
  REQUIRE(both != nullptr);
  REQUIRE(first_only != nullptr);
  CHECK(api.fo_graph_replay(context.get()) == FO_INVALID_ARGUMENT);  // still none of its own
  REQUIRE(api.fo_context_reset_counters(context.get()) == FO_OK);
  std::vector<float> first_expected(6);
  for (int i = 0; i < 6; ++i) first_expected[i] = std::max(a[i] + b[i % 3], 0.0f);
  for (int round = 0; round < 2; ++round) {
    REQUIRE(api.fo_copy_to_device(context.get(), dc, zeros.data(), sizeof(float) * 6) == FO_OK);
    REQUIRE(api.fo_copy_to_device(context.get(), dd, zeros.data(), sizeof(float) * 6) == FO_OK);
    REQUIRE(api.fo_graph_launch(first_only) == FO_OK);
    std::vector<float> c(6, -1);
    REQUIRE(api.fo_copy_to_host(context.get(), c.data(), dc, sizeof(float) * 6) == FO_OK);
    CHECK(read_result() == zeros);  // the first kernel's graph leaves dd alone
    CHECK(c == first_expected);
    REQUIRE(api.fo_graph_launch(both) == FO_OK);
    CHECK(read_result() == expected);
  }
  REQUIRE(api.fo_context_counters(context.get(), &counters) == FO_OK);
  CHECK(counters.launches == 2 * (per_inference + first_launches));
  CHECK(counters.kernels_executed == 2 * (per_inference + first_launches));
  api.fo_graph_destroy(first_only);
  REQUIRE(api.fo_graph_launch(both) == FO_OK);  // destroying one leaves the other
  CHECK(read_result() == expected);
  api.fo_graph_destroy(both);
}

TEST_CASE("plugin GPU: kernels outlive their context", "[plugin][gpu]") {
  if (!test_support::HaveCudaDevice()) {
    WARN("no CUDA device: skipped destroying a context before its kernels");
    return;
  }
  auto context = std::make_unique<DeviceContext>(false);
  TwoKernels kernels;
  BuildTwoKernels(context->get(), kernels);
  Api().fo_context_destroy(context->holder.context);
  context->holder.context = nullptr;
  // The kernels are destroyed after their context; nothing may crash or leak a CUDA error.
}

}  // namespace
}  // namespace fusionopt::plugin_test
