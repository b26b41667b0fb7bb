// onnxruntime's QLinear ops (com.microsoft) that wrap a float op in the quantization of its
// operands and result — what a QDQ unit DQ → op → Q computes, written as one node:
//
//   QLinearAdd, QLinearMul, QLinearSigmoid, QLinearLeakyRelu → one engine program
//       Q(op(DQ(A), DQ(B)))  (quantized/quantize_expr.h: the same expressions a fused unit uses)
//   QLinearSoftmax, QLinearAveragePool                      → DQ, the float kernel, Q
//   QLinearGlobalAveragePool                                 → one pass: integer sums requantized
//   QLinearConcat                                            → each input requantized to the
//       output's parameters (copied as it is where they are equal), then joined
#include <algorithm>
#include <cmath>
#include <cstring>

#include "cpu_runtime/contraction/common.h"
#include "cpu_runtime/data_movement/common.h"
#include "cpu_runtime/engine/kernel.h"
#include "cpu_runtime/quantized/integer_contraction.h"
#include "cpu_runtime/quantized/kernels.h"
#include "cpu_runtime/quantized/quantize_expr.h"

namespace fusionopt::cpu {
namespace {

using ew::Op;
using ew::ProgramBuilder;

// The operand registers of Q(op(DQ(x0), DQ(x1), ...)) whose inputs are (x, x_scale,
// x_zero_point) triplets followed by the output's (y_scale, y_zero_point).
ExprBuilder WrappedExpr(size_t operands, Op op, float alpha) {
  return [=](ProgramBuilder& b, const std::vector<int>& in) -> Result<int> {
    std::vector<int> values;
    for (size_t k = 0; k < operands; ++k) {
      FUSIONOPT_ASSIGN_OR_RETURN(int value, DequantizeExpr(DataType::kFloat)(b, {in[3 * k], in[3 * k + 1], in[3 * k + 2]}));
      values.push_back(value);
    }
    FUSIONOPT_ASSIGN_OR_RETURN(int result, b.Emit(op, values, alpha));
    const size_t y = 3 * operands;
    const DataType type = b.dtype(in[0]);
    return QuantizeExpr(type, IntegerRange(type), DataType::kFloat)(b, {result, in[y], in[y + 1]});
  };
}

// QLinearAdd, QLinearMul (A, A_scale, A_zero_point, B, B_scale, B_zero_point, C_scale,
// C_zero_point) and QLinearSigmoid, QLinearLeakyRelu (X, X_scale, X_zero_point, Y_scale,
// Y_zero_point): one program, numpy broadcasting.
class QLinearElementwiseKernel : public Kernel {
 public:
  Status Init(const KernelInfo& info) {
    op_ = info.node.op_type();
    const bool binary = op_ == "QLinearAdd" || op_ == "QLinearMul";
    operands_ = binary ? 2 : 1;
    const Op op = op_ == "QLinearAdd" ? Op::kAdd : op_ == "QLinearMul" ? Op::kMul
                : op_ == "QLinearSigmoid" ? Op::kSigmoid : Op::kLeakyRelu;
    expr_ = WrappedExpr(operands_, op, info.node.GetFloat("alpha", 0.01f));
    return Status::Ok();
  }

  Status Compute(KernelContext& context) override {
    std::vector<const RtTensor*> present;
    std::vector<DataType> dtypes;
    std::vector<int> registers;
    for (size_t i = 0; i < 3 * operands_ + 2; ++i) {
      const bool zero_point = i % 3 == 2 || i == 3 * operands_ + 1;
      if (!context.has_input(i)) {
        if (!zero_point) return InvalidModel(op_ + " needs input " + std::to_string(i));
        registers.push_back(-1);
        continue;
      }
      registers.push_back(static_cast<int>(present.size()));
      present.push_back(context.input(i));
      dtypes.push_back(context.input(i)->dtype());
    }
    for (size_t k = 0; k < operands_; ++k) FUSIONOPT_RETURN_IF_ERROR(CheckQuantizedOperand(*context.input(3 * k), op_));
    FUSIONOPT_ASSIGN_OR_RETURN(const ew::Program* program, programs_.Get(dtypes, registers, expr_, op_));
    FUSIONOPT_ASSIGN_OR_RETURN(std::vector<int64_t> dims, ew::BroadcastDims(present));
    RtTensor& y = context.Output(0, context.input(0)->dtype(), dims);
    return ew::Evaluate(*program, present, {&y});
  }

