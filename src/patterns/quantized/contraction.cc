#include "patterns/quantized/contraction.h"

#include <algorithm>

#include "ir/constant_value.h"
#include "ir/float16.h"
#include "patterns/matcher_support.h"

namespace fusionopt::quantized {
namespace {

bool InDomains(const Node& node, std::string_view op_type) {
  return node.op_type() == op_type && (IsDefaultDomain(node) || node.domain() == "com.microsoft");
}


using composite::SoleReader;

const Node* DequantizeProducing(const Value* value) {
  const Node* producer = value != nullptr ? value->producer() : nullptr;
  return producer != nullptr && IsDequantizeLinear(*producer) ? producer : nullptr;
}

// Clip's bounds are constants (inputs from opset 11, attributes before).
bool ClipBoundsConstant(const Node& clip, const ConstantOf& constant_of) {
  for (size_t i = 1; i < clip.inputs().size(); ++i) {
    const Value* bound = clip.input(i);
    if (bound == nullptr) continue;
    const TensorPtr value = constant_of(bound);
    if (value == nullptr || value->NumElements() != 1) return false;
  }
  return true;
}


// The axis of the weights that holds the output channels.
std::optional<int64_t> OutputChannelAxis(const Node& contraction) {
  if (contraction.op_type() == "Conv") return 0;
  if (contraction.op_type() == "Gemm") return contraction.GetInt("transB", 0) != 0 ? 0 : 1;
  return 1;  // MatMul's B [K, N]
}

class Matcher {
 public:
  explicit Matcher(const ConstantOf& constant_of) : constant_of_(constant_of) {}

  Decided<QuantizedContraction> Match(const Node& contraction) {
    const std::string& op = contraction.op_type();
    if (!IsDefaultDomain(contraction) || (op != "Conv" && op != "MatMul" && op != "Gemm")) return "not a contraction";
    unit_.contraction = &contraction;
    if (WhyNot why = MatchOperands(contraction)) return why;
    const Value* value = contraction.output(0);
    if (op == "MatMul") {
      if (const Node* add = SoleReader(value); add != nullptr && IsDefaultOp(add, "Add") && MatchBiasAdd(*add)) {
        value = add->output(0);
      }
    }
    if (WhyNot why = MatchEpilogue(value)) return why;
    return unit_;
  }

 private:
  WhyNot MatchOperands(const Node& contraction) {
    const std::string& op = contraction.op_type();
    if (contraction.inputs().size() < 2 || contraction.outputs().size() != 1) return "unexpected operands";
    unit_.input = DequantizeProducing(contraction.input(0));
    unit_.weights = DequantizeProducing(contraction.input(1));
    if (unit_.input == nullptr) return "the input is not dequantized";
    if (unit_.weights == nullptr) return "the weights are not dequantized";
    if (op == "Gemm" && (contraction.GetInt("transA", 0) != 0)) return "Gemm with transA";
    const Value* x = unit_.input->input(0);
    const std::optional<size_t> x_rank = x != nullptr && x->shape() ? std::optional<size_t>(x->shape()->size()) : std::nullopt;
    Decided<Quantization> input = ConstantQuantization(*unit_.input, x_rank.value_or(0), constant_of_);
    if (!input) return input.why_not().Prefixed("the input's quantization");
    if (!input->per_tensor() || !IsEightBitInteger(input->type)) return "the input is not quantized per tensor to 8 bits (" + std::string(NameOf(input->type)) + (input->per_tensor() ? ")" : ", per axis)");
    const Value* w = unit_.weights->input(0);
    const TensorPtr weights = w != nullptr ? constant_of_(w) : nullptr;
    if (weights == nullptr) return "the weights are not a constant";
    if (!IsEightBitInteger(weights->dtype())) return "the weights are not 8-bit integers";
    if (op != "Conv" && weights->dims().size() != 2) return "the weights are not a matrix";
    Decided<Quantization> quantization = ConstantQuantization(*unit_.weights, weights->dims().size(), constant_of_);
    if (!quantization) return quantization.why_not().Prefixed("the weights' quantization");
    if (quantization->axis && quantization->axis != OutputChannelAxis(contraction)) {
      return "the weights are quantized along an axis other than the output channels";
    }
    if (op != "MatMul" && contraction.inputs().size() > 2 && contraction.input(2) != nullptr) {
      if (op == "Gemm" && contraction.GetFloat("beta", 1.0f) != 1.0f) return "Gemm with a beta other than 1";
      if (WhyNot why = MatchBias(contraction.input(2))) return why;
    }
    return {};
  }

