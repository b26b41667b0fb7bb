// Quantization ops: ONNX's QuantizeLinear, DequantizeLinear, DynamicQuantizeLinear and the
// integer contractions (MatMulInteger, ConvInteger, QLinearMatMul, QLinearConv), and the
// com.microsoft ops onnxruntime's quantizer writes (QLinear* wrappers of float ops, QGemm,
// DynamicQuantizeMatMul, MatMulIntegerToFloat, MatMulNBits).
//
// A quantized op has the shape of its float op, read from the positions where the quantized
// form keeps the float operands (QLinearConv's weights are input 3, QLinearConcat's tensors
// every third input from 2); its element type is the output zero point's, else the quantizer's
// default (uint8), or float for ops that dequantize.
#include "shape_inference/context.h"

namespace fusionopt::shape_inference {
namespace {

constexpr std::string_view kMicrosoft = "com.microsoft";

// The dtype of input `zero_point` when present, else `fallback`.
DataType ZeroPointDtype(const InferenceContext& context, size_t zero_point, DataType fallback) {
  if (!context.HasInput(zero_point)) return fallback;
  DataType dtype = context.InputDtype(zero_point);
  return dtype == DataType::kUndefined ? fallback : dtype;
}

void SetShape(InferenceContext& context, size_t output, const std::optional<Shape>& shape) {
  if (shape) context.SetOutputShape(output, *shape);
}

// y = saturate(round(x / scale) + zero_point): the zero point's type, or `output_dtype`
// (opset 21), or uint8.
void QuantizeLinearRule(InferenceContext& context) {
  DataType dtype = ZeroPointDtype(context, 2, DataType::kUint8);
  if (int64_t output_dtype = context.node().GetInt("output_dtype", 0); output_dtype != 0) {
    if (IsKnownDataType(static_cast<int32_t>(output_dtype))) dtype = static_cast<DataType>(output_dtype);
  }
  const Shape* x = context.InputShape(0);
  context.SetOutputType(0, dtype, x ? std::optional<Shape>(*x) : std::nullopt);
}

// y = (x - zero_point) * scale: the scale's type, or `output_dtype` (opset 23).
void DequantizeLinearRule(InferenceContext& context) {
  DataType dtype = context.InputDtype(1);
  if (int64_t output_dtype = context.node().GetInt("output_dtype", 0); output_dtype != 0) {
    if (IsKnownDataType(static_cast<int32_t>(output_dtype))) dtype = static_cast<DataType>(output_dtype);
  }
  const Shape* x = context.InputShape(0);
  context.SetOutputType(0, dtype, x ? std::optional<Shape>(*x) : std::nullopt);
}

// (y: uint8 of x's shape, y_scale: float scalar, y_zero_point: uint8 scalar).
void DynamicQuantizeLinearRule(InferenceContext& context) {
  const Shape* x = context.InputShape(0);
  context.SetOutputType(0, DataType::kUint8, x ? std::optional<Shape>(*x) : std::nullopt);
  context.SetOutputType(1, DataType::kFloat, Shape{});
  context.SetOutputType(2, DataType::kUint8, Shape{});
}

void MatMulIntegerRule(InferenceContext& context) {
  context.SetOutputDtype(0, DataType::kInt32);
  SetShape(context, 0, MatMulOutputShape(context, 0, 1));
}

void ConvIntegerRule(InferenceContext& context) {
  context.SetOutputDtype(0, DataType::kInt32);
  SetShape(context, 0, ConvOutputShape(context, 0, 1));
}

// (a, a_scale, a_zero_point, b, b_scale, b_zero_point, y_scale, y_zero_point).
void QLinearMatMulRule(InferenceContext& context) {
  context.SetOutputDtype(0, ZeroPointDtype(context, 7, DataType::kUint8));
  SetShape(context, 0, MatMulOutputShape(context, 0, 3));
}

// (x, x_scale, x_zero_point, w, w_scale, w_zero_point, y_scale, y_zero_point, B).
void QLinearConvRule(InferenceContext& context) {
  context.SetOutputDtype(0, ZeroPointDtype(context, 7, DataType::kUint8));
  SetShape(context, 0, ConvOutputShape(context, 0, 3));
}

// QLinearAdd, QLinearMul: (A, A_scale, A_zero_point, B, B_scale, B_zero_point, C_scale, C_zero_point).
void QLinearBinaryRule(InferenceContext& context) {
  context.SetOutputType(0, context.InputDtype(0), BroadcastInputs(context, {0, 3}));
}

// QLinearSigmoid, QLinearLeakyRelu, QLinearSoftmax: (X, X_scale, X_zero_point, Y_scale, Y_zero_point).
void QLinearUnaryRule(InferenceContext& context) { PropagateInput(context, 0, 0); }

// channels_last pools keep (N, spatial..., C); the float rules read (N, C, spatial...).
std::optional<Shape> ChannelsFirst(const Shape& shape) {
  if (shape.size() < 3) return std::nullopt;
  Shape moved{shape.front(), shape.back()};
  moved.insert(moved.end(), shape.begin() + 1, shape.end() - 1);
  return moved;
}

std::optional<Shape> ChannelsLast(const std::optional<Shape>& shape) {
  if (!shape || shape->size() < 3) return shape;
  Shape moved{shape->front()};
  moved.insert(moved.end(), shape->begin() + 2, shape->end());
  moved.push_back((*shape)[1]);
  return moved;
}

// QLinearAveragePool, QLinearGlobalAveragePool: (X, x_scale, x_zero_point, y_scale,
// y_zero_point), in (N, C, spatial...) or, with channels_last, (N, spatial..., C).
void QLinearPoolRule(InferenceContext& context) {
  context.SetOutputDtype(0, context.InputDtype(0));
  const Shape* x = context.InputShape(0);
  if (x == nullptr) return;
  const bool channels_last = context.node().GetInt("channels_last", 0) != 0;
  std::optional<Shape> input = channels_last ? ChannelsFirst(*x) : std::optional<Shape>(*x);
  if (!input) return;
  const bool global = context.node().op_type() == "QLinearGlobalAveragePool";
  std::optional<Shape> out = global ? GlobalPoolOutputShape(&*input) : PoolOutputShape(context, &*input);
  SetShape(context, 0, channels_last ? ChannelsLast(out) : out);
}

// (Y_scale, Y_zero_point, then (X, X_scale, X_zero_point) per input).
void QLinearConcatRule(InferenceContext& context) {
  context.SetOutputDtype(0, ZeroPointDtype(context, 1, DataType::kUint8));
  std::vector<size_t> tensors;
  for (size_t input = 2; input < context.num_inputs(); input += 3) tensors.push_back(input);
  SetShape(context, 0, ConcatOutputShape(context, tensors));
}

// (A, a_scale, a_zero_point, B, b_scale, b_zero_point, C, y_scale, y_zero_point): float
// without y_scale, else the output zero point's type.
void QGemmRule(InferenceContext& context) {
  DataType dtype = context.HasInput(7) ? ZeroPointDtype(context, 8, DataType::kUint8) : DataType::kFloat;
  context.SetOutputDtype(0, dtype);
  SetShape(context, 0, GemmOutputShape(context, 0, 3));
}

// DynamicQuantizeMatMul (A, B, b_scale, ...) and MatMulIntegerToFloat (A, B, a_scale, ...):
// the float type of input `scale`.
template <size_t kScale>
void MatMulToFloatRule(InferenceContext& context) {
  context.SetOutputDtype(0, context.InputDtype(kScale));
  SetShape(context, 0, MatMulOutputShape(context, 0, 1));
}

// (A [..., K], B packed [N, K/block, blob], scales, ...) -> [..., N] of A's type.
void MatMulNBitsRule(InferenceContext& context) {
  context.SetOutputDtype(0, context.InputDtype(0));
  const Shape* a = context.InputShape(0);
  const int64_t n = context.node().GetInt("N", 0);
  if (a == nullptr || a->empty() || n <= 0) return;
  Shape out = *a;
  out.back() = Dim::Known(n);
  context.SetOutputShape(0, out);
}

}  // namespace

void RegisterQuantizationRules(RuleRegistry& registry) {
  // onnxruntime also registers QuantizeLinear and DequantizeLinear in its own domain (the
  // opset-13 form, with 16-bit and 4-bit types before ONNX had them).
  for (std::string_view domain : {std::string_view(), kMicrosoft}) {
    registry.AddTypeRule(domain, {"QuantizeLinear"}, QuantizeLinearRule);
    registry.AddTypeRule(domain, {"DequantizeLinear"}, DequantizeLinearRule);
  }
  registry.AddTypeRule("", {"DynamicQuantizeLinear"}, DynamicQuantizeLinearRule);
  registry.AddTypeRule("", {"MatMulInteger"}, MatMulIntegerRule);
  registry.AddTypeRule("", {"ConvInteger"}, ConvIntegerRule);
  registry.AddTypeRule("", {"QLinearMatMul"}, QLinearMatMulRule);
  registry.AddTypeRule("", {"QLinearConv"}, QLinearConvRule);
  registry.AddTypeRule(kMicrosoft, {"QLinearAdd", "QLinearMul"}, QLinearBinaryRule);
  registry.AddTypeRule(kMicrosoft, {"QLinearSigmoid", "QLinearLeakyRelu", "QLinearSoftmax"}, QLinearUnaryRule);
  registry.AddTypeRule(kMicrosoft, {"QLinearAveragePool", "QLinearGlobalAveragePool"}, QLinearPoolRule);
  registry.AddTypeRule(kMicrosoft, {"QLinearConcat"}, QLinearConcatRule);
  registry.AddTypeRule(kMicrosoft, {"QGemm"}, QGemmRule);
  registry.AddTypeRule(kMicrosoft, {"DynamicQuantizeMatMul"}, MatMulToFloatRule<2>);
  registry.AddTypeRule(kMicrosoft, {"MatMulIntegerToFloat"}, MatMulToFloatRule<2>);
  registry.AddTypeRule(kMicrosoft, {"MatMulNBits"}, MatMulNBitsRule);
}

}  // namespace fusionopt::shape_inference
