// Inside libfusionopt_cuda.so: a built kernel (what an fo_kernel wraps) and the services the
// kernel builders get from the context. Builders: the contraction family (cuBLASLt, cuDNN;
// contraction_*.cc) and the generated-code family (a GeneratedProgram compiled by NVRTC;
// generated_runner.cc). The ABI layer (abi.cc) turns an fo_node_desc into a typed body
// (codegen/typed_body.h) and asks the builders in turn (dispatch.cc).
//
// Driver API: the library must load on machines without an NVIDIA driver (CI), so nothing in
// it may reference a cu* symbol directly (that would make libcuda.so.1 a DT_NEEDED of the
// library and dlopen would fail there). Use the runtime API, or Driver() (driver_api.h), which
// resolves driver entry points through cudaGetDriverEntryPointByVersion at first use.
#pragma once

#include <cuda.h>
#include <cuda_runtime.h>
#include <cublasLt.h>
#include <cudnn.h>

#include <cstdint>
#include <memory>
#include <string>

#include "cuda_runtime/codegen/generated_kernel.h"
#include "ir/graph.h"
#include "ir/status.h"

namespace fusionopt::cuda {

// One kernel ready to enqueue. Built for fixed shapes; holds its own constants on the device.
class DeviceKernel {
 public:
  virtual ~DeviceKernel() = default;
  virtual uint64_t workspace_bytes() const { return 0; }
  virtual uint32_t launch_count() const = 0;  // launches one Enqueue issues
  virtual std::string Describe() const = 0;   // one line: implementation and notable choices
  // One device pointer per body input and per body output, in order (null for omitted
  // optional ones); `workspace` has workspace_bytes(). Enqueues on the context's stream and
  // returns without waiting.
  virtual Status Enqueue(const void* const* inputs, void* const* outputs, void* workspace) = 0;
};

// Device memory owned by a kernel (constants uploaded once at build).
class DeviceBuffer {
 public:
  DeviceBuffer() = default;
  explicit DeviceBuffer(void* pointer) : pointer_(pointer) {}
  DeviceBuffer(DeviceBuffer&& other) noexcept : pointer_(other.pointer_) { other.pointer_ = nullptr; }
  DeviceBuffer& operator=(DeviceBuffer&& other) noexcept;
  DeviceBuffer(const DeviceBuffer&) = delete;
  DeviceBuffer& operator=(const DeviceBuffer&) = delete;
  ~DeviceBuffer();
  void* get() const { return pointer_; }

 private:
  void* pointer_ = nullptr;
};

// What builders may use. A compile-only context (no GPU; plugin.h) has no stream or library
// handles: builders there do everything up to the first device call (generate, compile,
// choose the library plan) and return a kernel whose Enqueue fails.
class DeviceContext {
 public:
  virtual ~DeviceContext() = default;
  virtual bool compile_only() const = 0;
  virtual int sm_arch() const = 0;  // compute capability × 10 of the device (or compile_arch)
  virtual cudaStream_t stream() const = 0;
  // Library handles, created on first use and bound to stream(); errors in compile-only mode.
  virtual Result<cublasLtHandle_t> Cublaslt() = 0;
  virtual Result<cudnnHandle_t> Cudnn() = 0;
  // Compiles (through the disk cache) and loads a generated program as a kernel. `body` is the
  // typed body it was generated from (its initializers named in constant_inputs are uploaded).
  virtual Result<std::unique_ptr<DeviceKernel>> BuildGenerated(const GeneratedProgram& program, const Graph& body) = 0;
  // A device copy of `tensor`'s bytes.
  virtual Result<DeviceBuffer> Upload(const Tensor& tensor) = 0;
  // Adds to fo_context_counters' launches. The ABI layer calls it after every successful
  // fo_kernel_enqueue with the kernel's launch_count(); kernels do not call it themselves.
  virtual void CountLaunches(uint32_t launches) = 0;
};

// Status codes private to the library, so the ABI can tell a failed CUDA call (FO_CUDA_ERROR)
// and a kernel NVRTC rejected (FO_COMPILE_ERROR) from other failures. They never leave it:
// the ABI turns every Status into an fo_status.
inline constexpr ErrorCode kCudaFailure = static_cast<ErrorCode>(200);
inline constexpr ErrorCode kCompileFailure = static_cast<ErrorCode>(201);
inline Status CudaFailure(std::string message) { return Status(kCudaFailure, std::move(message)); }
inline Status CompileFailure(std::string message) { return Status(kCompileFailure, std::move(message)); }

// The message for a failed CUDA runtime / driver / cuBLAS / cuDNN call, with the call named;
// code kCudaFailure.
Status CudaError(cudaError_t error, const char* call);
Status DriverError(CUresult result, const char* call);
Status CublasError(cublasStatus_t status, const char* call);
Status CudnnError(cudnnStatus_t status, const char* call);

}  // namespace fusionopt::cuda
