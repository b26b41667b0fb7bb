#include "verify/quantization_steps.h"

#include "ir/constant_value.h"

namespace fusionopt::verify {
namespace {

// An op that rounds activations to a grid at run time: where two correct engines may land a
// value on either side of a boundary. A DequantizeLinear (a weight's storage form), MatMulNBits
// and the integer products of values already quantized round nothing new: a model with only
// those keeps the plain tolerance, so a fusion that moves its numbers shows.
bool RoundsActivations(const Node& node) {
  const std::string& op = node.op_type();
  return op == "QuantizeLinear" || op == "DynamicQuantizeLinear" || op.rfind("QLinear", 0) == 0 || op == "QGemm" ||
         op == "DynamicQuantizeMatMul";
}

bool HasQuantizationOps(const Model& model) {
  for (const auto& node : model.graph->nodes()) {
    if (RoundsActivations(*node)) return true;
  }
  for (const auto& function : model.functions) {
    for (const auto& node : function->body->nodes()) {
      if (RoundsActivations(*node)) return true;
    }
  }
  return false;
}

}  // namespace

std::map<std::string, double> QuantizationSteps(const Model& model) {
  std::map<std::string, double> steps;
  if (!HasQuantizationOps(model)) return steps;
  const InitializerRule rule = InitializerRuleOf(model);
  for (const Value* output : model.graph->outputs()) {
    const Node* producer = output->producer();
    if (IsInteger(output->dtype())) {
      // A quantized tensor moves by whole values; other integers (indices, ids, shapes) not at all.
      if (producer != nullptr && RoundsActivations(*producer)) steps[output->name()] = 1;
      continue;
    }
    double step = -1;
    if (producer != nullptr && producer->op_type() == "DequantizeLinear" && producer->inputs().size() > 1) {
      if (std::optional<double> scale = ConstantScalar(producer->input(1), rule); scale && *scale > 0) step = *scale;
    }
    steps[output->name()] = step;
  }
  return steps;
}

cpu::Tolerance ForReference(cpu::Tolerance tolerance, const Model& reference) {
  tolerance.step = QuantizationSteps(reference);
  return tolerance;
}

}  // namespace fusionopt::verify
