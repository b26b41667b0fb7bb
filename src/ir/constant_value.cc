#include "ir/constant_value.h"

#include <cmath>

#include "ir/float16.h"
#include "ir/status.h"

namespace fusionopt {
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

}  // namespace

TensorPtr ConstantNodeValue(const Node& node) {
  if (node.op_type() != "Constant" || !IsDefaultDomain(node)) {
    return nullptr;
  }
  for (const Attribute& attribute : node.attributes()) {
    const std::string& name = attribute.name;
    if (name == "value" && attribute.kind == AttributeKind::kTensor) return attribute.t;
    if (name == "value_int" && attribute.kind == AttributeKind::kInt) {
      return std::make_shared<Tensor>(Tensor::FromValues<int64_t>(DataType::kInt64, {}, {attribute.i}));
    }
    if (name == "value_ints" && attribute.kind == AttributeKind::kInts) {
      auto count = static_cast<int64_t>(attribute.ints.size());
      return std::make_shared<Tensor>(Tensor::FromValues<int64_t>(DataType::kInt64, {count}, attribute.ints));
    }
    if (name == "value_float" && attribute.kind == AttributeKind::kFloat) {
      return std::make_shared<Tensor>(Tensor::FromValues<float>(DataType::kFloat, {}, {attribute.f}));
    }
    if (name == "value_floats" && attribute.kind == AttributeKind::kFloats) {
      auto count = static_cast<int64_t>(attribute.floats.size());
      return std::make_shared<Tensor>(Tensor::FromValues<float>(DataType::kFloat, {count}, attribute.floats));
    }
    if (name == "value_string" && attribute.kind == AttributeKind::kString) {
      return std::make_shared<Tensor>(Tensor::Strings({}, {attribute.s}));
    }
    if (name == "value_strings" && attribute.kind == AttributeKind::kStrings) {
      auto count = static_cast<int64_t>(attribute.strings.size());
      return std::make_shared<Tensor>(Tensor::Strings({count}, attribute.strings));
    }
  }
  return nullptr;
}

InitializerRule InitializerRuleOf(int64_t ir_version) {
  return ir_version >= 1 && ir_version < 4 ? InitializerRule::kAllConstant : InitializerRule::kFeedsOverride;
}

TensorPtr ConstantValueOf(const Value& value, InitializerRule rule) {
  if (value.is_initializer()) {
    return value.is_graph_input() && rule == InitializerRule::kFeedsOverride ? nullptr : value.initializer();
  }
  const Node* producer = value.producer();
  return producer != nullptr ? ConstantNodeValue(*producer) : nullptr;
}

std::optional<std::vector<int64_t>> ConstantInts(const Value* value, InitializerRule rule) {
  TensorPtr tensor = value != nullptr ? ConstantValueOf(*value, rule) : nullptr;
  if (tensor == nullptr || tensor->dims().size() > 1 || !IsInteger(tensor->dtype())) return std::nullopt;
  return tensor->AsInt64s();
}

std::optional<std::vector<double>> ConstantFloats(const Value* value, InitializerRule rule) {
  TensorPtr tensor = value != nullptr ? ConstantValueOf(*value, rule) : nullptr;
  if (tensor == nullptr || tensor->dims().size() > 1) return std::nullopt;
  return tensor->AsDoubles();
}

std::optional<double> ConstantScalar(const Value* value, InitializerRule rule) {
  TensorPtr tensor = value != nullptr ? ConstantValueOf(*value, rule) : nullptr;
  if (tensor == nullptr || tensor->NumElements() != 1) return std::nullopt;
  if (std::optional<std::vector<double>> floats = tensor->AsDoubles()) return floats->front();
  if (std::optional<std::vector<int64_t>> integers = tensor->AsInt64s()) return static_cast<double>(integers->front());
  return std::nullopt;
}

void SetTensorInitializer(Graph& graph, Value* value, TensorPtr tensor) {
  value->type().dtype = tensor->dtype();
  Shape shape;
  for (int64_t dim : tensor->dims()) shape.push_back(Dim::Known(dim));
  value->type().shape = std::move(shape);
  graph.SetInitializer(value, std::move(tensor));
}

Value* AddInitializer(Graph& graph, const std::string& base, TensorPtr tensor) {
  Value* value = graph.CreateValue(graph.UniqueName(base));
  SetTensorInitializer(graph, value, std::move(tensor));
  return value;
}

bool IsFloatingPointForFolding(DataType dtype) {
  return dtype == DataType::kFloat || dtype == DataType::kFloat16 || dtype == DataType::kBFloat16 ||
         dtype == DataType::kDouble;
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

}  // namespace fusionopt
