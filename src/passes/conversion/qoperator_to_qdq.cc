// qoperator-to-qdq (O2): its rewrite, conditions and limits are in qoperator_to_qdq.h.
#include "passes/conversion/qoperator_to_qdq.h"

#include <optional>

#include "ir/constant_value.h"
#include "patterns/quantized/contraction.h"

namespace fusionopt::passes {
namespace {

constexpr std::string_view kMicrosoft = "com.microsoft";

// One quantized operand of a QOperator op: its value, scale and zero point input positions.
struct Operand {
  size_t value, scale, zero;
};

// What a QOperator op expands to: the float op, its quantized operands, the output's scale and
// zero point positions (nullopt: the op writes float), and for a contraction the constant
// weights' operand and the integer bias's position.
struct Form {
  std::string float_op;
  std::vector<Operand> operands;
  std::optional<Operand> output;  // value unused: the node's output 0
  int weights = -1;               // index into operands
  int bias = -1;                  // input position of the int32 bias
};

std::optional<Form> FormOf(const Node& node) {
  const std::string& op = node.op_type();
  if (IsDefaultDomain(node)) {
    if (op == "QLinearConv") return Form{"Conv", {{0, 1, 2}, {3, 4, 5}}, Operand{0, 6, 7}, 1, 8};
    if (op == "QLinearMatMul") return Form{"MatMul", {{0, 1, 2}, {3, 4, 5}}, Operand{0, 6, 7}, 1, -1};
    return std::nullopt;
  }
  if (node.domain() != kMicrosoft) return std::nullopt;
  if (op == "QGemm") {
    Form form{"Gemm", {{0, 1, 2}, {3, 4, 5}}, Operand{0, 7, 8}, 1, 6};
    if (node.input(7) == nullptr) form.output.reset();  // no y_scale: Gemm's float result
    return form;
  }
  if (op == "QLinearAdd" || op == "QLinearMul") {
    return Form{op == "QLinearAdd" ? "Add" : "Mul", {{0, 1, 2}, {3, 4, 5}}, Operand{0, 6, 7}, -1, -1};
  }
  if (op == "QLinearSigmoid") return Form{"Sigmoid", {{0, 1, 2}}, Operand{0, 3, 4}, -1, -1};
  if (op == "QLinearLeakyRelu") return Form{"LeakyRelu", {{0, 1, 2}}, Operand{0, 3, 4}, -1, -1};
  return std::nullopt;
}

class Expander {
 public:
  Expander(Graph& graph, PassContext& context)
      : graph_(graph), context_(context), opset_(context.model().OpsetFor("").value_or(0)),
        rule_(InitializerRuleOf(context.model())) {}

  bool Run() {
    std::vector<std::pair<Node*, Form>> candidates;
    for (const auto& node : graph_.nodes()) {
      if (std::optional<Form> form = FormOf(*node)) candidates.emplace_back(node.get(), std::move(*form));
    }
    bool changed = false;
    for (auto& [node, form] : candidates) {
      if (WhyNot why = WhyNotExpandable(*node, form)) {
        context_.Rejected(*node, why);
        continue;
      }
      Expand(*node, form);
      changed = true;
    }
    return changed;
  }

 private:
  TensorPtr Constant(const Value* value) const { return value != nullptr ? ConstantValueOf(*value, rule_) : nullptr; }

  // The axis a per-axis scale runs along, for the operand at `index` of the form; nullopt per tensor.
  std::optional<int64_t> AxisOf(const Node& node, const Form& form, size_t index) const {
    const TensorPtr scale = Constant(node.input(form.operands[index].scale));
    if (scale == nullptr || scale->NumElements() == 1) return std::nullopt;
    if (form.float_op == "Conv") return 0;
    if (form.float_op == "Gemm") return node.GetInt("transB", 0) != 0 ? 0 : 1;
    // MatMul's B per column: its last axis, whatever batch axes come before.
    const TensorPtr values = Constant(node.input(form.operands[index].value));
    return values != nullptr ? static_cast<int64_t>(values->dims().size()) - 1 : 1;
  }

  WhyNot WhyNotExpandable(const Node& node, const Form& form) const {
    std::vector<Operand> all = form.operands;
    if (form.output) all.push_back(*form.output);
    for (const Operand& operand : all) {
      if (node.input(operand.scale) == nullptr || Constant(node.input(operand.scale)) == nullptr) {
        return "a scale is not a constant";
      }
      if (node.input(operand.zero) != nullptr && Constant(node.input(operand.zero)) == nullptr) {
        return "a zero point is not a constant";
      }
    }
    if (form.weights >= 0) {
      const Value* weights = node.input(form.operands[static_cast<size_t>(form.weights)].value);
      TensorPtr values = Constant(weights);
      if (values == nullptr) return "its weights are not a constant (no integer kernel takes two activations)";
      if (values->dims().size() < 2) return "weights of rank below 2";
      if (AxisOf(node, form, static_cast<size_t>(form.weights)) && opset_ < 13) {
        return "a per-channel scale needs opset 13 (DequantizeLinear's axis)";
      }
    }
    for (size_t i = 0; i < form.operands.size(); ++i) {
      if (static_cast<int>(i) != form.weights && AxisOf(node, form, i)) return "a per-axis activation scale";
    }
    if (form.bias >= 0 && node.input(static_cast<size_t>(form.bias)) != nullptr) {
      const TensorPtr bias = Constant(node.input(static_cast<size_t>(form.bias)));
      if (bias == nullptr || bias->dtype() != DataType::kInt32 || bias->dims().size() > 1) {
        return "its bias is not a constant 1-D int32 tensor";
      }
    }
    if (form.output && node.input(form.output->zero) == nullptr && OutputType(node) != DataType::kUint8 &&
        OutputType(node) != DataType::kInt8) {
      return "its output zero point is omitted and its type not inferred as 8-bit";
    }
    return {};
  }

