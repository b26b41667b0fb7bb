// Test support for the plugin library's tests (plugin_abi_test.cc, plugin_gpu_test.cc):
// the library loaded with dlopen and its C ABI resolved by name — exactly how fusionopt's CUDA
// backend and any other host use it, which also proves every fo_* symbol is exported — plus
// node descriptions built from the project's models (optimized in-process, symbolic dims
// bound) the way a host builds them.
#pragma once

#include <dlfcn.h>
#include <onnx/onnx_pb.h>

#include <algorithm>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "fusionopt/plugin.h"
#include "ir/constant_value.h"
#include "ir/graph.h"
#include "shape_inference/shape_inference.h"
#include "onnx_io/model_io.h"
#include "passes/pipeline.h"
#include "scratch_dir.h"

namespace fusionopt::plugin_test {

#define FO_PLUGIN_FUNCTIONS(X)                                                                                     \
  X(fo_abi_version) X(fo_status_name) X(fo_last_error_message) X(fo_context_create) X(fo_context_destroy)         \
  X(fo_context_describe) X(fo_context_stream) X(fo_context_counters) X(fo_context_reset_counters) X(fo_context_build_stats) X(fo_node_supported)                 \
  X(fo_kernel_build) X(fo_kernel_destroy) X(fo_kernel_workspace_size) X(fo_kernel_launch_count)                   \
  X(fo_kernel_describe) X(fo_kernel_enqueue) X(fo_device_alloc) X(fo_device_free) X(fo_copy_to_device)            \
  X(fo_copy_to_host) X(fo_copy_device_to_device) X(fo_synchronize) X(fo_timer_start) X(fo_timer_stop)             \
  X(fo_graph_begin_capture) X(fo_graph_end_capture) X(fo_graph_replay) X(fo_graph_discard)                      \
  X(fo_graph_end_capture_new) X(fo_graph_launch) X(fo_graph_destroy)

// The library's C ABI, resolved by name from FUSIONOPT_CUDA_LIBRARY.
struct PluginApi {
#define FO_DECLARE_POINTER(name) decltype(&::name) name = nullptr;
  FO_PLUGIN_FUNCTIONS(FO_DECLARE_POINTER)
#undef FO_DECLARE_POINTER
  void* handle = nullptr;
  std::string error;       // dlopen's or dlsym's message when something is missing
  std::vector<std::string> missing;

  static const PluginApi& Get() {
    static const PluginApi api = Load();
    return api;
  }
  bool ok() const { return handle != nullptr && missing.empty(); }

