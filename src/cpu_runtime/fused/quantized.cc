// Quantized units as one integer kernel each: oneDNN's int8 primitive with the scales, the bias,
// the steps and any requantization as post-ops (quantized/integer_contraction.h); the weights
// are the body's constant argument, packed once.
//   - the QDQ unit (patterns/quantized/contraction.h): DQ → Conv/MatMul/Gemm → bias →
//     activations and round trips → Q;
//   - the dynamically quantized contraction (patterns/quantized/dynamic_contraction.h) with the
//     chain fuse-contraction-epilogues gave it: [DynamicQuantizeLinear →] MatMulInteger/
//     ConvInteger → Cast → scale → bias → activations, residual; float out. The input is
//     quantized inside the kernel when the body holds the DynamicQuantizeLinear.
#include <cmath>

#include "cpu_runtime/contraction/epilogue.h"
#include "cpu_runtime/contraction/window.h"
#include "cpu_runtime/fused/body.h"
#include "cpu_runtime/quantized/integer_contraction.h"
#include "cpu_runtime/quantized/quantize_expr.h"
#include "ir/constant_value.h"
#include "patterns/matcher_support.h"
#include "patterns/quantized/contraction.h"
#include "patterns/quantized/dynamic_contraction.h"
#include "cpu_runtime/quantized/kernels.h"

namespace fusionopt::cpu {
namespace {

using quantized::EpilogueStep;
using quantized::Quantization;
using quantized::QuantizedContraction;

// The constants an outlined body reads: Constant nodes, and formals whose argument is constant.
quantized::ConstantOf BodyConstants(const FusedBodyInfo& info) {
  return [&info](const Value* value) -> TensorPtr {
    std::optional<CompositeOperand> operand = composite::BodyOperandOf(info.body, value);
    if (!operand) return nullptr;
    if (operand->constant != nullptr) return operand->constant;
    return operand->input >= 0 ? info.constant_inputs[static_cast<size_t>(operand->input)] : nullptr;
  };
}

// A round trip Q → DQ inside the epilogue as post-ops: to the quantized grid and back,
// rounded half to even and saturated as the QuantizeLinear would.
void AppendRoundTrip(const Quantization& quantization, std::vector<PostOp>& post_ops) {
  const float scale = quantization.Scales()[0];
  const auto zero = static_cast<float>(quantization.ZeroPoints()[0]);
  const QuantRange range = *IntegerRange(quantization.type);
  post_ops.push_back({PostOp::Kind::kEltwise, dnnl::algorithm::eltwise_linear, 1.0f / scale, zero});
  post_ops.push_back({PostOp::Kind::kEltwise, dnnl::algorithm::eltwise_round});
  post_ops.push_back({PostOp::Kind::kEltwise, dnnl::algorithm::eltwise_clip, static_cast<float>(range.lo),
                      static_cast<float>(range.hi)});
  post_ops.push_back({PostOp::Kind::kEltwise, dnnl::algorithm::eltwise_linear, scale, -zero * scale});
}

// The bias as floats per output channel: a float constant, or an integer one dequantized.
std::optional<std::vector<float>> BiasValues(const QuantizedContraction& unit, const quantized::ConstantOf& constant_of) {
  if (unit.bias == nullptr) return std::vector<float>{};
  std::vector<double> values;
  if (unit.bias_dequantize != nullptr) {
    const TensorPtr integers = constant_of(unit.bias_dequantize->input(0));
    Decided<Quantization> quantization = quantized::ConstantQuantization(*unit.bias_dequantize, 1, constant_of);
    const std::optional<std::vector<int64_t>> ints = integers != nullptr ? integers->AsInt64s() : std::nullopt;
    if (!quantization || !ints) return std::nullopt;
    const std::vector<float> scales = quantization->Scales();
    const std::vector<int32_t> zeros = quantization->ZeroPoints();
    for (size_t i = 0; i < ints->size(); ++i) {
      const size_t c = scales.size() == 1 ? 0 : i;
      values.push_back(static_cast<double>((*ints)[i] - zeros[zeros.size() == 1 ? 0 : i]) * scales[c]);
    }
  } else {
    const TensorPtr floats = constant_of(unit.bias);
    const std::optional<std::vector<double>> read = floats != nullptr ? floats->AsDoubles() : std::nullopt;
    if (!read) return std::nullopt;
    values = *read;
  }
  return std::vector<float>(values.begin(), values.end());
}

// A per-tensor 8-bit grid: what a unit that starts from float quantizes its input to (its
// QuantizeLinear's), and the grid of a quantized residual a float-output unit adds.
struct Grid {
  float scale = 1.0f;
  int32_t zero = 0;
  DataType type = DataType::kUndefined;  // undefined: none
};

// A unit's integer product by the body's constant weights: a convolution (Conv's or
// ConvInteger's window attributes) or a matrix product (Gemm's transB; the matchers refuse
// transA). Both kernels below run one.
class IntegerProduct {
 public:
  static std::optional<IntegerProduct> Of(const Node& contraction, const IntegerEpilogue& epilogue, TensorPtr weights,
                                          int64_t opset) {
    IntegerProduct product;
    product.weights_ = RtTensor::WrapConstant(weights);
    const std::string& op = contraction.op_type();
    if (op == "Conv" || op == "ConvInteger") {
      Result<WindowAttributes> attributes = ReadWindowAttributes(KernelInfo{contraction, opset, {}});
      if (!attributes.ok()) return std::nullopt;
      product.conv_ = std::make_unique<IntegerConv>(epilogue, *attributes, contraction.GetInt("group", 1), weights);
    } else {
      const bool trans_b = op == "Gemm" && contraction.GetInt("transB", 0) != 0;
      product.matmul_ = std::make_unique<IntegerMatMul>(epilogue, weights, false, trans_b);
    }
    return product;
  }