  // A bias: a float constant, or the dequantization of an integer constant.
  WhyNot MatchBias(const Value* bias) {
    if (const Node* dequantize = DequantizeProducing(bias)) {
      const TensorPtr values = dequantize->input(0) != nullptr ? constant_of_(dequantize->input(0)) : nullptr;
      if (values == nullptr || values->dims().size() > 1) return "the bias is not a constant vector";
      Decided<Quantization> quantization = ConstantQuantization(*dequantize, 1, constant_of_);
      if (!quantization) return quantization.why_not().Prefixed("the bias's quantization");
      if (SoleReader(bias) == nullptr) return "the dequantized bias has other readers";
      unit_.bias_dequantize = dequantize;
    } else {
      const TensorPtr values = constant_of_(bias);
      if (values == nullptr || values->dtype() != DataType::kFloat) return "the bias is neither float nor dequantized";
      if (values->dims().size() > 1 && !(values->dims().size() == 2 && values->dims()[0] == 1)) {
        return "the bias is not one value per output channel";
      }
    }
    unit_.bias = bias;
    return {};
  }

  bool MatchBiasAdd(const Node& add) {
    if (add.inputs().size() != 2) return false;
    const Value* product = unit_.contraction->output(0);
    const Value* bias = add.input(0) == product ? add.input(1) : add.input(0);
    if (bias == product || MatchBias(bias)) {
      unit_.bias_dequantize = nullptr;
      unit_.bias = nullptr;
      return false;
    }
    unit_.bias_add = &add;
    return true;
  }

  WhyNot MatchEpilogue(const Value* value) {
    while (true) {
      const Node* next = SoleReader(value);
      if (next == nullptr) return "the product has other readers before its QuantizeLinear";
      if (IsQuantizeLinear(*next)) {
        Decided<Quantization> output = ConstantQuantization(*next, 0, constant_of_);
        if (!output) return output.why_not().Prefixed("the output's quantization");
        if (!output->per_tensor() || !IsEightBitInteger(output->type)) return "the output is not quantized per tensor to 8 bits";
        // Q → DQ → more epilogue → Q: a round trip inside the unit; else the unit ends here.
        if (const Node* dequantize = SoleReader(next->output(0)); dequantize != nullptr && IsDequantizeLinear(*dequantize)) {
          Decided<Quantization> back = ConstantQuantization(*dequantize, 0, constant_of_);
          const Node* after = SoleReader(dequantize->output(0));
          if (back && SameQuantization(*output, *back) && after != nullptr &&
              ContinuesToQuantize(*after, dequantize->output(0))) {
            unit_.steps.push_back({EpilogueStep::Kind::kRoundTrip, next, dequantize});
            value = dequantize->output(0);
            continue;
          }
        }
        unit_.output = next;
        return {};
      }
      if (const Node* residual = ResidualOf(*next, value); residual != nullptr && unit_.residual() == nullptr) {
        unit_.steps.push_back({EpilogueStep::Kind::kResidual, next, residual});
        value = next->output(0);
        continue;
      }
      if (!IsEpilogueActivation(*next, constant_of_) || next->input(0) != value) {
        return "the product reaches " + next->op_type() + " before a QuantizeLinear";
      }
      unit_.steps.push_back({EpilogueStep::Kind::kActivation, next});
      value = next->output(0);
    }
  }

  // The DequantizeLinear of a residual that `add` adds to `value`: 8-bit per tensor, of the
  // same shape (a post-op sums it whole); null otherwise.
  const Node* ResidualOf(const Node& add, const Value* value) const {
    if (!IsDefaultOp(&add, "Add") || add.inputs().size() != 2 || add.outputs().size() != 1) return nullptr;
    const Value* other = add.input(0) == value ? add.input(1) : add.input(0);
    if (other == value) return nullptr;
    const Node* dequantize = DequantizeProducing(other);
    if (dequantize == nullptr || dequantize == unit_.input) return nullptr;
    Decided<Quantization> quantization = ConstantQuantization(*dequantize, 0, constant_of_);
    if (!quantization || !quantization->per_tensor() || !IsEightBitInteger(quantization->type)) return nullptr;
    // In a graph both shapes are known (shape inference) and must be the same; an outlined body's
    // values have none, and the kernel checks the residual's dims when it runs.
    if (other->shape().has_value() != value->shape().has_value()) return nullptr;
    if (other->shape()) {
      if (*other->shape() != *value->shape()) return nullptr;
      for (const Dim& dim : *other->shape()) {
        if (!dim.is_known() && !dim.is_symbolic()) return nullptr;
      }
    }
    return dequantize;
  }

