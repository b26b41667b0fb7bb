// The C ABI of libfusionopt_cuda.so (include/fusionopt/plugin.h). Every entry point runs its
// body behind an exception barrier, turns the resulting Status into an fo_status, and leaves
// a one-line message (prefixed with the function's name) in the calling thread's last error.
#include "fusionopt/plugin.h"

#include <cuda_runtime.h>

#include <chrono>
#include <cstddef>
#include <exception>
#include <memory>
#include <new>
#include <string>
#include <vector>

#include "cuda_runtime/compile/nvrtc_compiler.h"
#include "cuda_runtime/plugin/context.h"
#include "cuda_runtime/plugin/dispatch.h"
#include "cuda_runtime/plugin/node_request.h"

struct fo_context {
  std::shared_ptr<fusionopt::cuda::PluginContext> impl;
};

// A kernel keeps its context alive (stream, handles, device), so hosts may destroy kernels
// and contexts in either order.
struct fo_kernel {
  std::shared_ptr<fusionopt::cuda::PluginContext> context;
  std::unique_ptr<fusionopt::cuda::DeviceKernel> kernel;
  std::string description;
  std::vector<bool> input_present;  // per node input: false where the node omits it
  std::vector<bool> output_present;
};

// A graph the host keeps (fo_graph_end_capture_new); it keeps its context alive like a kernel.
struct fo_graph {
  std::shared_ptr<fusionopt::cuda::PluginContext> context;
  std::unique_ptr<fusionopt::cuda::CapturedGraph> graph;
};

