#include "ir/op_class.h"

#include "ir/constant_value.h"

#include <string>
#include <unordered_map>

namespace fusionopt {
namespace {

using ClassTable = std::unordered_map<std::string_view, OpClass>;

const ClassTable& DefaultDomainClasses() {
  static const ClassTable table = [] {
    ClassTable t;
    auto add = [&t](OpClass op_class, std::initializer_list<std::string_view> ops) {
      for (std::string_view op : ops) t.emplace(op, op_class);
    };
    add(OpClass::kElementwise,
        {"Abs", "Acos", "Acosh", "Add", "And", "Asin", "Asinh", "Atan", "Atanh", "BitShift", "BitwiseAnd",
         "BitwiseNot", "BitwiseOr", "BitwiseXor", "Cast", "CastLike", "Ceil", "Celu", "Clip", "Cos", "Cosh", "Div",
         "Elu", "Equal", "Erf", "Exp", "Floor", "Gelu", "Greater", "GreaterOrEqual", "HardSigmoid", "HardSwish",
         "IsInf", "IsNaN", "LeakyRelu", "Less", "LessOrEqual", "Log", "Max", "Mean", "Min", "Mish", "Mod", "Mul",
         "Neg", "Not", "Or", "Pow", "PRelu", "Reciprocal", "Relu", "Round", "Selu", "Shrink", "Sigmoid", "Sign",
         "Sin", "Sinh", "Softplus", "Softsign", "Sqrt", "Sub", "Sum", "Tan", "Tanh", "ThresholdedRelu", "Where",
         "Xor",
         // Per tensor and per axis, an element's result needs only its own value and its
         // channel's parameters (blocked quantization too: the scale is broadcast in blocks).
         "QuantizeLinear", "DequantizeLinear"});
    add(OpClass::kReduction,
        {"ArgMax", "ArgMin", "CumSum", "Hardmax", "LayerNormalization", "LogSoftmax", "ReduceL1", "ReduceL2",
         "ReduceLogSum", "ReduceLogSumExp", "ReduceMax", "ReduceMean", "ReduceMin", "ReduceProd", "ReduceSum",
         "ReduceSumSquare", "RMSNormalization", "Softmax", "TopK", "MeanVarianceNormalization",
         // Its scale and zero point come from the whole input's range.
         "DynamicQuantizeLinear"});
    // Attention (opset 23): two products around a softmax, run as one tiled kernel.
    // The integer contractions take their operands in the float ones' positions (flops alike).
    add(OpClass::kContraction,
        {"Attention", "Conv", "ConvTranspose", "Einsum", "Gemm", "MatMul", "MatMulInteger", "ConvInteger"});
    add(OpClass::kWindow,
        {"AveragePool", "BatchNormalization", "GlobalAveragePool", "GlobalLpPool", "GlobalMaxPool",
         "InstanceNormalization", "LpPool", "LRN", "MaxPool"});
    add(OpClass::kDataMovement,
        {"Compress", "Concat", "ConstantOfShape", "DepthToSpace", "Expand", "EyeLike", "Gather", "GatherElements",
         "GatherND", "NonZero", "OneHot", "Pad", "Range", "Resize", "ReverseSequence", "RotaryEmbedding", "Scatter",
         "ScatterElements",
         "ScatterND", "Slice", "SpaceToDepth", "Split", "Tile", "Transpose", "Trilu", "Upsample"});
    add(OpClass::kView, {"Dropout", "Flatten", "Identity", "Reshape", "Squeeze", "Unsqueeze"});
    add(OpClass::kShape, {"Constant", "Shape", "Size"});
    add(OpClass::kControlFlow, {"If", "Loop", "Scan"});
    return t;
  }();
  return table;
}

// Ops that draw random numbers: their results differ per run, so nothing may fold, merge or
// duplicate them.
bool IsRandom(std::string_view op_type) {
  return op_type == "RandomNormal" || op_type == "RandomNormalLike" || op_type == "RandomUniform" ||
         op_type == "RandomUniformLike" || op_type == "Bernoulli" || op_type == "Multinomial";
}

}  // namespace

std::string_view NameOf(OpClass op_class) {
  switch (op_class) {
    case OpClass::kElementwise: return "elementwise";
    case OpClass::kReduction: return "reduction";
    case OpClass::kContraction: return "contraction";
    case OpClass::kWindow: return "window";
    case OpClass::kDataMovement: return "data-movement";
    case OpClass::kView: return "view";
    case OpClass::kShape: return "shape";
    case OpClass::kControlFlow: return "control-flow";
    case OpClass::kFused: return "fused";
    case OpClass::kOpaque: return "opaque";
  }
  return "opaque";
}

OpClass ClassifyOp(std::string_view domain, std::string_view op_type) {
  if (domain == kFusionDomain) return OpClass::kFused;
  // onnxruntime's own QuantizeLinear and DequantizeLinear compute what ONNX's do.
  if (domain == "com.microsoft" && (op_type == "QuantizeLinear" || op_type == "DequantizeLinear")) {
    return OpClass::kElementwise;
  }
  if (!domain.empty() && domain != "ai.onnx") return OpClass::kOpaque;
  const ClassTable& table = DefaultDomainClasses();
  auto it = table.find(op_type);
  return it == table.end() ? OpClass::kOpaque : it->second;
}

OpClass ClassifyOp(const Node& node) {
  OpClass op_class = ClassifyOp(node.domain(), node.op_type());
  // Dropout trains when its training_mode input is not a constant false (or, before opset 7,
  // when is_test is 0); then it draws a mask and is neither a view nor pure.
  if (node.op_type() == "Dropout" && op_class == OpClass::kView) {
    const Value* training = node.input(2);
    if (training != nullptr) {
      TensorPtr mode = ConstantValueOf(*training, InitializerRule::kFeedsOverride);
      bool constant_false = mode != nullptr && mode->dtype() == DataType::kBool && mode->NumElements() == 1 &&
                            mode->bytes()[0] == 0;
      if (!constant_false) return OpClass::kOpaque;
    }
    if (node.GetInt("is_test", 1) == 0) return OpClass::kOpaque;
  }
  return op_class;
}

bool IsPure(const Node& node) {
  if (IsRandom(node.op_type())) return false;
  OpClass op_class = ClassifyOp(node);
  return op_class != OpClass::kOpaque && op_class != OpClass::kControlFlow;
}

namespace {

// A Split whose input has only unit dims before the axis: every part is a contiguous slice of
// the input, which a runtime hands out as a view (the CPU runtime does).
bool SplitsIntoSlices(const Node& node) {
  if (node.op_type() != "Split" || !IsDefaultDomain(node)) return false;
  const Value* input = node.input(0);
  if (input == nullptr || !input->shape()) return false;
  const Shape& shape = *input->shape();
  const int64_t rank = static_cast<int64_t>(shape.size());
  int64_t axis = node.GetInt("axis", 0);
  if (axis < 0) axis += rank;
  if (axis < 0 || axis >= rank) return false;
  for (int64_t i = 0; i < axis; ++i) {
    if (!shape[static_cast<size_t>(i)].is_known() || shape[static_cast<size_t>(i)].value != 1) return false;
  }
  return true;
}

}  // namespace

bool LaunchesKernel(const Node& node) {
  OpClass op_class = ClassifyOp(node);
  if (SplitsIntoSlices(node)) return false;
  return op_class != OpClass::kView && op_class != OpClass::kShape && op_class != OpClass::kControlFlow;
}

namespace {

bool IsIntegerOrBool(DataType dtype) {
  switch (dtype) {
    case DataType::kInt8: case DataType::kInt16: case DataType::kInt32: case DataType::kInt64:
    case DataType::kUint8: case DataType::kUint16: case DataType::kUint32: case DataType::kUint64:
    case DataType::kBool:
      return true;
    default:
      return false;
  }
}

bool MayRunAhead(const Node& node) {
  OpClass op_class = ClassifyOp(node);
  return IsPure(node) && node.Subgraphs().empty() && op_class != OpClass::kFused;
}

}  // namespace

bool ClassifyLaunchFree(const Graph& graph, const Node& node, InitializerRule initializers,
                        LaunchFreeNodes& free) {
  if (!MayRunAhead(node)) return false;
  // A value is constant (host) when a load-time (host) node of this graph produced it.
  auto produced_by = [&](const Value* value, const std::unordered_set<const Node*>& nodes) {
    return value->producer() != nullptr && value->producer()->graph() == &graph && nodes.count(value->producer()) > 0;
  };
  auto is_constant = [&](const Value* value) {
    return produced_by(value, free.load_time) ||
           (value->graph() == &graph && ConstantValueOf(*value, initializers) != nullptr);
  };
  auto is_host = [&](const Value* value) {
    return produced_by(value, free.host) || (is_constant(value) && IsIntegerOrBool(value->dtype()));
  };
  bool all_constant = true, all_host = true;
  for (const Value* input : node.inputs()) {
    if (input == nullptr) continue;
    all_constant = all_constant && is_constant(input);
    all_host = all_host && is_host(input);
  }
  if (all_constant) {
    free.load_time.insert(&node);
    return true;
  }
  const bool shape_op = node.op_type() == "Shape" || node.op_type() == "Size";
  bool integer_outputs = true;
  for (const Value* output : node.outputs()) {
    if (output != nullptr && !IsIntegerOrBool(output->dtype())) integer_outputs = false;
  }
  if (shape_op || (all_host && integer_outputs && ClassifyOp(node) != OpClass::kContraction)) {
    free.host.insert(&node);
    return true;
  }
  return false;
}

LaunchFreeNodes FindLaunchFreeNodes(const Graph& graph, InitializerRule initializers) {
  LaunchFreeNodes free;
  for (const auto& node : graph.nodes()) ClassifyLaunchFree(graph, *node, initializers, free);
  return free;
}

int64_t EstimateKernelLaunches(const Graph& graph, InitializerRule initializers) {
  LaunchFreeNodes free = FindLaunchFreeNodes(graph, initializers);
  int64_t launches = 0;
  for (const auto& node : graph.nodes()) {
    if (LaunchesKernel(*node) && !free.contains(node.get())) ++launches;
    for (const Graph* subgraph : node->Subgraphs()) launches += EstimateKernelLaunches(*subgraph, initializers);
  }
  return launches;
}

int64_t EstimateKernelLaunches(const Model& model) {
  return EstimateKernelLaunches(*model.graph, InitializerRuleOf(model));
}

}  // namespace fusionopt