  // Whether epilogue steps lead from `node`, the only reader of `value`, to a QuantizeLinear
  // (so a round trip before it is inside one unit).
  bool ContinuesToQuantize(const Node& node, const Value* value) const {
    const Node* at = &node;
    bool residual = unit_.residual() != nullptr;
    for (int guard = 0; guard < 16 && at != nullptr; ++guard) {
      if (IsQuantizeLinear(*at)) return true;
      if (!residual && ResidualOf(*at, value) != nullptr) {
        residual = true;
      } else if (!IsEpilogueActivation(*at, constant_of_) || at->input(0) != value) {
        return false;
      }
      value = at->output(0);
      at = SoleReader(value);
    }
    return false;
  }

  const ConstantOf& constant_of_;
  QuantizedContraction unit_;
};

}  // namespace

bool SameQuantization(const Quantization& a, const Quantization& b) {
  return a.per_tensor() && b.per_tensor() && a.type == b.type && a.Scales() == b.Scales() &&
         a.ZeroPoints() == b.ZeroPoints();
}

bool IsQuantizeLinear(const Node& node) { return InDomains(node, "QuantizeLinear"); }
bool IsDequantizeLinear(const Node& node) { return InDomains(node, "DequantizeLinear"); }

ConstantOf GraphConstantsOf(const Model& model) {
  const InitializerRule rule = InitializerRuleOf(model);
  return [rule](const Value* value) -> TensorPtr { return value != nullptr ? ConstantValueOf(*value, rule) : nullptr; };
}

std::optional<Quantization> PerTensorDequantization(const Value& value, const ConstantOf& constant_of) {
  const Node* dequantize = value.producer();
  if (dequantize == nullptr || !IsDequantizeLinear(*dequantize)) return std::nullopt;
  Decided<Quantization> read = ConstantQuantization(*dequantize, 0, constant_of);
  if (!read || !read->per_tensor()) return std::nullopt;
  return *read;
}

std::vector<float> Quantization::Scales() const {
  std::vector<float> values;
  if (scale == nullptr) return values;
  for (int64_t i = 0; i < scale->NumElements(); ++i) {
    switch (scale->dtype()) {
      case DataType::kFloat: values.push_back(scale->values<float>()[static_cast<size_t>(i)]); break;
      case DataType::kFloat16: values.push_back(HalfToFloat(scale->values<uint16_t>()[static_cast<size_t>(i)])); break;
      case DataType::kBFloat16: values.push_back(BFloat16ToFloat(scale->values<uint16_t>()[static_cast<size_t>(i)])); break;
      default: return {};
    }
  }
  return values;
}

std::vector<int32_t> Quantization::ZeroPoints() const {
  if (zero_point == nullptr) return {0};
  std::vector<int32_t> values;
  const std::optional<std::vector<int64_t>> wide = zero_point->AsInt64s();
  if (!wide) return {};
  for (int64_t value : *wide) values.push_back(static_cast<int32_t>(value));
  return values;
}

Decided<Quantization> ConstantQuantization(const Node& node, size_t rank, const ConstantOf& constant_of) {
  if (node.inputs().size() < 2 || node.input(0) == nullptr || node.input(1) == nullptr) return "missing operands";
  if (node.GetInt("block_size", 0) != 0) return "blocked";
  Quantization quantization;
  quantization.scale = constant_of(node.input(1));
  if (quantization.scale == nullptr) return "the scale is not a constant";
  if (node.inputs().size() > 2 && node.input(2) != nullptr) {
    quantization.zero_point = constant_of(node.input(2));
    if (quantization.zero_point == nullptr) return "the zero point is not a constant";
    if (quantization.zero_point->NumElements() != quantization.scale->NumElements()) {
      return "the zero point and the scale differ in size";
    }
  }
  if (quantization.Scales().empty()) return "the scale is not a float";
  if (IsQuantizeLinear(node)) {
    quantization.type = quantization.zero_point != nullptr ? quantization.zero_point->dtype()
                                                           : static_cast<DataType>(node.GetInt("output_dtype", 2));
  } else {
    quantization.type = node.input(0)->dtype();
    if (quantization.type == DataType::kUndefined && quantization.zero_point != nullptr) {
      quantization.type = quantization.zero_point->dtype();
    }
  }
  if (quantization.zero_point != nullptr && quantization.ZeroPoints().empty()) return "the zero point is not an integer";
  const int64_t count = quantization.scale->NumElements();
  if (count != 1 || quantization.scale->dims().size() > 1) {
    if (quantization.scale->dims().size() != 1) return "the scale is neither a scalar nor a vector";
    const int64_t axis = node.GetInt("axis", 1);
    const auto signed_rank = static_cast<int64_t>(rank);
    if (rank == 0 || axis < -signed_rank || axis >= signed_rank) return "the axis is out of range";
    quantization.axis = axis < 0 ? axis + signed_rank : axis;
  }
  return quantization;
}

bool IsEpilogueActivation(const Node& node, const ConstantOf& constant_of) {
  if (!IsDefaultDomain(node) || node.outputs().size() != 1 || node.inputs().empty()) return false;
  static const std::vector<std::string> kActivations = {"Relu", "LeakyRelu", "Sigmoid", "Tanh", "HardSwish",
                                                        "HardSigmoid", "Gelu"};
  const std::string& op = node.op_type();
  if (op == "Clip") return ClipBoundsConstant(node, constant_of);
  if (op == "Gelu") {
    const std::string approximate = node.GetString("approximate", "none");
    return approximate == "none" || approximate == "tanh";
  }
  return std::find(kActivations.begin(), kActivations.end(), op) != kActivations.end();
}

const Node* LeadingQuantize(const QuantizedContraction& unit, const ConstantOf& constant_of) {
  if (SoleReader(unit.input->output(0)) != unit.contraction) return nullptr;
  const Value* quantized = unit.input->input(0);
  const Node* quantize = quantized != nullptr ? quantized->producer() : nullptr;
  if (quantize == nullptr || !IsQuantizeLinear(*quantize) || SoleReader(quantized) != unit.input) return nullptr;
  Decided<Quantization> forth = ConstantQuantization(*quantize, 0, constant_of);
  Decided<Quantization> back = ConstantQuantization(*unit.input, 0, constant_of);
  if (!forth || !back || !SameQuantization(*forth, *back) || forth->scale->dtype() != DataType::kFloat) return nullptr;
  return quantize;
}

const Node* TrailingDequantize(const QuantizedContraction& unit, const ConstantOf& constant_of) {
  const Node* dequantize = SoleReader(unit.output->output(0));
  if (dequantize == nullptr || !IsDequantizeLinear(*dequantize)) return nullptr;
  Decided<Quantization> forth = ConstantQuantization(*unit.output, 0, constant_of);
  Decided<Quantization> back = ConstantQuantization(*dequantize, 0, constant_of);
  if (!forth || !back || !SameQuantization(*forth, *back) || back->scale->dtype() != DataType::kFloat) return nullptr;
  return dequantize;
}

std::vector<const Node*> QuantizedContraction::Nodes() const {
  std::vector<const Node*> nodes;
  if (input_quantize != nullptr) nodes.push_back(input_quantize);
  nodes.insert(nodes.end(), {input, weights});
  if (bias_dequantize != nullptr) nodes.push_back(bias_dequantize);
  nodes.push_back(contraction);
  if (bias_add != nullptr) nodes.push_back(bias_add);
  for (const EpilogueStep& step : steps) {
    nodes.push_back(step.node);
    if (step.dequantize != nullptr) nodes.push_back(step.dequantize);
  }
  nodes.push_back(output);
  if (output_dequantize != nullptr) nodes.push_back(output_dequantize);
  return nodes;
}

const EpilogueStep* QuantizedContraction::residual() const {
  for (const EpilogueStep& step : steps) {
    if (step.kind == EpilogueStep::Kind::kResidual) return &step;
  }
  return nullptr;
}

Decided<QuantizedContraction> MatchQuantizedContraction(const Node& contraction, const ConstantOf& constant_of) {
  return Matcher(constant_of).Match(contraction);
}

}  // namespace fusionopt::quantized