namespace fusionopt::cuda {
namespace {

thread_local std::string t_last_error;

fo_status ToFoStatus(ErrorCode code) {
  if (code == ErrorCode::kOk) return FO_OK;
  if (code == kCudaFailure) return FO_CUDA_ERROR;
  if (code == kCompileFailure) return FO_COMPILE_ERROR;
  if (code == ErrorCode::kInvalidModel || code == ErrorCode::kUsage) return FO_INVALID_ARGUMENT;
  if (code == ErrorCode::kUnsupported) return FO_UNSUPPORTED;
  return FO_INTERNAL_ERROR;
}

fo_status Fail(fo_status status, const char* function, const std::string& message) {
  t_last_error = std::string(function) + ": " + message;
  return status;
}

// Runs `body` (returning Status) so that nothing escapes: exceptions become
// FO_INTERNAL_ERROR. With `device`, a failed CUDA call's sticky runtime error is cleared too,
// so it does not surface in the host's next CUDA call.
template <typename Body>
fo_status Guarded(const char* function, bool device, Body&& body) {
  t_last_error.clear();
  try {
    Status status = body();
    if (status.ok()) return FO_OK;
    if (device && status.code() == kCudaFailure) (void)cudaGetLastError();
    return Fail(ToFoStatus(status.code()), function, status.message());
  } catch (const std::bad_alloc&) {
    return Fail(FO_INTERNAL_ERROR, function, "out of host memory");
  } catch (const std::exception& error) {
    return Fail(FO_INTERNAL_ERROR, function, std::string("unexpected exception: ") + error.what());
  } catch (...) {
    return Fail(FO_INTERNAL_ERROR, function, "unexpected exception of unknown type");
  }
}

Status NullArgument(const char* name) { return UsageError(std::string(name) + " is NULL"); }

bool UsesDevice(const fo_context* context) { return context != nullptr && !context->impl->compile_only(); }
bool UsesDevice(const fo_kernel* kernel) { return kernel != nullptr && !kernel->context->compile_only(); }

Result<ContextSettings> SettingsOf(const fo_context_options& options) {
  if (options.struct_size < sizeof(fo_context_options)) {
    return UsageError("fo_context_options.struct_size is " + std::to_string(options.struct_size) +
                      ", expected at least " + std::to_string(sizeof(fo_context_options)));
  }
  if (options.device < -1) return UsageError("device " + std::to_string(options.device) + " (use -1 for compile-only)");
  ContextSettings settings;
  settings.device = options.device;
  if (options.device < 0) {
    // Compute capabilities NVRTC can target are two digits or three (sm_100 and later).
    if (options.compile_arch != 0 && (options.compile_arch < 50 || options.compile_arch > 199)) {
      return UsageError("compile_arch " + std::to_string(options.compile_arch) + " is not a compute capability × 10");
    }
    settings.compile_arch = options.compile_arch == 0 ? 90 : options.compile_arch;
  }
  settings.stream = static_cast<cudaStream_t>(options.stream);
  settings.cache_dir = options.cache_dir != nullptr ? std::string(options.cache_dir) : DefaultCudaCacheDir();
  settings.count_executed_kernels = options.count_executed_kernels != 0;
  return settings;
}

// The node's typed body, or the reason there is none (views are refused before typing:
// their output shapes may come from runtime tensors).
Result<std::unique_ptr<Graph>> BodyOf(const fo_node_desc& desc, std::string& name) {
  NormalizedDesc normalized;
  FUSIONOPT_ASSIGN_OR_RETURN(ParsedNode parsed, ParseNodeDesc(desc, normalized));
  FUSIONOPT_RETURN_IF_ERROR(RejectView(*parsed.node).WithContext(parsed.name));
  name = parsed.name;
  auto body = TypedBodyFor(parsed, normalized.desc);
  if (!body.ok()) return body.status().WithContext(parsed.name);
  return body;
}

Status BuildNodeKernel(fo_context& context, const fo_node_desc& desc, fo_kernel*& result) {
  FUSIONOPT_RETURN_IF_ERROR(context.impl->RequireNoCapture("fo_kernel_build"));
  std::string name;
  FUSIONOPT_ASSIGN_OR_RETURN(std::unique_ptr<Graph> body, BodyOf(desc, name));
  auto kernel = BuildKernel(*body, name, *context.impl);
  if (!kernel.ok()) return kernel.status().WithContext(name);
  auto wrapper = std::make_unique<fo_kernel>();
  wrapper->context = context.impl;
  wrapper->kernel = std::move(kernel).value();
  wrapper->description = wrapper->kernel->Describe();
  for (size_t i = 0; i < desc.num_inputs; ++i) wrapper->input_present.push_back(desc.inputs[i].dtype != 0);
  for (size_t i = 0; i < desc.num_outputs; ++i) wrapper->output_present.push_back(desc.outputs[i].dtype != 0);
  result = wrapper.release();
  return Status::Ok();
}

Status CheckEnqueuePointers(const fo_kernel& kernel, const void* const* inputs, void* const* outputs) {
  if (!kernel.input_present.empty() && inputs == nullptr) return NullArgument("inputs");
  if (outputs == nullptr) return NullArgument("outputs");
  for (size_t i = 0; i < kernel.input_present.size(); ++i) {
    if (kernel.input_present[i] && inputs[i] == nullptr) return UsageError("input " + std::to_string(i) + " is NULL");
  }
  for (size_t i = 0; i < kernel.output_present.size(); ++i) {
    if (kernel.output_present[i] && outputs[i] == nullptr) return UsageError("output " + std::to_string(i) + " is NULL");
  }
  return Status::Ok();
}

Status Enqueue(fo_kernel& kernel, const void* const* inputs, void* const* outputs, void* workspace) {
  FUSIONOPT_RETURN_IF_ERROR(CheckEnqueuePointers(kernel, inputs, outputs));
  if (kernel.kernel->workspace_bytes() > 0 && workspace == nullptr) {
    return UsageError("the kernel needs " + std::to_string(kernel.kernel->workspace_bytes()) +
                      " bytes of workspace and workspace is NULL");
  }
  FUSIONOPT_RETURN_IF_ERROR(kernel.context->Activate("fo_kernel_enqueue"));
  FUSIONOPT_RETURN_IF_ERROR(kernel.kernel->Enqueue(inputs, outputs, workspace));
  kernel.context->CountLaunches(kernel.kernel->launch_count());
  return Status::Ok();
}

}  // namespace
}  // namespace fusionopt::cuda

