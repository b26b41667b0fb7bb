// If and Loop, and the factory for every node that holds subgraphs.
#include "cpu_runtime/control_flow/kernels.h"

#include <iterator>
#include <optional>

#include "cpu_runtime/control_flow/common.h"

namespace fusionopt::cpu {
namespace {

using control_flow::ControlFlowKernel;

// If(cond): the outputs of then_branch when cond is true, else of else_branch. The branches
// take no inputs, read outer values freely, and may give outputs of different shapes.
class IfKernel final : public ControlFlowKernel {
 public:
  explicit IfKernel(const Node& node) : ControlFlowKernel(node) {}

  Status Init(const PrepareContext& context) {
    FUSIONOPT_RETURN_IF_ERROR(RequireTensorValues());
    if (node_.input(0) == nullptr) return Error("needs its condition input");
    FUSIONOPT_RETURN_IF_ERROR(RequireDeclaredDtype(node_.input(0), DataType::kBool, "the condition"));
    FUSIONOPT_ASSIGN_OR_RETURN(then_, PrepareBody("then_branch", context));
    FUSIONOPT_ASSIGN_OR_RETURN(else_, PrepareBody("else_branch", context));
    for (const Body* branch : {&then_, &else_}) {
      const Graph& graph = branch->graph();
      std::string name = branch == &then_ ? "then_branch" : "else_branch";
      if (!graph.inputs().empty()) return Error(name + " declares inputs; If branches take none");
      if (graph.outputs().size() != node_.outputs().size()) {
        return Error(name + " has " + std::to_string(graph.outputs().size()) + " outputs, the node " +
                     std::to_string(node_.outputs().size()));
      }
    }
    return Status::Ok();
  }

  Status Run(KernelContext& context, RunStats& stats) override {
    if (!context.has_input(0)) return InvalidModel("the condition input is not computed");
    FUSIONOPT_ASSIGN_OR_RETURN(bool taken, control_flow::ReadCondition(*context.input(0), "the condition"));
    FUSIONOPT_ASSIGN_OR_RETURN(std::vector<RtTensor> outputs, RunBody(taken ? then_ : else_, {}, context, stats));
    for (size_t i = 0; i < outputs.size(); ++i) context.outputs[i] = std::move(outputs[i]);
    return Status::Ok();
  }

 private:
  Body then_;
  Body else_;
};

// Loop(M, cond, v_initial...): runs body(iteration, cond, carried...) -> (cond, carried...,
// scan...) while iteration < M (when M is given) and cond holds (the input cond, when given,
// decides the first iteration; the body's cond output every later one). Outputs: the final
// carried values, then each scan output stacked along a new axis 0.
class LoopKernel final : public ControlFlowKernel {
 public:
  explicit LoopKernel(const Node& node) : ControlFlowKernel(node) {}

  Status Init(const PrepareContext& context) {
    FUSIONOPT_RETURN_IF_ERROR(RequireTensorValues());
    if (node_.inputs().size() < 2) return Error("needs the inputs M and cond (either may be empty)");
    num_carried_ = node_.inputs().size() - 2;
    FUSIONOPT_RETURN_IF_ERROR(RequireDeclaredDtype(node_.input(0), DataType::kInt64, "the trip count M"));
    FUSIONOPT_RETURN_IF_ERROR(RequireDeclaredDtype(node_.input(1), DataType::kBool, "the condition"));
    FUSIONOPT_ASSIGN_OR_RETURN(body_, PrepareBody("body", context));
    const Graph& graph = body_.graph();
    if (graph.inputs().size() != num_carried_ + 2) {
      return Error("the body takes " + std::to_string(graph.inputs().size()) + " inputs; with " +
                   std::to_string(num_carried_) + " loop-carried values it must take " +
                   std::to_string(num_carried_ + 2) + " (iteration number, condition, loop-carried values)");
    }
    if (graph.outputs().size() < num_carried_ + 1) {
      return Error("the body gives " + std::to_string(graph.outputs().size()) +
                   " outputs; it must give the condition and " + std::to_string(num_carried_) +
                   " loop-carried values before any scan outputs");
    }
    num_scans_ = graph.outputs().size() - 1 - num_carried_;
    if (node_.outputs().size() != num_carried_ + num_scans_) {
      return Error("has " + std::to_string(node_.outputs().size()) + " outputs; its body gives " +
                   std::to_string(num_carried_) + " loop-carried values and " + std::to_string(num_scans_) +
                   " scan outputs");
    }
    return RequireDeclaredDtype(graph.outputs()[0], DataType::kBool, "the body's condition output");
  }

