#include "cpu_runtime/engine/graph_executor.h"

#include <algorithm>
#include <chrono>

#include "cpu_runtime/fused/function_call.h"
#include "cpu_runtime/control_flow/kernels.h"
#include "ir/constant_value.h"
#include "ir/liveness.h"
#include "ir/op_class.h"

namespace fusionopt::cpu {
namespace {

// Constant nodes are resolved when the graph is prepared; running one hands out the wrapped
// tensor and launches nothing.
class ConstantKernel : public Kernel {
 public:
  explicit ConstantKernel(RtTensor value) : value_(std::move(value)) {}
  Status Compute(KernelContext& context) override {
    context.outputs[0] = value_;
    return Status::Ok();
  }
  bool LaunchesKernel() const override { return false; }

 private:
  RtTensor value_;
};

Result<std::unique_ptr<Kernel>> CreateKernel(const Node& node, const PrepareContext& context) {
  if (TensorPtr value = ConstantNodeValue(node)) {
    if (value->dtype() == DataType::kString) {
      return Unsupported(DescribeNode(node) + ": string constants are not supported by the CPU runtime");
    }
    return std::unique_ptr<Kernel>(new ConstantKernel(RtTensor::WrapConstant(value)));
  }
  int64_t opset = context.OpsetFor(node.domain());
  if (const Function* function = context.model.FindFunction(node.domain(), node.op_type())) {
    FUSIONOPT_ASSIGN_OR_RETURN(std::unique_ptr<SubgraphKernel> kernel,
                               CreateFunctionCallKernel(node, *function, context));
    return std::unique_ptr<Kernel>(std::move(kernel));
  }
  if (!node.Subgraphs().empty()) {
    FUSIONOPT_ASSIGN_OR_RETURN(std::unique_ptr<SubgraphKernel> kernel, CreateControlFlowKernel(node, opset, context));
    return std::unique_ptr<Kernel>(std::move(kernel));
  }
  const KernelFactory* factory = KernelRegistry::BuiltIn().Find(node.domain(), node.op_type(), opset);
  if (factory == nullptr) {
    std::string domain = node.domain().empty() ? "ai.onnx" : node.domain();
    if (node.domain() == kFusionDomain) {
      return Unsupported(DescribeNode(node) + ": the model defines no function '" + domain + "::" + node.op_type() +
                         "' for this fused node to run");
    }
    return Unsupported(DescribeNode(node) + ": op " + node.op_type() + " of domain '" + domain +
                       "' at opset " + std::to_string(opset) + " is not supported by the CPU runtime");
  }
  KernelInfo info{node, opset, {}};
  for (const Value* input : node.inputs()) info.constant_inputs.push_back(input ? context.ConstantOf(*input) : nullptr);
  return (*factory)(info);
}

}  // namespace

TensorPtr PrepareContext::ConstantOf(const Value& value) const {
  if (TensorPtr constant = ConstantValueOf(value, initializers)) return constant;
  if (computed_ahead == nullptr) return nullptr;
  auto it = computed_ahead->find(&value);
  return it == computed_ahead->end() ? nullptr : it->second;
}

int64_t PrepareContext::OpsetFor(std::string_view domain) const {
  if (!calls.empty()) {
    if (std::optional<int64_t> version = calls.back()->OpsetFor(domain)) return *version;
  }
  return model.OpsetFor(domain).value_or(0);
}

Status SubgraphKernel::Compute(KernelContext& context) {
  RunStats uncounted;
  return Run(context, uncounted);
}

struct GraphExecutor::Step {
  const Node* node = nullptr;
  std::unique_ptr<Kernel> kernel;
  SubgraphKernel* subgraph_kernel = nullptr;  // the same kernel when it runs subgraphs
  std::vector<int> inputs;   // slot per input, -1 when omitted; then the implicit inputs
  std::vector<int> outputs;  // slot per output, -1 when omitted
  std::vector<int> release;  // slots whose last reader is this step
  bool on_host = false;      // integer shape arithmetic: runs, but launches no kernel
  bool conv_layout_output = false;  // output 0 may be left in a convolution layout
};

GraphExecutor::GraphExecutor(const Graph& graph) : graph_(graph) {}
GraphExecutor::~GraphExecutor() = default;

int GraphExecutor::SlotFor(const Value* value) {
  auto [it, inserted] = slot_of_.emplace(value, static_cast<int>(constants_.size()));
  if (!inserted) return it->second;
  constants_.emplace_back();
  if (value->graph() != &graph_) {
    captured_.push_back(value);
    captured_slots_.push_back(it->second);
  }
  return it->second;
}

// What preparing one graph tracks while it adds steps in node order.
struct GraphExecutor::PrepareState {
  PrepareState(const PrepareContext& caller, LaunchFreeNodes free) : context(caller), launch_free(std::move(free)) {}

