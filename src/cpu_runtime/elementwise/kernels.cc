// ONNX elementwise ops as one-instruction (or few-instruction) programs for the elementwise
// engine: the same mechanism that runs fused groups.
#include <cmath>
#include <limits>
#include <map>
#include <mutex>
#include <set>

#include "cpu_runtime/onednn/common.h"
#include "cpu_runtime/onednn/conv_layout_views.h"
#include "cpu_runtime/elementwise/expr.h"
#include "cpu_runtime/engine/kernels.h"
#include "cpu_runtime/quantized/quantize_expr.h"
#include "ir/legacy_opsets.h"

namespace fusionopt::cpu {
namespace {

using ew::Op;
using ew::ProgramBuilder;

ExprBuilder UnaryExpr(Op op, float alpha = 0.0f, float beta = 0.0f) {
  return [=](ProgramBuilder& b, const std::vector<int>& in) { return b.Emit(op, {in[0]}, alpha, beta); };
}

ExprBuilder BinaryExpr(Op op) {
  return [=](ProgramBuilder& b, const std::vector<int>& in) { return b.Emit(op, {in[0], in[1]}); };
}

// Sum, Max, Min, Mean over any number of inputs.
ExprBuilder VariadicExpr(Op op, bool mean) {
  return [=](ProgramBuilder& b, const std::vector<int>& in) -> Result<int> {
    int acc = in[0];
    for (size_t i = 1; i < in.size(); ++i) {
      FUSIONOPT_ASSIGN_OR_RETURN(acc, b.Emit(op, {acc, in[i]}));
    }
    if (!mean || in.size() == 1) return acc;  // a single input is stored as it is
    FUSIONOPT_ASSIGN_OR_RETURN(int count, b.Fill(static_cast<double>(in.size()), b.dtype(acc)));
    return b.Emit(Op::kDiv, {acc, count});
  };
}

ExprBuilder ClipExpr(std::optional<float> min_attr, std::optional<float> max_attr) {
  return [=](ProgramBuilder& b, const std::vector<int>& in) -> Result<int> {
    int x = in[0];
    int lo = in.size() > 1 ? in[1] : -1;
    int hi = in.size() > 2 ? in[2] : -1;
    if (lo < 0 && min_attr) {
      FUSIONOPT_ASSIGN_OR_RETURN(lo, b.Fill(*min_attr, b.dtype(x)));
    }
    if (hi < 0 && max_attr) {
      FUSIONOPT_ASSIGN_OR_RETURN(hi, b.Fill(*max_attr, b.dtype(x)));
    }
    if (lo >= 0 && hi >= 0) return b.Emit(Op::kClip, {x, lo, hi});
    if (lo >= 0) return b.Emit(Op::kMax, {x, lo});
    if (hi >= 0) return b.Emit(Op::kMin, {x, hi});
    return x;  // no bounds: the input is stored as it is
  };
}

// The two-operand ops that map to one instruction (OperandCountOf reads them too).
const std::map<std::string, Op> kBinary = {
      {"Add", Op::kAdd}, {"Sub", Op::kSub}, {"Mul", Op::kMul}, {"Div", Op::kDiv}, {"Pow", Op::kPow},
      {"PRelu", Op::kPRelu}, {"Equal", Op::kEqual}, {"Less", Op::kLess}, {"LessOrEqual", Op::kLessOrEqual},
      {"Greater", Op::kGreater}, {"GreaterOrEqual", Op::kGreaterOrEqual}, {"And", Op::kAnd},
      {"Or", Op::kOr}, {"Xor", Op::kXor}, {"BitwiseAnd", Op::kBitwiseAnd}, {"BitwiseOr", Op::kBitwiseOr},
      {"BitwiseXor", Op::kBitwiseXor}};

Result<ExprBuilder> ExprFor(const KernelInfo& info) {
  const Node& node = info.node;
  const std::string& op = node.op_type();
  static const std::map<std::string, Op> kUnary = {
      {"Neg", Op::kNeg}, {"Abs", Op::kAbs}, {"Sign", Op::kSign}, {"Reciprocal", Op::kReciprocal},
      {"Floor", Op::kFloor}, {"Ceil", Op::kCeil}, {"Round", Op::kRound}, {"Sqrt", Op::kSqrt},
      {"Exp", Op::kExp}, {"Log", Op::kLog}, {"Erf", Op::kErf}, {"Sin", Op::kSin}, {"Cos", Op::kCos},
      {"Tan", Op::kTan}, {"Asin", Op::kAsin}, {"Acos", Op::kAcos}, {"Atan", Op::kAtan},
      {"Sinh", Op::kSinh}, {"Cosh", Op::kCosh}, {"Tanh", Op::kTanh}, {"Asinh", Op::kAsinh},
      {"Acosh", Op::kAcosh}, {"Atanh", Op::kAtanh}, {"Relu", Op::kRelu}, {"Sigmoid", Op::kSigmoid},
      {"Softplus", Op::kSoftplus}, {"Softsign", Op::kSoftsign}, {"Mish", Op::kMish},
      {"IsNaN", Op::kIsNaN}, {"Not", Op::kNot}, {"BitwiseNot", Op::kBitwiseNot},
      {"HardSwish", Op::kHardSwish}};
  if (auto it = kUnary.find(op); it != kUnary.end()) return UnaryExpr(it->second);
  if (auto it = kBinary.find(op); it != kBinary.end()) return BinaryExpr(it->second);
  if (op == "LeakyRelu") return UnaryExpr(Op::kLeakyRelu, node.GetFloat("alpha", 0.01f));
  if (op == "Elu") return UnaryExpr(Op::kElu, node.GetFloat("alpha", 1.0f));
  if (op == "Celu") return UnaryExpr(Op::kCelu, node.GetFloat("alpha", 1.0f));
  if (op == "Selu") {
    // Selu-1 rounded its default coefficients to four decimals.
    const bool selu1 = info.opset < 6;
    return UnaryExpr(Op::kSelu, node.GetFloat("alpha", selu1 ? 1.6732f : 1.67326319217681884765625f),
                     node.GetFloat("gamma", selu1 ? 1.0507f : 1.05070102214813232421875f));
  }
  if (op == "ThresholdedRelu") return UnaryExpr(Op::kThresholdedRelu, node.GetFloat("alpha", 1.0f));
  if (op == "HardSigmoid") {
    return UnaryExpr(Op::kHardSigmoid, node.GetFloat("alpha", 0.2f), node.GetFloat("beta", 0.5f));
  }
  if (op == "Shrink") return UnaryExpr(Op::kShrink, node.GetFloat("lambd", 0.5f), node.GetFloat("bias", 0.0f));
  if (op == "Gelu") {
    std::string approximate = node.GetString("approximate", "none");
    if (approximate != "none" && approximate != "tanh") return info.Error("unknown approximate '" + approximate + "'");
    return UnaryExpr(approximate == "tanh" ? Op::kGeluTanh : Op::kGeluErf);
  }
  if (op == "IsInf") {
    bool positive = node.GetInt("detect_positive", 1) != 0, negative = node.GetInt("detect_negative", 1) != 0;
    if (positive && negative) return UnaryExpr(Op::kIsInf);
    if (positive) return UnaryExpr(Op::kIsInfPositive);
    if (negative) return UnaryExpr(Op::kIsInfNegative);
    return ExprBuilder([](ProgramBuilder& b, const std::vector<int>&) { return b.Fill(0, DataType::kBool); });
  }
  if (op == "Mod") return BinaryExpr(node.GetInt("fmod", 0) != 0 ? Op::kModFloat : Op::kModInteger);
  if (op == "BitShift") {
    std::string direction = node.GetString("direction", "");
    if (direction != "LEFT" && direction != "RIGHT") return info.Error("direction must be LEFT or RIGHT");
    return BinaryExpr(direction == "LEFT" ? Op::kBitShiftLeft : Op::kBitShiftRight);
  }
  if (op == "Where") {
    return ExprBuilder([](ProgramBuilder& b, const std::vector<int>& in) { return b.Emit(Op::kWhere, {in[0], in[1], in[2]}); });
  }
  if (op == "Sum") return VariadicExpr(Op::kAdd, false);
  if (op == "Mean") return VariadicExpr(Op::kAdd, true);
  if (op == "Max") return VariadicExpr(Op::kMax, false);
  if (op == "Min") return VariadicExpr(Op::kMin, false);
  if (op == "Clip") {
    std::optional<float> lo, hi;
    if (info.opset < 11) {
      lo = node.GetFloat("min", -std::numeric_limits<float>::max());
      hi = node.GetFloat("max", std::numeric_limits<float>::max());
    }
    return ClipExpr(lo, hi);
  }
  if (op == "Cast") {
    int64_t to = node.GetInt("to", 0);
    if (!IsKnownDataType(static_cast<int32_t>(to))) return info.Error("Cast has no valid 'to' type");
    return CastExpr(static_cast<DataType>(to));
  }
  if (op == "CastLike") return ExprBuilder();  // built per target dtype in Compute
  if (op == "QuantizeLinear" || op == "DequantizeLinear") return LinearQuantizationExpr(info);
  return info.Error("not an elementwise op");
}

class ElementwiseKernel : public Kernel {
 public:
  Status Init(const KernelInfo& info) {
    FUSIONOPT_ASSIGN_OR_RETURN(expr_, ElementwiseExpr(info));
    label_ = info.node.op_type();
    cast_like_ = label_ == "CastLike";
    return Status::Ok();
  }