 private:
  static PluginApi Load() {
    PluginApi api;
    // FUSIONOPT_CUDA_LIBRARY in the environment names the library as it does for the CLI (a
    // build moved to another machine, scripts/gpu_bundle.sh); else the one this build made.
    const char* chosen = std::getenv("FUSIONOPT_CUDA_LIBRARY");
    api.handle = dlopen(chosen != nullptr && *chosen != '\0' ? chosen : FUSIONOPT_CUDA_LIBRARY, RTLD_NOW | RTLD_LOCAL);
    if (api.handle == nullptr) {
      api.error = dlerror();
      return api;
    }
#define FO_RESOLVE(name)                                                      \
  api.name = reinterpret_cast<decltype(&::name)>(dlsym(api.handle, #name));   \
  if (api.name == nullptr) api.missing.push_back(#name);
    FO_PLUGIN_FUNCTIONS(FO_RESOLVE)
#undef FO_RESOLVE
    return api;
  }
};

// A context owned by a test; destroyed with the test.
struct ContextHolder {
  fo_context* context = nullptr;
  ~ContextHolder() {
    if (context != nullptr) PluginApi::Get().fo_context_destroy(context);
  }
};

struct KernelHolder {
  fo_kernel* kernel = nullptr;
  ~KernelHolder() {
    if (kernel != nullptr) PluginApi::Get().fo_kernel_destroy(kernel);
  }
};

inline fo_context_options CompileOnlyOptions(int arch = 90) {
  fo_context_options options{};
  options.struct_size = sizeof(options);
  options.device = -1;
  options.compile_arch = arch;
  options.cache_dir = "";  // no disk cache: every build compiles
  return options;
}

// Everything an fo_node_desc points to, kept alive together.
struct NodeRequest {
  std::string label;  // "model: node (op)" for messages
  std::string node_proto;
  std::string function_proto;
  int64_t default_opset = 17;
  std::vector<std::vector<int64_t>> input_dims, output_dims;
  std::vector<fo_tensor_desc> inputs, outputs;
  std::vector<TensorPtr> constants;  // per input; null where not constant
  std::vector<const void*> constant_pointers;

  // Fills the tensor descs from `types` (call after the dims vectors are final).
  static void Describe(const std::vector<ValueType>& types, std::vector<std::vector<int64_t>>& dims,
                       std::vector<fo_tensor_desc>& descs) {
    dims.clear();
    descs.clear();
    for (const ValueType& type : types) {
      std::vector<int64_t> sizes;
      if (type.shape) {
        for (const Dim& dim : *type.shape) sizes.push_back(dim.value);
      }
      dims.push_back(std::move(sizes));
    }
    for (size_t i = 0; i < types.size(); ++i) {
      descs.push_back({static_cast<int32_t>(types[i].dtype), static_cast<int32_t>(dims[i].size()), dims[i].data()});
    }
  }

  fo_node_desc desc() const {
    fo_node_desc desc{};
    desc.struct_size = sizeof(desc);
    desc.node_proto = node_proto.data();
    desc.node_proto_size = node_proto.size();
    desc.function_proto = function_proto.empty() ? nullptr : function_proto.data();
    desc.function_proto_size = function_proto.size();
    desc.default_opset = default_opset;
    desc.num_inputs = inputs.size();
    desc.inputs = inputs.data();
    desc.constant_inputs = constant_pointers.empty() ? nullptr : constant_pointers.data();
    desc.num_outputs = outputs.size();
    desc.outputs = outputs.data();
    return desc;
  }
};

// Symbolic input dims bound to small sizes: 2 for a leading dim, 8 elsewhere, one size per
// symbol so inputs that share a symbol agree. Symbols declared anywhere else (outputs,
// value_info) become unknown, for inference to fill in: it never replaces a declared symbol.
inline void BindSymbolicInputs(Model& model) {
  auto forget_symbols = [](Value* value) {
    if (value == nullptr || value->is_graph_input() || !value->type().shape) return;
    for (Dim& dim : *value->type().shape) {
      if (dim.is_symbolic()) dim = Dim::Unknown();
    }
  };
  for (Value* output : model.graph->outputs()) forget_symbols(output);
  for (Value* value : model.graph->IntermediateValuesInOrder()) forget_symbols(value);
  std::map<std::string, int64_t> sizes;
  for (Value* input : model.graph->inputs()) {
    if (input->is_initializer() || !input->type().shape) continue;
    Shape& shape = *input->type().shape;
    for (size_t d = 0; d < shape.size(); ++d) {
      if (shape[d].is_known()) continue;
      int64_t size = d == 0 ? 2 : 8;
      if (shape[d].is_symbolic()) size = sizes.emplace(shape[d].symbol, size).first->second;
      shape[d] = Dim::Known(size);
    }
  }
}

// `path` loaded with its symbolic input dims bound, shapes inferred, and optimized at `level`.
inline std::unique_ptr<Model> LoadBoundModel(const std::string& path, int level, std::string& error) {
  LoadOptions options;
  options.infer_shapes = false;
  auto loaded = LoadModel(path, options);
  if (!loaded.ok()) {
    error = loaded.status().message();
    return nullptr;
  }
  std::unique_ptr<Model> model = std::move(loaded).value();
  BindSymbolicInputs(*model);
  InferShapes(*model);
  if (level > 0) {
    passes::PipelineOptions pipeline;
    pipeline.level = level;
    auto report = passes::RunPipeline(*model, pipeline);
    if (!report.ok()) {
      error = report.status().message();
      return nullptr;
    }
    InferShapes(*model);
  }
  return model;
}

// The saved form of `model`'s nodes and functions, which a host hands to the library.
struct SavedProtos {
  std::map<std::string, onnx::NodeProto> node_by_first_output;
  std::map<std::pair<std::string, std::string>, onnx::FunctionProto> functions;
};

inline bool SaveProtos(const Model& model, SavedProtos& saved, std::string& error) {
  test_support::ScratchDir scratch("plugin_protos");
  const std::string path = (scratch / "model.onnx").string();
  auto report = SaveModel(model, path);
  if (!report.ok()) {
    error = report.status().message();
    return false;
  }
  std::ifstream file(path, std::ios::binary);
  onnx::ModelProto proto;
  if (!proto.ParseFromIstream(&file)) {
    error = "cannot parse the saved model";
    return false;
  }
  for (const onnx::NodeProto& node : proto.graph().node()) {
    if (node.output_size() > 0) saved.node_by_first_output[node.output(0)] = node;
  }
  for (const onnx::FunctionProto& function : proto.functions()) {
    saved.functions[{function.domain(), function.name()}] = function;
  }
  return true;
}

// The request a host makes for `node` of `model` (shapes as inferred; constants are
// initializers and Constant outputs). False when something is not statically typed.
inline bool RequestFor(const Model& model, const Node& node, const SavedProtos& saved, NodeRequest& request) {
  request.label = DescribeNode(node);
  const Value* first = node.output(0);
  if (first == nullptr) return false;
  auto proto = saved.node_by_first_output.find(first->name());
  if (proto == saved.node_by_first_output.end()) return false;
  request.node_proto = proto->second.SerializeAsString();
  auto function = saved.functions.find({node.domain(), node.op_type()});
  if (function != saved.functions.end()) request.function_proto = function->second.SerializeAsString();
  request.default_opset = model.OpsetFor("").value_or(17);
  std::vector<ValueType> input_types, output_types;
  for (const Value* input : node.inputs()) {
    input_types.push_back(input ? input->type() : ValueType{});
    request.constants.push_back(input ? ConstantValueOf(*input, InitializerRuleOf(model)) : nullptr);
  }
  for (const Value* output : node.outputs()) output_types.push_back(output ? output->type() : ValueType{});
  for (const ValueType& type : input_types) {
    if (type.dtype != DataType::kUndefined && (!type.shape || !std::all_of(type.shape->begin(), type.shape->end(),
                                                                           [](const Dim& d) { return d.is_known(); }))) {
      return false;
    }
  }
  for (size_t i = 0; i < output_types.size(); ++i) {
    const ValueType& type = output_types[i];
    if (node.output(i) == nullptr) continue;
    if (type.dtype == DataType::kUndefined || !type.shape ||
        !std::all_of(type.shape->begin(), type.shape->end(), [](const Dim& d) { return d.is_known(); })) {
      return false;
    }
  }
  NodeRequest::Describe(input_types, request.input_dims, request.inputs);
  NodeRequest::Describe(output_types, request.output_dims, request.outputs);
  for (const TensorPtr& constant : request.constants) {
    request.constant_pointers.push_back(constant ? static_cast<const void*>(constant->bytes().data()) : nullptr);
  }
  return true;
}

inline std::vector<std::string> ModelPaths() {
  std::vector<std::string> paths;
  for (const auto& entry : std::filesystem::directory_iterator(std::string(FUSIONOPT_SOURCE_DIR) + "/models")) {
    if (entry.path().extension() == ".onnx") paths.push_back(entry.path().string());
  }
  std::sort(paths.begin(), paths.end());
  return paths;
}

}  // namespace fusionopt::plugin_test
