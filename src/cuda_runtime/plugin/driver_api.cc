// Resolves the driver entry points of driver_api.h once per process.
#include "cuda_runtime/plugin/driver_api.h"

#include <cuda_runtime.h>

#include <mutex>
#include <string>

#include "cuda_runtime/plugin/device_kernel.h"

namespace fusionopt::cuda {
namespace {

// Every function used here exists with this signature since CUDA 12.0; asking for that
// version keeps the library working on any driver the runtime itself accepts.
constexpr unsigned int kDriverApiVersion = 12000;

template <typename Function>
Status Resolve(const char* symbol, Function& function) {
  void* address = nullptr;
  cudaDriverEntryPointQueryResult found = cudaDriverEntryPointSymbolNotFound;
  cudaError_t error = cudaGetDriverEntryPointByVersion(symbol, &address, kDriverApiVersion, cudaEnableDefault, &found);
  if (error != cudaSuccess) return CudaError(error, "cudaGetDriverEntryPointByVersion");
  if (found != cudaDriverEntryPointSuccess || address == nullptr) {
    return CudaFailure(std::string("the CUDA driver has no ") + symbol);
  }
  function = reinterpret_cast<Function>(address);
  return Status::Ok();
}

Status ResolveAll(DriverApi& api) {
  FUSIONOPT_RETURN_IF_ERROR(Resolve("cuModuleLoadData", api.module_load_data));
  FUSIONOPT_RETURN_IF_ERROR(Resolve("cuModuleUnload", api.module_unload));
  FUSIONOPT_RETURN_IF_ERROR(Resolve("cuModuleGetFunction", api.module_get_function));
  FUSIONOPT_RETURN_IF_ERROR(Resolve("cuFuncSetAttribute", api.func_set_attribute));
  FUSIONOPT_RETURN_IF_ERROR(Resolve("cuLaunchKernel", api.launch_kernel));
  FUSIONOPT_RETURN_IF_ERROR(Resolve("cuGetErrorName", api.get_error_name));
  FUSIONOPT_RETURN_IF_ERROR(Resolve("cuGetErrorString", api.get_error_string));
  FUSIONOPT_RETURN_IF_ERROR(Resolve("cuCtxGetCurrent", api.ctx_get_current));
  return Status::Ok();
}

}  // namespace

Result<const DriverApi*> Driver() {
  static std::mutex mutex;
  static DriverApi api;
  static bool resolved = false;
  std::lock_guard<std::mutex> lock(mutex);
  // Retried after a failure: the failure may have been a device that was not yet usable.
  if (!resolved) {
    DriverApi candidate;
    FUSIONOPT_RETURN_IF_ERROR(ResolveAll(candidate));
    api = candidate;
    resolved = true;
  }
  return &api;
}

}  // namespace fusionopt::cuda
