// CUPTI activity registry and the per-stream executed-kernel counter (cupti_counter.h).
#include "cuda_runtime/plugin/cupti_counter.h"

#include <cupti.h>

#include <cstdlib>
#include <mutex>
#include <string>
#include <unordered_map>

#include "cuda_runtime/plugin/device_kernel.h"
#include "cuda_runtime/plugin/driver_api.h"

namespace fusionopt::cuda {
namespace {

constexpr size_t kActivityBufferBytes = size_t{1} << 20;
constexpr size_t kActivityRecordAlignment = 8;  // CUPTI's requirement for activity buffers

Status CuptiError(CUptiResult result, const char* call) {
  const char* text = nullptr;
  if (cuptiGetResultString(result, &text) != CUPTI_SUCCESS || text == nullptr) text = "unknown CUPTI error";
  return CudaFailure(std::string(call) + " failed: " + text);
}

// Process-wide: CUPTI has one set of buffer callbacks. Counts per stream key (stream ids are
// unique within a CUDA context only), since the process started counting; counters subtract
// their own base.
// Two locks: CUPTI may call BufferCompleted from inside any CUPTI call (a flush, a disable),
// so the lock the callback takes (counts) is never held across a CUPTI call, and the lock
// that serializes enabling and disabling (control) is never taken by the callback.
struct Registry {
  std::mutex control;
  int users = 0;
  bool callbacks_registered = false;
  std::mutex counts;
  std::unordered_map<uint64_t, uint64_t> kernels_by_stream;
};

uint64_t StreamKey(uint32_t context_id, uint32_t stream_id) { return (uint64_t{context_id} << 32) | stream_id; }

Registry& TheRegistry() {
  static Registry* registry = new Registry();  // never destroyed: CUPTI may call back at exit
  return *registry;
}

void CUPTIAPI BufferRequested(uint8_t** buffer, size_t* size, size_t* max_records) {
  *buffer = static_cast<uint8_t*>(std::aligned_alloc(kActivityRecordAlignment, kActivityBufferBytes));
  *size = *buffer == nullptr ? 0 : kActivityBufferBytes;
  *max_records = 0;  // as many as fit
}

void CUPTIAPI BufferCompleted(CUcontext, uint32_t, uint8_t* buffer, size_t, size_t valid_bytes) {
  std::unordered_map<uint64_t, uint64_t> counted;
  CUpti_Activity* record = nullptr;
  while (cuptiActivityGetNextRecord(buffer, valid_bytes, &record) == CUPTI_SUCCESS) {
    if (record->kind == CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL) {
      const auto* kernel = reinterpret_cast<const CUpti_ActivityKernel10*>(record);
      ++counted[StreamKey(kernel->contextId, kernel->streamId)];
    }
  }
  std::free(buffer);
  Registry& registry = TheRegistry();
  std::lock_guard<std::mutex> lock(registry.counts);
  for (const auto& [stream, kernels] : counted) registry.kernels_by_stream[stream] += kernels;
}

Status AddUser() {
  Registry& registry = TheRegistry();
  std::lock_guard<std::mutex> lock(registry.control);
  if (!registry.callbacks_registered) {
    CUptiResult result = cuptiActivityRegisterCallbacks(BufferRequested, BufferCompleted);
    if (result != CUPTI_SUCCESS) return CuptiError(result, "cuptiActivityRegisterCallbacks");
    registry.callbacks_registered = true;
  }
  if (registry.users == 0) {
    CUptiResult result = cuptiActivityEnable(CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL);
    if (result != CUPTI_SUCCESS) return CuptiError(result, "cuptiActivityEnable(CONCURRENT_KERNEL)");
  }
  ++registry.users;
  return Status::Ok();
}

// The kernels counted so far on `stream_key`, after CUPTI handed back every buffer it holds.
Result<uint64_t> FlushAndRead(uint64_t stream_key) {
  CUptiResult result = cuptiActivityFlushAll(CUPTI_ACTIVITY_FLAG_FLUSH_FORCED);
  if (result != CUPTI_SUCCESS) return CuptiError(result, "cuptiActivityFlushAll");
  Registry& registry = TheRegistry();
  std::lock_guard<std::mutex> lock(registry.counts);
  return registry.kernels_by_stream[stream_key];
}

}  // namespace

Result<std::unique_ptr<ExecutedKernelCounter>> ExecutedKernelCounter::Start(cudaStream_t stream) {
  FUSIONOPT_ASSIGN_OR_RETURN(const DriverApi* driver, Driver());
  CUcontext context = nullptr;
  CUresult current = driver->ctx_get_current(&context);
  if (current != CUDA_SUCCESS) return DriverError(current, "cuCtxGetCurrent");
  if (context == nullptr) return CudaFailure("CUPTI counting: no CUDA context is current");
  uint32_t context_id = 0, stream_id = 0;
  CUptiResult result = cuptiGetContextId(context, &context_id);
  if (result != CUPTI_SUCCESS) return CuptiError(result, "cuptiGetContextId");
  result = cuptiGetStreamIdEx(context, stream, 0, &stream_id);
  if (result != CUPTI_SUCCESS) return CuptiError(result, "cuptiGetStreamIdEx");
  FUSIONOPT_RETURN_IF_ERROR(AddUser());
  std::unique_ptr<ExecutedKernelCounter> counter(new ExecutedKernelCounter(StreamKey(context_id, stream_id)));
  FUSIONOPT_RETURN_IF_ERROR(counter->Reset());
  return counter;
}

ExecutedKernelCounter::~ExecutedKernelCounter() {
  (void)cuptiActivityFlushAll(CUPTI_ACTIVITY_FLAG_FLUSH_FORCED);
  Registry& registry = TheRegistry();
  std::lock_guard<std::mutex> lock(registry.control);
  if (--registry.users == 0) (void)cuptiActivityDisable(CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL);
}

Result<uint64_t> ExecutedKernelCounter::Count() {
  FUSIONOPT_ASSIGN_OR_RETURN(uint64_t total, FlushAndRead(stream_key_));
  return total - base_;
}

Status ExecutedKernelCounter::Reset() {
  FUSIONOPT_ASSIGN_OR_RETURN(base_, FlushAndRead(stream_key_));
  return Status::Ok();
}

}  // namespace fusionopt::cuda
