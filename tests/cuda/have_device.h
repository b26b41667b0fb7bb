// Whether a CUDA device is usable here: GPU tests WARN what they skip and return when not.
#pragma once

#include <cuda_runtime.h>

namespace fusionopt::test_support {

inline bool HaveCudaDevice() {
  int devices = 0;
  const bool found = cudaGetDeviceCount(&devices) == cudaSuccess && devices > 0;
  (void)cudaGetLastError();  // a failed query must not surface in the next CUDA call
  return found;
}

}  // namespace fusionopt::test_support