  Status Compute(KernelContext& context) override {
    std::vector<const RtTensor*> present;
    std::vector<DataType> dtypes;
    std::vector<int> registers;
    // CastLike's second input contributes only its dtype, not data or shape.
    size_t data_inputs = cast_like_ ? 1 : context.num_inputs();
    if (cast_like_ && !context.has_input(1)) return InvalidModel("CastLike needs its second input");
    for (size_t i = 0; i < data_inputs; ++i) {
      if (!context.has_input(i)) {
        registers.push_back(-1);
        continue;
      }
      registers.push_back(static_cast<int>(present.size()));
      present.push_back(context.input(i));
      dtypes.push_back(context.input(i)->dtype());
    }
    if (present.empty() || registers[0] < 0) return InvalidModel("the first input is missing");
    std::optional<DataType> cast_target;
    if (cast_like_) cast_target = context.input(1)->dtype();
    FUSIONOPT_ASSIGN_OR_RETURN(const ew::Program* program, ProgramFor(dtypes, registers, cast_target));
    DataType out_dtype = program->register_dtypes[static_cast<size_t>(program->outputs[0])];
    const layouts::Prepared prepared =
        layouts::PrepareOperands(present, *context.allocator, onednn::TakesConvLayouts(out_dtype));
    FUSIONOPT_ASSIGN_OR_RETURN(std::vector<int64_t> dims, ew::BroadcastDims(present));
    RtTensor& output = context.Output(0, out_dtype, dims);
    FUSIONOPT_RETURN_IF_ERROR(ew::Evaluate(*program, present, {&output}));
    output = layouts::FinishResult(std::move(output), prepared.layout, context.conv_layout_output, *context.allocator);
    return Status::Ok();
  }

