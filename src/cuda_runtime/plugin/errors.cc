// The *Error helpers of device_kernel.h (one line naming the failed call and the library's
// own name for the error, code kCudaFailure) and DeviceBuffer's release.
#include <string>

#include "cuda_runtime/plugin/device_kernel.h"
#include "cuda_runtime/plugin/driver_api.h"

namespace fusionopt::cuda {

Status CudaError(cudaError_t error, const char* call) {
  return CudaFailure(std::string(call) + " failed: " + cudaGetErrorName(error) + " (" + cudaGetErrorString(error) + ")");
}

Status DriverError(CUresult result, const char* call) {
  std::string message = std::string(call) + " failed: CUresult " + std::to_string(static_cast<int>(result));
  auto driver = Driver();
  const char* name = nullptr;
  const char* description = nullptr;
  if (driver.ok() && (*driver)->get_error_name(result, &name) == CUDA_SUCCESS && name != nullptr) {
    message = std::string(call) + " failed: " + name;
    if ((*driver)->get_error_string(result, &description) == CUDA_SUCCESS && description != nullptr) {
      message += std::string(" (") + description + ")";
    }
  }
  return CudaFailure(message);
}

Status CublasError(cublasStatus_t status, const char* call) {
  return CudaFailure(std::string(call) + " failed: cuBLAS status " + std::to_string(static_cast<int>(status)) + " (" +
                     cublasLtGetStatusName(status) + ": " + cublasLtGetStatusString(status) + ")");
}

Status CudnnError(cudnnStatus_t status, const char* call) {
  return CudaFailure(std::string(call) + " failed: " + cudnnGetErrorString(status));
}

DeviceBuffer& DeviceBuffer::operator=(DeviceBuffer&& other) noexcept {
  if (this != &other) {
    DeviceBuffer released(pointer_);  // frees the old allocation on scope exit
    pointer_ = other.pointer_;
    other.pointer_ = nullptr;
  }
  return *this;
}

DeviceBuffer::~DeviceBuffer() {
  // A destructor cannot report; a failure here means the context is already gone, and the
  // memory with it.
  if (pointer_ != nullptr) (void)cudaFree(pointer_);
}

}  // namespace fusionopt::cuda