  bool is_conv() const { return conv_ != nullptr; }

  Status Run(const RtTensor& x, const IntegerParameters& parameters, KernelContext& context,
             const RtTensor* residual) const {
    if (conv_) return conv_->Run(x, weights_, parameters, context, 0, residual);
    return matmul_->Run(x, weights_, parameters, context, 0, residual);
  }

 private:
  std::unique_ptr<IntegerConv> conv_;
  std::unique_ptr<IntegerMatMul> matmul_;
  RtTensor weights_;
};

class FusedQuantizedKernel final : public FusedBodyKernel {
 public:
  struct Inputs {
    int x = -1;
    Grid x_grid;         // set: x is float, quantized here
    int residual = -1;   // the body input of the quantized residual, or -1
    Grid residual_grid;  // set: the residual is dequantized here (the unit writes float)
  };

  FusedQuantizedKernel(Inputs inputs, IntegerParameters parameters, IntegerProduct product)
      : inputs_(inputs), parameters_(std::move(parameters)), product_(std::move(product)) {}

  // A convolution takes its input and residual in convolution layouts and may hand one on.
  bool ReadsConvLayouts() const override { return product_.is_conv(); }

  Result<int> Compute(KernelContext& context) override {
    const RtTensor* input = context.input(static_cast<size_t>(inputs_.x));
    RtTensor quantized;
    if (const Grid& grid = inputs_.x_grid; grid.type != DataType::kUndefined) {
      if (input->dtype() != DataType::kFloat) return 0;
      quantized = context.allocator->Allocate(grid.type, input->dims());
      FUSIONOPT_RETURN_IF_ERROR(QuantizePerTensor(*input, grid.scale, grid.zero, quantized));
      quantized.set_layout(input->layout());  // elementwise: the values lie as the input's did
      input = &quantized;
    }
    const RtTensor& x = *input;
    if (x.dtype() != DataType::kUint8 && x.dtype() != DataType::kInt8) return 0;
    const RtTensor* residual = inputs_.residual >= 0 ? context.input(static_cast<size_t>(inputs_.residual)) : nullptr;
    RtTensor dequantized;
    if (const Grid& grid = inputs_.residual_grid; residual != nullptr && grid.type != DataType::kUndefined) {
      if (residual->dtype() != grid.type) return 0;
      dequantized = context.allocator->Allocate(DataType::kFloat, residual->dims());
      FUSIONOPT_RETURN_IF_ERROR(DequantizePerTensor(*residual, grid.scale, grid.zero, dequantized));
      dequantized.set_layout(residual->layout());
      residual = &dequantized;
    }
    // (A residual whose dims are not the output's is an error of the body the kernel reports:
    // the pass fuses a residual only where inference proved the shapes equal.)
    FUSIONOPT_RETURN_IF_ERROR(product_.Run(x, parameters_, context, residual));
    return 1;
  }

