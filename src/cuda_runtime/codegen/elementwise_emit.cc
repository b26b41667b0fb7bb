// The expression of every elementwise op the CUDA generator handles, written to compute what
// the CPU engine's instruction computes (cpu_runtime/elementwise/ops.cc, elementwise/kernels.cc):
// the same NaN rules (Relu and Max keep NaN, HardSigmoid uses std::min/max semantics), the same
// integer rules (division by zero gives 0, Mod's sign follows the divisor unless fmod=1,
// wrap-around to narrow types), the same attribute defaults, and a rounding of every fp16/bf16
// result. Float math uses the libm-accurate CUDA functions (expf, erff, tanhf), never intrinsics.
#include "cuda_runtime/codegen/elementwise_emit.h"

#include <cmath>
#include <cstdio>
#include <cstring>
#include <limits>
#include <optional>
#include <set>
#include <vector>

#include "cuda_runtime/codegen/cuda_types.h"
#include "cuda_runtime/codegen/family_codegen_support.h"
#include "ir/constant_value.h"
#include "ir/float16.h"

namespace fusionopt::cuda::elementwise {
namespace {

// How the CPU engine holds a dtype's values while computing; decides which ops apply.
enum class Lane { kFloat, kDouble, kInteger, kBool };

std::optional<Lane> LaneOf(DataType dtype) {
  if (dtype == DataType::kFloat || dtype == DataType::kFloat16 || dtype == DataType::kBFloat16) return Lane::kFloat;
  if (dtype == DataType::kDouble) return Lane::kDouble;
  if (dtype == DataType::kBool) return Lane::kBool;
  if (IsInteger(dtype) && StorageType(dtype)) return Lane::kInteger;
  return std::nullopt;
}

bool IsFloatLane(Lane lane) { return lane == Lane::kFloat || lane == Lane::kDouble; }

std::string Hex(double value, bool single) {
  char text[64];
  std::snprintf(text, sizeof(text), "%a", value);
  return std::string(text) + (single ? "f" : "");
}

std::string FloatLiteral(float value) {
  if (std::isfinite(value)) return Hex(value, true);
  uint32_t bits;
  std::memcpy(&bits, &value, sizeof(bits));
  char text[64];
  std::snprintf(text, sizeof(text), "__int_as_float(0x%08x)", bits);
  return text;
}

std::string IntegerLiteral(DataType dtype, int64_t value) {
  const std::string type(*ComputeType(dtype));
  if (value == std::numeric_limits<int64_t>::min()) return "((" + type + ")(-9223372036854775807LL - 1))";
  return "((" + type + ")" + std::to_string(value) + "LL)";
}

// The literal `value` as `lane`'s compute type ("0.5f", "0.5", "((int)0LL)").
std::string Constant(double value, DataType dtype) {
  switch (*LaneOf(dtype)) {
    case Lane::kFloat: return FloatLiteral(static_cast<float>(value));
    case Lane::kDouble: return DoubleLiteral(value);
    case Lane::kBool: return value != 0.0 ? "true" : "false";
    case Lane::kInteger: return IntegerLiteral(dtype, static_cast<int64_t>(value));
  }
  return "";
}

// One node being emitted: its operands as expressions of one dtype, and the result's dtype.
struct Operands {
  std::vector<std::string> expressions;  // "" for omitted optional inputs
  DataType dtype = DataType::kUndefined;  // the value operands' dtype after conversion
  Lane lane = Lane::kFloat;
};

std::string Describe(const Node& node) { return node.op_type() + " (node '" + node.name() + "')"; }

// Converts every present operand from index `first_value` on to the first value operand's dtype
// where ONNX allows it (Pow's exponent, PRelu's slope, Clip's bounds); elsewhere different
// dtypes are an invalid model, as the CPU engine says.
Result<Operands> CollectOperands(const Node& node, ElementScope& scope, size_t first_value) {
  Operands operands;
  const Value* value_operand = node.input(first_value);
  if (value_operand == nullptr) return InvalidModel(Describe(node) + " lacks its first operand");
  operands.dtype = value_operand->dtype();
  auto lane = LaneOf(operands.dtype);
  if (!lane) return Unsupported(Describe(node) + " on " + std::string(NameOf(operands.dtype)) + " values");
  operands.lane = *lane;
  const bool converts = node.op_type() == "Pow" || node.op_type() == "PRelu" || node.op_type() == "Clip";
  for (size_t i = 0; i < node.inputs().size(); ++i) {
    const Value* input = node.input(i);
    if (input == nullptr) {
      operands.expressions.emplace_back();
      continue;
    }
    std::string expression = scope.Of(input);
    if (i > first_value && input->dtype() != operands.dtype) {
      if (!converts) {
        return InvalidModel(Describe(node) + " has operands of different types: " +
                            std::string(NameOf(operands.dtype)) + " and " + std::string(NameOf(input->dtype())));
      }
      if (!LaneOf(input->dtype())) return Unsupported(Describe(node) + " on " + std::string(NameOf(input->dtype())));
      expression = scope.Temporary(operands.dtype, scope.Convert(input->dtype(), operands.dtype, expression));
    }
    operands.expressions.push_back(std::move(expression));
  }
  return operands;
}

// Float functions: "expf" for float lanes, "exp" for double.
struct FloatMath {
  bool single;
  std::string F(const std::string& name) const { return single ? name + "f" : name; }
  std::string C(const char* decimal) const { return std::string(decimal) + (single ? "f" : ""); }
  std::string A(float attribute) const { return single ? FloatLiteral(attribute) : DoubleLiteral(attribute); }
};

std::string SoftplusOf(const FloatMath& m, const std::string& x) {
  return "(" + x + " > " + m.C("0.0") + " ? " + x + " + " + m.F("log1p") + "(" + m.F("exp") + "(-" + x + ")) : " +
         m.F("log1p") + "(" + m.F("exp") + "(" + x + ")))";
}

// Ops defined on float and double lanes only.
std::optional<std::string> FloatUnary(const Node& node, const FloatMath& m, const std::string& x) {
  static const std::vector<std::pair<std::string, std::string>> kFunctions = {
      {"Floor", "floor"}, {"Ceil", "ceil"}, {"Round", "rint"}, {"Sqrt", "sqrt"}, {"Exp", "exp"},
      {"Log", "log"}, {"Erf", "erf"}, {"Sin", "sin"}, {"Cos", "cos"}, {"Tan", "tan"}, {"Asin", "asin"},
      {"Acos", "acos"}, {"Atan", "atan"}, {"Sinh", "sinh"}, {"Cosh", "cosh"}, {"Tanh", "tanh"},
      {"Asinh", "asinh"}, {"Acosh", "acosh"}, {"Atanh", "atanh"}};
  const std::string& op = node.op_type();
  for (const auto& [name, function] : kFunctions) {
    if (op == name) return m.F(function) + "(" + x + ")";
  }
  const std::string one = m.C("1.0"), zero = m.C("0.0");
  if (op == "Reciprocal") return "(" + one + " / " + x + ")";
  if (op == "Sigmoid") {  // split by sign so exp never overflows
    return "(" + x + " >= " + zero + " ? " + one + " / (" + one + " + " + m.F("exp") + "(-" + x + ")) : " + m.F("exp") +
           "(" + x + ") / (" + one + " + " + m.F("exp") + "(" + x + ")))";
  }
  if (op == "Softplus") return SoftplusOf(m, x);
  if (op == "Softsign") return "(" + x + " / (" + one + " + " + m.F("fabs") + "(" + x + ")))";
  if (op == "Mish") return "(" + x + " * " + m.F("tanh") + "(" + SoftplusOf(m, x) + "))";
  if (op == "Gelu") {
    if (node.GetString("approximate", "none") == "tanh") {
      return "(" + m.C("0.5") + " * " + x + " * (" + one + " + " + m.F("tanh") + "(" + m.C("0.79788456080286535588") +
             " * (" + x + " + " + m.C("0.044715") + " * " + x + " * " + x + " * " + x + "))))";
    }
    return "(" + m.C("0.5") + " * " + x + " * (" + one + " + " + m.F("erf") + "(" + x + " * " +
           m.C("0.70710678118654752440") + ")))";
  }
  if (op == "LeakyRelu") return "(" + x + " < " + zero + " ? " + m.A(node.GetFloat("alpha", 0.01f)) + " * " + x + " : " + x + ")";
  if (op == "Elu") {
    return "(" + x + " < " + zero + " ? " + m.A(node.GetFloat("alpha", 1.0f)) + " * (" + m.F("exp") + "(" + x + ") - " +
           one + ") : " + x + ")";
  }
  if (op == "Selu") {
    const std::string alpha = m.A(node.GetFloat("alpha", 1.67326319217681884765625f));
    const std::string gamma = m.A(node.GetFloat("gamma", 1.05070102214813232421875f));
    return "(" + x + " <= " + zero + " ? " + gamma + " * (" + alpha + " * " + m.F("exp") + "(" + x + ") - " + alpha +
           ") : " + gamma + " * " + x + ")";
  }
  if (op == "Celu") {
    const std::string alpha = m.A(node.GetFloat("alpha", 1.0f));
    return "(fo_max(" + zero + ", " + x + ") + fo_min(" + zero + ", " + alpha + " * (" + m.F("exp") + "(" + x + " / " +
           alpha + ") - " + one + ")))";
  }
  if (op == "ThresholdedRelu") return "(" + x + " > " + m.A(node.GetFloat("alpha", 1.0f)) + " ? " + x + " : " + zero + ")";
  if (op == "HardSigmoid") {
    return "fo_max(" + zero + ", fo_min(" + one + ", " + m.A(node.GetFloat("alpha", 0.2f)) + " * " + x + " + " +
           m.A(node.GetFloat("beta", 0.5f)) + "))";
  }
  if (op == "HardSwish") {
    return "(" + x + " * fo_max(" + zero + ", fo_min(" + one + ", " + x + " / " + m.C("6.0") + " + " + m.C("0.5") + ")))";
  }
  if (op == "Shrink") {
    const std::string lambd = m.A(node.GetFloat("lambd", 0.5f)), bias = m.A(node.GetFloat("bias", 0.0f));
    return "(" + x + " < -" + lambd + " ? " + x + " + " + bias + " : (" + x + " > " + lambd + " ? " + x + " - " + bias +
           " : " + zero + "))";
  }
  if (op == "IsNaN") return "(" + x + " != " + x + ")";
  if (op == "IsInf") {
    const std::string largest = m.single ? "0x1.fffffep+127f" : "0x1.fffffffffffffp+1023";
    const bool positive = node.GetInt("detect_positive", 1) != 0, negative = node.GetInt("detect_negative", 1) != 0;
    if (positive && negative) return "(" + m.F("fabs") + "(" + x + ") > " + largest + ")";
    if (positive) return "(" + x + " > " + largest + ")";
    if (negative) return "(" + x + " < -" + largest + ")";
    return std::string("false");
  }
  return std::nullopt;
}

// Ops on every lane but bool.
std::optional<std::string> NumericUnary(const std::string& op, const std::string& type, const std::string& x) {
  if (op == "Neg") return "(-" + x + ")";
  if (op == "Abs") return "(" + x + " < (" + type + ")0 ? -" + x + " : " + x + ")";
  if (op == "Sign") return "((" + type + ")((" + x + " > (" + type + ")0) - (" + x + " < (" + type + ")0)))";
  if (op == "Relu") return "(" + x + " < (" + type + ")0 ? (" + type + ")0 : " + x + ")";  // NaN stays NaN
  return std::nullopt;
}

std::optional<std::string> Comparison(const std::string& op, const std::string& x, const std::string& y) {
  static const std::vector<std::pair<std::string, std::string>> kComparisons = {
      {"Equal", "=="}, {"Less", "<"}, {"LessOrEqual", "<="}, {"Greater", ">"}, {"GreaterOrEqual", ">="}};
  for (const auto& [name, symbol] : kComparisons) {
    if (op == name) return "(" + x + " " + symbol + " " + y + ")";
  }
  return std::nullopt;
}

std::optional<std::string> NumericBinary(const Node& node, Lane lane, const std::string& type, const std::string& x,
                                         const std::string& y) {
  const std::string& op = node.op_type();
  const bool integer = lane == Lane::kInteger;
  if (op == "Add") return "(" + x + " + " + y + ")";
  if (op == "Sub") return "(" + x + " - " + y + ")";
  if (op == "Mul") return "(" + x + " * " + y + ")";
  if (op == "PRelu") return "(" + x + " < (" + type + ")0 ? " + y + " * " + x + " : " + x + ")";
  if (op == "Div") {
    if (integer) return "(" + y + " == (" + type + ")0 ? (" + type + ")0 : (" + type + ")(" + x + " / " + y + "))";
    return "(" + x + " / " + y + ")";
  }
  if (op == "Pow") {
    if (integer) return "((" + type + ")fo_ipow((long long)" + x + ", (long long)" + y + "))";
    const std::string two = lane == Lane::kFloat ? "2.0f" : "2.0";
    return "(" + y + " == " + two + " ? " + x + " * " + x + " : " + (lane == Lane::kFloat ? "powf(" : "pow(") + x +
           ", " + y + "))";
  }
  if (op == "Mod") {
    const bool fmod = node.GetInt("fmod", 0) != 0;
    if (integer && fmod) return "(" + y + " == (" + type + ")0 ? (" + type + ")0 : (" + type + ")(" + x + " % " + y + "))";
    if (integer) return "((" + type + ")fo_python_mod((long long)" + x + ", (long long)" + y + "))";
    if (fmod) return std::string(lane == Lane::kFloat ? "fmodf(" : "fmod(") + x + ", " + y + ")";
    return std::nullopt;  // Mod with fmod=0 is not defined for floating point
  }
  if (!integer) return std::nullopt;
  if (op == "BitShift") {
    const std::string shifted = node.GetString("direction", "") == "LEFT" ? " << " : " >> ";
    return "(" + y + " >= (" + type + ")64 ? (" + type + ")0 : (" + type + ")((unsigned long long)(long long)" + x +
           shifted + y + "))";
  }
  if (op == "BitwiseAnd") return "(" + x + " & " + y + ")";
  if (op == "BitwiseOr") return "(" + x + " | " + y + ")";
  if (op == "BitwiseXor") return "(" + x + " ^ " + y + ")";
  return std::nullopt;
}

Status CheckAttributes(const Node& node) {
  if (node.op_type() == "Gelu") {
    std::string approximate = node.GetString("approximate", "none");
    if (approximate != "none" && approximate != "tanh") return InvalidModel(Describe(node) + ": unknown approximate '" + approximate + "'");
  }
  if (node.op_type() == "BitShift") {
    std::string direction = node.GetString("direction", "");
    if (direction != "LEFT" && direction != "RIGHT") return InvalidModel(Describe(node) + ": direction must be LEFT or RIGHT");
  }
  return Status::Ok();
}

// The expression of a one-instruction op, or nullopt when the op is not one of them (or not
// defined on the operands' lane).
std::optional<std::string> SingleExpression(const Node& node, const Operands& operands) {
  const std::string& op = node.op_type();
  const std::string type(*ComputeType(operands.dtype));
  const std::vector<std::string>& in = operands.expressions;
  const Lane lane = operands.lane;
  if (in.size() == 1) {
    if (IsFloatLane(lane)) {
      if (auto expression = FloatUnary(node, FloatMath{lane == Lane::kFloat}, in[0])) return expression;
    }
    if (lane != Lane::kBool) {
      if (auto expression = NumericUnary(op, type, in[0])) return expression;
    }
    if (lane == Lane::kInteger && op == "BitwiseNot") return "(~" + in[0] + ")";
    if (lane == Lane::kBool && op == "Not") return "(!" + in[0] + ")";
    return std::nullopt;
  }
  if (in.size() == 2 && !in[1].empty()) {
    if (auto expression = Comparison(op, in[0], in[1])) return expression;
    if (lane == Lane::kBool) {
      if (op == "And") return "(" + in[0] + " && " + in[1] + ")";
      if (op == "Or") return "(" + in[0] + " || " + in[1] + ")";
      if (op == "Xor") return "(" + in[0] + " != " + in[1] + ")";
      return std::nullopt;
    }
    return NumericBinary(node, lane, type, in[0], in[1]);
  }
  return std::nullopt;
}

bool GivesBool(const std::string& op) {
  return op == "Equal" || op == "Less" || op == "LessOrEqual" || op == "Greater" || op == "GreaterOrEqual" ||
         op == "IsNaN" || op == "IsInf";
}

// Sum, Mean, Max, Min: a left fold over any number of operands, one rounding per step.
std::optional<std::string> Variadic(const Node& node, const Operands& operands, ElementScope& scope) {
  const std::string& op = node.op_type();
  if (op != "Sum" && op != "Mean" && op != "Max" && op != "Min") return std::nullopt;
  if (operands.lane == Lane::kBool) return std::nullopt;
  const std::vector<std::string>& in = operands.expressions;
  std::string accumulator = in[0];
  for (size_t i = 1; i < in.size(); ++i) {
    std::string step = (op == "Sum" || op == "Mean") ? "(" + accumulator + " + " + in[i] + ")"
                       : op == "Max"                 ? "fo_nan_max(" + accumulator + ", " + in[i] + ")"
                                                     : "fo_nan_min(" + accumulator + ", " + in[i] + ")";
    accumulator = scope.Temporary(operands.dtype, step);
  }
  if (op != "Mean" || in.size() == 1) return accumulator;
  const std::string count = scope.Temporary(operands.dtype, Constant(static_cast<double>(in.size()), operands.dtype));
  if (operands.lane == Lane::kInteger) {
    const std::string type(*ComputeType(operands.dtype));
    return scope.Temporary(operands.dtype, "(" + count + " == (" + type + ")0 ? (" + type + ")0 : (" + type + ")(" +
                                               accumulator + " / " + count + "))");
  }
  return scope.Temporary(operands.dtype, "(" + accumulator + " / " + count + ")");
}

// Clip: bounds from inputs (opset 11+) or from the min/max attributes (before 11).
Result<std::string> ClipExpression(const Node& node, const Operands& operands, ElementScope& scope) {
  if (operands.lane == Lane::kBool) return Unsupported("Clip on bool values");
  std::string lo = operands.expressions.size() > 1 ? operands.expressions[1] : "";
  std::string hi = operands.expressions.size() > 2 ? operands.expressions[2] : "";
  const bool attribute_bounds = node.FindAttribute("min") != nullptr || node.FindAttribute("max") != nullptr;
  if (attribute_bounds) {
    if (!IsFloatLane(operands.lane)) return Unsupported("Clip with min/max attributes on integers");
    lo = scope.Temporary(operands.dtype, Constant(node.GetFloat("min", -std::numeric_limits<float>::max()), operands.dtype));
    hi = scope.Temporary(operands.dtype, Constant(node.GetFloat("max", std::numeric_limits<float>::max()), operands.dtype));
  }
  const std::string& x = operands.expressions[0];
  if (!lo.empty() && !hi.empty()) return scope.Temporary(operands.dtype, "fo_clip(" + x + ", " + lo + ", " + hi + ")");
  if (!lo.empty()) return scope.Temporary(operands.dtype, "fo_nan_max(" + x + ", " + lo + ")");
  if (!hi.empty()) return scope.Temporary(operands.dtype, "fo_nan_min(" + x + ", " + hi + ")");
  return x;  // no bounds: a copy
}

Result<std::string> CastExpression(const Node& node, ElementScope& scope) {
  DataType to = DataType::kUndefined;
  if (node.op_type() == "Cast") {
    const int64_t raw = node.GetInt("to", 0);
    if (!IsKnownDataType(static_cast<int32_t>(raw))) return InvalidModel(Describe(node) + " has no valid 'to' type");
    to = static_cast<DataType>(raw);
  } else {
    if (node.input(1) == nullptr) return InvalidModel(Describe(node) + " needs its second input");
    to = node.input(1)->dtype();
  }
  const DataType from = node.input(0)->dtype();
  if (!LaneOf(from) || !LaneOf(to)) {
    return Unsupported(node.op_type() + " from " + std::string(NameOf(from)) + " to " + std::string(NameOf(to)));
  }
  if (from == to) return scope.Of(node.input(0));
  return scope.Temporary(to, scope.Convert(from, to, scope.Of(node.input(0))));
}

Result<std::string> ConstantExpression(const Node& node) {
  TensorPtr value = ConstantNodeValue(node);
  if (value == nullptr || value->NumElements() != 1) {
    return Unsupported("Constant node '" + node.name() + "' that is not a scalar");
  }
  return Literal(*value, 0);
}

Result<std::string> Expression(const Node& node, ElementScope& scope) {
  const std::string& op = node.op_type();
  if (op == "Constant") return ConstantExpression(node);
  if (op == "Cast" || op == "CastLike") return CastExpression(node, scope);
  FUSIONOPT_RETURN_IF_ERROR(CheckAttributes(node));
  const size_t first_value = op == "Where" ? 1 : 0;
  if (node.inputs().size() <= first_value) return InvalidModel(Describe(node) + " lacks operands");
  FUSIONOPT_ASSIGN_OR_RETURN(Operands operands, CollectOperands(node, scope, first_value));
  const std::string dtype_name(NameOf(operands.dtype));
  if (op == "Where") {
    if (node.inputs().size() != 3 || node.input(0) == nullptr || node.input(2) == nullptr) {
      return InvalidModel(Describe(node) + " needs three operands");
    }
    if (node.input(0)->dtype() != DataType::kBool) return InvalidModel("Where's condition must be bool");
    const std::vector<std::string>& in = operands.expressions;
    return scope.Temporary(operands.dtype, "(" + in[0] + " ? " + in[1] + " : " + in[2] + ")");
  }
  if (op == "Clip") return ClipExpression(node, operands, scope);
  if (auto folded = Variadic(node, operands, scope)) return *folded;
  if (auto expression = SingleExpression(node, operands)) {
    return scope.Temporary(GivesBool(op) ? DataType::kBool : operands.dtype, *expression);
  }
  return Unsupported("elementwise op " + op + " on " + dtype_name + " values");
}

}  // namespace

const std::string& ElementScope::Of(const Value* value) const {
  auto it = expressions_.find(value);
  FUSIONOPT_CHECK(it != expressions_.end(), "operands are bound before their readers");
  return it->second;
}

std::string ElementScope::Temporary(DataType dtype, const std::string& expression) {
  std::string name = "t" + std::to_string(next_temporary_++);
  std::string value = expression;
  if (dtype == DataType::kFloat16) value = "fo_round_half(" + expression + ")";
  if (dtype == DataType::kBFloat16) value = "fo_round_bfloat16(" + expression + ")";
  statements_ += "  const " + std::string(*ComputeType(dtype)) + " " + name + " = " + value + ";\n";
  return name;
}

std::string ElementScope::Convert(DataType from, DataType to, const std::string& expression) {
  if (from == to) return expression;
  const std::string type(*ComputeType(to));
  if (to == DataType::kBool) return "(" + expression + " != 0)";
  if (IsInteger(to) && IsFloatLane(*LaneOf(from))) return "((" + type + ")(long long)" + expression + ")";
  return "((" + type + ")" + expression + ")";
}

Status CheckElementwiseOp(const Node& node) {
  static const std::set<std::string> kOps = {
      "Neg", "Abs", "Sign", "Reciprocal", "Floor", "Ceil", "Round", "Sqrt", "Exp", "Log", "Erf", "Sin", "Cos",
      "Tan", "Asin", "Acos", "Atan", "Sinh", "Cosh", "Tanh", "Asinh", "Acosh", "Atanh", "Relu", "Sigmoid",
      "Softplus", "Softsign", "Mish", "Gelu", "LeakyRelu", "Elu", "Selu", "Celu", "ThresholdedRelu",
      "HardSigmoid", "HardSwish", "Shrink", "IsNaN", "IsInf", "Not", "BitwiseNot", "Add", "Sub", "Mul", "Div",
      "Pow", "Mod", "PRelu", "BitShift", "BitwiseAnd", "BitwiseOr", "BitwiseXor", "Equal", "Less",
      "LessOrEqual", "Greater", "GreaterOrEqual", "And", "Or", "Xor", "Where", "Clip", "Cast", "CastLike",
      "Sum", "Mean", "Max", "Min", "Constant"};
  if (IsDefaultDomain(node) && kOps.count(node.op_type()) != 0) return Status::Ok();
  return Unsupported(OpLabel(node) + " is not an elementwise op this generator handles");
}

Status EmitNode(const Node& node, ElementScope& scope) {
  FUSIONOPT_RETURN_IF_ERROR(CheckElementwiseOp(node));
  if (node.outputs().size() != 1 || node.output(0) == nullptr) {
    return Unsupported(Describe(node) + " with other than one output");
  }
  for (const Value* input : node.inputs()) {
    if (input != nullptr && !scope.Has(input)) return InternalError(Describe(node) + " reads a value not yet computed");
  }
  auto expression = Expression(node, scope);
  if (!expression.ok()) return expression.status();
  const Value* output = node.output(0);
  if (!LaneOf(output->dtype())) return Unsupported(Describe(node) + " gives " + std::string(NameOf(output->dtype())));
  scope.Bind(output, std::move(expression).value());
  return Status::Ok();
}

Result<std::string> Literal(const Tensor& tensor, int64_t index) {
  const DataType dtype = tensor.dtype();
  const size_t i = static_cast<size_t>(index);
  switch (dtype) {
    case DataType::kFloat: return FloatLiteral(tensor.values<float>()[i]);
    case DataType::kFloat16: return FloatLiteral(HalfToFloat(tensor.values<uint16_t>()[i]));
    case DataType::kBFloat16: return FloatLiteral(BFloat16ToFloat(tensor.values<uint16_t>()[i]));
    case DataType::kDouble: return DoubleLiteral(tensor.values<double>()[i]);
    case DataType::kBool: return std::string(tensor.values<uint8_t>()[i] != 0 ? "true" : "false");
    case DataType::kUint64: return "((unsigned long long)" + std::to_string(tensor.values<uint64_t>()[i]) + "ULL)";
    default: break;
  }
  if (!IsInteger(dtype) || !StorageType(dtype)) {
    return Unsupported("a constant of dtype " + std::string(NameOf(dtype)));
  }
  auto values = tensor.AsInt64s();
  if (!values) return Unsupported("a constant of dtype " + std::string(NameOf(dtype)));
  return IntegerLiteral(dtype, (*values)[i]);
}

std::string_view HelperFunctions() {
  return R"(// std::min / std::max semantics (the CPU engine's HardSigmoid, HardSwish, Celu).
template <typename T> __device__ __forceinline__ T fo_min(T a, T b) { return b < a ? b : a; }
template <typename T> __device__ __forceinline__ T fo_max(T a, T b) { return a < b ? b : a; }
// ONNX Max / Min: NaN in either operand gives NaN.
template <typename T> __device__ __forceinline__ T fo_nan_max(T a, T b) {
  return (a != a || b != b) ? a + b : (a > b ? a : b);
}
template <typename T> __device__ __forceinline__ T fo_nan_min(T a, T b) {
  return (a != a || b != b) ? a + b : (a < b ? a : b);
}
template <typename T> __device__ __forceinline__ T fo_clip(T x, T lo, T hi) {
  const T low = x < lo ? lo : x;
  return low > hi ? hi : low;
}
// fp16 / bf16 values are computed in fp32 and rounded after every op, like the CPU engine.
__device__ __forceinline__ float fo_round_half(float x) { return __half2float(__float2half_rn(x)); }
__device__ __forceinline__ float fo_round_bfloat16(float x) { return __bfloat162float(__float2bfloat16_rn(x)); }
// Integer Pow by squaring; negative exponents give 0 except for bases 1 and -1.
__device__ __forceinline__ long long fo_ipow(long long x, long long y) {
  if (y < 0) return x == 1 ? 1 : (x == -1 ? ((y & 1) ? -1 : 1) : 0);
  unsigned long long result = 1, base = (unsigned long long)x;
  for (unsigned long long e = (unsigned long long)y; e != 0; e >>= 1) {
    if (e & 1) result *= base;
    base *= base;
  }
  return (long long)result;
}
// Integer Mod with fmod=0: the sign follows the divisor (Python's %); 0 for a zero divisor.
__device__ __forceinline__ long long fo_python_mod(long long x, long long y) {
  if (y == 0) return 0;
  const long long r = x % y;
  return (r != 0 && ((r < 0) != (y < 0))) ? r + y : r;
}
)";
}

}  // namespace fusionopt::cuda::elementwise
