// GraphExecutor: one graph prepared for execution — a Session's main graph, or the body of an
// If, Loop or Scan, which runs it once per branch taken or iteration.
//
// Prepare() creates a kernel for every node (nested subgraphs are prepared too, so an
// unsupported op anywhere fails before anything runs), gives every value a slot, and plans
// the release of each intermediate after its last reader so its buffer is reused.
//
// A subgraph reads its formal inputs and the outer-scope values its nodes, or the nodes of
// subgraphs nested in it, read: `captured()`, bound on every Execute. A node holding
// subgraphs reads its bodies' captured values as implicit inputs after its own, so the
// enclosing graph keeps each such value alive until that node has run.
#pragma once

#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "ir/constant_value.h"
#include "cpu_runtime/engine/allocator.h"
#include "cpu_runtime/engine/kernel.h"
#include "cpu_runtime/engine/rt_tensor.h"
#include "ir/graph.h"
#include "ir/op_class.h"
#include "ir/status.h"

namespace fusionopt::cpu {

// Wall time spent in one node over the runs profiled.
struct NodeTiming {
  double total_ms = 0;
  int64_t calls = 0;  // includes every iteration of a body
};

// One kernel launch of a traced run: which node, when it started and how long it took.
struct KernelEvent {
  const Node* node = nullptr;
  std::chrono::steady_clock::time_point start;
  double duration_us = 0;
};

struct RunStats {
  int64_t kernels_launched = 0;           // kernels run, including every iteration of a body
  int64_t nodes_executed = 0;             // nodes run, including every iteration of a body
  uint64_t peak_intermediate_bytes = 0;   // most intermediate memory alive at once
  // Bytes of intermediate values (neither graph inputs, constants nor graph outputs) that
  // launched kernels wrote and read: the global-memory traffic fusion removes. A fused call
  // counts only its own inputs and outputs; a body run op by op counts its own values too.
  uint64_t intermediate_traffic_bytes = 0;
  // Outputs kernels left in a convolution layout for the next convolution or pool (rt_tensor.h).
  int64_t conv_layout_outputs = 0;
  // When set, each node's wall time adds here. An If/Loop/Scan's time includes its bodies,
  // whose nodes are listed as well.
  std::unordered_map<const Node*, NodeTiming>* node_times = nullptr;
  // When set, every kernel launch appends one event, in launch order (for `bench --trace`).
  // Untraced runs leave it null and read no clock.
  std::vector<KernelEvent>* kernel_events = nullptr;
};

// What preparing any graph of a model needs to know about the model.
struct PrepareContext {
  const Model& model;
  // Whether initializers that are also graph inputs may be fed by the caller.
  InitializerRule initializers = InitializerRule::kAllConstant;
  // Whether nodes calling fused functions run as fused kernels; false runs every body op by
  // op (function_call.h), which tests use to cross-check the fused kernels.
  bool fused_kernels = true;
  // When set, only the calls it accepts run as fused kernels; the others run their bodies op
  // by op — the fail-safe check (verify/fusion_check.h) isolates a suspect fusion this way.
  const std::function<bool(const Node& call)>* run_fused = nullptr;
  // Test hook, null in production: sees (and may alter) the outputs of every fused kernel
  // run, so tests can plant a wrong kernel and watch the fail-safe check catch it.
  const std::function<void(const Node& call, KernelContext& context)>* fused_output_hook = nullptr;
  // The functions whose bodies are being prepared, outermost first; the last one's opset
  // imports are in force. Empty for the main graph and its subgraphs.
  std::vector<const Function*> calls = {};
  // Values of the graph being prepared that nodes computed from constants alone produced at
  // preparation (GraphExecutor fills it): kernels see them as constants, like initializers, so
  // a ConstantOfShape weight is packed once rather than on every run.
  const std::unordered_map<const Value*, TensorPtr>* computed_ahead = nullptr;
  // Whether kernels may hand tensors in convolution layouts to each other (rt_tensor.h); false keeps
  // every value row-major (tests compare the two).
  bool conv_layouts = true;

  // The constant `value` holds when kernels are prepared: an initializer, a Constant node's
  // value, or a value computed ahead; null otherwise.
  TensorPtr ConstantOf(const Value& value) const;
  // The opset version in force for `domain`: the function's import inside a function body
  // (the model's when the function imports none for it), else the model's; 0 when neither.
  int64_t OpsetFor(std::string_view domain) const;
};

// A kernel that runs subgraphs (If, Loop, Scan). It launches nothing itself; the kernels of
// its bodies count into `stats` each time they run.
class SubgraphKernel : public Kernel {
 public:
  // Outer-scope values the node's subgraphs read, appended to the context's inputs after the
  // node's own inputs, in this order.
  virtual const std::vector<const Value*>& implicit_inputs() const = 0;
  virtual Status Run(KernelContext& context, RunStats& stats) = 0;

  Status Compute(KernelContext& context) final;
  bool LaunchesKernel() const final { return false; }
};

class GraphExecutor {
 public:
  static Result<std::unique_ptr<GraphExecutor>> Prepare(const Graph& graph, const PrepareContext& context);
  ~GraphExecutor();
  GraphExecutor(const GraphExecutor&) = delete;
  GraphExecutor& operator=(const GraphExecutor&) = delete;

  const Graph& graph() const { return graph_; }
  // Values of enclosing graphs this graph reads; empty for a main graph.
  const std::vector<const Value*>& captured() const { return captured_; }

  // Runs the graph once. `inputs` has one tensor per graph input (an undefined tensor keeps the
  // input's initializer), `captured` one per captured(). Outputs come in graph-output order.
  // Intermediates come from `allocator`; launches and nodes run add to `stats`.
  Result<std::vector<RtTensor>> Execute(std::vector<RtTensor> inputs, const std::vector<const RtTensor*>& captured,
                                        Allocator& allocator, RunStats& stats);

 private:
  struct Step;
  explicit GraphExecutor(const Graph& graph);
  int SlotFor(const Value* value);
  // `computed` marks, per slot, the values available to the next step.
  struct PrepareState;
  Status AddStep(const Node& node, PrepareState& state);
  bool ComputeAhead(Step& step, KernelContext& context);
  void RecordComputedAhead(const Step& step, PrepareState& state);
  void PlanReleases();
  void PlanConvLayoutOutputs();
  void MarkIntermediates();
  uint64_t IntermediateTraffic(const Step& step, const std::vector<RtTensor>& values) const;
  Status RunStep(Step& step, std::vector<RtTensor>& values, KernelContext& context, RunStats& stats);

  const Graph& graph_;
  std::vector<RtTensor> constants_;  // per slot; defined for initializers (incl. input defaults)
  std::vector<int> input_slots_;
  std::vector<int> output_slots_;
  std::vector<bool> intermediate_;  // per slot: computed here and no graph output
  std::vector<const Value*> captured_;
  std::vector<int> captured_slots_;
  std::vector<Step> steps_;
  std::unordered_map<const Value*, int> slot_of_;
};

}  // namespace fusionopt::cpu