using fusionopt::Status;
using fusionopt::cuda::Guarded;
using fusionopt::cuda::NullArgument;
using fusionopt::cuda::UsesDevice;

extern "C" {

uint32_t fo_abi_version(void) { return FO_PLUGIN_ABI_VERSION; }

const char* fo_status_name(fo_status status) {
  switch (status) {
    case FO_OK: return "FO_OK";
    case FO_INVALID_ARGUMENT: return "FO_INVALID_ARGUMENT";
    case FO_UNSUPPORTED: return "FO_UNSUPPORTED";
    case FO_CUDA_ERROR: return "FO_CUDA_ERROR";
    case FO_COMPILE_ERROR: return "FO_COMPILE_ERROR";
    case FO_INTERNAL_ERROR: return "FO_INTERNAL_ERROR";
  }
  return "FO_UNKNOWN_STATUS";
}

const char* fo_last_error_message(void) { return fusionopt::cuda::t_last_error.c_str(); }

fo_status fo_context_create(const fo_context_options* options, fo_context** context) {
  const bool device = options != nullptr && options->struct_size >= sizeof(fo_context_options) && options->device >= 0;
  return Guarded(__func__, device, [&]() -> Status {
    if (context == nullptr) return NullArgument("context");
    *context = nullptr;
    if (options == nullptr) return NullArgument("options");
    FUSIONOPT_ASSIGN_OR_RETURN(fusionopt::cuda::ContextSettings settings, fusionopt::cuda::SettingsOf(*options));
    FUSIONOPT_ASSIGN_OR_RETURN(std::unique_ptr<fusionopt::cuda::PluginContext> impl,
                               fusionopt::cuda::PluginContext::Create(settings));
    *context = new fo_context{std::shared_ptr<fusionopt::cuda::PluginContext>(std::move(impl))};
    return Status::Ok();
  });
}

void fo_context_destroy(fo_context* context) {
  try {
    // Kernels may still hold the context; the stream is waited for now all the same.
    if (context != nullptr && !context->impl->compile_only()) (void)context->impl->Synchronize();
    delete context;
  } catch (...) {  // a destructor that threw: nothing to report it to
  }
}

const char* fo_context_describe(const fo_context* context) {
  return context == nullptr ? "" : context->impl->description().c_str();
}

void* fo_context_stream(const fo_context* context) {
  return context == nullptr || context->impl->compile_only() ? nullptr : static_cast<void*>(context->impl->stream());
}

fo_status fo_context_counters(fo_context* context, fo_counters* counters) {
  return Guarded(__func__, UsesDevice(context), [&]() -> Status {
    if (context == nullptr) return NullArgument("context");
    if (counters == nullptr) return NullArgument("counters");
    FUSIONOPT_ASSIGN_OR_RETURN(fusionopt::cuda::LaunchCounters counted, context->impl->Counters());
    counters->launches = counted.launches;
    counters->kernels_executed = counted.kernels_executed.value_or(UINT64_MAX);
    return Status::Ok();
  });
}

fo_status fo_context_reset_counters(fo_context* context) {
  return Guarded(__func__, UsesDevice(context), [&]() -> Status {
    if (context == nullptr) return NullArgument("context");
    return context->impl->ResetCounters();
  });
}

fo_status fo_node_supported(fo_context* context, const fo_node_desc* node, int* supported) {
  return Guarded(__func__, false, [&]() -> Status {
    if (supported == nullptr) return NullArgument("supported");
    *supported = 0;
    if (context == nullptr) return NullArgument("context");
    if (node == nullptr) return NullArgument("node");
    std::string name;
    auto body = fusionopt::cuda::BodyOf(*node, name);
    Status verdict = body.ok() ? fusionopt::cuda::CheckKernelSupported(**body, name).WithContext(name) : body.status();
    if (verdict.code() == fusionopt::ErrorCode::kUnsupported) {
      fusionopt::cuda::t_last_error = verdict.message();  // the reason, with an FO_OK answer
      return Status::Ok();
    }
    FUSIONOPT_RETURN_IF_ERROR(verdict);
    *supported = 1;
    return Status::Ok();
  });
}

fo_status fo_kernel_build(fo_context* context, const fo_node_desc* node, fo_kernel** kernel) {
  return Guarded(__func__, UsesDevice(context), [&]() -> Status {
    if (kernel == nullptr) return NullArgument("kernel");
    *kernel = nullptr;
    if (context == nullptr) return NullArgument("context");
    if (node == nullptr) return NullArgument("node");
    if (!context->impl->compile_only()) FUSIONOPT_RETURN_IF_ERROR(context->impl->Activate("fo_kernel_build"));
    const auto started = std::chrono::steady_clock::now();
    FUSIONOPT_RETURN_IF_ERROR(fusionopt::cuda::BuildNodeKernel(*context, *node, *kernel));
    fusionopt::cuda::BuildStats& stats = context->impl->build_stats();
    ++stats.kernels_built;
    stats.build_seconds += std::chrono::duration<double>(std::chrono::steady_clock::now() - started).count();
    return Status::Ok();
  });
}

fo_status fo_context_build_stats(const fo_context* context, fo_build_stats* stats) {
  return Guarded(__func__, false, [&]() -> Status {
    if (context == nullptr) return NullArgument("context");
    if (stats == nullptr) return NullArgument("stats");
    if (stats->struct_size < offsetof(fo_build_stats, build_seconds) + sizeof(double)) {
      return fusionopt::UsageError("fo_build_stats.struct_size " + std::to_string(stats->struct_size) + " is too small");
    }
    const fusionopt::cuda::BuildStats& built = context->impl->build_stats();
    stats->kernels_built = built.kernels_built;
    stats->modules_compiled = built.modules_compiled;
    stats->modules_from_cache = built.modules_from_cache;
    stats->compile_seconds = built.compile_seconds;
    stats->build_seconds = built.build_seconds;
    return Status::Ok();
  });
}

void fo_kernel_destroy(fo_kernel* kernel) {
  try {
    if (kernel != nullptr && !kernel->context->compile_only()) (void)kernel->context->Activate("fo_kernel_destroy");
    delete kernel;
  } catch (...) {  // a destructor that threw: nothing to report it to
  }
}

fo_status fo_kernel_workspace_size(const fo_kernel* kernel, size_t* bytes) {
  return Guarded(__func__, false, [&]() -> Status {
    if (kernel == nullptr) return NullArgument("kernel");
    if (bytes == nullptr) return NullArgument("bytes");
    *bytes = static_cast<size_t>(kernel->kernel->workspace_bytes());
    return Status::Ok();
  });
}

fo_status fo_kernel_launch_count(const fo_kernel* kernel, uint32_t* launches) {
  return Guarded(__func__, false, [&]() -> Status {
    if (kernel == nullptr) return NullArgument("kernel");
    if (launches == nullptr) return NullArgument("launches");
    *launches = kernel->kernel->launch_count();
    return Status::Ok();
  });
}

const char* fo_kernel_describe(const fo_kernel* kernel) { return kernel == nullptr ? "" : kernel->description.c_str(); }

fo_status fo_kernel_enqueue(fo_kernel* kernel, const void* const* inputs, void* const* outputs, void* workspace) {
  return Guarded(__func__, UsesDevice(kernel), [&]() -> Status {
    if (kernel == nullptr) return NullArgument("kernel");
    return fusionopt::cuda::Enqueue(*kernel, inputs, outputs, workspace);
  });
}

// ---- memory, timer and graphs: thin wrappers over PluginContext

#define FO_CONTEXT_CALL(context, expression)                        \
  Guarded(__func__, UsesDevice(context), [&]() -> Status {          \
    if ((context) == nullptr) return NullArgument("context");       \
    return (expression);                                            \
  })

fo_status fo_device_alloc(fo_context* context, size_t bytes, void** pointer) {
  return Guarded(__func__, UsesDevice(context), [&]() -> Status {
    if (pointer == nullptr) return NullArgument("pointer");
    *pointer = nullptr;
    if (context == nullptr) return NullArgument("context");
    FUSIONOPT_ASSIGN_OR_RETURN(*pointer, context->impl->Allocate(bytes));
    return Status::Ok();
  });
}

fo_status fo_device_free(fo_context* context, void* pointer) {
  return FO_CONTEXT_CALL(context, context->impl->Free(pointer));
}

fo_status fo_copy_to_device(fo_context* context, void* device, const void* host, size_t bytes) {
  return FO_CONTEXT_CALL(context, (device == nullptr || host == nullptr) && bytes > 0
                                      ? NullArgument(device == nullptr ? "device" : "host")
                                      : context->impl->CopyToDevice(device, host, bytes));
}

fo_status fo_copy_to_host(fo_context* context, void* host, const void* device, size_t bytes) {
  return FO_CONTEXT_CALL(context, (device == nullptr || host == nullptr) && bytes > 0
                                      ? NullArgument(host == nullptr ? "host" : "device")
                                      : context->impl->CopyToHost(host, device, bytes));
}

fo_status fo_copy_device_to_device(fo_context* context, void* destination, const void* source, size_t bytes) {
  return FO_CONTEXT_CALL(context, (destination == nullptr || source == nullptr) && bytes > 0
                                      ? NullArgument(destination == nullptr ? "destination" : "source")
                                      : context->impl->CopyDeviceToDevice(destination, source, bytes));
}

fo_status fo_synchronize(fo_context* context) { return FO_CONTEXT_CALL(context, context->impl->Synchronize()); }

fo_status fo_timer_start(fo_context* context) { return FO_CONTEXT_CALL(context, context->impl->StartTimer()); }

fo_status fo_timer_stop(fo_context* context, float* milliseconds) {
  return Guarded(__func__, UsesDevice(context), [&]() -> Status {
    if (context == nullptr) return NullArgument("context");
    if (milliseconds == nullptr) return NullArgument("milliseconds");
    FUSIONOPT_ASSIGN_OR_RETURN(*milliseconds, context->impl->StopTimer());
    return Status::Ok();
  });
}

fo_status fo_graph_begin_capture(fo_context* context) { return FO_CONTEXT_CALL(context, context->impl->BeginCapture()); }
fo_status fo_graph_end_capture(fo_context* context) { return FO_CONTEXT_CALL(context, context->impl->EndCapture()); }
fo_status fo_graph_replay(fo_context* context) { return FO_CONTEXT_CALL(context, context->impl->Replay()); }
fo_status fo_graph_discard(fo_context* context) { return FO_CONTEXT_CALL(context, context->impl->DiscardGraph()); }

fo_status fo_graph_end_capture_new(fo_context* context, fo_graph** graph) {
  return Guarded(__func__, UsesDevice(context), [&]() -> Status {
    if (graph == nullptr) return NullArgument("graph");
    *graph = nullptr;
    if (context == nullptr) return NullArgument("context");
    FUSIONOPT_ASSIGN_OR_RETURN(std::unique_ptr<fusionopt::cuda::CapturedGraph> captured, context->impl->EndCaptureDetached());
    *graph = new fo_graph{context->impl, std::move(captured)};
    return Status::Ok();
  });
}

fo_status fo_graph_launch(fo_graph* graph) {
  return Guarded(__func__, graph != nullptr, [&]() -> Status {
    if (graph == nullptr) return NullArgument("graph");
    return graph->context->Launch(*graph->graph);
  });
}

void fo_graph_destroy(fo_graph* graph) {
  if (graph == nullptr) return;
  graph->context->DestroyGraph(std::move(graph->graph));
  delete graph;
}

}  // extern "C"