 private:
  std::string op_;
  size_t operands_ = 1;
  ExprBuilder expr_;
  ExprPrograms programs_;
};

// `x` dequantized to float (`quantize` false) or quantized to y's type, with one scale and zero
// point (the zero point may be omitted) for the whole tensor.
Status Convert(bool quantize, const RtTensor& x, const RtTensor& scale, const RtTensor* zero, ExprPrograms& programs,
               RtTensor& y) {
  std::vector<const RtTensor*> inputs = {&x, &scale};
  std::vector<DataType> dtypes = {x.dtype(), scale.dtype()};
  if (zero != nullptr) {
    inputs.push_back(zero);
    dtypes.push_back(zero->dtype());
  }
  const DataType type = y.dtype();
  const ExprBuilder expr = quantize ? QuantizeExpr(type, IntegerRange(type), DataType::kFloat) : DequantizeExpr(type);
  FUSIONOPT_ASSIGN_OR_RETURN(const ew::Program* program, programs.Get(dtypes, {0, 1, zero != nullptr ? 2 : -1}, expr,
                                                                      quantize ? "QuantizeLinear" : "DequantizeLinear"));
  return ew::Evaluate(*program, inputs, {&y});
}

// QLinearSoftmax and QLinearAveragePool (X, X_scale, X_zero_point, Y_scale, Y_zero_point): the
// float op's own kernel between a dequantization and a quantization.
class QLinearWrappedKernel : public Kernel {
 public:
  Status Init(const KernelInfo& info) {
    op_ = info.node.op_type();
    if (info.node.GetInt("channels_last", 0) != 0) {
      return info.Error("channels_last (onnxruntime's NHWC form) is not supported by the CPU runtime");
    }
    const bool softmax = op_ == "QLinearSoftmax";
    const std::string float_op = softmax ? "Softmax" : "AveragePool";
    // Softmax reads its axis as the opset the model's Softmax had; AveragePool-19 reads every
    // attribute QLinearAveragePool has.
    const int64_t opset = softmax ? info.node.GetInt("opset", 13) : 19;
    Value* x = graph_.CreateValue("x");
    Value* y = graph_.CreateValue("y");
    Node* node = graph_.CreateNode(float_op, "", {x}, {y}, info.node.name());
    for (const Attribute& attribute : info.node.attributes()) {
      if (attribute.name != "opset" && attribute.name != "channels_last") node->SetAttribute(attribute.CopyWithoutGraphs());
    }
    const KernelFactory* factory = KernelRegistry::BuiltIn().Find("", float_op, opset);
    if (factory == nullptr) return info.Error(float_op + " at opset " + std::to_string(opset) + " has no kernel");
    FUSIONOPT_ASSIGN_OR_RETURN(float_kernel_, (*factory)(KernelInfo{*node, opset, {}}));
    return Status::Ok();
  }

  Status Compute(KernelContext& context) override {
    for (size_t index : {0, 1, 3}) {
      if (!context.has_input(index)) return InvalidModel(op_ + " needs input " + std::to_string(index));
    }
    const RtTensor& x = *context.input(0);
    FUSIONOPT_RETURN_IF_ERROR(CheckQuantizedOperand(x, op_));
    const RtTensor* x_zero = context.has_input(2) ? context.input(2) : nullptr;
    const RtTensor* y_zero = context.has_input(4) ? context.input(4) : nullptr;
    RtTensor x_float = context.allocator->Allocate(DataType::kFloat, x.dims());
    FUSIONOPT_RETURN_IF_ERROR(Convert(false, x, *context.input(1), x_zero, programs_, x_float));
    KernelContext inner;
    inner.inputs = {&x_float};
    inner.outputs.resize(1);
    inner.allocator = context.allocator;
    FUSIONOPT_RETURN_IF_ERROR(float_kernel_->Compute(inner));
    const RtTensor y_float = inner.outputs[0];
    RtTensor& y = context.Output(0, y_zero != nullptr ? y_zero->dtype() : x.dtype(), y_float.dims());
    return Convert(true, y_float, *context.input(3), y_zero, programs_, y);
  }

 private:
  std::string op_;
  Graph graph_;  // the float op's node, which its kernel reads
  std::unique_ptr<Kernel> float_kernel_;
  ExprPrograms programs_;
};

// QLinearGlobalAveragePool (X, x_scale, x_zero_point, y_scale, y_zero_point): per (n, c), the
// integer sum of x - x_zero over the spatial axes, times x_scale / (y_scale · count), rounded,
// plus y_zero. channels_last reads (N, spatial..., C).
class QLinearGlobalAveragePoolKernel : public Kernel {
 public:
  Status Init(const KernelInfo& info) {
    channels_last_ = info.node.GetInt("channels_last", 0) != 0;
    return Status::Ok();
  }

