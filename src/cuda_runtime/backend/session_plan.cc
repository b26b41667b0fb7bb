// Planning a CUDA session for one set of feed dims: the model specialized to them, every node
// described to the plugin and built, and every value given device storage, recycled by liveness.
#include "cuda_runtime/backend/session_plan.h"

#include <onnx/onnx_pb.h>

#include <algorithm>
#include <chrono>
#include <functional>
#include <unordered_map>

#include "ir/constant_value.h"
#include "ir/liveness.h"
#include "ir/op_class.h"
#include "shape_inference/shape_inference.h"
#include "onnx_io/model_io.h"
#include "passes/util/inline_call.h"
#include "passes/pipeline.h"

namespace fusionopt::cuda {
namespace session_internal {

Result<std::vector<int64_t>> StaticDims(const Value& value) {
  if (!value.shape() || value.dtype() == DataType::kUndefined) {
    return Unsupported("'" + value.name() + "' has no known shape and dtype at these input sizes");
  }
  std::optional<std::vector<int64_t>> dims = KnownDims(*value.shape());
  if (!dims) return Unsupported("'" + value.name() + "' has a data-dependent dim at these input sizes");
  return *dims;
}

uint64_t BytesOf(const Value& value, const std::vector<int64_t>& dims) {
  uint64_t count = 1;
  for (int64_t dim : dims) count *= static_cast<uint64_t>(dim);
  return ByteSizeOf(value.dtype(), count);
}

}  // namespace session_internal

using namespace session_internal;

namespace {

std::string DimsKey(const std::vector<cpu::NamedTensor>& feeds) {
  std::string key;
  for (const auto& feed : feeds) key += feed.name + cpu::DimsToString(feed.tensor.dims()) + ";";
  return key;
}

// Ops whose output is their first input's bytes under another shape.
bool IsView(const Node& node) {
  if (!IsDefaultDomain(node)) return false;
  static const char* const kViews[] = {"Reshape", "Flatten", "Squeeze", "Unsqueeze", "Identity"};
  for (const char* op : kViews) {
    if (node.op_type() == op) return true;
  }
  // Inference Dropout is Identity when nobody reads its mask.
  return node.op_type() == "Dropout" && (node.outputs().size() < 2 || node.output(1) == nullptr ||
                                         node.output(1)->uses().empty());
}

// Outputs kept in input 0's storage: a view's, or a Split's that launches no kernel (nothing but
// unit dims before the axis: each part is a contiguous slice of the input).
bool SharesInputStorage(const Node& node) {
  if (node.inputs().empty() || node.input(0) == nullptr) return false;
  return IsView(node) || (node.op_type() == "Split" && IsDefaultDomain(node) && !LaunchesKernel(node));
}

// Bytes of the values `node` reads and writes that are intermediates: computed by a node and
// no graph output (inputs, initializers and constants are not fusion's to remove).
uint64_t IntermediateBytes(const Graph& graph, const Node& node, const std::vector<Storage>& storages,
                           const std::unordered_map<const Value*, int>& storage_of) {
  uint64_t bytes = 0;
  for (const std::vector<Value*>* values : {&node.inputs(), &node.outputs()}) {
    for (const Value* value : *values) {
      if (value == nullptr || value->producer() == nullptr) continue;
      if (std::find(graph.outputs().begin(), graph.outputs().end(), value) != graph.outputs().end()) continue;
      auto found = storage_of.find(value);
      if (found == storage_of.end() || storages[found->second].constant) continue;
      auto dims = StaticDims(*value);
      if (dims.ok()) bytes += BytesOf(*value, *dims);
    }
  }
  return bytes;
}

}  // namespace

namespace {

// A copy of `model` with `bind` applied to each graph input, then specialized (cuda_session.h).
Result<std::unique_ptr<Model>> Specialize(const Model& model, const std::function<void(Value&)>& bind) {
  FUSIONOPT_ASSIGN_OR_RETURN(std::string bytes, SerializeModel(model));
  FUSIONOPT_ASSIGN_OR_RETURN(std::unique_ptr<Model> copy, LoadModelFromBytes(std::move(bytes), model.base_dir,
                                                                             LoadOptions{/*infer_shapes=*/false}));
  for (Value* input : copy->graph->inputs()) bind(*input);
  ReinferShapes(*copy);
  passes::PipelineOptions fold;
  fold.level = 1;
  fold.only = {"fold-constants", "eliminate-dead-code"};
  // Everything computed from constants alone is computed here, whatever its size (a
  // ConstantOfShape weight): it is uploaded once, where a node would run on every inference.
  fold.pass_options.Set("fold-constants", "max-bytes", std::to_string(int64_t{1} << 40));
  FUSIONOPT_RETURN_IF_ERROR(passes::RunPipeline(*copy, fold).status());
  InferShapes(*copy);
  return copy;
}

Shape KnownShape(const std::vector<int64_t>& dims) {
  Shape shape;
  for (int64_t dim : dims) shape.push_back(Dim::Known(dim));
  return shape;
}

}  // namespace

Result<std::unique_ptr<Model>> SpecializeForFeeds(const Model& model, const std::vector<cpu::NamedTensor>& feeds) {
  return Specialize(model, [&feeds](Value& input) {
    for (const auto& feed : feeds) {
      if (feed.name != input.name()) continue;
      input.type().shape = KnownShape(feed.tensor.dims());
      input.type().dtype = feed.tensor.dtype();
    }
  });
}

Result<std::unique_ptr<Model>> SpecializeForShapes(const Model& model,
                                                   const std::map<std::string, std::vector<int64_t>>& shapes) {
  return Specialize(model, [&shapes](Value& input) {
    if (auto it = shapes.find(input.name()); it != shapes.end()) input.type().shape = KnownShape(it->second);
  });
}

namespace {

// The fo_node_desc of `node` (the `index`-th node of the specialized model's graph).
struct NodeDescription {
  std::string node_proto, function_proto;
  std::vector<std::vector<int64_t>> input_dims, output_dims;
  std::vector<fo_tensor_desc> inputs, outputs;
  std::vector<const void*> constants;
  fo_node_desc desc{};
};

Status Describe(const Model& model, const onnx::ModelProto& proto, size_t index, const Node& node,
                NodeDescription& out) {
  const onnx::NodeProto& node_proto = proto.graph().node(static_cast<int>(index));
  FUSIONOPT_CHECK(node_proto.op_type() == node.op_type(), "the serialized graph keeps the node order");
  out.node_proto = node_proto.SerializeAsString();
  for (const auto& function : proto.functions()) {
    if (function.domain() == node.domain() && function.name() == node.op_type()) {
      out.function_proto = function.SerializeAsString();
    }
  }
  for (const Value* input : node.inputs()) {
    out.input_dims.push_back({});
    out.constants.push_back(nullptr);
    if (input == nullptr) continue;
    FUSIONOPT_ASSIGN_OR_RETURN(out.input_dims.back(), StaticDims(*input));
    if (TensorPtr constant = ConstantValueOf(*input, InitializerRuleOf(model))) out.constants.back() = constant->bytes().data();
  }
  for (const Value* output : node.outputs()) {
    out.output_dims.push_back({});
    if (output == nullptr) continue;
    FUSIONOPT_ASSIGN_OR_RETURN(out.output_dims.back(), StaticDims(*output));
  }
  auto fill = [](const std::vector<Value*>& values, const std::vector<std::vector<int64_t>>& dims,
                 std::vector<fo_tensor_desc>& descs) {
    for (size_t i = 0; i < values.size(); ++i) {
      int32_t dtype = values[i] ? static_cast<int32_t>(values[i]->dtype()) : 0;
      descs.push_back({dtype, static_cast<int32_t>(dims[i].size()), dims[i].data()});
    }
  };
  fill(node.inputs(), out.input_dims, out.inputs);
  fill(node.outputs(), out.output_dims, out.outputs);
  out.desc.struct_size = sizeof(fo_node_desc);
  out.desc.node_proto = out.node_proto.data();
  out.desc.node_proto_size = out.node_proto.size();
  out.desc.function_proto = out.function_proto.empty() ? nullptr : out.function_proto.data();
  out.desc.function_proto_size = out.function_proto.size();
  out.desc.default_opset = model.OpsetFor("").value_or(0);
  out.desc.num_inputs = out.inputs.size();
  out.desc.inputs = out.inputs.data();
  out.desc.constant_inputs = out.constants.data();
  out.desc.num_outputs = out.outputs.size();
  out.desc.outputs = out.outputs.data();
  return Status::Ok();
}

}  // namespace

// A fused node the plugin has no kernel for (a form its generators do not take yet, such as
// rotary embedding inside attention) runs as its body's standard ops: the call is inlined into
// the specialized model, whose shapes are inferred again. Returns how many calls were inlined;
// each one's reason goes into the summary, so the plan says what ran unfused and why.
Result<int64_t> CudaSession::InlineUnsupportedFusedNodes(Model& model, CudaPlanSummary& summary) {
  FUSIONOPT_ASSIGN_OR_RETURN(std::string bytes, SerializeModel(model));
  onnx::ModelProto proto;
  FUSIONOPT_CHECK(proto.ParseFromString(bytes), "SerializeModel writes a valid ModelProto");
  std::vector<Node*> unsupported;
  size_t index = 0;
  for (const auto& node : model.graph->nodes()) {
    if (node->domain() == kFusionDomain) {
      NodeDescription description;
      int supported = 0;
      if (Describe(model, proto, index, *node, description).ok() &&
          api_.node_supported(context_, &description.desc, &supported) == FO_OK && supported == 0) {
        unsupported.push_back(node.get());
        summary.inlined_because.emplace_back(node->name().empty() ? node->op_type() : node->name(),
                                             api_.last_error_message());
      }
    }
    ++index;
  }
  int64_t inlined = 0;
  for (Node* node : unsupported) {
    const Function* function = model.FindFunction(node->domain(), node->op_type());
    if (function != nullptr && passes::InlineCall(*model.graph, *node, *function).done()) ++inlined;
  }
  if (inlined > 0) InferShapes(model);
  return inlined;
}

// Where every value of one plan lives. Storage is simulated as it will run: each value gets a
// storage when produced (a view: its input's), and a storage goes back to a pool that later
// values of the same byte size draw from when the value it was made for dies (ir/liveness.h:
// never before the views of it).
class CudaSession::Planner {
 public:
  Planner(CudaSession& session, Prepared& plan)
      : session_(session), plan_(plan), graph_(*plan.model->graph), compile_only_(session.options_.device < 0),
        liveness_(graph_, SharesInputStorage) {}