  static DataType OutputType(const Node& node) {
    const Value* output = node.output(0);
    return output != nullptr ? output->dtype() : DataType::kUndefined;
  }

  Value* NewValue(const std::string& base, DataType dtype, const std::optional<Shape>& shape) {
    Value* value = graph_.CreateValue(graph_.UniqueName(base));
    value->type().dtype = dtype;
    value->type().shape = shape;
    return value;
  }

  Node* Insert(Node& before, const std::string& op, const std::vector<Value*>& inputs, const std::vector<Value*>& outputs,
               const std::string& stem) {
    Node* node = graph_.CreateNode(op, "", inputs, outputs, graph_.UniqueNodeName(stem));
    graph_.MoveBefore(node, &before);
    return node;
  }

  Value* Dequantize(Node& op, Value* quantized, Value* scale, Value* zero, std::optional<int64_t> axis) {
    Value* real = NewValue(quantized->name() + "_dequantized", scale->dtype(), quantized->shape());
    std::vector<Value*> inputs = {quantized, scale};
    if (zero != nullptr) inputs.push_back(zero);
    Node* dequantize = Insert(op, "DequantizeLinear", inputs, {real}, op.name() + "_dequantize");
    if (axis) dequantize->SetAttribute(Attribute::Int("axis", *axis));
    return real;
  }

  // The int32 bias in the scale its values are in: the input's scale times the weights' (QGemm
  // adds it to the accumulator before alpha scales both, so alpha too).
  Value* DequantizedBias(Node& op, const Form& form) {
    Value* bias = op.input(static_cast<size_t>(form.bias));
    const std::vector<float> input_scale = ScalesOf(op.input(form.operands[0].scale));
    const std::vector<float> weight_scale = ScalesOf(op.input(form.operands[1].scale));
    const float alpha = form.float_op == "Gemm" ? op.GetFloat("alpha", 1.0f) : 1.0f;
    std::vector<double> product;
    for (float scale : weight_scale) product.push_back(static_cast<double>(alpha * input_scale[0] * scale));
    const DataType dtype = op.input(form.operands[1].scale)->dtype();
    const std::vector<int64_t> dims = product.size() == 1 ? std::vector<int64_t>{} : std::vector<int64_t>{static_cast<int64_t>(product.size())};
    Value* scale = AddInitializer(graph_, bias->name() + "_scale", MakeFloatingTensor(dtype, dims, product));
    return Dequantize(op, bias, scale, nullptr, product.size() == 1 ? std::nullopt : std::optional<int64_t>{0});
  }

  std::vector<float> ScalesOf(const Value* scale) const {
    quantized::Quantization parameters;
    parameters.scale = Constant(scale);
    return parameters.Scales();
  }

  // The output zero point, or a zero of the output's 8-bit type when the op omits it
  // (QuantizeLinear would otherwise write uint8).
  Value* OutputZero(Node& op, const Form& form) {
    if (Value* zero = op.input(form.output->zero)) return zero;
    const DataType dtype = OutputType(op);
    return AddInitializer(graph_, op.output(0)->name() + "_zero_point",
                          std::make_shared<Tensor>(Tensor::FromValues<uint8_t>(dtype, {}, {0})));
  }

  void Expand(Node& op, const Form& form) {
    std::vector<Value*> reals;
    for (size_t i = 0; i < form.operands.size(); ++i) {
      const Operand& operand = form.operands[i];
      reals.push_back(Dequantize(op, op.input(operand.value), op.input(operand.scale), op.input(operand.zero),
                                 AxisOf(op, form, i)));
    }
    if (form.bias >= 0 && op.input(static_cast<size_t>(form.bias)) != nullptr) reals.push_back(DequantizedBias(op, form));
    Value* output = op.output(0);
    Value* output_zero = form.output ? OutputZero(op, form) : nullptr;  // before the output leaves the op
    Value* real_output = form.output ? NewValue(output->name() + "_float", op.input(form.output->scale)->dtype(), output->shape())
                                     : nullptr;
    graph_.DetachProducer(output);
    Node* real_op = Insert(op, form.float_op, reals, {form.output ? real_output : output}, op.name().empty() ? form.float_op : op.name());
    CopyAttributes(op, *real_op, form);
    if (form.output) {
      Insert(op, "QuantizeLinear", {real_output, op.input(form.output->scale), output_zero}, {output},
             op.name() + "_quantize");
    }
    graph_.RemoveNode(&op);
    context_.Matched();
    context_.Count("expanded_" + form.float_op);
  }

  static void CopyAttributes(const Node& from, Node& to, const Form& form) {
    for (const Attribute& attribute : from.attributes()) {
      // QGemm's alpha, transA and transB are Gemm's; Conv's and LeakyRelu's carry over whole.
      to.SetAttribute(attribute.CopyWithoutGraphs());
    }
    if (form.float_op == "Gemm") to.SetAttribute(Attribute::Float("beta", 1.0f));
  }

  Graph& graph_;
  PassContext& context_;
  int64_t opset_;
  InitializerRule rule_;
};

}  // namespace

Result<bool> QOperatorToQdq::RunOnGraph(Graph& graph, PassContext& context) { return Expander(graph, context).Run(); }

}  // namespace fusionopt::passes
