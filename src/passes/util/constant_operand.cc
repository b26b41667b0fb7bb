#include "passes/util/constant_operand.h"

#include <cmath>

#include "ir/constant_value.h"
#include "ir/float16.h"
#include "passes/util/fold_rewrites.h"

namespace fusionopt::passes {
namespace {

std::optional<ConstantOperand> ReadSplat(Value* value, const Model& model) {
  Node* producer = value->producer();
  if (producer == nullptr || producer->op_type() != "ConstantOfShape" || !IsDefaultDomain(*producer)) {
    return std::nullopt;
  }
  const Value* shape_value = producer->input(0);
  TensorPtr shape = shape_value != nullptr ? ConstantValueOf(*shape_value, InitializerRuleOf(model)) : nullptr;
  std::optional<std::vector<int64_t>> dims = shape ? shape->AsInt64s() : std::nullopt;
  if (!dims) return std::nullopt;
  for (int64_t dim : *dims) {
    if (dim < 0) return std::nullopt;
  }
  ConstantOperand operand;
  operand.value = value;
  operand.dims = *dims;
  operand.splat = producer;
  operand.dtype = DataType::kFloat;  // the spec's default fill: float 0
  const Attribute* fill = producer->FindAttribute("value");
  if (fill != nullptr) {
    if (fill->kind != AttributeKind::kTensor || fill->t == nullptr || fill->t->NumElements() != 1) return std::nullopt;
    std::optional<std::vector<double>> element = fill->t->AsDoubles();
    if (!element) return std::nullopt;
    operand.dtype = fill->t->dtype();
    operand.splat_value = element->front();
  }
  return operand;
}

}  // namespace

int64_t ConstantOperand::NumElements() const {
  int64_t count = 1;
  for (int64_t dim : dims) count *= dim;
  return count;
}

uint64_t ConstantOperand::NumBytes() const { return ByteSizeOf(dtype, static_cast<uint64_t>(NumElements())); }

std::vector<double> ConstantOperand::Values() const {
  if (splat != nullptr) return std::vector<double>(static_cast<size_t>(NumElements()), splat_value);
  std::vector<double> values = *tensor->AsDoubles();
  tensor->ReleaseMappedPages();  // the caller works on the copy; a mapped weight is read once
  return values;
}

std::optional<ConstantOperand> ReadConstantOperand(Value* value, const Model& model) {
  if (value == nullptr) return std::nullopt;
  std::optional<ConstantOperand> operand;
  if (TensorPtr tensor = ConstantValueOf(*value, InitializerRuleOf(model))) {
    operand = ConstantOperand{value, tensor->dtype(), tensor->dims(), tensor, nullptr, 0};
  } else {
    operand = ReadSplat(value, model);
  }
  if (!operand || !IsFloatingPointForFolding(operand->dtype)) return std::nullopt;
  return operand;
}


}  // namespace fusionopt::passes
