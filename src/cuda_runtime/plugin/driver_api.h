// The few CUDA driver API functions the library needs (loading CUBIN modules and launching
// their kernels), resolved at run time through the CUDA runtime's
// cudaGetDriverEntryPointByVersion instead of linked: a direct cu* reference would make
// libcuda.so.1 a load-time dependency, and the library must dlopen on CI machines that have
// the toolkit but no driver (device_kernel.h).
#pragma once

#include <cuda.h>

#include "ir/status.h"

namespace fusionopt::cuda {

struct DriverApi {
  decltype(&::cuModuleLoadData) module_load_data = nullptr;
  decltype(&::cuModuleUnload) module_unload = nullptr;
  decltype(&::cuModuleGetFunction) module_get_function = nullptr;
  decltype(&::cuFuncSetAttribute) func_set_attribute = nullptr;
  decltype(&::cuLaunchKernel) launch_kernel = nullptr;
  decltype(&::cuGetErrorName) get_error_name = nullptr;
  decltype(&::cuGetErrorString) get_error_string = nullptr;
  decltype(&::cuCtxGetCurrent) ctx_get_current = nullptr;
};

// The driver's entry points, resolved once per process (the first call initializes the CUDA
// runtime, so call it only where a device is in use); a CUDA failure when the driver lacks one.
Result<const DriverApi*> Driver();

}  // namespace fusionopt::cuda
