#include "cuda_runtime/backend/cuda_session.h"
#include "cuda_runtime/backend/session_plan.h"

#include <onnx/onnx_pb.h>

#include <algorithm>
#include <chrono>
#include <functional>
#include <unordered_map>


namespace fusionopt::cuda {

using namespace session_internal;

CudaSession::CudaSession(const Model& model, const PluginApi& api, CudaSessionOptions options)
    : model_(model), api_(api), options_(std::move(options)) {
  for (const Value* input : model.graph->inputs()) inputs_.push_back(input);
}

CudaSession::~CudaSession() {
  for (auto& [key, plan] : plans_) {
    api_.graph_destroy(plan->graph);
    for (auto& step : plan->steps) api_.kernel_destroy(step.kernel);
    for (auto& storage : plan->storages) {
      if (storage.pointer != nullptr) api_.device_free(context_, storage.pointer);
    }
    if (plan->workspace != nullptr) api_.device_free(context_, plan->workspace);
  }
  context_owner_.reset();
}

Result<std::unique_ptr<CudaSession>> CudaSession::Create(const Model& model, const CudaSessionOptions& options) {
  FUSIONOPT_ASSIGN_OR_RETURN(const PluginApi* api, LoadPluginApi());
  std::unique_ptr<CudaSession> session(new CudaSession(model, *api, options));
  fo_context_options context_options{};
  context_options.struct_size = sizeof(context_options);
  context_options.device = options.device;
  context_options.compile_arch = options.compile_arch;
  context_options.cache_dir = options.cache_dir.empty() ? nullptr : options.cache_dir.c_str();
  context_options.count_executed_kernels = options.count_executed_kernels ? 1 : 0;
  FUSIONOPT_RETURN_IF_ERROR(api->Check(api->context_create(&context_options, &session->context_),
                                       "no CUDA device to run on (" + api->path + ")"));
  session->context_owner_.reset(session->context_, [api](fo_context* context) { api->context_destroy(context); });
  return session;
}

std::string CudaSession::DeviceDescription() const { return api_.context_describe(context_); }

void* CudaSession::Stream() const { return api_.context_stream(context_); }


Status CudaSession::Enqueue(Prepared& plan) {
  std::vector<const void*> inputs;
  std::vector<void*> outputs;
  for (const auto& step : plan.steps) {
    inputs.clear();
    outputs.clear();
    auto at = [&](int index, uint64_t offset) -> void* {
      return index >= 0 ? static_cast<char*>(plan.storages[index].pointer) + offset : nullptr;
    };
    for (size_t i = 0; i < step.inputs.size(); ++i) inputs.push_back(at(step.inputs[i], step.input_offsets[i]));
    for (size_t i = 0; i < step.outputs.size(); ++i) outputs.push_back(at(step.outputs[i], step.output_offsets[i]));
    FUSIONOPT_RETURN_IF_ERROR(api_.Check(api_.kernel_enqueue(step.kernel, inputs.data(), outputs.data(), plan.workspace),
                                         OpLabel(*step.node) + " '" + step.node->name() + "'"));
  }
  return Status::Ok();
}

Status CudaSession::CopyFeedsIn(Prepared& plan, const std::vector<cpu::NamedTensor>& feeds,
                                const RunPlacement& placement) {
  const Graph& graph = *plan.model->graph;
  for (size_t i = 0; i < graph.inputs().size(); ++i) {
    for (size_t f = 0; f < feeds.size(); ++f) {
      const cpu::NamedTensor& feed = feeds[f];
      if (feed.name != graph.inputs()[i]->name()) continue;
      Storage& storage = plan.storages[plan.input_storages[i]];
      if (feed.tensor.nbytes() != storage.bytes) return InvalidModel("input '" + feed.name + "' changed size");
      const bool on_device = f < placement.feeds_on_device.size() && placement.feeds_on_device[f];
      const fo_status copied =
          on_device ? api_.copy_device_to_device(context_, storage.pointer, feed.tensor.raw(), storage.bytes)
                    : api_.copy_to_device(context_, storage.pointer, feed.tensor.raw(), storage.bytes);
      FUSIONOPT_RETURN_IF_ERROR(api_.Check(copied, "copying input '" + feed.name + "'"));
    }
  }
  return Status::Ok();
}

Result<cpu::NamedTensor> CudaSession::CopyOutputOut(const Prepared& plan, size_t index, bool to_device) {
  const Value& output = *plan.model->graph->outputs()[index];
  const Storage& storage = plan.storages[plan.output_storages[index]];
  const void* source = static_cast<const char*>(storage.pointer) + plan.output_offsets[index];
  const std::string what = "copying output '" + output.name() + "'";
  if (!to_device) {
    cpu::RtTensor tensor = cpu::RtTensor::Allocate(output.dtype(), plan.output_dims[index]);
    FUSIONOPT_RETURN_IF_ERROR(api_.Check(api_.copy_to_host(context_, tensor.raw(), source, tensor.nbytes()), what));
    return cpu::NamedTensor{output.name(), std::move(tensor)};
  }
  // The plan's buffers are overwritten by the next inference: a device output gets its own.
  const uint64_t bytes = BytesOf(output, plan.output_dims[index]);
  void* pointer = nullptr;
  if (bytes > 0) FUSIONOPT_RETURN_IF_ERROR(api_.Check(api_.device_alloc(context_, bytes, &pointer), what));
  std::shared_ptr<uint8_t> memory(static_cast<uint8_t*>(pointer), [api = &api_, owner = context_owner_](uint8_t* p) {
    if (p != nullptr) api->device_free(owner.get(), p);
  });
  if (bytes > 0) {
    FUSIONOPT_RETURN_IF_ERROR(api_.Check(api_.copy_device_to_device(context_, pointer, source, bytes), what));
  }
  return cpu::NamedTensor{output.name(), cpu::RtTensor(output.dtype(), plan.output_dims[index], std::move(memory))};
}

Result<std::vector<cpu::NamedTensor>> CudaSession::Run(const std::vector<cpu::NamedTensor>& feeds, CudaRunStats* stats,
                                                       const RunPlacement& placement) {
  if (options_.device < 0) return Unsupported("a compile-only CUDA session plans but does not run");
  FUSIONOPT_ASSIGN_OR_RETURN(Prepared* plan, PlanFor(feeds));
  if (plan->summary.unsupported > 0) {
    for (const PlannedNode& node : plan->summary.nodes) {
      if (!node.unsupported.empty()) {
        return Unsupported(std::to_string(plan->summary.unsupported) + " node(s) cannot run on CUDA; first: " + node.op +
                           " '" + node.node + "': " + node.unsupported);
      }
    }
  }
  const Graph& graph = *plan->model->graph;
  FUSIONOPT_RETURN_IF_ERROR(CopyFeedsIn(*plan, feeds, placement));
  fo_counters before{};
  if (stats != nullptr && options_.count_executed_kernels) {
    FUSIONOPT_RETURN_IF_ERROR(api_.Check(api_.context_counters(context_, &before), "counters"));
  }
  bool replayed = false;
  FUSIONOPT_RETURN_IF_ERROR(api_.Check(api_.timer_start(context_), "timer"));
  // Each input shape has a plan and, with cuda_graph, a graph of its own: captured on the
  // plan's first inference, replayed from then on, whichever shapes come between.
  if (options_.cuda_graph && plan->graph == nullptr) {
    FUSIONOPT_RETURN_IF_ERROR(api_.Check(api_.graph_begin_capture(context_), "CUDA graph capture"));
    Status enqueued = Enqueue(*plan);
    Status ended = api_.Check(api_.graph_end_capture_new(context_, &plan->graph), "CUDA graph capture");
    FUSIONOPT_RETURN_IF_ERROR(enqueued);
    FUSIONOPT_RETURN_IF_ERROR(ended);
  }
  if (options_.cuda_graph) {
    FUSIONOPT_RETURN_IF_ERROR(api_.Check(api_.graph_launch(plan->graph), "CUDA graph replay"));
    replayed = true;
  } else {
    FUSIONOPT_RETURN_IF_ERROR(Enqueue(*plan));
  }
  float device_ms = 0;
  FUSIONOPT_RETURN_IF_ERROR(api_.Check(api_.timer_stop(context_, &device_ms), "timer"));
  std::vector<cpu::NamedTensor> outputs;
  for (size_t i = 0; i < graph.outputs().size(); ++i) {
    FUSIONOPT_ASSIGN_OR_RETURN(cpu::NamedTensor output, CopyOutputOut(*plan, i, placement.outputs_on_device));
    outputs.push_back(std::move(output));
  }
  FUSIONOPT_RETURN_IF_ERROR(api_.Check(api_.synchronize(context_), "running the model"));
  if (stats != nullptr) {
    stats->kernels_launched = plan->summary.launches_per_inference;
    stats->device_ms = device_ms;
    stats->replayed_graph = replayed;
    if (options_.count_executed_kernels) {
      fo_counters after{};
      FUSIONOPT_RETURN_IF_ERROR(api_.Check(api_.context_counters(context_, &after), "counters"));
      stats->kernels_executed = after.kernels_executed - before.kernels_executed;
    }
  }
  return outputs;
}

Result<float> CudaSession::TimeDeviceCopy(uint64_t bytes) {
  if (options_.device < 0) return Unsupported("a compile-only CUDA session does not run");
  void* source = nullptr;
  void* destination = nullptr;
  FUSIONOPT_RETURN_IF_ERROR(api_.Check(api_.device_alloc(context_, bytes, &source), "device memory"));
  Status allocated = api_.Check(api_.device_alloc(context_, bytes, &destination), "device memory");
  float milliseconds = 0;
  Status timed = allocated;
  if (timed.ok()) timed = api_.Check(api_.timer_start(context_), "timer");
  if (timed.ok()) timed = api_.Check(api_.copy_device_to_device(context_, destination, source, bytes), "copy");
  if (timed.ok()) timed = api_.Check(api_.timer_stop(context_, &milliseconds), "timer");
  api_.device_free(context_, source);
  if (destination != nullptr) api_.device_free(context_, destination);
  FUSIONOPT_RETURN_IF_ERROR(timed);
  return milliseconds;
}

}  // namespace fusionopt::cuda
