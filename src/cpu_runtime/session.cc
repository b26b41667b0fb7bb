#include "cpu_runtime/session.h"

#include <omp.h>

#include <unordered_map>

#include "ir/constant_value.h"

namespace fusionopt::cpu {
namespace {

// Constant nodes are resolved when the session is prepared; running one hands out the
// wrapped tensor and launches nothing.
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

}  // namespace

struct Session::Plan {
  struct Step {
    const Node* node = nullptr;
    std::unique_ptr<Kernel> kernel;
    std::vector<int> inputs;   // slot per input, -1 when omitted
    std::vector<int> outputs;  // slot per output, -1 when omitted
    std::vector<int> release;  // slots whose last reader is this step
  };

  std::vector<const Value*> inputs;
  std::vector<const Value*> outputs;
  std::vector<int> input_slots;
  std::vector<int> output_slots;
  std::vector<RtTensor> constants;  // per slot; defined for initializers (incl. defaults)
  std::vector<Step> steps;
  Allocator allocator;

  std::unordered_map<const Value*, int> slot_of;

  int SlotFor(const Value* value) {
    auto [it, inserted] = slot_of.emplace(value, static_cast<int>(constants.size()));
    if (inserted) constants.emplace_back();
    return it->second;
  }
};

Session::Session(std::unique_ptr<Plan> plan) : plan_(std::move(plan)) {}
Session::~Session() = default;

const std::vector<const Value*>& Session::inputs() const { return plan_->inputs; }
const std::vector<const Value*>& Session::outputs() const { return plan_->outputs; }

namespace {

Result<std::unique_ptr<Kernel>> CreateKernel(const Model& model, const Node& node,
                                             bool initializers_overridable) {
  if (TensorPtr value = ConstantNodeValue(node)) {
    if (value->dtype() == DataType::kString) {
      return Unsupported(DescribeNode(node) + ": string constants are not supported by the CPU runtime");
    }
    return std::unique_ptr<Kernel>(new ConstantKernel(RtTensor::WrapConstant(value)));
  }
  int64_t opset = model.OpsetFor(node.domain()).value_or(0);
  const KernelFactory* factory = KernelRegistry::BuiltIn().Find(node.domain(), node.op_type(), opset);
  if (factory == nullptr) {
    std::string domain = node.domain().empty() ? "ai.onnx" : node.domain();
    return Unsupported(DescribeNode(node) + ": op " + node.op_type() + " of domain '" + domain +
                       "' at opset " + std::to_string(opset) + " is not supported by the CPU runtime");
  }
  KernelInfo info{node, opset, {}};
  for (const Value* input : node.inputs()) {
    info.constant_inputs.push_back(input ? ConstantValueOf(*input, initializers_overridable) : nullptr);
  }
  auto kernel = (*factory)(info);
  if (!kernel.ok()) return kernel.status();
  return std::move(kernel).value();
}

}  // namespace

Result<std::unique_ptr<Session>> Session::Create(const Model& model, const SessionOptions& options) {
  if (options.threads > 0) omp_set_num_threads(options.threads);
  auto plan = std::make_unique<Plan>();
  const Graph& graph = *model.graph;
  bool overridable = model.ir_version >= 4;
  for (const Value* value : graph.initializers()) {
    if (value->initializer()->dtype() == DataType::kString) continue;  // only a string op could read it
    plan->constants[plan->SlotFor(value)] = RtTensor::WrapConstant(value->initializer());
  }
  for (const Value* input : graph.inputs()) {
    if (input->is_initializer() && !overridable) continue;
    plan->inputs.push_back(input);
    plan->input_slots.push_back(plan->SlotFor(input));
  }
  std::unordered_map<int, size_t> last_reader;
  for (const auto& node : graph.nodes()) {
    if (!node->Subgraphs().empty()) {
      return Unsupported(DescribeNode(*node) + ": control flow (subgraphs) is not supported by the CPU runtime yet");
    }
    Plan::Step step;
    step.node = node.get();
    FUSIONOPT_ASSIGN_OR_RETURN(step.kernel, CreateKernel(model, *node, overridable));
    for (const Value* input : node->inputs()) {
      int slot = input ? plan->SlotFor(input) : -1;
      step.inputs.push_back(slot);
      if (slot >= 0) last_reader[slot] = plan->steps.size();
    }
    for (const Value* output : node->outputs()) {
      step.outputs.push_back(output ? plan->SlotFor(output) : -1);
      // Written and never read: free right away (a later reader or graph output overrides).
      if (output != nullptr) last_reader[step.outputs.back()] = plan->steps.size();
    }
    plan->steps.push_back(std::move(step));
  }
  for (const Value* output : graph.outputs()) {
    plan->outputs.push_back(output);
    plan->output_slots.push_back(plan->SlotFor(output));
    last_reader.erase(plan->output_slots.back());  // graph outputs live to the end
  }
  for (const auto& [slot, step] : last_reader) {
    if (!plan->constants[slot].defined()) plan->steps[step].release.push_back(slot);
  }
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

Result<std::vector<NamedTensor>> Session::Run(const std::vector<NamedTensor>& feeds, RunStats* stats) {
  Plan& plan = *plan_;
  std::vector<RtTensor> values = plan.constants;
  std::vector<bool> fed(plan.inputs.size(), false);
  for (const NamedTensor& feed : feeds) {
    size_t index = 0;
    while (index < plan.inputs.size() && plan.inputs[index]->name() != feed.name) ++index;
    if (index == plan.inputs.size()) return InvalidModel("the model has no input named '" + feed.name + "'");
    FUSIONOPT_RETURN_IF_ERROR(CheckFeed(*plan.inputs[index], feed.tensor));
    values[plan.input_slots[index]] = feed.tensor;
    fed[index] = true;
  }
  for (size_t i = 0; i < plan.inputs.size(); ++i) {
    if (!fed[i] && !plan.inputs[i]->is_initializer()) {
      return InvalidModel("input '" + plan.inputs[i]->name() + "' was not given");
    }
  }

  plan.allocator.ResetPeak();
  RunStats run_stats;
  KernelContext context;
  context.allocator = &plan.allocator;
  for (Plan::Step& step : plan.steps) {
    context.inputs.clear();
    for (int slot : step.inputs) context.inputs.push_back(slot >= 0 ? &values[slot] : nullptr);
    context.outputs.assign(step.outputs.size(), RtTensor());
    Status status = step.kernel->Compute(context);
    if (!status.ok()) return status.WithContext(DescribeNode(*step.node));
    for (size_t i = 0; i < step.outputs.size(); ++i) {
      if (step.outputs[i] < 0) continue;
      FUSIONOPT_CHECK(context.outputs[i].defined(), DescribeNode(*step.node) + " left an output unset");
      values[step.outputs[i]] = std::move(context.outputs[i]);
    }
    for (int slot : step.release) values[slot] = RtTensor();
    ++run_stats.nodes_executed;
    if (step.kernel->LaunchesKernel()) ++run_stats.kernels_launched;
  }
  run_stats.peak_intermediate_bytes = plan.allocator.peak_bytes();
  if (stats != nullptr) *stats = run_stats;

  std::vector<NamedTensor> outputs;
  for (size_t i = 0; i < plan.outputs.size(); ++i) {
    const RtTensor& value = values[plan.output_slots[i]];
    if (!value.defined()) return InvalidModel("graph output '" + plan.outputs[i]->name() + "' was not computed");
    outputs.push_back({plan.outputs[i]->name(), value});
  }
  return outputs;
}

}  // namespace fusionopt::cpu