  Status PlaceConstantsAndInputs() {
    for (const Value* value : graph_.initializers()) FUSIONOPT_RETURN_IF_ERROR(Upload(*value, *value->initializer()));
    for (const Value* input : graph_.inputs()) {
      if (plan_.storage_of.count(input)) continue;  // an initializer the feeds may not override here
      FUSIONOPT_ASSIGN_OR_RETURN(std::vector<int64_t> dims, StaticDims(*input));
      FUSIONOPT_ASSIGN_OR_RETURN(int index, NewStorage(BytesOf(*input, dims), /*constant=*/true));
      plan_.storage_of[input] = index;
    }
    for (const Value* input : graph_.inputs()) plan_.input_storages.push_back(plan_.storage_of.at(input));
    return Status::Ok();
  }

  // Plans the node at `position`, then recycles what dies there.
  Status PlanNode(const Node& node, size_t position) {
    PlannedNode planned;
    planned.node = node.name().empty() ? node.op_type() : node.name();
    planned.op = OpLabel(node);
    if (TensorPtr value = ConstantNodeValue(node)) {
      FUSIONOPT_RETURN_IF_ERROR(Upload(*node.output(0), *value));
      planned.implementation = "constant";
    } else if (SharesInputStorage(node) && plan_.storage_of.count(node.input(0))) {
      FUSIONOPT_ASSIGN_OR_RETURN(planned.implementation, PlaceAlias(node));
    } else if (!node.Subgraphs().empty()) {
      planned.unsupported = "If/Loop/Scan are not supported by the CUDA backend";
    } else {
      FUSIONOPT_RETURN_IF_ERROR(PlanKernel(node, position, planned));
    }
    if (!planned.unsupported.empty()) FUSIONOPT_RETURN_IF_ERROR(PlaceUnsupported(node));
    CudaPlanSummary& summary = plan_.summary;
    summary.peak_intermediate_bytes = std::max(summary.peak_intermediate_bytes, live_bytes_);
    Recycle(position);
    summary.nodes.push_back(std::move(planned));
    return Status::Ok();
  }

