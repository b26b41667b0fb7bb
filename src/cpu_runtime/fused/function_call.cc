// The kernel of a node that calls a model-local function: its body op by op, or one fused
// kernel (see function_call.h).
#include <algorithm>

#include "cpu_runtime/fused/function_call.h"
#include "cpu_runtime/fused/body.h"
#include "cpu_runtime/onednn/common.h"
#include "ir/constant_value.h"
#include "ir/function_body.h"

namespace fusionopt::cpu {
namespace {

std::string FunctionLabel(const Function& function) {
  return (function.domain.empty() ? "" : function.domain + "::") + function.name;
}

// Preparing a body prepares the calls inside it, so a function reached again while its own
// body is being prepared would recurse without end.
Status CheckNotRecursive(const Node& node, const Function& function, const PrepareContext& context) {
  auto first = std::find(context.calls.begin(), context.calls.end(), &function);
  if (first == context.calls.end()) return Status::Ok();
  std::string chain;
  for (auto it = first; it != context.calls.end(); ++it) chain += FunctionLabel(**it) + " -> ";
  return InvalidModel(DescribeNode(node) + ": function '" + FunctionLabel(function) + "' calls itself: " + chain +
                      FunctionLabel(function));
}

Status CheckSignature(const Node& node, const Function& function, const Model& model) {
  size_t overloads = std::count_if(model.functions.begin(), model.functions.end(), [&](const auto& each) {
    return each->domain == function.domain && each->name == function.name;
  });
  if (overloads > 1) {
    return Unsupported(DescribeNode(node) + ": function '" + FunctionLabel(function) +
                       "' is overloaded; the CPU runtime cannot tell which overload the node calls");
  }
  const Graph& body = *function.body;
  if (node.inputs().size() > body.inputs().size() || node.outputs().size() > body.outputs().size()) {
    return InvalidModel(DescribeNode(node) + " passes " + std::to_string(node.inputs().size()) + " inputs and takes " +
                        std::to_string(node.outputs().size()) + " outputs; function '" + FunctionLabel(function) +
                        "' has " + std::to_string(body.inputs().size()) + " and " +
                        std::to_string(body.outputs().size()));
  }
  return Status::Ok();
}

class FunctionCallKernel final : public SubgraphKernel {
 public:
  explicit FunctionCallKernel(const Node& node) : node_(node) {}

  Status Init(const Function& function, const PrepareContext& outer) {
    FUSIONOPT_RETURN_IF_ERROR(CheckNotRecursive(node_, function, outer));
    FUSIONOPT_RETURN_IF_ERROR(CheckSignature(node_, function, outer.model));
    body_ = InstantiateFunctionBody(function, node_, /*drop_omitted_inputs=*/true);
    for (size_t i = 0; i < node_.inputs().size(); ++i) {
      if (node_.input(i) != nullptr) arguments_.push_back(i);
    }
    // The call's argument types are this call's: they type the body's inputs for the kernels
    // that check declared types when prepared.
    std::vector<TensorPtr> constants;
    for (size_t k = 0; k < arguments_.size(); ++k) {
      const Value& argument = *node_.input(arguments_[k]);
      const ValueType& type = argument.type();
      if (!type.is_tensor() || type.dtype != DataType::kUndefined || type.shape) body_->inputs()[k]->type() = type;
      constants.push_back(outer.ConstantOf(argument));
    }
    PrepareContext inner = outer;
    inner.calls.push_back(&function);
    inner.computed_ahead = nullptr;  // the outer graph's values; the body has its own
    auto executor = GraphExecutor::Prepare(*body_, inner);
    if (!executor.ok()) {
      return executor.status().WithContext(DescribeNode(node_) + ", in function '" + FunctionLabel(function) + "'");
    }
    executor_ = std::move(executor).value();
    output_hook_ = outer.fused_output_hook;
    if (outer.fused_kernels && (outer.run_fused == nullptr || (*outer.run_fused)(node_))) {
      FusedBodyInfo info{node_, *body_, inner, std::move(constants)};
      fused_ = CreateFusedQuantized(info);
      if (!fused_) fused_ = CreateFusedDynamicQuantized(info);
      if (!fused_) fused_ = CreateFusedRows(info);
      if (!fused_) fused_ = CreateFusedElementwise(info);
      if (!fused_) fused_ = CreateFusedContraction(info);
      if (!fused_) fused_ = CreateFusedAttention(info);
    }
    return Status::Ok();
  }

  bool ReadsConvLayouts() const override { return fused_ != nullptr && fused_->ReadsConvLayouts(); }

  const std::vector<const Value*>& implicit_inputs() const override {
    static const std::vector<const Value*> kNone;  // a body sees nothing but its arguments
    return kNone;
  }

  Status Run(KernelContext& context, RunStats& stats) override {
    std::vector<const RtTensor*> call_inputs = context.inputs;
    context.inputs.clear();
    for (size_t index : arguments_) {
      if (index >= call_inputs.size() || call_inputs[index] == nullptr || !call_inputs[index]->defined()) {
        return InvalidModel("argument " + std::to_string(index) + " is not computed");
      }
      context.inputs.push_back(call_inputs[index]);
    }
    if (fused_) {
      FUSIONOPT_ASSIGN_OR_RETURN(int launches, fused_->Compute(context));
      if (launches > 0) {
        if (output_hook_ != nullptr) (*output_hook_)(node_, context);
        stats.kernels_launched += launches;
        return Status::Ok();
      }
    }
    // The body's kernels read row-major tensors.
    std::vector<RtTensor> inputs;
    for (const RtTensor* input : context.inputs) inputs.push_back(onednn::RowMajor(*input, *context.allocator));
    FUSIONOPT_ASSIGN_OR_RETURN(std::vector<RtTensor> outputs,
                               executor_->Execute(std::move(inputs), {}, *context.allocator, stats));
    for (size_t i = 0; i < context.outputs.size(); ++i) context.outputs[i] = std::move(outputs[i]);
    return Status::Ok();
  }

 private:
  const Node& node_;
  std::unique_ptr<Graph> body_;     // the function's body instantiated for this call
  std::vector<size_t> arguments_;   // the call input each body input reads
  std::unique_ptr<GraphExecutor> executor_;
  std::unique_ptr<FusedBodyKernel> fused_;
  const std::function<void(const Node&, KernelContext&)>* output_hook_ = nullptr;  // tests only
};

}  // namespace

Result<std::unique_ptr<SubgraphKernel>> CreateFunctionCallKernel(const Node& node, const Function& function,
                                                                 const PrepareContext& context) {
  auto kernel = std::make_unique<FunctionCallKernel>(node);
  FUSIONOPT_RETURN_IF_ERROR(kernel->Init(function, context));
  return std::unique_ptr<SubgraphKernel>(std::move(kernel));
}

}  // namespace fusionopt::cpu