  PrepareContext context;       // the caller's, with computed_ahead pointing below
  LaunchFreeNodes launch_free;  // load-time nodes run now; host nodes launch nothing
  std::vector<bool> computed;   // per slot: available to the next step
  std::unordered_map<const Value*, TensorPtr> computed_ahead;
  Allocator allocator;
  KernelContext kernel_context;

  void MarkComputed(int slot) {
    if (static_cast<size_t>(slot) >= computed.size()) computed.resize(slot + 1, false);
    computed[slot] = true;
  }
};

Result<std::unique_ptr<GraphExecutor>> GraphExecutor::Prepare(const Graph& graph, const PrepareContext& context) {
  std::unique_ptr<GraphExecutor> executor(new GraphExecutor(graph));
  PrepareState state(context, FindLaunchFreeNodes(graph, context.initializers));
  state.context.computed_ahead = &state.computed_ahead;
  state.kernel_context.allocator = &state.allocator;
  for (const Value* value : graph.initializers()) {
    int slot = executor->SlotFor(value);
    state.MarkComputed(slot);
    // Only a string op could read a string initializer, and those fail when prepared.
    if (value->initializer()->dtype() != DataType::kString) {
      executor->constants_[slot] = RtTensor::WrapConstant(value->initializer());
    }
  }
  for (const Value* input : graph.inputs()) {
    executor->input_slots_.push_back(executor->SlotFor(input));
    state.MarkComputed(executor->input_slots_.back());
  }
  for (const auto& node : graph.nodes()) FUSIONOPT_RETURN_IF_ERROR(executor->AddStep(*node, state));
  for (const Value* output : graph.outputs()) executor->output_slots_.push_back(executor->SlotFor(output));
  executor->PlanReleases();
  if (context.conv_layouts) executor->PlanConvLayoutOutputs();
  executor->MarkIntermediates();
  return executor;
}

// Nodes computed from constants alone run once, as they are added: their results become
// constants that the kernels of later nodes see (a ConstantOfShape weight, a transposed
// initializer), and their steps go, so no inference repeats them. One that fails here is left
// to run (and report) at run time — it may sit in a branch that never runs. Host-side shape
// arithmetic stays a step but counts no launch.
Status GraphExecutor::AddStep(const Node& node, PrepareState& state) {
  Step step;
  step.node = &node;
  FUSIONOPT_ASSIGN_OR_RETURN(step.kernel, CreateKernel(node, state.context));
  step.subgraph_kernel = dynamic_cast<SubgraphKernel*>(step.kernel.get());
  step.on_host = state.launch_free.host.count(&node) != 0;
  std::vector<const Value*> reads(node.inputs().begin(), node.inputs().end());
  if (step.subgraph_kernel != nullptr) {
    const auto& implicit = step.subgraph_kernel->implicit_inputs();
    reads.insert(reads.end(), implicit.begin(), implicit.end());
  }
  for (const Value* input : reads) {
    int slot = input ? SlotFor(input) : -1;
    step.inputs.push_back(slot);
    if (slot < 0 || input->graph() != &graph_) continue;  // outer values are bound before any step
    if (static_cast<size_t>(slot) >= state.computed.size() || !state.computed[slot]) {
      return InvalidModel(DescribeNode(node) + " reads '" + input->name() +
                          "' before any node computes it (the nodes are not in topological order)");
    }
  }
  for (const Value* output : node.outputs()) {
    step.outputs.push_back(output ? SlotFor(output) : -1);
    if (output != nullptr) state.MarkComputed(step.outputs.back());
  }
  if (state.launch_free.load_time.count(&node) && step.subgraph_kernel == nullptr &&
      ComputeAhead(step, state.kernel_context)) {
    RecordComputedAhead(step, state);
    return Status::Ok();
  }
  steps_.push_back(std::move(step));
  return Status::Ok();
}

void GraphExecutor::RecordComputedAhead(const Step& step, PrepareState& state) {
  for (size_t i = 0; i < step.outputs.size(); ++i) {
    const RtTensor& value = step.outputs[i] >= 0 ? constants_[step.outputs[i]] : RtTensor();
    if (!value.defined()) continue;
    state.computed_ahead[step.node->output(i)] = std::make_shared<const Tensor>(
        Tensor::Borrowed(value.dtype(), value.dims(), value.raw(), value.nbytes(), value.storage()));
  }
}

bool GraphExecutor::ComputeAhead(Step& step, KernelContext& context) {
  context.inputs.clear();
  for (int slot : step.inputs) {
    if (slot >= 0 && !constants_[slot].defined()) return false;
    context.inputs.push_back(slot >= 0 ? &constants_[slot] : nullptr);
  }
  context.outputs.assign(step.outputs.size(), RtTensor());
  if (!step.kernel->Compute(context).ok()) return false;
  for (size_t i = 0; i < step.outputs.size(); ++i) {
    if (step.outputs[i] >= 0) constants_[step.outputs[i]] = std::move(context.outputs[i]);
  }
  return true;
}

void GraphExecutor::PlanReleases() {
  // Each step releases what dies at its node (ir/liveness.h). Nodes computed ahead have no step:
  // what they read and wrote is constant (never released), or an output they left undefined.
  const Liveness liveness(graph_);
  std::unordered_map<const Node*, Step*> step_of;
  for (Step& step : steps_) step_of.emplace(step.node, &step);
  size_t position = 0;
  for (const auto& node : graph_.nodes()) {
    auto step = step_of.find(node.get());
    for (const Value* dying : liveness.DyingAt(position++)) {
      auto slot = slot_of_.find(dying);
      if (step == step_of.end() || slot == slot_of_.end() || constants_[slot->second].defined()) continue;
      step->second->release.push_back(slot->second);
    }
  }
}

// A kernel that can leave output 0 in a convolution layout (rt_tensor.h) may do so where
// every step reading it reads such layouts and no graph output is it: a run of convolutions
// (and pools) then passes its activations on without a reorder, and the reorders happen where
// the run meets other ops. A subgraph's captured values are read by its node's kernel, which reads row-major.
void GraphExecutor::PlanConvLayoutOutputs() {
  std::vector<int> readers(constants_.size(), 0), layout_readers(constants_.size(), 0);
  for (const Step& step : steps_) {
    const bool reads_layouts = step.kernel->ReadsConvLayouts();
    for (int slot : step.inputs) {
      if (slot < 0) continue;
      ++readers[slot];
      if (reads_layouts) ++layout_readers[slot];
    }
  }
  for (int slot : output_slots_) readers[slot] = -1;
  for (Step& step : steps_) {
    if (!step.kernel->ReadsConvLayouts() || step.outputs.empty() || step.outputs[0] < 0) continue;
    const int slot = step.outputs[0];
    step.conv_layout_output = readers[slot] > 0 && readers[slot] == layout_readers[slot];
  }
}

void GraphExecutor::MarkIntermediates() {
  intermediate_.assign(constants_.size(), false);
  for (const Step& step : steps_) {
    for (int slot : step.outputs) {
      if (slot >= 0) intermediate_[slot] = true;
    }
  }
  for (int slot : output_slots_) intermediate_[slot] = false;
}

uint64_t GraphExecutor::IntermediateTraffic(const Step& step, const std::vector<RtTensor>& values) const {
  uint64_t bytes = 0;
  for (const std::vector<int>* slots : {&step.inputs, &step.outputs}) {
    for (int slot : *slots) {
      if (slot >= 0 && intermediate_[slot] && values[slot].defined()) bytes += values[slot].nbytes();
    }
  }
  return bytes;
}

Result<std::vector<RtTensor>> GraphExecutor::Execute(std::vector<RtTensor> inputs,
                                                     const std::vector<const RtTensor*>& captured,
                                                     Allocator& allocator, RunStats& stats) {
  FUSIONOPT_CHECK(inputs.size() == input_slots_.size(), "Execute needs one tensor per graph input");
  FUSIONOPT_CHECK(captured.size() == captured_slots_.size(), "Execute needs one tensor per captured value");
  std::vector<RtTensor> values = constants_;
  for (size_t i = 0; i < inputs.size(); ++i) {
    RtTensor& value = values[input_slots_[i]];
    if (inputs[i].defined()) value = std::move(inputs[i]);
    if (!value.defined()) return InvalidModel("input '" + graph_.inputs()[i]->name() + "' was not given");
  }
  for (size_t i = 0; i < captured.size(); ++i) {
    if (captured[i] == nullptr || !captured[i]->defined()) {
      return Unsupported("outer-scope value '" + captured_[i]->name() + "' is not computed by the CPU runtime");
    }
    values[captured_slots_[i]] = *captured[i];
  }
  KernelContext context;
  context.allocator = &allocator;
  for (Step& step : steps_) FUSIONOPT_RETURN_IF_ERROR(RunStep(step, values, context, stats));

  std::vector<RtTensor> outputs;
  for (size_t i = 0; i < output_slots_.size(); ++i) {
    const RtTensor& value = values[output_slots_[i]];
    if (!value.defined()) return InvalidModel("graph output '" + graph_.outputs()[i]->name() + "' was not computed");
    outputs.push_back(value);  // a copy: a value may be listed as two outputs
  }
  return outputs;
}

Status GraphExecutor::RunStep(Step& step, std::vector<RtTensor>& values, KernelContext& context, RunStats& stats) {
  context.inputs.clear();
  for (int slot : step.inputs) context.inputs.push_back(slot >= 0 ? &values[slot] : nullptr);
  context.outputs.assign(step.outputs.size(), RtTensor());
  context.launched = true;
  context.conv_layout_output = step.conv_layout_output;
  const bool timed = stats.node_times != nullptr || stats.kernel_events != nullptr;
  const auto start = timed ? std::chrono::steady_clock::now() : std::chrono::steady_clock::time_point();
  const int64_t launches_before = stats.kernels_launched;
  const size_t events_before = stats.kernel_events != nullptr ? stats.kernel_events->size() : 0;
  Status status = step.subgraph_kernel != nullptr ? step.subgraph_kernel->Run(context, stats)
                                                  : step.kernel->Compute(context);
  if (!status.ok()) return status.WithContext(DescribeNode(*step.node));
  const bool launched = step.kernel->LaunchesKernel() && !step.on_host && context.launched;
  if (timed) {
    const auto end = std::chrono::steady_clock::now();
    if (stats.node_times != nullptr) {
      NodeTiming& timing = (*stats.node_times)[step.node];
      timing.total_ms += std::chrono::duration<double, std::milli>(end - start).count();
      ++timing.calls;
    }
    if (stats.kernel_events != nullptr) {
      // A fused call counts its own launches (one, or a few for e.g. attention) without a
      // nested step to record them: those appear as events of this node sharing its time.
      const double duration_us = std::chrono::duration<double, std::micro>(end - start).count();
      const int64_t unrecorded = launched ? 1
                                          : (stats.kernels_launched - launches_before) -
                                                static_cast<int64_t>(stats.kernel_events->size() - events_before);
      for (int64_t k = 0; k < unrecorded; ++k) {
        const double share_us = duration_us / static_cast<double>(unrecorded);
        const auto offset = std::chrono::duration_cast<std::chrono::steady_clock::duration>(
            std::chrono::duration<double, std::micro>(share_us * static_cast<double>(k)));
        stats.kernel_events->push_back({step.node, start + offset, share_us});
      }
    }
  }
  for (size_t i = 0; i < step.outputs.size(); ++i) {
    if (step.outputs[i] < 0) continue;
    FUSIONOPT_CHECK(context.outputs[i].defined(), DescribeNode(*step.node) + " left an output unset");
    FUSIONOPT_CHECK(context.outputs[i].row_major() || (i == 0 && step.conv_layout_output),
                    DescribeNode(*step.node) + " left an output in a convolution layout for readers of row-major ones");
    if (!context.outputs[i].row_major()) ++stats.conv_layout_outputs;
    values[step.outputs[i]] = std::move(context.outputs[i]);
  }
  // A subgraph kernel's bodies count their own traffic; any other node that launched moved
  // its intermediate operands through memory.
  if (step.subgraph_kernel == nullptr && (launched || stats.kernels_launched > launches_before)) {
    stats.intermediate_traffic_bytes += IntermediateTraffic(step, values);
  }
  for (int slot : step.release) values[slot] = RtTensor();
  ++stats.nodes_executed;
  if (launched) ++stats.kernels_launched;
  return Status::Ok();
}

}  // namespace fusionopt::cpu