  Status Finish() {
    for (const Value* output : graph_.outputs()) {
      plan_.output_storages.push_back(plan_.storage_of.count(output) ? plan_.storage_of.at(output) : -1);
      plan_.output_offsets.push_back(plan_.offset_of[output]);
      auto dims = StaticDims(*output);
      plan_.output_dims.push_back(dims.ok() ? *dims : std::vector<int64_t>{});
    }
    plan_.summary.workspace_bytes = workspace_;
    if (compile_only_ || workspace_ == 0) return Status::Ok();
    return session_.api_.Check(session_.api_.device_alloc(session_.context_, workspace_, &plan_.workspace), "workspace");
  }

 private:
  Result<int> NewStorage(uint64_t bytes, bool constant) {
    auto reusable = constant ? pool_.end() : pool_.find(bytes);
    if (reusable != pool_.end()) {
      int index = reusable->second;
      pool_.erase(reusable);
      return index;
    }
    Storage storage;
    storage.bytes = bytes;
    storage.constant = constant;
    if (!compile_only_ && bytes > 0) {
      const PluginApi& api = session_.api_;
      FUSIONOPT_RETURN_IF_ERROR(api.Check(api.device_alloc(session_.context_, bytes, &storage.pointer), "device memory"));
    }
    plan_.storages.push_back(storage);
    return static_cast<int>(plan_.storages.size() - 1);
  }