  Status Compute(KernelContext& context) override {
    for (size_t index : {0, 1, 3}) {
      if (!context.has_input(index)) return InvalidModel("QLinearGlobalAveragePool needs input " + std::to_string(index));
    }
    const RtTensor& x = *context.input(0);
    FUSIONOPT_RETURN_IF_ERROR(CheckQuantizedOperand(x, "QLinearGlobalAveragePool"));
    if (x.rank() < 3) return InvalidModel("QLinearGlobalAveragePool needs rank >= 3, got " + DimsToString(x.dims()));
    FUSIONOPT_ASSIGN_OR_RETURN(std::vector<float> x_scale, ScaleValues(*context.input(1), "x_scale"));
    FUSIONOPT_ASSIGN_OR_RETURN(std::vector<float> y_scale, ScaleValues(*context.input(3), "y_scale"));
    FUSIONOPT_ASSIGN_OR_RETURN(std::vector<int32_t> x_zero, ZeroPointValues(context.input(2), "x_zero_point"));
    FUSIONOPT_ASSIGN_OR_RETURN(std::vector<int32_t> y_zero, ZeroPointValues(context.input(4), "y_zero_point"));
    const int64_t batch = x.dim(0);
    const int64_t channels = channels_last_ ? x.dim(x.rank() - 1) : x.dim(1);
    const int64_t spatial = x.NumElements() / std::max<int64_t>(1, batch * channels);
    std::vector<int64_t> dims(x.rank(), 1);
    dims[0] = batch;
    dims[channels_last_ ? x.rank() - 1 : 1] = channels;
    RtTensor& y = context.Output(0, x.dtype(), dims);
    const float multiplier = x_scale[0] / (y_scale[0] * static_cast<float>(spatial));
    const QuantRange range = *IntegerRange(x.dtype());
    const bool is_signed = x.dtype() == DataType::kInt8;
    const uint8_t* values = x.data<uint8_t>();
    uint8_t* out = y.data<uint8_t>();
#pragma omp parallel for if (x.NumElements() > kParallelWork)
    for (int64_t nc = 0; nc < batch * channels; ++nc) {
      const int64_t n = nc / channels, c = nc % channels;
      int64_t sum = 0;
      for (int64_t s = 0; s < spatial; ++s) {
        const int64_t at = channels_last_ ? (n * spatial + s) * channels + c : nc * spatial + s;
        sum += is_signed ? static_cast<int8_t>(values[at]) : values[at];
      }
      sum -= static_cast<int64_t>(x_zero[0]) * spatial;
      const float q = std::nearbyint(static_cast<float>(sum) * multiplier) + static_cast<float>(y_zero[0]);
      const float clamped = std::clamp(q, static_cast<float>(range.lo), static_cast<float>(range.hi));
      out[nc] = is_signed ? static_cast<uint8_t>(static_cast<int8_t>(clamped)) : static_cast<uint8_t>(clamped);
    }
    return Status::Ok();
  }

 private:
  bool channels_last_ = false;
};

// QLinearConcat (Y_scale, Y_zero_point, then X, X_scale, X_zero_point per input).
class QLinearConcatKernel : public Kernel {
 public:
  Status Init(const KernelInfo& info) {
    axis_ = info.node.GetInt("axis", 0);
    return Status::Ok();
  }