 private:
  Inputs inputs_;
  IntegerParameters parameters_;
  IntegerProduct product_;
};

// The epilogue's post-ops and output type; nullopt where a step has no post-op here.
std::optional<IntegerEpilogue> EpilogueOf(const QuantizedContraction& unit, const quantized::ConstantOf& constant_of,
                                          int64_t opset) {
  IntegerEpilogue epilogue;
  epilogue.output = IntegerEpilogue::Output::kQuantized;
  for (const EpilogueStep& step : unit.steps) {
    if (step.kind == EpilogueStep::Kind::kResidual) {
      Decided<Quantization> residual = quantized::ConstantQuantization(*step.dequantize, 0, constant_of);
      if (!residual) return std::nullopt;
      epilogue.residual_scale = residual->Scales()[0];
      epilogue.residual_zero = residual->ZeroPoints()[0];
      epilogue.residual_type = residual->type;
      epilogue.activation.push_back({PostOp::Kind::kAdd});
      continue;
    }
    if (step.kind == EpilogueStep::Kind::kRoundTrip) {
      Decided<Quantization> quantization = quantized::ConstantQuantization(*step.node, 0, constant_of);
      if (!quantization || !IntegerRange(quantization->type)) return std::nullopt;
      AppendRoundTrip(*quantization, epilogue.activation);
      continue;
    }
    std::optional<std::vector<PostOp>> post_ops = ActivationPostOps(*step.node, opset);
    if (!post_ops) return std::nullopt;
    epilogue.activation.insert(epilogue.activation.end(), post_ops->begin(), post_ops->end());
  }
  return epilogue;
}

}  // namespace

std::unique_ptr<FusedBodyKernel> CreateFusedQuantized(const FusedBodyInfo& info) {
  const Graph& body = info.body;
  if (info.call.outputs().size() != 1 || body.outputs().size() != 1) return nullptr;
  const Node* contraction = nullptr;
  for (const auto& node : body.nodes()) {
    const std::string& op = node->op_type();
    if (IsDefaultDomain(*node) && (op == "Conv" || op == "MatMul" || op == "Gemm")) {
      if (contraction != nullptr) return nullptr;
      contraction = node.get();
    }
  }
  if (contraction == nullptr) return nullptr;
  const quantized::ConstantOf constant_of = BodyConstants(info);
  Decided<QuantizedContraction> unit = quantized::MatchQuantizedContraction(*contraction, constant_of);
  if (!unit) return nullptr;
  // The float ends the pass gave the unit are in the body when it took them.
  unit->input_quantize = quantized::LeadingQuantize(*unit, constant_of);
  unit->output_dequantize = quantized::TrailingDequantize(*unit, constant_of);
  const Node* last = unit->output_dequantize != nullptr ? unit->output_dequantize : unit->output;
  if (last->output(0) != body.outputs()[0]) return nullptr;
  std::vector<Node*> members;
  for (const Node* member : unit->Nodes()) members.push_back(const_cast<Node*>(member));
  if (!composite::BodyIsExactly(body, members)) return nullptr;
  const Node* first = unit->input_quantize != nullptr ? unit->input_quantize : unit->input;
  FusedQuantizedKernel::Inputs inputs;
  inputs.x = composite::BodyInputIndex(body, first->input(0));
  if (inputs.x < 0) return nullptr;
  if (const EpilogueStep* step = unit->residual()) {
    inputs.residual = composite::BodyInputIndex(body, step->dequantize->input(0));
    if (inputs.residual < 0) return nullptr;
  }

  const int64_t opset = info.context.OpsetFor("");
  Decided<Quantization> x = quantized::ConstantQuantization(*unit->input, 0, constant_of);
  const TensorPtr weights = constant_of(unit->weights->input(0));
  Decided<Quantization> w = quantized::ConstantQuantization(*unit->weights, weights->dims().size(), constant_of);
  Decided<Quantization> y = quantized::ConstantQuantization(*unit->output, 0, constant_of);
  std::optional<std::vector<float>> bias = BiasValues(*unit, constant_of);
  std::optional<IntegerEpilogue> epilogue = EpilogueOf(*unit, constant_of, opset);
  if (!x || !w || !y || !bias || !epilogue) return nullptr;
  epilogue->quantized_type = y->type;
  if (unit->output_dequantize != nullptr) {
    epilogue->output = IntegerEpilogue::Output::kFloat;
    AppendRoundTrip(*y, epilogue->activation);
    // A float output sums a float residual: the kernel dequantizes the 8-bit one first.
    if (inputs.residual >= 0) {
      inputs.residual_grid = {epilogue->residual_scale, epilogue->residual_zero, epilogue->residual_type};
      epilogue->residual_scale = 1.0f;
      epilogue->residual_zero = 0;
      epilogue->residual_type = DataType::kFloat;
    }
  }
  if (unit->input_quantize != nullptr) inputs.x_grid = {x->Scales()[0], x->ZeroPoints()[0], x->type};

  IntegerParameters parameters;
  parameters.a_zero = x->ZeroPoints();
  parameters.b_zero = w->ZeroPoints();
  float alpha = 1.0f;
  if (contraction->op_type() == "Gemm") alpha = contraction->GetFloat("alpha", 1.0f);
  parameters.scale = ScaleProduct({x->Scales()[0] * alpha}, w->Scales());
  parameters.bias = *bias;
  parameters.y_scale = y->Scales()[0];
  parameters.y_zero = y->ZeroPoints()[0];

  std::optional<IntegerProduct> product = IntegerProduct::Of(*contraction, *epilogue, weights, opset);
  if (!product) return nullptr;
  return std::make_unique<FusedQuantizedKernel>(inputs, std::move(parameters), std::move(*product));
}

namespace {

using quantized::DynamicContraction;

// The integer kernel of a dynamically quantized contraction: either quantizes the float input
// itself (DynamicQuantizeLinear's parameters, then the uint8 values) or reads them quantized.
class FusedDynamicQuantizedKernel final : public FusedBodyKernel {
 public:
  struct Inputs {
    int x = -1;  // the float input, when the kernel quantizes it; else the three below
    int x_quantized = -1, x_scale = -1, x_zero = -1;
    int residual = -1;  // the float residual, or -1
  };

