#include "passes/constant_operand.h"

#include <cmath>

#include "ir/float16.h"
#include "passes/fold_rewrites.h"

namespace fusionopt::passes {
namespace {

// Rounds a double to a 16-bit float format once. Going through float first could round twice
// (double → float lands exactly between two 16-bit values, then ties to even); the candidate
// that path gives is off by at most one step, so its neighbours settle it.
uint16_t RoundToSixteenBits(double value, float (*to_float)(uint16_t), uint16_t (*from_float)(float)) {
  uint16_t best = from_float(static_cast<float>(value));
  if (!std::isfinite(value) || !std::isfinite(to_float(best))) return best;
  double best_error = std::fabs(static_cast<double>(to_float(best)) - value);
  for (int step : {-1, 1}) {
    auto neighbour = static_cast<uint16_t>(best + step);
    float neighbour_value = to_float(neighbour);
    if (!std::isfinite(neighbour_value)) continue;
    double error = std::fabs(static_cast<double>(neighbour_value) - value);
    if (error < best_error || (error == best_error && (neighbour & 1) == 0)) {
      best = neighbour;
      best_error = error;
    }
  }
  return best;
}

std::optional<ConstantOperand> ReadSplat(Value* value, const Model& model) {
  Node* producer = value->producer();
  if (producer == nullptr || producer->op_type() != "ConstantOfShape" || !IsStandardDomain(*producer)) {
    return std::nullopt;
  }
  const Value* shape_value = producer->input(0);
  TensorPtr shape = shape_value != nullptr ? FoldableConstant(*shape_value, model) : nullptr;
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

bool IsFloatingPointForFolding(DataType dtype) {
  return dtype == DataType::kFloat || dtype == DataType::kFloat16 || dtype == DataType::kBFloat16 ||
         dtype == DataType::kDouble;
}

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
  if (TensorPtr tensor = FoldableConstant(*value, model)) {
    operand = ConstantOperand{value, tensor->dtype(), tensor->dims(), tensor, nullptr, 0};
  } else {
    operand = ReadSplat(value, model);
  }
  if (!operand || !IsFloatingPointForFolding(operand->dtype)) return std::nullopt;
  return operand;
}

TensorPtr MakeFloatingTensor(DataType dtype, std::vector<int64_t> dims, const std::vector<double>& values) {
  switch (dtype) {
    case DataType::kDouble:
      return std::make_shared<Tensor>(Tensor::FromValues<double>(dtype, std::move(dims), values));
    case DataType::kFloat: {
      std::vector<float> rounded(values.begin(), values.end());
      return std::make_shared<Tensor>(Tensor::FromValues<float>(dtype, std::move(dims), rounded));
    }
    case DataType::kFloat16:
    case DataType::kBFloat16: {
      bool half = dtype == DataType::kFloat16;
      std::vector<uint16_t> rounded;
      rounded.reserve(values.size());
      for (double value : values) {
        rounded.push_back(half ? RoundToSixteenBits(value, HalfToFloat, FloatToHalf)
                               : RoundToSixteenBits(value, BFloat16ToFloat, FloatToBFloat16));
      }
      return std::make_shared<Tensor>(Tensor::FromValues<uint16_t>(dtype, std::move(dims), rounded));
    }
    default:
      FUSIONOPT_CHECK(false, "MakeFloatingTensor takes a floating-point dtype");
  }
  return nullptr;
}

}  // namespace fusionopt::passes
