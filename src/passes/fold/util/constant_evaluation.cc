#include "passes/fold/util/constant_evaluation.h"

#include <memory>

#include "cpu_runtime/engine/allocator.h"
#include "cpu_runtime/engine/kernel.h"
#include "cpu_runtime/engine/rt_tensor.h"

namespace fusionopt::passes {
namespace {

const cpu::KernelFactory* FindKernel(const Node& node, const Model& model) {
  int64_t opset = model.OpsetFor(node.domain()).value_or(0);
  return cpu::KernelRegistry::BuiltIn().Find(node.domain(), node.op_type(), opset);
}

TensorPtr ToConstant(const cpu::RtTensor& tensor) {
  const uint8_t* data = tensor.raw();
  std::vector<uint8_t> bytes(data, data + tensor.nbytes());
  return std::make_shared<Tensor>(Tensor::Owned(tensor.dtype(), tensor.dims(), std::move(bytes)));
}

}  // namespace

bool RuntimeHasKernel(const Node& node, const Model& model) { return FindKernel(node, model) != nullptr; }

Result<std::vector<TensorPtr>> EvaluateNode(const Node& node, const Model& model, const std::vector<TensorPtr>& inputs) {
  FUSIONOPT_CHECK(inputs.size() == node.inputs().size(), "one constant per node input");
  const cpu::KernelFactory* factory = FindKernel(node, model);
  if (factory == nullptr) return Unsupported(DescribeNode(node) + ": the CPU runtime has no kernel for it");
  for (const TensorPtr& input : inputs) {
    if (input != nullptr && input->dtype() == DataType::kString) {
      return Unsupported(DescribeNode(node) + ": string tensors are not computed by the CPU runtime");
    }
  }
  int64_t opset = model.OpsetFor(node.domain()).value_or(0);
  cpu::KernelInfo info{node, opset, inputs};
  FUSIONOPT_ASSIGN_OR_RETURN(std::unique_ptr<cpu::Kernel> kernel, (*factory)(info));

  std::vector<cpu::RtTensor> wrapped;
  wrapped.reserve(inputs.size());
  for (const TensorPtr& input : inputs) wrapped.push_back(input ? cpu::RtTensor::WrapConstant(input) : cpu::RtTensor());
  cpu::Allocator allocator;
  cpu::KernelContext context;
  context.allocator = &allocator;
  for (const cpu::RtTensor& tensor : wrapped) context.inputs.push_back(tensor.defined() ? &tensor : nullptr);
  context.outputs.assign(node.outputs().size(), cpu::RtTensor());
  Status computed = kernel->Compute(context);
  // The inputs are read: drop mapped weights' pages, so folding a Transpose of every layer's
  // weight keeps one input resident at a time rather than the model.
  for (const TensorPtr& input : inputs) {
    if (input != nullptr) input->ReleaseMappedPages();
  }
  if (!computed.ok()) return computed.WithContext(DescribeNode(node));

  std::vector<TensorPtr> outputs;
  for (size_t i = 0; i < node.outputs().size(); ++i) {
    if (node.output(i) == nullptr) {
      outputs.push_back(nullptr);
      continue;
    }
    if (!context.outputs[i].defined()) {
      return InternalError(DescribeNode(node) + ": the kernel left output " + std::to_string(i) + " unset");
    }
    outputs.push_back(ToConstant(context.outputs[i]));
  }
  return outputs;
}

}  // namespace fusionopt::passes