  FusedDynamicQuantizedKernel(Inputs inputs, IntegerParameters parameters, IntegerProduct product)
      : inputs_(inputs), parameters_(std::move(parameters)), product_(std::move(product)) {}

  Result<int> Compute(KernelContext& context) override {
    IntegerParameters parameters = parameters_;
    RtTensor quantized;
    const RtTensor* x = nullptr;
    if (inputs_.x >= 0) {
      const RtTensor& real = *context.input(static_cast<size_t>(inputs_.x));
      if (real.dtype() != DataType::kFloat) return 0;
      const DynamicParameters dynamic = DynamicUint8Parameters(real.data<float>(), real.NumElements());
      quantized = context.allocator->Allocate(DataType::kUint8, real.dims());
      FUSIONOPT_RETURN_IF_ERROR(QuantizeDynamically(real, dynamic, quantized));
      x = &quantized;
      parameters.runtime_scale = dynamic.scale;
      parameters.a_zero = {dynamic.zero_point};
    } else {
      x = context.input(static_cast<size_t>(inputs_.x_quantized));
      FUSIONOPT_ASSIGN_OR_RETURN(std::vector<float> scale, ScaleValues(*context.input(static_cast<size_t>(inputs_.x_scale)), "the input's scale"));
      const RtTensor* zero = inputs_.x_zero >= 0 ? context.input(static_cast<size_t>(inputs_.x_zero)) : nullptr;
      FUSIONOPT_ASSIGN_OR_RETURN(parameters.a_zero, ZeroPointValues(zero, "the input's zero point"));
      if (scale.size() != 1 || parameters.a_zero.size() != 1) return 0;
      parameters.runtime_scale = scale[0];
    }
    const RtTensor* residual = inputs_.residual >= 0 ? context.input(static_cast<size_t>(inputs_.residual)) : nullptr;
    if (residual != nullptr && residual->dtype() != DataType::kFloat) return 0;
    FUSIONOPT_RETURN_IF_ERROR(product_.Run(*x, parameters, context, residual));
    return 1;
  }

