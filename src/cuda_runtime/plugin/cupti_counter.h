// Counting kernels that actually ran, with CUPTI's Activity API: every
// CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL record is one kernel execution, including kernels
// cuBLASLt and cuDNN launch internally and kernels replayed from a CUDA graph — what the
// library's own launch count cannot see.
//
// CUPTI's activity buffers are process-wide, so one registry owns them and attributes each
// record to the (CUDA context, stream) it ran on; a counter reports the kernels of its own
// stream only.
// Records arrive when CUPTI hands a buffer back: Count() synchronizes nothing itself (the
// caller synchronizes the stream first) and forces a flush.
#pragma once

#include <cuda_runtime.h>

#include <cstdint>
#include <memory>

#include "ir/status.h"

namespace fusionopt::cuda {

class ExecutedKernelCounter {
 public:
  // Enables CONCURRENT_KERNEL activity records (once per process, while any counter lives)
  // and starts counting kernels on `stream` from zero. `stream`'s device must be current.
  static Result<std::unique_ptr<ExecutedKernelCounter>> Start(cudaStream_t stream);
  ~ExecutedKernelCounter();
  ExecutedKernelCounter(const ExecutedKernelCounter&) = delete;
  ExecutedKernelCounter& operator=(const ExecutedKernelCounter&) = delete;

  // Kernels that ran on the stream since Start or the last Reset (flushes CUPTI's buffers).
  Result<uint64_t> Count();
  Status Reset();

 private:
  explicit ExecutedKernelCounter(uint64_t stream_key) : stream_key_(stream_key) {}
  uint64_t stream_key_;  // CUPTI context id << 32 | CUPTI stream id
  uint64_t base_ = 0;
};

}  // namespace fusionopt::cuda