  Status Run(KernelContext& context, RunStats& stats) override {
    std::optional<int64_t> trip_limit;
    if (context.has_input(0)) {
      FUSIONOPT_ASSIGN_OR_RETURN(trip_limit, control_flow::ReadTripCount(*context.input(0)));
    }
    bool keep_going = true;
    if (context.has_input(1)) {
      FUSIONOPT_ASSIGN_OR_RETURN(keep_going, control_flow::ReadCondition(*context.input(1), "the condition input"));
    }
    std::vector<RtTensor> carried;
    for (size_t i = 0; i < num_carried_; ++i) {
      if (!context.has_input(2 + i)) return InvalidModel("loop-carried input " + std::to_string(i) + " is not given");
      carried.push_back(*context.input(2 + i));
    }
    Allocator& allocator = *context.allocator;
    std::vector<std::vector<RtTensor>> scans(num_scans_);
    for (int64_t iteration = 0; keep_going && (!trip_limit || iteration < *trip_limit); ++iteration) {
      std::vector<RtTensor> inputs;
      inputs.push_back(control_flow::Int64Scalar(allocator, iteration));
      inputs.push_back(control_flow::BoolScalar(allocator, keep_going));
      std::move(carried.begin(), carried.end(), std::back_inserter(inputs));
      FUSIONOPT_ASSIGN_OR_RETURN(std::vector<RtTensor> outputs, RunBody(body_, std::move(inputs), context, stats));
      FUSIONOPT_ASSIGN_OR_RETURN(keep_going, control_flow::ReadCondition(outputs[0], "the body's condition output"));
      auto first_scan = outputs.begin() + 1 + static_cast<std::ptrdiff_t>(num_carried_);
      carried.assign(std::make_move_iterator(outputs.begin() + 1), std::make_move_iterator(first_scan));
      for (size_t k = 0; k < num_scans_; ++k) scans[k].push_back(std::move(first_scan[k]));
    }
    for (size_t i = 0; i < num_carried_; ++i) context.outputs[i] = std::move(carried[i]);
    for (size_t k = 0; k < num_scans_; ++k) {
      const Value& body_output = *body_.graph().outputs()[1 + num_carried_ + k];
      FUSIONOPT_ASSIGN_OR_RETURN(context.outputs[num_carried_ + k],
                                 control_flow::StackIterations(scans[k], body_output, 0, false, allocator));
    }
    return Status::Ok();
  }

 private:
  Body body_;
  size_t num_carried_ = 0;
  size_t num_scans_ = 0;
};

template <typename K>
Result<std::unique_ptr<SubgraphKernel>> Create(const Node& node, const PrepareContext& context) {
  auto kernel = std::make_unique<K>(node);
  FUSIONOPT_RETURN_IF_ERROR(kernel->Init(context));
  return std::unique_ptr<SubgraphKernel>(std::move(kernel));
}

}  // namespace

Result<std::unique_ptr<SubgraphKernel>> CreateControlFlowKernel(const Node& node, int64_t opset,
                                                                const PrepareContext& context) {
  bool default_domain = IsDefaultDomain(node);
  if (default_domain && node.op_type() == "If") return Create<IfKernel>(node, context);
  if (default_domain && node.op_type() == "Loop") return Create<LoopKernel>(node, context);
  if (default_domain && node.op_type() == "Scan") return control_flow::CreateScanKernel(node, opset, context);
  std::string domain = node.domain().empty() ? "ai.onnx" : node.domain();
  return Unsupported(DescribeNode(node) + ": op " + node.op_type() + " of domain '" + domain + "' at opset " +
                     std::to_string(opset) + " holds subgraphs; the CPU runtime runs only If, Loop and Scan");
}

}  // namespace fusionopt::cpu
