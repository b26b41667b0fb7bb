// Elementwise ops: unary maps, broadcasting binary/variadic ops, comparisons, casts.
#include "shape_inference/context.h"

namespace fusionopt::shape_inference {
namespace {

std::vector<size_t> PresentInputs(const InferenceContext& context) {
  std::vector<size_t> present;
  for (size_t i = 0; i < context.num_inputs(); ++i) {
    if (context.HasInput(i)) present.push_back(i);
  }
  return present;
}

DataType FirstKnownDtype(const InferenceContext& context, const std::vector<size_t>& inputs) {
  for (size_t input : inputs) {
    if (context.InputDtype(input) != DataType::kUndefined) return context.InputDtype(input);
  }
  return DataType::kUndefined;
}

// Output 0 has input 0's dtype and shape.
void SameAsFirstInput(InferenceContext& context) { PropagateInput(context, 0, 0); }

// Inputs share one type T and broadcast; the output is T (Add, Max, Sum, ...).
void BroadcastKeepType(InferenceContext& context) {
  std::vector<size_t> inputs = PresentInputs(context);
  context.SetOutputType(0, FirstKnownDtype(context, inputs), BroadcastInputs(context, inputs));
}

// Pow's exponent may have another type than the base; the output follows the base.
void PowRule(InferenceContext& context) {
  context.SetOutputType(0, context.InputDtype(0), BroadcastInputs(context, {0, 1}));
}

// Comparisons and logical ops broadcast and produce bool.
void BroadcastToBool(InferenceContext& context) {
  context.SetOutputType(0, DataType::kBool, BroadcastInputs(context, PresentInputs(context)));
}

void IsFiniteTestRule(InferenceContext& context) {
  const Shape* shape = context.InputShape(0);
  context.SetOutputType(0, DataType::kBool, shape ? std::optional<Shape>(*shape) : std::nullopt);
}

// Where(condition, X, Y): all three broadcast; the output takes X/Y's type.
void WhereRule(InferenceContext& context) {
  context.SetOutputType(0, FirstKnownDtype(context, {1, 2}), BroadcastInputs(context, {0, 1, 2}));
}

// PRelu's slope broadcasts unidirectionally to X, so the output is X's shape.
void PReluRule(InferenceContext& context) {
  const Shape* x = context.InputShape(0);
  const Shape* slope = context.InputShape(1);
  if (x != nullptr && slope != nullptr) {
    std::optional<Shape> combined = BroadcastShapes(*x, *slope);
    if (!combined || combined->size() != x->size()) {
      context.Warn("slope shape " + ShapeToString(*slope) + " does not broadcast to X shape " +
                   ShapeToString(*x));
      context.SetOutputDtype(0, context.InputDtype(0));
      return;
    }
  }
  PropagateInput(context, 0, 0);
}

void CastRule(InferenceContext& context) {
  int64_t to = context.node().GetInt("to", 0);
  if (!IsKnownDataType(static_cast<int32_t>(to))) {
    context.Warn("attribute 'to' is missing or not a known data type");
  } else {
    context.SetOutputDtype(0, static_cast<DataType>(to));
  }
  if (const Shape* shape = context.InputShape(0)) context.SetOutputShape(0, *shape);
}

void CastLikeRule(InferenceContext& context) {
  context.SetOutputDtype(0, context.InputDtype(1));
  if (const Shape* shape = context.InputShape(0)) context.SetOutputShape(0, *shape);
}

// Dropout's mask has the data's shape; it is bool from opset 10, the data's type before.
void DropoutRule(InferenceContext& context) {
  PropagateInput(context, 0, 0);
  DataType mask_type = context.opset() >= 10 ? DataType::kBool : context.InputDtype(0);
  const Shape* shape = context.InputShape(0);
  context.SetOutputType(1, mask_type, shape ? std::optional<Shape>(*shape) : std::nullopt);
}

}  // namespace

void RegisterElementwiseRules(RuleRegistry& registry) {
  registry.AddTypeRule("", {"Abs",        "Acos",        "Acosh",
                            "Asin",       "Asinh",       "Atan",
                            "Atanh",      "Ceil",        "Celu",
                            "Cos",        "Cosh",        "Elu",
                            "Erf",        "Exp",         "Floor",
                            "Gelu",       "HardSigmoid", "HardSwish",
                            "Identity",   "LeakyRelu",   "Log",
                            "Mish",       "Neg",         "Not",
                            "Reciprocal", "Relu",        "Round",
                            "Selu",       "Shrink",      "Sigmoid",
                            "Sign",       "Sin",         "Sinh",
                            "Softplus",   "Softsign",    "Sqrt",
                            "Tan",        "Tanh",        "ThresholdedRelu",
                            "Clip",       "CumSum",      "Trilu"},
                       SameAsFirstInput);
  registry.AddTypeRule("",
                       {"Add", "Sub", "Mul", "Div", "Mod", "BitShift", "Max", "Min", "Mean", "Sum"},
                       BroadcastKeepType);
  registry.AddTypeRule("", {"Pow"}, PowRule);
  registry.AddTypeRule(
      "", {"And", "Or", "Xor", "Equal", "Greater", "GreaterOrEqual", "Less", "LessOrEqual"},
      BroadcastToBool);
  registry.AddTypeRule("", {"IsInf", "IsNaN"}, IsFiniteTestRule);
  registry.AddTypeRule("", {"Where"}, WhereRule);
  registry.AddTypeRule("", {"PRelu"}, PReluRule);
  registry.AddTypeRule("", {"Cast"}, CastRule);
  registry.AddTypeRule("", {"CastLike"}, CastLikeRule);
  registry.AddTypeRule("", {"Dropout"}, DropoutRule);
}

}  // namespace fusionopt::shape_inference
