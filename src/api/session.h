// One session over either runtime: the CPU runtime (cpu_runtime/engine/session.h) or the CUDA
// backend (cuda_runtime/backend/cuda_session.h), behind one type. The CLI's run and verify, the
// C API (include/fusionopt/runtime.h) and through it the Python package all hold this.
//
// The session owns its model. Inputs and outputs are described the way the graph declares them
// (dtype, dims with their symbols); Run checks the feeds against those declarations by name
// before either runtime sees them, so both reject bad feeds with the same words.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "cpu_runtime/engine/session.h"
#include "ir/status.h"

namespace fusionopt {
struct Model;
namespace cuda {
class CudaSession;
}
}  // namespace fusionopt

namespace fusionopt::api {

enum class Backend { kCpu, kCuda };

struct SessionConfig {
  Backend backend = Backend::kCpu;
  int threads = 0;             // CPU: intra-op threads; 0: every core this process may use
  bool fused_kernels = true;   // CPU: false runs fused nodes' bodies op by op (for comparisons)
  bool cuda_graph = false;     // CUDA: capture each input shape's first inference, replay it
  int cuda_device = 0;         // CUDA: device ordinal
};

// One declared input or output: its name, element type and dims (-1 where unknown, with the
// symbol's name when the graph names one).
struct ValueInfo {
  std::string name;
  DataType dtype = DataType::kUndefined;
  std::vector<int64_t> dims;
  std::vector<std::string> symbols;  // one per dim: "" for a known or anonymous dim
  bool has_shape = false;            // false: the graph declares no shape at all
};

// Where a tensor's bytes lie: host memory, or the CUDA session's device.
enum class Memory { kHost, kCuda };

// Where Run finds its feeds (by feed index; missing entries are host memory) and leaves its
// outputs. Only a CUDA session takes device memory; device outputs own their buffers.
struct Placement {
  std::vector<Memory> feeds;
  Memory outputs = Memory::kHost;
};

// What one inference did, as either runtime counts it.
struct RunCounts {
  int64_t kernels_launched = 0;
  bool replayed_graph = false;  // CUDA: this inference replayed the captured CUDA Graph
  double device_ms = 0;         // CUDA: GPU time of the kernels (CUDA events), without the copies
};

class Session {
 public:
  static Result<std::unique_ptr<Session>> Create(std::unique_ptr<Model> model, const SessionConfig& config);
  ~Session();
  Session(const Session&) = delete;
  Session& operator=(const Session&) = delete;

  Backend backend() const { return config_.backend; }
  const Model& model() const { return *model_; }
  const std::vector<ValueInfo>& inputs() const { return inputs_; }
  // The graph values those inputs are, in the same order (the model's own, for feed makers that
  // read their shapes and symbols).
  const std::vector<const Value*>& input_values() const { return input_values_; }
  const std::vector<ValueInfo>& outputs() const { return outputs_; }
  // "CPU runtime, 2 threads" or the CUDA device, its compute capability and library versions.
  std::string Description() const;

  // One inference. Every declared input must be fed exactly once; a name the model lacks, a
  // dtype or rank or known dim that contradicts the declaration, is an error naming the input.
  // Outputs come in graph-output order.
  Result<std::vector<cpu::NamedTensor>> Run(const std::vector<cpu::NamedTensor>& feeds, RunCounts* counts = nullptr,
                                            cpu::RunStats* cpu_stats = nullptr);
  // The same with feeds or outputs in device memory (a CPU session refuses any).
  Result<std::vector<cpu::NamedTensor>> Run(const std::vector<cpu::NamedTensor>& feeds, const Placement& placement,
                                            RunCounts* counts = nullptr);
  // The CUDA stream a CUDA session works on (nullptr on the CPU): device feeds written on
  // another stream must be ordered before it.
  void* CudaStream() const;

  // The runtime underneath, for what only one of them has (the CPU's per-node profile).
  cpu::Session* cpu_session() { return cpu_.get(); }
  cuda::CudaSession* cuda_session() { return cuda_.get(); }

 private:
  Session(std::unique_ptr<Model> model, SessionConfig config);
  Status CheckPlacement(const std::vector<cpu::NamedTensor>& feeds, const Placement& placement) const;

  std::unique_ptr<Model> model_;
  SessionConfig config_;
  std::vector<ValueInfo> inputs_;
  std::vector<const Value*> input_values_;
  std::vector<ValueInfo> outputs_;
  std::unique_ptr<cpu::Session> cpu_;
  std::unique_ptr<cuda::CudaSession> cuda_;
};

// The graph's declaration of `value` as a ValueInfo.
ValueInfo Describe(const Value& value);

}  // namespace fusionopt::api
