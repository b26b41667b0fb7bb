#include "cpu_runtime/engine/session.h"

#include <omp.h>

#include <cstdlib>
#include <string_view>

namespace fusionopt::cpu {

struct Session::Plan {
  std::unique_ptr<GraphExecutor> executor;
  std::vector<const Value*> inputs;     // what the caller may feed
  std::vector<size_t> input_positions;  // each one's index among the graph inputs
  std::vector<const Value*> outputs;
  Allocator allocator;
  // The options' callbacks, owned here: kernels keep pointers to them.
  std::function<bool(const Node&)> run_fused;
  std::function<void(const Node&, KernelContext&)> fused_output_hook;
};

Session::Session(std::unique_ptr<Plan> plan) : plan_(std::move(plan)) {}
Session::~Session() = default;

const std::vector<const Value*>& Session::inputs() const { return plan_->inputs; }
const std::vector<const Value*>& Session::outputs() const { return plan_->outputs; }

namespace {

// FUSIONOPT_CPU_LAYOUTS=row-major turns the convolution-layout hand-off off for a whole process:
// benchmarks measure what it buys with the same binary.
bool RowMajorOnlyRequested() {
  const char* layouts = std::getenv("FUSIONOPT_CPU_LAYOUTS");
  return layouts != nullptr && std::string_view(layouts) == "row-major";
}

}  // namespace

Result<std::unique_ptr<Session>> Session::Create(const Model& model, const SessionOptions& options) {
  if (options.threads > 0) omp_set_num_threads(options.threads);
  auto plan = std::make_unique<Plan>();
  plan->run_fused = options.run_fused;
  plan->fused_output_hook = options.fused_output_hook;
  const Graph& graph = *model.graph;
  PrepareContext context{model, InitializerRuleOf(model)};
  context.fused_kernels = options.fused_kernels;
  context.conv_layouts = options.conv_layouts && !RowMajorOnlyRequested();
  if (options.run_fused) context.run_fused = &plan->run_fused;
  if (options.fused_output_hook) context.fused_output_hook = &plan->fused_output_hook;
  FUSIONOPT_ASSIGN_OR_RETURN(plan->executor, GraphExecutor::Prepare(graph, context));
  for (size_t i = 0; i < graph.inputs().size(); ++i) {
    const Value* input = graph.inputs()[i];
    if (input->is_initializer() && context.initializers == InitializerRule::kAllConstant) continue;
    plan->inputs.push_back(input);
    plan->input_positions.push_back(i);
  }
  plan->outputs.assign(graph.outputs().begin(), graph.outputs().end());
  return std::unique_ptr<Session>(new Session(std::move(plan)));
}

namespace {

Status CheckFeed(const Value& declared, const RtTensor& tensor) {
  std::string name = "input '" + declared.name() + "'";
  const ValueType& type = declared.type();
  if (type.dtype != DataType::kUndefined && type.dtype != tensor.dtype()) {
    return InvalidModel(name + " has dtype " + std::string(NameOf(tensor.dtype())) + ", the model expects " +
                        std::string(NameOf(type.dtype)));
  }
  if (!type.shape) return Status::Ok();
  if (type.shape->size() != tensor.rank()) {
    return InvalidModel(name + " has shape " + DimsToString(tensor.dims()) + ", the model expects " +
                        ShapeToString(*type.shape));
  }
  for (size_t axis = 0; axis < tensor.rank(); ++axis) {
    const Dim& dim = (*type.shape)[axis];
    if (dim.is_known() && dim.value != tensor.dim(axis)) {
      return InvalidModel(name + " has shape " + DimsToString(tensor.dims()) + ", the model expects " +
                          ShapeToString(*type.shape));
    }
  }
  return Status::Ok();
}

}  // namespace

Result<std::vector<size_t>> MatchFeeds(const std::vector<const Value*>& inputs, const std::vector<NamedTensor>& feeds) {
  std::vector<size_t> positions;
  std::vector<bool> fed(inputs.size(), false);
  for (const NamedTensor& feed : feeds) {
    size_t index = 0;
    while (index < inputs.size() && inputs[index]->name() != feed.name) ++index;
    if (index == inputs.size()) return InvalidModel("the model has no input named '" + feed.name + "'");
    if (fed[index]) return InvalidModel("input '" + feed.name + "' was given twice");
    FUSIONOPT_RETURN_IF_ERROR(CheckFeed(*inputs[index], feed.tensor));
    fed[index] = true;
    positions.push_back(index);
  }
  for (size_t i = 0; i < inputs.size(); ++i) {
    if (!fed[i] && !inputs[i]->is_initializer()) return InvalidModel("input '" + inputs[i]->name() + "' was not given");
  }
  return positions;
}

Result<std::vector<NamedTensor>> Session::Run(const std::vector<NamedTensor>& feeds, RunStats* stats) {
  Plan& plan = *plan_;
  std::vector<RtTensor> inputs(plan.executor->graph().inputs().size());
  FUSIONOPT_ASSIGN_OR_RETURN(std::vector<size_t> positions, MatchFeeds(plan.inputs, feeds));
  for (size_t i = 0; i < feeds.size(); ++i) inputs[plan.input_positions[positions[i]]] = feeds[i].tensor;

  plan.allocator.ResetPeak();
  RunStats run_stats;
  if (stats != nullptr) {
    run_stats.node_times = stats->node_times;
    run_stats.kernel_events = stats->kernel_events;
  }
  FUSIONOPT_ASSIGN_OR_RETURN(std::vector<RtTensor> values,
                             plan.executor->Execute(std::move(inputs), {}, plan.allocator, run_stats));
  run_stats.peak_intermediate_bytes = plan.allocator.peak_bytes();
  if (stats != nullptr) *stats = run_stats;

  std::vector<NamedTensor> outputs;
  for (size_t i = 0; i < plan.outputs.size(); ++i) outputs.push_back({plan.outputs[i]->name(), std::move(values[i])});
  return outputs;
}

}  // namespace fusionopt::cpu