  Status Compute(KernelContext& context) override {
    if (context.num_inputs() < 5 || (context.num_inputs() - 2) % 3 != 0 || !context.has_input(0)) {
      return InvalidModel("QLinearConcat takes Y_scale, Y_zero_point and (X, X_scale, X_zero_point) per input");
    }
    const RtTensor& y_scale = *context.input(0);
    const RtTensor* y_zero = context.has_input(1) ? context.input(1) : nullptr;
    const size_t count = (context.num_inputs() - 2) / 3;
    const RtTensor& first = *context.input(2);
    FUSIONOPT_RETURN_IF_ERROR(CheckQuantizedOperand(first, "QLinearConcat"));
    std::optional<int64_t> axis = NormalizeAxis(axis_, static_cast<int64_t>(first.rank()));
    if (!axis) return InvalidModel("QLinearConcat axis " + std::to_string(axis_) + " is out of range");
    std::vector<int64_t> dims = first.dims();
    dims[static_cast<size_t>(*axis)] = 0;
    std::vector<RtTensor> parts;
    for (size_t k = 0; k < count; ++k) {
      const RtTensor* x = context.input(2 + 3 * k);
      if (x == nullptr || !context.has_input(3 + 3 * k)) return InvalidModel("QLinearConcat input " + std::to_string(k) + " is missing");
      FUSIONOPT_RETURN_IF_ERROR(CheckQuantizedOperand(*x, "QLinearConcat"));
      if (x->rank() != first.rank() || x->dtype() != first.dtype()) {
        return InvalidModel("QLinearConcat inputs differ in rank or type: " + DescribeTensor(first) + " and " + DescribeTensor(*x));
      }
      for (size_t d = 0; d < x->rank(); ++d) {
        if (static_cast<int64_t>(d) != *axis && x->dim(d) != first.dim(d)) {
          return InvalidModel("QLinearConcat inputs differ off the axis: " + DimsToString(first.dims()) + " and " +
                              DimsToString(x->dims()));
        }
      }
      dims[static_cast<size_t>(*axis)] += x->dim(static_cast<size_t>(*axis));
      FUSIONOPT_ASSIGN_OR_RETURN(RtTensor part, Requantized(*x, *context.input(3 + 3 * k),
                                                            context.has_input(4 + 3 * k) ? context.input(4 + 3 * k) : nullptr,
                                                            y_scale, y_zero, *context.allocator));
      parts.push_back(std::move(part));
    }
    RtTensor& y = context.Output(0, first.dtype(), dims);
    const int64_t outer = data_movement::Product(dims, 0, static_cast<size_t>(*axis));
    const int64_t inner = data_movement::Product(dims, static_cast<size_t>(*axis) + 1);
    const int64_t row = dims[static_cast<size_t>(*axis)] * inner;
    int64_t offset = 0;
    for (const RtTensor& part : parts) {
      const int64_t width = part.dim(static_cast<size_t>(*axis)) * inner;
      for (int64_t o = 0; o < outer; ++o) {
        std::memcpy(y.raw() + o * row + offset, part.raw() + o * width, static_cast<size_t>(width));
      }
      offset += width;
    }
    return Status::Ok();
  }

 private:

  // x in the output's quantization: x itself where the parameters are the same.
  Result<RtTensor> Requantized(const RtTensor& x, const RtTensor& x_scale, const RtTensor* x_zero,
                               const RtTensor& y_scale, const RtTensor* y_zero, Allocator& allocator) {
    FUSIONOPT_ASSIGN_OR_RETURN(std::vector<float> xs, ScaleValues(x_scale, "X_scale"));
    FUSIONOPT_ASSIGN_OR_RETURN(std::vector<float> ys, ScaleValues(y_scale, "Y_scale"));
    FUSIONOPT_ASSIGN_OR_RETURN(std::vector<int32_t> xz, ZeroPointValues(x_zero, "X_zero_point"));
    FUSIONOPT_ASSIGN_OR_RETURN(std::vector<int32_t> yz, ZeroPointValues(y_zero, "Y_zero_point"));
    if (xs == ys && xz == yz) return x;
    RtTensor x_float = allocator.Allocate(DataType::kFloat, x.dims());
    FUSIONOPT_RETURN_IF_ERROR(Convert(false, x, x_scale, x_zero, programs_, x_float));
    RtTensor out = allocator.Allocate(x.dtype(), x.dims());
    FUSIONOPT_RETURN_IF_ERROR(Convert(true, x_float, y_scale, y_zero, programs_, out));
    return out;
  }

  int64_t axis_ = 0;
  ExprPrograms programs_;
};

}  // namespace

void RegisterQLinearKernels(KernelRegistry& registry) {
  const std::string microsoft = "com.microsoft";
  registry.Register(microsoft, std::vector<std::string>{"QLinearAdd", "QLinearMul", "QLinearSigmoid", "QLinearLeakyRelu"},
                    1, kAnyOpset, Make<QLinearElementwiseKernel>());
  registry.Register(microsoft, std::vector<std::string>{"QLinearSoftmax", "QLinearAveragePool"}, 1, kAnyOpset,
                    Make<QLinearWrappedKernel>());
  registry.Register(microsoft, "QLinearGlobalAveragePool", 1, kAnyOpset, Make<QLinearGlobalAveragePoolKernel>());
  registry.Register(microsoft, "QLinearConcat", 1, kAnyOpset, Make<QLinearConcatKernel>());
}

}  // namespace fusionopt::cpu
