#include "verify/quantization_steps.h"

#include "ir/constant_value.h"

namespace fusionopt::verify {
namespace {

bool IsQuantizationOp(const Node& node) {
  const std::string& op = node.op_type();
  return op == "QuantizeLinear" || op == "DequantizeLinear" || op == "DynamicQuantizeLinear" ||
         op == "MatMulInteger" || op == "ConvInteger" || op.rfind("QLinear", 0) == 0 || op == "QGemm" ||
         op == "MatMulNBits" || op == "MatMulIntegerToFloat" || op == "DynamicQuantizeMatMul";
}

bool HasQuantizationOps(const Model& model) {
  for (const auto& node : model.graph->nodes()) {
    if (IsQuantizationOp(*node)) return true;
  }
  for (const auto& function : model.functions) {
    for (const auto& node : function->body->nodes()) {
      if (IsQuantizationOp(*node)) return true;
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
    double step = -1;
    if (IsInteger(output->dtype())) {
      step = 1;
    } else if (const Node* producer = output->producer();
               producer != nullptr && producer->op_type() == "DequantizeLinear" && producer->inputs().size() > 1) {
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