  Status Upload(const Value& value, const Tensor& tensor) {
    FUSIONOPT_ASSIGN_OR_RETURN(int index, NewStorage(tensor.nbytes(), /*constant=*/true));
    if (!compile_only_ && tensor.nbytes() > 0) {
      const PluginApi& api = session_.api_;
      FUSIONOPT_RETURN_IF_ERROR(api.Check(api.copy_to_device(session_.context_, plan_.storages[index].pointer,
                                                             tensor.bytes().data(), tensor.nbytes()),
                                          "uploading '" + value.name() + "'"));
    }
    plan_.storage_of[&value] = index;
    return Status::Ok();
  }

  // A view's output is its input's bytes; a Split launching no kernel (nothing but unit dims
  // before the axis) makes each part a contiguous slice of its input.
  Result<std::string> PlaceAlias(const Node& node) {
    const int storage = plan_.storage_of.at(node.input(0));
    uint64_t offset = plan_.offset_of[node.input(0)];
    if (node.op_type() != "Split") {
      plan_.storage_of[node.output(0)] = storage;
      plan_.offset_of[node.output(0)] = offset;
      return std::string("view");
    }
    for (const Value* output : node.outputs()) {
      if (output == nullptr) continue;
      plan_.storage_of[output] = storage;
      plan_.offset_of[output] = offset;
      FUSIONOPT_ASSIGN_OR_RETURN(std::vector<int64_t> dims, StaticDims(*output));
      offset += BytesOf(*output, dims);
    }
    return std::string("view (contiguous slices)");
  }

  Status PlanKernel(const Node& node, size_t position, PlannedNode& planned) {
    const PluginApi& api = session_.api_;
    NodeDescription description;
    Status described = Describe(*plan_.model, plan_.proto, position, node, description);
    fo_kernel* kernel = nullptr;
    Status built = described.ok()
                       ? api.Check(api.kernel_build(session_.context_, &description.desc, &kernel), OpLabel(node))
                       : described;
    if (!built.ok()) {
      planned.unsupported = built.message();
      return Status::Ok();
    }
    Prepared::Step step;
    step.node = &node;
    step.kernel = kernel;
    api.kernel_launch_count(kernel, &step.launches);
    size_t bytes = 0;
    api.kernel_workspace_size(kernel, &bytes);
    workspace_ = std::max<uint64_t>(workspace_, bytes);
    planned.implementation = api.kernel_describe(kernel);
    planned.launches = step.launches;
    for (const Value* input : node.inputs()) {
      step.inputs.push_back(input ? plan_.storage_of.at(input) : -1);
      step.input_offsets.push_back(input ? plan_.offset_of[input] : 0);
    }
    FUSIONOPT_RETURN_IF_ERROR(PlaceOutputs(node, description, step));
    CudaPlanSummary& summary = plan_.summary;
    ++summary.kernels;
    summary.launches_per_inference += step.launches;
    summary.intermediate_traffic_bytes += IntermediateBytes(graph_, node, plan_.storages, plan_.storage_of);
    plan_.steps.push_back(std::move(step));
    return Status::Ok();
  }

