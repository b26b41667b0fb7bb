// fusionopt's CUDA backend: runs a whole model on a GPU through the plugin's C ABI
// (plugin_api.h), for `fusionopt run / verify / bench --backend cuda` and `inspect --cuda`.
//
// Kernels are built for static shapes, so a session plans once per distinct set of input
// dims: the model is copied, its inputs given the fed dims, shapes inferred and shape
// arithmetic folded to constants (the fold-constants pass), then every node gets a kernel
// from the plugin — except views (Reshape, Flatten, Squeeze, Unsqueeze, Identity, inference
// Dropout, and a Split with only unit dims before its axis, whose parts are contiguous slices),
// which alias their input's memory and launch nothing, and Constant nodes, whose
// values are uploaded once like initializers. Intermediates share device memory by liveness:
// a buffer freed after its last reader is reused by a later value of the same byte size.
//
// Limits: If/Loop/Scan and data-dependent shapes (NonZero, ...) are Unsupported, naming the
// node; so is any node the plugin has no kernel for (the plan lists all of them at once).
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "cpu_runtime/engine/session.h"
#include "cuda_runtime/backend/plugin_api.h"
#include "ir/graph.h"
#include "ir/status.h"

namespace fusionopt::cuda {

struct CudaSessionOptions {
  int device = 0;            // -1: compile-only (plans, never runs; no GPU needed)
  int compile_arch = 90;     // compile-only: the compute capability × 10 to build for
  bool count_executed_kernels = false;  // CUPTI's count of kernels that ran
  bool cuda_graph = false;   // capture each input shape's first inference into a CUDA Graph and replay it
  std::string cache_dir;     // NVRTC cache; "" = the plugin's default
};

// How one node of the specialized model runs.
struct PlannedNode {
  std::string node;            // name (or op type when unnamed)
  std::string op;              // domain::op_type
  std::string implementation;  // the kernel's description, "view", "constant"; empty when unsupported
  uint32_t launches = 0;
  std::string unsupported;     // why it cannot run, when it cannot
};

// What making a plan cost: the first inference at a new input shape pays it, later ones do not.
struct FirstInferenceCost {
  double plan_seconds = 0;      // specializing, building every kernel, assigning memory
  int64_t kernels_built = 0;
  int64_t modules_compiled = 0;   // generated programs NVRTC compiled
  int64_t modules_from_cache = 0;  // generated programs the disk cache answered
  double compile_seconds = 0;      // of plan_seconds, in NVRTC and the cache
};

struct CudaPlanSummary {
  std::vector<PlannedNode> nodes;
  int64_t kernels = 0;                     // nodes that launch
  int64_t launches_per_inference = 0;
  int64_t unsupported = 0;
  int64_t fused_nodes_inlined = 0;         // fused nodes without a CUDA kernel, run as their body's ops
  std::vector<std::pair<std::string, std::string>> inlined_because;  // (fused node, the plugin's reason)
  uint64_t peak_intermediate_bytes = 0;    // device memory of intermediates at their peak
  uint64_t workspace_bytes = 0;
  uint64_t intermediate_traffic_bytes = 0;  // bytes of intermediates kernels write and read per inference
  FirstInferenceCost first_inference;
};

struct CudaRunStats {
  int64_t kernels_launched = 0;               // launches the plugin issued for one inference
  std::optional<uint64_t> kernels_executed;   // CUPTI's count, when counting
  bool replayed_graph = false;                // this inference replayed the captured graph
  double device_ms = 0;  // GPU time from the first kernel's start to the last one's end (CUDA
                         // events), without the copies of inputs and outputs
};

// A copy of `model` whose inputs have the feeds' dims, every computed shape inferred afresh
// (ReinferShapes), and shape arithmetic and every other constant-only computation folded into
// initializers, so every value has a static shape and no kernel recomputes a constant: what a
// plan is built from.
Result<std::unique_ptr<Model>> SpecializeForFeeds(const Model& model, const std::vector<cpu::NamedTensor>& feeds);
// The same for given input dims (by input name; inputs not named keep their declared shape):
// what `--emit-cuda` generates from.
Result<std::unique_ptr<Model>> SpecializeForShapes(const Model& model,
                                                   const std::map<std::string, std::vector<int64_t>>& shapes);

// Where Run finds its feeds and leaves its outputs. Device memory is this session's device:
// a device feed is copied on the device (no trip through the host), and device outputs are
// fresh buffers the returned tensors own — they stay valid after the session is gone.
struct RunPlacement {
  std::vector<bool> feeds_on_device;  // by feed index; empty: every feed in host memory
  bool outputs_on_device = false;
};

class CudaSession {
 public:
  static Result<std::unique_ptr<CudaSession>> Create(const Model& model, const CudaSessionOptions& options);
  ~CudaSession();
  CudaSession(const CudaSession&) = delete;
  CudaSession& operator=(const CudaSession&) = delete;

  const std::vector<const Value*>& inputs() const { return inputs_; }
  std::string DeviceDescription() const;
  // The cudaStream_t this session's copies and kernels run on: a caller whose device feeds
  // another stream writes makes this one wait for that work (DLPack's `stream` argument).
  void* Stream() const;

  // Plans for the feeds' dims (once per distinct dims). Planning fails only for a model that
  // cannot be specialized (an inconsistent or data-dependent shape); nodes without a kernel are
  // listed in the summary, and Run refuses such a plan.
  Result<CudaPlanSummary> Plan(const std::vector<cpu::NamedTensor>& feeds);

  // One inference: copies the feeds in, runs every kernel, copies the outputs out (graph-output
  // order; to the host unless `placement` says otherwise) and waits for the GPU.
  Result<std::vector<cpu::NamedTensor>> Run(const std::vector<cpu::NamedTensor>& feeds, CudaRunStats* stats = nullptr,
                                            const RunPlacement& placement = {});

  // GPU milliseconds of one device-to-device copy of `bytes` on this session's stream: the
  // bandwidth yardstick for elementwise kernels (bench/cuda_bandwidth.cc).
  Result<float> TimeDeviceCopy(uint64_t bytes);

 private:
  struct Prepared;
  class Planner;
  CudaSession(const Model& model, const PluginApi& api, CudaSessionOptions options);
  Result<Prepared*> PlanFor(const std::vector<cpu::NamedTensor>& feeds);
  Result<int64_t> InlineUnsupportedFusedNodes(Model& model, CudaPlanSummary& summary);
  Status Enqueue(Prepared& plan);
  Status CopyFeedsIn(Prepared& plan, const std::vector<cpu::NamedTensor>& feeds, const RunPlacement& placement);
  Result<cpu::NamedTensor> CopyOutputOut(const Prepared& plan, size_t index, bool to_device);

  const Model& model_;
  const PluginApi& api_;
  CudaSessionOptions options_;
  fo_context* context_ = nullptr;
  // Owns context_: device outputs handed to callers hold it too, to free their memory.
  std::shared_ptr<fo_context> context_owner_;
  std::vector<const Value*> inputs_;
  std::map<std::string, std::unique_ptr<Prepared>> plans_;  // by the feeds' dims
};

}  // namespace fusionopt::cuda
