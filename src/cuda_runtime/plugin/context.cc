// PluginContext (context.h): device setup, handles, counters, memory, timer and graphs.
#include "cuda_runtime/plugin/context.h"

#include <string>
#include <utility>

#include "cuda_runtime/compile/nvrtc_compiler.h"
#include "cuda_runtime/plugin/generated_runner.h"

namespace fusionopt::cuda {
namespace {

#define FO_CUDA_RETURN_IF_ERROR(call)                               \
  do {                                                              \
    cudaError_t cuda_error_ = (call);                               \
    if (cuda_error_ != cudaSuccess) return CudaError(cuda_error_, #call); \
  } while (0)

// CUDA packs versions as 1000·major + 10·minor.
std::string CudaVersionText(int version) {
  return std::to_string(version / 1000) + "." + std::to_string((version % 1000) / 10);
}

// cuBLASLt and cuDNN 9 both pack versions as 10000·major + 100·minor + patch.
std::string LibraryVersionText(size_t version) {
  return std::to_string(version / 10000) + "." + std::to_string((version / 100) % 100) + "." +
         std::to_string(version % 100);
}

std::string LibraryVersions() {
  return "cuBLASLt " + LibraryVersionText(cublasLtGetVersion()) + ", cuDNN " + LibraryVersionText(cudnnGetVersion()) +
         ", NVRTC " + NvrtcVersion();
}

}  // namespace

Result<std::unique_ptr<PluginContext>> PluginContext::Create(const ContextSettings& settings) {
  std::unique_ptr<PluginContext> context(new PluginContext(settings));
  if (context->compile_only()) {
    context->sm_arch_ = settings.compile_arch;
    context->DescribeCompileOnly();
  } else {
    FUSIONOPT_RETURN_IF_ERROR(context->InitializeDevice());
  }
  return context;
}

void PluginContext::DescribeCompileOnly() {
  description_ = "compile-only (no device), code for sm_" + std::to_string(sm_arch_) + ", CUDA runtime " +
                 CudaVersionText(CUDART_VERSION) + " (headers), " + LibraryVersions();
}

Status PluginContext::InitializeDevice() {
  int count = 0;
  FO_CUDA_RETURN_IF_ERROR(cudaGetDeviceCount(&count));
  if (settings_.device >= count) {
    return CudaFailure("device " + std::to_string(settings_.device) + " does not exist (" + std::to_string(count) +
                       " CUDA devices)");
  }
  // Since CUDA 12, cudaSetDevice initializes the device's primary context and makes it
  // current, which the driver calls of generated kernels (module load, launch) rely on.
  FO_CUDA_RETURN_IF_ERROR(cudaSetDevice(settings_.device));
  cudaDeviceProp properties{};
  FO_CUDA_RETURN_IF_ERROR(cudaGetDeviceProperties(&properties, settings_.device));
  sm_arch_ = properties.major * 10 + properties.minor;
  if (settings_.stream != nullptr) {
    stream_ = settings_.stream;
  } else {
    FO_CUDA_RETURN_IF_ERROR(cudaStreamCreateWithFlags(&stream_, cudaStreamNonBlocking));
    owns_stream_ = true;
  }
  if (settings_.count_executed_kernels) {
    FUSIONOPT_ASSIGN_OR_RETURN(executed_counter_, ExecutedKernelCounter::Start(stream_));
  }
  int runtime_version = 0, driver_version = 0;
  FO_CUDA_RETURN_IF_ERROR(cudaRuntimeGetVersion(&runtime_version));
  FO_CUDA_RETURN_IF_ERROR(cudaDriverGetVersion(&driver_version));
  description_ = std::string(properties.name) + " (device " + std::to_string(settings_.device) + ", sm_" +
                 std::to_string(sm_arch_) + ", " + std::to_string(properties.multiProcessorCount) + " SMs), CUDA runtime " +
                 CudaVersionText(runtime_version) + ", driver " + CudaVersionText(driver_version) + ", " +
                 LibraryVersions();
  return Status::Ok();
}

PluginContext::~PluginContext() {
  if (compile_only()) return;
  // Nothing here can report: each release is best effort, in reverse order of creation.
  (void)cudaSetDevice(settings_.device);
  if (capturing_) {
    cudaGraph_t abandoned = nullptr;
    if (cudaStreamEndCapture(stream_, &abandoned) == cudaSuccess && abandoned != nullptr) (void)cudaGraphDestroy(abandoned);
  }
  (void)cudaStreamSynchronize(stream_);
  graph_.reset();
  if (timer_start_ != nullptr) (void)cudaEventDestroy(timer_start_);
  if (timer_stop_ != nullptr) (void)cudaEventDestroy(timer_stop_);
  if (cudnn_ != nullptr) (void)cudnnDestroy(cudnn_);
  if (cublaslt_ != nullptr) (void)cublasLtDestroy(cublaslt_);
  executed_counter_.reset();
  if (owns_stream_) (void)cudaStreamDestroy(stream_);
}

Status PluginContext::Activate(const char* operation) {
  if (compile_only()) return CudaFailure(std::string("compile-only context: ") + operation + " needs a device");
  FO_CUDA_RETURN_IF_ERROR(cudaSetDevice(settings_.device));
  return Status::Ok();
}

Status PluginContext::RequireNoCapture(const char* operation) const {
  if (capturing_) return UsageError(std::string(operation) + " is not allowed while a graph capture is open");
  return Status::Ok();
}

Result<cublasLtHandle_t> PluginContext::Cublaslt() {
  FUSIONOPT_RETURN_IF_ERROR(Activate("a cuBLASLt handle"));
  if (cublaslt_ == nullptr) {
    cublasStatus_t status = cublasLtCreate(&cublaslt_);
    if (status != CUBLAS_STATUS_SUCCESS) {
      cublaslt_ = nullptr;
      return CublasError(status, "cublasLtCreate");
    }
  }
  return cublaslt_;
}

Result<cudnnHandle_t> PluginContext::Cudnn() {
  FUSIONOPT_RETURN_IF_ERROR(Activate("a cuDNN handle"));
  if (cudnn_ == nullptr) {
    cudnnStatus_t status = cudnnCreate(&cudnn_);
    if (status != CUDNN_STATUS_SUCCESS) {
      cudnn_ = nullptr;
      return CudnnError(status, "cudnnCreate");
    }
    status = cudnnSetStream(cudnn_, stream_);
    if (status != CUDNN_STATUS_SUCCESS) return CudnnError(status, "cudnnSetStream");
  }
  return cudnn_;
}

Result<std::unique_ptr<DeviceKernel>> PluginContext::BuildGenerated(const GeneratedProgram& program, const Graph& body) {
  GeneratedTarget target;
  target.compile_only = compile_only();
  target.sm_arch = sm_arch_;
  target.device = settings_.device;
  target.stream = stream_;
  target.cache_dir = settings_.cache_dir;
  target.compiled = [this](bool from_cache, double seconds) {
    ++(from_cache ? build_stats_.modules_from_cache : build_stats_.modules_compiled);
    build_stats_.compile_seconds += seconds;
  };
  return BuildGeneratedKernel(program, body, target, *this);
}

Result<DeviceBuffer> PluginContext::Upload(const Tensor& tensor) {
  FUSIONOPT_RETURN_IF_ERROR(Activate("uploading a constant"));
  if (tensor.dtype() == DataType::kString) return Unsupported("string tensors cannot be uploaded to the device");
  if (tensor.nbytes() == 0) return DeviceBuffer();
  void* pointer = nullptr;
  FO_CUDA_RETURN_IF_ERROR(cudaMalloc(&pointer, tensor.nbytes()));
  DeviceBuffer buffer(pointer);
  // On the context's stream, so later kernels there are ordered after it; waited for because
  // the host bytes may go away once the build returns.
  FO_CUDA_RETURN_IF_ERROR(cudaMemcpyAsync(pointer, tensor.bytes().data(), tensor.nbytes(), cudaMemcpyHostToDevice, stream_));
  FO_CUDA_RETURN_IF_ERROR(cudaStreamSynchronize(stream_));
  return buffer;
}

void PluginContext::CountLaunches(uint32_t launches) {
  if (capturing_) {
    capture_launches_ += launches;
  } else {
    launches_ += launches;
  }
}

Result<LaunchCounters> PluginContext::Counters() {
  LaunchCounters counters;
  counters.launches = launches_;
  if (compile_only()) return counters;  // nothing ran, nothing to wait for
  FUSIONOPT_RETURN_IF_ERROR(RequireNoCapture("reading the counters"));
  FUSIONOPT_RETURN_IF_ERROR(Synchronize());
  if (executed_counter_ != nullptr) {
    FUSIONOPT_ASSIGN_OR_RETURN(counters.kernels_executed, executed_counter_->Count());
  }
  return counters;
}

Status PluginContext::ResetCounters() {
  launches_ = 0;
  if (compile_only()) return Status::Ok();
  FUSIONOPT_RETURN_IF_ERROR(RequireNoCapture("resetting the counters"));
  FUSIONOPT_RETURN_IF_ERROR(Synchronize());
  if (executed_counter_ != nullptr) FUSIONOPT_RETURN_IF_ERROR(executed_counter_->Reset());
  return Status::Ok();
}

Status PluginContext::Synchronize() {
  FUSIONOPT_RETURN_IF_ERROR(Activate("synchronizing"));
  FUSIONOPT_RETURN_IF_ERROR(RequireNoCapture("synchronizing"));
  FO_CUDA_RETURN_IF_ERROR(cudaStreamSynchronize(stream_));
  return Status::Ok();
}

Result<void*> PluginContext::Allocate(size_t bytes) {
  FUSIONOPT_RETURN_IF_ERROR(Activate("allocating device memory"));
  FUSIONOPT_RETURN_IF_ERROR(RequireNoCapture("allocating device memory"));
  void* pointer = nullptr;
  if (bytes > 0) FO_CUDA_RETURN_IF_ERROR(cudaMalloc(&pointer, bytes));
  return pointer;
}

Status PluginContext::Free(void* pointer) {
  FUSIONOPT_RETURN_IF_ERROR(Activate("freeing device memory"));
  FUSIONOPT_RETURN_IF_ERROR(RequireNoCapture("freeing device memory"));
  FO_CUDA_RETURN_IF_ERROR(cudaFree(pointer));
  return Status::Ok();
}

Status PluginContext::CopyToDevice(void* device, const void* host, size_t bytes) {
  FUSIONOPT_RETURN_IF_ERROR(Activate("copying to the device"));
  FO_CUDA_RETURN_IF_ERROR(cudaMemcpyAsync(device, host, bytes, cudaMemcpyHostToDevice, stream_));
  return Status::Ok();
}

Status PluginContext::CopyToHost(void* host, const void* device, size_t bytes) {
  FUSIONOPT_RETURN_IF_ERROR(Activate("copying to the host"));
  FO_CUDA_RETURN_IF_ERROR(cudaMemcpyAsync(host, device, bytes, cudaMemcpyDeviceToHost, stream_));
  return Status::Ok();
}

Status PluginContext::CopyDeviceToDevice(void* destination, const void* source, size_t bytes) {
  FUSIONOPT_RETURN_IF_ERROR(Activate("copying on the device"));
  FO_CUDA_RETURN_IF_ERROR(cudaMemcpyAsync(destination, source, bytes, cudaMemcpyDeviceToDevice, stream_));
  return Status::Ok();
}

Status PluginContext::StartTimer() {
  FUSIONOPT_RETURN_IF_ERROR(Activate("the timer"));
  FUSIONOPT_RETURN_IF_ERROR(RequireNoCapture("the timer"));
  if (timer_start_ == nullptr) FO_CUDA_RETURN_IF_ERROR(cudaEventCreate(&timer_start_));
  if (timer_stop_ == nullptr) FO_CUDA_RETURN_IF_ERROR(cudaEventCreate(&timer_stop_));
  FO_CUDA_RETURN_IF_ERROR(cudaEventRecord(timer_start_, stream_));
  timer_running_ = true;
  return Status::Ok();
}

Result<float> PluginContext::StopTimer() {
  FUSIONOPT_RETURN_IF_ERROR(Activate("the timer"));
  FUSIONOPT_RETURN_IF_ERROR(RequireNoCapture("the timer"));
  if (!timer_running_) return UsageError("fo_timer_stop without fo_timer_start");
  timer_running_ = false;
  FO_CUDA_RETURN_IF_ERROR(cudaEventRecord(timer_stop_, stream_));
  FO_CUDA_RETURN_IF_ERROR(cudaEventSynchronize(timer_stop_));
  float milliseconds = 0;
  FO_CUDA_RETURN_IF_ERROR(cudaEventElapsedTime(&milliseconds, timer_start_, timer_stop_));
  return milliseconds;
}

Status PluginContext::BeginCapture() {
  FUSIONOPT_RETURN_IF_ERROR(Activate("graph capture"));
  if (capturing_) return UsageError("a graph capture is already open on this context");
  // Thread-local mode: only this thread's unsafe calls (cudaMalloc, synchronization)
  // invalidate the capture, and the ABI refuses those while capturing.
  FO_CUDA_RETURN_IF_ERROR(cudaStreamBeginCapture(stream_, cudaStreamCaptureModeThreadLocal));
  capturing_ = true;
  capture_launches_ = 0;
  return Status::Ok();
}

Result<std::unique_ptr<CapturedGraph>> PluginContext::EndCaptureDetached() {
  FUSIONOPT_RETURN_IF_ERROR(Activate("graph capture"));
  if (!capturing_) return UsageError("ending a graph capture that was not begun (fo_graph_begin_capture)");
  capturing_ = false;
  cudaGraph_t graph = nullptr;
  FO_CUDA_RETURN_IF_ERROR(cudaStreamEndCapture(stream_, &graph));
  cudaGraphExec_t executable = nullptr;
  cudaError_t error = cudaGraphInstantiate(&executable, graph, 0);
  (void)cudaGraphDestroy(graph);  // the executable does not need its template
  if (error != cudaSuccess) return CudaError(error, "cudaGraphInstantiate");
  return std::make_unique<CapturedGraph>(executable, capture_launches_);
}

Status PluginContext::EndCapture() {
  FUSIONOPT_ASSIGN_OR_RETURN(graph_, EndCaptureDetached());
  return Status::Ok();
}

Status PluginContext::Replay() {
  FUSIONOPT_RETURN_IF_ERROR(Activate("graph replay"));
  if (graph_ == nullptr) return UsageError("fo_graph_replay without a captured graph");
  return Launch(*graph_);
}

Status PluginContext::Launch(const CapturedGraph& graph) {
  FUSIONOPT_RETURN_IF_ERROR(Activate("graph replay"));
  FUSIONOPT_RETURN_IF_ERROR(RequireNoCapture("graph replay"));
  FO_CUDA_RETURN_IF_ERROR(cudaGraphLaunch(graph.executable(), stream_));
  launches_ += graph.launches();
  return Status::Ok();
}

Status PluginContext::DiscardGraph() {
  FUSIONOPT_RETURN_IF_ERROR(Activate("graph discard"));
  if (capturing_) {
    capturing_ = false;
    cudaGraph_t abandoned = nullptr;
    cudaError_t error = cudaStreamEndCapture(stream_, &abandoned);
    if (abandoned != nullptr) (void)cudaGraphDestroy(abandoned);
    // An invalidated capture ends with an error; it is discarded all the same.
    if (error != cudaSuccess && error != cudaErrorStreamCaptureInvalidated) return CudaError(error, "cudaStreamEndCapture");
  }
  graph_.reset();
  return Status::Ok();
}

void PluginContext::DestroyGraph(std::unique_ptr<CapturedGraph> graph) {
  if (graph != nullptr && !compile_only()) (void)cudaSetDevice(settings_.device);
  graph.reset();
}

CapturedGraph::~CapturedGraph() { (void)cudaGraphExecDestroy(executable_); }

}  // namespace fusionopt::cuda
