// What the C API's opaque value handle holds (include/fusionopt/runtime.h), shared by the files
// that implement the API: c_api.cc, and dlpack_export.cc which lends values out as DLPack.
#pragma once

#include <cstdint>
#include <string>

#include "cpu_runtime/engine/rt_tensor.h"
#include "fusionopt/runtime.h"
#include "ir/status.h"

struct fusionopt_value {
  std::string name;
  // Host memory, or (memory == FUSIONOPT_MEMORY_CUDA) device memory whose deleter frees it on
  // the device: the storage is reference counted either way, so lending it out is a copy of
  // the tensor, never of the bytes.
  fusionopt::cpu::RtTensor tensor;
  int32_t memory = FUSIONOPT_MEMORY_HOST;
  int32_t device = 0;  // CUDA: the device ordinal
};

namespace fusionopt::api {

// fusionopt_value_to_dlpack's body (dlpack_export.cc): a new DLManagedTensor sharing `value`'s
// storage; a dtype DLPack cannot name is a usage error.
Status LendAsDlpack(const fusionopt_value& value, void** dl_managed_tensor);

}  // namespace fusionopt::api
