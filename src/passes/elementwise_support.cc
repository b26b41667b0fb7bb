#include "passes/elementwise_support.h"

#include <string_view>
#include <unordered_set>

#include "ir/legacy_opsets.h"
#include "ir/op_class.h"

namespace fusionopt::passes {
namespace {

enum class Operands { kAny, kBool, kInteger, kNotBool, kFloatingPoint };

// The operand types the engine implements each op for (ew::Supports).
Operands OperandsOf(std::string_view op, bool float_mod) {
  static const std::unordered_set<std::string_view> kBool = {"And", "Or", "Xor", "Not"};
  static const std::unordered_set<std::string_view> kInteger = {"BitShift", "BitwiseAnd", "BitwiseOr", "BitwiseXor",
                                                                "BitwiseNot"};
  static const std::unordered_set<std::string_view> kNotBool = {"Neg", "Abs", "Sign", "Relu", "Add", "Sub", "Mul",
                                                                "Max", "Min", "PRelu", "Div", "Pow", "Sum", "Mean"};
  static const std::unordered_set<std::string_view> kAny = {"Equal", "Less", "LessOrEqual", "Greater",
                                                            "GreaterOrEqual", "Where", "Clip", "Cast"};
  if (kBool.count(op)) return Operands::kBool;
  if (kInteger.count(op)) return Operands::kInteger;
  if (op == "Mod") return float_mod ? Operands::kNotBool : Operands::kInteger;
  if (kNotBool.count(op)) return Operands::kNotBool;
  if (kAny.count(op)) return Operands::kAny;
  return Operands::kFloatingPoint;  // transcendental functions, activations, IsNaN/IsInf
}

bool Accepts(Operands operands, DataType dtype) {
  switch (operands) {
    case Operands::kAny: return true;
    case Operands::kBool: return dtype == DataType::kBool;
    case Operands::kInteger: return IsInteger(dtype);
    case Operands::kNotBool: return dtype != DataType::kBool;
    case Operands::kFloatingPoint: return IsFloatingPoint(dtype);
  }
  return false;
}

// The reason for op-specific limits of the engine's op table, or "".
std::string WhyNotInOpTable(const Node& node, int64_t opset) {
  const std::string& op = node.op_type();
  if (op == "CastLike") return "CastLike (its second input gives only a type)";
  if (op == "Gelu") {
    if (opset < 20) return "Gelu before opset 20";
    std::string approximate = node.GetString("approximate", "none");
    if (approximate != "none" && approximate != "tanh") return "unknown Gelu approximation";
  }
  if (op == "BitShift") {
    std::string direction = node.GetString("direction", "");
    if (direction != "LEFT" && direction != "RIGHT") return "BitShift direction is neither LEFT nor RIGHT";
  }
  if (op == "Cast") {
    int64_t to = node.GetInt("to", 0);
    if (!IsKnownDataType(static_cast<int32_t>(to)) || !EngineComputes(static_cast<DataType>(to))) {
      return "Cast to a type the engine does not compute";
    }
  }
  return "";
}

}  // namespace

bool EngineComputes(DataType dtype) {
  switch (dtype) {
    case DataType::kFloat: case DataType::kFloat16: case DataType::kBFloat16: case DataType::kDouble:
    case DataType::kBool:
    case DataType::kInt8: case DataType::kInt16: case DataType::kInt32: case DataType::kInt64:
    case DataType::kUint8: case DataType::kUint16: case DataType::kUint32: case DataType::kUint64:
      return true;
    default:
      return false;
  }
}

std::string WhyEngineCannotEvaluate(const Node& node, int64_t opset) {
  if (ClassifyOp(node) != OpClass::kElementwise) return "not an elementwise op";
  if (opset < kFirstUnrestrictedOpset) return "opset before 7";
  std::string why = WhyNotInOpTable(node, opset);
  if (!why.empty()) return why;
  for (const Value* value : node.outputs()) {
    if (value != nullptr && !EngineComputes(value->dtype())) return "dtype the engine does not compute";
  }
  bool operands_checked = false;
  for (const Value* value : node.inputs()) {
    if (value == nullptr) continue;
    if (!EngineComputes(value->dtype())) return "dtype the engine does not compute";
    // The value operands decide the op's implementation: Where's condition and Pow's or
    // PRelu's second operand (converted to the first's type) do not.
    bool value_operand = node.op_type() == "Where" ? value == node.input(1) : !operands_checked;
    if (!value_operand) continue;
    operands_checked = true;
    bool float_mod = node.GetInt("fmod", 0) != 0;
    if (!Accepts(OperandsOf(node.op_type(), float_mod), value->dtype())) {
      return "the engine does not compute " + node.op_type() + " on " + std::string(NameOf(value->dtype()));
    }
  }
  return "";
}

}  // namespace fusionopt::passes
