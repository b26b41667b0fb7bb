// Shared machinery of the control-flow kernels (control_flow/*.cc): the prepared body
// with its outer-scope bindings, and the tensor plumbing between iterations — conditions and
// trip counts read from tensors, scan inputs sliced per iteration, scan outputs stacked.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "cpu_runtime/engine/graph_executor.h"

namespace fusionopt::cpu::control_flow {

class ControlFlowKernel : public SubgraphKernel {
 public:
  const std::vector<const Value*>& implicit_inputs() const override { return implicit_inputs_; }

 protected:
  // A prepared body, and where each value it captures sits among the node's implicit inputs.
  struct Body {
    std::unique_ptr<GraphExecutor> executor;
    std::vector<size_t> implicit_index;  // per captured value
    const Graph& graph() const { return executor->graph(); }
  };

  explicit ControlFlowKernel(const Node& node) : node_(node) {}

  // "node 'x' (Loop): <message>" as an InvalidModel status: errors found while preparing.
  // (Errors at run time carry no prefix: the executor adds the node.)
  Status Error(const std::string& message) const;

  // Refuses sequence, map and optional values at the node's boundary and its bodies', naming
  // the node rather than whichever inner op would have failed.
  Status RequireTensorValues() const;
  // An error when `value` declares a dtype other than `expected`.
  Status RequireDeclaredDtype(const Value* value, DataType expected, std::string_view role) const;

  // Prepares the graph attribute `attribute`; the values it captures join the implicit inputs.
  Result<Body> PrepareBody(std::string_view attribute, const PrepareContext& context);
  // Runs `body` once on `inputs`, binding its captured values from the context's implicit inputs.
  Result<std::vector<RtTensor>> RunBody(Body& body, std::vector<RtTensor> inputs, KernelContext& context,
                                        RunStats& stats) const;

  const Node& node_;

 private:
  std::vector<const Value*> implicit_inputs_;
};

// The Scan kernel (control_flow/scan.cc); If and Loop live in control_flow/kernels.cc.
Result<std::unique_ptr<SubgraphKernel>> CreateScanKernel(const Node& node, int64_t opset,
                                                         const PrepareContext& context);

// A condition: a bool tensor of one element (a scalar, or [1] as some exporters write it).
Result<bool> ReadCondition(const RtTensor& tensor, std::string_view role);
// Loop's trip count M: an int64 tensor of one element.
Result<int64_t> ReadTripCount(const RtTensor& tensor);

RtTensor Int64Scalar(Allocator& allocator, int64_t value);
RtTensor BoolScalar(Allocator& allocator, bool value);

// Element `index` of `input` along `axis`, without that axis: a view when nothing precedes
// the axis (the slice is contiguous), else a copy.
Result<RtTensor> SliceAlongAxis(const RtTensor& input, size_t axis, int64_t index, Allocator& allocator);

// The scan output of `body_output` over all iterations: the per-iteration tensors stacked
// along a new axis `axis` (counted in the stacked rank; negative counts from the back), the
// first iteration last when `reverse`. With no iterations the empty result takes its dtype
// and dims from the body output's declared type, and is refused when that is incomplete.
Result<RtTensor> StackIterations(const std::vector<RtTensor>& iterations, const Value& body_output, int64_t axis,
                                 bool reverse, Allocator& allocator);

// "float[2,3]": how run-time errors name a tensor's type.
std::string TypeOf(const RtTensor& tensor);

}  // namespace fusionopt::cpu::control_flow