  Status PlaceOutputs(const Node& node, const NodeDescription& description, Prepared::Step& step) {
    for (size_t i = 0; i < node.outputs().size(); ++i) {
      const Value* output = node.output(i);
      step.output_offsets.push_back(0);
      if (output == nullptr) {
        step.outputs.push_back(-1);
        continue;
      }
      uint64_t bytes = BytesOf(*output, description.output_dims[i]);
      FUSIONOPT_ASSIGN_OR_RETURN(int index, NewStorage(bytes, /*constant=*/false));
      plan_.storage_of[output] = index;
      owner_[index] = output;
      step.outputs.push_back(index);
      live_bytes_ += bytes;
    }
    return Status::Ok();
  }

  // Later nodes still get planned (the summary lists every problem): the outputs get
  // placeholder storage.
  Status PlaceUnsupported(const Node& node) {
    ++plan_.summary.unsupported;
    for (const Value* output : node.outputs()) {
      if (output == nullptr || plan_.storage_of.count(output)) continue;
      FUSIONOPT_ASSIGN_OR_RETURN(int index, NewStorage(0, /*constant=*/true));
      plan_.storage_of[output] = index;
    }
    return Status::Ok();
  }

  void Recycle(size_t position) {
    for (const Value* dying : liveness_.DyingAt(position)) {
      auto found = plan_.storage_of.find(dying);
      if (found == plan_.storage_of.end()) continue;  // not planned
      auto owner = owner_.find(found->second);
      if (owner == owner_.end() || owner->second != dying) continue;  // a view, or a constant's storage
      Storage& storage = plan_.storages[found->second];
      if (storage.constant) continue;
      pool_.emplace(storage.bytes, found->second);
      live_bytes_ -= std::min(live_bytes_, storage.bytes);
    }
  }

  CudaSession& session_;
  Prepared& plan_;
  const Graph& graph_;
  const bool compile_only_;
  const Liveness liveness_;
  std::unordered_map<int, const Value*> owner_;  // storage index -> the value it was made for
  std::multimap<uint64_t, int> pool_;            // free storages by byte size
  uint64_t live_bytes_ = 0;
  uint64_t workspace_ = 0;
};

Result<CudaSession::Prepared*> CudaSession::PlanFor(const std::vector<cpu::NamedTensor>& feeds) {
  std::string key = DimsKey(feeds);
  if (auto found = plans_.find(key); found != plans_.end()) return found->second.get();
  const auto started = std::chrono::steady_clock::now();
  fo_build_stats before{};
  before.struct_size = sizeof(before);
  FUSIONOPT_RETURN_IF_ERROR(api_.Check(api_.context_build_stats(context_, &before), "build stats"));
  auto plan = std::make_unique<Prepared>();
  FUSIONOPT_ASSIGN_OR_RETURN(plan->model, SpecializeForFeeds(model_, feeds));
  FUSIONOPT_ASSIGN_OR_RETURN(plan->summary.fused_nodes_inlined, InlineUnsupportedFusedNodes(*plan->model, plan->summary));
  FUSIONOPT_ASSIGN_OR_RETURN(std::string bytes, SerializeModel(*plan->model));
  FUSIONOPT_CHECK(plan->proto.ParseFromString(bytes), "SerializeModel writes a valid ModelProto");
  Planner planner(*this, *plan);
  FUSIONOPT_RETURN_IF_ERROR(planner.PlaceConstantsAndInputs());
  size_t position = 0;
  for (const auto& node : plan->model->graph->nodes()) FUSIONOPT_RETURN_IF_ERROR(planner.PlanNode(*node, position++));
  FUSIONOPT_RETURN_IF_ERROR(planner.Finish());
  fo_build_stats after{};
  after.struct_size = sizeof(after);
  FUSIONOPT_RETURN_IF_ERROR(api_.Check(api_.context_build_stats(context_, &after), "build stats"));
  FirstInferenceCost& cost = plan->summary.first_inference;
  cost.plan_seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - started).count();
  cost.kernels_built = static_cast<int64_t>(after.kernels_built - before.kernels_built);
  cost.modules_compiled = static_cast<int64_t>(after.modules_compiled - before.modules_compiled);
  cost.modules_from_cache = static_cast<int64_t>(after.modules_from_cache - before.modules_from_cache);
  cost.compile_seconds = after.compile_seconds - before.compile_seconds;
  Prepared* result = plan.get();
  plans_.emplace(key, std::move(plan));
  return result;
}

Result<CudaPlanSummary> CudaSession::Plan(const std::vector<cpu::NamedTensor>& feeds) {
  FUSIONOPT_ASSIGN_OR_RETURN(Prepared* plan, PlanFor(feeds));
  return plan->summary;
}

}  // namespace fusionopt::cuda