 private:
  Inputs inputs_;
  IntegerParameters parameters_;
  IntegerProduct product_;
};

// The chain's post-ops as the integer kernel's epilogue: a constant addend first is the bias
// (one value per channel, or one), a computed one the residual; nullopt where the chain has
// another shape (the pass fuses only these: fuse_contraction_epilogues.h).
std::optional<IntegerEpilogue> DynamicEpilogue(const PostOpChain& chain, const FusedBodyInfo& info,
                                               std::vector<float>& bias, int& residual) {
  IntegerEpilogue epilogue;
  epilogue.output = IntegerEpilogue::Output::kFloat;
  size_t addend = 0;
  for (size_t i = 0; i < chain.post_ops.size(); ++i) {
    const PostOp& step = chain.post_ops[i];
    if (step.kind != PostOp::Kind::kAdd) {
      epilogue.activation.push_back(step);
      continue;
    }
    const size_t input = chain.addends[addend++];
    if (const TensorPtr& constant = info.constant_inputs[input]) {
      std::optional<std::vector<double>> values = constant->AsDoubles();
      if (i != 0 || !values) return std::nullopt;
      bias.assign(values->begin(), values->end());
      continue;
    }
    if (residual >= 0) return std::nullopt;
    residual = static_cast<int>(input);
    epilogue.residual_type = DataType::kFloat;
    epilogue.activation.push_back(step);
  }
  return epilogue;
}

}  // namespace

std::unique_ptr<FusedBodyKernel> CreateFusedDynamicQuantized(const FusedBodyInfo& info) {
  const Graph& body = info.body;
  const Node* contraction = nullptr;
  for (const auto& node : body.nodes()) {
    if (IsDefaultDomain(*node) && (node->op_type() == "MatMulInteger" || node->op_type() == "ConvInteger")) {
      if (contraction != nullptr) return nullptr;
      contraction = node.get();
    }
  }
  if (contraction == nullptr) return nullptr;
  const quantized::ConstantOf constant_of = BodyConstants(info);
  Decided<DynamicContraction> unit = quantized::MatchDynamicContraction(*contraction, constant_of);
  if (!unit) return nullptr;
  const int64_t opset = info.context.OpsetFor("");
  std::optional<PostOpChain> chain = MatchPostOpChain(info, *unit->output(), unit->Nodes(), opset);
  if (!chain) return nullptr;

  FusedDynamicQuantizedKernel::Inputs inputs;
  if (unit->quantize != nullptr) {
    inputs.x = composite::BodyInputIndex(body, unit->quantize->input(0));
    if (inputs.x < 0) return nullptr;
  } else {
    inputs.x_quantized = composite::BodyInputIndex(body, unit->x_quantized);
    inputs.x_scale = composite::BodyInputIndex(body, unit->x_scale);
    inputs.x_zero = unit->x_zero != nullptr ? composite::BodyInputIndex(body, unit->x_zero) : -1;
    if (inputs.x_quantized < 0 || inputs.x_scale < 0 || (unit->x_zero != nullptr && inputs.x_zero < 0)) return nullptr;
  }
  IntegerParameters parameters;
  std::optional<IntegerEpilogue> epilogue = DynamicEpilogue(*chain, info, parameters.bias, inputs.residual);
  if (!epilogue) return nullptr;
  const std::optional<std::vector<double>> scales = unit->weight_scale->AsDoubles();
  if (!scales) return nullptr;
  parameters.scale.assign(scales->begin(), scales->end());
  if (unit->weight_zero != nullptr) {
    const std::optional<std::vector<int64_t>> zeros = unit->weight_zero->AsInt64s();
    if (!zeros) return nullptr;
    parameters.b_zero.assign(zeros->begin(), zeros->end());
  }

  std::optional<IntegerProduct> product = IntegerProduct::Of(*contraction, *epilogue, unit->weights, opset);
  if (!product) return nullptr;
  return std::make_unique<FusedDynamicQuantizedKernel>(inputs, std::move(parameters), std::move(*product));
}

}  // namespace fusionopt::cpu