  // Operands in convolution layouts are read in place where they can be (conv_layout_views.h).
  bool ReadsConvLayouts() const override { return true; }

 private:
  // Programs depend only on the input dtypes (and which optional inputs are present).
  Result<const ew::Program*> ProgramFor(const std::vector<DataType>& dtypes, const std::vector<int>& registers,
                                        std::optional<DataType> cast_target) {
    std::vector<int> key;
    for (DataType dtype : dtypes) key.push_back(static_cast<int>(dtype));
    key.insert(key.end(), registers.begin(), registers.end());
    if (cast_target) key.push_back(1000 + static_cast<int>(*cast_target));
    std::lock_guard<std::mutex> lock(mutex_);
    auto it = programs_.find(key);
    if (it != programs_.end()) return &it->second;
    ProgramBuilder builder(dtypes);
    ExprBuilder expr = cast_target ? CastExpr(*cast_target) : expr_;
    FUSIONOPT_ASSIGN_OR_RETURN(int result, expr(builder, registers));
    builder.AddOutput(result);
    return &programs_.emplace(key, builder.Finish(label_)).first->second;
  }

  ExprBuilder expr_;
  std::string label_;
  bool cast_like_ = false;
  std::mutex mutex_;
  std::map<std::vector<int>, ew::Program> programs_;
};

}  // namespace

ExprBuilder CastExpr(DataType to) {
  return [=](ProgramBuilder& b, const std::vector<int>& in) -> Result<int> {
    return b.Convert(in[0], to);  // the same type: stored as it is
  };
}

namespace {

// How many inputs an op takes and which of them may be omitted ("" in the model). The
// expressions index their operands without looking, so every caller (kernels, fused
// programs, the fusion passes' checks) relies on this gate: a Mul with one input is refused
// here instead of reading a register that does not exist.
struct OperandCount {
  size_t min = 1;
  size_t max = 1;
  size_t required = 1;  // the first `required` inputs must be present
};

OperandCount OperandCountOf(const std::string& op, int64_t opset) {
  static const std::set<std::string> kVariadic = {"Sum", "Mean", "Max", "Min"};
  constexpr size_t kUnbounded = std::numeric_limits<size_t>::max();
  if (kBinary.count(op) || op == "Mod" || op == "BitShift" || op == "CastLike") return {2, 2, 2};
  if (op == "Where") return {3, 3, 3};
  if (kVariadic.count(op)) return {1, kUnbounded, kUnbounded};
  if (op == "Clip" && opset >= 11) return {1, 3, 1};  // min and max became optional inputs
  if (op == "QuantizeLinear" || op == "DequantizeLinear") return {2, 3, 2};  // the zero point may be omitted
  return {};
}

Status CheckOperandCount(const KernelInfo& info) {
  const Node& node = info.node;
  OperandCount count = OperandCountOf(node.op_type(), info.opset);
  const size_t inputs = node.inputs().size();
  auto expected = [&] {
    if (count.min == count.max) return std::to_string(count.min);
    if (count.max == std::numeric_limits<size_t>::max()) return "at least " + std::to_string(count.min);
    return std::to_string(count.min) + " to " + std::to_string(count.max);
  };
  if (inputs < count.min || inputs > count.max) {
    return info.Error("has " + std::to_string(inputs) + " input" + (inputs == 1 ? "" : "s") + "; " +
                      node.op_type() + " takes " + expected());
  }
  for (size_t i = 0; i < inputs && i < count.required; ++i) {
    if (node.input(i) == nullptr) return info.Error("input " + std::to_string(i) + " is required but omitted");
  }
  if (node.outputs().size() != 1) {
    return info.Error("has " + std::to_string(node.outputs().size()) + " outputs; " + node.op_type() + " has 1");
  }
  return Status::Ok();
}

}  // namespace

Result<ExprBuilder> ElementwiseExpr(const KernelInfo& info) {
  FUSIONOPT_RETURN_IF_ERROR(CheckLegacyNode(info.node, info.opset));
  FUSIONOPT_RETURN_IF_ERROR(CheckOperandCount(info));
  return ExprFor(info);
}

void RegisterElementwiseKernels(KernelRegistry& registry) {
  // Ops with versions before opset 7: those versions compute the same, read per opset (Selu-1's
  // defaults), or are refused by CheckLegacyNode (docs/ops.md, "Opsets 1–6").
  registry.Register("", {"Neg", "Abs", "Reciprocal", "Floor", "Ceil", "Sqrt", "Exp", "Log", "Tanh", "Relu",
                         "Sigmoid", "Softplus", "Softsign", "Not", "LeakyRelu", "Elu", "Selu", "HardSigmoid",
                         "Add", "Sub", "Mul", "Div", "Pow", "PRelu", "Equal", "Less", "Greater", "And", "Or",
                         "Xor", "Sum", "Mean", "Max", "Min", "Clip", "Cast"},
                    1, kAnyOpset, Make<ElementwiseKernel>());
  // The rest from the opset that introduced them, so a model cannot use an op before it
  // existed (and a fusion pass asking the registry learns the same).
  const std::vector<std::pair<int64_t, std::vector<std::string>>> introduced = {
      {7, {"Sin", "Cos", "Tan", "Asin", "Acos", "Atan"}},
      {9, {"Sign", "Erf", "Sinh", "Cosh", "Asinh", "Acosh", "Atanh", "IsNaN", "Shrink", "Where"}},
      {10, {"IsInf", "ThresholdedRelu", "Mod"}},
      {11, {"Round", "BitShift"}},
      {12, {"Celu", "LessOrEqual", "GreaterOrEqual"}},
      {14, {"HardSwish"}},
      {15, {"CastLike"}},
      {18, {"Mish", "BitwiseNot", "BitwiseAnd", "BitwiseOr", "BitwiseXor"}},
      {20, {"Gelu"}},
  };
  for (const auto& [since, ops] : introduced) registry.Register("", ops, since, kAnyOpset, Make<ElementwiseKernel>());
}

}  // namespace fusionopt::cpu
