// The library's DeviceContext (device_kernel.h) and everything an fo_context does
// (plugin.h): a device with its stream and lazily created cuBLASLt / cuDNN handles, or a
// compile-only target that makes no CUDA call at all; launch counting (and CUPTI's count of
// kernels that ran); CUDA graph capture and replay on the stream; an event timer; memory
// helpers for hosts without CUDA code of their own.
//
// Graphs: the context keeps one captured graph of its own (fo_graph_replay) and hands out
// others (CapturedGraph, fo_graph) that a host keeps, one per input shape.
//
// Launch counting with graphs: launches enqueued while capturing are recorded, not issued, so
// they are not counted then; each replay counts the launches it re-issues, so a replayed
// inference counts the same as an eager one (CUPTI's executed count sees the replayed kernels
// too).
#pragma once

#include <cuda_runtime.h>

#include <cstdint>
#include <memory>
#include <optional>
#include <string>

#include "cuda_runtime/plugin/cupti_counter.h"
#include "cuda_runtime/plugin/device_kernel.h"

namespace fusionopt::cuda {

struct ContextSettings {
  int device = -1;               // -1: compile-only
  int compile_arch = 90;         // compile-only: the target's compute capability × 10
  cudaStream_t stream = nullptr; // null: the context creates its own
  std::string cache_dir;         // NVRTC cache folder, "" for none
  bool count_executed_kernels = false;
};

struct BuildStats {
  uint64_t kernels_built = 0, modules_compiled = 0, modules_from_cache = 0;
  double compile_seconds = 0, build_seconds = 0;
};

struct LaunchCounters {
  uint64_t launches = 0;
  std::optional<uint64_t> kernels_executed;  // nullopt when CUPTI is not counting
};

// An instantiated graph captured from a context's stream. Only the executable is kept: the
// captured template is destroyed once instantiated, and CUDA frees an executable that is still
// running when it completes, so destroying one never waits.
class CapturedGraph {
 public:
  CapturedGraph(cudaGraphExec_t executable, uint64_t launches) : executable_(executable), launches_(launches) {}
  ~CapturedGraph();
  CapturedGraph(const CapturedGraph&) = delete;
  CapturedGraph& operator=(const CapturedGraph&) = delete;

  cudaGraphExec_t executable() const { return executable_; }
  uint64_t launches() const { return launches_; }  // launches one replay re-issues

 private:
  cudaGraphExec_t executable_;
  uint64_t launches_;
};

class PluginContext final : public DeviceContext {
 public:
  // Initializes the device (or nothing, compile-only). Fails with a CUDA failure when the
  // device is missing or unusable.
  static Result<std::unique_ptr<PluginContext>> Create(const ContextSettings& settings);
  ~PluginContext() override;
  PluginContext(const PluginContext&) = delete;
  PluginContext& operator=(const PluginContext&) = delete;

  // DeviceContext
  bool compile_only() const override { return settings_.device < 0; }
  int sm_arch() const override { return sm_arch_; }
  cudaStream_t stream() const override { return stream_; }
  Result<cublasLtHandle_t> Cublaslt() override;
  Result<cudnnHandle_t> Cudnn() override;
  Result<std::unique_ptr<DeviceKernel>> BuildGenerated(const GeneratedProgram& program, const Graph& body) override;
  Result<DeviceBuffer> Upload(const Tensor& tensor) override;
  void CountLaunches(uint32_t launches) override;

  // One line: device, compute capability, library versions.
  const std::string& description() const { return description_; }
  // Makes the device current on the calling thread; a CUDA failure naming `operation` in a
  // compile-only context. Every entry point that touches the device calls it first.
  Status Activate(const char* operation);
  // A usage error while a graph capture is open (operations that would break the capture).
  Status RequireNoCapture(const char* operation) const;

  Result<LaunchCounters> Counters();  // synchronizes the stream first
  BuildStats& build_stats() { return build_stats_; }
  Status ResetCounters();

  Status Synchronize();
  Result<void*> Allocate(size_t bytes);
  Status Free(void* pointer);
  Status CopyToDevice(void* device, const void* host, size_t bytes);
  Status CopyToHost(void* host, const void* device, size_t bytes);
  Status CopyDeviceToDevice(void* destination, const void* source, size_t bytes);

  Status StartTimer();
  Result<float> StopTimer();  // milliseconds; waits for the stream

  Status BeginCapture();
  // Ends the open capture into the context's own graph (replacing the one it held).
  Status EndCapture();
  // Ends the open capture into a graph the caller keeps; the context's own is left as it was.
  Result<std::unique_ptr<CapturedGraph>> EndCaptureDetached();
  Status Replay();  // the context's own graph
  Status Launch(const CapturedGraph& graph);
  Status DiscardGraph();
  void DestroyGraph(std::unique_ptr<CapturedGraph> graph);  // best effort, on this device

 private:
  explicit PluginContext(ContextSettings settings) : settings_(std::move(settings)) {}
  Status InitializeDevice();
  void DescribeCompileOnly();

  ContextSettings settings_;
  int sm_arch_ = 90;
  std::string description_;
  cudaStream_t stream_ = nullptr;
  bool owns_stream_ = false;
  cublasLtHandle_t cublaslt_ = nullptr;
  cudnnHandle_t cudnn_ = nullptr;
  std::unique_ptr<ExecutedKernelCounter> executed_counter_;
  uint64_t launches_ = 0;
  BuildStats build_stats_;

  cudaEvent_t timer_start_ = nullptr;
  cudaEvent_t timer_stop_ = nullptr;
  bool timer_running_ = false;

  bool capturing_ = false;
  uint64_t capture_launches_ = 0;  // launches recorded by the open capture
  std::unique_ptr<CapturedGraph> graph_;  // the context's own (fo_graph_replay)
};

}  // namespace fusionopt::cuda
